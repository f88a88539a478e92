# SPDX-License-Identifier: MIT
"""Nearest neighbours over an embedding column: `tensorfs sql ... --near COL=Q.npy --k K
--metric ip|cosine|l2` equals a numpy brute force (ties by rowid), per query or unioned, after
the query's WHERE; distance(COL, :q) orders as --near does; bad vectors are named errors."""
import json

import numpy as np
import pytest

from conftest import run_proc

N, D = 3000, 16


@pytest.fixture
def emb(lake, tmp_path):
    rng = np.random.default_rng(3)
    # Small integers: every product and sum is exact in float32, so the order is too.
    x = rng.integers(-6, 7, (N, D)).astype(np.float32)
    x[100] = x[7]  # a tie, broken by rowid
    labels = rng.integers(0, 5, N).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "l.npy", labels)
    q = rng.integers(-6, 7, (3, D)).astype(np.float32)
    q[0] = x[7]
    np.save(tmp_path / "q.npy", q)
    np.save(tmp_path / "q1.npy", q[1])
    lake.create("e")
    lake.import_("e", {"emb": tmp_path / "x.npy", "label": tmp_path / "l.npy"},
                 "--chunk-size", "16k")
    return lake, x, labels, q, tmp_path


def brute(x, q, k, metric, rows=None):
    rows = np.arange(len(x)) if rows is None else rows
    xs = x[rows].astype(np.float64)
    q = q.astype(np.float64)
    if metric == "ip":
        s, key = xs @ q, lambda i: (-(xs[i] @ q), rows[i])
    elif metric == "cosine":
        s = xs @ q / np.linalg.norm(xs, axis=1) / np.linalg.norm(q)
        key = lambda i: (-s[i], rows[i])  # noqa: E731
    else:
        s = ((xs - q) ** 2).sum(1)
        key = lambda i: (s[i], rows[i])  # noqa: E731
    order = sorted(range(len(rows)), key=key)[:k]
    return [int(rows[i]) for i in order], [float(s[i]) for i in order]


def near(lake, sql, *opts, check=True):
    p = run_proc(["sql", lake.ds_url("e"), sql, "--json", *opts], check=check)
    return p if not check else [json.loads(x) for x in p.stdout.splitlines()]


@pytest.mark.parametrize("metric", ["ip", "cosine", "l2"])
def test_per_query_equals_brute_force(emb, metric):
    lake, x, _, q, tmp = emb
    got = near(lake, "SELECT rowid, label FROM t", "--near", f"emb={tmp / 'q.npy'}", "--k", "7",
               "--metric", metric, "--per-query")
    assert len(got) == 21
    for qi in range(3):
        mine = [r for r in got if r["query"] == qi]
        rows, scores = brute(x, q[qi], 7, metric)
        if metric == "cosine":  # a division: near-ties may round apart
            assert set(r["rowid"] for r in mine) == set(rows)
        else:
            assert [r["rowid"] for r in mine] == rows
        assert np.allclose([r["score"] for r in mine], scores, rtol=1e-5, atol=1e-5)
    assert [r["rowid"] for r in got if r["query"] == 0][:2] == [7, 100]  # the tie, by rowid


def test_union_and_filter_first(emb):
    lake, x, labels, q, tmp = emb
    got = near(lake, "SELECT rowid FROM t", "--near", f"emb={tmp / 'q.npy'}", "--k", "5",
               "--metric", "l2")
    want = set()
    for qi in range(3):
        want |= set(brute(x, q[qi], 5, "l2")[0])
    assert set(r["rowid"] for r in got) == want and len(got) == len(want)
    scores = [r["score"] for r in got]
    assert scores == sorted(scores)
    got = near(lake, "SELECT rowid, label FROM t WHERE label = 2", "--near",
               f"emb={tmp / 'q1.npy'}", "--k", "6", "--metric", "ip")
    assert all(r["label"] == 2 for r in got)
    assert [r["rowid"] for r in got] == brute(x, q[1], 6, "ip", np.flatnonzero(labels == 2))[0]


def test_statement_ending_in_a_comment(emb):
    """The statement becomes a subquery of the ranking one: a line comment at its end once
    took the subquery's closing parenthesis with it ("incomplete input")."""
    lake, x, labels, q, tmp = emb
    got = near(lake, "SELECT rowid, label FROM t WHERE label = 2 -- twos only", "--near",
               f"emb={tmp / 'q1.npy'}", "--k", "4", "--metric", "ip")
    assert [r["rowid"] for r in got] == brute(x, q[1], 4, "ip", np.flatnonzero(labels == 2))[0]


def test_distance_function_orders_as_near(emb):
    lake, x, _, q, tmp = emb
    got = near(lake, "SELECT rowid, distance(emb, :q, 'l2') AS d FROM t ORDER BY d, rowid "
                     "LIMIT 6", "--vector", f"q={tmp / 'q1.npy'}")
    rows, scores = brute(x, q[1], 6, "l2")
    assert [r["rowid"] for r in got] == rows
    assert np.allclose([r["d"] ** 2 for r in got], scores)


@pytest.mark.parametrize("make,opts,why", [
    (lambda t: np.save(t / "bad.npy", np.ones(8, np.float32)), ["--near", "emb=BAD"],
     "not one of float32 vectors of 8 values"),
    (lambda t: np.save(t / "bad.npy", np.array([np.nan] * D, np.float32)),
     ["--near", "emb=BAD"], "NaN"),
    (lambda t: np.save(t / "bad.npy", np.ones(D, np.float32)), ["--near", "label=BAD"],
     "not one of float32 vectors"),
    (lambda t: np.save(t / "bad.npy", np.zeros(D, np.float32)),
     ["--near", "emb=BAD", "--metric", "cosine"], "is zero"),
])
def test_bad_vectors_are_named(emb, make, opts, why):
    lake, _, _, _, tmp = emb
    make(tmp)
    opts = [o.replace("BAD", str(tmp / "bad.npy")) for o in opts]
    p = near(lake, "SELECT rowid FROM t", *opts, check=False)
    assert p.returncode == 1 and why in p.stderr, p.stderr


def test_near_needs_rowid(emb):
    lake, _, _, _, tmp = emb
    p = near(lake, "SELECT label FROM t", "--near", f"emb={tmp / 'q1.npy'}", check=False)
    assert p.returncode == 1 and "must select rowid" in p.stderr
