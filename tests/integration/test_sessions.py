# SPDX-License-Identifier: MIT
"""Write sessions: parts imported in any order (and again, when retried) become one commit equal,
row for row, to importing the same sources on one machine; missing or mismatched parts are
refused with the dataset unchanged; gc keeps a session being written and forgets an old one."""

import os
import signal
import subprocess
import time

import numpy as np

from conftest import run_proc, write_dir, write_text


def make_parts(tmp_path, sizes, seed=5):
    """Sources of a fixed, a text and a ragged column per part: [{col: path}]."""
    rng = np.random.default_rng(seed)
    parts = []
    for p, n in enumerate(sizes):
        x = rng.integers(0, 1000, size=(n, 3)).astype(np.int32)
        np.save(tmp_path / f"x{p}.npy", x)
        texts = [f"part {p} row {i} " + "é" * (i % 6) for i in range(n)]
        arrays = [rng.integers(0, 50, size=(i % 4 + 1, 2)).astype(np.int16) for i in range(n)]
        parts.append({"x": tmp_path / f"x{p}.npy",
                      "t": write_text(tmp_path / f"t{p}.txt", texts),
                      "r": write_dir(tmp_path / f"r{p}", arrays)})
    return parts


def col_args(src):
    return [f"{k}={v}" for k, v in src.items()]


def import_part(lake, ds, session, part, src, *opts, check=True):
    return run_proc(["import", lake.ds_url(ds), "--session", session, "--part", str(part),
                     *col_args(src), *opts], check=check)


