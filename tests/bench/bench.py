#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""tensorfs benchmark suite: every case against its baselines, in one invocation.

    make bench                                   # = TENSORFS_BIN=... /usr/bin/python3 tests/bench/bench.py
    /usr/bin/python3 tests/bench/bench.py --quick          # smoke run (~10 s)
    /usr/bin/python3 tests/bench/bench.py --cases 1,5 --size-mb 1024

It builds the data it needs (an image-like uint8 column, zstd-compressible about 2.5x) in a work
directory under /tmp, imports it into a lake, then runs the selected cases:

  1  cold sequential scan through the mount (read() and np.load mmap) vs. `zstd -d` of the same
     chunk payloads on the same cores (the decompression limit) vs. a local .npy read cold
  2  warm re-read through the mount vs. a local .npy in the page cache
  3  random rows (20,000 random indices) through the mount vs. a local .npy, cold and warm;
     each cold run's disk reads and bytes a row (/proc/diskstats) beside its rate, and the
     mount's daemon CPU a row (user and system): where a cold row's time goes
  4  time to first batch: launching `tensorfs mount` -> first 64 rows in a numpy array
  5  scanning a column 4x larger than cache_mem: peak daemon RSS vs. the budget
  6  a plain PyTorch DataLoader (map-style, shuffle) over the mount vs. over a local .npy
  7  a cold shuffled view read front to back vs. random mmap reads of a local .npy
  8  a cold shuffled view epoch vs. a PyTorch DataLoader over the same images as JPEG files
  9  images: the import's decode rate vs PIL, and a training read vs torchvision's ImageFolder
 10  case 3 with cache_mem half the column: every miss decodes a whole chunk for one row

It prints a table of absolute figures and ratios, writes a JSON file and a PNG chart (default
build/bench/bench-<timestamp>.{json,png}). Targets are informational: the exit status is 0 when
every case ran, whatever the figures; 1 when a case crashed; 2 on bad arguments.

Units: MB/s = 10^6 bytes per second; sizes in MiB = 2^20 bytes. A ratio is always oriented so that
> 1 means tensorfs does better than that baseline (faster, or less memory / less time).

