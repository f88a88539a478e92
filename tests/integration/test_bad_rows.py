# SPDX-License-Identifier: MIT
"""Bad rows, the same decision everywhere: a view's on_error=fail|pad|skip for rows of a chunk
damaged for good (a flipped byte: fails its checksum; a deleted object: missing). fail reads
them as EIO; pad as zeros, the file keeping its size; skip pads files and leaves the rows out of
control-file batches, which take the next healthy rows instead. .tensorfs/bad_rows lists them."""

import errno
import os

import numpy as np
import pytest

from conftest import flip_byte, parse_object_header

N = 4000  # rows: 256 B each, 64 a chunk of 16 KiB


def damage(lake, how):
    """Damage one chunk object of column x of dataset d; return its first row's value."""
    chunks = []
    for oid, path in lake.object_files("d"):
        raw = path.read_bytes()
        h = parse_object_header(raw)
        if h["type"] == 1 and h["payload_size"] == 64 * 256:
            chunks.append((oid, path, raw))
    oid, path, raw = sorted(chunks)[len(chunks) // 2]
    first = int(np.frombuffer(raw[48:56], "<i8")[0]) if raw[8:9] == b"\0" else None
    if how == "flip":
        flip_byte(path, 48 + 100, 0x5A)
    else:
        os.unlink(path)
    return oid, first


@pytest.mark.parametrize("how", ["flip", "missing"])
def test_on_error(lake, mount, how):
    import tensorfs

    x = np.repeat(np.arange(N, dtype=np.int64)[:, None], 32, axis=1)  # row i is all i
    lake.build("d", {"x": x, "y": np.arange(N, dtype=np.int64)}, "--chunk-size", "16k",
               "--codec", "raw")
    oid, _ = damage(lake, how)
    m = mount(lake)
    main = m.path / "d" / "main"
    # fail (default): EIO
    with pytest.raises(OSError) as e:
        (main / "views" / "seed=3" / "x.npy").read_bytes()
    assert e.value.errno == errno.EIO
    # pad: zeros for the bad rows, every other row exact; the file keeps its size
    got = np.load(main / "views" / "seed=3,on_error=pad" / "x.npy")
    order = np.load(main / "views" / "seed=3,on_error=pad" / "y.npy")
    bad = [i for i in range(N) if not got[i].any() and order[i] != 0]
    assert len(bad) == 64, len(bad)  # one chunk of 64 rows
    bad_rows = sorted(int(order[i]) for i in bad)
    assert bad_rows == list(range(bad_rows[0], bad_rows[0] + 64)) and bad_rows[0] % 64 == 0
    for i in range(N):
        if i not in bad:
            assert (got[i] == order[i]).all()
    listing = (m.path / ".tensorfs" / "bad_rows").read_text()
    line = [ln for ln in listing.splitlines() if not ln.startswith("#")]
    assert len(line) == 1 and line[0].startswith(f"x {bad_rows[0] // 64} {bad_rows[0]} "
                                                 f"{bad_rows[-1]} "), listing
    assert oid[2:] in line[0]
    assert ("checksum_mismatch" if how == "flip" else "object_is_missing") in line[0]
    assert oid in m.log()
    # skip: batches of next leave the bad rows out and stay full
    st = tensorfs.Stager(m.path, "d/main/views/seed=3,on_error=skip", ["x", "y"],
                         batch_size=100)
    try:
        seen = []
        for b in st.batches():
            ys = b["y"].tolist()
            assert (b["x"] == b["y"][:, None]).all()
            seen += ys
            if len(seen) < N - 64:
                assert b.rows == 100
        assert sorted(seen) == sorted(set(range(N)) - set(bad_rows))
        assert seen == [int(r) for r in order if int(r) not in set(bad_rows)]
    finally:
        st.close()
    # a stream with on_error=fail still fails, with a reply naming the error
    st = tensorfs.Stager(m.path, "d/main/views/seed=3", ["x"], batch_size=N)
    try:
        with pytest.raises(tensorfs.StagingError) as e:
            st.next()
        assert e.value.name == "EIO"
    finally:
        st.close()


def test_s3_404_is_a_bad_row(tmp_path, mount, monkeypatch):
    """An object the S3 server answers 404 for: damaged for good, padded by on_error=pad."""
    import botocore.session

    from s3help import S3Server, UrlLake, s3_env

    srv = S3Server(tmp_path / "s3data", buckets=("lake",))
    try:
        s3_env(monkeypatch, srv.endpoint)
        lk = UrlLake("s3://lake/l", tmp_path / "npy")
        x = np.repeat(np.arange(N, dtype=np.int64)[:, None], 32, axis=1)
        lk.create("d")
        lk.import_("d", {"x": x, "y": np.arange(N, dtype=np.int64)}, "--chunk-size", "16k",
                   "--codec", "raw")
        client = botocore.session.get_session().create_client(
            "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
            aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
        objs = client.list_objects_v2(Bucket="lake", Prefix="l/d/objects/")["Contents"]
        chunks = sorted(o["Key"] for o in objs if o["Size"] == 48 + 64 * 256)
        gone = chunks[len(chunks) // 2]
        client.delete_object(Bucket="lake", Key=gone)
        m = mount(lk)
        vdir = m.path / "d" / "main" / "views" / "seed=1,on_error=pad"
        got, order = np.load(vdir / "x.npy"), np.load(vdir / "y.npy")
        zero = [int(order[i]) for i in range(N) if not got[i].any() and order[i] != 0]
        assert len(zero) == 64, len(zero)
        listing = (m.path / ".tensorfs" / "bad_rows").read_text()
        assert "object_is_missing" in listing and gone.split("/")[-1] in listing, listing
    finally:
        srv.stop()


def test_dataset_skips_bad_rows(lake, mount):
    """tensorfs.torch.Dataset over an on_error=skip view: a bad row's index yields the next
    healthy row of the order, so a DataLoader's batches stay full and hold no bad row; the view's
    .bad_rows lists the view rows left out."""
    import torch.utils.data

    import tensorfs
    from tensorfs.torch import Dataset

    x = np.repeat(np.arange(N, dtype=np.int64)[:, None], 32, axis=1)
    lake.build("d", {"x": x, "y": np.arange(N, dtype=np.int64)}, "--chunk-size", "16k",
               "--codec", "raw")
    damage(lake, "flip")
    m = mount(lake)
    vdir = tensorfs.view_path(m.path / "d" / "main", seed=5, on_error="skip")
    assert vdir.endswith("views/seed=5,on_error=skip")
    assert (m.path / "d" / "main" / "views" / "seed=5,on_error=skip" / ".bad_rows").read_text() \
        == ""  # nothing read yet, nothing known
    order = np.load(os.path.join(vdir, "y.npy"))  # y is healthy: the view's order
    ds = Dataset(vdir, ["x", "y"])
    assert ds.skip_bad and len(ds) == N
    seen, batches = [], 0
    for b in torch.utils.data.DataLoader(ds, batch_size=100, num_workers=2):
        assert b["x"].shape == (100, 32)  # full batches
        assert (b["x"] == b["y"][:, None]).all(), "a padded (zero) row came through"
        seen += b["y"].tolist()
        batches += 1
    assert batches == N // 100
    listed = [int(n) for n in open(os.path.join(vdir, ".bad_rows")).read().split()]
    assert len(listed) == 64, listed  # one chunk of 64 rows
    bad_values = {int(order[i]) for i in listed}
    assert not bad_values & set(seen)
    # Every healthy row is there; each bad row's place went to the next healthy one.
    assert set(seen) == set(range(N)) - bad_values
    healthy = [int(order[i]) for i in range(N) if i not in set(listed)]
    assert len(seen) - len(set(seen)) == 64 and sorted(set(seen)) == sorted(healthy)
    # A pad view is not skipped: its zeros come through as rows.
    pad = Dataset(tensorfs.view_path(m.path / "d" / "main", seed=5, on_error="pad"), ["x"])
    assert not pad.skip_bad
    assert not pad[listed[0]].any()
