# SPDX-License-Identifier: MIT
"""CLI misuse fails cleanly: a non-zero status, a message, and nothing changed."""

import io
import os
import subprocess

import numpy as np
import pytest

from conftest import (REPO_ROOT, SLOW, TENSORFS_BIN, is_mounted, kill_pids, pids_for_path, tfs,
                      unmount)


def expect_import_failure(lake, ds, columns, *opts):
    before = lake.snapshot(ds)
    p = lake.import_(ds, columns, *opts, check=False)
    assert p.returncode != 0, f"import {list(columns)} into {ds} should fail:\n{p.stderr}"
    assert p.stderr.strip(), "a failed import must say why on stderr"
    assert lake.snapshot(ds) == before, "a failed import changed the dataset"
    return p


def test_create_and_import_errors(lake):
    base = np.arange(30, dtype="<i8").reshape(10, 3)
    lake.build("ds", {"x": base})
    assert (lake.root / "ds" / "refs" / "heads" / "main").is_file()

    # create twice
    before = lake.snapshot("ds")
    rc, out, err = tfs("create", lake.ds_url("ds"))
    assert rc != 0 and err.strip()
    assert lake.snapshot("ds") == before

    # a dataset URL that would reach outside the lake, or spell it twice: refused, nothing made
    outside = lake.root.parent / "outside"
    for url in (f"{lake.url}/../outside/x", f"{lake.url}/./y", f"{lake.url}//z",
                f"{lake.url}/sub/../w"):
        rc, out, err = tfs("create", url)
        assert rc != 0 and "'..' or empty path segments" in err, (url, err)
    assert not outside.exists()
    assert sorted(p.name for p in lake.root.iterdir()) == ["ds"]

    # import into a dataset that does not exist
    rc, out, err = tfs("import", lake.ds_url("missing"), f"x={lake.write_npy(base)}")
    assert rc != 0 and err.strip()
    assert not (lake.root / "missing" / "refs" / "heads" / "main").exists()
    rc, out, err = tfs("info", lake.ds_url("missing"), "--json")
    assert rc != 0 and err.strip()

    # an input file that does not exist
    expect_import_failure(lake, "ds", {"x": lake.scratch / "no-such-file.npy"})

    # garbage instead of an NPY file
    junk = lake.scratch / "junk.npy"
    junk.write_bytes(b"this is not an npy file" + os.urandom(500))
    expect_import_failure(lake, "ds", {"x": junk})
    # a valid NPY magic with a broken header
    broken = lake.scratch / "broken.npy"
    broken.write_bytes(b"\x93NUMPY\x01\x00\x20\x00{'descr': '<i8', 'fortran_", )
    expect_import_failure(lake, "ds", {"x": broken})

    # a file shorter than its header says: header for (1000, 3) int64, half the data
    buf = io.BytesIO()
    np.save(buf, np.arange(3000, dtype="<i8").reshape(1000, 3))
    raw = buf.getvalue()
    trunc = lake.scratch / "trunc.npy"
    trunc.write_bytes(raw[:len(raw) - 12000])
    expect_import_failure(lake, "ds", {"x": trunc})
    # ... also as a new column of matching row count
    np.save(buf := io.BytesIO(), np.zeros((10, 1000), dtype="<f8"))
    trunc2 = lake.scratch / "trunc2.npy"
    trunc2.write_bytes(buf.getvalue()[:-1])
    expect_import_failure(lake, "ds", {"y": trunc2})

    # unsupported dtypes, with the dataset's row count so only the dtype is wrong
    unsupported = {
        "unicode": np.array([f"s{i}" for i in range(10)]),
        "object": np.array([{"a": i} for i in range(10)], dtype=object),
        "record": np.zeros(10, dtype=[("a", "<i4"), ("b", "<f8")]),
        "date": np.arange(10).astype("datetime64[D]"),
        "delta": np.arange(10).astype("timedelta64[s]"),
        "longdouble": np.arange(10, dtype=np.longdouble),
    }
    for name, arr in unsupported.items():
        if name == "longdouble" and np.dtype(np.longdouble).itemsize == 8:
            continue
        expect_import_failure(lake, "ds", {name: arr})
        # the same into a fresh, empty dataset
        fresh = "fresh_" + name
        lake.create(fresh)
        expect_import_failure(lake, fresh, {"c": arr})
    # a 0-d array
    expect_import_failure(lake, "ds", {"zero_d": np.array(5.0)})
    lake.create("fresh0")
    expect_import_failure(lake, "fresh0", {"c": np.array(5, dtype="<i4")})

    # bad options
    good = np.arange(30, dtype="<i8").reshape(10, 3)
    expect_import_failure(lake, "ds", {"x": good}, "--codec", "lz77")
    expect_import_failure(lake, "ds", {"x": good}, "--chunk-size", "lots")
    expect_import_failure(lake, "ds", {"x": good}, "--no-such-option")
    # a column argument without '='
    before = lake.snapshot("ds")
    rc, out, err = tfs("import", lake.ds_url("ds"), str(lake.write_npy(good)))
    assert rc != 0 and err.strip()
    assert lake.snapshot("ds") == before

    # after all that, the data is intact
    info = lake.info("ds")
    assert info["rows"] == 10 and [c["name"] for c in info["columns"]] == ["x"]


