#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`tensorfs import --images s3://...` of an image tree on S3 over a link with a real round
trip, against what the same link and server give a client that only fetches.

usage: sudo tests/bench/bench_url_images.py [--rtt-ms 20] [--images 1000] [--threads 2]
                                            [--before OLD_TENSORFS] [--rounds 2] [--manifest]

s3rver runs in a network namespace joined to the client's by netdelay.py's delay line (every
packet held rtt/2 each way). The tree is N noisy 256x256 JPEGs in 10 class directories,
imported `--size 224x224 --crop --labels-from-dirs`; with --manifest, a JSON Lines file beside
the tree names each image and a caption, imported `--jsonl --media img=image` (the images at
their own size). Each round prints, in this order:
  - the import by URL (TENSORFS_BIN, and --before's binary when given), images/s;
  - the same files fetched by 32 botocore threads and nothing else (the link and server's
    limit for this tree: every GET a round trip), files/s;
  - the import of the local tree (the decode's limit on this machine), images/s;
and the ratios of the import to both. Root is needed for the namespaces."""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_s3 import PORT, S3RVER, SIGN, TFS, clean_env  # noqa: E402
from netdelay import DelayedNet  # noqa: E402

FETCH_ONLY = """
import sys, time, botocore.session, botocore.config
from concurrent.futures import ThreadPoolExecutor
c = botocore.session.get_session().create_client(
    's3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='S3RVER',
    aws_secret_access_key='S3RVER',
    config=botocore.config.Config(max_pool_connections=32, s3={'addressing_style': 'path'}))
keys = [o['Key'] for p in c.get_paginator('list_objects_v2').paginate(Bucket='bench',
        Prefix='img/') for o in p.get('Contents', [])]
t = time.monotonic()
with ThreadPoolExecutor(32) as ex:
    sum(ex.map(lambda k: len(c.get_object(Bucket='bench', Key=k)['Body'].read()), keys))
print(len(keys) / (time.monotonic() - t))
"""

UPLOAD = """
import os, subprocess, sys
top, url = sys.argv[1], sys.argv[2]
for d, _, fs in os.walk(top):
    for f in fs:
        p = os.path.join(d, f)
        subprocess.run(['curl', '-sS', '-f', *sys.argv[3:], '-T', p,
                        f'{url}/bench/img/{os.path.relpath(p, top)}'], check=True)
"""


def make_tree(top, n):
    import json
    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 190, 256)[None, :, None]
    lines = []
    for i in range(n):
        d = top / f"c{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        a = (rng.integers(0, 64, (256, 256, 3)) + ramp).astype(np.uint8)
        Image.fromarray(a).save(d / f"{i:05d}.jpg", quality=90)
        lines.append(json.dumps({"cap": f"image {i}", "img": f"img/c{i % 10}/{i:05d}.jpg"}))
    (top.parent / "m.jsonl").write_text("\n".join(lines) + "\n")


def import_rate(argv_for, n, env=None):
    """n / seconds of the import argv_for(dataset URL) gives, into a new local lake."""
    lake = Path(tempfile.mkdtemp(prefix="bench-url-images-lake-"))
    try:
        subprocess.run([TFS, "create", f"file://{lake}/d"], check=True, capture_output=True)
        t = time.monotonic()
        p = subprocess.run(argv_for(f"file://{lake}/d"), env=env, capture_output=True, text=True)
        dt = time.monotonic() - t
        if p.returncode:
            raise RuntimeError(f"import failed: {p.stderr[-2000:]}")
        return n / dt
    finally:
        shutil.rmtree(lake, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rtt-ms", type=float, default=20.0)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--before", help="another tensorfs binary, run alternately")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--manifest", action="store_true",
                    help="import a JSON Lines file naming the images (--media img=image)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-url-images-"))
    net = s3 = None
    try:
        make_tree(work / "img", a.images)
        net = DelayedNet(rtt_ms=a.rtt_ms)
        net.set_rtt(0)
        ep = f"http://{net.server_ip}:{PORT}"
        env = clean_env(ep)
        s3 = subprocess.Popen(net.server_cmd(
            [S3RVER, "-d", str(work / "s3"), "-a", net.server_ip, "-p", str(PORT),
             "--no-vhost-buckets", "--silent", "--configure-bucket", "bench"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(150):
            try:
                net.measured_rtt_ms(PORT, count=1)
                break
            except RuntimeError:
                time.sleep(0.2)
        subprocess.run(net.client_cmd([sys.executable, "-c", UPLOAD, str(work / "img"), ep,
                                       *SIGN]), env=env, check=True)
        subprocess.run(net.client_cmd(["curl", "-sS", "-f", *SIGN, "-T", str(work / "m.jsonl"),
                                       f"{ep}/bench/m.jsonl"]), env=env, check=True)
        net.set_rtt(a.rtt_ms)
        if a.manifest:
            what = ["--jsonl", "s3://bench/m.jsonl", "--media", "img=image"]
            local_what = ["--jsonl", str(work / "m.jsonl"), "--media", "img=image"]
            opts = ["--threads", str(a.threads)]
        else:
            what = ["--images", "s3://bench/img/"]
            local_what = ["--images", str(work / "img")]
            opts = ["--size", "224x224", "--crop", "--labels-from-dirs", "--threads",
                    str(a.threads)]
        bins = [("tensorfs", TFS)] + ([("before", a.before)] if a.before else [])
        print(f"{a.images} JPEGs 256x256 on s3rver{' named by a JSON Lines file' if a.manifest else ''}, {a.rtt_ms:g} ms round trip "
              f"(measured {net.measured_rtt_ms(PORT):.1f}), {a.threads} import threads")
        for r in range(a.rounds):
            got = {}
            for name, b in bins:
                got[name] = import_rate(lambda ds, b=b: net.client_cmd(
                    [b, "import", ds, *what, *opts]), a.images, env)
            q = subprocess.run(net.client_cmd([sys.executable, "-c", FETCH_ONLY, ep]), env=env,
                               capture_output=True, text=True, check=True)
            fetch = float(q.stdout)
            local = import_rate(lambda ds: [TFS, "import", ds, *local_what, *opts], a.images)
            line = "  ".join(f"{k} {v:,.0f} images/s" for k, v in got.items())
            print(f"round {r + 1}: {line}  |  32 botocore threads fetching only: {fetch:,.0f} "
                  f"files/s  |  local tree: {local:,.0f} images/s  |  tensorfs "
                  f"{got['tensorfs'] / fetch:.2f}x the fetch, {got['tensorfs'] / local:.2f}x "
                  "the local import" +
                  (f", {got['tensorfs'] / got['before']:.2f}x before" if a.before else ""),
                  flush=True)
    finally:
        if s3 is not None:
            s3.terminate()
            s3.wait()
        if net is not None:
            net.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
