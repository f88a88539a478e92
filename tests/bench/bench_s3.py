#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: reading one column over S3 with added latency, tensorfs vs s3fs-fuse vs parallel
curl GETs of the same bytes (the transport limit).

Everything runs on loopback: s3rver holds the bucket, a delaying proxy (tests/integration/
faultproxy.py, no faults) adds DELAY_MS to every request, tensorfs mounts the lake through it,
s3fs-fuse (Debian `s3fs`) mounts the same bucket through it and reads the same bytes stored as a
plain .npy, and `curl` fetches that .npy as PARALLEL concurrent ranges. Prints one JSON object
with the throughputs and the ratios the issue targets (>= 5x s3fs, >= 0.8x curl).

usage: TENSORFS_BIN=./tensorfs tests/bench/bench_s3.py [--mib 256] [--delay-ms 5] [--parallel 8]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
from faultproxy import FaultProxy  # noqa: E402

S3RVER = REPO / "tests/s3/node_modules/.bin/s3rver"
TFS = os.environ.get("TENSORFS_BIN") or str(REPO / "tensorfs")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=20):
    import socket
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on {port}")


def drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        pass


def read_all(path, bs=1 << 20):
    t = time.perf_counter()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(bs)
            if not b:
                break
            n += len(b)
    return n, time.perf_counter() - t


def wait_mount(path, proc, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.ismount(path):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"mount of {path} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{path} not mounted")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--delay-ms", type=float, default=5.0)
    ap.add_argument("--parallel", type=int, default=8)
    a = ap.parse_args()
    for tool in (str(S3RVER), shutil.which("s3fs"), shutil.which("curl")):
        if not tool or not os.access(tool, os.X_OK):
            sys.exit(f"bench_s3: missing {tool or 's3fs/curl'} (apt-get install s3fs curl; "
                     f"cd tests/s3 && npm ci)")
    work = Path(tempfile.mkdtemp(prefix="bench-s3-"))
    procs, mounts, res, proxy = [], [], {}, None
    try:
        port = free_port()
        s3 = subprocess.Popen([str(S3RVER), "-d", str(work / "data"), "-a", "127.0.0.1", "-p",
                               str(port), "-s", "--no-vhost-buckets", "--configure-bucket",
                               "bench"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(s3)
        wait_port(port)
        proxy = FaultProxy(port, delay_s=a.delay_ms / 1000.0, workdir=work)
        env = dict(os.environ, AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                   AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_REGION="us-east-1")
        rows = a.mib * (1 << 20) // 4096
        arr = np.random.default_rng(0).integers(0, 255, size=(rows, 4096), dtype=np.uint8)
        arr[:, 2048:] = 0  # compressible by half, like real data
        npy = work / "x.npy"
        np.save(npy, arr)
        subprocess.run([TFS, "create", "s3://bench/lake/ds"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([TFS, "import", "s3://bench/lake/ds", f"x={npy}"], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        # The same bytes as a plain object for s3fs and curl (s3rver accepts unsigned requests).
        data = npy.read_bytes()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/bench/plain/x.npy", data=data,
                                     method="PUT")
        urllib.request.urlopen(req).read()
        nbytes = len(data)
        env_proxy = dict(env, AWS_ENDPOINT_URL=proxy.endpoint)

        # tensorfs
        mnt = work / "tfs"
        mnt.mkdir()
        p = subprocess.Popen([TFS, "mount", "s3://bench/lake", str(mnt), "-f"], env=env_proxy,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(p)
        wait_mount(mnt, p)
        mounts.append(mnt)
        drop_caches()
        n, dt = read_all(mnt / "ds" / "main" / "x.npy")
        res["tensorfs_MBps"] = n / dt / 1e6

        # s3fs-fuse
        smnt = work / "s3fs"
        smnt.mkdir()
        pw = work / "passwd"
        pw.write_text("S3RVER:S3RVER\n")
        os.chmod(pw, 0o600)
        subprocess.run(["s3fs", "bench", str(smnt), "-o", f"url={proxy.endpoint}",
                        "-o", "use_path_request_style", "-o", f"passwd_file={pw}",
                        "-o", "ro"], check=True)
        wait_mount(smnt, None)
        mounts.append(smnt)
        end = time.time() + 20
        while time.time() < end and not (smnt / "plain" / "x.npy").exists():
            time.sleep(0.1)
        if os.path.getsize(smnt / "plain" / "x.npy") != nbytes:
            raise RuntimeError(f"s3fs shows the object with size "
                               f"{os.path.getsize(smnt / 'plain' / 'x.npy')}, not {nbytes}")
        drop_caches()
        n2, dt2 = read_all(smnt / "plain" / "x.npy")
        if n2 != nbytes:
            raise RuntimeError(f"s3fs read {n2} of {nbytes} bytes")
        res["s3fs_MBps"] = n2 / dt2 / 1e6

        # parallel curl GETs of the same object: the transport limit
        part = -(-nbytes // a.parallel)
        t = time.perf_counter()
        cps = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null", "-r",
                                 f"{i * part}-{min(nbytes, (i + 1) * part) - 1}",
                                 f"{proxy.endpoint}/bench/plain/x.npy"])
               for i in range(a.parallel)]
        if any(c.wait() for c in cps):
            raise RuntimeError("curl failed")
        res["curl_parallel_MBps"] = nbytes / (time.perf_counter() - t) / 1e6
        res.update(bytes=nbytes, delay_ms=a.delay_ms, parallel=a.parallel,
                   x_vs_s3fs=res["tensorfs_MBps"] / res["s3fs_MBps"],
                   x_vs_curl=res["tensorfs_MBps"] / res["curl_parallel_MBps"])
        print(json.dumps(res, indent=2))
    finally:
        if proxy:
            proxy.stop()
        for m in reversed(mounts):
            subprocess.run(["fusermount3", "-u", str(m)], capture_output=True)
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
