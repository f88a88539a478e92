#!/bin/bash
# SPDX-License-Identifier: MIT
# fresh-machine.sh: run the README's two commands on a fresh Debian 12, as a new user would:
# a minimal Debian 12 tree made by debootstrap (nothing of the build installed), this source tree
# copied in (what git tracks), then `packaging/deps.sh && make demo` and `make test` inside it.
#
#   sudo packaging/fresh-machine.sh [DIR]      (default DIR: /srv/tensorfs-fresh, made anew)
#
# Needs root, debootstrap and the Debian mirror. The tree gets /dev, /proc and /sys bound in
# (FUSE mounts need /dev/fuse) and this machine's extra CA certificates (a proxy's), nothing
# else. Transcripts: DIR.demo.log and DIR.test.log. Exit status: that of the first failure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/srv/tensorfs-fresh}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

[ "$(id -u)" = 0 ] || { echo "fresh-machine.sh: needs root (chroot, mounts)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-machine.sh: apt-get install debootstrap" >&2; exit 1; }

cleanup() {
	for d in sys proc dev/pts dev ""; do
		if mountpoint -q "$dir/$d"; then umount -l "$dir/$d"; fi
	done
	return 0
}
trap cleanup EXIT

cleanup
rm -rf "$dir"
echo "== debootstrap --variant=minbase bookworm $dir"
debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1
# The tree's root a mount point of its own, as a machine's / is (mount namespaces need it).
mount --bind "$dir" "$dir"
for d in dev dev/pts proc sys; do mount --bind "/$d" "$dir/$d"; done
cp /etc/resolv.conf "$dir/etc/"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	# Taken in when deps.sh installs ca-certificates (its update-ca-certificates reads them).
	mkdir -p "$dir/usr/local/share/ca-certificates"
	cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
fi
mkdir -p "$dir/root/tensorfs"
git -C "$top" archive HEAD | tar -x -C "$dir/root/tensorfs"

run() {
	chroot "$dir" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root TERM=dumb LANG=C.UTF-8 NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
		/bin/sh -c "cd /root/tensorfs && $1"
}
echo "== packaging/deps.sh && make demo (log: $dir.demo.log)"
if ! run 'packaging/deps.sh && make demo' >"$dir.demo.log" 2>&1; then
	tail -30 "$dir.demo.log"
	echo "== fresh machine: the first command failed" >&2
	exit 1
fi
tail -3 "$dir.demo.log"
echo "== make test (log: $dir.test.log)"
if ! run 'make test' >"$dir.test.log" 2>&1; then
	tail -30 "$dir.test.log"
	echo "== fresh machine: the second command failed" >&2
	exit 1
fi
grep -E '^[0-9]+ (passed|failed)|passed|failed' "$dir.test.log" | tail -5
echo "== fresh machine: both commands passed"
