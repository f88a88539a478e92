#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: reading one column over S3 with real round-trip latency, tensorfs vs s3fs-fuse vs
parallel curl GETs of the same bytes (the transport limit).

Network: two network namespaces made for the run (tests/bench/netdelay.py): s3rver in one, every
client (the tensorfs mount daemon, s3fs, curl) in the other, joined by a packet delay line that
holds every IP packet for RTT/2 in each direction (the kernel has no `netem`; see netdelay.py).
TCP sees a real RTT (handshakes, slow start, windows), and nothing in the path parses HTTP, so the
latency costs what it costs on a real network and the path itself is not a throughput cap. The
FUSE mounts are started in the client network namespace but live in the normal mount namespace,
so this process reads them directly.

Data: a uint8 column of --mib MiB (4096-byte rows, uniform random values 0..63: 6 bits of
entropy per byte, so zstd gets only ~1.3x and tensorfs's compressed wire bytes are close to the
logical bytes). tensorfs imports it into s3://bench/lake/ds; the same array is uploaded as a plain
.npy object (s3://bench/plain/x.npy) for s3fs and curl. Setup runs with the delay off.

Cases (each cold: a fresh mount, nothing cached on the client; the server's files are kept in the
page cache so the server's disk is not measured), reading the whole file sequentially, 1 MiB
read()s:
  tensorfs   mount s3://bench/lake -f -o cache_mem=1G, read ds/main/x.npy
  view       the same, reading the shuffled view ds/main/views/seed=7,epoch=0/x.npy (every
             row once, in shuffled order: each read takes rows of a whole shuffle window)
  s3fs       s3fs bench MNT -o url=...,use_path_request_style (defaults otherwise), read
             plain/x.npy
  transport  --parallel curl processes (default 8), each fetching --range-mib (default 8) ranged
             GETs of plain/x.npy one after another on one kept-alive connection
  import     tensorfs import of plain/x.npy into a local lake (x=s3://bench/plain/x.npy): the
             object is fetched as ranged GETs of [http] part_size, `parallel` at once (set them
             with --import-env TENSORFS_HTTP_PARALLEL=8,...), into a spool file, then imported;
             MB/s of the .npy's bytes, against the transport case (not run by default)
  import_wds the same bytes as 4 WebDataset shards (samples of 64 rows, 256 KiB, and a class),
             imported by their URLs (--webdataset s3://bench/plain/shards/s0.tar ...): a shard
             is imported as it arrives and the next one's fetch begins as its import begins;
             MB/s of the shards' bytes (not run by default)
  import_npz the same column as the one array of an .npz (--npz s3://bench/plain/x.npz): its
             end (the zip's directory) is fetched first, then its members as they arrive (not
             run by default)
  tensorfs_random, s3fs_random (not run by default)
             np.load(mmap_mode="r") of the file, then 16 rows read one after another, one from
             each sixteenth of the column in a seeded random order (the training pattern
             without a view); reported as rows read per second and ms per row
Each case runs --repeat times (default 3, interleaved) and the median run is reported:
logical MB/s (bytes the reader got) for all; wire MB/s for tensorfs (the mount's .tensorfs/stats
"store".bytes_fetched: compressed chunk bytes plus metadata); the IP bytes the delay line carried
to the client and the TCP connections opened (SYNs it saw) during the read; CPU seconds of the
reader (curl for the transport case), the FUSE daemon, s3rver, the delay line and everything else
(a large "other" means a competing load: the figures are then flagged as suspect); the ratios the
issue targets (tensorfs/s3fs >= 5x, tensorfs/transport >= 0.8x; logical over logical) and the
mount's request and prefetch counters. Targets are informational: the exit status is 0 when every
run completed, whatever the ratios; 1 when a case failed (the other cases still run); 130 when
interrupted. Note that s3rver is one node process: on a small machine it is what bounds the
transport case, so read "transport limit" as "what this server delivers to 8 plain clients".

Per-connection cap (--conn-mbps R, off by default): the delay line also holds each TCP
connection's server-to-client packets to R MB/s, as real S3 does and s3rver on loopback does
not. AWS's S3 performance guidelines plan one concurrent request per 85-90 MB/s, about 15 to
fill a 10 Gb/s NIC, so a client's throughput there is set by how many connections it keeps busy.
Scaled to this rig (s3rver delivers ~500 MB/s), R = 35 models a 10 Gb/s instance, 14 a 25 Gb/s
one and 3.5 a 100 Gb/s one (GPU training instances have 100 Gb/s and more). Give the transport
case as many connections as tensorfs uses (--parallel 24) so that it stays the transport limit.

Cleanup: mounts are unmounted, processes stopped and the namespaces deleted on every exit,
SIGINT/SIGTERM/SIGHUP included. A SIGKILLed run cannot clean up: its child processes get SIGTERM
from the kernel (PR_SET_PDEATHSIG; the FUSE daemons then unmount themselves) and the next run
deletes the namespaces (tfsbench-<pid>-c/-s) and /tmp/bench-s3-<pid>-* it left behind.

usage: sudo TENSORFS_BIN=./tensorfs tests/bench/bench_s3.py [--mib 256] [--rtt-ms 10] [--quick]
       [--conn-mbps R] [--parallel 8] [--chunk-size 4M] [--s3fs-opts parallel_count=24]
       [--repeat 3] [--cases tensorfs,view,s3fs,transport] [--mount-opts prefetch_threads=8] ...
Needs root (network namespaces, TUN devices), s3rver (cd tests/s3 && npm ci), s3fs, curl,
nsenter (util-linux), ip (iproute2), fusermount3, and /usr/bin/python3 with numpy.
Output: a table on stdout and build/bench/bench-s3-<timestamp>.json (--out DIR).
Default run: ~15 s on 2 CPUs; --quick (64 MiB, one run per case): ~5 s.
"""

import argparse
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
from benchkit import mount_stats, proc_cpu_total as cpu_s  # noqa: E402
from netdelay import DelayedNet, _die_with_parent, remove_stale  # noqa: E402

S3RVER = os.environ.get("TENSORFS_S3RVER") or str(REPO / "tests/s3/s3rver.js")
TFS = os.environ.get("TENSORFS_BIN") or str(REPO / "tensorfs")
PORT = 9000  # the server namespace is fresh: nothing else listens there
ACCESS = SECRET = "S3RVER"  # s3rver's built-in account
# curl signs with SigV4 itself; s3rver also wants the payload hash header, which curl 7.88 omits.
SIGN = ["--aws-sigv4", "aws:amz:us-east-1:s3", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
        "--user", f"{ACCESS}:{SECRET}"]
ROW = 4096
TARGET_VS_S3FS = 5.0
TARGET_VS_TRANSPORT = 0.8
SHARDS = 4  # the import_wds case's


class Interrupted(Exception):
    pass


def _on_signal(sig, _frame):
    raise Interrupted(f"signal {sig}")


def clean_env(endpoint):
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith("AWS_")
           and k != "TENSORFS_CONFIG"}
    env.update(AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=endpoint)
    return env


def machine_cpu():
    """(busy, total, steal) jiffies of the whole machine, from /proc/stat; busy excludes the
    time the hypervisor stole (counted apart: a VM's neighbours are a competing load too)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    v += [0] * (8 - len(v))
    idle, steal = v[3] + v[4], v[7]
    total = sum(v[:8])
    return total - idle - steal, total, steal


def read_all(path, bs=1 << 20):
    buf = bytearray(bs)
    n = 0
    t = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
    return n, time.perf_counter() - t


RANDOM_ROWS = 16


def read_random(path, expect, seed=11):
    """The training pattern without a view: np.load(mmap_mode="r"), then RANDOM_ROWS rows read
    one after another, one from each sixteenth of the column (so from different chunks), in a
    seeded random order, each checked against expect afterwards. Returns (bytes, seconds,
    [ms per row]); np.load itself is not timed."""
    a = np.load(path, mmap_mode="r")
    seg = a.shape[0] // RANDOM_ROWS
    rng = np.random.default_rng(seed)
    rows = [int(i * seg + rng.integers(seg)) for i in rng.permutation(RANDOM_ROWS)]
    lat, got = [], []
    t = time.perf_counter()
    for r in rows:
        t0 = time.perf_counter()
        got.append(np.array(a[r]))  # a copy: faults the row's pages in
        lat.append((time.perf_counter() - t0) * 1e3)
    dt = time.perf_counter() - t
    del a
    for r, g in zip(rows, got):
        if not np.array_equal(g, expect[r]):
            raise RuntimeError(f"{path}: wrong bytes in row {r}")
    return sum(g.nbytes for g in got), dt, lat


def wait_mount(path, proc, what, log=None, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.ismount(path):
            return
        if proc.poll() is not None:
            tail = ""
            if log and os.path.exists(log):
                tail = ": " + " | ".join(Path(log).read_text(errors="replace").splitlines()[-3:])
            raise RuntimeError(f"{what} exited with status {proc.returncode} before "
                               f"mounting{tail}")
        time.sleep(0.05)
    raise RuntimeError(f"{what}: {path} not mounted after {timeout}s")


def warm_server_files(root):
    """Pull the server's stored objects into the page cache, so runs measure the network and
    the client, not the server's disk."""
    for dirpath, _, files in os.walk(root):
        for fn in files:
            with open(os.path.join(dirpath, fn), "rb", buffering=0) as f:
                while f.read(8 << 20):
                    pass


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = Path(tempfile.mkdtemp(prefix=f"bench-s3-{os.getpid()}-"))
        self.net = None
        self.procs = []   # (Popen, name), stopped in reverse order
        self.mounts = []  # mountpoints still mounted

    # -- plumbing -------------------------------------------------------------------------------

    def spawn(self, argv, name, env=None, log=None):
        out = open(log, "wb") if log else subprocess.DEVNULL
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                             preexec_fn=_die_with_parent)
        if log:
            out.close()
        self.procs.append((p, name))
        return p

    def run_client(self, argv, env, what):
        r = subprocess.run(self.net.client_cmd(argv), env=env, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{what} failed ({r.returncode}): {(r.stderr or r.stdout)[-2000:]}")
        return r.stdout

    def stop(self, p, timeout=15):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        self.procs = [(q, n) for q, n in self.procs if q is not p]

    def unmount(self, mnt, proc):
        if os.path.ismount(mnt):
            r = subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
            if r.returncode and os.path.ismount(mnt):
                subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
        if proc is not None:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            self.stop(proc)
        if mnt in self.mounts:
            self.mounts.remove(mnt)

    def cleanup(self):
        for m in list(reversed(self.mounts)):
            self.unmount(m, None)
        for p, _ in list(reversed(self.procs)):
            self.stop(p, timeout=5)
        if self.net is not None:
            self.net.close()
            self.net = None
        left = [m for m in (self.work / "mnt-tfs", self.work / "mnt-s3fs") if os.path.ismount(m)]
        if left:  # never delete through a mount
            print(f"bench_s3: still mounted, left in place: {' '.join(map(str, left))}",
                  file=sys.stderr)
        else:
            shutil.rmtree(self.work, ignore_errors=True)

    def snapshot(self, daemon=None):
        t = os.times()
        return {"t": time.perf_counter(), "reader": t.user + t.system,
                "children": t.children_user + t.children_system,
                "daemon": cpu_s(daemon.pid) if daemon is not None else None,
                "s3rver": cpu_s(self.s3.pid), "delayline": cpu_s(self.net.proc.pid),
                "link": self.net.stats(), "machine": machine_cpu()}

    @staticmethod
    def delta(a, b, reader="reader"):
        """What happened between two snapshots: CPU seconds per party, bytes on the link,
        how busy the machine was (1.0 = every CPU busy)."""
        def d(k):
            return None if a[k] is None or b[k] is None else round(b[k] - a[k], 3)
        busy = b["machine"][0] - a["machine"][0]
        total = b["machine"][1] - a["machine"][1]
        steal = b["machine"][2] - a["machine"][2]
        cpu = {"reader": d(reader), "daemon": d("daemon"), "s3rver": d("s3rver"),
               "delayline": d("delayline")}
        # Everything else the machine did meanwhile: kernel threads, and any other load, which
        # makes the run suspect when large.
        hz = os.sysconf("SC_CLK_TCK")
        cpu["other"] = round(busy / hz - sum(v for v in cpu.values() if v is not None), 3)
        cpu["stolen"] = round(steal / hz, 3)
        return {"cpu_s": cpu, "machine_busy": round(busy / total, 3) if total else None,
                "link_bytes_to_client": b["link"]["bytes_b_to_a"] - a["link"]["bytes_b_to_a"],
                "link_bytes_to_server": b["link"]["bytes_a_to_b"] - a["link"]["bytes_a_to_b"],
                "tcp_connects": b["link"]["tcp_connects"] - a["link"]["tcp_connects"]}

    # -- setup ----------------------------------------------------------------------------------

    def setup(self):
        a = self.a
        self.net = DelayedNet(rtt_ms=a.rtt_ms)
        self.net.set_rtt(0)
        self.endpoint = f"http://{self.net.server_ip}:{PORT}"
        self.env = clean_env(self.endpoint)
        self.s3dir = self.work / "s3rver"
        self.s3dir.mkdir()
        self.s3 = self.spawn(self.net.server_cmd(
            [S3RVER, "-d", str(self.s3dir), "-a", self.net.server_ip, "-p", str(PORT),
             "--no-vhost-buckets", "--silent", "--configure-bucket", "bench"]), "s3rver",
            log=self.work / "s3rver.log")
        self.wait_server()

        rows = a.mib * (1 << 20) // ROW
        arr = np.random.default_rng(0).integers(0, 64, size=(rows, ROW), dtype=np.uint8)
        npy = self.work / "x.npy"
        np.save(npy, arr)
        self.arr = arr
        self.npy_bytes = npy.stat().st_size
        self.data_bytes = arr.nbytes
        t = time.perf_counter()
        self.run_client([TFS, "create", "s3://bench/lake/ds"], self.env, "tensorfs create")
        chunk = ["--chunk-size", self.a.chunk_size] if self.a.chunk_size else []
        self.run_client([TFS, "import", "s3://bench/lake/ds", f"x={npy}", *chunk], self.env,
                        "tensorfs import")
        self.import_s = time.perf_counter() - t
        # The same bytes as one plain object, signed with SigV4 by curl.
        self.run_client(["curl", "-sS", "-f", *SIGN, "-T", str(npy),
                         f"{self.endpoint}/bench/plain/x.npy"], self.env, "upload x.npy")
        npy.unlink()
        if "import_wds" in a.cases:
            self.upload_shards(arr)
        if "import_npz" in a.cases:
            self.upload_npz(arr)
        # s3rver keeps each object's body in <bucket>/<key>._S3rver_object.
        self.wire_lake_bytes = sum(f.stat().st_size for f in
                                   (self.s3dir / "bench" / "lake").rglob("*._S3rver_object"))
        self.pw = self.work / "passwd-s3fs"
        with os.fdopen(os.open(self.pw, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            f.write(f"{ACCESS}:{SECRET}\n")  # s3fs refuses a passwd file others can read
        self.net.set_rtt(a.rtt_ms)
        self.conn_measured = None
        if a.conn_mbps:
            self.net.set_conn_rate(a.conn_mbps)
            # What one connection really gets: a single GET of about two seconds at the cap.
            n = min(self.npy_bytes, int(a.conn_mbps * 2e6))
            out = self.run_client(["curl", "-sS", "-f", *SIGN, "-o", "/dev/null", "-r",
                                   f"0-{n - 1}", "-w", "%{speed_download}",
                                   f"{self.endpoint}/bench/plain/x.npy"], self.env,
                                  "one capped connection")
            self.conn_measured = float(out) / 1e6
        self.rtt_measured = self.net.measured_rtt_ms(PORT)

    def wait_server(self, timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            if self.s3.poll() is not None:
                log = (self.work / "s3rver.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"s3rver exited with {self.s3.returncode}: {log}")
            try:
                self.net.measured_rtt_ms(PORT, count=1)
                return
            except RuntimeError:
                time.sleep(0.2)
        raise RuntimeError("s3rver not listening")

    # -- cases ----------------------------------------------------------------------------------

    def case_tensorfs(self):
        return self.tensorfs_scan("x.npy")

    def case_view(self):
        """The same column through a shuffled view (views/seed=7,epoch=0/): the rows of each
        read come from every chunk of a shuffle window, fetched in the view's order."""
        return self.tensorfs_scan("views/seed=7,epoch=0/x.npy")

    def read(self, f, random, who):
        """The whole file (read_all) or RANDOM_ROWS random rows (read_random), checked for
        length. Returns (bytes, seconds, ms per row or None)."""
        if random:
            n, dt, lat = read_random(f, self.arr)
            want = RANDOM_ROWS * self.arr[0].nbytes
        else:
            (n, dt), lat, want = read_all(f), None, os.path.getsize(f)
        if n != want:
            raise RuntimeError(f"{who} read {n} of {want} bytes")
        return n, dt, lat

    def case_tensorfs_random(self):
        """RANDOM_ROWS rows of x.npy at random, each from another chunk (read_random)."""
        return self.tensorfs_scan("x.npy", random=True)

    def case_s3fs_random(self):
        return self.case_s3fs(random=True)

    def tensorfs_scan(self, rel, random=False):
        mnt = self.work / "mnt-tfs"
        mnt.mkdir(exist_ok=True)
        warm_server_files(self.s3dir)
        opts = "cache_mem=1G" + (f",{self.a.mount_opts}" if self.a.mount_opts else "")
        self.mounts.append(mnt)  # from now on: cleanup unmounts it if it is mounted
        p = self.spawn(self.net.client_cmd([TFS, "mount", "s3://bench/lake", str(mnt), "-f",
                                            "-o", opts]),
                       "tensorfs mount", env=self.env, log=self.work / "tfs-mount.log")
        try:
            wait_mount(mnt, p, "tensorfs mount", self.work / "tfs-mount.log")
            f = mnt / "ds" / "main" / rel
            os.stat(f)  # lookups (ref, version, schema) are not part of the scan
            before = mount_stats(mnt)
            s0 = self.snapshot(p)
            n, dt, lat = self.read(f, random, "tensorfs")
            s1 = self.snapshot(p)
            after = mount_stats(mnt)
            # Check the bytes (from the now warm cache): first, middle and last rows of the
            # column; for the view, that its rows are the column's (a sum is order-blind).
            mm = np.load(f, mmap_mode="r")
            if rel == "x.npy":
                for i in (0, len(self.arr) // 2, len(self.arr) - 1):
                    if not np.array_equal(mm[i], self.arr[i]):
                        raise RuntimeError(f"tensorfs returned wrong bytes in row {i}")
            elif mm.shape != self.arr.shape or \
                    int(mm.sum(dtype=np.uint64)) != int(self.arr.sum(dtype=np.uint64)):
                raise RuntimeError("the view's rows are not the column's")
            del mm
        finally:
            self.unmount(mnt, p)
        st_b, st_a = before["store"], after["store"]
        wire = st_a["bytes_fetched"] - st_b["bytes_fetched"]
        return {
            "bytes": n, "seconds": dt, "MBps": n / dt / 1e6,
            "wire_bytes": wire, "wire_MBps": wire / dt / 1e6, **self.delta(s0, s1),
            "requests": {k: st_a.get(k, 0) - st_b.get(k, 0) for k in
                         ("gets", "urgent_gets", "ranged_gets", "heads", "lists", "retries")},
            "stats_before": before, "stats_after": after,
            **({"ms_per_row": lat} if random else {}),
        }

    def case_s3fs(self, random=False):
        mnt = self.work / "mnt-s3fs"
        mnt.mkdir(exist_ok=True)
        warm_server_files(self.s3dir)
        opts = (f"url={self.endpoint},use_path_request_style,passwd_file={self.pw},ro,"
                f"endpoint=us-east-1" + (f",{self.a.s3fs_opts}" if self.a.s3fs_opts else ""))
        self.mounts.append(mnt)
        p = self.spawn(self.net.client_cmd(["s3fs", "bench", str(mnt), "-f", "-o", opts]),
                       "s3fs", env=self.env, log=self.work / "s3fs.log")
        try:
            wait_mount(mnt, p, "s3fs", self.work / "s3fs.log")
            f = mnt / "plain" / "x.npy"
            end = time.time() + 20
            while not f.exists():
                if time.time() > end:
                    raise RuntimeError("s3fs does not show plain/x.npy")
                time.sleep(0.1)
            size = os.path.getsize(f)
            if size != self.npy_bytes:
                raise RuntimeError(f"s3fs shows x.npy with {size} bytes, not {self.npy_bytes}")
            s0 = self.snapshot(p)
            n, dt, lat = self.read(f, random, "s3fs")
            s1 = self.snapshot(p)
        finally:
            self.unmount(mnt, p)
        d = self.delta(s0, s1)
        # s3fs does not say what it fetched: the delay line's bytes to the client stand in.
        return {"bytes": n, "seconds": dt, "MBps": n / dt / 1e6,
                "wire_MBps": (d["link_bytes_to_client"] if random else n) / dt / 1e6, **d,
                "options": opts.replace(str(self.pw), "PASSWD"),
                **({"ms_per_row": lat} if random else {})}

    def upload_shards(self, arr):
        """The column's rows as SHARDS WebDataset shards, samples of 64 rows and a class."""
        import io
        import tarfile

        self.shard_bytes, self.shard_samples = 0, 0
        per = len(arr) // 64 // SHARDS
        for k in range(SHARDS):
            path = self.work / f"s{k}.tar"
            with tarfile.open(path, "w") as t:
                for i in range(per):
                    s = k * per + i
                    for name, data in ((f"{s:06d}.bin", arr[s * 64:(s + 1) * 64].tobytes()),
                                       (f"{s:06d}.cls", str(s % 10).encode())):
                        info = tarfile.TarInfo(name)
                        info.size = len(data)
                        t.addfile(info, io.BytesIO(data))
            self.run_client(["curl", "-sS", "-f", *SIGN, "-T", str(path),
                             f"{self.endpoint}/bench/plain/shards/s{k}.tar"], self.env,
                            f"upload s{k}.tar")
            self.shard_bytes += path.stat().st_size
            self.shard_samples += per
            path.unlink()

    def upload_npz(self, arr):
        """The column as the one array of an .npz (stored, as np.savez writes it)."""
        path = self.work / "x.npz"
        np.savez(path, x=arr)
        self.run_client(["curl", "-sS", "-f", *SIGN, "-T", str(path),
                         f"{self.endpoint}/bench/plain/x.npz"], self.env, "upload x.npz")
        self.npz_bytes = path.stat().st_size
        path.unlink()

    def run_import(self, args, rows, nbytes):
        """`tensorfs import` of args into a new local lake, timed; checked for its rows."""
        lake = self.work / "import-lake"
        shutil.rmtree(lake, ignore_errors=True)
        env = dict(self.env)
        for kv in filter(None, self.a.import_env.split(",")):
            k, v = kv.split("=", 1)
            env[k] = v
        self.run_client([TFS, "create", f"file://{lake}/ds"], env, "tensorfs create")
        warm_server_files(self.s3dir)
        s0 = self.snapshot()
        self.run_client([TFS, "import", f"file://{lake}/ds", *args, "--quiet"], env,
                        "tensorfs import")
        s1 = self.snapshot()
        dt = s1["t"] - s0["t"]
        info = json.loads(self.run_client([TFS, "info", f"file://{lake}/ds", "--json"], env,
                                          "tensorfs info"))
        if info["rows"] != rows:
            raise RuntimeError(f"the import made {info['rows']} rows of {rows}")
        shutil.rmtree(lake, ignore_errors=True)
        return {"bytes": nbytes, "seconds": dt, "MBps": nbytes / dt / 1e6,
                "wire_MBps": nbytes / dt / 1e6, "import_env": self.a.import_env,
                **self.delta(s0, s1, reader="children")}

    def case_import(self):
        return self.run_import(["x=s3://bench/plain/x.npy"], len(self.arr), self.npy_bytes)

    def case_import_wds(self):
        return self.run_import(["--webdataset", *(f"s3://bench/plain/shards/s{k}.tar"
                                                  for k in range(SHARDS))],
                               self.shard_samples, self.shard_bytes)

    def case_import_npz(self):
        return self.run_import(["--npz", "s3://bench/plain/x.npz"], len(self.arr),
                               self.npz_bytes)

    def case_transport(self):
        warm_server_files(self.s3dir)
        size, rng, par = self.npy_bytes, self.a.range_mib << 20, self.a.parallel
        ranges = [(o, min(size, o + rng) - 1) for o in range(0, size, rng)]
        url = f"{self.endpoint}/bench/plain/x.npy"
        cmds = []
        for w in range(par):
            argv = ["curl"]
            for i, (lo, hi) in enumerate(ranges[w::par]):
                if i:
                    argv.append("--next")
                argv += ["-sS", "-f", "-o", "/dev/null", "-w", "%{size_download}\\n", *SIGN,
                         "-r", f"{lo}-{hi}", url]
            if len(argv) > 1:
                cmds.append(argv)
        s0 = self.snapshot()
        t = time.perf_counter()
        ps = [subprocess.Popen(self.net.client_cmd(c), env=self.env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
              for c in cmds]
        self.procs += [(p, "curl") for p in ps]
        outs = [p.communicate() for p in ps]
        dt = time.perf_counter() - t
        self.procs = [(q, n) for q, n in self.procs if q not in ps]
        s1 = self.snapshot()
        for p, (_, err) in zip(ps, outs):
            if p.returncode:
                raise RuntimeError(f"curl failed ({p.returncode}): {err[-1000:]}")
        n = sum(int(x) for out, _ in outs for x in out.split())
        if n != size:
            raise RuntimeError(f"curl fetched {n} of {size} bytes")
        return {"bytes": n, "seconds": dt, "MBps": n / dt / 1e6, "wire_MBps": n / dt / 1e6,
                "connections": len(cmds), "range_bytes": rng, "requests": len(ranges),
                **self.delta(s0, s1, reader="children")}


def median_run(runs):
    """The run with the median throughput (the lower middle one for an even count)."""
    ok = sorted((r for r in runs if "error" not in r), key=lambda r: r["MBps"])
    return ok[(len(ok) - 1) // 2] if ok else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--mib", type=int, default=None, help="column size in MiB (default 256; "
                    "--quick: 64)")
    ap.add_argument("--rtt-ms", type=float, default=10.0, help="round-trip time added between "
                    "clients and server (default 10)")
    ap.add_argument("--repeat", type=int, default=None, help="cold runs per case, the median "
                    "reported (default 3; --quick: 1)")
    ap.add_argument("--conn-mbps", type=float, default=0.0, help="cap each TCP connection from "
                    "server to client at this many MB/s, as S3 caps one request (default: no cap)")
    ap.add_argument("--parallel", type=int, default=8, help="curl connections (default 8)")
    ap.add_argument("--range-mib", type=int, default=8, help="curl range size (default 8)")
    ap.add_argument("--cases", default="tensorfs,view,s3fs,transport")
    ap.add_argument("--mount-opts", default="", help="extra tensorfs -o options")
    ap.add_argument("--chunk-size", default="", help="tensorfs import --chunk-size (default: "
                    "the import's, 4M)")
    ap.add_argument("--s3fs-opts", default="", help="extra s3fs -o options")
    ap.add_argument("--import-env", default="", help="VAR=VALUE,... for the import case's "
                    "tensorfs (e.g. TENSORFS_HTTP_PARALLEL=8)")
    ap.add_argument("--quick", action="store_true", help="64 MiB, one run per case")
    ap.add_argument("--out", default=str(REPO / "build" / "bench"))
    a = ap.parse_args()
    a.mib = a.mib or (64 if a.quick else 256)
    a.repeat = a.repeat or (1 if a.quick else 3)
    cases = [c.strip() for c in a.cases.split(",") if c.strip()]
    for c in cases:
        if c not in ("tensorfs", "view", "s3fs", "transport", "import", "import_wds", "import_npz",
                     "tensorfs_random", "s3fs_random"):
            sys.exit(f"bench_s3: unknown case {c!r}")

    if os.geteuid() != 0:
        sys.exit("bench_s3: needs root (it creates network namespaces and a TUN delay line)")
    need = {"s3rver": S3RVER, "tensorfs": TFS}
    for tool in ("s3fs", "curl", "nsenter", "ip", "fusermount3"):
        need[tool] = shutil.which(tool)
    missing = [k for k, v in need.items() if not v or not os.access(v, os.X_OK)]
    if missing:
        sys.exit(f"bench_s3: missing {', '.join(missing)} (apt-get install s3fs curl util-linux "
                 f"iproute2 fuse3; cd tests/s3 && npm ci; make)")

    stale = remove_stale()
    # Work directories of killed runs (bench-s3-<pid>-*), unless something is mounted there.
    mounted = Path("/proc/mounts").read_text()
    for d in Path(tempfile.gettempdir()).glob("bench-s3-*-*"):
        pid = d.name.split("-")[2]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}") and str(d) not in mounted:
            shutil.rmtree(d, ignore_errors=True)
            stale.append(str(d))
    if stale:
        print(f"bench_s3: removed what a killed run left: {' '.join(stale)}")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    b = Bench(a)
    results = {c: [] for c in cases}
    crashed = False
    try:
        t0 = time.time()
        b.setup()
        print(f"setup: {a.mib} MiB column, import {b.import_s:.1f}s, RTT {b.rtt_measured:.2f} ms "
              f"measured (TCP connect)", flush=True)
        for rep in range(a.repeat):
            for c in cases:
                try:
                    r = getattr(b, f"case_{c}")()
                except Interrupted:
                    raise
                except Exception as e:  # noqa: BLE001 - report, go on with the other cases
                    crashed = True
                    r = {"error": f"{type(e).__name__}: {e}"}
                results[c].append(r)
                msg = r.get("error") or f"{r['MBps']:.1f} MB/s in {r['seconds']:.2f}s"
                print(f"  run {rep + 1}/{a.repeat} {c}: {msg}", flush=True)
        wall = time.time() - t0
    except Interrupted as e:
        print(f"bench_s3: interrupted ({e}), cleaning up", file=sys.stderr)
        sys.exit(130)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # let the cleanup finish
        b.cleanup()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)

    med = {c: median_run(results[c]) for c in cases}
    tf, s3, tr = (med.get(k) for k in ("tensorfs", "s3fs", "transport"))
    ratios = {}
    if tf and s3:
        ratios["tensorfs_vs_s3fs"] = tf["MBps"] / s3["MBps"]
    if tf and tr:
        ratios["tensorfs_vs_transport"] = tf["MBps"] / tr["MBps"]
        ratios["tensorfs_wire_vs_transport"] = tf["wire_MBps"] / tr["MBps"]
    zratio = b.data_bytes / b.wire_lake_bytes if b.wire_lake_bytes else None
    summary = {
        "when": datetime.datetime.now().isoformat(timespec="seconds"),
        "mib": a.mib, "logical_bytes": b.data_bytes, "npy_bytes": b.npy_bytes,
        "data": "uint8, 4096-byte rows, uniform random 0..63 per byte",
        "lake_bytes_on_server": b.wire_lake_bytes, "zstd_ratio": zratio,
        "rtt_ms": a.rtt_ms, "rtt_measured_ms": b.rtt_measured, "conn_mbps": a.conn_mbps,
        "conn_measured_MBps": b.conn_measured,
        "latency": "TUN delay line between two network namespaces (tests/bench/netdelay.py), "
                   "RTT/2 each way, MTU 1500",
        "tensorfs_mount_opts": "cache_mem=1G" + (f",{a.mount_opts}" if a.mount_opts else ""),
        "tensorfs_chunk_size": a.chunk_size or "4M",
        "s3fs_opts": a.s3fs_opts, "transport": {"parallel": a.parallel, "range_mib": a.range_mib},
        "repeat": a.repeat, "reported": "median run per case", "wall_s": wall,
        "cpus": os.cpu_count(), "median": med, "ratios": ratios,
        "targets": {"tensorfs_vs_s3fs": TARGET_VS_S3FS,
                    "tensorfs_vs_transport": TARGET_VS_TRANSPORT},
        "runs": results,
    }

    print()
    cap = (f", each connection capped at {a.conn_mbps:g} MB/s (one connection measured: "
           f"{b.conn_measured:.1f})" if a.conn_mbps else "")
    print(f"S3 (s3rver) over a {a.rtt_ms:g} ms RTT link{cap} (TCP connect: {b.rtt_measured:.2f} ms), "
          f"{a.mib} MiB uint8 column, cold sequential read, 1 MiB read()s, "
          f"median of {a.repeat} on {os.cpu_count()} CPUs")
    if zratio:
        print(f"data: uniform random 0..63 per byte, zstd {zratio:.2f}x: tensorfs moves the "
              f"compressed chunks, s3fs and curl the raw .npy")
    print(f"{'':<31}{'logical':>9}{'wire':>8}{'link':>8}{'TCP':>6}   {'CPU seconds':<35}"
          f"{'busy':>5}")
    print(f"{'':<31}{'MB/s':>9}{'MB/s':>8}{'MB':>8}{'conns':>6}   "
          f"{'reader client s3rver  delay  other':<35}")
    labels = {"tensorfs": "tensorfs (cache_mem=1G)", "view": "tensorfs, shuffled view",
              "s3fs": f"s3fs-fuse ({a.s3fs_opts or 'defaults'})"[:31],
              "transport": f"curl x{a.parallel}, {a.range_mib} MiB ranges",
              "import": "tensorfs import x=s3://...",
              "import_wds": f"tensorfs import {SHARDS} shards",
              "import_npz": "tensorfs import --npz s3://...",
              "tensorfs_random": f"tensorfs, {RANDOM_ROWS} random rows",
              "s3fs_random": f"s3fs, {RANDOM_ROWS} random rows"}
    for c in cases:
        r = med[c]
        if not r:
            print(f"{labels[c]:<31}{'error: ' + results[c][-1].get('error', '?')}")
            continue
        cpu = r["cpu_s"]

        def f(x):
            return f"{max(x, 0.0):6.2f}" if x is not None else "     -"
        print(f"{labels[c]:<31}{r['MBps']:9.1f}{r['wire_MBps']:8.1f}"
              f"{r['link_bytes_to_client'] / 1e6:8.1f}{r['tcp_connects']:6d}   "
              f"{f(cpu['reader'])} {f(cpu['daemon'])} {f(cpu['s3rver'])} {f(cpu['delayline'])}"
              f" {f(cpu['other'] + cpu['stolen'])}{r['machine_busy'] * 100:5.0f}%")
    print("(wire: payload bytes fetched; link: IP bytes server->client on the delay line; "
          "conns: TCP connections opened during the read;\n client: the FUSE daemon (curl's CPU "
          "is under reader); other: every other process, kernel\n threads and time stolen by the "
          "hypervisor (high: a competing load, figures suspect); busy: all CPUs, steal "
          "excluded)")
    noisy = sorted({c for c in cases for r in results[c] if "error" not in r
                    and (r["cpu_s"]["other"] or 0) + r["cpu_s"]["stolen"] > 0.25 * r["seconds"]})
    if noisy:
        summary["competing_load"] = noisy
        print(f"WARNING: other processes (or the hypervisor: steal) took more than a quarter "
              f"of a CPU during runs of "
              f"{', '.join(noisy)}: the machine was not quiet, figures are suspect")
    print()
    for k, target in (("tensorfs_vs_s3fs", TARGET_VS_S3FS),
                      ("tensorfs_vs_transport", TARGET_VS_TRANSPORT)):
        if k in ratios:
            v = ratios[k]
            print(f"{k:<28}{v:6.2f}x   target >= {target:g}x   {'ok' if v >= target else 'MISS'}")
    if med.get("import") and tr:
        ratios["import_vs_transport"] = med["import"]["MBps"] / tr["MBps"]
        print(f"{'import_vs_transport':<28}{ratios['import_vs_transport']:6.2f}x   (the .npy's "
              f"bytes a second, a fetch and an import against a fetch; informational)")
    if med.get("import_wds") and tr:
        ratios["import_wds_vs_transport"] = med["import_wds"]["MBps"] / tr["MBps"]
        print(f"{'import_wds_vs_transport':<28}{ratios['import_wds_vs_transport']:6.2f}x   (the "
              f"shards' bytes a second; informational)")
    if med.get("import_npz") and tr:
        ratios["import_npz_vs_transport"] = med["import_npz"]["MBps"] / tr["MBps"]
        print(f"{'import_npz_vs_transport':<28}{ratios['import_npz_vs_transport']:6.2f}x   (the "
              f".npz's bytes a second; informational)")
    if "tensorfs_wire_vs_transport" in ratios:
        print(f"{'tensorfs_wire_vs_transport':<28}{ratios['tensorfs_wire_vs_transport']:6.2f}x"
              f"   (wire bytes over wire bytes, informational)")
    for c in ("tensorfs_random", "s3fs_random"):
        if med.get(c):
            lat = sorted(med[c]["ms_per_row"])
            print(f"{labels[c] + ', ms per row':<36} median {lat[len(lat) // 2]:7.1f}   "
                  f"max {lat[-1]:7.1f}")
    tr_, s3r = med.get("tensorfs_random"), med.get("s3fs_random")
    if tr_ and s3r:
        ratios["tensorfs_vs_s3fs_random_rows"] = tr_["MBps"] / s3r["MBps"]
        print(f"{'tensorfs_vs_s3fs_random_rows':<28}"
              f"{ratios['tensorfs_vs_s3fs_random_rows']:6.2f}x   (rows per second, informational)")
    if tr_:
        rq = tr_["requests"]
        print(f"tensorfs during the random reads: {rq['gets']} GETs ({rq['urgent_gets']} a reader "
              f"waited for, in parallel ranges)")
    if tf:
        rq, pf = tf["requests"], tf["stats_after"]["prefetch"]
        print(f"tensorfs during the scan: {rq['gets']} GETs ({rq['ranged_gets']} ranged), "
              f"{rq['heads']} HEADs, {rq['retries']} retries; prefetch: {pf['threads']} threads, "
              f"scheduled {pf['scheduled']}, loaded {pf['loaded']}, hits {pf['hits']}, "
              f"wasted {pf['wasted']}, throttled {pf['throttled']}")
    os.makedirs(a.out, exist_ok=True)
    out = Path(a.out) / f"bench-s3-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nwrote {out} (wall {wall:.0f}s)")
    sys.exit(1 if crashed else 0)


if __name__ == "__main__":
    main()
