#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: two nodes reading one s3:// lake over a link with real latency, without and with a
shared cache tier (-o cache_tier=).

Network (tests/bench/netdelay.py): the origin, s3rver with the lake, in the server namespace
behind the delay line (--rtt-ms, default 10); the nodes (two tensorfs mounts, each with its own
memory cache) and the tier (a second s3rver, standing in for a MinIO on the nodes' own disks or
S3 Express in the same zone) in the client namespace, with no added delay. What the origin
served is counted where it leaves the server: the IP bytes the delay line carried to the client
namespace, and the mounts' origin GETs (their .tensorfs/stats "store", which counts the origin
only, the tier apart).

Each epoch reads the whole column (x.npy) and the shuffled view views/seed=1,epoch=0/x.npy
through node A (cold), then through node B (cold, a fresh mount), each timed; with the tier,
node B starts once node A's tier writes have ended (as with a job whose ranks start staggered;
concurrent nodes both fetch what neither has yet). Reports MB/s per node, the origin's GETs and
bytes per node, and node B's time against node A's.

    sudo TENSORFS_BIN=./tensorfs tests/bench/bench_tier.py [--mib 256] [--rtt-ms 10]
         [--chunk-size 4M] [--cache-mb 128]
Needs what bench_s3.py needs (root, s3rver, nsenter, ip); ~1 minute on 2 CPUs at the defaults.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_s3 import (ACCESS, PORT, S3RVER, SECRET, TFS, wait_mount,  # noqa: E402
                      warm_server_files)
from benchkit import mount_stats  # noqa: E402
from netdelay import DelayedNet, _die_with_parent  # noqa: E402

TIER_PORT = 9100  # in the client namespace


