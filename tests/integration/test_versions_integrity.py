# SPDX-License-Identifier: MIT
"""Versioning under stress: racing writers, writers killed at random points, gc deleting
exactly what no ref reaches, and verify finding damage anywhere in history."""

import os
import random
import re
import signal
import time

import numpy as np
import pytest

from conftest import check_column_file, schema_column, tfs
from verhelp import (BRANCH_MOVED, EX_TEMPFAIL, age, branch, committed_id, finish, gc, head,
                     import_, log_of, object_paths, object_type, popen_tfs, set_ref, stop_when_open,
                     tag, tmp_files, update, verify, verify_ok)

DAY = 86400


# ------------------------------------------------------------------------------------------------
# 1. racing writers
# ------------------------------------------------------------------------------------------------

def _block(i, n):
    return (np.arange(n, dtype="<i8") + (i + 1) * 10**9)


def test_racing_writers(lake, mount):
    ds = "race"
    url = lake.ds_url(ds)
    base = np.arange(1000, dtype="<i8")
    lake.create(ds)
    import_(lake, ds, {"x": base}, "--chunk-size", "64k", "-m", "base")
    base_commit = head(lake, ds)

    blocks = {}     # message -> rows
    done = {}       # commit id -> message
    failed = []     # (message, path) that got 75
    k = 0
    for rnd in range(3):
        procs = []
        for _ in range(4):
            k += 1
            msg = f"w{k}"
            blocks[msg] = _block(k, 40000 + 1000 * k)
            path = lake.write_npy(blocks[msg], name=msg)
            procs.append((msg, path, popen_tfs("import", url, f"x={path}", "-m", msg)))
        for msg, path, p in procs:
            rc, out, err = finish(p)
            if rc == 0:
                done[committed_id(out, ds)] = msg
            else:
                assert rc == EX_TEMPFAIL, f"{msg}: exit {rc}, want 0 or 75:\n{out}\n{err}"
                assert BRANCH_MOVED in err, err
                assert "committed" not in out
                failed.append((msg, path))
        verify_ok(lake, ds)
        rows = lake.info(ds)["rows"]
        assert rows == 1000 + sum(len(blocks[m]) for m in done.values())

    # deterministic: a writer stopped after it read the head, while another one commits
    k += 1
    msg = f"w{k}"
    blocks[msg] = _block(k, 600000)  # ~4.8 MB: the writer is still busy when we stop it
    path = lake.write_npy(blocks[msg], name=msg)
    for attempt in range(5):
        p = popen_tfs("import", url, f"x={path}", "-m", msg, "--threads", "1")
        if stop_when_open(p, path):
            break
        rc, out, err = finish(p)  # too fast: it committed; account for it and try again
        assert rc == 0, err
        done[committed_id(out, ds)] = msg
    else:
        pytest.fail("could not stop a writer in the middle of an import")
    try:
        k += 1
        other = f"w{k}"
        blocks[other] = _block(k, 10)
        done[import_(lake, ds, {"x": blocks[other]}, "-m", other)] = other
    finally:
        os.kill(p.pid, signal.SIGCONT)
    moved_to = head(lake, ds)
    rc, out, err = finish(p)
    assert rc == EX_TEMPFAIL, f"stopped writer: exit {rc}, want 75:\n{out}\n{err}"
    assert BRANCH_MOVED in err and "committed" not in out
    assert head(lake, ds) == moved_to
    failed.append((msg, path))

    # retrying after 75 works
    for msg, path in failed:
        rc, out, err = tfs("import", url, f"x={path}", "-m", msg)
        assert rc == 0, f"retry of {msg}: exit {rc}\n{err}"
        done[committed_id(out, ds)] = msg

    lg = log_of(lake, ds)
    assert lg[-1]["message"] == "create dataset" and lg[-2]["commit"] == base_commit
    above = lg[:-2]
    assert len(above) == len(done)
    assert {e["commit"] for e in above} == set(done)
    assert all(done[e["commit"]] == e["message"] for e in above)
    order = [e["message"] for e in reversed(above)]
    want = np.concatenate([base] + [blocks[mm] for mm in order])
    assert lake.info(ds)["rows"] == len(want)
    verify_ok(lake, ds)
    m = mount(lake)
    check_column_file(m.path / ds / "main" / "x.npy", want)


