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
  3  random rows (20,000 random indices) through the mount vs. a local .npy, cold and warm
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
import atexit
import contextlib
import datetime
import gc
import hashlib
import io
import json
import os
import platform
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np

MB = 1e6
MiB = 1 << 20
HEADER_SIZE = 4096  # data offset of every mounted .npy
REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "tests" / "integration"))
from mountinfo import is_mounted  # noqa: E402
FUSERMOUNT = shutil.which("fusermount3") or "/usr/bin/fusermount3"
ZSTD = shutil.which("zstd") or "/usr/bin/zstd"
DATASET = "bench"
COLUMN = "img"
GEN_VERSION = 1  # bump when the data generator changes (invalidates reused work dirs)

DEFINITIONS = {
    "cold": ("page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches, which also evicts the "
             "lake's chunk files and the local .npy) right before the timed run (case 4: before "
             "launching the daemon); for the mount also a freshly started daemon (empty chunk "
             "cache). The local file, the lake and the .zst files are on the same disk, so both "
             "sides read from disk equally."),
    "warm": ("the same data was read once just before (same mount, same daemon): the kernel page "
             "cache and the daemon's chunk cache hold it; local baseline: file in the page cache."),
    "decompression limit": ("`zstd -d -c` of the column's chunk payloads (the exact zstd frames "
                            "tensorfs stores) to /dev/null, one process per core, input .zst files "
                            "in the page cache; decompressed bytes per wall second."),
    "true limit": ("what a cold scan can reach: the smaller of `zstd -d` on every core reading "
                   "cold .zst input and the disk's cold read rate times the compression ratio; "
                   "case 1's target (0.7x) is judged against it."),
    "MB/s": "10^6 bytes per second",
    "MiB": "2^20 bytes",
    "ratio": "oriented so that > 1 means tensorfs does better than the baseline",
}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Cold caches
# --------------------------------------------------------------------------------------------

class Cache:
    """Drops the page cache: drop_caches when we may, else fadvise(DONTNEED) on known files."""

    def __init__(self, evict_paths):
        self.evict_paths = list(evict_paths)
        self.method = None

    def probe(self):
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            self.method = "drop_caches"
        except OSError as e:
            self.method = "fadvise"
            log(f"cannot write /proc/sys/vm/drop_caches ({e}); cold runs use "
                f"posix_fadvise(POSIX_FADV_DONTNEED) on the benchmark's own files instead")
        return self.method

    def drop(self):
        os.sync()
        if self.method == "drop_caches":
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
            return
        for p in self.evict_paths:
            p = Path(p)
            files = [p] if p.is_file() else [Path(d) / n for d, _, ns in os.walk(p) for n in ns]
            for fp in files:
                with contextlib.suppress(OSError):
                    fd = os.open(fp, os.O_RDONLY)
                    try:
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)


def warm_files(paths):
    buf = bytearray(4 * MiB)
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


# --------------------------------------------------------------------------------------------
# Mounts
# --------------------------------------------------------------------------------------------

_LIVE_MOUNTS = []


def proc_status(pid, key):
    """A /proc/PID/status field in bytes (kB fields), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class Mount:
    """`tensorfs mount LAKE MNT -f -o OPTS` as our child process; always stopped by stop()."""

    counter = 0

    def __init__(self, ctx, opts, timeout=15.0):
        Mount.counter += 1
        self.ctx = ctx
        self.path = ctx.mnt
        self.opts = list(opts)
        self.timeout = timeout
        self.log_path = ctx.logs / f"mount-{Mount.counter:03d}.log"
        self.proc = None
        self.t_launch = None
        self.t_up = None
        self.problems = []
        self.stopped = False
        self._logf = None

    @property
    def pid(self):
        return self.proc.pid

    def cmd(self):
        c = [self.ctx.bin, "mount", self.ctx.lake_url, str(self.path), "-f"]
        if self.opts:
            c += ["-o", ",".join(self.opts)]
        return c

    def launch(self):
        """Start the daemon (returns at once; wait_up() polls for the mount)."""
        self.path.mkdir(parents=True, exist_ok=True)
        if is_mounted(self.path):
            raise BenchError(f"{self.path} is already a mount point")
        self._logf = open(self.log_path, "wb")
        self.t_launch = time.perf_counter()
        self.proc = subprocess.Popen(self.cmd(), stdin=subprocess.DEVNULL, stdout=self._logf,
                                     stderr=subprocess.STDOUT)
        _LIVE_MOUNTS.append(self)
        return self

    def wait_up(self, poll=0.001):
        deadline = time.perf_counter() + self.timeout
        p = str(self.path)
        while True:
            if os.path.ismount(p):
                self.t_up = time.perf_counter()
                return self
            rc = self.proc.poll()
            if rc is not None:
                self.stop()
                raise BenchError(f"`{' '.join(self.cmd())}` exited with status {rc} before the "
                                 f"mount was up; its log:\n{self.log_tail()}")
            if time.perf_counter() > deadline:
                self.stop()
                raise BenchError(f"`{' '.join(self.cmd())}`: mount not up after "
                                 f"{self.timeout:.0f}s; its log:\n{self.log_tail()}")
            time.sleep(poll)

    def start(self):
        return self.launch().wait_up()

    def file(self, col=COLUMN):
        return self.path / DATASET / "main" / f"{col}.npy"

    def stats(self):
        """The daemon's counters from MNT/.tensorfs/stats (JSON), or None when absent."""
        p = self.path / ".tensorfs" / "stats"
        try:
            with open(p, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return {"unparsed": raw[:4000].decode("utf-8", "replace")}

    def log_tail(self, n=4000):
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self):
        """Unmount, reap the daemon (kill it if it does not exit). Idempotent."""
        if self.proc is None or self.stopped:
            return self.problems
        self.stopped = True
        gc.collect()  # stray memmaps keep the mount busy
        ok = False
        last = ""
        for _ in range(20):
            if not is_mounted(self.path):
                ok = True
                break
            p = subprocess.run([FUSERMOUNT, "-u", str(self.path)], capture_output=True,
                               text=True)
            if p.returncode == 0:
                ok = True
                break
            last = p.stderr.strip()
            time.sleep(0.2)
            gc.collect()
        if not ok:
            subprocess.run([FUSERMOUNT, "-uz", str(self.path)], capture_output=True)
            self.problems.append(f"fusermount3 -u kept failing ({last}); unmounted lazily")
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.problems.append("daemon did not exit within 10 s of the unmount; killed it")
            with contextlib.suppress(OSError):
                self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    self.proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
        rc = self.proc.returncode
        if rc not in (0, None):
            self.problems.append(f"daemon exited with status {rc}")
        if is_mounted(self.path):
            subprocess.run([FUSERMOUNT, "-uz", str(self.path)], capture_output=True)
            self.problems.append("still mounted after stop; lazily unmounted")
        if self._logf:
            self._logf.close()
        with contextlib.suppress(ValueError):
            _LIVE_MOUNTS.remove(self)
        if self.problems:
            self.ctx.problems.append({"mount_log": str(self.log_path), "problems": self.problems,
                                      "log_tail": self.log_tail(2000)})
        return self.problems

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def _stop_all_mounts():
    for m in list(_LIVE_MOUNTS):
        with contextlib.suppress(Exception):
            m.stop()


atexit.register(_stop_all_mounts)


def _on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------

