#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`tensorfs import` of a tree of many small files on S3 (images, the images a JSON Lines file
names, or audio clips) over a link with a real round trip, against what the same link and
server give a client that only fetches.

usage: sudo tests/bench/bench_url_import.py [--kind images|manifest|audio] [--rtt-ms 20]
                                            [--files 1000] [--threads 2]
                                            [--before OLD_TENSORFS] [--rounds 2]

s3rver runs in a network namespace joined to the client's by netdelay.py's delay line (every
packet held rtt/2 each way). The files:
  - images: N noisy 256x256 JPEGs in 10 class directories, imported
    `--images --size 224x224 --crop --labels-from-dirs`;
  - manifest: the same JPEGs named, with a caption each, by a JSON Lines file beside them,
    imported `--jsonl --media img=image` (the images at their own size);
  - audio: N WAV clips of 2 s (16 kHz mono, 64 KB) in 10 class directories, imported
    `--audio --labels-from-dirs`.
Each round prints, in this order:
  - the import by URL (TENSORFS_BIN, and --before's binary when given), files/s;
  - the same files fetched by 32 botocore threads and nothing else (the link and server's
    limit for this tree: every GET a round trip), files/s;
  - the import of the local files (the decode's limit on this machine), files/s;
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


def make_audio(top, n):
    import wave
    import numpy as np
    rng = np.random.default_rng(0)
    t = np.arange(32000) / 16000
    for i in range(n):
        d = top / f"c{i % 10}"
        d.mkdir(parents=True, exist_ok=True)
        x = 0.3 * np.sin(2 * np.pi * (200 + 10 * i) * t) + 0.05 * rng.standard_normal(len(t))
        with wave.open(str(d / f"{i:05d}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            w.writeframes((x * 32767).astype("<i2").tobytes())


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
    lake = Path(tempfile.mkdtemp(prefix="bench-url-import-lake-"))
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
    ap.add_argument("--kind", choices=("images", "manifest", "audio"), default="images")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--before", help="another tensorfs binary, run alternately")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-url-import-"))
    net = s3 = None
    try:
        if a.kind == "audio":
            make_audio(work / "img", a.files)
        else:
            make_tree(work / "img", a.files)
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
        if a.kind == "manifest":
            subprocess.run(net.client_cmd(["curl", "-sS", "-f", *SIGN, "-T",
                                           str(work / "m.jsonl"), f"{ep}/bench/m.jsonl"]),
                           env=env, check=True)
        net.set_rtt(a.rtt_ms)
        if a.kind == "manifest":
            what = ["--jsonl", "s3://bench/m.jsonl", "--media", "img=image"]
            local_what = ["--jsonl", str(work / "m.jsonl"), "--media", "img=image"]
            opts = ["--threads", str(a.threads)]
        elif a.kind == "audio":
            what = ["--audio", "s3://bench/img/"]
            local_what = ["--audio", str(work / "img")]
            opts = ["--labels-from-dirs", "--threads", str(a.threads)]
        else:
            what = ["--images", "s3://bench/img/"]
            local_what = ["--images", str(work / "img")]
            opts = ["--size", "224x224", "--crop", "--labels-from-dirs", "--threads",
                    str(a.threads)]
        bins = [("tensorfs", TFS)] + ([("before", a.before)] if a.before else [])
        kind = {"images": "JPEGs 256x256", "manifest": "JPEGs 256x256 named by a JSON Lines file",
                "audio": "WAV clips of 2 s"}[a.kind]
        print(f"{a.files} {kind} on s3rver, {a.rtt_ms:g} ms round trip "
              f"(measured {net.measured_rtt_ms(PORT):.1f}), {a.threads} import threads")
        for r in range(a.rounds):
            got = {}
            for name, b in bins:
                got[name] = import_rate(lambda ds, b=b: net.client_cmd(
                    [b, "import", ds, *what, *opts]), a.files, env)
            q = subprocess.run(net.client_cmd([sys.executable, "-c", FETCH_ONLY, ep]), env=env,
                               capture_output=True, text=True, check=True)
            fetch = float(q.stdout)
            local = import_rate(lambda ds: [TFS, "import", ds, *local_what, *opts], a.files)
            line = "  ".join(f"{k} {v:,.0f} files/s" for k, v in got.items())
            print(f"round {r + 1}: {line}  |  32 botocore threads fetching only: {fetch:,.0f} "
                  f"files/s  |  local files: {local:,.0f} files/s  |  tensorfs "
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
