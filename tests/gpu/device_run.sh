#!/bin/bash
# SPDX-License-Identifier: MIT
# The GPU checks in one call, for a machine with a GPU that lacks the build's Debian libraries:
#
#   tests/gpu/device_run.sh carry        # here, after `make`: pack the binaries, the libraries
#                                        # they need and fusermount3 and zstd into .devpack/
#                                        # (list it in .git/info/exclude; about 31 MB, under the
#                                        # 64 MiB a call carries: the libraries alone are 94 MB)
#   tests/gpu/device_run.sh STEP...      # there (carrying .devpack): unpack, then each step
#
# Steps, in the order given, each under a time limit of its own:
#   unit      the staging unit tests (test_staging_cuda)
#   register  register_rate: registering a 4 GiB arena with the driver as staging does, its
#             pages committed first on up to 16 threads against untouched, and how long a
#             1 MiB copy made meanwhile waits for the driver (3 rounds alternating)
#   pytest    tests/gpu: CUDA batches against host ones, and the printed ratios with their
#             baselines (staging against pinned copy, cache_gpu, first batch)
#   cuda224   bench_staging on cuda:0, 150 KB rows (224x224x3), batches of 256
#   cuda224g  the same with -o cache_gpu=8G
#   cuda32    the same with 3 KiB rows (32x32x3)
#   host      bench_staging on the host backend, 150 KB rows: the batch split over the pool
#   import    bench_import: images, JSON Lines and WebDataset at 1, 2 and every thread
#   wds       bench_import: WebDataset alone at 1, 2 and every thread (import's last part,
#             which a call's time has cut off before)
#   e2e       bench_e2e: 6,000 JPEGs to cuda:0 batches, ImageFolder + DataLoader against
#             import + a Stager an epoch (cold, warm)
#   cases     bench.py cases 1 and 10 on 2 GiB: the cold scan against N `zstd -d` of cold
#             input, cold random rows against a local .npy
#   frames    the same on data imported with 12 KiB, 16 KiB and 32 KiB frames (the default is
#             64 KiB; 12 KiB is one of the bench's 12,288-byte rows a frame, where 16 KiB
#             splits most rows between two): what smaller frames give cold random rows, and
#             take from the cold scan, on a real disk (FRAMES="16K 32K" picks sizes)
#   raw       bench.py case 10 on 2 GiB written --codec raw: cold random rows from framed raw
#             chunks (a frame a row's read, no decode) against a local .npy, on a real disk
#
# Output goes under $OUT (default ./gpu-out), a file a step (at most 8 come back from a call).
# Limits (seconds) can be set: GPUT (pytest, 200), BT (each cuda bench, 60), HT (host, 60),
# IT (import and wds, 150), ET (e2e, 150), CT (cases and raw, 150; frames, each size). BUDGET
# (540) is the whole call's: a step gets what is left of it when that is less than its own
# limit, and steps with under 20 s left are skipped and named, so a call returns its output
# inside the device's 600 s a command. All of unit, pytest, cuda224, cuda224g, host and cases took 4.5
# minutes on an H200 with 16 cores; on 2026-11-28 there: unit 3 s, pytest 39 s, cuda32 29 s,
# e2e 52 s, import 140 s, cases 96 s, frames 207 s, host 30 s, cuda224 31 s, and the machine's
# start about 35 s. FFmpeg's libraries are not carried: the
# binary opens them only to import video or audio, which no step runs. e2e needs torchvision.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BIN=${TENSORFS_BIN:-build/rel/tensorfs}

if [ "${1:-}" = carry ]; then
	rm -rf .devpack .devlibs && mkdir -p .devpack .devlibs/bin
	# Every library but the C library's own (the device has those, newer).
	ldd "$BIN" build/rel/tests/test_staging_cuda "$(command -v zstd)" | awk '/=> \// {print $3}' |
		sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' |
		while read -r lib; do cp -L "$lib" .devlibs/; done
	cp -L "$(command -v fusermount3)" "$(command -v zstd)" .devlibs/bin/
	tar cJf .devpack/devlibs.txz .devlibs && rm -rf .devlibs
	tar cf .devpack/rel.tar "$BIN" build/rel/tests/test_staging_cuda build/rel/tests/register_rate
	du -sh .devpack
	exit 0