def gen_rows(rng, n, shape):
    """n image-like uint8 rows of `shape` (H, W, C): a smooth background (flat along each image
    row) with a textured band (2-D gradient + 4 bits of noise) over 1/8..5/8 of the height.
    zstd (level 1-3) compresses it about 2.5x, roughly like real image tensors with backgrounds."""
    H, W, C = shape
    r = np.arange(H, dtype=np.int16)[None, :, None, None]
    cidx = np.arange(W, dtype=np.int16)[None, None, :, None]
    c = rng.integers(0, 256, size=(n, 1, 1, C)).astype(np.int16)
    gy = rng.integers(-3, 4, size=(n, 1, 1, C)).astype(np.int16)
    gx = rng.integers(-3, 4, size=(n, 1, 1, C)).astype(np.int16)
    img = np.broadcast_to((c + gy * r).astype(np.uint8), (n, H, W, C)).copy()
    h = rng.integers(max(1, H // 8), 5 * H // 8 + 1, size=n)
    top = rng.integers(0, H - h + 1)
    rows = np.arange(H)[None, :]
    band = (rows >= top[:, None]) & (rows < (top + h)[:, None])
    tex = (c + gy * r + gx * cidx).astype(np.uint8)
    tex += rng.integers(0, 16, size=(n, H, W, C), dtype=np.uint8)
    img[band] = tex[band]
    return img


def build_data(ctx):
    """Local .npy + lake dataset + extracted .zst chunk payloads (reused when meta matches)."""
    a = ctx.args
    shape = tuple(a.row_shape)
    row_bytes = int(np.prod(shape))
    rows = max(1, int(a.size_mb * MiB) // row_bytes)
    meta = {"gen": GEN_VERSION, "rows": rows, "row_shape": list(shape), "seed": a.seed,
            "chunk_size": a.chunk_size, "codec": a.codec, "level": a.level,
            "frame_size": a.frame_size, "bin_sha256": ctx.env.get("bin_sha256")}
    meta_path = ctx.work / "meta.json"
    if meta_path.exists() and ctx.npy.exists() and (ctx.lake / DATASET).is_dir():
        try:
            old = json.loads(meta_path.read_text())
        except ValueError:
            old = {}
        if {k: old.get(k) for k in meta if k != "bin_sha256"} == \
                {k: v for k, v in meta.items() if k != "bin_sha256"}:
            log(f"reusing the data in {ctx.work}")
            ctx.data = old["data"]
            return
    for p in (ctx.lake, ctx.zst_dir):
        shutil.rmtree(p, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        ctx.npy.unlink()

    total = rows * row_bytes
    log(f"generating {rows} rows of {shape} uint8 ({total / MiB:.0f} MiB) -> {ctx.npy}")
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    out = np.lib.format.open_memmap(ctx.npy, mode="w+", dtype=np.uint8, shape=(rows,) + shape)
    step = max(1, (16 * MiB) // row_bytes)
    for i in range(0, rows, step):
        j = min(rows, i + step)
        out[i:j] = gen_rows(rng, j - i, shape)
    out.flush()
    del out
    with open(ctx.npy, "rb") as f:
        os.fsync(f.fileno())
    t_gen = time.perf_counter() - t0

    log("importing into the lake")
    run_cli(ctx, ["create", f"{ctx.lake_url}/{DATASET}"])
    imp = ["import", f"{ctx.lake_url}/{DATASET}", f"{COLUMN}={ctx.npy}", "-m", "bench data",
           "--chunk-size", a.chunk_size, "--codec", a.codec]
    if a.level is not None:
        imp += ["--level", str(a.level)]
    if a.frame_size is not None:
        imp += ["--frame-size", a.frame_size]
    t0 = time.perf_counter()
    run_cli(ctx, imp, timeout=3600)
    t_import = time.perf_counter() - t0
    os.sync()

    # The chunk objects' payloads, as .zst files, for the decompression-limit baseline.
    ctx.zst_dir.mkdir(parents=True, exist_ok=True)
    n_zstd = n_raw = 0
    stored = raw_zstd = raw_total = 0
    for d in sorted((ctx.lake / DATASET / "objects").iterdir()):
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.name.startswith("."):
                continue
            blob = f.read_bytes()
            if len(blob) < 48 or blob[:4] != b"TFSO" or blob[6] != 1:
                continue
            if blob[7] == 2:  # framed: the zstd frames back to back (zstd -d takes that)
                framed = zstd_frames(blob)
                n_zstd += 1
                stored += len(blob) - 48
                raw_total += struct.unpack_from("<Q", blob, 16)[0]
                raw_zstd += framed[1]
                (ctx.zst_dir / f"{d.name}{f.name[:14]}.zst").write_bytes(framed[0])
                continue
            codec = blob[7]
            raw_size = struct.unpack_from("<Q", blob, 16)[0]
            psize = struct.unpack_from("<Q", blob, 24)[0]
            hsize = struct.unpack_from("<I", blob, 8)[0] or 48
            stored += psize
            raw_total += raw_size
            if codec == 1:
                n_zstd += 1
                raw_zstd += raw_size
                (ctx.zst_dir / f"{d.name}{f.name[:14]}.zst").write_bytes(blob[hsize:hsize + psize])
            else:
                n_raw += 1
    os.sync()
    info = {}
    with contextlib.suppress(Exception):
        p = run_cli(ctx, ["info", f"{ctx.lake_url}/{DATASET}", "--json"])
        info = json.loads(p.stdout)
    ctx.data = {
        "rows": rows, "row_shape": list(shape), "dtype": "uint8", "row_bytes": row_bytes,
        "data_bytes": total, "data_mib": total / MiB, "chunk_objects": n_zstd + n_raw,
        "chunks_zstd": n_zstd, "chunks_raw": n_raw, "stored_bytes": stored,
        "raw_bytes_in_chunks": raw_total, "raw_bytes_zstd_chunks": raw_zstd,
        "compression_ratio": (raw_total / stored) if stored else None,
        "generate_s": t_gen, "import_s": t_import,
        "import_MBps": total / MB / t_import if t_import else None,
        "chunk_size": a.chunk_size, "codec": a.codec, "level": a.level,
        "schema": info,
    }
    meta["data"] = ctx.data
    meta_path.write_text(json.dumps(meta, indent=1))
    log(f"data: {total / MiB:.0f} MiB in {n_zstd + n_raw} chunks ({n_zstd} zstd, {n_raw} raw), "
        f"stored {stored / MiB:.0f} MiB (ratio {ctx.data['compression_ratio'] or 0:.2f}x); "
        f"import {t_import:.1f}s")
    if raw_total != total:
        raise BenchError(f"the chunk objects hold {raw_total} raw bytes, expected {total} "
                         f"(is the dataset a single column?)")


def run_cli(ctx, args, timeout=600):
    cmd = [ctx.bin] + [str(a) for a in args]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=timeout)
    if p.returncode != 0:
        raise BenchError(f"`{' '.join(cmd)}` failed with status {p.returncode}:\n"
                         f"{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
    return p


def spot_check(ctx, m):
    """A few rows read through the mount equal the local file (not timed)."""
    rows = ctx.data["rows"]
    local = np.load(ctx.npy, mmap_mode="r")
    mnt = np.load(m.file(), mmap_mode="r")
    try:
        if mnt.shape != local.shape or mnt.dtype != local.dtype:
            raise BenchError(f"mounted shape/dtype {mnt.shape} {mnt.dtype} != local "
                             f"{local.shape} {local.dtype}")
        rng = np.random.default_rng(ctx.args.seed + 99)
        idx = sorted(set(rng.integers(0, rows, 64).tolist()) | {0, rows - 1})
        for i in idx:
            if not np.array_equal(np.array(mnt[i]), np.array(local[i])):
                raise BenchError(f"DATA MISMATCH: row {i} read through the mount differs from "
                                 f"the local .npy")
    finally:
        del local, mnt


# --------------------------------------------------------------------------------------------
# Readers (the timed inner loops)
# --------------------------------------------------------------------------------------------

def scan_read(path, bufsize):
    """Read the whole file front to back with read(); returns (bytes, seconds)."""
    buf = bytearray(bufsize)
    mv = memoryview(buf)
    n = 0
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while True:
            k = os.readv(fd, [mv])
            if k <= 0:
                break
            n += k
    finally:
        os.close(fd)
    return n, time.perf_counter() - t0


def scan_mmap(path, block):
    """np.load(mmap_mode='r') then copy the array out block by block; returns (bytes, s)."""
    t0 = time.perf_counter()
    a = np.load(path, mmap_mode="r")
    flat = np.asarray(a).reshape(-1).view(np.uint8)
    buf = np.empty(block, dtype=np.uint8)
    n = flat.size
    for off in range(0, n, block):
        k = min(block, n - off)
        np.copyto(buf[:k], flat[off:off + k])
    dt = time.perf_counter() - t0
    del flat, a
    return n, dt


def folio_census(path, nbytes=64 * MiB):
    """How the page cache holds the first nbytes of path (already cached): pages by the size of
    the folio they are in, from /proc/self/pagemap and /proc/kpageflags (root). Returns
    {folio KiB: pages} or None when the files cannot be read."""
    import mmap
    KPF_HEAD, KPF_TAIL, KPF_THP = 1 << 15, 1 << 16, 1 << 22
    size = min(nbytes, os.path.getsize(path))
    size -= size % 4096
    try:
        with open(path, "rb") as f, open("/proc/self/pagemap", "rb") as pm, \
                open("/proc/kpageflags", "rb") as kf:
            mm = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
            try:
                base = np.frombuffer(mm, dtype=np.uint8)
                base[::4096].sum()  # map every page (they are cached: no I/O)
                addr = ctypes_addr(base)
                pm.seek(addr // 4096 * 8)
                ents = np.frombuffer(pm.read(size // 4096 * 8), dtype="<u8")
                pfns = ents & ((1 << 55) - 1)
                flags = []
                for pfn in pfns.tolist():
                    kf.seek(pfn * 8)
                    flags.append(struct.unpack("<Q", kf.read(8))[0])
                del base
            finally:
                mm.close()
    except (OSError, ValueError):
        return None
    if not any(int(p) for p in pfns):
        return None  # no PFNs: not root
    census, i = {}, 0
    while i < len(flags):
        if flags[i] & KPF_HEAD:
            j = i + 1
            while j < len(flags) and flags[j] & KPF_TAIL and not flags[j] & KPF_HEAD:
                j += 1
            n = j - i
        else:
            n = 1
        census[n * 4] = census.get(n * 4, 0) + n
        i += n
    return dict(sorted(census.items()))


def ctypes_addr(arr):
    return arr.__array_interface__["data"][0]


def random_mmap(path, idx):
    a = np.load(path, mmap_mode="r")
    t0 = time.perf_counter()
    for i in idx:
        np.array(a[i])
    dt = time.perf_counter() - t0
    del a
    return dt


def random_pread(path, idx, row_bytes):
    off0 = np.load(path, mmap_mode="r").offset
    fd = os.open(path, os.O_RDONLY)
    try:
        t0 = time.perf_counter()
        for i in idx:
            os.pread(fd, row_bytes, off0 + int(i) * row_bytes)
        dt = time.perf_counter() - t0
    finally:
        os.close(fd)
    return dt


def zstd_frames(blob):
    """A framed chunk's zstd frames concatenated, and their raw bytes (frames kept as they are
    left out): core/FORMAT.md, framed chunks."""
    n, frame = struct.unpack_from("<II", blob, 48)
    raw_size = struct.unpack_from("<Q", blob, 16)[0]
    pos = 48 + 8 + 16 * n + 8
    out, raw = [], 0
    for i in range(n):
        length, flags = struct.unpack_from("<II", blob, 48 + 8 + 16 * i)
        if not flags & 1:
            out.append(blob[pos:pos + length])
            raw += frame if i + 1 < n else raw_size - (n - 1) * frame
        pos += length
    return b"".join(out), raw


def zstd_decompress(files, jobs):
    """Wall seconds for `zstd -d -c` of `files` split over `jobs` processes, to /dev/null."""
    groups = [files[i::jobs] for i in range(jobs)]
    groups = [g for g in groups if g]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([ZSTD, "-d", "-q", "-c", "--no-progress"] + [str(f) for f in g],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for g in groups]
    errs = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            errs.append(err.decode(errors="replace"))
    dt = time.perf_counter() - t0
    if errs:
        raise BenchError("zstd -d failed: " + "\n".join(errs)[-2000:])
    return dt


class RssSampler:
    """VmRSS of a pid every `interval` s in a thread; .peak (bytes), .samples."""

    def __init__(self, pid, interval=0.002):
        self.pid, self.interval = pid, interval
        self.peak, self.samples = 0, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        r = proc_status(self.pid, "VmRSS")
        if r is not None:
            self.peak = max(self.peak, r)
            self.samples += 1

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.sample()
        return False


def proc_cpu_s(pid):
    """(utime, stime) of a whole process (all threads), seconds; None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tck, int(fields[12]) / tck
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """CPU seconds used by a daemon and by this process over a block, and the wall time."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        self._d0 = proc_cpu_s(self.pid)
        self._s0 = sum(os.times()[:2])
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._t0
        d1 = proc_cpu_s(self.pid)
        self.daemon_s = self.daemon_user_s = self.daemon_sys_s = None
        if d1 is not None and self._d0 is not None:
            self.daemon_user_s = d1[0] - self._d0[0]
            self.daemon_sys_s = d1[1] - self._d0[1]
            self.daemon_s = self.daemon_user_s + self.daemon_sys_s
        self.client_s = sum(os.times()[:2]) - self._s0
        return False

    def as_dict(self):
        return {"wall_s": self.wall, "daemon_cpu_s": self.daemon_s,
                "daemon_user_s": self.daemon_user_s, "daemon_sys_s": self.daemon_sys_s,
                "client_cpu_s": self.client_s}

    def brief(self):
        if self.daemon_s is None:
            return ""
        return (f"daemon CPU {self.daemon_s:.2f}s = {100 * self.daemon_s / self.wall:.0f}% of "
                f"wall (user {self.daemon_user_s:.2f}, sys {self.daemon_sys_s:.2f}), "
                f"client CPU {self.client_s:.2f}s")


def med(xs):
    return statistics.median(xs) if xs else None


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

class Row:
    """One line of the table: a tensorfs figure against one baseline figure.

    `better` is 'higher' (throughput) or 'lower' (time, memory); ratio > 1 = tensorfs better.
    target: None, ('ratio', x) meaning ratio >= x, or ('max', x) meaning value <= x."""

    def __init__(self, case, name, value, unit, baseline=None, base_value=None, better="higher",
                 target=None, note=None):
        self.case, self.name, self.value, self.unit = case, name, value, unit
        self.baseline, self.base_value, self.better = baseline, base_value, better
        self.target, self.note = target, note
        self.ratio = None
        if value is not None and base_value is not None and value > 0 and base_value > 0:
            self.ratio = value / base_value if better == "higher" else base_value / value
        self.passed = None
        if target and value is not None:
            kind, x = target
            if kind == "ratio" and self.ratio is not None:
                self.passed = self.ratio >= x
            elif kind == "max":
                self.passed = value <= x

    def target_str(self):
        if not self.target:
            return "-"
        kind, x = self.target
        if kind == "ratio":
            return f">= {x:.2f}x"
        return f"<= {fmt_val(x, self.unit)}"

    def chart_target(self):
        """The target expressed as a ratio (for the chart), or None."""
        if not self.target:
            return None
        kind, x = self.target
        if kind == "ratio":
            return x
        if self.base_value:  # value <= x  <=>  base/value >= base/x  (lower is better)
            return self.base_value / x
        return None

    def as_dict(self):
        return {"case": self.case, "name": self.name, "value": self.value, "unit": self.unit,
                "baseline": self.baseline, "baseline_value": self.base_value,
                "better": self.better, "ratio": self.ratio, "target": self.target_str(),
                "pass": self.passed, "note": self.note}


def fmt_val(v, unit):
    if v is None:
        return "n/a"
    if unit in ("MB/s", "rows/s", "samples/s"):
        return f"{v:,.0f} {unit}"
    if unit == "ms":
        return f"{v:.1f} ms"
    if unit == "MiB":
        return f"{v:.1f} MiB"
    return f"{v:.3g} {unit}"


def print_table(rows, out=sys.stdout):
    hdr = ["case", "measurement", "tensorfs", "baseline", "baseline value", "ratio", "target",
           ""]
    lines = []
    prev = None
    for r in rows:
        same = prev is not None and (prev.case, prev.name, prev.value) == (r.case, r.name,
                                                                             r.value)
        lines.append([
            "" if same else str(r.case),
            "" if same else r.name,
            "" if same else fmt_val(r.value, r.unit),
            r.baseline or "-",
            fmt_val(r.base_value, r.unit) if r.base_value is not None else "-",
            f"{r.ratio:.2f}x" if r.ratio is not None else "-",
            r.target_str(),
            {True: "ok", False: "MISS", None: ""}[r.passed],
        ])
        prev = r
    widths = [max(len(hdr[i]), *(len(l[i]) for l in lines)) if lines else len(hdr[i])
              for i in range(len(hdr))]
    sep = "  "
    print(sep.join(h.ljust(w) for h, w in zip(hdr, widths)), file=out)
    print(sep.join("-" * w for w in widths), file=out)
    for l in lines:
        print(sep.join(c.ljust(w) if j < 2 or j == 3 or j == 7 else c.rjust(w)
                       for j, (c, w) in enumerate(zip(l, widths))).rstrip(), file=out)
    print("ratio > 1 = tensorfs better than that baseline (faster, or less time/memory); "
          "MB/s = 10^6 B/s; MiB = 2^20 B; targets are informational.", file=out)
    for k in ("cold", "warm", "decompression limit"):
        print(f"{k}: {DEFINITIONS[k]}", file=out)


def draw_chart(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rs = [r for r in rows if r.ratio is not None]
    if not rs:
        return False
    labels = [f"{r.case}: {r.name}\nvs {r.baseline}" for r in rs]
    colors = ["#2ca02c" if r.passed else "#d62728" if r.passed is False else "#7f7f7f"
              for r in rs]
    h = max(4.0, 0.42 * len(rs) + 1.5)
    fig, ax = plt.subplots(figsize=(12, h))
    y = np.arange(len(rs))[::-1]
    ax.barh(y, [r.ratio for r in rs], color=colors, height=0.6)
    for yi, r in zip(y, rs):
        ax.text(r.ratio * 1.03, yi, f"{r.ratio:.2f}x", va="center", fontsize=7)
        t = r.chart_target()
        if t:
            ax.plot([t, t], [yi - 0.4, yi + 0.4], color="black", lw=2)
    ax.axvline(1.0, color="#555555", lw=0.8, ls="--")
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel("ratio (> 1 = tensorfs better); black tick = target; "
                  "green = target met, red = missed, grey = no target")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


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
# Cases
# --------------------------------------------------------------------------------------------

def case1(ctx, res):
    """Cold sequential scan: mount (read, mmap) vs zstd -d limit vs local .npy cold."""
    a = ctx.args
    data_bytes = ctx.data["data_bytes"]
    zst = sorted(ctx.zst_dir.glob("*.zst"))
    raw_zstd = ctx.data["raw_bytes_zstd_chunks"]
    jobs = a.jobs

    lim = lim1 = limcold = None
    if zst:
        warm_files(zst)
        t = [zstd_decompress(zst, jobs) for _ in range(a.reps)]
        lim = raw_zstd / MB / med(t)
        t1 = [zstd_decompress(zst, 1) for _ in range(a.reps)]
        lim1 = raw_zstd / MB / med(t1)
        tc = []
        for _ in range(a.cold_reps):
            ctx.cache.drop()
            tc.append(zstd_decompress(zst, jobs))
        limcold = raw_zstd / MB / med(tc)
        res["zstd"] = {"files": len(zst), "raw_bytes": raw_zstd, "jobs": jobs,
                       f"warm_{jobs}proc_s": t, "warm_1proc_s": t1, f"cold_{jobs}proc_s": tc,
                       f"limit_{jobs}proc_MBps": lim, "limit_1proc_MBps": lim1,
                       f"cold_input_{jobs}proc_MBps": limcold}
        log(f"  zstd -d: {lim:,.0f} MB/s on {jobs} procs, {lim1:,.0f} MB/s on 1, "
            f"{limcold:,.0f} MB/s on {jobs} procs with cold input")
    else:
        res["zstd"] = {"note": "no zstd chunks (codec raw, or compression did not pay)"}
        log("  no zstd-compressed chunks: decompression baseline n/a")

    runs = {}
    for method in ("read", "mmap"):
        for where in ("mount", "local"):
            ts, stats, cpu = [], [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount() as m:
                        path = m.file()
                        os.stat(path)
                        ctx.cache.drop()
                        with CpuMeter(m.pid) as c:
                            n, dt = (scan_read(path, a.read_size) if method == "read"
                                     else scan_mmap(path, a.mmap_block))
                        cpu.append(c)
                        stats.append(m.stats())
                else:
                    ctx.cache.drop()
                    n, dt = (scan_read(ctx.npy, a.read_size) if method == "read"
                             else scan_mmap(ctx.npy, a.mmap_block))
                ts.append(dt)
            nbytes = data_bytes if method == "mmap" else n
            runs[(method, where)] = nbytes / MB / med(ts)
            res[f"cold_{method}_{where}"] = {"bytes": nbytes, "seconds": ts,
                                             "MBps": runs[(method, where)]}
            if where == "mount":
                res[f"cold_{method}_{where}"]["daemon_stats"] = stats
                res[f"cold_{method}_{where}"]["cpu"] = [c.as_dict() for c in cpu]
            log(f"  cold {method:4s} {where:5s}: {runs[(method, where)]:,.0f} MB/s "
                f"(runs {', '.join(f'{x:.3f}s' for x in ts)})"
                + (f"; last run {cpu[-1].brief()}" if cpu else ""))

    # The true limit of a cold scan is the smaller of what the cores decompress from cold input
    # and what the disk delivers times the compression ratio (a cold local read moves the
    # disk's bytes; the lake's chunks are that many times smaller than what they decode to).
    stored = sum(f.stat().st_size for f in zst) if zst else 0
    zratio = raw_zstd / stored if stored else None
    disk_bound = runs[("read", "local")] * zratio if zratio else None
    bounds = [x for x in (limcold, disk_bound) if x]
    true_lim = min(bounds) if bounds else None
    res["true_limit"] = {"cold_input_zstd_MBps": limcold, "compression_ratio": zratio,
                         "disk_times_ratio_MBps": disk_bound, "limit_MBps": true_lim}
    if true_lim:
        log(f"  true limit: {true_lim:,.0f} MB/s (cold-input zstd -d x{jobs}: {limcold:,.0f}; "
            f"disk {runs[('read', 'local')]:,.0f} MB/s x ratio {zratio:.2f} = {disk_bound:,.0f})")
    for method, label in (("read", f"cold scan read() {a.read_size // 1024}K"),
                          ("mmap", "cold scan np.load mmap")):
        v = runs[(method, "mount")]
        cpu = res[f"cold_{method}_mount"]["cpu"][-1]
        if cpu["daemon_cpu_s"] is not None:
            log(f"  cold {method} through the mount: daemon {cpu['daemon_cpu_s'] / cpu['wall_s']:.2f} "
                f"CPU s per wall s")
        ctx.add(1, label, v, "MB/s", "true limit: min(cold-input zstd -d, disk x ratio)", true_lim,
                target=("ratio", 0.7))
        ctx.add(1, label, v, "MB/s", f"zstd -d x{jobs}, warm input", lim)
        ctx.add(1, label, v, "MB/s", "zstd -d x1", lim1)
        ctx.add(1, label, v, "MB/s", f"zstd -d x{jobs}, cold .zst", limcold)
        ctx.add(1, label, v, "MB/s", f"local .npy cold {method}", runs[(method, "local")])


def case2(ctx, res):
    """Warm re-read: mount vs local .npy in the page cache (runs interleaved, so that load from
    other processes hits both sides alike)."""
    a = ctx.args
    ts = {(m, w): [] for m in ("read", "mmap") for w in ("mount", "local", "local_m")}
    nb = {}
    with ctx.mount() as m:
        path = m.file()
        scan_read(path, a.read_size)  # warm-up pass (cold)
        # The local file cached by mmap faults (readahead's folios) for "local_m", measured
        # first; then dropped and cached by read(), as the mount's was, for "local".
        ctx.cache.drop()
        scan_mmap(ctx.npy, a.mmap_block)
        for method in ("read", "mmap"):
            for _ in range(a.reps):
                n, dt = (scan_read(ctx.npy, a.read_size) if method == "read"
                         else scan_mmap(ctx.npy, a.mmap_block))
                ts[(method, "local_m")].append(dt)
                nb[(method, "local_m")] = n
        census_local_m = folio_census(ctx.npy)
        ctx.cache.drop()
        scan_read(path, a.read_size)
        warm_files([ctx.npy])
        res["folios_KiB_to_pages"] = {"mount": folio_census(path), "local_read": folio_census(ctx.npy),
                                      "local_mmap": census_local_m}
        log(f"  page cache, first 64 MiB, pages by folio size (KiB): mount "
            f"{res['folios_KiB_to_pages']['mount']}; local cached by read() "
            f"{res['folios_KiB_to_pages']['local_read']}; by mmap {census_local_m}")
        cpu = {"read": [], "mmap": []}
        for _ in range(a.reps):
            for method in ("read", "mmap"):
                for where, p in (("mount", path), ("local", ctx.npy)):
                    with CpuMeter(m.pid) as c:
                        n, dt = (scan_read(p, a.read_size) if method == "read"
                                 else scan_mmap(p, a.mmap_block))
                    if where == "mount":
                        cpu[method].append(c.daemon_s)
                    ts[(method, where)].append(dt)
                    nb[(method, where)] = n
        res["daemon_stats"] = m.stats()
        res["daemon_cpu_s_per_warm_pass"] = cpu
    v = {}
    for (method, where), t in ts.items():
        v[(method, where)] = nb[(method, where)] / MB / med(t)
        res[f"warm_{method}_{where}"] = {"bytes": nb[(method, where)], "seconds": t,
                                         "MBps": v[(method, where)]}
        log(f"  warm {method:4s} {where:5s}: {v[(method, where)]:,.0f} MB/s (median of {len(t)}; "
            f"min {nb[(method, where)] / MB / max(t):,.0f}, max {nb[(method, where)] / MB / min(t):,.0f})")
    ctx.add(2, f"warm re-read read() {a.read_size // 1024}K", v[("read", "mount")], "MB/s",
            "local .npy page cache read()", v[("read", "local")], target=("ratio", 0.9))
    ctx.add(2, "warm re-read np.load mmap", v[("mmap", "mount")], "MB/s",
            "local .npy page cache mmap", v[("mmap", "local")], target=("ratio", 0.9))
    ctx.add(2, "warm re-read read()", v[("read", "mount")], "MB/s",
            "local .npy cached by mmap, read()", v[("read", "local_m")])
    ctx.add(2, "warm re-read np.load mmap", v[("mmap", "mount")], "MB/s",
            "local .npy cached by mmap, mmap", v[("mmap", "local_m")])


def case3(ctx, res):
    """Random rows: mount vs local, cold and warm, mmap (np.array(a[i])) and pread."""
    random_rows(ctx, res, 3, None)


def case10(ctx, res):
    """Random rows on a column twice cache_mem: every miss decodes a whole chunk for one row."""
    col_mib = ctx.data["rows"] * ctx.data["row_bytes"] / MiB
    cache_mib = max(16, int(col_mib / 2))
    res["cache_mem"] = f"{cache_mib}M"
    log(f"  column {col_mib:.0f} MiB, cache_mem={cache_mib}M")
    random_rows(ctx, res, 10, f"{cache_mib}M")


def random_rows(ctx, res, case, cache_mem):
    """Case 3's measurement, the mount with cache_mem (None: the run's)."""
    a = ctx.args
    rows, rb = ctx.data["rows"], ctx.data["row_bytes"]
    idx = np.random.default_rng(a.seed + 3).integers(0, rows, a.random_rows).tolist()
    n = len(idx)
    res["indices"] = n
    res["row_bytes"] = rb
    v = {}
    for method in ("mmap", "pread"):
        fn = ((lambda p: random_mmap(p, idx)) if method == "mmap"
              else (lambda p: random_pread(p, idx, rb)))
        for where in ("mount", "local"):
            cold, warm, stats = [], [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount(cache_mem=cache_mem) as m:
                        path = m.file()
                        os.stat(path)
                        ctx.cache.drop()
                        with CpuMeter(m.pid) as c:
                            cold.append(fn(path))
                        res.setdefault(f"cold_{method}_mount_cpu", []).append(c.as_dict())
                        warm.append(fn(path))
                        stats.append(m.stats())
                else:
                    ctx.cache.drop()
                    cold.append(fn(ctx.npy))
                    warm.append(fn(ctx.npy))
            for state, ts in (("cold", cold), ("warm", warm)):
                v[(method, where, state)] = n / med(ts)
                res[f"{state}_{method}_{where}"] = {"seconds": ts, "rows_per_s": n / med(ts),
                                                    "MBps": n * rb / MB / med(ts)}
            if where == "mount":
                res[f"{method}_mount_daemon_stats"] = stats
            log(f"  random {method:5s} {where:5s}: cold {v[(method, where, 'cold')]:,.0f} "
                f"rows/s, warm {v[(method, where, 'warm')]:,.0f} rows/s")
    for state in ("cold", "warm"):
        for method, label in (("mmap", "np.array(mm[i])"), ("pread", "pread(row)")):
            ctx.add(case, f"{state} random {n} rows {label}", v[(method, "mount", state)],
                    "rows/s", f"local .npy {state}", v[(method, "local", state)],
                    note=f"{rb} B rows" + (f", cache_mem={cache_mem}" if cache_mem else ""),
                    target=("ratio", 0.5) if case == 10 else None)


def case4(ctx, res):
    """Time to first batch: launch `tensorfs mount` -> first 64 rows in a numpy array."""
    a = ctx.args
    out = {}
    for state in ("cold", "warm"):
        tot, up, load = [], [], []
        for _ in range(a.ttfb_reps):
            if state == "cold":
                ctx.cache.drop()
            else:
                warm_files([ctx.bin])
            m = ctx.mount()
            try:
                m.launch()
                m.wait_up(poll=0.0005)
                arr = np.load(m.file(), mmap_mode="r")
                batch = np.array(arr[:64])
                t1 = time.perf_counter()
                del arr
                assert batch.shape[0] == min(64, ctx.data["rows"])
            finally:
                m.stop()
            tot.append((t1 - m.t_launch) * 1e3)
            up.append((m.t_up - m.t_launch) * 1e3)
            load.append((t1 - m.t_up) * 1e3)
        out[state] = {"total_ms": tot, "mount_up_ms": up, "first_batch_after_up_ms": load,
                      "median_ms": med(tot)}
        log(f"  TTFB {state}: median {med(tot):.1f} ms (mount up {med(up):.1f} ms + "
            f"first batch {med(load):.1f} ms); runs {', '.join(f'{x:.0f}' for x in tot)}")
    loc = []
    for _ in range(a.ttfb_reps):
        ctx.cache.drop()
        t0 = time.perf_counter()
        arr = np.load(ctx.npy, mmap_mode="r")
        np.array(arr[:64])
        loc.append((time.perf_counter() - t0) * 1e3)
        del arr
    out["local_cold_ms"] = loc
    res.update(out)
    log(f"  local .npy cold first batch: median {med(loc):.2f} ms")
    ctx.add(4, "time to first batch, cold (mount+64 rows)", med(out["cold"]["total_ms"]), "ms",
            "local .npy cold np.load+64 rows", med(loc), better="lower", target=("max", 200.0))
    ctx.add(4, "time to first batch, warm lake", med(out["warm"]["total_ms"]), "ms",
            "local .npy cold np.load+64 rows", med(loc), better="lower", target=("max", 200.0))


def case5(ctx, res):
    """Scan a column 4x larger than cache_mem; peak daemon RSS vs the budget."""
    a = ctx.args
    data_bytes = ctx.data["data_bytes"]
    budget_mib = max(1, round(data_bytes / a.rss_factor / MiB))
    budget = budget_mib * MiB
    limit = budget + a.rss_slack_mib * MiB
    res.update({"cache_mem": f"{budget_mib}M", "budget_bytes": budget, "limit_bytes": limit,
                "data_bytes": data_bytes, "factor": data_bytes / budget})
    m = ctx.mount(cache_mem=f"{budget_mib}M")
    with m:
        path = m.file()
        os.stat(path)
        ctx.cache.drop()
        base = proc_status(m.pid, "VmRSS")
        with contextlib.suppress(OSError):  # reset VmHWM to the current RSS (Linux >= 4.0)
            with open(f"/proc/{m.pid}/clear_refs", "w") as f:
                f.write("5")
        with RssSampler(m.pid) as s:
            with CpuMeter(m.pid) as c1:
                n, dt = scan_read(path, a.read_size)
            ctx.cache.drop()  # else the mmap pass is served by the kernel page cache
            with CpuMeter(m.pid) as c2:
                n2, dt2 = scan_mmap(path, a.mmap_block)
        res["cpu_read"], res["cpu_mmap"] = c1.as_dict(), c2.as_dict()
        hwm = proc_status(m.pid, "VmHWM")
        res["daemon_stats"] = m.stats()
    peak = max(s.peak, hwm or 0)
    res.update({"baseline_rss": base, "peak_rss_sampled": s.peak, "vm_hwm": hwm,
                "peak_rss": peak, "samples": s.samples, "growth": peak - (base or 0),
                "scan_read_MBps": n / MB / dt, "scan_mmap_MBps": n2 / MB / dt2})
    log(f"  cache_mem={budget_mib}M, scanned {data_bytes / MiB:.0f} MiB twice, cold "
        f"(read {n / MB / dt:,.0f} MB/s, mmap {n2 / MB / dt2:,.0f} MB/s): baseline RSS "
        f"{(base or 0) / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB (sampled {s.peak / MiB:.1f}, "
        f"VmHWM {(hwm or 0) / MiB:.1f}; {s.samples} samples)")
    lim_label = f"budget {budget_mib} + {a.rss_slack_mib} MiB"
    ctx.add(5, f"peak daemon RSS, scan {data_bytes / budget:.0f}x cache_mem", peak / MiB, "MiB",
            lim_label, limit / MiB, better="lower", target=("max", limit / MiB),
            note=f"baseline RSS {(base or 0) / MiB:.1f} MiB")
    ctx.add(5, "daemon RSS growth (peak - baseline)", (peak - (base or 0)) / MiB, "MiB",
            lim_label, limit / MiB, better="lower", target=("max", limit / MiB))
    ctx.add(5, f"cold scan read() with cache_mem={budget_mib}M", n / MB / dt, "MB/s",
            "case-1 zstd limit" if ctx.cases.get(1, {}).get("zstd", {}).get(
                f"limit_{a.jobs}proc_MBps") else None,
            ctx.cases.get(1, {}).get("zstd", {}).get(f"limit_{a.jobs}proc_MBps"))


class NpyRows:
    """Map-style dataset: row i of a .npy as a tensor; the memmap opens lazily (per worker)."""

    def __init__(self, path, n):
        self.path, self.n, self.mm = str(path), n, None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch
        if self.mm is None:
            self.mm = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.mm[i]))


def case6(ctx, res):
    """PyTorch DataLoader over the mount vs over the local .npy, workers 0 and 2, cold/warm."""
    a = ctx.args
    t0 = time.perf_counter()
    import torch
    from torch.utils.data import DataLoader
    res["torch"] = torch.__version__
    res["torch_import_s"] = time.perf_counter() - t0
    n = min(a.dl_rows, ctx.data["rows"])
    res["rows"] = n
    res["batch_size"] = a.batch_size

    def epochs(path, w):
        out = []
        ds = NpyRows(path, n)
        g = torch.Generator()
        g.manual_seed(a.seed)
        dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, generator=g,
                        num_workers=w, persistent_workers=False)
        for _ in range(2):  # epoch 1 cold, epoch 2 warm (a new shuffle of the same rows)
            t = time.perf_counter()
            got = 0
            for b in dl:
                got += b.shape[0]
            out.append(time.perf_counter() - t)
            if got != n:
                raise BenchError(f"DataLoader yielded {got} rows, expected {n}")
        ds.mm = None
        del dl, ds
        gc.collect()
        return out

    v = {}
    for w in a.workers:
        for where in ("mount", "local"):
            cold, warm = [], []
            for _ in range(a.cold_reps):
                if where == "mount":
                    with ctx.mount() as m:
                        os.stat(m.file())
                        ctx.cache.drop()
                        c, wm = epochs(m.file(), w)
                        res.setdefault(f"w{w}_mount_daemon_stats", []).append(m.stats())
                else:
                    ctx.cache.drop()
                    c, wm = epochs(ctx.npy, w)
                cold.append(c)
                warm.append(wm)
            for state, ts in (("cold", cold), ("warm", warm)):
                v[(w, where, state)] = n / med(ts)
                res[f"w{w}_{where}_{state}"] = {"seconds": ts, "samples_per_s": n / med(ts)}
            log(f"  DataLoader workers={w} {where:5s}: cold {v[(w, where, 'cold')]:,.0f} "
                f"samples/s, warm {v[(w, where, 'warm')]:,.0f} samples/s")
    for state in ("cold", "warm"):
        for w in a.workers:
            ctx.add(6, f"DataLoader {state} epoch, workers={w}", v[(w, "mount", state)],
                    "samples/s", f"same over local .npy {state}", v[(w, "local", state)],
                    note=f"{n} rows, batch {a.batch_size}, shuffle")


def case7(ctx, res):
    """Shuffled view scan (front to back, cold) vs random mmap access of a local .npy (a uniform
    shuffle of every row, cold), vs a sequential scan of the unshuffled version (mount, cold)."""
    a = ctx.args
    rows, rb = ctx.data["rows"], ctx.data["row_bytes"]
    view = f"seed={a.seed},epoch=0"
    block = max(1, (1 << 20) // rb)  # rows per np.asarray: about 1 MiB
    times = {"view": [], "seq": [], "local_random": []}
    order = np.random.default_rng(a.seed + 7).permutation(rows).tolist()
    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vpath = m.path / DATASET / "main" / "views" / view / f"{COLUMN}.npy"
            os.stat(vpath)
            ctx.cache.drop()
            t0 = time.perf_counter()
            mm = np.load(vpath, mmap_mode="r")
            for i in range(0, mm.shape[0], block):
                np.asarray(mm[i:i + block]).copy()
            times["view"].append(time.perf_counter() - t0)
            del mm
            res.setdefault("view_daemon_stats", []).append(m.stats())
        with ctx.mount() as m:
            path = m.file()
            os.stat(path)
            ctx.cache.drop()
            times["seq"].append(scan_mmap(path, a.mmap_block)[1])
        ctx.cache.drop()
        times["local_random"].append(random_mmap(ctx.npy, order))
    nbytes = rows * rb
    v = {k: nbytes / MB / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "MBps": v[k]} for k, ts in times.items()})
    log(f"  shuffled view scan {v['view']:,.0f} MB/s, local random mmap "
        f"{v['local_random']:,.0f} MB/s, sequential scan of the version {v['seq']:,.0f} MB/s")
    ctx.add(7, "cold shuffled view scan (np.load mmap)", v["view"], "MB/s",
            "local .npy cold, random mmap of every row", v["local_random"],
            target=("ratio", 3.0))
    ctx.add(7, "cold shuffled view scan (np.load mmap)", v["view"], "MB/s",
            "mount cold sequential scan of the version", v["seq"])


class JpegRows:
    """Map-style dataset over a folder of JPEG files, decoded the way torchvision's default
    image loader does it (PIL open, convert("RGB")), returned as HWC uint8 tensors."""

    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import torch
        from PIL import Image
        with Image.open(self.files[i]) as im:
            return torch.from_numpy(np.array(im.convert("RGB")))


def jpeg_folder(ctx, n):
    """The column's first n rows as JPEG files (quality 90), made once per work directory."""
    from PIL import Image
    d = ctx.work / f"jpeg-{n}"
    done = d / ".complete"
    files = [d / f"{i:07d}.jpg" for i in range(n)]
    if done.exists():
        return files
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    src = np.load(ctx.npy, mmap_mode="r")
    for i, f in enumerate(files):
        Image.fromarray(np.asarray(src[i])).save(f, quality=90)
    done.touch()
    return files


def case8(ctx, res):
    """A shuffled view epoch vs a PyTorch DataLoader over a folder of the same images as JPEG
    files (the loader most training code starts from), both cold, batches of --batch-size."""
    a = ctx.args
    import torch
    from torch.utils.data import DataLoader
    sys.path.insert(0, str(REPO_ROOT / "packaging" / "python"))
    import tensorfs.torch as tfs_torch
    if ctx.data["row_shape"][-1] != 3 or len(ctx.data["row_shape"]) != 3:
        raise BenchError("case 8 needs image rows (--row-shape H,W,3)")
    n = min(a.dl_rows, ctx.data["rows"])
    t0 = time.perf_counter()
    files = jpeg_folder(ctx, n)
    jpeg_bytes = sum(f.stat().st_size for f in files)
    res.update({"rows": n, "jpeg_files_bytes": jpeg_bytes,
                "jpeg_build_s": time.perf_counter() - t0, "batch_size": a.batch_size})
    view = f"seed={a.seed},epoch=0"
    rows = ctx.data["rows"]
    times = {"view": [], "view_dl2": [], "jpeg_dl0": [], "jpeg_dl2": []}

    def drain(dl, want):
        t = time.perf_counter()
        got = sum(b.shape[0] for b in dl)
        if got != want:
            raise BenchError(f"DataLoader yielded {got} rows, expected {want}")
        return time.perf_counter() - t

    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vdir = m.path / DATASET / "main" / "views" / view
            os.stat(vdir / f"{COLUMN}.npy")
            ctx.cache.drop()
            t = time.perf_counter()
            mm = np.load(vdir / f"{COLUMN}.npy", mmap_mode="r")
            for i in range(0, mm.shape[0], a.batch_size):
                torch.from_numpy(np.array(mm[i:i + a.batch_size]))
            times["view"].append(time.perf_counter() - t)
            del mm
        with ctx.mount() as m:
            vdir = m.path / DATASET / "main" / "views" / view
            os.stat(vdir / f"{COLUMN}.npy")
            ctx.cache.drop()
            ds = tfs_torch.Dataset(vdir, columns=[COLUMN])
            times["view_dl2"].append(drain(DataLoader(ds, batch_size=a.batch_size,
                                                      num_workers=2), rows))
            del ds
        for w in (0, 2):
            ctx.cache.drop()
            g = torch.Generator()
            g.manual_seed(a.seed)
            dl = DataLoader(JpegRows(files), batch_size=a.batch_size, shuffle=True, generator=g,
                            num_workers=w)
            times[f"jpeg_dl{w}"].append(drain(dl, n))
            del dl
            gc.collect()
    v = {k: (rows if k.startswith("view") else n) / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "samples_per_s": v[k]} for k, ts in times.items()})
    log(f"  shuffled view: {v['view']:,.0f} samples/s read in batches, {v['view_dl2']:,.0f} "
        f"through a DataLoader (2 workers); JPEG folder DataLoader: {v['jpeg_dl0']:,.0f} "
        f"(0 workers), {v['jpeg_dl2']:,.0f} (2 workers)")
    best = max(v["jpeg_dl0"], v["jpeg_dl2"])
    note = (f"view: all {rows} rows; JPEG: the first {n} rows as {n} files "
            f"({jpeg_bytes / MiB:.0f} MiB), shuffle; samples/s")
    ctx.add(8, "cold shuffled view epoch, batches of rows", v["view"], "samples/s",
            "DataLoader over JPEG files, best of 0/2 workers", best, target=("ratio", 10.0),
            note=note)
    ctx.add(8, "cold shuffled view epoch, DataLoader 2 workers", v["view_dl2"], "samples/s",
            "DataLoader over JPEG files, 2 workers", v["jpeg_dl2"], note=note)

SAMPLE_PHOTO = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


def image_tree(ctx, n, classes=10):
    """An ImageFolder tree of n JPEG files (quality 90) of varied sizes, cut and scaled from
    matplotlib's sample photograph (a real photo) with flips and colour shifts, and every fifth
    one a generated gradient; made once per work directory."""
    from PIL import Image
    d = ctx.work / f"images-{n}"
    if (d / ".complete").exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    rng = np.random.default_rng(ctx.args.seed)
    photo = np.asarray(Image.open(SAMPLE_PHOTO).convert("RGB")) if SAMPLE_PHOTO.exists() \
        else rng.integers(0, 256, size=(600, 512, 3), dtype=np.uint8)
    for c in range(classes):
        (d / f"class{c:02d}").mkdir(parents=True)
    for i in range(n):
        if i % 5 == 4:
            h, w = int(rng.integers(160, 400)), int(rng.integers(160, 400))
            y, x = np.mgrid[0:h, 0:w]
            a = np.stack([x * 255 // w, y * 255 // h, (x * y) % 256], -1).astype(np.uint8)
            im = Image.fromarray(a)
        else:
            ph, pw = photo.shape[:2]
            ch, cw = int(rng.integers(ph // 3, ph)), int(rng.integers(pw // 3, pw))
            y0, x0 = int(rng.integers(0, ph - ch + 1)), int(rng.integers(0, pw - cw + 1))
            a = photo[y0:y0 + ch, x0:x0 + cw]
            if rng.random() < 0.5:
                a = a[:, ::-1]
            a = np.clip(a.astype(int) + rng.integers(-30, 30, 3), 0, 255).astype(np.uint8)
            im = Image.fromarray(a)
            s = float(rng.uniform(0.5, 1.0))
            im = im.resize((max(32, int(cw * s)), max(32, int(ch * s))), Image.BILINEAR)
        im.save(d / f"class{i % classes:02d}" / f"{i:07d}.jpg", quality=90)
    (d / ".complete").touch()
    return d


def case9(ctx, res):
    """Images in: decode rate of `tensorfs import --images` against PIL's decode of the same
    files, and a training read of the imported tree against torchvision's ImageFolder."""
    a = ctx.args
    import torch
    import torchvision
    import torchvision.transforms as T
    from PIL import Image
    from torch.utils.data import DataLoader

    n = a.image_count
    tree = image_tree(ctx, n)
    files = sorted(tree.glob("*/*.jpg"))
    src_bytes = sum(f.stat().st_size for f in files)
    ctx.cache.evict_paths.append(tree)
    res.update({"images": n, "jpeg_bytes": src_bytes, "batch_size": a.batch_size})

    # decode: PIL and tensorfs's decoder (core/image.c, build/rel/tests/decode_rate), each on
    # one thread over the same files held in memory; then whole imports (decode, zstd, write)
    data = [f.read_bytes() for f in files]
    t = time.perf_counter()
    for d in data:
        with Image.open(io.BytesIO(d)) as im:
            np.asarray(im.convert("RGB"))
    pil = n / (time.perf_counter() - t)
    del data
    rate_bin = os.environ.get("TENSORFS_DECODE_RATE") or str(
        Path(ctx.bin).resolve().parent / "tests" / "decode_rate")
    if not os.access(rate_bin, os.X_OK):
        rate_bin = str(REPO_ROOT / "build" / "rel" / "tests" / "decode_rate")
    out = subprocess.run([rate_bin, *map(str, files)], check=True, capture_output=True,
                         text=True).stdout
    ours = float(out.split()[0])

    def import_rate(ds, *opts):
        subprocess.run([ctx.bin, "create", f"{ctx.lake_url}/{ds}"], check=True,
                       capture_output=True)
        t = time.perf_counter()
        subprocess.run([ctx.bin, "import", f"{ctx.lake_url}/{ds}", "--images", str(tree),
                        "-q", *opts], check=True, capture_output=True)
        return n / (time.perf_counter() - t)

    one = import_rate("img1", "--threads", "1")
    cores = os.cpu_count() or 1
    every = import_rate("imgall")
    res.update({"pil_images_per_s": pil, "decode_images_per_s": ours,
                "import_1_thread_images_per_s": one, "import_all_cores_images_per_s": every,
                "cores": cores})
    log(f"  decode, one thread: tensorfs {ours:,.0f} images/s, PIL {pil:,.0f}; whole import "
        f"(decode, zstd, write) {one:,.0f} on 1 thread, {every:,.0f} on {cores}")
    ctx.add(9, "image decode, one thread", ours, "images/s", "PIL decode, one thread", pil,
            target=("ratio", 1.5), note=f"{n} JPEG files, {src_bytes / MiB:.0f} MiB, in memory")
    ctx.add(9, "import --images, 1 thread", one, "images/s", "PIL decode, one thread", pil,
            note="whole import: decode, zstd level 3, write")
    ctx.add(9, f"import --images, {cores} threads", every, "images/s",
            "PIL decode, one thread", pil, note="whole import")

    # training read: ImageFolder + Resize(256) + CenterCrop(224) + ToTensor, against the tree
    # imported at 224x224 (crop) read through a shuffled view into float tensors
    subprocess.run([ctx.bin, "create", f"{ctx.lake_url}/img224"], check=True,
                   capture_output=True)
    subprocess.run([ctx.bin, "import", f"{ctx.lake_url}/img224", "--images", str(tree),
                    "--size", "224x224", "--crop", "--labels-from-dirs", "-q"], check=True,
                   capture_output=True)
    # uint8 CHW batches on both sides (PILToTensor; the float conversion is the model's, on
    # the device, and costs the same on either side)
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    times = {"view": [], "folder0": [], "folder2": []}

    def drain(dl):
        t = time.perf_counter()
        got = 0
        for x, y in dl:
            got += x.shape[0]
        if got != n:
            raise BenchError(f"{got} rows, expected {n}")
        return time.perf_counter() - t

    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vdir = m.path / "img224" / "main" / "views" / f"seed={a.seed},epoch=0"
            os.stat(vdir / "image.npy")
            ctx.cache.drop()
            t = time.perf_counter()
            img = np.load(vdir / "image.npy", mmap_mode="r")
            lab = np.load(vdir / "label.npy", mmap_mode="r")
            for i in range(0, n, a.batch_size):
                x = torch.from_numpy(np.array(img[i:i + a.batch_size]))
                x = x.permute(0, 3, 1, 2)  # CHW, as PILToTensor gives
                torch.from_numpy(np.array(lab[i:i + a.batch_size]))
            times["view"].append(time.perf_counter() - t)
            del img, lab
        for w in (0, 2):
            ctx.cache.drop()
            g = torch.Generator()
            g.manual_seed(a.seed)
            ds = torchvision.datasets.ImageFolder(str(tree), transform=tf)
            times[f"folder{w}"].append(drain(DataLoader(ds, batch_size=a.batch_size,
                                                        shuffle=True, generator=g,
                                                        num_workers=w)))
            gc.collect()
    v = {k: n / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "samples_per_s": v[k]} for k, ts in times.items()})
    log(f"  training read: view {v['view']:,.0f} samples/s; ImageFolder "
        f"{v['folder0']:,.0f} (0 workers), {v['folder2']:,.0f} (2 workers)")
    ctx.add(9, "cold view epoch of imported 224x224 images", v["view"], "samples/s",
            "ImageFolder+Resize+CenterCrop, best of 0/2 workers",
            max(v["folder0"], v["folder2"]), target=("ratio", 10.0),
            note="uint8 CHW tensors both sides, shuffled, batch " + str(a.batch_size))


CASES = {
    1: ("cold sequential scan of a zstd column", case1),
    2: ("warm re-read", case2),
    3: ("random-row access", case3),
    4: ("time to first batch", case4),
    5: ("scan 4x cache_mem: daemon RSS", case5),
    6: ("PyTorch DataLoader", case6),
    7: ("shuffled view scan", case7),
    8: ("shuffled view epoch vs a DataLoader over JPEG files", case8),
    9: ("images: import decode rate and training read vs ImageFolder", case9),
    10: ("random-row access, column 2x cache_mem", case10),
}


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
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    ctx = None
    try:
        ctx = Ctx(args)
        crashed = measure(ctx)
        report(ctx, out, stamp)
        return 1 if crashed else 0
    finally:
        _stop_all_mounts()
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
                _stop_all_mounts()
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
        _stop_all_mounts()
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
