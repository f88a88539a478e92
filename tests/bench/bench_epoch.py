# SPDX-License-Identifier: MIT
"""The epoch boundary: time to the first batch of epoch E+1 of a shuffled view, just after
epoch E was read through: without -o epoch_warm=1, with it, and with it and -o evict=min (the
warm-up then publishes the next epoch's order to the cache's eviction).

    /usr/bin/python3 tests/bench/bench_epoch.py [--mb 512] [--cache-mem 256M] [--batch-mb 8]

A dataset twice the cache (compressible rows, so a chunk costs a decompression) in a file://
lake; each run mounts afresh, reads views/seed=1,epoch=0/image.npy front to back, then times
the first batch (--batch-mb of rows) of views/seed=1,epoch=1/image.npy and counts the cache
misses it took.
"""

import argparse
import os
import time

import numpy as np

from benchkit import mount_stats
from tfscli import run, unmount, workdir


def read_all(path, bufsize=1 << 20):
    with open(path, "rb", buffering=0) as f:
        while f.read(bufsize):
            pass


def misses(mnt):
    return mount_stats(mnt)["cache"]["misses"]


def one(lake, mnt, warm, evict, batch_bytes):
    run("mount", lake, mnt, "-o", f"cache_mem={ARGS.cache_mem},epoch_warm={warm},evict={evict}")
    try:
        t0 = time.perf_counter()
        read_all(mnt / "d" / "main" / "views" / "seed=1,epoch=0" / "image.npy")
        t1 = time.perf_counter()
        time.sleep(ARGS.pause)  # the training step on the last batch
        m0 = misses(mnt)
        t2 = time.perf_counter()
        with open(mnt / "d" / "main" / "views" / "seed=1,epoch=1" / "image.npy", "rb",
                  buffering=0) as f:
            f.read(4096 + batch_bytes)
        t3 = time.perf_counter()
        return t1 - t0, t3 - t2, misses(mnt) - m0
    finally:
        unmount(mnt)


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--cache-mem", default="256M")
    ap.add_argument("--batch-mb", type=int, default=8)
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ARGS = ap.parse_args()
    with workdir("tfs-epoch-") as work:
        mnt = work / "mnt"
        rows = ARGS.mb * 256
        rng = np.random.default_rng(1)
        image = rng.integers(0, 16, size=(rows, 4096), dtype=np.uint8)
        np.save(work / "image.npy", image)
        del image
        lake = f"file://{work}/lake"
        run("create", f"{lake}/d")
        run("import", f"{lake}/d", f"image={work}/image.npy", "--quiet")
        os.unlink(work / "image.npy")
        print(f"{ARGS.mb} MiB of 4 KiB rows, cache_mem={ARGS.cache_mem}, first batch "
              f"{ARGS.batch_mb} MiB, {ARGS.pause:.1f} s between the epochs")
        configs = [(0, "lru"), (1, "lru"), (1, "min")]
        res = {c: [] for c in configs}
        for _ in range(ARGS.runs):
            for c in configs:
                res[c].append(one(lake, mnt, *c, ARGS.batch_mb << 20))
        for (warm, evict), rs in res.items():
            ep = np.median([r[0] for r in rs])
            fb = np.median([r[1] for r in rs])
            print(f"epoch_warm={warm} evict={evict}: epoch 0 in {ep:.2f} s, first batch of "
                  f"epoch 1 in {fb * 1000:.1f} ms, cache misses "
                  + ", ".join(str(r[2]) for r in rs) + " (runs: "
                  + ", ".join(f"{r[1] * 1000:.1f}" for r in rs) + ")")


if __name__ == "__main__":
    main()
