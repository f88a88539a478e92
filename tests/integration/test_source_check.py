# SPDX-License-Identifier: MIT
"""A source read from S3 in many ranges is checked whole against the MD5 that its ETag is: a
range damaged on the way (the fault proxy flips a byte of a reply) passes every other test, so
without the check its wrong bytes would be imported. An import that finds the damage runs once
more from the start, and fails, leaving the dataset as it was, when the damage persists. An
ETag that is not an MD5 (S3's, for an object encrypted with a KMS key) checks nothing and
fails nothing. Each source kind that reads a URL's object as it arrives is covered: .npy,
JSON Lines, a WebDataset shard, an .npz (a zip, read from its end), Megatron .bin/.idx and an
audio file (demuxed by FFmpeg)."""

import json
import os
import subprocess

import numpy as np
import pytest

from conftest import TENSORFS_BIN, write_tar
from faultproxy import FaultProxy
from s3help import S3Server, s3_env
from test_megatron import write_megatron
from test_url_sources import tree_bytes

MiB = 1 << 20


def write_source(root, kind):
    """A source of `kind` of 2-3 MiB (three ranges of 1 MiB) under root: (import options with
    {base} for its directory, files written)."""
    rng = np.random.default_rng(5)
    root.mkdir(parents=True, exist_ok=True)
    if kind == "npy":
        np.save(root / "x.npy", rng.standard_normal((300_000, 2)).astype(np.float32))
        return ({"x": "{base}/x.npy"},), ["x.npy"]
    if kind == "jsonl":
        (root / "r.jsonl").write_text("".join(
            json.dumps({"id": i, "s": "%016x" % int(rng.integers(1 << 62))}) + "\n"
            for i in range(60_000)))
        return ({}, "--jsonl", "{base}/r.jsonl"), ["r.jsonl"]
    if kind == "wds":
        write_tar(root / "s.tar", ((f"{i:05d}{ext}", data) for i in range(400)
                                   for ext, data in ((".cls", str(i).encode()),
                                                     (".bin", rng.bytes(6000)))))
        return ({}, "--webdataset", "{base}/s.tar"), ["s.tar"]
    if kind == "npz":
        np.savez(root / "a.npz", p=rng.standard_normal((200_000, 2)),
                 q=np.arange(200_000, dtype=np.int32))
        return ({}, "--npz", "{base}/a.npz"), ["a.npz"]
    if kind == "megatron":
        seqs = [rng.integers(0, 50000, int(rng.integers(100, 900))).astype(np.uint16)
                for _ in range(3000)]
        write_megatron(root / "c", seqs, np.uint16)
        return ({}, "--megatron", "{base}/c"), ["c.bin", "c.idx"]
    assert kind == "audio"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    "sine=frequency=440:sample_rate=48000:duration=12", "-ac", "2",
                    str(root / "a.wav")], check=True)
    return ({}, "--audio", "{base}/a.wav", "--rate", "8000", "--mono"), ["a.wav"]


def fill(args, base):
    cols, *opts = args
    return {k: v.format(base=base) for k, v in cols.items()}, *[o.format(base=base)
                                                                 for o in opts]


