# SPDX-License-Identifier: MIT
"""http:// lakes: nginx (Debian) serving a file:// lake directory read-only on loopback; the
mount lists datasets and refs from `tensorfs index` files or from nginx's autoindex, and reads
every byte back."""

import errno
import os

import numpy as np
import pytest

from conftest import check_column_file, tfs
from s3help import Nginx, UrlLake


@pytest.fixture
def built(lake):
    rng = np.random.default_rng(11)
    cols = {"x": rng.standard_normal((30_000, 5)).astype(np.float32),
            "y": rng.integers(0, 10, size=30_000).astype(np.uint8)}
    lake.build("ds", cols, "--chunk-size", "64k")
    rc, out, err = tfs("tag", lake.ds_url("ds"), "v1")
    assert rc == 0, err
    lake.build("other", {"z": np.arange(10, dtype=np.int32)})
    return lake, cols


def visible(path):
    return sorted(n for n in os.listdir(path) if not n.startswith("."))


def test_http_lake_with_index(built, tmp_path, mount):
    lake, cols = built
    rc, out, err = tfs("index", lake.url)
    assert rc == 0, err
    assert (lake.root / ".tensorfs-index").read_text().startswith("tensorfs-index 1\n")
    web = Nginx(tmp_path / "nginx", lake.root, autoindex=False)
    try:
        hl = UrlLake(web.url, tmp_path / "npy")
        rc, out, err = tfs("ls", hl.url)
        assert rc == 0 and out.split() == ["ds", "other"], err
        info = hl.info("ds", ref="v1")
        assert info["rows"] == 30_000
        m = mount(hl)
        assert visible(m.path) == ["ds", "other"]
        assert {"main", "v1", "commits"} <= set(os.listdir(m / "ds"))
        for name, src in cols.items():
            check_column_file(m / "ds" / "main" / f"{name}.npy", src)
            check_column_file(m / "ds" / "v1" / f"{name}.npy", src)
        # Read-only: the CLI refuses to write.
        rc, out, err = tfs("branch", hl.ds_url("ds"), "dev")
        assert rc != 0 and "read-only" in err
        m.stop()
    finally:
        web.stop()


def test_http_lake_autoindex(built, tmp_path, mount):
    """No index files: nginx's own directory listing is parsed."""
    lake, cols = built
    web = Nginx(tmp_path / "nginx", lake.root, autoindex=True)
    try:
        m = mount(UrlLake(web.url, tmp_path / "npy"))
        assert visible(m.path) == ["ds", "other"]
        assert {"main", "v1"} <= set(os.listdir(m / "ds"))
        check_column_file(m / "ds" / "v1" / "x.npy", cols["x"])
        m.stop()
    finally:
        web.stop()


def test_http_lake_no_listing(built, tmp_path, mount):
    """Neither index nor autoindex: listing the root fails clearly, but a dataset named in a
    path is still found and read (lookup needs only GET and HEAD)."""
    lake, cols = built
    web = Nginx(tmp_path / "nginx", lake.root, autoindex=False)
    try:
        hl = UrlLake(web.url, tmp_path / "npy")
        rc, out, err = tfs("ls", hl.url)
        assert rc != 0 and "tensorfs index" in err
        m = mount(hl)
        with pytest.raises(OSError) as e:
            os.listdir(m.path)
        assert e.value.errno in (errno.EOPNOTSUPP, errno.EIO, errno.ENOTSUP)
        check_column_file(m / "ds" / "main" / "y.npy", cols["y"])
        m.stop()
    finally:
        web.stop()