# ------------------------------------------------------------------------------------------------
# 2. writers killed at random points never break the dataset
# ------------------------------------------------------------------------------------------------

def test_kill9_writers(lake, mount):
    rng = np.random.default_rng(16)
    ds = "kill"
    url = lake.ds_url(ds)
    x = rng.standard_normal((1000, 256)).astype("<f4")  # 1 KiB rows, 64 rows per 64k chunk
    lake.create(ds)
    import_(lake, ds, {"x": x}, "--chunk-size", "64k")
    n_imp, n_upd = 4096, 2048
    dsdir = lake.root / ds

    def import_args(i):
        a = rng.standard_normal((n_imp, 256)).astype("<f4")
        return a, ["import", url, f"x={lake.write_npy(a, name=f'i{i}')}", "-m", f"op{i}",
                   "--threads", "1"]

    def update_args(i, rows):
        a = rng.standard_normal((n_upd, 256)).astype("<f4")
        start = int(rng.integers(0, rows - n_upd + 1))
        return (start, a), ["update", url, "x", f"{start}={lake.write_npy(a, name=f'u{i}')}",
                            "-m", f"op{i}"]

    def apply(x, kind, data):
        if kind == "import":
            return np.concatenate([x, data])
        start, a = data
        x = x.copy()
        x[start:start + len(a)] = a
        return x

    # unkilled runs, started the way the killed ones are: their durations spread the delays
    durations = {"import": 0.0, "update": 0.0}
    for i, kind in enumerate(("import", "update", "import", "update")):
        data, args = import_args(i) if kind == "import" else update_args(i, len(x))
        t0 = time.monotonic()
        p = popen_tfs(*args)
        p.wait()
        durations[kind] += (time.monotonic() - t0) / 2
        rc, out, err = finish(p)
        assert rc == 0, err
        x = apply(x, kind, data)

    # very early kills, then evenly spread over (and a little past) an unkilled run
    n_kills = 25
    fracs = [j / (n_kills - 6) * 1.2 for j in range(n_kills - 5)]
    random.Random(16).shuffle(fracs)
    delays = [0.0, 0.0002, 0.0005, 0.001, 0.002] + fracs
    applied = 0
    for i in range(4, 4 + n_kills):
        kind = "import" if i % 2 == 0 else "update"
        data, args = import_args(i) if kind == "import" else update_args(i, len(x))
        prev = head(lake, ds)
        delay = delays[i - 4]
        if i - 4 >= 5:
            delay *= durations[kind]
        p = popen_tfs(*args)
        if delay:
            time.sleep(delay)
        p.kill()
        finish(p)

        rc, out, err = verify(lake, ds)
        assert rc == 0, f"verify after killing {kind} at {delay * 1000:.1f} ms:\n{out}\n{err}"
        now = head(lake, ds)  # the ref file parses ...
        cpath = dsdir / "objects" / now[:2] / now[2:]
        assert cpath.is_file() and object_type(cpath) == 3  # ... and names a commit
        info = lake.info(ds)
        assert info["commit"] == now
        if now != prev:
            assert info["parents"] == [prev] and info["message"] == f"op{i}"
            x = apply(x, kind, data)
            applied += 1
        assert info["rows"] == len(x)
        assert schema_column(info, "x")["rows"] == len(x)

    leftovers = tmp_files(dsdir)
    # mtimes a few seconds back: test_gc_grace_zero_fresh covers just-written files
    for p in leftovers + list(object_paths(lake, ds).values()):
        age(p, 5)
    r = gc(lake, ds, "--grace", "0")
    assert tmp_files(dsdir) == [], "gc --grace 0 left temporary files"
    assert r["temp"] is None or r["temp"] == len(leftovers)
    r2 = gc(lake, ds, "--grace", "0")
    assert r2["deleted"] == 0 and r2["kept"] == r["kept"]
    verify_ok(lake, ds)
    assert len(log_of(lake, ds)) == 2 + 4 + applied
    m = mount(lake)
    check_column_file(m.path / ds / "main" / "x.npy", x)


