# SPDX-License-Identifier: MIT
"""Import sources named by URL: .npy, .txt, JSON Lines, .npz, WebDataset shards and image trees
read from an S3 bucket (s3rver) and from an HTTP server (nginx) on loopback make the same
dataset, byte for byte, as the same files imported from the local disk."""

import json
import os

import numpy as np
import pytest

from conftest import tfs, write_tar
from s3help import Nginx, S3Server, s3_env


def write_sources(root):
    """Every kind of source, under root; returns {name: relative path}."""
    from PIL import Image

    rng = np.random.default_rng(3)
    root.mkdir(parents=True, exist_ok=True)
    np.save(root / "x.npy", rng.standard_normal((3000, 7)).astype(np.float32))
    (root / "cap.txt").write_text("".join(f"caption {i} ü\n" for i in range(3000)))
    (root / "rows.jsonl").write_text("".join(
        json.dumps({"id": i, "name": f"n{i}", "v": list(range(i % 5))}) + "\n"
        for i in range(500)))
    np.savez(root / "a.npz", p=np.arange(40, dtype=np.int16).reshape(20, 2),
             q=np.linspace(0, 1, 20))
    write_tar(root / "shard-0.tar", ((f"{i:04d}{ext}", data) for i in range(30)
                                     for ext, data in ((".cls", str(i).encode()),
                                                       (".txt", f"t{i}".encode()))))
    for cls in ("cat", "dog"):
        (root / "img" / cls).mkdir(parents=True)
        for i in range(6):
            a = rng.integers(0, 256, size=(int(rng.integers(4, 20)), 9, 3), dtype=np.uint8)
            Image.fromarray(a).save(root / "img" / cls / f"{i}.png")


def import_all(lake, base, suffix):
    """One dataset per source form, named FORM-suffix, from base (a directory or a URL)."""
    def imp(ds, cols, *opts):
        lake.create(f"{ds}-{suffix}")
        p = lake.import_(f"{ds}-{suffix}", cols, *opts)
        assert p.returncode == 0, p.stderr

    imp("cols", {"x": f"{base}/x.npy", "cap": f"{base}/cap.txt"})
    imp("jsonl", {}, "--jsonl", f"{base}/rows.jsonl")
    imp("npz", {}, "--npz", f"{base}/a.npz")
    imp("wds", {}, "--webdataset", f"{base}/shard-0.tar")
    imp("img", {}, "--images", f"{base}/img/", "--labels-from-dirs")


def tree_bytes(top):
    """{relative path: bytes} of every file under a mounted version directory."""
    out = {}
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, top)] = open(p, "rb").read()
    return out


def check_same(m, a, b):
    for form in ("cols", "jsonl", "npz", "wds", "img"):
        want = tree_bytes(m / f"{form}-{a}" / "main")
        got = tree_bytes(m / f"{form}-{b}" / "main")
        assert sorted(got) == sorted(want), form
        for k in want:
            if k == "schema.json":  # names the dataset
                assert json.loads(got[k])["columns"] == json.loads(want[k])["columns"]
            else:
                assert got[k] == want[k], f"{form}: {k} differs"
    labels = np.load(m / f"img-{b}" / "main" / "label.npy")
    assert labels.tolist() == [0] * 6 + [1] * 6


def test_sources_from_s3(lake, mount, tmp_path, monkeypatch):
    import botocore.session

    srv = S3Server(tmp_path / "s3data", buckets=("src",))
    try:
        s3_env(monkeypatch, srv.endpoint)
        src = tmp_path / "src"
        write_sources(src)
        client = botocore.session.get_session().create_client(
            "s3", endpoint_url=srv.endpoint, region_name="us-east-1",
            aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
        for d, _, files in os.walk(src):
            for f in files:
                key = os.path.relpath(os.path.join(d, f), src)
                with open(os.path.join(d, f), "rb") as fh:
                    client.put_object(Bucket="src", Key=f"data/{key}", Body=fh.read())
        import_all(lake, src, "local")
        import_all(lake, "s3://src/data", "s3")
        # A missing object is an error naming it; the dataset stays as it was.
        lake.create("bad")
        p = lake.import_("bad", {}, "--jsonl", "s3://src/data/nope.jsonl", check=False)
        assert p.returncode != 0 and "s3://src/data/nope.jsonl: no such object" in p.stderr, \
            p.stderr
        rc, out, err = tfs("import", lake.ds_url("bad"), "x=s3://src/data/")
        assert rc == 2 and "local path" in err, err
        m = mount(lake)
        check_same(m, "local", "s3")
        assert sorted(os.listdir(m / "bad" / "main")) == ["schema.json", "views"]
    finally:
        srv.stop()


def test_sources_from_http(lake, mount, tmp_path):
    src = tmp_path / "src"
    write_sources(src)
    web = Nginx(tmp_path / "nginx", src, autoindex=True)
    try:
        import_all(lake, src, "local")
        import_all(lake, web.url.rstrip("/"), "http")
    finally:
        web.stop()
    m = mount(lake)
    check_same(m, "local", "http")


@pytest.mark.parametrize("url", ["s3://", "https://", "s3://bucket"])
def test_malformed_source_urls(lake, url):
    lake.create("d")
    p = lake.import_("d", {}, "--jsonl", url, check=False)
    assert p.returncode != 0 and url in p.stderr, p.stderr