class Rig:
    def __init__(self, a):
        self.a = a
        self.work = Path(tempfile.mkdtemp(prefix=f"bench-tier-{os.getpid()}-"))
        self.procs = []
        self.net = DelayedNet(rtt_ms=a.rtt_ms)

    def spawn(self, argv, log):
        with open(log, "wb") as out:
            p = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        self.procs.append(p)
        return p

    def client(self, *argv):
        r = subprocess.run(self.net.client_cmd([TFS, *map(str, argv)]), env=self.env,
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"tensorfs {argv[0]}: {r.stderr[-2000:]}")
        return r.stdout

    def setup(self):
        a = self.a
        self.net.set_rtt(0)
        cfg = self.work / "tensorfs.ini"
        remote = ("[remote \"{n}\"]\nendpoint = {e}\nregion = us-east-1\npath_style = true\n"
                  f"access_key = {ACCESS}\nsecret_key = {SECRET}\n")
        cfg.write_text(remote.format(n="origin", e=f"http://{self.net.server_ip}:{PORT}") +
                       remote.format(n="tier", e=f"http://127.0.0.1:{TIER_PORT}"))
        os.chmod(cfg, 0o600)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env["TENSORFS_CONFIG"] = str(cfg)
        self.origin_dir = self.work / "origin"
        self.tier_dir = self.work / "tier"
        for d in (self.origin_dir, self.tier_dir):
            d.mkdir()
        self.spawn(self.net.server_cmd([S3RVER, "-d", str(self.origin_dir), "-a",
                                        self.net.server_ip, "-p", str(PORT), "--no-vhost-buckets",
                                        "--silent", "--configure-bucket", "bench"]),
                   self.work / "origin.log")
        self.spawn(self.net.client_cmd([S3RVER, "-d", str(self.tier_dir), "-a", "127.0.0.1",
                                        "-p", str(TIER_PORT), "--no-vhost-buckets", "--silent",
                                        "--configure-bucket", "tier"]),
                   self.work / "tier.log")
        time.sleep(1.5)  # both servers listening (the imports below retry meanwhile anyway)
        rows = a.mib * (1 << 20) // 4096
        self.arr = np.random.default_rng(0).integers(0, 64, size=(rows, 4096), dtype=np.uint8)
        npy = self.work / "x.npy"
        np.save(npy, self.arr)
        self.client("create", "s3://origin@bench/lake/ds")
        self.client("import", "s3://origin@bench/lake/ds", f"x={npy}", "--chunk-size",
                    a.chunk_size, "--quiet")
        npy.unlink()
        warm_server_files(self.origin_dir)
        self.net.set_rtt(a.rtt_ms)

    def node(self, name, tier):
        mnt = self.work / name
        mnt.mkdir(exist_ok=True)
        opts = f"cache_mem={self.a.cache_mb}M" + (f",cache_tier={tier}" if tier else "")
        p = self.spawn(self.net.client_cmd([TFS, "mount", "s3://origin@bench/lake", str(mnt),
                                            "-f", "-o", opts]), self.work / f"{name}.log")
        wait_mount(mnt, p, "tensorfs mount", self.work / f"{name}.log")
        return mnt, p

    def unmount(self, mnt, p):
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()

    def epoch(self, mnt):
        """Read the column and the shuffled view; returns (MB/s, stats before, after, link)."""
        files = [mnt / "ds" / "main" / "x.npy",
                 mnt / "ds" / "main" / "views" / "seed=1,epoch=0" / "x.npy"]
        for f in files:
            os.stat(f)
        s0 = mount_stats(mnt)
        l0 = self.net.stats()["bytes_b_to_a"]
        n, t = 0, time.perf_counter()
        for f in files:
            with open(f, "rb", buffering=0) as fh:
                while True:
                    b = fh.read(1 << 20)
                    if not b:
                        break
                    n += len(b)
        dt = time.perf_counter() - t
        s1 = mount_stats(mnt)
        link = self.net.stats()["bytes_b_to_a"] - l0
        x = np.load(files[0], mmap_mode="r")
        for i in (0, len(self.arr) // 2, len(self.arr) - 1):
            if not np.array_equal(x[i], self.arr[i]):
                raise RuntimeError(f"wrong bytes in row {i}")
        del x
        return {"MBps": n / dt / 1e6, "seconds": dt,
                "origin_gets": s1["store"]["gets"] - s0["store"]["gets"],
                "origin_bytes": s1["store"]["bytes_fetched"] - s0["store"]["bytes_fetched"],
                "link_bytes": link, "tier": s1.get("cache_tier")}

    def run_case(self, tier):
        out = {}
        for name in ("A", "B"):
            mnt, p = self.node(f"node{name}-{'tier' if tier else 'none'}", tier)
            try:
                out[name] = self.epoch(mnt)
                if tier:  # node B starts once A's writes to the tier have ended
                    for _ in range(600):
                        t = mount_stats(mnt)["cache_tier"]
                        if t["pending_bytes"] == 0:
                            break
                        time.sleep(0.1)
            finally:
                self.unmount(mnt, p)
        return out

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.net.close()
        shutil.rmtree(self.work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--rtt-ms", type=float, default=10.0)
    ap.add_argument("--chunk-size", default="4M")
    ap.add_argument("--cache-mb", type=int, default=128)
    a = ap.parse_args()
    rig = Rig(a)
    try:
        rig.setup()
        res = {"none": rig.run_case(None), "tier": rig.run_case("s3://tier@tier/shared")}
    finally:
        rig.close()
    print(f"{a.mib} MiB column + its shuffled view per epoch, RTT {a.rtt_ms} ms to the origin, "
          f"cache_mem={a.cache_mb}M per node")
    print(f"{'case':<12}{'node':<6}{'MB/s':>9}{'origin GETs':>13}{'origin MB':>11}"
          f"{'link MB':>9}{'tier hits':>11}{'dropped':>9}")
    for case, nodes in res.items():
        for name, r in nodes.items():
            t = r["tier"] or {}
            print(f"{case:<12}{name:<6}{r['MBps']:>9.0f}{r['origin_gets']:>13}"
                  f"{r['origin_bytes'] / 1e6:>11.1f}{r['link_bytes'] / 1e6:>9.1f}"
                  f"{t.get('hits', 0):>11}{t.get('dropped', 0):>9}")
    for case, nodes in res.items():
        print(f"{case}: node B / node A throughput {nodes['B']['MBps'] / nodes['A']['MBps']:.2f}x")
    print(f"tier, node A / no tier, node A: "
          f"{res['tier']['A']['MBps'] / res['none']['A']['MBps']:.2f}x (the cost of writing back)")


if __name__ == "__main__":
    main()
