# SPDX-License-Identifier: MIT
"""IVF indexes of an embedding column (FAISS): `tensorfs vector index URL COL --ivf N [--pq M]`
keeps the index beside the column for its commit; `sql ... --near --nprobe P` searches it:
probing every list finds exactly what exact search finds, fewer lists trade recall, a WHERE
still applies first; a missing index, another metric or another commit are named errors."""
import json

import numpy as np
import pytest

from conftest import run_proc


@pytest.fixture
def vlake(lake, tmp_path):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((6000, 24)).astype(np.float32)
    label = rng.integers(0, 3, 6000).astype(np.int64)
    q = rng.standard_normal((5, 24)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "l.npy", label)
    np.save(tmp_path / "q.npy", q)
    lake.create("v")
    lake.import_("v", {"emb": tmp_path / "x.npy", "label": tmp_path / "l.npy"},
                 "--chunk-size", "64k")
    return lake, x, label, q, tmp_path


def near(lake, tmp, *opts, sql="SELECT rowid FROM t", check=True):
    p = run_proc(["sql", lake.ds_url("v"), sql, "--near", f"emb={tmp / 'q.npy'}", "--k", "10",
                  "--per-query", "--json", *opts], check=check)
    if not check:
        return p
    out = {}
    for r in map(json.loads, p.stdout.splitlines()):
        out.setdefault(r["query"], []).append(r["rowid"])
    return out


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_every_list_probed_is_exact(vlake, metric):
    lake, _, _, _, tmp = vlake
    p = run_proc(["vector", "index", lake.ds_url("v"), "emb", "--ivf", "32", "--metric",
                  metric], check=True)
    assert "IVF32,Flat" in p.stdout
    exact = near(lake, tmp, "--metric", metric)
    ivf = near(lake, tmp, "--metric", metric, "--nprobe", "32")
    assert {q: set(r) for q, r in ivf.items()} == {q: set(r) for q, r in exact.items()}
    few = near(lake, tmp, "--metric", metric, "--nprobe", "1")
    recall = np.mean([len(set(few[q]) & set(exact[q])) / 10 for q in exact])
    assert 0 < recall <= 1


def test_pq_index_and_filter_first(vlake):
    lake, _, label, _, tmp = vlake
    # Two sub-quantizers: Debian's FAISS trains each in seconds here
    run_proc(["vector", "index", lake.ds_url("v"), "emb", "--ivf", "16", "--pq", "2",
              "--train", "600", "--metric", "l2"], check=True)
    assert run_proc(["vector", "ls", lake.ds_url("v")], check=True).stdout.split() == ["emb"]
    got = near(lake, tmp, "--metric", "l2", "--nprobe", "16",
               sql="SELECT rowid FROM t WHERE label = 2")
    assert got and all(label[r] == 2 for rows in got.values() for r in rows)


def test_index_errors_are_named(vlake, tmp_path):
    lake, _, _, _, tmp = vlake
    p = near(lake, tmp, "--nprobe", "4", check=False)
    assert p.returncode == 1 and "no vector index of emb" in p.stderr
    run_proc(["vector", "index", lake.ds_url("v"), "emb", "--ivf", "8", "--metric", "l2"],
             check=True)
    p = near(lake, tmp, "--nprobe", "4", "--metric", "ip", check=False)
    assert p.returncode == 1 and "is for --metric l2" in p.stderr
    p = run_proc(["vector", "index", lake.ds_url("v"), "label", "--ivf", "8"])
    assert p.returncode == 1 and "not a column of float32 vectors" in p.stderr
    # a new commit has no index of its own
    np.save(tmp_path / "x2.npy", np.zeros((10, 24), np.float32))
    np.save(tmp_path / "l2.npy", np.zeros(10, np.int64))
    lake.import_("v", {"emb": tmp_path / "x2.npy", "label": tmp_path / "l2.npy"})
    p = near(lake, tmp, "--nprobe", "4", "--metric", "l2", check=False)
    assert p.returncode == 1 and "at this commit" in p.stderr
