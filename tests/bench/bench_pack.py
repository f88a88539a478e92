#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: packed token samples through the mount against numpy over a local Megatron-LM
.bin with the same index arrays.

Data: --tokens uint16 token ids in documents of lognormal length (mean about 600 tokens),
written as a Megatron-LM indexed dataset (PREFIX.bin + PREFIX.idx) on local disk and imported
with `tensorfs import --megatron` into a file:// lake beside it.

  open        the view views/pack=S,eos=0,seed=1/ first stat'ed (its index arrays built:
              document order, sample starts, sample order), against numpy building the same
              arrays (argsort of a permutation, cumsum, searchsorted) over the .idx
  read        host staging: a control-file stream over a view of another epoch, cols=tokens
              dtype=int64, `next` batches of --batch samples, each released after use
  read        every sample of tokens.npy in view order through np.load(mmap_mode="r"), in
              batches of --batch rows (each pass a view of another epoch: files the kernel
              has not cached, chunks the daemon has after the first pass), against numpy
              slicing the same number of samples out of the mmapped .bin with its own index
              arrays, a sample at a time as Megatron-LM's GPTDataset.__getitem__ does (the
              .bin in the page cache); tokens/s, best of --repeat

Prints both with their ratio, run in this invocation.

    /usr/bin/python3 tests/bench/bench_pack.py [--tokens 100000000] [--seq 2048]
"""

import argparse
import os
import struct
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tfscli import run, unmount, workdir  # noqa: E402


def write_corpus(prefix, tokens, seed=0):
    rng = np.random.default_rng(seed)
    lens = []
    total = 0
    while total < tokens:
        n = rng.lognormal(6.0, 0.8, 100000).astype(np.int64) + 1
        lens.append(n)
        total += int(n.sum())
    lens = np.concatenate(lens)
    lens = lens[:np.searchsorted(np.cumsum(lens), tokens) + 1]
    ids = rng.integers(0, 50257, int(lens.sum()), dtype=np.uint16)
    ids.tofile(f"{prefix}.bin")
    ptr = np.concatenate([[0], np.cumsum(lens[:-1]) * 2]).astype(np.int64)
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(lens) + 1))
        f.write(lens.astype(np.int32).tobytes())
        f.write(ptr.tobytes())
        f.write(np.arange(len(lens) + 1, dtype=np.int64).tobytes())
    return lens


def numpy_index(lens, seq, rng_order):
    """The same arrays in numpy: document order, each sample's start, the sample order."""
    t = time.perf_counter()
    docs = rng_order  # the order the view uses (given: the generator is the mount's)
    with_eos = lens[docs] + 1
    ends = np.cumsum(with_eos)
    total = int(ends[-1])
    n = (total - 1) // seq
    starts = np.arange(n, dtype=np.int64) * seq
    first = np.searchsorted(ends, starts, side="right")
    before = np.concatenate([[0], ends[:-1]])
    skip = starts - before[first]
    return time.perf_counter() - t, docs, first, skip, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokens", type=int, default=100_000_000)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cache-mem", default="1G")
    a = ap.parse_args()
    with workdir("tfs-bench-pack-") as work:
        prefix = work / "corpus"
        lens = write_corpus(prefix, a.tokens)
        print(f"{a.tokens:,} tokens in {len(lens):,} documents; S={a.seq}")
        run("create", f"file://{work}/lake/c")
        t = time.perf_counter()
        run("import", f"file://{work}/lake/c", "--megatron", prefix, "-q")
        print(f"import --megatron: {time.perf_counter() - t:.1f} s")
        run("mount", f"file://{work}/lake", work / "mnt", "-o", f"cache_mem={a.cache_mem}")
        try:
            view = work / "mnt" / "c" / "main" / "views" / f"pack={a.seq},eos=0,seed=1"
            t = time.perf_counter()
            os.stat(view / "tokens.npy")
            t_open = time.perf_counter() - t
            doc = np.load(view / "doc.npy")
            # numpy's side: the mount's document order, recovered from doc.npy's first
            # documents, is not needed for the cost; a permutation of the same size is.
            perm = np.random.default_rng(1).permutation(len(lens))
            t_np, docs, first, skip, n = numpy_index(lens, a.seq, perm)
            print(f"open: view {t_open:.3f} s ({len(doc):,} samples), numpy index arrays "
                  f"{t_np:.3f} s: {t_np / t_open:.2f}x")
            order = np.random.default_rng(2).permutation(n)
            binm = np.memmap(f"{prefix}.bin", np.uint16, "r")
            ptr = np.concatenate([[0], np.cumsum(lens[:-1])])

            def numpy_sample(k):
                out = np.empty(a.seq + 1, np.uint16)
                got, p, off = 0, first[k], skip[k]
                while got < a.seq + 1:
                    d = docs[p]
                    take = min(lens[d] + 1 - off, a.seq + 1 - got)
                    real = max(0, min(lens[d] - off, take))
                    out[got:got + real] = binm[ptr[d] + off:ptr[d] + off + real]
                    if real < take:
                        out[got + real] = 0
                    got += take
                    p += 1
                    off = 0
                return out

            views = iter(range(1, 1000))

            def read_mount():
                # a view of its own each pass (epoch=E): new files, so the kernel's page cache
                # holds none of it; the daemon's chunk cache is warm after the first
                v = view.parent / f"pack={a.seq},eos=0,seed=1,epoch={next(views)}"
                mm = np.load(v / "tokens.npy", mmap_mode="r")
                for i in range(0, len(mm), a.batch):
                    np.array(mm[i:i + a.batch])
                return mm.size

            def read_staged():
                sys.path.insert(0, str(HERE.parents[1] / "packaging" / "python"))
                from tensorfs.staging import Stager

                v = view.parent / f"pack={a.seq},eos=0,seed=1,epoch={next(views)}"
                toks = 0
                with Stager(work / "mnt", str(v), ["tokens"], batch_size=a.batch,
                            dtype="int64") as st:
                    for b in st.batches():
                        toks += b["tokens"].size
                        b.release()
                return toks

            def read_numpy():
                for i in range(0, n, a.batch):
                    np.stack([numpy_sample(k) for k in order[i:i + a.batch]])
                return n * (a.seq + 1)

            rates = {}
            for label, fn in (("mount tokens.npy", read_mount),
                              ("host staging int64", read_staged),
                              ("numpy over .bin", read_numpy)):
                best = None
                for _ in range(a.repeat):
                    t = time.perf_counter()
                    toks = fn()
                    dt = time.perf_counter() - t
                    best = dt if best is None else min(best, dt)
                rates[label] = toks / best
                print(f"read {label:18s}: {rates[label] / 1e6:8.1f} M tokens/s")
            base = rates["numpy over .bin"]
            print(f"ratio to numpy: mount {rates['mount tokens.npy'] / base:.2f}x, host staging "
                  f"{rates['host staging int64'] / base:.2f}x")
        finally:
            unmount(work / "mnt")


if __name__ == "__main__":
    main()
