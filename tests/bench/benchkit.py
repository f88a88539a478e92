#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What bench.py's cases are made of: cold caches, mounts of the daemon under test (always
unmounted at exit), the timed readers, CPU and RSS meters, and the results table and chart."""

import atexit
import contextlib
import gc
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import threading
import time
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
        """mount_stats of this mount for a report: None when absent, the start of the text
        when it does not parse."""
        try:
            return mount_stats(self.path)
        except OSError:
            return None
        except ValueError:
            raw = (self.path / ".tensorfs" / "stats").read_bytes()
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


def mount_stats(mnt):
    """The daemon's counters from MNT/.tensorfs/stats (JSON): OSError where the mount is
    gone, ValueError where they do not parse."""
    with open(Path(mnt) / ".tensorfs" / "stats", "rb") as f:
        return json.loads(f.read())


def stop_all_mounts():
    for m in list(_LIVE_MOUNTS):
        with contextlib.suppress(Exception):
            m.stop()


atexit.register(stop_all_mounts)


def on_signal(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


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
    KPF_HEAD, KPF_TAIL = 1 << 15, 1 << 16
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
    left out): core/FORMAT.md, framed chunks. The index has two more fields from version 3 (the
    delta filter, whose inverse is left out: it runs at over 10 GB/s a core; version 4 keeps a
    frame's own line in its flags' high bits)."""
    n, frame = struct.unpack_from("<II", blob, 48)
    raw_size = struct.unpack_from("<Q", blob, 16)[0]
    head = 16 if struct.unpack_from("<H", blob, 4)[0] >= 3 else 8
    pos = 48 + head + 16 * n + 8
    out, raw = [], 0
    for i in range(n):
        length, flags = struct.unpack_from("<II", blob, 48 + head + 16 * i)
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


def proc_cpu_total(pid):
    """utime + stime of a whole process, seconds; None when gone."""
    t = proc_cpu_s(pid)
    return sum(t) if t else None


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


def _disk_names(path):
    """The /proc/diskstats names whose reads count for files under path: its block device where
    st_dev names one (a partition counts as itself), else (overlay, device mapper) every whole
    disk but loop, ram and zram devices."""
    st = os.stat(path)
    try:
        return [Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve().name]
    except OSError:
        pass
    try:
        return [d for d in os.listdir("/sys/block") if not d.startswith(("loop", "ram", "zram"))]
    except OSError:
        return []


def _disk_reads(names):
    """(reads completed, bytes read) summed over the diskstats rows named; None if unreadable."""
    try:
        with open("/proc/diskstats") as f:
            rows = [ln.split() for ln in f]
    except OSError:
        return None
    got = [(int(r[3]), int(r[5]) * 512) for r in rows if len(r) > 5 and r[2] in names]
    return (sum(g[0] for g in got), sum(g[1] for g in got)) if got else None


class DiskMeter:
    """Reads the disk under a path completed over a block, and their bytes (/proc/diskstats):
    what a cold read really cost the disk, whatever the page cache and read-ahead did."""

    def __init__(self, path):
        self.names = _disk_names(path)
        self.reads = self.bytes = None

    def __enter__(self):
        self._r0 = _disk_reads(self.names)
        return self

    def __exit__(self, *exc):
        r1 = _disk_reads(self.names)
        if r1 is not None and self._r0 is not None:
            self.reads, self.bytes = r1[0] - self._r0[0], r1[1] - self._r0[1]
        return False

    def per(self, n):
        """'R disk reads, K KiB a row' over n rows ('' where not known)."""
        if self.reads is None or not n:
            return ""
        return f"{self.reads / n:.2f} disk reads, {self.bytes / 1024 / n:.1f} KiB a row"


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
