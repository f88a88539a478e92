# SPDX-License-Identifier: MIT
"""Saved queries: `tensorfs query save URL NAME "SELECT rowid ..."` stores the rows a query
selects, pinned to the commit; the mount's REF/queries/NAME/ holds every column gathered in the
query's order (numpy fancy indexing of the version's files), unchanged when the branch moves
on; queries/NAME/views/PARAMS/ shards them as any view; the control file stages them; bad
queries are refused with nothing saved; versions are kept."""
import numpy as np
import pytest

from conftest import run_proc


@pytest.fixture
def qlake(lake, tmp_path):
    rng = np.random.default_rng(6)
    n = 4000
    label = rng.integers(0, 5, n).astype(np.int64)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    np.save(tmp_path / "label.npy", label)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "cap.txt").write_text("".join(f"caption {i}\n" for i in range(n)))
    lake.create("d")
    lake.import_("d", {"label": tmp_path / "label.npy", "x": tmp_path / "x.npy",
                       "cap": tmp_path / "cap.txt"}, "--chunk-size", "8k")
    return lake, label, x, tmp_path


def query(lake, *args, check=True):
    return run_proc(["query", args[0], lake.ds_url("d"), *args[1:]], check=check)


def test_saved_query_is_a_directory_of_its_rows(qlake, mount):
    lake, label, x, tmp = qlake
    p = query(lake, "save", "twos", "SELECT rowid FROM t WHERE label = 2 ORDER BY rowid DESC")
    rows = np.flatnonzero(label == 2)[::-1]
    assert f"{len(rows)} rows" in p.stdout, p.stdout
    m = mount(lake)
    qd = m.path / "d" / "main" / "queries" / "twos"
    assert np.array_equal(np.load(qd / "x.npy"), x[rows])
    assert np.array_equal(np.load(qd / "label.npy"), label[rows])
    lines = (qd / "cap" / "lines.txt").read_text().splitlines()
    assert lines == [f"caption {i}" for i in rows]
    assert "queries" in [p.name for p in (m.path / "d" / "main").iterdir()]
    # views over the query: two ranks together hold every row once
    got = []
    for r in range(2):
        got.append(np.load(qd / "views" / f"seed=3,rank={r},world=2,drop_last=1" / "x.npy"))
    both = np.concatenate(got)
    assert len(both) == len(rows) // 2 * 2
    want = {tuple(v) for v in x[rows]}
    assert {tuple(v) for v in both} <= want and len({tuple(v) for v in both}) == len(both)


def test_python_opens_a_saved_query_and_its_views(qlake, mount):
    """tensorfs.open reads queries/NAME/ and queries/NAME/views/PARAMS/ as it reads a version
    and its views: every column, of the kinds the version's schema names."""
    import tensorfs

    lake, label, x, tmp = qlake
    query(lake, "save", "threes", "SELECT rowid FROM t WHERE label = 3")
    rows = np.flatnonzero(label == 3)
    m = mount(lake)
    qd = m.path / "d" / "main" / "queries" / "threes"
    cols = tensorfs.open(qd)
    assert sorted(cols) == ["cap", "label", "x"]
    assert np.array_equal(cols["x"], x[rows]) and list(cols["cap"])[:2] == [
        f"caption {i}" for i in rows[:2]]
    view = tensorfs.open(qd / "views" / "seed=4,rank=1,world=2")
    assert sorted(view) == ["cap", "label", "x"] and set(view["label"].tolist()) == {3}


def test_saved_result_stays_when_the_branch_moves(qlake, mount, tmp_path):
    lake, label, x, tmp = qlake
    query(lake, "save", "ones", "SELECT rowid FROM t WHERE label = 1")
    rows = np.flatnonzero(label == 1)
    np.save(tmp_path / "more_l.npy", np.ones(100, np.int64))
    np.save(tmp_path / "more_x.npy", np.zeros((100, 3), np.float32))
    (tmp_path / "more.txt").write_text("more\n" * 100)
    lake.import_("d", {"label": tmp_path / "more_l.npy", "x": tmp_path / "more_x.npy",
                       "cap": tmp_path / "more.txt"})
    m = mount(lake)
    assert np.array_equal(np.load(m.path / "d" / "main" / "queries" / "ones" / "x.npy"),
                          x[rows])
    # saving again evaluates against the new head: a new version, the history kept
    query(lake, "save", "ones", "SELECT rowid FROM t WHERE label = 1")
    log = query(lake, "log", "ones").stdout
    assert log.count("version ") == 2, log
    assert f"rows     {len(rows) + 100}" in query(lake, "show", "ones").stdout


def test_query_staged_by_the_control_file(qlake, mount):
    from tensorfs.staging import Stager

    lake, label, x, _ = qlake
    query(lake, "save", "z", "SELECT rowid FROM t WHERE label IN (0, 4) AND rowid < 3000 "
                             "ORDER BY rowid")
    rows = np.flatnonzero(np.isin(label, [0, 4]) & (np.arange(len(label)) < 3000))
    m = mount(lake)
    with Stager(m.path, "d/main/queries/z", ["x", "label"], batch_size=100) as st:
        assert st.rows == len(rows)
        got = []
        for b in st.batches():
            got.append(np.array(b["x"]))
            b.release()
    assert np.array_equal(np.concatenate(got), x[rows])


@pytest.mark.parametrize("sql,why", [
    ("SELECT label FROM t", "must select rowid"),
    ("SELECT rowid + 100000 AS rowid FROM t", "not a row of the version"),
    ("SELECT 'a' AS rowid FROM t", "not a row of the version"),
    ("SELEKT rowid FROM t", "syntax error"),
])
def test_bad_queries_save_nothing(qlake, sql, why):
    lake, _, _, _ = qlake
    p = query(lake, "save", "bad", sql, check=False)
    assert p.returncode == 1 and why in p.stderr, p.stderr
    assert query(lake, "ls").stdout == ""


def test_ls_show_rm(qlake, mount):
    lake, _, _, _ = qlake
    query(lake, "save", "a", "SELECT rowid FROM t WHERE label = 0")
    query(lake, "save", "b", "SELECT rowid FROM t WHERE label = 3")
    assert query(lake, "ls").stdout.split() == ["a", "b"]
    assert "label = 3" in query(lake, "show", "b").stdout
    query(lake, "rm", "a")
    assert query(lake, "ls").stdout.split() == ["b"]
    assert query(lake, "show", "a", check=False).returncode == 1
    m = mount(lake)
    assert not (m.path / "d" / "main" / "queries" / "a").exists()
    assert (m.path / "d" / "main" / "queries" / "b" / "label.npy").exists()
