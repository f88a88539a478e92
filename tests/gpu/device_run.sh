#!/bin/bash
# SPDX-License-Identifier: MIT
# The GPU checks in one call, for a machine with a GPU that lacks the build's Debian libraries:
#
#   tests/gpu/device_run.sh carry          # here: copy the libraries the binary needs, and
#                                          # fusermount3, into .devlibs/ (list it in .git/info/exclude)
#   tests/gpu/device_run.sh run [OUT]      # there: tests/gpu, then bench_staging on cuda:0 for
#                                          # 150 KB and 3 KiB rows, with and without cache_gpu
#   tests/gpu/device_run.sh cores [OUT]    # there: the many-core benches (import at 1, 2 and
#                                          # every thread against PIL; the cold scan against N
#                                          # `zstd -d` of cold input; cold random rows; host
#                                          # staging of 150 KB rows)
#
# "run" and "cores" put .devlibs on LD_LIBRARY_PATH and PATH, and write their output under OUT
# (default $OUT, else ./gpu-out). FFmpeg's libraries are not carried: the binary opens them
# only to import video or audio, which neither runs.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${TENSORFS_BIN:-build/rel/tensorfs}

use_devlibs() {
	export LD_LIBRARY_PATH="$PWD/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	export PATH="$PWD/.devlibs/bin:$PATH" TENSORFS_BIN="$PWD/$BIN"
}

case "${1:-}" in
carry)
	rm -rf .devlibs && mkdir -p .devlibs/bin
	# Every library but the C library's own (the device has those, newer).
	ldd "$BIN" build/rel/tests/test_staging_cuda "$(command -v zstd)" | awk '/=> \// {print $3}' | sort -u |
		grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' |
		while read -r lib; do cp -L "$lib" .devlibs/; done
	cp -L "$(command -v fusermount3)" "$(command -v zstd)" .devlibs/bin/
	du -sh .devlibs
	;;
run)
	out=${2:-${OUT:-gpu-out}}
	mkdir -p "$out"
	use_devlibs
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
cores)
	out=${2:-${OUT:-gpu-out}}
	mkdir -p "$out"
	use_devlibs
	echo "$(nproc) CPUs" | tee "$out/cores.txt"
	if python3 -c "import PIL" 2>/dev/null; then
		timeout 300 python3 tests/bench/bench_import.py --images 6000 --rows 600000 \
			--repeat 3 2>&1 | tee "$out/import.txt"
	else
		echo "bench_import: no PIL on this machine" | tee "$out/import.txt"
	fi
	timeout 240 python3 tests/bench/bench.py --cases 1,10 --size-mb 2048 2>&1 |
		tee "$out/bench.txt" | tail -30
	# Host staging of 150 KB rows: batches split over the pool's threads.
	timeout 180 python3 tests/bench/bench_staging.py --device host --row 224x224x3 \
		--size-mb 1024 --batch 256 --batches 400 --json "$out/bench-host-224x224x3.json" 2>&1 |
		tee "$out/staging-host.txt" | tail -8
	cp build/bench/bench-*.json "$out/" 2>/dev/null
	;;
*)
	echo "usage: $0 carry | run [OUT] | cores [OUT]" >&2
	exit 2
	;;
esac