def same_version(a, b):
    """Two mounted version directories hold the same rows (fixed, text and ragged)."""
    for f in ("x.npy", "t/offsets.npy", "r/offsets.npy", "r/shapes.npy"):
        x, y = np.load(a / f), np.load(b / f)
        assert x.shape == y.shape and (x == y).all(), f
    for f in ("t/data.bin", "t/lines.txt", "r/data.bin"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_parts_in_any_order_commit_equal_to_one_machine(lake, mount, tmp_path):
    sizes = [700, 1, 513, 1200]
    parts = make_parts(tmp_path, sizes)
    lake.create("one")
    for src in parts:
        lake.import_("one", src, "--chunk-size", "4k")
    lake.create("par")
    # Out of order, and part 2 written twice (a retried worker): the last record counts.
    for p in (3, 1, 2, 0, 2):
        out = import_part(lake, "par", "s1", p, parts[p], "--chunk-size", "4k").stdout
        assert f"recorded part {p} of session s1" in out
    ls = run_proc(["session", "ls", lake.ds_url("par")], check=True).stdout
    assert ls.splitlines()[1].split()[:3] == ["s1", "4", str(sum(sizes))], ls
    # Nothing is visible before the commit.
    assert lake.info("par")["rows"] == 0
    out = run_proc(["commit", lake.ds_url("par"), "--session", "s1", "--parts", "4",
                    "-m", "four parts"], check=True).stdout
    assert f"{sum(sizes)} rows" in out
    info = lake.info("par")
    assert info["rows"] == sum(sizes)
    assert run_proc(["verify", lake.ds_url("par")]).returncode == 0
    # The session is gone once committed; committing it again is an error.
    assert len(run_proc(["session", "ls", lake.ds_url("par")], check=True).stdout.splitlines()) == 1
    assert run_proc(["commit", lake.ds_url("par"), "--session", "s1"]).returncode == 1
    m = mount(lake)
    same_version(m / "one" / "main", m / "par" / "main")
    # Views read the listed chunks of the committed version right.
    rows = np.arange(sum(sizes))
    x = np.load(m / "par" / "main" / "x.npy")
    vx = np.load(m / "par" / "main" / "views" / "seed=4" / "x.npy")
    assert sorted(map(tuple, vx)) == sorted(map(tuple, x[rows]))


def test_commit_appends_to_a_branch_and_appends_after(lake, mount, tmp_path):
    """Parts go after the branch's rows; a later ordinary import appends after the parts."""
    parts = make_parts(tmp_path, [300, 300, 301, 5], seed=9)
    lake.create("one")
    lake.create("par")
    for src in parts:
        lake.import_("one", src, "--chunk-size", "2k")
    lake.import_("par", parts[0], "--chunk-size", "2k")
    import_part(lake, "par", "s", 1, parts[2], "--chunk-size", "2k")
    import_part(lake, "par", "s", 0, parts[1], "--chunk-size", "2k")
    run_proc(["commit", lake.ds_url("par"), "--session", "s"], check=True)
    lake.import_("par", parts[3])
    m = mount(lake)
    same_version(m / "one" / "main", m / "par" / "main")
    # Rows overwritten across the boundary of two parts' chunks.
    run_proc(["update", lake.ds_url("par"), "x", f"250={parts[3]['x']}"], check=True)
    ref = run_proc(["log", lake.ds_url("par"), "-n", "1"], check=True).stdout.split()[1]
    x = np.load(m / "par" / "commits" / ref / "x.npy")
    assert (x[250:255] == np.load(parts[3]["x"])).all()
    assert (x[:250] == np.load(parts[0]["x"])[:250]).all()


def test_missing_or_mismatched_parts_are_refused(lake, tmp_path):
    parts = make_parts(tmp_path, [10, 10, 10])
    lake.create("d")
    import_part(lake, "d", "s", 0, parts[0])
    import_part(lake, "d", "s", 2, parts[2])
    before = lake.snapshot("d")
    p = run_proc(["commit", lake.ds_url("d"), "--session", "s"])
    assert p.returncode == 1 and "part 1 is missing" in p.stderr
    p = run_proc(["commit", lake.ds_url("d"), "--session", "s", "--parts", "2"])
    assert p.returncode == 1
    # A part whose x has another dtype.
    np.save(tmp_path / "xf.npy", np.zeros((10, 3), np.float32))
    import_part(lake, "d", "s", 1, dict(parts[1], x=tmp_path / "xf.npy"))
    p = run_proc(["commit", lake.ds_url("d"), "--session", "s"])
    assert p.returncode == 1 and "session s part 1: column x" in p.stderr, p.stderr
    assert lake.snapshot("d") == before
    # Fixed by writing the part again; then it commits.
    import_part(lake, "d", "s", 1, parts[1])
    run_proc(["commit", lake.ds_url("d"), "--session", "s"], check=True)
    assert lake.info("d")["rows"] == 30
    # Flags that belong to the commit, a bad session name, a part out of range.
    p = run_proc(["import", lake.ds_url("d"), "--session", "s", "--part", "0", "--branch", "b",
                  *col_args(parts[0])])
    assert p.returncode == 2
    p = run_proc(["import", lake.ds_url("d"), "--session", "../x", "--part", "0",
                  *col_args(parts[0])])
    assert p.returncode == 1 and "session '../x'" in p.stderr
    p = run_proc(["import", lake.ds_url("d"), "--session", "s", "--part", "1000000",
                  *col_args(parts[0])])
    assert p.returncode == 2


def test_killed_part_writer_leaves_nothing_recorded(lake, tmp_path, tfs_bin):
    """A part killed mid-import records nothing; written again, the session commits."""
    big = np.random.default_rng(1).random((400_000, 16)).astype(np.float32)
    np.save(tmp_path / "big.npy", big)
    lake.create("d")
    proc = subprocess.Popen([tfs_bin, "import", lake.ds_url("d"), "--session", "k",
                             "--part", "0", f"x={tmp_path / 'big.npy'}", "--chunk-size", "64k",
                             "--level", "19", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.7)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (lake.root / "d" / "sessions" / "k").exists() or \
        not os.listdir(lake.root / "d" / "sessions" / "k")
    p = run_proc(["commit", lake.ds_url("d"), "--session", "k"])
    assert p.returncode == 1 and "no session 'k'" in p.stderr
    small = tmp_path / "small.npy"
    np.save(small, big[:1000])
    import_part(lake, "d", "k", 0, {"x": small})
    run_proc(["commit", lake.ds_url("d"), "--session", "k"], check=True)
    assert lake.info("d")["rows"] == 1000
    # The killed attempt's chunks are garbage: gc with no grace removes them.
    out = run_proc(["gc", lake.ds_url("d"), "--grace", "0", "--quiet"], check=True).stdout
    assert "deleted 0 " not in out, out
    assert run_proc(["verify", lake.ds_url("d")]).returncode == 0


def test_gc_keeps_a_session_being_written_and_forgets_an_old_one(lake, tmp_path):
    parts = make_parts(tmp_path, [50, 60])
    lake.create("d")
    import_part(lake, "d", "live", 0, parts[0])
    import_part(lake, "d", "live", 1, parts[1])
    import_part(lake, "d", "gone", 0, parts[1])
    # Within the grace period both stay, chunks and all.
    out = run_proc(["gc", lake.ds_url("d"), "--grace", "3600", "--quiet"], check=True).stdout
    assert "0 abandoned write sessions" in out
    run_proc(["session", "abort", lake.ds_url("d"), "gone"], check=True)
    time.sleep(1.1)
    # The live session was last written over a second ago: with no grace it is forgotten, so
    # first a gc with a grace that covers it, then commit, then gc with none.
    run_proc(["gc", lake.ds_url("d"), "--grace", "60", "--quiet"], check=True)
    run_proc(["commit", lake.ds_url("d"), "--session", "live"], check=True)
    assert lake.info("d")["rows"] == 110
    assert run_proc(["verify", lake.ds_url("d")]).returncode == 0
    # An abandoned session: recorded, then older than the grace period.
    import_part(lake, "d", "old", 0, parts[0])
    time.sleep(1.1)
    out = run_proc(["gc", lake.ds_url("d"), "--grace", "1", "--quiet"], check=True).stdout
    assert "1 abandoned write sessions" in out, out
    assert len(run_proc(["session", "ls", lake.ds_url("d")], check=True).stdout.splitlines()) == 1
    assert run_proc(["verify", lake.ds_url("d")]).returncode == 0
