#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Soak: many concurrent readers of an s3:// lake behind a fault-injecting proxy, under cache
eviction pressure, with a remount in the middle; every byte read is checked.

    /usr/bin/python3 tests/soak/soak.py [--seconds 180] [--readers 8] [--fault-rate 0.05]

The lake (on s3rver, on loopback) holds a fixed column x (1 KiB rows), a ragged column r and
idx; the proxy fails a share of requests with 503, 429, resets, truncated and corrupted bodies
(never the same request twice in a row); the mount has cache_mem=4M, far less than the data.
Readers, each in its own thread, loop until the time is up: sequential scans of x.npy, random
preads of rows of x, mmap row reads, views with several seeds and DDP ranks (rows checked
against idx), ragged rows through offsets.npy and data.bin, staging sessions over host
slots (batches checked), and new view names, each once (a job's seed,epoch,rank,world every
epoch), over a second dataset that a committer appends to all the while. Halfway through, the
mount is unmounted and mounted again while the readers wait.

Prints reads, bytes verified, store retries, read errors and mismatches, and exits non-zero on
any mismatch, a daemon that crashed or printed a sanitizer report, a staging file left in
/dev/shm, or a daemon RSS over its budget (cache_mem plus view_mem plus a fixed allowance),
however many view names were opened.
Needs s3rver (tests/s3, npm ci) and node."""

import argparse
import json
import mmap
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from faultproxy import FaultProxy  # noqa: E402
from s3help import ACCESS_KEY, SECRET_KEY, S3Server  # noqa: E402

sys.path.insert(0, str(REPO / "packaging" / "python"))
import tensorfs  # noqa: E402

TFS = os.environ.get("TENSORFS_BIN") or str(REPO / "tensorfs")
ROWS = 20_000
ROW = 1024
CACHE_MB = 4
VIEW_MB = 16  # the mount's view_mem
NAMES_ROWS = 50_000  # the dataset new view names are opened over, before the committer's rows
RSS_ALLOWANCE_MB = 256  # threads' stacks, the HTTP pool, libraries (--rss-allowance-mb)


class Soak:
    def __init__(self, a, work):
        self.a = a
        self.work = work
        self.stop = threading.Event()
        self.paused = threading.Event()  # set: readers wait (a remount is under way)
        self.idle = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.counts = {"reads": 0, "bytes": 0, "errors": 0, "mismatches": 0, "names": 0,
                       "commits": 0}
        self.name_seq = 0
        self.problems = []
        rng = np.random.default_rng(5)
        self.x = rng.integers(0, 256, size=(ROWS, ROW), dtype=np.uint8)
        self.ragged = [rng.integers(0, 1000, size=(i % 7 + 1,), dtype=np.int32)
                       for i in range(ROWS)]

    # -- plumbing ---------------------------------------------------------------------------
    def tfs(self, *args):
        p = subprocess.run([TFS, *map(str, args)], env=self.env, capture_output=True,
                           text=True, timeout=300)
        if p.returncode:
            raise RuntimeError(f"tensorfs {args[0]}: {p.stderr[-2000:]}")
        return p.stdout

    def mount(self):
        self.log = open(self.work / f"daemon-{int(time.time() * 1000)}.log", "wb")
        self.daemon = subprocess.Popen(
            [TFS, "mount", "s3://lake", str(self.mnt), "-f", "-o",
             f"cache_mem={CACHE_MB}M,view_mem={VIEW_MB}M,ref_ttl=0.5"], env=self.env,
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.ismount(self.mnt):
            if self.daemon.poll() is not None or time.time() > deadline:
                raise RuntimeError("the mount did not come up")
            time.sleep(0.05)

    def unmount(self):
        subprocess.run(["fusermount3", "-u", str(self.mnt)], capture_output=True)
        try:
            rc = self.daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            rc = "hung"
        self.log.close()
        text = Path(self.log.name).read_text(errors="replace")
        if rc != 0:
            self.problems.append(f"daemon exited with {rc}")
        for marker in ("AddressSanitizer", "ThreadSanitizer", "runtime error:",
                       "LeakSanitizer"):
            if marker in text:
                self.problems.append(f"sanitizer report ({marker}) in {self.log.name}")
        return text

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] += n

    def check(self, ok, what):
        if ok:
            return
        self.count("mismatches")
        with self.lock:
            self.problems.append(f"wrong bytes: {what}")

    # -- readers ----------------------------------------------------------------------------
    def seq(self, rng):
        with open(self.mnt / "soak" / "main" / "x.npy", "rb") as f:
            f.seek(4096 + rng.integers(0, ROWS // 2) * ROW)
            start = (f.tell() - 4096) // ROW
            data = f.read(ROW * 2000)
        n = len(data) // ROW
        self.check(data == self.x[start:start + n].tobytes(), f"x rows {start}..")
        return len(data)

    def pread(self, rng):
        fd = os.open(self.mnt / "soak" / "main" / "x.npy", os.O_RDONLY)
        try:
            n = 0
            for r in rng.integers(0, ROWS, size=32):
                b = os.pread(fd, ROW, 4096 + int(r) * ROW)
                self.check(b == self.x[r].tobytes(), f"x row {r} by pread")
                n += len(b)
            return n
        finally:
            os.close(fd)

    def mmap_rows(self, rng):
        with open(self.mnt / "soak" / "main" / "x.npy", "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            try:
                n = 0
                for r in rng.integers(0, ROWS, size=16):
                    b = mm[4096 + int(r) * ROW:4096 + (int(r) + 1) * ROW]
                    self.check(b == self.x[r].tobytes(), f"x row {r} by mmap")
                    n += len(b)
                return n
            finally:
                mm.close()

    def view(self, rng):
        seed, rank = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        v = self.mnt / "soak" / "main" / "views" / f"seed={seed},epoch=1,rank={rank},world=4"
        idx = np.load(v / "idx.npy")
        a = int(rng.integers(0, max(1, len(idx) - 500)))
        x = np.load(v / "x.npy", mmap_mode="r")[a:a + 500]
        self.check(np.array_equal(x, self.x[idx[a:a + 500]]), f"view {v.name} rows {a}..")
        return x.nbytes + idx.nbytes

    def view_name(self, rng):
        """A view name never opened before, over the dataset the committer moves: its rows are
        a permutation of the branch's rows at some commit (v holds its row number)."""
        with self.lock:
            self.name_seq += 1
            k = self.name_seq
        rank = int(rng.integers(0, 4))
        d = self.mnt / "names" / "main" / "views" / f"seed={k % 7},epoch={k},rank={rank},world=4"
        # Pinned to the commit the branch names now: numpy opens the file twice (header, then
        # data), and the committer moves the branch between them.
        v = np.load(Path(tensorfs.pin(d)) / "v.npy", mmap_mode="r")
        head = np.array(v[:256])
        n = len(v)
        self.check(n >= NAMES_ROWS // 4 and len(np.unique(head)) == len(head) and
                   int(head.max()) < 4 * n + 4, f"view {d.name}: {n} rows")
        self.count("names")
        return head.nbytes

    def committer(self):
        """Appends rows to the names dataset while the readers run: its branch moves."""
        rows = NAMES_ROWS
        while not self.stop.is_set():
            if self.paused.is_set():
                time.sleep(0.05)
                continue
            path = self.work / f"more-{rows}.npy"
            np.save(path, np.arange(rows, rows + 64, dtype=np.int64))
            try:
                self.tfs("import", "s3://lake/names", f"v={path}", "--quiet")
                rows += 64
                self.count("commits")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass  # a fault the retries did not absorb: the next try commits
            path.unlink()
            time.sleep(0.3)

    def ragged_rows(self, rng):
        d = self.mnt / "soak" / "main" / "r"
        off = np.load(d / "offsets.npy", mmap_mode="r")
        n = 0
        with open(d / "data.bin", "rb") as f:
            for r in rng.integers(0, ROWS, size=16):
                f.seek(int(off[r]))
                b = f.read(int(off[r + 1] - off[r]))
                self.check(b == self.ragged[r].tobytes(), f"ragged row {r}")
                n += len(b)
        return n

    def staging(self, rng):
        fd = os.open(self.mnt / ".tensorfs" / "control", os.O_RDWR)
        try:
            def req(line):
                os.write(fd, (line + "\n").encode())
                buf = b""
                while not buf.endswith(b"\n"):
                    buf += os.read(fd, 65536)
                return buf.decode().split()
            r = req("open soak/main cols=x depth=2 batch=64")
            if r[0] != "ok":
                raise OSError(f"open: {' '.join(r)}")
            n = 0
            for _ in range(4):
                rows = sorted(set(int(v) for v in rng.integers(0, ROWS, size=64)))
                r = req(f"stage stream=1 rows={','.join(map(str, rows))}")
                if r[0] != "ok":
                    raise OSError(f"stage: {' '.join(r)}")
                kv = dict(t.split("=", 1) for t in r[1:] if "=" in t)
                with open(kv["file"], "rb") as f:
                    f.seek(int(kv["offset"]))  # from the start of the file (control.h)
                    b = f.read(len(rows) * ROW)
                self.check(b == self.x[rows].tobytes(), "a staged batch")
                n += len(b)
                req(f"release stream=1 slot={kv['slot']}")
            return n
        finally:
            os.close(fd)

    def reader(self, k):
        rng = np.random.default_rng(100 + k)
        kinds = [self.seq, self.pread, self.mmap_rows, self.view, self.ragged_rows, self.staging,
                 self.view_name]
        while not self.stop.is_set():
            if self.paused.is_set():
                self.idle.release()
                while self.paused.is_set() and not self.stop.is_set():
                    time.sleep(0.05)
                continue
            try:
                n = kinds[(k + int(rng.integers(0, len(kinds)))) % len(kinds)](rng)
                self.count("reads")
                self.count("bytes", n)
            except OSError as e:
                # EIO after the retries ran out is possible under faults; never wrong bytes.
                self.count("errors")
                if self.counts["errors"] < 5:
                    print(f"soak: reader {k}: {e}", file=sys.stderr)

    # -- the run ----------------------------------------------------------------------------
    def run(self):
        a = self.a
        self.srv = S3Server(self.work / "s3data", buckets=("lake",))
        self.proxy = FaultProxy(self.srv.port, rate=a.fault_rate, seed=7, workdir=str(self.work),
                                faults=("503", "429", "reset", "truncate", "corrupt"))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                        AWS_REGION="us-east-1", AWS_ENDPOINT_URL=self.proxy.endpoint,
                        TENSORFS_HTTP_BACKOFF_MS="10", TENSORFS_HTTP_RETRIES="8")
        self.env.pop("TENSORFS_CONFIG", None)
        np.save(self.work / "x.npy", self.x)
        np.save(self.work / "idx.npy", np.arange(ROWS, dtype=np.int64))
        (self.work / "r").mkdir()
        for i, r in enumerate(self.ragged):
            np.save(self.work / "r" / f"{i:06d}.npy", r)
        self.tfs("create", "s3://lake/soak")
        self.tfs("import", "s3://lake/soak", f"x={self.work / 'x.npy'}",
                 f"idx={self.work / 'idx.npy'}", f"r={self.work / 'r'}", "--chunk-size",
                 "256k", "--quiet")
        np.save(self.work / "v.npy", np.arange(NAMES_ROWS, dtype=np.int64))
        self.tfs("create", "s3://lake/names")
        self.tfs("import", "s3://lake/names", f"v={self.work / 'v.npy'}", "--chunk-size",
                 "64k", "--quiet")
        self.mnt = self.work / "mnt"
        self.mnt.mkdir()
        self.mount()
        pid = self.daemon.pid
        threads = [threading.Thread(target=self.reader, args=(k,)) for k in range(a.readers)]
        for t in threads:
            t.start()
        committer = threading.Thread(target=self.committer)
        committer.start()
        end = time.time() + a.seconds
        remounted = False
        max_rss = 0
        retries = 0
        while time.time() < end:
            time.sleep(0.5)
            try:
                rss = int(next(ln for ln in open(f"/proc/{self.daemon.pid}/status")
                               if ln.startswith("VmRSS")).split()[1]) // 1024
                max_rss = max(max_rss, rss)
            except (OSError, StopIteration):
                pass
            if not remounted and time.time() > end - a.seconds / 2:
                self.paused.set()
                for _ in threads:
                    self.idle.acquire()
                retries += json.loads((self.mnt / ".tensorfs" / "stats").read_text())[
                    "store"]["retries"]
                self.unmount()
                self.mount()
                self.paused.clear()
                remounted = True
        self.stop.set()
        for t in threads + [committer]:
            t.join()
        retries += json.loads((self.mnt / ".tensorfs" / "stats").read_text())["store"]["retries"]
        self.unmount()
        self.proxy.stop()
        self.srv.stop()
        left = [f for f in os.listdir("/dev/shm")
                if f.startswith(f"tensorfs-{pid}-") or f.startswith(f"tensorfs-{self.daemon.pid}-")]
        if left:
            self.problems.append(f"staging files left in /dev/shm: {left}")
        if max_rss > CACHE_MB + VIEW_MB + a.rss_allowance_mb:
            self.problems.append(f"daemon RSS {max_rss} MiB over {CACHE_MB} + {VIEW_MB} + "
                                 f"{a.rss_allowance_mb} MiB")
        c = self.counts
        print(f"soak: {a.seconds:.0f} s, {a.readers} readers: {c['reads']} reads, "
              f"{c['bytes'] / 1e6:.1f} MB verified, {retries} store retries, "
              f"{self.proxy.injected()} faults injected, {c['errors']} read errors, "
              f"{c['mismatches']} mismatches, {c['names']} view names opened over "
              f"{c['commits']} commits, daemon RSS at most {max_rss} MiB, remounted once")
        for p in self.problems:
            print(f"soak: FAIL: {p}")
        return 1 if self.problems or not c["reads"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--readers", type=int, default=8)
    ap.add_argument("--fault-rate", type=float, default=0.05)
    ap.add_argument("--workdir")
    ap.add_argument("--rss-allowance-mb", type=int, default=RSS_ALLOWANCE_MB,
                    help="daemon RSS allowed beyond cache_mem (a sanitizer build needs more)")
    a = ap.parse_args()
    import tempfile
    import shutil
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="tfs-soak-"))
    try:
        sys.exit(Soak(a, work).run())
    finally:
        subprocess.run(["fusermount3", "-u", str(work / "mnt")], capture_output=True)
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