fi
if [ $# = 0 ]; then
	echo "usage: $0 carry | STEP... (unit register pytest cuda224 cuda224g cuda32 host import wds e2e cases frames raw)" >&2
	exit 2
fi

T0=$(date +%s)
o=${OUT:-gpu-out}
mkdir -p "$o"
# Python's tarfile: the device may lack xz.
python3 -c "import tarfile; tarfile.open('.devpack/devlibs.txz').extractall('.')" &&
	tar xf .devpack/rel.tar || exit 1
export LD_LIBRARY_PATH="$PWD/.devlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PWD/.devlibs/bin:$PATH" TENSORFS_BIN="$PWD/$BIN" PYTHONUNBUFFERED=1
ldd "$BIN" | grep "not found"
elapsed() { echo "[t+$(($(date +%s) - T0))s] $*"; }
END=$((T0 + ${BUDGET:-540}))
lim() { # a step's limit: its own ($1) or what is left of the call's budget, the smaller
	local left=$((END - $(date +%s)))
	echo $((left < $1 ? left : $1))
}

bench_cuda() { # row, cache_gpu, step
	echo "== bench_staging cuda:0 --row $1 ${2:+--cache-gpu $2}"
	timeout "$(lim "${BT:-60}")" python3 tests/bench/bench_staging.py --device cuda:0 --row "$1" \
		--size-mb 1024 --batch 256 --batches 200 ${2:+--cache-gpu "$2"} \
		--profile "$o/$3.prof" 2>&1 | tee "$o/$3.txt" | tail -14
	# Where a batch's time goes on the loader's side (torch tensors, events, the ioctl).
	[ -f "$o/$3.prof" ] && sed -n '1p;/ncalls/,+16p' "$o/$3.prof"
}

for step in "$@"; do
	if [ "$(lim 20)" -lt 20 ]; then
		echo "== $step skipped: under 20 s of BUDGET left"
		continue
	fi
	case $step in
	unit)
		nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$o/gpu.txt"
		timeout 60 build/rel/tests/test_staging_cuda >"$o/unit.txt" 2>&1
		echo "unit rc=$?"
		tail -4 "$o/unit.txt"
		;;
	register)
		timeout "$(lim 90)" build/rel/tests/register_rate 4 3 2>&1 | tee "$o/register.txt"
		;;
	pytest)
		timeout "$(lim "${GPUT:-200}")" python3 -m pytest -v -s -p no:cacheprovider tests/gpu \
			>"$o/test_gpu.txt" 2>&1
		echo "pytest rc=$?"
		grep -E "PASSED|FAILED|SKIP|ratio|per batch|first batch|passed|failed" "$o/test_gpu.txt"
		;;
	cuda224) bench_cuda 224x224x3 "" "$step" ;;
	cuda224g) bench_cuda 224x224x3 8G "$step" ;;
	cuda32) bench_cuda 32x32x3 "" "$step" ;;
	host)
		echo "$(nproc) CPUs"
		timeout "$(lim "${HT:-60}")" python3 tests/bench/bench_staging.py --device host --row 224x224x3 \
			--size-mb 1024 --batch 256 --batches 300 2>&1 | tee "$o/host.txt" | tail -10
		;;
	import)
		timeout "$(lim "${IT:-150}")" python3 tests/bench/bench_import.py --images 6000 \
			--rows 600000 --repeat 2 2>&1 | tee "$o/import.txt" | tail -30
		;;
	wds)
		timeout "$(lim "${IT:-150}")" python3 tests/bench/bench_import.py --images 6000 \
			--repeat 2 --kinds webdataset 2>&1 | tee "$o/wds.txt" | tail -8
		;;
	e2e)
		timeout "$(lim "${ET:-150}")" python3 tests/bench/bench_e2e.py --images 6000 2>&1 |
			tee "$o/e2e.txt" | tail -12
		;;
	cases)
		timeout "$(lim "${CT:-150}")" python3 tests/bench/bench.py --cases 1,10 --size-mb 2048 2>&1 |
			tee "$o/cases.txt" | tail -30
		;;
	frames)
		for f in ${FRAMES:-12K 16K 32K}; do
			echo "== --frame-size $f"
			timeout "$(lim "${CT:-150}")" python3 tests/bench/bench.py --cases 1,10 --size-mb 2048 \
				--frame-size "$f" 2>&1 | tee "$o/frames$f.txt" | grep -E "^(1|10) "
		done
		;;
	raw)
		timeout "$(lim "${CT:-150}")" python3 tests/bench/bench.py --cases 10 --size-mb 2048 \
			--codec raw 2>&1 | tee "$o/raw.txt" | grep -E "^10 |random"
		;;
	*) echo "unknown step $step" >&2 ;;
	esac
	elapsed "$step"
done
