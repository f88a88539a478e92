# SPDX-License-Identifier: MIT
"""Shuffle quality of views on class-sorted data: classes per 1,000 consecutive view rows
(mean and minimum over the epoch) against the shuffle window, and the default's.

    /usr/bin/python3 tests/bench/bench_shuffle.py [--rows N] [--row-bytes B] [--classes C]
        [--cache-mem SIZE] [--blocks 4,8,16,...]

Builds a dataset whose rows are sorted by class (an `image` column of B bytes a row, the widest,
and an int64 `label`), mounts it, and reads `views/seed=S[,block=K]/label.npy` for several
seeds. The window is `block` chunks of the widest column; its memory cost is that many chunks.

    /usr/bin/python3 tests/bench/bench_shuffle.py --images [--rows N] [--classes C]
        [--chunk-size 256K] [--cache-mem 16M]

instead writes an ImageFolder tree of N JPEGs of 32x32 in C class directories and imports it
with `--images --labels-from-dirs` twice: as it is (rows in sorted file order, class by class)
and with `--shuffle 1` (rows in a random order of the files), and prints the default view's
classes per 1,000 rows for each. Small chunks and a small cache stand for a dataset many times
the cache: what the default window holds of it is what counts.
"""

import argparse
import time

import numpy as np

from tfscli import run, workdir


def quality(labels, stretch=1000):
    counts = [len(np.unique(labels[i:i + stretch]))
              for i in range(0, len(labels) - stretch + 1, stretch)]
    return float(np.mean(counts)), int(np.min(counts))


def images(a):
    """The --images comparison: class-sorted import against --shuffle, default view."""
    from PIL import Image

    with workdir("tfs-shuffle-") as work:
        mnt, tree = work / "mnt", work / "tree"
        rng = np.random.default_rng(1)
        for c in range(a.classes):
            (tree / f"c{c:04d}").mkdir(parents=True)
            for i in range(a.rows // a.classes):
                px = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(px).save(tree / f"c{c:04d}" / f"{i}.jpg", quality=80)
        lake = f"file://{work}/lake"
        for ds, more in (("sorted", ()), ("shuffled", ("--shuffle", "1"))):
            run("create", f"{lake}/{ds}")
            run("import", f"{lake}/{ds}", "--images", tree, "--labels-from-dirs",
                "--chunk-size", a.chunk_size, "--quiet", *more)
        run("mount", lake, mnt, "-o", f"cache_mem={a.cache_mem}")
        print(f"{a.rows // a.classes * a.classes} JPEGs of 32x32 in {a.classes} classes, "
              f"chunks of {a.chunk_size}, cache_mem={a.cache_mem} (default window: half of it)")
        for ds in ("sorted", "shuffled"):
            means, mins = [], []
            for seed in range(a.seeds):
                lab = np.load(mnt / ds / "main" / "views" / f"seed={seed}" / "label.npy")
                m, lo = quality(lab)
                means.append(m)
                mins.append(lo)
            print(f"import {'--shuffle 1' if ds == 'shuffled' else 'as sorted':>12}: classes "
                  f"per 1,000 view rows {np.mean(means):.1f} (mean), {min(mins)} (least)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--row-bytes", type=int, default=1024)
    ap.add_argument("--classes", type=int, default=100)
    ap.add_argument("--cache-mem", default="512M")
    ap.add_argument("--chunk-size", default="4M")
    ap.add_argument("--blocks", default="4,8,16,32,64")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--images", action="store_true",
                    help="an ImageFolder tree imported sorted and with --shuffle")
    a = ap.parse_args()
    if a.images:
        return images(a)
    with workdir("tfs-shuffle-") as work:
        mnt = work / "mnt"
        label = np.repeat(np.arange(a.classes, dtype=np.int64), a.rows // a.classes)
        image = np.zeros((len(label), a.row_bytes), dtype=np.uint8)
        image[:, 0] = label % 256
        np.save(work / "image.npy", image)
        np.save(work / "label.npy", label)
        lake = f"file://{work}/lake"
        run("create", f"{lake}/d")
        run("import", f"{lake}/d", f"image={work}/image.npy", f"label={work}/label.npy",
            "--chunk-size", a.chunk_size, "--quiet")
        run("mount", lake, mnt, "-o", f"cache_mem={a.cache_mem}")
        chunk = int(a.chunk_size.rstrip("MKG")) << {"K": 10, "M": 20, "G": 30}[a.chunk_size[-1]]
        rows_per_chunk = max(1, chunk // a.row_bytes)
        nchunks = -(-len(label) // rows_per_chunk)
        print(f"{len(label)} rows sorted by class ({a.classes} classes, "
              f"{len(label) // a.classes} rows each), image {a.row_bytes} B a row, "
              f"{rows_per_chunk} rows a chunk, {nchunks} chunks, cache_mem={a.cache_mem}")
        print(f"{'window':>22} {'chunks':>7} {'MiB':>7} {'classes/1000 mean':>18} "
              f"{'min':>5} {'build s':>8}")
        for b in [None] + [int(x) for x in a.blocks.split(",")]:
            means, mins, secs = [], [], []
            for seed in range(a.seeds):
                name = f"seed={seed}" + (f",block={b}" if b else "")
                t0 = time.perf_counter()
                lab = np.load(mnt / "d" / "main" / "views" / name / "label.npy")
                secs.append(time.perf_counter() - t0)
                assert sorted(lab.tolist()) == sorted(label.tolist())
                m, lo = quality(lab)
                means.append(m)
                mins.append(lo)
            k = min(b, nchunks) if b else None
            print(f"{('block=' + str(b)) if b else 'default':>22} "
                  f"{k if k else '':>7} {k * chunk / 2**20 if k else '':>7} "
                  f"{np.mean(means):>18.1f} {min(mins):>5} {np.median(secs):>8.2f}")


if __name__ == "__main__":
    main()
