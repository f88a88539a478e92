#!/bin/bash
# SPDX-License-Identifier: MIT
# mkdeb.sh: build tensorfs_VERSION_ARCH.deb with dpkg-buildpackage (debhelper), from a copy of
# the source tree with packaging/debian/ as its debian/. The version comes from VERSION, the
# Build-Depends from packaging/deps.sh's build group, the Depends from dpkg-shlibdeps. The .deb
# lands in the top directory; the build's log in build/deb/build.log.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
version=$(cat VERSION)
work=$top/build/deb
src=$work/tensorfs-$version

for tool in dpkg-buildpackage dh fakeroot; do
	command -v $tool >/dev/null 2>&1 || {
		echo "mkdeb.sh: $tool is missing: run packaging/deps.sh test" >&2
		exit 1
	}
done

rm -rf "$work"
mkdir -p "$src"
# The files of the tree that git tracks or would track (so also new, unignored ones).
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d "" f; do
		[ -e "$f" ] && printf '%s\0' "$f"
	done | tar --null -T - -cf - | tar -xf - -C "$src"
else
	tar --exclude=./build --exclude=./tensorfs --exclude='./tensorfs_*.deb' \
		--exclude=./tests/s3/node_modules -cf - . | tar -xf - -C "$src"
fi
cp -r packaging/debian "$src/debian"

# Build-Depends: the build group's packages, less what every build machine has.
deps=$(packaging/deps.sh --list build | grep -vxE 'build-essential|ca-certificates|attr|python3-numpy' |
	paste -sd, - | sed 's/,/, /g')
sed -e "s|@BUILD_DEPENDS@|$deps|" packaging/debian/control.in > "$src/debian/control"
rm -f "$src/debian/control.in"
# The changelog is made, not kept: the version lives in VERSION, the date is the last commit's.
when=$(git log -1 --format=%cD 2>/dev/null || date -R)
cat > "$src/debian/changelog" <<CHANGELOG
tensorfs ($version) unstable; urgency=medium

  * Release $version; see README.md for what it holds.

 -- tensorfs developers <tensorfs@example.org>  $when
CHANGELOG

# A package build is its own: nothing of a calling make (`make SANITIZE=1 test` passes its
# variables down through MAKEFLAGS) may reach the package's make.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES SANITIZE BUILD
echo "mkdeb.sh: building tensorfs $version in $src (log: $work/build.log)"
(cd "$src" && DEB_BUILD_OPTIONS="nocheck noddebs${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}" \
	dpkg-buildpackage -b -us -uc -j"$(nproc)" >"$work/build.log" 2>&1) || {
	tail -30 "$work/build.log" >&2
	echo "mkdeb.sh: dpkg-buildpackage failed (log: $work/build.log)" >&2
	exit 1
}
deb=$(ls "$work"/tensorfs_"$version"_*.deb)
cp "$deb" "$top/"
echo "mkdeb.sh: $(basename "$deb")"
