# SPDX-License-Identifier: MIT
"""Import sources named by URL: .npy, .txt, JSON Lines, .npz, WebDataset shards, image trees
and (from S3) video trees, audio files and a JSON Lines manifest naming media, read from an S3
bucket (s3rver) and from an HTTP server (nginx) on loopback make the same dataset, byte for
byte, as the same files imported from the local disk."""

import json
import os
import subprocess

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
    def ff(*args):
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *map(str, args)], check=True)

    for cls, src in (("cat", "testsrc"), ("dog", "testsrc2")):
        (root / "vid" / cls).mkdir(parents=True)
        ff("-f", "lavfi", "-i", f"{src}=size=48x32:rate=10:duration=1", "-c:v", "libx264",
           "-pix_fmt", "yuv420p", root / "vid" / cls / "v.mp4")
    ff("-f", "lavfi", "-i", "sine=frequency=300:sample_rate=8000:duration=0.5", root / "a.wav")
    (root / "media.jsonl").write_text("".join(
        json.dumps({"cap": f"clip {c}", "clip": f"vid/{c}/v.mp4", "wav": "a.wav"}) + "\n"
        for c in ("dog", "cat")))
    for cls in ("cat", "dog"):
        (root / "img" / cls).mkdir(parents=True)
        for i in range(6):
            a = rng.integers(0, 256, size=(int(rng.integers(4, 20)), 9, 3), dtype=np.uint8)
            Image.fromarray(a).save(root / "img" / cls / f"{i}.png")


def import_all(lake, base, suffix, media=False):
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
    if media:
        imp("vid", {}, "--video", f"{base}/vid/", "--clip", "4", "--size", "16x24",
            "--labels-from-dirs")
        imp("aud", {}, "--audio", f"{base}/a.wav", "--rate", "4000", "--mono")
        imp("mm", {}, "--jsonl", f"{base}/media.jsonl", "--media", "clip=video", "--media",
            "wav=audio")


def tree_bytes(top):
    """{relative path: bytes} of every file under a mounted version directory."""
    out = {}
    for d, _, files in os.walk(top):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, top)] = open(p, "rb").read()
    return out


def check_same(m, a, b, media=False):
    for form in ("cols", "jsonl", "npz", "wds", "img") + (("vid", "aud", "mm") if media else ()):
        want = tree_bytes(m / f"{form}-{a}" / "main")
        got = tree_bytes(m / f"{form}-{b}" / "main")
        assert sorted(got) == sorted(want), form
        for k in want:
            if form == "aud" and (k == "schema.json" or k.startswith("path/")):
                continue  # a file source's path is its name as given: the URL, or the local path
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
        import_all(lake, src, "local", media=True)
        import_all(lake, "s3://src/data", "s3", media=True)
        # A missing object is an error naming it; the dataset stays as it was.
        lake.create("bad")
        p = lake.import_("bad", {}, "--jsonl", "s3://src/data/nope.jsonl", check=False)
        assert p.returncode != 0 and "s3://src/data/nope.jsonl: no such object" in p.stderr, \
            p.stderr
        rc, out, err = tfs("import", lake.ds_url("bad"), "x=s3://src/data/")
        assert rc == 2 and "local path" in err, err
        m = mount(lake)
        check_same(m, "local", "s3", media=True)
        # video and audio from the bucket: the rows name their files as the local import does
        assert (m / "vid-s3" / "main" / "path" / "lines.txt").read_text().split() == \
            ["cat/v.mp4", "cat/v.mp4", "dog/v.mp4", "dog/v.mp4"]
        assert (m / "aud-s3" / "main" / "path" / "lines.txt").read_text() == \
            "s3://src/data/a.wav\n"
        assert lake.info("mm-s3")["rows"] == 2 and lake.info("vid-s3")["rows"] == 4
        p = lake.import_("bad", {}, "--video", "s3://src/data/vid/cat/none.mp4", check=False)
        assert p.returncode != 0 and "none.mp4" in p.stderr, p.stderr
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