# ------------------------------------------------------------------------------------------------
# 3. gc deletes exactly what no ref reaches
# ------------------------------------------------------------------------------------------------

def _commit_manifest(lake, ds, commit):
    raw = (lake.root / ds / "objects" / commit[:2] / commit[2:]).read_bytes()
    m = re.search(rb"^manifest ([0-9a-f]{64})$", raw[48:], re.M)
    assert m, "commit object names no manifest"
    return m.group(1).decode()


def _files(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for fn in files:
            p = os.path.join(dirpath, fn)
            out[os.path.relpath(p, root)] = os.stat(p).st_size
    return out


def test_gc_exact(lake):
    rng = np.random.default_rng(17)
    ds = "g"
    dsdir = lake.root / ds

    def arr(n):
        return rng.standard_normal((n, 8)).astype("<f4")

    lake.create(ds)
    import_(lake, ds, {"x": arr(3000)}, "--chunk-size", "4k")
    branch(lake, ds, "dev")
    c2 = import_(lake, ds, {"x": arr(500)}, branch="dev")
    update(lake, ds, "x", 3100, arr(10), branch="dev")  # a chunk of c2 now only in history
    import_(lake, ds, {"x": arr(300)}, branch="dev")
    keep = object_paths(lake, ds)

    # garbage: a branch reset after two commits ...
    branch(lake, ds, "side", frm=c2)
    import_(lake, ds, {"x": arr(700)}, branch="side")
    update(lake, ds, "x", 5, arr(200), branch="side")
    set_ref(lake, ds, "side", c2)
    garbage = {i: p for i, p in object_paths(lake, ds).items() if i not in keep}
    assert sorted(set(object_type(p) for p in garbage.values())) == [1, 2, 3]
    # ... and a well-formed object of another dataset copied in
    lake.create("other")
    import_(lake, "other", {"y": np.arange(5000, dtype="<i8")}, "--chunk-size", "4k")
    other_objs = object_paths(lake, "other")
    oid, opath = next((i, p) for i, p in other_objs.items()
                      if object_type(p) == 1 and i not in keep)
    dst = dsdir / "objects" / oid[:2] / oid[2:]
    dst.parent.mkdir(exist_ok=True)
    dst.write_bytes(opath.read_bytes())
    garbage[oid] = dst
    gsize = {i: p.stat().st_size for i, p in garbage.items()}
    for p in garbage.values():  # a few seconds old (test_gc_grace_zero_fresh: just written)
        age(p, 10)

    # writer leftovers
    hh = sorted(keep)[0][:2]
    old_tmp = [dsdir / "objects" / hh / ".tmp-424242-1", dsdir / "refs" / "heads" / ".tmp-424242-2"]
    young_tmp = dsdir / "objects" / hh / ".tmp-424242-3"
    for t in old_tmp + [young_tmp]:
        t.write_bytes(b"partial")
    for t in old_tmp:
        age(t, 2 * DAY)

    files0 = _files(dsdir)
    other0 = _files(lake.root / "other")

    # dry runs delete nothing
    r = gc(lake, ds, "--dry-run")
    assert (r["deleted"], r["bytes"], r["kept"], r["young"]) == (0, 0, len(keep), len(garbage))
    assert "would delete" in r["out"]
    assert r["temp"] == 2 and "would remove 2 temporary files" in r["out"]  # the old ones
    r = gc(lake, ds, "--grace", "0", "--dry-run")
    assert (r["deleted"], r["bytes"], r["kept"], r["young"]) == \
        (len(garbage), sum(gsize.values()), len(keep), 0)
    assert _files(dsdir) == files0

    # default grace: young objects stay, old temp files go
    r = gc(lake, ds)
    assert (r["deleted"], r["bytes"], r["young"]) == (0, 0, len(garbage))
    assert r["temp"] in (None, 2)
    assert not any(t.exists() for t in old_tmp) and young_tmp.exists()
    assert set(object_paths(lake, ds)) == set(keep) | set(garbage)

    # half the garbage is old: exactly that half goes
    ids = sorted(garbage)
    old_half, young_half = ids[::2], ids[1::2]
    for i in old_half:
        age(garbage[i], 2 * DAY)
    r = gc(lake, ds)
    assert (r["deleted"], r["bytes"], r["kept"], r["young"]) == \
        (len(old_half), sum(gsize[i] for i in old_half), len(keep), len(young_half))
    assert set(object_paths(lake, ds)) == set(keep) | set(young_half)

    age(young_tmp, 10)
    r = gc(lake, ds, "--grace", "0")
    assert (r["deleted"], r["bytes"], r["kept"], r["young"]) == \
        (len(young_half), sum(gsize[i] for i in young_half), len(keep), 0)
    assert set(object_paths(lake, ds)) == set(keep)
    assert not young_tmp.exists()
    for i, p in keep.items():  # the kept objects are untouched
        assert files0[os.path.relpath(p, dsdir)] == p.stat().st_size
    assert _files(lake.root / "other") == other0
    verify_ok(lake, ds)
    verify_ok(lake, "other")
    for ref in ("main", "dev", "side", c2):
        lake.info(ds, ref)

    # something reachable that cannot be read: gc deletes nothing and fails
    import_(lake, ds, {"x": arr(64)}, branch="side")
    set_ref(lake, ds, "side", c2)
    for p in object_paths(lake, ds).values():
        age(p, 2 * DAY)
    man = _commit_manifest(lake, ds, c2)
    mpath = dsdir / "objects" / man[:2] / man[2:]
    saved = mpath.read_bytes()
    mpath.unlink()
    files1 = _files(dsdir)
    rc, out, err = gc(lake, ds, "--grace", "0", ok=False)
    assert rc != 0 and err.strip(), f"gc with a missing reachable manifest: rc {rc}\n{out}"
    assert _files(dsdir) == files1, "gc deleted something although it could not read the refs"
    mpath.write_bytes(saved)
    r = gc(lake, ds, "--grace", "0")
    assert r["deleted"] >= 3
    verify_ok(lake, ds)


def test_gc_grace_zero_fresh(lake):
    """--grace 0: everything unreachable goes, even what was written a moment ago."""
    ds = "fresh"
    dsdir = lake.root / ds
    lake.create(ds)
    c1 = import_(lake, ds, {"x": np.arange(1000, dtype="<i8")}, "--chunk-size", "1k")
    branch(lake, ds, "side")
    keep = set(object_paths(lake, ds))
    # just after a wall-clock second boundary: the garbage and the gc share that second
    time.sleep(1.02 - time.time() % 1)
    import_(lake, ds, {"x": np.arange(500, dtype="<i8") - 7}, branch="side")
    set_ref(lake, ds, "side", c1)
    garbage = set(object_paths(lake, ds)) - keep
    tmpf = dsdir / "objects" / sorted(keep)[0][:2] / ".tmp-424242-9"
    tmpf.write_bytes(b"partial")
    r = gc(lake, ds, "--grace", "0")
    assert (r["deleted"], r["young"]) == (len(garbage), 0), \
        f"gc --grace 0 kept {r['young']} unreachable objects written < 1 s ago: {r['out']}"
    assert set(object_paths(lake, ds)) == keep
    assert not tmpf.exists(), "gc --grace 0 kept a fresh .tmp- file"
    verify_ok(lake, ds)


# ------------------------------------------------------------------------------------------------
# 4. verify detects damage anywhere in history
# ------------------------------------------------------------------------------------------------

def test_verify_detects_problems(lake):
    rng = np.random.default_rng(18)
    ds = "ver"
    url = lake.ds_url(ds)
    dsdir = lake.root / ds
    x = rng.standard_normal((2000, 16)).astype("<f4")  # 64 B rows, 64 rows per 4k chunk
    lake.create(ds)
    c1 = import_(lake, ds, {"x": x}, "--chunk-size", "4k", "--codec", "raw")
    c2 = update(lake, ds, "x", 0, np.zeros((10, 16), "<f4"))  # c1's chunk 0: history only
    branch(lake, ds, "dev")
    dev_rows = rng.standard_normal((64, 16)).astype("<f4")
    import_(lake, ds, {"x": dev_rows}, branch="dev")  # 2000 % 64 = 16: rows 2048.. are new
    tag(lake, ds, "t1", at=c1)
    verify_ok(lake, ds)

    objs = object_paths(lake, ds)
    by_payload = {p.read_bytes()[48:]: i for i, p in objs.items() if object_type(p) == 1}
    hist_chunk = by_payload[x[0:64].tobytes()]          # reachable only through c2's parent
    head_chunk = by_payload[x[64:128].tobytes()]        # in every version
    dev_chunk = by_payload[dev_rows[48:].tobytes()]     # only on dev (its partial tail)
    manifest = _commit_manifest(lake, ds, c2)

    def path(i):
        return dsdir / "objects" / i[:2] / i[2:]

    def expect_problem(oid, what, mention=None):
        rc, out, err = verify(lake, ds)
        assert rc != 0, f"verify missed {what}:\n{out}\n{err}"
        assert re.search(r"\b[1-9]\d* problems?", out), f"summary after {what}: {out!r}"
        assert oid[2:] in err, f"verify's stderr does not name {oid} after {what}:\n{err}"
        if mention:
            assert mention in err.lower(), f"stderr should say {mention!r}: {err}"

    for oid, what in ((hist_chunk, "a flipped byte in a chunk only history reaches"),
                      (head_chunk, "a flipped byte in a chunk of the head"),
                      (dev_chunk, "a flipped byte in a chunk only dev reaches"),
                      (manifest, "a flipped byte in a manifest"),
                      (c1, "a flipped byte in a parent commit")):
        p = path(oid)
        saved = p.read_bytes()
        b = bytearray(saved)
        b[len(b) - 3] ^= 0x40
        p.write_bytes(bytes(b))
        expect_problem(oid, what)
        p.write_bytes(saved)
        verify_ok(lake, ds)

    # a corrupted header (raw size field)
    p = path(head_chunk)
    saved = p.read_bytes()
    b = bytearray(saved)
    b[16] ^= 0x01
    p.write_bytes(bytes(b))
    expect_problem(head_chunk, "a corrupted chunk header")
    p.write_bytes(saved)

    # truncated, missing
    p.write_bytes(saved[:-100])
    expect_problem(head_chunk, "a truncated chunk")
    p.unlink()
    expect_problem(head_chunk, "a missing chunk", mention="missing")
    p.write_bytes(saved)
    mp = path(manifest)
    msaved = mp.read_bytes()
    mp.unlink()
    expect_problem(manifest, "a missing manifest", mention="missing")
    mp.write_bytes(msaved)
    verify_ok(lake, ds)

    # a tag pointing at a commit that does not exist
    ghost = "ab" * 32
    (dsdir / "refs" / "tags" / "ghost").write_bytes(ghost.encode() + b"\n")
    expect_problem(ghost, "a tag naming a missing commit")
    (dsdir / "refs" / "tags" / "ghost").unlink()
    verify_ok(lake, ds)
    rc, out, err = tfs("verify", url + "-nope")
    assert rc != 0
