# SPDX-License-Identifier: MIT
"""Versioning: branch, tag, log, diff, update, drop, and versions in the mount (commits/, log,
pinned open files, xattrs). Racing and killed writers, gc and verify: test_versions_integrity.py."""

import datetime
import errno
import os
import time

import numpy as np
import pytest

from conftest import (HEADER_SIZE, SLOW, check_column_file, load_schema, schema_column, tfs)
from verhelp import (branch, by_column, changed_ranges, chunks_of, diff_lines, drop, head, import_,
                     log_of, log_text, object_paths, object_type, tag, tree_bytes, update,
                     update_proc, verify_ok, wait_until)


def _xattr(path, name):
    return os.getxattr(str(path), "user.tensorfs." + name).decode("utf-8")


# ------------------------------------------------------------------------------------------------
# 1. branch / tag / log / diff round trips
# ------------------------------------------------------------------------------------------------

def test_branch_tag_log_diff(lake):
    rng = np.random.default_rng(11)
    ds = "hist"
    url = lake.ds_url(ds)
    lake.create(ds)
    root = head(lake, ds)
    N = 1000
    a1 = rng.standard_normal((N, 4)).astype("<f4")
    b1 = rng.integers(0, 1 << 40, N).astype("<i8")
    c1 = import_(lake, ds, {"a": a1, "b": b1}, "--chunk-size", "1k", "-m", "first")
    info1 = lake.info(ds)
    rpc_a = schema_column(info1, "a")["rows_per_chunk"]
    rpc_b = schema_column(info1, "b")["rows_per_chunk"]
    # the interesting cases below need partial tail chunks
    assert N % rpc_a and N % rpc_b, (rpc_a, rpc_b)

    lg = log_of(lake, ds)
    assert [e["commit"] for e in lg] == [c1, root]
    assert lg[1]["parents"] == [] and lg[1]["rows"] == 0 and lg[1]["message"] == "create dataset"
    assert lg[0]["parents"] == [root] and lg[0]["rows"] == N and lg[0]["message"] == "first"

    # branch dev (from main by default): only a ref
    assert branch(lake, ds, "dev") == c1
    assert head(lake, ds, "dev") == c1
    assert log_text(lake, ds, "dev") == log_text(lake, ds)

    # update on dev leaves main alone
    u = (rng.standard_normal((50, 4)) + 100).astype("<f4")
    c2 = update(lake, ds, "a", 100, u, "-m", "fix rows", branch="dev")
    assert head(lake, ds) == c1 and head(lake, ds, "dev") == c2
    a2 = a1.copy()
    a2[100:150] = u

    # import more on dev (multi-line message)
    a_more = rng.standard_normal((300, 4)).astype("<f4")
    b_more = rng.integers(0, 1 << 40, 300).astype("<i8")
    c3 = import_(lake, ds, {"a": a_more, "b": b_more}, "-m", "more rows\nsecond line",
                 branch="dev")
    c4 = drop(lake, ds, "b", "-m", "drop b", branch="dev")
    assert len({root, c1, c2, c3, c4}) == 5

    assert tag(lake, ds, "v1", at="dev") == c4
    assert (lake.root / ds / "refs" / "tags" / "v1").read_bytes() == c4.encode() + b"\n"
    assert tag(lake, ds, "v0") == c1  # default: main
    assert head(lake, ds, "v0", "tags") == c1

    # log of dev: first-parent history, newest first
    lg = log_of(lake, ds, "dev")
    assert [e["commit"] for e in lg] == [c4, c3, c2, c1, root]
    assert [e["parents"] for e in lg] == [[c3], [c2], [c1], [root], []]
    assert [e["rows"] for e in lg] == [N + 300, N + 300, N, N, 0]
    assert [e["message"] for e in lg] == ["drop b", "more rows\nsecond line", "fix rows", "first",
                                          "create dataset"]
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    dates = [datetime.datetime.strptime(e["date"], "%Y-%m-%d %H:%M:%S") for e in lg]
    assert dates == sorted(dates, reverse=True)
    assert all(abs((now - d).total_seconds()) < 3600 for d in dates), dates
    # -n N, a tag, a commit id, main
    assert log_of(lake, ds, "dev", n=2) == lg[:2]
    assert log_of(lake, ds, "dev", n=1) == lg[:1]
    assert log_of(lake, ds, "v1") == lg
    assert log_of(lake, ds, c2) == lg[2:]
    assert log_of(lake, ds) == lg[3:]
    assert log_of(lake, ds, "v0") == lg[3:]
    rc, out, err = tfs("log", url, "no-such-ref")
    assert rc != 0 and err.strip()

    # info --ref: tag, commit id, branch agree
    iv1 = lake.info(ds, "v1")
    assert iv1 == lake.info(ds, c4) == lake.info(ds, "dev")
    assert iv1["commit"] == c4 and iv1["rows"] == N + 300 and iv1["parents"] == [c3]
    assert [c["name"] for c in iv1["columns"]] == ["a"] and iv1["message"] == "drop b"
    i2 = lake.info(ds, c2)
    assert i2["commit"] == c2 and i2["rows"] == N and i2["parents"] == [c1]
    assert sorted(c["name"] for c in i2["columns"]) == ["a", "b"] and i2["message"] == "fix rows"
    assert lake.info(ds, "v0") == lake.info(ds) == info1

    # diff
    upd_a = changed_ranges("a", chunks_of(100, 50, rpc_a), rpc_a, N)
    assert len(upd_a) == 1
    assert by_column(diff_lines(lake, ds, "main", "dev")) == {
        "a": upd_a + [f"~ column a rows {N}..{N + 299} added"],
        "b": ["- column b"]}
    assert by_column(diff_lines(lake, ds, "dev", "main")) == {
        "a": upd_a + [f"~ column a rows {N}..{N + 299} removed"],
        "b": [f"+ column b (<i8, (), {N} rows)"]}
    assert diff_lines(lake, ds, c1, c2) == upd_a
    # appending rewrote the partial tail chunks, but their old rows did not change
    assert by_column(diff_lines(lake, ds, c2, c3)) == {
        "a": [f"~ column a rows {N}..{N + 299} added"],
        "b": [f"~ column b rows {N}..{N + 299} added"]}
    assert diff_lines(lake, ds, c3, c4) == ["- column b"]
    assert by_column(diff_lines(lake, ds, root, "main")) == {
        "a": [f"+ column a (<f4, (4,), {N} rows)"],
        "b": [f"+ column b (<i8, (), {N} rows)"]}
    for r1, r2 in (("main", "main"), (c1, "main"), ("v1", "dev"), ("v0", c1), (c4, "v1")):
        assert diff_lines(lake, ds, r1, r2) == [], (r1, r2)

    # a branch that changes the partial tail chunk and one row of b, then appends
    assert branch(lake, ds, "tail", frm=c1) == c1
    update(lake, ds, "a", N - 10, np.full((10, 4), 7.0, "<f4"), branch="tail")
    update(lake, ds, "b", 0, np.array([-5], "<i8"), branch="tail")
    tail_a = changed_ranges("a", chunks_of(N - 10, 10, rpc_a), rpc_a, N)
    tail_b = changed_ranges("b", [0], rpc_b, N)
    assert tail_a == [f"~ column a rows {(N // rpc_a) * rpc_a}..{N - 1} changed"]
    assert tail_b == [f"~ column b rows 0..{rpc_b - 1} changed"]
    assert by_column(diff_lines(lake, ds, "main", "tail")) == {"a": tail_a, "b": tail_b}
    import_(lake, ds, {"a": np.ones((200, 4), "<f4"), "b": np.ones(200, "<i8")}, branch="tail")
    assert by_column(diff_lines(lake, ds, "main", "tail")) == {
        "a": tail_a + [f"~ column a rows {N}..{N + 199} added"],
        "b": tail_b + [f"~ column b rows {N}..{N + 199} added"]}

    # a column whose dtype changed: "- column" then "+ column"; a new 2-d column
    branch(lake, ds, "retype", frm="main")
    drop(lake, ds, "b", branch="retype")
    import_(lake, ds, {"b": np.arange(N, dtype="<i4"),
                       "c": np.zeros((N, 2, 3), "u1")}, branch="retype")
    assert by_column(diff_lines(lake, ds, "main", "retype")) == {
        "b": ["- column b", f"+ column b (<i4, (), {N} rows)"],
        "c": [f"+ column c (|u1, (2, 3), {N} rows)"]}

    # branches from a tag and from a commit id
    assert branch(lake, ds, "fromv1", frm="v1") == c4
    assert head(lake, ds, "fromv1") == c4
    assert log_text(lake, ds, "fromv1") == log_text(lake, ds, "v1")
    assert branch(lake, ds, "fromc2", frm=c2) == c2
    assert log_of(lake, ds, "fromc2") == lg[2:]

    # existing names (either kind) are refused, and nothing changes; tags never move
    before = lake.refs(ds)
    for args, rc_want in ((("tag", url, "v1"), 1), (("tag", url, "v1", "--at", c4), 1),
                          (("tag", url, "v0", "--at", "dev"), 1), (("tag", url, "dev"), None),
                          (("branch", url, "dev"), None), (("branch", url, "main"), None),
                          (("branch", url, "v1"), None), (("branch", url, "v0", "--from", c1),
                                                          None)):
        rc, out, err = tfs(*args)
        assert rc != 0, f"{args} should have failed: {out}"
        if rc_want is not None:
            assert rc == rc_want, f"{args}: exit {rc}, want {rc_want}"
        assert err.strip(), f"{args}: no message"
        assert lake.refs(ds) == before, f"{args} changed the refs"
    assert (lake.root / ds / "refs" / "tags" / "v1").read_bytes() == c4.encode() + b"\n"

    # invalid names and refs
    bad_names = ["commits", "log", c1, "f" * 64, "a/b", ".hidden"]
    for kind in ("branch", "tag"):
        for name in bad_names:
            rc, out, err = tfs(kind, url, name)
            assert rc != 0, f"{kind} {name!r} should have been refused: {out}"
            assert err.strip()
            assert lake.refs(ds) == before, f"{kind} {name!r} changed the refs"
    for args in (("branch", url, "x1", "--from", "nosuch"), ("tag", url, "x2", "--at", "nosuch"),
                 ("branch", url, "x3", "--from", "0" * 64)):
        rc, out, err = tfs(*args)
        assert rc != 0 and err.strip(), args
    p = lake.import_(ds, {"a": a1[:5], "b": b1[:5]}, "--branch", "nosuch", check=False)
    assert p.returncode != 0 and p.stderr.strip()
    assert lake.refs(ds) == before
    verify_ok(lake, ds)


