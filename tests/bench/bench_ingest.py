#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: parallel ingest on Dask (tensorfs.ingest) against one `tensorfs import`.

Data: --images JPEGs (--size px square, noise and gradients so they do not compress to nothing),
in --parts ImageFolder trees with the same --classes class directories (hard links make the same
files one tree for the single import). Imported (--images, fixed --size x --size) into a
file:// lake on local disk:

  single        tensorfs import --images TREE, the importer's own decode threads (one per CPU)
  single-1t     the same with --threads 1
  dask-1        tensorfs.ingest on a LocalCluster of 1 worker process, --threads 1 per part
  dask-2        the same with 2 worker processes

Prints rows/s and the ratio to single-1t. On one machine, the cluster adds processes, not
cores: what bounds dask-N is min(N, CPUs) decoders, as it bounds the single import's threads.

    /usr/bin/python3 tests/bench/bench_ingest.py [--images 2000] [--parts 8] [--size 256]
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "packaging" / "python"))
from tfscli import TFS, run, workdir  # noqa: E402


def make_images(root, n, parts, classes, size):
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:size, 0:size]
    whole = root / "whole"
    for i in range(n):
        part, cls = i % parts, (i // parts) % classes
        d = root / f"part{part}" / f"class{cls:03d}"
        d.mkdir(parents=True, exist_ok=True)
        base = ((xx * (i % 7 + 1) + yy * (i % 5 + 1)) % 256).astype(np.uint8)
        img = np.stack([base, base[::-1], base.T], axis=-1)
        img = (img // 2 + rng.integers(0, 128, size=img.shape, dtype=np.uint8)).astype(np.uint8)
        path = d / f"{i:07d}.jpg"
        Image.fromarray(img).save(path, quality=90)
        w = whole / f"class{cls:03d}"
        w.mkdir(parents=True, exist_ok=True)
        os.link(path, w / path.name)
    return whole, [root / f"part{p}" for p in range(parts)]


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--size", type=int, default=256)
    a = ap.parse_args()
    import distributed
    import tensorfs

    os.environ["TENSORFS_BIN"] = TFS
    os.environ["PYTHONPATH"] = str(HERE.parents[1] / "packaging" / "python")
    with workdir("bench-ingest-") as work:
        whole, parts = make_images(work / "src", a.images, a.parts, a.classes, a.size)
        lake = f"file://{work}/lake"
        size = ["--size", f"{a.size}x{a.size}"]
        res = {}
        run("create", f"{lake}/single")
        res["single"] = timed(lambda: run("import", f"{lake}/single", "--images", whole, *size,
                                          "--quiet"))
        run("create", f"{lake}/single1")
        res["single-1t"] = timed(lambda: run("import", f"{lake}/single1", "--images", whole,
                                             *size, "--threads", "1", "--quiet"))
        for n in (1, 2):
            run("create", f"{lake}/dask{n}")
            with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                          dashboard_address=None, host="127.0.0.1") as cl, \
                    distributed.Client(cl):
                res[f"dask-{n}"] = timed(lambda: tensorfs.ingest(
                    f"{lake}/dask{n}", [str(p) for p in parts],
                    import_args=(*size, "--threads", "1")))
        print(f"{a.images} JPEGs of {a.size}x{a.size}, {a.parts} parts, {os.cpu_count()} CPUs")
        print(f"{'case':<12}{'seconds':>9}{'rows/s':>9}{'vs single-1t':>14}")
        for k, dt in res.items():
            print(f"{k:<12}{dt:>9.2f}{a.images / dt:>9.0f}{res['single-1t'] / dt:>13.2f}x")


if __name__ == "__main__":
    main()