@pytest.fixture
def bucket(tmp_path, monkeypatch):
    """s3rver with a bucket "src"; yields a function that uploads files under a directory."""
    import botocore.session

    srv = S3Server(tmp_path / "s3data", buckets=("src",))
    s3_env(monkeypatch, srv.endpoint)
    client = botocore.session.get_session().create_client(
        "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])

    def upload(root, names):
        for n in names:
            client.put_object(Bucket="src", Key=n, Body=(root / n).read_bytes())

    upload.srv = srv
    yield upload
    srv.stop()


def through(monkeypatch, proxy, spool):
    """Point tensorfs at the proxy; ranges of 1 MiB, 4 at once; quick retries."""
    spool.mkdir(exist_ok=True)
    s3_env(monkeypatch, proxy.endpoint, TENSORFS_HTTP_PART_SIZE=MiB, TENSORFS_HTTP_PARALLEL=4,
           TENSORFS_HTTP_BACKOFF_MS=5, TENSORFS_HTTP_BACKOFF_MAX_MS=50, TMPDIR=spool)


KINDS = ["npy", "jsonl", "wds", "npz", "megatron", "audio"]


@pytest.mark.parametrize("kind", KINDS)
def test_damage_on_the_way_is_found_and_the_import_runs_again(lake, mount, tmp_path,
                                                             monkeypatch, bucket, kind):
    """Every GET's first reply has a byte flipped (the proxy passes a request's next attempt):
    the first run finds its source's bytes damaged and the import runs again, which makes the
    dataset the local files make."""
    src = tmp_path / "src"
    args, names = write_source(src, kind)
    bucket(src, names)
    lake.create("local")
    cols, *opts = fill(args, src)
    assert lake.import_("local", cols, *opts).returncode == 0
    proxy = FaultProxy(bucket.srv.port, rate=1.0, faults=("corrupt",), workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        lake.create("s3")
        cols, *opts = fill(args, "s3://src")
        p = lake.import_("s3", cols, *opts, check=False)
    finally:
        proxy.stop()
    assert p.returncode == 0, p.stderr
    assert proxy.counts["corrupt"] >= 3, proxy.counts
    assert "damaged on the way" in p.stderr and "reading them again from the start" in p.stderr, \
        p.stderr
    assert os.listdir(tmp_path / "spool") == []
    m = mount(lake)
    want, got = tree_bytes(m / "local" / "main"), tree_bytes(m / "s3" / "main")
    assert sorted(got) == sorted(want)
    for k in want:
        if k == "schema.json":  # an audio row's path is the name it was given
            assert [c for c in json.loads(got[k])["columns"] if c["name"] != "path"] == \
                [c for c in json.loads(want[k])["columns"] if c["name"] != "path"]
        elif not k.startswith("path/"):
            assert got[k] == want[k], f"{kind}: {k} differs"


@pytest.mark.parametrize("kind", ["npy", "wds", "audio"])
def test_damage_that_persists_fails_the_import(lake, tmp_path, monkeypatch, bucket, kind):
    """Every reply of the source is damaged, every time: the import fails after its second
    run, naming the source, and the dataset and $TMPDIR are left as they were."""
    src = tmp_path / "src"
    args, names = write_source(src, kind)
    bucket(src, names)
    lake.create("d")
    before = lake.info("d")
    proxy = FaultProxy(bucket.srv.port, corrupt_path=names[0], workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        cols, *opts = fill(args, "s3://src")
        p = lake.import_("d", cols, *opts, check=False)
    finally:
        proxy.stop()
    assert p.returncode == 1, p.stderr
    assert p.stderr.count(f"s3://src/{names[0]}: its bytes are not those its ETag's MD5") == 2, \
        p.stderr
    assert "failed; the dataset is unchanged" in p.stderr, p.stderr
    assert lake.info("d") == before
    assert os.listdir(tmp_path / "spool") == []


def test_a_shard_found_damaged_before_it_is_opened(lake, tmp_path, monkeypatch, bucket):
    """The second of two WebDataset shards is fetched beside the first one's import, and its
    check against its ETag ends, damaged, before the import opens it: that open's failure is
    the damage, so the import runs again (and fails again, naming the shard twice), not an
    archive error that ends it at once."""
    src = tmp_path / "src"
    src.mkdir()
    rng = np.random.default_rng(6)
    for name, n in (("a.tar", 4000), ("b.tar", 200)):  # b: two ranges, checked as they come
        write_tar(src / name, ((f"{name[0]}{i:05d}{ext}", data) for i in range(n)
                               for ext, data in ((".cls", str(i).encode()),
                                                 (".bin", rng.bytes(6000)))))
    bucket(src, ["a.tar", "b.tar"])
    lake.create("d")
    before = lake.info("d")
    proxy = FaultProxy(bucket.srv.port, corrupt_path="b.tar", workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        p = lake.import_("d", {}, "--webdataset", "s3://src/a.tar", "s3://src/b.tar",
                         check=False)
    finally:
        proxy.stop()
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("s3://src/b.tar: its bytes are not those its ETag's MD5") == 2, \
        p.stderr
    assert "reading them again from the start" in p.stderr, p.stderr
    assert lake.info("d") == before
    assert os.listdir(tmp_path / "spool") == []


def test_an_etag_that_is_not_an_md5_checks_nothing(lake, mount, tmp_path, monkeypatch, bucket):
    """Replies as S3 gives them for an object encrypted with a KMS key: an ETag of 32 hex
    digits that is not the MD5 of the bytes. A source of one range (checked by the store) and
    one of many (checked as it arrives) import as the local files do, with no retry."""
    src = tmp_path / "src"
    (args, names), (args2, names2) = write_source(src, "npy"), write_source(src, "jsonl")
    (src / "small.jsonl").write_text("".join(json.dumps({"i": i}) + "\n" for i in range(50)))
    bucket(src, names + names2 + ["small.jsonl"])
    proxy = FaultProxy(bucket.srv.port, kms=True, workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        for ds, a in (("x", args), ("r", args2), ("small", ({}, "--jsonl", "{base}/small.jsonl"))):
            for where, base in (("local", src), ("s3", "s3://src")):
                lake.create(f"{ds}-{where}")
                cols, *opts = fill(a, base)
                p = lake.import_(f"{ds}-{where}", cols, *opts, check=False)
                assert p.returncode == 0, p.stderr
                assert "damaged" not in p.stderr and "ETag" not in p.stderr, p.stderr
    finally:
        proxy.stop()
    m = mount(lake)
    for ds in ("x", "r", "small"):
        want, got = tree_bytes(m / f"{ds}-local" / "main"), tree_bytes(m / f"{ds}-s3" / "main")
        assert {k: v for k, v in got.items() if k != "schema.json"} == \
            {k: v for k, v in want.items() if k != "schema.json"}, ds


def test_a_tree_file_of_many_ranges_is_checked_whole(lake, mount, tmp_path, monkeypatch,
                                                     bucket):
    """An image tree's file larger than a range comes in many ranges: it is checked whole
    against its MD5 ETag and fetched again when damaged, as a file of one range is; the import
    equals the local files' with nothing skipped."""
    from PIL import Image

    src = tmp_path / "src"
    rng = np.random.default_rng(9)
    names = []
    for i, side in enumerate((700, 40, 900)):  # 1.4 and 2.4 MiB of noise: 2 and 3 ranges
        (src / "img" / "a").mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(
            src / "img" / "a" / f"{i}.png")
        names.append(f"img/a/{i}.png")
    bucket(src, names)
    lake.create("local")
    assert lake.import_("local", {}, "--images", f"{src}/img/").returncode == 0
    proxy = FaultProxy(bucket.srv.port, rate=1.0, faults=("corrupt",), workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        lake.create("s3")
        p = lake.import_("s3", {}, "--images", "s3://src/img/", check=False)
    finally:
        proxy.stop()
    assert p.returncode == 0, p.stderr
    assert "skipped" not in p.stdout, p.stdout
    assert p.stderr.count("content does not match its ETag; fetching it again") >= 3, p.stderr
    m = mount(lake)
    want, got = tree_bytes(m / "local" / "main"), tree_bytes(m / "s3" / "main")
    assert {k: v for k, v in got.items() if k != "schema.json"} == \
        {k: v for k, v in want.items() if k != "schema.json"}


def test_an_update_from_a_damaged_source_runs_again(lake, mount, tmp_path, monkeypatch,
                                                    bucket):
    """`update` reads its .npy by URL the same way: damage on the way makes it run again, and
    the rows it overwrites are the file's."""
    rng = np.random.default_rng(4)
    src = tmp_path / "src"
    src.mkdir()
    base = rng.standard_normal((400_000, 2)).astype(np.float32)
    new = rng.standard_normal((300_000, 2)).astype(np.float32)
    np.save(src / "base.npy", base)
    np.save(src / "new.npy", new)
    bucket(src, ["new.npy"])
    lake.create("d")
    assert lake.import_("d", {"x": str(src / "base.npy")}).returncode == 0
    proxy = FaultProxy(bucket.srv.port, rate=1.0, faults=("corrupt",), workdir=tmp_path)
    try:
        through(monkeypatch, proxy, tmp_path / "spool")
        p = subprocess.run([TENSORFS_BIN, "update", lake.ds_url("d"), "x",
                            "50000=s3://src/new.npy"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=300)
    finally:
        proxy.stop()
    assert p.returncode == 0, p.stderr
    assert "reading them again from the start" in p.stderr, p.stderr
    want = base.copy()
    want[50_000:350_000] = new
    got = np.load(mount(lake) / "d" / "main" / "x.npy")
    assert np.array_equal(got, want)