# ------------------------------------------------------------------------------------------------
# 2. update correctness (read back through the mount)
# ------------------------------------------------------------------------------------------------

def test_refs_with_ancestors_and_abbreviated_ids(lake):
    """Every command that takes a ref takes main~N, main^ and the first digits of a commit id
    (as `log` and `query save` print them); too few digits, an ambiguous or unknown prefix, an
    ancestor past the first commit and a malformed suffix are refused with the reason."""
    ds = "refs"
    url = lake.ds_url(ds)
    lake.create(ds)
    ids = [head(lake, ds)]
    for i in range(3):
        ids.append(import_(lake, ds, {"x": np.full(10, i, np.int64)}, "-m", f"c{i}"))
    assert ids[-1] == head(lake, ds)
    for spec, want in (("main", 3), ("main~1", 2), ("main^", 2), ("main~3", 0), ("main^^", 1),
                       (ids[2][:7], 2), (ids[2][:12].upper(), 2), (ids[3][:8] + "~2", 1)):
        rc, out, err = tfs("info", url, "--ref", spec, "--json")
        assert rc == 0, (spec, err)
        assert f'"{ids[want]}"' in out, spec
    rc, out, err = tfs("log", url, "main~1", "-n", "1")
    assert rc == 0 and out.startswith(f"commit {ids[2]}"), (out, err)
    rc, out, err = tfs("diff", url, ids[1][:6], "main")
    assert rc == 0 and "rows 10..29 added" in out, (out, err)
    rc, out, err = tfs("branch", url, "old", "--from", "main~2")
    assert rc == 0 and head(lake, ds, "old") == ids[1], err
    rc, out, err = tfs("sql", url + "@main~1", "SELECT count(*) FROM t", "--csv")
    assert rc == 0 and out.split()[-1] == "20", (out, err)
    for spec, why in (("main~4", "main has only 3 ancestors"),
                      ("main~x", "expected ~N or ^"),
                      (ids[2][:3], f"no branch, tag or commit '{ids[2][:3]}'"),
                      ("beefbeef", "no branch, tag or commit 'beefbeef'"),
                      ("nope^", "no branch, tag or commit 'nope'")):
        rc, out, err = tfs("info", url, "--ref", spec)
        assert rc != 0 and why in err, (spec, err)


