#!/bin/sh
# SPDX-License-Identifier: MIT
# deps.sh: install the Debian 12 packages tensorfs needs, the one list of them.
#
#   packaging/deps.sh [--list | --missing | --check] [GROUP ...]     (default group: build)
#
# Groups (each includes the ones before it where it says so):
#   build   compile tensorfs and run `make demo`
#   test    build + what `make test` uses (unit, FUSE integration, S3 server, package checks);
#           also installs the S3-protocol test server from npm into tests/s3/node_modules
#   bench   build + the baselines the benchmarks run against (s3fs-fuse, PIL, ...)
#   fuzz    build + clang with libFuzzer (`make fuzz`)
#   all     every group
#
# Packages already installed (dpkg-query) cost nothing: apt-get runs only for what is missing,
# as root directly or through sudo otherwise. --list prints the packages of the groups, one a
# line; --missing prints those not installed and the command that would install them; --check
# exits 1 when any is missing. Only sh, dpkg and apt are assumed.
set -eu

BUILD_PKGS="build-essential pkg-config libfuse3-dev fuse3 libzstd-dev libxxhash-dev libssl-dev
	libcurl4-openssl-dev libinih-dev libjpeg62-turbo-dev libpng-dev libjansson-dev libarchive-dev
	libsqlite3-dev libopenblas-dev libfaiss-dev libavformat-dev libavcodec-dev libswscale-dev
	libswresample-dev libavutil-dev
	libncurses-dev python3 python3-numpy ca-certificates attr"
TEST_PKGS="libcmocka-dev python3-pytest python3-torch python3-torchvision python3-pil zstd
	python3-sentencepiece ffmpeg
	python3-botocore python3-dask python3-distributed python3-pandas nginx openssl curl valgrind
	nodejs npm tmux man-db groff-base dpkg-dev debhelper fakeroot lintian util-linux systemd"
BENCH_PKGS="s3fs python3-pil python3-matplotlib python3-torchvision iproute2 curl zstd git
	python3-faiss python3-pandas python3-av ffmpeg"
FUZZ_PKGS="clang libclang-rt-14-dev"

here=$(cd "$(dirname "$0")/.." && pwd)
mode=install
groups=

for a in "$@"; do
	case $a in
	--list) mode=list ;;
	--missing | --dry-run) mode=missing ;;
	--check) mode=check ;;
	-h | --help)
		sed -n '3,18p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	build | test | bench | fuzz | all) groups="$groups $a" ;;
	*)
		echo "deps.sh: unknown argument '$a' (groups: build test bench fuzz all)" >&2
		exit 2
		;;
	esac
done
[ -n "$groups" ] || groups=build

pkgs=$BUILD_PKGS
npm_server=
for g in $groups; do
	case $g in
	test) pkgs="$pkgs $TEST_PKGS" npm_server=1 ;;
	bench) pkgs="$pkgs $BENCH_PKGS" ;;
	fuzz) pkgs="$pkgs $FUZZ_PKGS" ;;
	all) pkgs="$pkgs $TEST_PKGS $BENCH_PKGS $FUZZ_PKGS" npm_server=1 ;;
	esac
done
pkgs=$(printf '%s\n' $pkgs | awk '!seen[$0]++')

if [ $mode = list ]; then
	printf '%s\n' $pkgs
	exit 0
fi

# A package counts as present when dpkg says it is installed. nodejs and npm are the exception:
# NodeSource's nodejs bundles npm and conflicts with Debian's, so a working command is enough.
installed() {
	case $1 in
	nodejs) command -v node >/dev/null 2>&1 && return 0 ;;
	npm) command -v npm >/dev/null 2>&1 && return 0 ;;
	esac
	# Installed, or installed with triggers still to run (another apt at work right now).
	case $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) in
	installed | triggers-pending | triggers-awaited) return 0 ;;
	esac
	return 1
}

missing=
for p in $pkgs; do
	installed "$p" || missing="$missing $p"
done
# npm comes with NodeSource's nodejs: ask for Debian's only when no npm appears with nodejs.
case " $missing " in *" nodejs "*) missing=$(printf '%s\n' $missing | grep -vx npm | tr '\n' ' ') ;; esac
missing=$(echo $missing)

sudo=
if [ "$(id -u)" != 0 ]; then
	sudo=sudo
fi

if [ $mode = missing ] || [ $mode = check ]; then
	if [ -z "$missing" ]; then
		echo "deps.sh: every package of '$(echo $groups)' is installed"
	else
		echo "deps.sh: missing: $missing"
		echo "would run: ${sudo:+sudo }apt-get update && ${sudo:+sudo }apt-get install -y --no-install-recommends $missing"
	fi
	[ $mode = check ] && [ -n "$missing" ] && exit 1
	exit 0
fi

if [ -n "$missing" ]; then
	if [ -n "$sudo" ] && ! command -v sudo >/dev/null 2>&1; then
		echo "deps.sh: these packages are missing: $missing" >&2
		echo "deps.sh: installing them needs root, and there is no sudo: run this script as root," >&2
		echo "         or ask an administrator for: apt-get install $missing" >&2
		exit 1
	fi
	echo "deps.sh: installing $missing"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	# shellcheck disable=SC2086 # one word per package
	$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
	if [ -n "$(echo " $missing " | grep ' nodejs ')" ] && ! command -v npm >/dev/null 2>&1; then
		$sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
	fi
fi

# The S3-protocol server the remote-store tests run on loopback, pinned by the committed lock
# file, installed into the project (tests/s3/node_modules, ignored by git) when not already.
if [ -n "$npm_server" ]; then
	stamp=$here/tests/s3/node_modules/.package-lock.json
	if [ ! -f "$stamp" ] || [ "$here/tests/s3/package-lock.json" -nt "$stamp" ]; then
		echo "deps.sh: installing the S3 test server (npm ci in tests/s3)"
		(cd "$here/tests/s3" && npm ci --no-audit --no-fund --loglevel=error)
	fi
fi
