# SPDX-License-Identifier: MIT
"""Directory listings, stat, schema.json, `tensorfs ls/info`, and the mount being read-only."""

import errno
import json
import os
import re
import stat

import numpy as np
import pytest

from conftest import (HEADER_SIZE, check_schema_column, load_schema, schema_column, tfs)

READONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


def visible(names):
    return {n for n in names if not n.startswith(".")}


def make_two(lake):
    rng = np.random.default_rng(1)
    alpha = {"image": rng.integers(0, 256, size=(300, 4, 4, 3), dtype=np.uint8),
             "score": rng.standard_normal(300).astype("<f8")}
    beta = {"tok": rng.integers(0, 50000, size=(40, 128)).astype("<i4")}
    lake.build("alpha", alpha, "-m", "alpha import")
    lake.build("beta", beta, "-m", "beta import", "--codec", "raw")
    return alpha, beta


def test_ls_stat_schema(lake, mount):
    alpha, beta = make_two(lake)

    rc, out, err = tfs("ls", lake.url)
    assert rc == 0, err
    assert set(l.strip() for l in out.splitlines() if l.strip()) == {"alpha", "beta"}

    m = mount(lake)
    assert visible(os.listdir(m.path)) == {"alpha", "beta"}
    assert stat.S_ISDIR(os.stat(m.path / "alpha").st_mode)
    assert "main" in os.listdir(m.path / "alpha")
    assert stat.S_ISDIR(os.stat(m.path / "alpha" / "main").st_mode)

    for ds, cols, msg, codec in (("alpha", alpha, "alpha import", None),
                                 ("beta", beta, "beta import", "raw")):
        main = m.path / ds / "main"
        names = set(os.listdir(main))
        want = {c + ".npy" for c in cols} | {"schema.json"}
        assert want <= names, f"{ds}/main lists {sorted(names)}"
        assert {n for n in names if n.endswith(".npy")} == {c + ".npy" for c in cols}

        sj = main / "schema.json"
        st = os.stat(sj)
        assert stat.S_ISREG(st.st_mode)
        schema = load_schema(sj)  # checks st_size == content length
        assert schema["format_version"] == 1
        assert schema["dataset"] == ds
        assert re.fullmatch(r"[0-9a-f]{64}", schema["commit"]), schema["commit"]
        assert isinstance(schema["parents"], list)
        assert all(re.fullmatch(r"[0-9a-f]{64}", p) for p in schema["parents"])
        assert schema["message"] == msg
        assert "time" in schema
        rows = next(iter(cols.values())).shape[0]
        assert schema["rows"] == rows
        assert sorted(c["name"] for c in schema["columns"]) == sorted(cols)
        for name, src in cols.items():
            col = schema_column(schema, name)
            check_schema_column(col, src, name)
            if codec:
                assert col["codec"] == codec
            st = os.stat(main / col["file"])
            assert stat.S_ISREG(st.st_mode)
            assert st.st_size == HEADER_SIZE + rows * col["row_bytes"]

        # `tensorfs info --json` prints the same JSON, for the default ref and --ref main
        assert lake.info(ds) == schema
        assert lake.info(ds, ref="main") == schema
        rc, out, err = tfs("info", lake.ds_url(ds))
        assert rc == 0, err
        for name in cols:
            assert name in out, f"`tensorfs info` does not mention column {name!r}:\n{out}"

    # the two datasets are distinct versions
    assert load_schema(m.path / "alpha/main/schema.json")["commit"] != \
        load_schema(m.path / "beta/main/schema.json")["commit"]

    # missing names
    for p in ("nope", "alpha/nope", "alpha/main/nope.npy", "alpha/main/image.npy/x"):
        with pytest.raises((FileNotFoundError, NotADirectoryError)):
            os.stat(m.path / p)


def test_read_only(lake, mount):
    make_two(lake)
    m = mount(lake)
    main = m.path / "alpha" / "main"
    before = (main / "score.npy").read_bytes()

    def refused(fn, *a):
        with pytest.raises(OSError) as ei:
            fn(*a)
        assert ei.value.errno in READONLY_ERRNOS, f"{fn.__name__}{a}: {ei.value!r}"

    refused(os.open, main / "new.npy", os.O_WRONLY | os.O_CREAT, 0o644)
    refused(os.open, main / "score.npy", os.O_WRONLY)
    refused(os.open, main / "score.npy", os.O_RDWR)
    refused(os.open, main / "schema.json", os.O_WRONLY | os.O_TRUNC)
    refused(os.mkdir, m.path / "gamma")
    refused(os.mkdir, main / "sub")
    refused(os.unlink, main / "score.npy")
    refused(os.rename, main / "score.npy", main / "s2.npy")
    refused(os.truncate, main / "score.npy", 0)
    refused(os.chmod, main / "score.npy", 0o666)
    refused(os.symlink, "score.npy", main / "link.npy")
    assert (main / "score.npy").read_bytes() == before
    assert json.loads((main / "schema.json").read_bytes())["dataset"] == "alpha"