Run as root to drop the kernel page cache (`echo 3 > /proc/sys/vm/drop_caches`); otherwise cold
runs evict the files they use with posix_fadvise(POSIX_FADV_DONTNEED), which is recorded in the
output ("cold_method"). Every mount is started in the foreground as a child process and always
unmounted (and its daemon killed if it does not exit) before this script exits.
"""

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchkit import (Cache, DEFINITIONS, draw_chart, is_mounted, log, MiB, Mount, on_signal,
                      print_table, REPO_ROOT, Row, stop_all_mounts, ZSTD)  # noqa: E402
from benchcases import (build_data, CASES, spot_check)  # noqa: E402


# --------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------

class Ctx:
    def __init__(self, args):
        self.args = args
        self.bin = os.path.abspath(os.environ.get("TENSORFS_BIN") or str(REPO_ROOT / "tensorfs"))
        self.work = Path(args.work).resolve()
        self.lake = self.work / "lake"
        self.lake_url = "file://" + str(self.lake)
        self.npy = self.work / "local.npy"
        self.zst_dir = self.work / "zst"
        self.mnt = self.work / "mnt"
        self.logs = self.work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.cache = Cache([self.npy, self.lake, self.zst_dir])
        self.rows = []
        self.cases = {}
        self.errors = []
        self.elapsed = 0.0
        self.problems = []
        self.data = {}
        self.env = {}

    def mount_opts(self, cache_mem=None):
        opts = [f"cache_mem={cache_mem or self.args.cache_mem}"]
        if self.args.mount_opts:
            opts += [o for o in self.args.mount_opts.split(",") if o]
        return opts

    def mount(self, cache_mem=None):
        return Mount(self, self.mount_opts(cache_mem))

    def add(self, *a, **kw):
        r = Row(*a, **kw)
        self.rows.append(r)
        return r


def environment(ctx):
    env = {"python": sys.version.split()[0], "numpy": np.__version__,
           "platform": platform.platform(), "kernel": platform.release(),
           "cpus": os.cpu_count(), "tensorfs_bin": ctx.bin}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu"] = line.split(":", 1)[1].strip()
                    break
    with contextlib.suppress(OSError):
        env["mem_total_mib"] = proc_meminfo("MemTotal") / MiB
    with contextlib.suppress(OSError):
        st = os.stat(ctx.bin)
        env["bin_mtime"] = datetime.datetime.fromtimestamp(st.st_mtime).isoformat()
        h = hashlib.sha256()
        with open(ctx.bin, "rb") as f:
            h.update(f.read())
        env["bin_sha256"] = h.hexdigest()
    with contextlib.suppress(Exception):
        env["git_head"] = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
                                         capture_output=True, text=True).stdout.strip()
        st = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain"],
                            capture_output=True, text=True).stdout
        env["git_dirty_files"] = [l[3:] for l in st.splitlines()][:50]
    with contextlib.suppress(Exception):
        env["zstd"] = subprocess.run([ZSTD, "--version"], capture_output=True,
                                     text=True).stdout.strip()
    with contextlib.suppress(Exception):
        env["tensorfs_version"] = subprocess.run([ctx.bin, "version"], capture_output=True,
                                                 text=True).stdout.strip()
    return env


def proc_meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(
        description="tensorfs benchmark suite (see the module docstring for the cases)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cases", default="1,2,3,4,5,6,7,8,9,10",
                   help="comma-separated case numbers")
    p.add_argument("--quick", action="store_true",
                   help="small sizes for a smoke run (~10 s) (explicit size flags still win)")
    p.add_argument("--size-mb", type=float, default=None,
                   help="column size in MiB for the scan cases (default 512; quick 128)")
    p.add_argument("--row-shape", default="64,64,3",
                   help="uint8 row shape H,W,C (64,64,3 = 12 KiB rows)")
    p.add_argument("--chunk-size", default="4M", help="tensorfs import --chunk-size")
    p.add_argument("--codec", default="zstd", choices=("zstd", "raw"))
    p.add_argument("--level", type=int, default=None, help="zstd level (default: tensorfs's)")
    p.add_argument("--frame-size", default=None,
                   help="tensorfs import --frame-size (default: tensorfs's; 0: a frame a chunk)")
    p.add_argument("--cache-mem", default="512M", help="cache_mem for every mount but case 5's")
    p.add_argument("--mount-opts", default="",
                   help="extra comma-separated -o options for every mount (e.g. "
                        "prefetch_threads=2); unknown options make the mount fail")
    p.add_argument("--reps", type=int, default=None, help="repeats of warm runs (median; "
                   "default 7, quick 3)")
    p.add_argument("--cold-reps", type=int, default=None,
                   help="repeats of cold runs (median; default 3, quick 1)")
    p.add_argument("--ttfb-reps", type=int, default=None, help="time-to-first-batch repeats "
                   "(median; default 5, quick 3)")
    p.add_argument("--random-rows", type=int, default=None,
                   help="random indices for case 3 (default 20000; quick 5000)")
    p.add_argument("--dl-rows", type=int, default=None,
                   help="rows per DataLoader epoch (default 20000; quick 5000)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--image-count", type=int, default=None,
                   help="JPEG files for case 9 (default 2000; quick 400)")
    p.add_argument("--workers", default="0,2", help="DataLoader num_workers values")
    p.add_argument("--read-size", default="1M", help="read() buffer for sequential scans")
    p.add_argument("--mmap-block", default="8M", help="copy block for mmap scans")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="parallel zstd -d processes for the decompression limit")
    p.add_argument("--rss-factor", type=float, default=4.0,
                   help="case 5: column size / cache_mem")
    p.add_argument("--rss-slack-mib", type=int, default=64,
                   help="case 5: allowed RSS above cache_mem")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--work", default=None,
                   help="work directory (default: a new one under /tmp). With --keep, a later "
                        "run with the same --work and data flags reuses the data")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--out", default=None,
                   help="JSON output path (default build/bench/bench-<timestamp>.json); the PNG "
                        "goes next to it")
    a = p.parse_args(argv)

    def size(s):
        s = str(s).strip().upper()
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
        if s and s[-1] in mult:
            return int(float(s[:-1]) * mult[s[-1]])
        return int(s)

    q = a.quick
    a.size_mb = a.size_mb if a.size_mb is not None else (128 if q else 512)
    a.reps = a.reps or (3 if q else 7)
    a.cold_reps = a.cold_reps or (1 if q else 3)
    a.ttfb_reps = a.ttfb_reps or (3 if q else 5)
    a.random_rows = a.random_rows or (5000 if q else 20000)
    a.dl_rows = a.dl_rows or (5000 if q else 20000)
    a.image_count = a.image_count or (400 if q else 2000)
    try:
        a.cases = sorted({int(c) for c in a.cases.split(",") if c.strip()})
        a.row_shape = [int(x) for x in a.row_shape.split(",")]
        a.workers = [int(x) for x in a.workers.split(",") if x.strip()]
        a.read_size = size(a.read_size)
        a.mmap_block = size(a.mmap_block)
    except ValueError as e:
        p.error(str(e))
    bad = [c for c in a.cases if c not in CASES]
    if bad:
        p.error(f"unknown case(s) {bad}; known: {sorted(CASES)}")
    if len(a.row_shape) != 3 or min(a.row_shape) < 1:
        p.error("--row-shape wants H,W,C")
    return a


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else REPO_ROOT / "build" / "bench" / f"bench-{stamp}.json"
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)

    bin_path = os.path.abspath(os.environ.get("TENSORFS_BIN") or str(REPO_ROOT / "tensorfs"))
    if not (os.path.isfile(bin_path) and os.access(bin_path, os.X_OK)):
        print(f"bench: tensorfs binary not found or not executable: {bin_path} (run `make`, or "
              f"set TENSORFS_BIN to an absolute path)", file=sys.stderr)
        return 1
    made_work = args.work is None
    if made_work:
        args.work = tempfile.mkdtemp(prefix="tensorfs-bench-", dir="/tmp")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    ctx = None
    try:
        ctx = Ctx(args)
        crashed = measure(ctx)
        report(ctx, out, stamp)
        return 1 if crashed else 0
    finally:
        stop_all_mounts()
        cleanup(args, ctx, made_work)


def measure(ctx):
    """Build the data, run the selected cases. Returns True when something crashed."""
    args = ctx.args
    ctx.t_start = time.perf_counter()
    ctx.env = environment(ctx)
    crashed = False
    try:
        ctx.env["cold_method"] = ctx.cache.probe()
        log(f"tensorfs {ctx.bin}; work dir {ctx.work}; cases {args.cases}; "
            f"cold = {ctx.env['cold_method']}")
        build_data(ctx)
        with ctx.mount() as m:  # one check that the mount serves the right bytes
            spot_check(ctx, m)
            ctx.env["stats_file"] = m.stats() is not None
        for c in args.cases:
            title, fn = CASES[c]
            log(f"case {c}: {title}")
            res = {"title": title}
            ctx.cases[c] = res
            t0 = time.perf_counter()
            try:
                fn(ctx, res)
            except KeyboardInterrupt:
                raise
            except Exception as e:  # record, keep going with the other cases
                crashed = True
                res["error"] = f"{type(e).__name__}: {e}"
                ctx.errors.append({"case": c, "error": res["error"],
                                   "traceback": traceback.format_exc()})
                log(f"  case {c} FAILED: {type(e).__name__}: {e}")
            finally:
                stop_all_mounts()
                res["seconds"] = time.perf_counter() - t0
    except KeyboardInterrupt as e:
        crashed = True
        ctx.errors.append({"case": None, "error": f"interrupted ({e})"})
        log("interrupted")
    except Exception as e:
        crashed = True
        ctx.errors.append({"case": None, "error": f"{type(e).__name__}: {e}",
                           "traceback": traceback.format_exc()})
        log(f"FAILED: {type(e).__name__}: {e}")
    finally:
        stop_all_mounts()
    ctx.elapsed = time.perf_counter() - ctx.t_start
    return crashed


def report(ctx, out, stamp):
    """Table on stdout, JSON and PNG files."""
    args = ctx.args
    png = out.with_suffix(".png")
    print()
    print(f"tensorfs benchmark: {ctx.data.get('data_mib', 0):.0f} MiB uint8 column, rows "
          f"{tuple(args.row_shape)}, {ctx.data.get('chunk_objects', '?')} chunks of "
          f"{args.chunk_size}, {args.codec} ratio {ctx.data.get('compression_ratio') or 0:.2f}x; "
          f"cache_mem={args.cache_mem}{',' + args.mount_opts if args.mount_opts else ''}; "
          f"{os.cpu_count()} CPUs; cold = {ctx.env.get('cold_method')}; "
          f"run time {ctx.elapsed:.0f} s")
    print_table(ctx.rows)
    for e in ctx.errors:
        print(f"ERROR in case {e['case']}: {e['error']}")
    for pr in ctx.problems:
        print(f"daemon problem ({pr['mount_log']}): {'; '.join(pr['problems'])}")
    result = {
        "tool": "tensorfs tests/bench/bench.py", "format": 1,
        "started": stamp, "duration_s": ctx.elapsed, "args": vars(args), "env": ctx.env,
        "definitions": DEFINITIONS, "data": ctx.data,
        "cases": {str(k): v for k, v in ctx.cases.items()},
        "table": [r.as_dict() for r in ctx.rows], "errors": ctx.errors,
        "daemon_problems": ctx.problems,
    }
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    os.replace(tmp, out)
    try:
        if draw_chart(ctx.rows, png, f"tensorfs bench {stamp}: "
                      f"{ctx.data.get('data_mib', 0):.0f} MiB, {os.cpu_count()} CPUs, "
                      f"cache_mem={args.cache_mem}"
                      f"{',' + args.mount_opts if args.mount_opts else ''}"):
            print(f"chart: {png}")
    except Exception as e:  # a chart problem must not lose the results
        print(f"chart not drawn: {type(e).__name__}: {e}")
    print(f"results: {out}")


def cleanup(args, ctx, made_work):
    work = Path(args.work)
    if args.keep:
        print(f"work dir kept: {work}")
        return
    if is_mounted(work / "mnt"):
        print(f"work dir NOT removed (still mounted): {work}")
        return
    if made_work:
        shutil.rmtree(work, ignore_errors=True)
        return
    for name in ("lake", "zst", "local.npy", "mnt", "logs", "meta.json"):
        p = work / name
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                p.unlink()


if __name__ == "__main__":
    sys.exit(main())
