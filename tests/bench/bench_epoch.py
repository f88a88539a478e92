# SPDX-License-Identifier: MIT
"""The epoch boundary: time to the first batch of epoch E+1 of a shuffled view, just after
epoch E was read through, with and without -o epoch_warm=1.

    /usr/bin/python3 tests/bench/bench_epoch.py [--mb 512] [--cache-mem 256M] [--batch-mb 8]

A dataset twice the cache (compressible rows, so a chunk costs a decompression) in a file://
lake; each run mounts afresh, reads views/seed=1,epoch=0/image.npy front to back, then times
the first batch (--batch-mb of rows) of views/seed=1,epoch=1/image.npy.
"""

import argparse
import os
import time

import numpy as np

from tfscli import run, unmount, workdir


def read_all(path, bufsize=1 << 20):
    with open(path, "rb", buffering=0) as f:
        while f.read(bufsize):
            pass


def one(lake, mnt, warm, batch_bytes):
    run("mount", lake, mnt, "-o", f"cache_mem={ARGS.cache_mem},epoch_warm={warm}")
    try:
        t0 = time.perf_counter()
        read_all(mnt / "d" / "main" / "views" / "seed=1,epoch=0" / "image.npy")
        t1 = time.perf_counter()
        time.sleep(ARGS.pause)  # the training step on the last batch
        t2 = time.perf_counter()
        with open(mnt / "d" / "main" / "views" / "seed=1,epoch=1" / "image.npy", "rb",
                  buffering=0) as f:
            f.read(4096 + batch_bytes)
        t3 = time.perf_counter()
        return t1 - t0, t3 - t2
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
        res = {0: [], 1: []}
        for _ in range(ARGS.runs):
            for warm in (0, 1):
                res[warm].append(one(lake, mnt, warm, ARGS.batch_mb << 20))
        for warm in (0, 1):
            ep = np.median([r[0] for r in res[warm]])
            fb = np.median([r[1] for r in res[warm]])
            print(f"epoch_warm={warm}: epoch 0 in {ep:.2f} s, first batch of epoch 1 in "
                  f"{fb * 1000:.1f} ms (runs: "
                  + ", ".join(f"{r[1] * 1000:.1f}" for r in res[warm]) + ")")


if __name__ == "__main__":
    main()
