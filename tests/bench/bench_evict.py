# SPDX-License-Identifier: MIT
"""Cache eviction for views: bytes fetched from the lake per epoch with LRU and with MIN (-o
evict=min: the cache evicts the chunk the view readers need furthest in the future), for a
shuffled view whose data is 1.5x and 4x cache_mem, over several epochs.

    /usr/bin/python3 tests/bench/bench_evict.py [--cache-mb 128] [--epochs 4]

Each epoch reads views/seed=1,epoch=E/image.npy front to back; the figures are the store's
bytes_fetched and the cache's misses per epoch, averaged over epochs 1.. (epoch 0 starts cold).

Then the cache at the default shuffle window's edge (--edge-rows rows of 3 KiB of random bytes, in
256 KiB chunks, cache_mem=16M: the window is half the cache, so a reader's window and the next one
loading ahead fill it): the bytes fetched per epoch against the column's stored bytes (1.00: each
stored byte fetched once an epoch), over --edge-runs fresh mounts of --epochs epochs.
"""

import argparse
import os
import time

import numpy as np

from benchkit import mount_stats
from tfscli import run, unmount, workdir

MiB = 1 << 20


def stats(mnt):
    s = mount_stats(mnt)
    return s["store"]["bytes_fetched"], s["cache"]["misses"], s["cache"]["hits"]


def epochs(lake, mnt, policy, cache_mb, n):
    run("mount", lake, mnt, "-o", f"cache_mem={cache_mb}M,evict={policy}")
    out = []
    try:
        for e in range(n):
            b0, m0, h0 = stats(mnt)
            t0 = time.perf_counter()
            with open(mnt / "d" / "main" / "views" / f"seed=1,epoch={e}" / "image.npy", "rb",
                      buffering=0) as f:
                while f.read(1 << 20):
                    pass
            dt = time.perf_counter() - t0
            b1, m1, h1 = stats(mnt)
            out.append((b1 - b0, m1 - m0, h1 - h0, dt))
    finally:
        unmount(mnt)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache-mb", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--ratios", default="1.5,4")
    ap.add_argument("--chunk-size", default="4M",
                    help="import --chunk-size (small chunks: many entries for MIN to rank)")
    ap.add_argument("--edge-rows", type=int, default=20000)
    ap.add_argument("--edge-runs", type=int, default=4)
    a = ap.parse_args()
    with workdir("tfs-evict-") as work:
        mnt = work / "mnt"
        print(f"cache_mem={a.cache_mb}M, 4 KiB rows in {a.chunk_size} chunks, a shuffled view "
              f"per epoch; per epoch after the first: MiB fetched from the lake, cache misses, "
              f"seconds")
        for ratio in (float(x) for x in a.ratios.split(",")):
            mb = int(a.cache_mb * ratio)
            rows = mb * 256
            rng = np.random.default_rng(1)
            np.save(work / "image.npy", rng.integers(0, 16, size=(rows, 4096), dtype=np.uint8))
            lake = f"file://{work}/lake{ratio}"
            run("create", f"{lake}/d")
            run("import", f"{lake}/d", f"image={work}/image.npy", "--quiet", "--chunk-size",
                a.chunk_size)
            os.unlink(work / "image.npy")
            for policy in ("lru", "min"):
                r = epochs(lake, mnt, policy, a.cache_mb, a.epochs)[1:]
                fetched = np.mean([x[0] for x in r]) / MiB
                misses = np.mean([x[1] for x in r])
                secs = np.median([x[3] for x in r])
                print(f"  data {ratio}x ({mb} MiB), {policy}: {fetched:.0f} MiB fetched "
                      f"({fetched / mb:.2f} of the data), {misses:.0f} misses, {secs:.2f} s "
                      f"per epoch")

        edge(a, work, mnt)


def edge(a, work, mnt):
    """The default window at its cache: fetched/stored per epoch, each run on a fresh mount."""
    rng = np.random.default_rng(2)
    np.save(work / "edge.npy", rng.integers(0, 256, size=(a.edge_rows, 3072), dtype=np.uint8))
    lake = f"file://{work}/edge"
    run("create", f"{lake}/d")
    run("import", f"{lake}/d", f"image={work}/edge.npy", "--quiet", "--chunk-size", "256k")
    os.unlink(work / "edge.npy")
    stored = sum(p.stat().st_size for p in (work / "edge").rglob("*")
                 if p.is_file() and "objects" in p.parts)
    runs = [[x[0] / stored for x in epochs(lake, mnt, "min", 16, a.epochs)]
            for _ in range(a.edge_runs)]
    first = [r[0] for r in runs]
    later = [x for r in runs for x in r[1:]]
    print(f"default window at its cache ({stored / MiB:.0f} MiB stored, cache_mem=16M, "
          f"{a.edge_runs} mounts of {a.epochs} epochs): fetched / stored per epoch: first "
          f"{np.median(first):.2f} (range {min(first):.2f}-{max(first):.2f}), later "
          f"{np.median(later) if later else float('nan'):.2f} "
          f"(range {min(later, default=0):.2f}-{max(later, default=0):.2f})")


if __name__ == "__main__":
    main()
