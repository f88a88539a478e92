#!/bin/bash
# SPDX-License-Identifier: MIT
# The GPU checks in one call, for a machine with a GPU that lacks the build's Debian libraries:
#
#   tests/gpu/device_run.sh carry          # here: copy the libraries the binary needs, and
#                                          # fusermount3, into .devlibs/ (list it in .git/info/exclude)
#   tests/gpu/device_run.sh run [OUT]      # there: tests/gpu, then bench_staging on cuda:0 for
#                                          # 150 KB and 3 KiB rows, with and without cache_gpu
#
# "run" puts .devlibs on LD_LIBRARY_PATH and PATH, and writes its output under OUT (default
# $OUT, else ./gpu-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${TENSORFS_BIN:-build/rel/tensorfs}

case "${1:-}" in
carry)
	rm -rf .devlibs && mkdir -p .devlibs/bin
	# Every library but the C library's own (the device has those, newer).
	ldd "$BIN" build/rel/tests/test_staging_cuda | awk '/=> \// {print $3}' | sort -u |
		grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' |
		while read -r lib; do cp -L "$lib" .devlibs/; done
	cp -L "$(command -v fusermount3)" .devlibs/bin/
	du -sh .devlibs
	;;
run)
	out=${2:-${OUT:-gpu-out}}
	mkdir -p "$out"
	export LD_LIBRARY_PATH="$PWD/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export PATH="$PWD/.devlibs/bin:$PATH" TENSORFS_BIN="$PWD/$BIN"
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
	build/rel/tests/test_staging_cuda 2>&1 | tee "$out/unit.txt" | tail -3
	python3 -m pytest -v -s tests/gpu 2>&1 | tee "$out/test_gpu.txt" | tail -40
	for row in 224x224x3 32x32x3; do
		for cg in "" 8G; do
			echo "== bench_staging --row $row ${cg:+--cache-gpu $cg}"
			python3 tests/bench/bench_staging.py --device cuda:0 --row "$row" \
				--size-mb 1024 --batch 256 --batches 400 ${cg:+--cache-gpu $cg} \
				--json "$out/bench-$row-${cg:-nocache}.json" 2>&1 | tail -12
		done
	done 2>&1 | tee "$out/bench.txt"
	;;
*)
	echo "usage: $0 carry | run [OUT]" >&2
	exit 2
	;;
esac
