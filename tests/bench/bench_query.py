#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: SQL filters and exact nearest-neighbour search over a lake, against pandas and
FAISS on the same data, in the same run.

Data: --rows embeddings of --dim float32 values (random normal) and an int64 label, imported
from .npy files into a file:// lake (zstd chunks, as any column).

  filter      `tensorfs sql ... "SELECT count(*) FROM t WHERE label = 3"` (pushed down: only
              label's chunks are read), against pandas evaluating the same over the label array
              already in memory (what the filter can at best match after a load)
  ivf         `tensorfs vector index ... --ivf NLIST` and `sql --near ... --nprobe P` against
              FAISS IndexIVFFlat in memory: recall@k against the exact neighbours, queries/s
  knn         `tensorfs sql ... --near emb=Q.npy --k 10 --metric ip` for --queries vectors (one
              process: open the version, read and decode every chunk, products through
              OpenBLAS), against python3-faiss IndexFlatIP over the same vectors held in
              memory (exact: the neighbours must be the same), and numpy's matmul + argpartition
              over them. Each reports queries/s and the embeddings scanned per second (GB/s:
              the bound exact search works at)

    /usr/bin/python3 tests/bench/bench_query.py [--rows 1000000] [--dim 768] [--queries 16]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tfscli import run, workdir  # noqa: E402


def timed(fn, repeat):
    best, out = None, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--queries", type=int, default=16)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--nlist", type=int, default=256)
    a = ap.parse_args()
    import faiss
    import pandas as pd

    rng = np.random.default_rng(0)
    with workdir("tfs-bench-query-") as work:
        x = rng.standard_normal((a.rows, a.dim), dtype=np.float32)
        labels = rng.integers(0, 10, a.rows).astype(np.int64)
        q = rng.standard_normal((a.queries, a.dim), dtype=np.float32)
        np.save(work / "x.npy", x)
        np.save(work / "l.npy", labels)
        np.save(work / "q.npy", q)
        url = f"file://{work}/lake/e"
        run("create", url)
        run("import", url, f"emb={work / 'x.npy'}", f"label={work / 'l.npy'}", "-q")
        gb = x.nbytes / 1e9
        print(f"{a.rows:,} x {a.dim} float32 ({gb:.2f} GB), {a.queries} queries, k={a.k}")

        t_sql, out = timed(lambda: run("sql", url, "SELECT count(*) FROM t WHERE label = 3",
                                       "--json"), a.repeat)
        df = pd.DataFrame({"label": labels})
        t_pd, n_pd = timed(lambda: int((df.label == 3).sum()), a.repeat)
        assert json.loads(out.splitlines()[0])["count(*)"] == n_pd
        print(f"filter: tensorfs sql {t_sql * 1e3:.0f} ms (a process, cold cache), pandas "
              f"{t_pd * 1e3:.2f} ms in memory")

        def ours():
            out = run("sql", url, "SELECT rowid FROM t", "--near", f"emb={work / 'q.npy'}",
                      "--k", a.k, "--metric", "ip", "--per-query", "--json")
            return [json.loads(line) for line in out.splitlines()]

        t_ours, got = timed(ours, a.repeat)
        index = faiss.IndexFlatIP(a.dim)
        index.add(x)
        t_faiss, (_, fi) = timed(lambda: index.search(q, a.k), a.repeat)

        def numpy_knn():
            s = q @ x.T
            part = np.argpartition(-s, a.k, axis=1)[:, :a.k]
            return part

        t_np, _ = timed(numpy_knn, a.repeat)
        same = sum(set(r["rowid"] for r in got if r["query"] == i) == set(fi[i].tolist())
                   for i in range(a.queries))
        print(f"knn: neighbours equal FAISS's for {same} of {a.queries} queries")
        for label, t in (("tensorfs sql --near (process, lake)", t_ours),
                         ("FAISS IndexFlatIP (in memory)", t_faiss),
                         ("numpy matmul (in memory)", t_np)):
            print(f"  {label:38s} {t * 1e3:8.0f} ms  {a.queries / t:8.1f} queries/s  "
                  f"{gb / t:6.2f} GB/s scanned")
        print(f"ratio tensorfs / FAISS: {t_faiss / t_ours:.2f}x (time)")

        # IVF: an index of NLIST lists built by `tensorfs vector index` and by FAISS in memory
        # (IndexIVFFlat), searched probing NPROBE lists: recall@k against the exact neighbours
        # and queries/s, each side
        exact = {i: set(fi[i].tolist()) for i in range(a.queries)}
        t = time.perf_counter()
        run("vector", "index", url, "emb", "--ivf", a.nlist, "--metric", "ip")
        t_build = time.perf_counter() - t
        quant = faiss.IndexFlatIP(a.dim)
        ivf = faiss.IndexIVFFlat(quant, a.dim, a.nlist, faiss.METRIC_INNER_PRODUCT)
        t = time.perf_counter()
        ivf.train(x[np.linspace(0, a.rows - 1, min(a.rows, a.nlist * 64)).astype(int)])
        ivf.add(x)
        t_fbuild = time.perf_counter() - t
        print(f"ivf: {a.nlist} lists; built in {t_build:.1f} s (tensorfs vector index: read, "
              f"train, add, store), FAISS in memory {t_fbuild:.1f} s")
        for nprobe in (1, 8, 32):
            def ours_ivf():
                out = run("sql", url, "SELECT rowid FROM t", "--near", f"emb={work / 'q.npy'}",
                          "--k", a.k, "--metric", "ip", "--per-query", "--nprobe", nprobe,
                          "--json")
                return [json.loads(line) for line in out.splitlines()]

            t_o, got = timed(ours_ivf, a.repeat)
            ivf.nprobe = nprobe
            t_f, (_, fl) = timed(lambda: ivf.search(q, a.k), a.repeat)
            r_o = np.mean([len(exact[i] & {r["rowid"] for r in got if r["query"] == i}) / a.k
                           for i in range(a.queries)])
            r_f = np.mean([len(exact[i] & set(fl[i].tolist())) / a.k for i in range(a.queries)])
            print(f"  nprobe {nprobe:3d}: tensorfs recall@{a.k} {r_o:.3f}, {a.queries / t_o:7.1f} "
                  f"queries/s (a process); FAISS IndexIVFFlat recall {r_f:.3f}, "
                  f"{a.queries / t_f:9.1f} queries/s (in memory)")


if __name__ == "__main__":
    main()