def test_update_values(lake, mount):
    rng = np.random.default_rng(12)
    ds = "upd"
    N = 1000
    x0 = rng.standard_normal((N, 3)).astype("<f4")
    y = rng.integers(-30000, 30000, N).astype("<i2")
    lake.create(ds)
    c0 = import_(lake, ds, {"x": x0, "y": y}, "--chunk-size", "1k")
    info = lake.info(ds)
    rpc = schema_column(info, "x")["rows_per_chunk"]
    K = -(-N // rpc)
    tail = (K - 1) * rpc
    assert N % rpc and K >= 6, (rpc, K)

    steps = [(rpc - 5, 10),               # across one chunk boundary
             (2 * rpc - 1, 2 * rpc + 2),  # across three boundaries, four chunks
             (0, 1), (rpc, 1), (N - 1, 1),  # single rows: first, first of a chunk, last
             (tail, N - tail),            # exactly the partial last chunk
             (tail + 3, 5),               # inside the partial last chunk
             (tail - 2, 4),               # the last full chunk and the partial one
             (0, N)]                      # everything
    x = x0.copy()
    versions = [(c0, x.copy())]
    for i, (start, n) in enumerate(steps):
        before = object_paths(lake, ds)
        v = (rng.standard_normal((n, 3)) + 10 * (i + 1)).astype("<f4")
        prev = versions[-1][0]
        c = update(lake, ds, "x", start, v, "-m", f"update {start}+{n}")
        x[start:start + n] = v
        versions.append((c, x.copy()))
        inf = lake.info(ds)
        assert inf["commit"] == c and inf["parents"] == [prev] and inf["rows"] == N
        assert inf["message"] == f"update {start}+{n}"
        assert schema_column(inf, "x")["rows"] == N and schema_column(inf, "y")["rows"] == N
        touched = chunks_of(start, n, rpc)
        assert diff_lines(lake, ds, prev, c) == changed_ranges("x", touched, rpc, N), (start, n)
        # copy-on-write: exactly the touched chunks are new objects (+ a manifest and a commit)
        new = {i: p for i, p in object_paths(lake, ds).items() if i not in before}
        types = sorted(object_type(p) for p in new.values())
        assert types == [1] * len(touched) + [2, 3], (start, n, types)

    # failing updates change nothing at all
    snap = lake.snapshot(ds)
    objs = set(object_paths(lake, ds))
    bad = [("x", N - 5, np.zeros((10, 3), "<f4"), "outside"),
           ("x", N, np.zeros((1, 3), "<f4"), "outside"),
           ("x", 1 << 40, np.zeros((1, 3), "<f4"), None),
           ("x", 0, np.zeros((5, 3), "<f8"), None),     # dtype mismatch
           ("x", 0, np.zeros((5, 4), "<f4"), None),     # row shape mismatch
           ("x", 0, np.zeros(5, "<f4"), None),          # scalar rows for a (3,) column
           ("y", 0, np.zeros(5, "<i4"), None),          # dtype mismatch on the other column
           ("nope", 0, np.zeros(5, "<i2"), "nope")]     # no such column
    for col, start, arr, mention in bad:
        p = update_proc(lake, ds, col, start, arr)
        assert p.returncode != 0, f"update {col} {start} {arr.dtype}{arr.shape} should fail"
        assert p.stderr.strip() and "committed" not in p.stdout
        if mention:
            assert mention in p.stderr, p.stderr
        assert lake.snapshot(ds) == snap, f"failed update {col} {start} changed the dataset"
        assert set(object_paths(lake, ds)) == objs, f"failed update {col} {start} wrote objects"

    m = mount(lake)
    main = m.path / ds / "main"
    check_column_file(main / "x.npy", x)
    check_column_file(main / "y.npy", y)
    assert load_schema(main / "schema.json")["commit"] == versions[-1][0]
    for c, want in versions:  # every intermediate version is intact
        check_column_file(m.path / ds / "commits" / c / "x.npy", want)
        check_column_file(m.path / ds / "commits" / c / "y.npy", y)
    verify_ok(lake, ds)


# ------------------------------------------------------------------------------------------------
# 3. an old commit stays byte-identical; open files stay pinned; branches move after ref_ttl
# ------------------------------------------------------------------------------------------------

def test_mounted_old_commit_pinned(lake, mount):
    rng = np.random.default_rng(13)
    ds = "pin"
    x1 = rng.standard_normal((20000, 16)).astype("<f4")
    lake.create(ds)
    c1 = import_(lake, ds, {"x": x1}, "--chunk-size", "64k")
    m = mount(lake, ["ref_ttl=1"])
    dsdir = m.path / ds
    main, old = dsdir / "main", dsdir / "commits" / c1
    check_column_file(old / "x.npy", x1)
    check_column_file(main / "x.npy", x1)
    old_bytes = (old / "x.npy").read_bytes()
    assert (main / "x.npy").read_bytes() == old_bytes
    log_before = (dsdir / "log").read_text()
    assert log_before == log_text(lake, ds)

    fd = os.open(main / "x.npy", os.O_RDONLY)
    mm = mm_old = None
    try:
        assert os.pread(fd, 1 << 20, 0) == old_bytes[:1 << 20]
        mm = np.load(main / "x.npy", mmap_mode="r")
        mm_old = np.load(old / "x.npy", mmap_mode="r")
        assert np.array_equal(mm[:100], x1[:100]) and np.array_equal(mm_old[-100:], x1[-100:])

        x2 = rng.standard_normal((5000, 16)).astype("<f4")
        import_(lake, ds, {"x": x2})
        u = np.full((101, 16), -3.5, "<f4")
        c3 = update(lake, ds, "x", 0, u)
        x3 = np.concatenate([x1, x2])
        x3[:101] = u

        t0 = time.time()
        wait_until(lambda: load_schema(main / "schema.json")["commit"] == c3, 10 * SLOW,
                   "main/schema.json to show the new head")
        assert time.time() - t0 < 1 + 3 * SLOW, "branch dir took much longer than ref_ttl"
        assert _xattr(main, "commit") == c3

        # before main's new version is opened: the open descriptor reads the old commit
        assert os.pread(fd, len(old_bytes), 0) == old_bytes
        # the commit directory is unchanged
        assert (old / "x.npy").read_bytes() == old_bytes
        assert load_schema(old / "schema.json")["commit"] == c1
        assert np.array_equal(mm_old, x1) and np.array_equal(mm, x1)
        # the log file follows main
        wait_until(lambda: (dsdir / "log").read_text() == log_text(lake, ds), 10 * SLOW,
                   "the mounted log to follow main")
        assert (dsdir / "log").read_text() != log_before
        assert sorted(os.listdir(dsdir / "commits")) == sorted(
            e["commit"] for e in log_of(lake, ds))

        # main shows the new data
        check_column_file(main / "x.npy", x3)
        assert (old / "x.npy").read_bytes() == old_bytes
        # ... and what was opened before still reads the commit it was opened at, whether
        # served from the kernel's page cache or (after dropping it) from the daemon
        got = os.pread(fd, len(old_bytes), 0)
        assert got[:HEADER_SIZE] == old_bytes[:HEADER_SIZE], \
            "an fd opened before the branch moved reads the new commit's NPY header"
        assert got == old_bytes, "an fd opened before the branch moved reads new data"
        assert np.array_equal(mm, x1), "an mmap made before the branch moved shows new data"
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert os.pread(fd, len(old_bytes), 0) == old_bytes
    finally:
        del mm, mm_old
        os.close(fd)


# ------------------------------------------------------------------------------------------------
# 4. a branch costs a ref; an update costs the chunks it touches
# ------------------------------------------------------------------------------------------------

def test_dedup_growth_bound(lake):
    rng = np.random.default_rng(14)
    ds = "dedup"
    x = rng.standard_normal((10240, 1024), dtype=np.float32)  # 40 MiB
    lake.create(ds)
    import_(lake, ds, {"x": x}, "--chunk-size", "1M", "--codec", "raw")
    del x
    col = schema_column(lake.info(ds), "x")
    assert col["codec"] == "raw" and col["rows_per_chunk"] == 256 and col["chunks"] == 40
    chunk = col["chunk_bytes"] + 48
    dsdir = lake.root / ds
    size0 = tree_bytes(dsdir)
    assert size0 >= 40 * chunk

    objs0 = set(object_paths(lake, ds))
    branch(lake, ds, "dev")
    size1 = tree_bytes(dsdir)
    assert 0 < size1 - size0 < 4096, f"a branch grew the store by {size1 - size0} bytes"
    assert set(object_paths(lake, ds)) == objs0

    u = rng.standard_normal((12, 1024), dtype=np.float32)
    update(lake, ds, "x", 250, u, branch="dev")  # rows 250..261: chunks 0 and 1
    size2 = tree_bytes(dsdir)
    new = {i: p for i, p in object_paths(lake, ds).items() if i not in objs0}
    types = sorted(object_type(p) for p in new.values())
    assert types == [1, 1, 2, 3], types
    meta = sum(p.stat().st_size for p in new.values() if object_type(p) != 1)
    assert meta < 64 * 1024
    assert size2 - size1 <= 2 * chunk + meta + 4096, \
        f"updating 12 rows grew the store by {size2 - size1} bytes"
    assert size2 - size1 <= 2 * chunk + 64 * 1024
    assert diff_lines(lake, ds, "main", "dev") == ["~ column x rows 0..511 changed"]

    # the same update on main reuses dev's chunks: only a manifest and a commit are new
    objs2 = set(object_paths(lake, ds))
    update(lake, ds, "x", 250, u, "-m", "same rows on main")
    size3 = tree_bytes(dsdir)
    new = [p for i, p in object_paths(lake, ds).items() if i not in objs2]
    assert sorted(object_type(p) for p in new) == [3]  # even the manifest is dev's
    assert size3 - size2 <= 64 * 1024
    assert diff_lines(lake, ds, "main", "dev") == []


# ------------------------------------------------------------------------------------------------
# 5. tags never move
# ------------------------------------------------------------------------------------------------

def test_tags_never_move(lake, mount):
    rng = np.random.default_rng(19)
    ds = "tags"
    url = lake.ds_url(ds)
    x1 = rng.integers(0, 1 << 30, (500, 2)).astype("<i4")
    lake.create(ds)
    c1 = import_(lake, ds, {"x": x1}, "--chunk-size", "1k")
    assert tag(lake, ds, "v1") == c1
    tagfile = lake.root / ds / "refs" / "tags" / "v1"
    m = mount(lake, ["ref_ttl=1"])
    dsdir = m.path / ds
    check_column_file(dsdir / "v1" / "x.npy", x1)

    x2 = rng.integers(0, 1 << 30, (300, 2)).astype("<i4")
    c2 = import_(lake, ds, {"x": x2})
    for extra in ([], ["--at", c2], ["--at", "main"], ["--at", c1]):
        rc, out, err = tfs("tag", url, "v1", *extra)
        assert rc == 1, f"re-tagging v1 {extra}: exit {rc}\n{out}{err}"
        assert err.strip()
        assert tagfile.read_bytes() == c1.encode() + b"\n"
    assert lake.info(ds, "v1")["commit"] == c1

    x12 = np.concatenate([x1, x2])
    wait_until(lambda: load_schema(dsdir / "main" / "schema.json")["commit"] == c2, 10 * SLOW,
               "main to move")
    check_column_file(dsdir / "main" / "x.npy", x12)
    s1 = load_schema(dsdir / "v1" / "schema.json")
    assert s1["commit"] == c1 and s1["rows"] == 500
    assert _xattr(dsdir / "v1", "commit") == c1
    check_column_file(dsdir / "v1" / "x.npy", x1)

    # a tag made while mounted shows up
    assert tag(lake, ds, "v2") == c2
    wait_until(lambda: "v2" in os.listdir(dsdir), 10 * SLOW, "the new tag in the listing")
    assert load_schema(dsdir / "v2" / "schema.json")["commit"] == c2
    check_column_file(dsdir / "v2" / "x.npy", x12)
    check_column_file(dsdir / "v1" / "x.npy", x1)


# ------------------------------------------------------------------------------------------------
# 6. xattrs and layout of the mounted versions
# ------------------------------------------------------------------------------------------------

XATTRS = ("commit", "dtype", "shape", "rows", "chunk_bytes", "codec")


def test_xattrs_and_layout(lake, mount):
    ds = "xa"
    x = (np.arange(300 * 12) % 7).astype("<f4").reshape(300, 4, 3)
    y = np.random.default_rng(20).integers(-9, 9, 300).astype("<i4")
    lake.create(ds)
    root = head(lake, ds)
    import_(lake, ds, {"x": x}, "--chunk-size", "8k", "--codec", "zstd")
    c2 = import_(lake, ds, {"y": y}, "--chunk-size", "1k", "--codec", "raw")
    branch(lake, ds, "dev")
    c3 = import_(lake, ds, {"x": x[:100], "y": y[:100]}, branch="dev")
    tag(lake, ds, "t", at="main")

    m = mount(lake)
    dsdir = m.path / ds
    assert sorted(os.listdir(dsdir)) == sorted(["main", "dev", "t", "commits", "log"])
    every = set()
    for ref in ("main", "dev", "t"):
        every |= {e["commit"] for e in log_of(lake, ds, ref)}
    assert root in every and len(every) == 4
    assert sorted(os.listdir(dsdir / "commits")) == sorted(every)
    assert (dsdir / "log").read_text() == log_text(lake, ds)

    want_commit = {"main": c2, "dev": c3, "t": c2}
    vdirs = [(r, dsdir / r) for r in want_commit] + [(c, dsdir / "commits" / c) for c in every]
    for name, vdir in vdirs:
        schema = load_schema(vdir / "schema.json")
        commit = want_commit.get(name, name)
        assert schema["commit"] == commit, name
        assert _xattr(vdir, "commit") == commit
        assert _xattr(vdir / "schema.json", "commit") == commit
        assert "user.tensorfs.commit" in os.listxattr(vdir)
        assert "user.tensorfs.commit" in os.listxattr(vdir / "schema.json")
        files = sorted(os.listdir(vdir))
        assert files == sorted(["schema.json", "views"] + [c["file"] for c in schema["columns"]])
        for col in schema["columns"]:
            f = vdir / col["file"]
            assert set("user.tensorfs." + a for a in XATTRS) <= set(os.listxattr(f)), f
            assert _xattr(f, "commit") == commit
            assert _xattr(f, "dtype") == col["dtype"]
            assert _xattr(f, "shape") == "[" + ", ".join(map(str, col["shape"])) + "]"
            assert _xattr(f, "rows") == str(col["rows"])
            assert _xattr(f, "chunk_bytes") == str(col["chunk_bytes"]) \
                == str(col["rows_per_chunk"] * col["row_bytes"])
            assert _xattr(f, "codec") == col["codec"]
            with pytest.raises(OSError) as ei:
                os.getxattr(f, "user.tensorfs.nope")
            assert ei.value.errno == errno.ENODATA
        if commit == root:
            assert files == ["schema.json", "views"]
    f = dsdir / "main" / "x.npy"
    assert (_xattr(f, "dtype"), _xattr(f, "shape"), _xattr(f, "rows"), _xattr(f, "codec")) == \
        ("<f4", "[4, 3]", "300", "zstd")
    f = dsdir / "dev" / "y.npy"
    assert (_xattr(f, "dtype"), _xattr(f, "shape"), _xattr(f, "rows"), _xattr(f, "codec")) == \
        ("<i4", "[]", "400", "raw")
    check_column_file(dsdir / "dev" / "x.npy", np.concatenate([x, x[:100]]))
    assert os.stat(dsdir / "commits" / c2 / "x.npy").st_size == HEADER_SIZE + x.nbytes

    # lookups that must fail with ENOENT
    for bad in ("0" * 64, "f" * 64, c2[:63], c2 + "0", "abc"):
        with pytest.raises(FileNotFoundError):
            os.stat(dsdir / "commits" / bad)
    with pytest.raises(FileNotFoundError):
        os.stat(dsdir / "nosuchref")


def test_commits_listing_reads_each_commit_once(lake, mount):
    """ls commits/ walks the history; a commit never changes, so listing it again fetches only
    the refs (and commits made since), not every commit object again."""
    import json

    lake.build("h", {"x": np.arange(10, dtype=np.int64)})
    for i in range(24):
        lake.import_("h", {"x": np.arange(10, dtype=np.int64) + i})
    m = mount(lake)
    commits = m.path / "h" / "commits"

    def gets():
        return json.loads((m.path / ".tensorfs" / "stats").read_text())["store"]["gets"]

    g0 = gets()
    first = os.listdir(commits)
    g1 = gets()
    assert len(first) == 26 and g1 - g0 >= 26  # with the empty commit of create
    # the kernel may keep the listing: drop it, so the daemon lists again
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    assert sorted(os.listdir(commits)) == sorted(first)
    g2 = gets()
    assert g2 - g1 < 10, (g0, g1, g2)
    lake.import_("h", {"x": np.arange(10, dtype=np.int64)})
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    time.sleep(5.2)  # past the default ref_ttl: the branch's new head is read
    assert len(os.listdir(commits)) == 27
    assert gets() - g2 < 12