def run_mount_expect_failure(args, mnt, tmp_path, tag):
    """Run `tensorfs mount ...` that must fail; clean up whatever it leaves on success."""
    out, err = tmp_path / f"{tag}.out", tmp_path / f"{tag}.err"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        p = subprocess.Popen([TENSORFS_BIN, "mount", *map(str, args)],
                             stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
        try:
            rc = p.wait(timeout=20 * SLOW)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            if p.poll() is None:
                unmount(mnt)
                kill_pids([p.pid])
                p.wait(timeout=10)
            if is_mounted(mnt):
                unmount(mnt)
            left = pids_for_path(mnt)
            if left:
                kill_pids(left)
    assert rc is not None, f"`tensorfs mount {' '.join(map(str, args))}` hung (no exit in 20s)"
    return rc, out.read_text(errors="replace"), err.read_text(errors="replace")


@pytest.mark.parametrize("foreground", [True, False], ids=["fg", "daemon"])
def test_mount_errors(lake, tmp_path, foreground):
    fg = ["-f"] if foreground else []
    lake.build("ds", {"x": np.arange(10, dtype="<i4")})

    # a lake directory that does not exist
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    rc, out, err = run_mount_expect_failure(
        ["file://" + str(tmp_path / "no" / "such" / "lake"), mnt, *fg], mnt, tmp_path, "nolake")
    assert rc != 0, "mounting a missing lake must fail"
    assert err.strip(), "mounting a missing lake must say why on stderr"
    assert not is_mounted(mnt)

    # a mount point that does not exist
    nomnt = tmp_path / "no" / "mnt"
    rc, out, err = run_mount_expect_failure([lake.url, nomnt, *fg], nomnt, tmp_path, "nomnt")
    assert rc != 0, "mounting onto a missing directory must fail"
    assert err.strip(), "mounting onto a missing directory must say why on stderr"
    assert not pids_for_path(nomnt)

    # a configuration others can read that holds a secret: refused, and the terminal says why
    # (not only where the daemon's log is)
    cfg = tmp_path / "open.ini"
    cfg.write_text('[remote "r"]\nendpoint = http://127.0.0.1:9\naccess_key = AKID\n'
                   'secret_key = planted-secret-1234\n')
    os.chmod(cfg, 0o644)
    rc, out, err = run_mount_expect_failure(["s3://r@bucket/lake", mnt, "-o", f"config={cfg}",
                                             *fg], mnt, tmp_path, "opencfg")
    assert rc != 0 and not is_mounted(mnt)
    assert "chmod 600" in err and "planted-secret" not in err, err

    # a CUDA device that is not a number
    rc, out, err = run_mount_expect_failure([lake.url, mnt, "-o", "cuda_init=gpu0", *fg], mnt,
                                            tmp_path, "cudainit")
    assert rc != 0 and not is_mounted(mnt)
    assert "cuda_init=gpu0" in err, err

    # kept slots of a size that is not one
    rc, out, err = run_mount_expect_failure([lake.url, mnt, "-o", "staging_keep=lots", *fg], mnt,
                                            tmp_path, "stagingkeep")
    assert rc != 0 and not is_mounted(mnt)
    assert "staging_keep=lots" in err, err

    # a GPU cache that would leave nothing of the device free
    rc, out, err = run_mount_expect_failure([lake.url, mnt, "-o", "cache_gpu_headroom=0", *fg],
                                            mnt, tmp_path, "headroom")
    assert rc != 0 and not is_mounted(mnt)
    assert "cache_gpu_headroom=0" in err, err


def test_help():
    # help for one command: its lines of the usage text and an example, on stdout, status 0
    for argv in (["help", "import"], ["import", "--help"], ["import", "-h"]):
        rc, out, err = tfs(*argv)
        assert rc == 0, (argv, err)
        assert "--video SOURCE" in out and "--jsonl FILE" in out and "example:" in out, argv
        assert "  mount LAKE_URL" not in out and "  sql URL" not in out, argv
    rc, out, err = tfs("sql", "file:///nowhere/x", "--help")
    assert rc == 0 and "--near COL=Q.npy" in out and "  import URL" not in out
    # the whole text, asked for, goes to stdout; without a command it is a usage error
    rc, out, err = tfs("--help")
    assert rc == 0 and "  mount LAKE_URL" in out and "  sql URL" in out and not err
    rc, out, err = tfs()
    assert rc == 2 and "usage:" in err and not out
    # an unknown command: status 2, a message, nothing on stdout
    rc, out, err = tfs("help", "nope")
    assert rc == 2 and "no command 'nope'" in err and not out
    # after `--` a --help is an argument, not a request for help
    rc, out, err = tfs("sql", "file:///nowhere/x", "--", "--help")
    assert rc != 0 and "example:" not in out
    # a command's usage error: its own lines of the usage text, not every command's
    for argv, mine in ((["update", "file:///nowhere/x", "y", "-1=u.npy"], "  update URL COL"),
                       (["mix"], "  mix create|update"), (["sql"], "  sql URL[@REF]")):
        rc, out, err = tfs(*argv)
        assert rc == 2 and not out, (argv, out)
        assert "usage:" in err and mine in err and "  mount LAKE_URL" not in err, (argv, err)


def test_man_page_is_the_usage_text():
    """tensorfs(1)'s COMMANDS section is the usage text rendered: every command form of
    `tensorfs --help` is in it, and the page the build made holds it word for word."""
    rc, usage, _ = tfs("--help")
    rc2, roff, err = tfs("help", "--man")
    assert rc == 0 and rc2 == 0, err
    forms = [ln[2:34].rstrip() for ln in usage.splitlines()
             if ln.startswith("  ") and ln[2:3].islower()]
    assert len(forms) > 30
    for form in forms:
        esc = form.replace("\\", "\\e").replace("-", "\\-")
        assert f"\\fB{esc}" in roff, form
    # the examples go with their commands
    assert "tensorfs mix create file:///data/lake lm" in roff
    page = REPO_ROOT / "build" / "man" / "tensorfs.1"
    assert page.is_file(), "make builds build/man/tensorfs.1"
    text = page.read_text()
    assert roff in text and "@COMMANDS@" not in text and "@VERSION@" not in text
