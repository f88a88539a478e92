# SPDX-License-Identifier: MIT
"""Import sources named by URL: .npy, .txt, JSON Lines, .npz, WebDataset shards, image trees
and (from S3) video trees, audio files and a JSON Lines manifest naming media, read from an S3
bucket (s3rver) and from an HTTP server (nginx) on loopback make the same dataset, byte for
byte, as the same files imported from the local disk."""

import contextlib
import hashlib
import json
import os
import subprocess
import time

import numpy as np
import pytest

from conftest import SANITIZE, TENSORFS_BIN, tfs, write_tar
from faultproxy import FaultProxy
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


MiB = 1 << 20


def shmem():
    """The machine's shared memory in bytes (/proc/meminfo Shmem: tmpfs files and memfds)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Shmem in /proc/meminfo")


def open_files(pid):
    """The paths of what process pid has open (those it closes meanwhile may be missing)."""
    out = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def watch_import(lake, ds, errfile, *args):
    """`tensorfs import` into ds, run to its end while its open files and the machine's shared
    memory are sampled: (stderr, the files it had open, peak Shmem growth in bytes)."""
    lake.create(ds)
    base, files, peak, t0 = shmem(), set(), 0, time.monotonic()
    with open(errfile, "w") as fe:
        p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url(ds), *map(str, args)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe)
        while p.poll() is None:
            peak = max(peak, shmem() - base)
            files |= open_files(p.pid)
            if time.monotonic() - t0 > 120:
                p.kill()
                p.wait()
                pytest.fail(f"import {ds} did not end in 120 s")
            time.sleep(0.005)
    err = errfile.read_text()
    assert p.returncode == 0, err
    return err, files, peak


def write_lines(path, mib):
    """About mib MiB of JSON Lines, a 32 KB text field a row; returns the row count."""
    rows = mib * MiB // 32032
    with open(path, "w") as f:
        for i in range(rows):
            f.write(json.dumps({"i": i, "t": f"{i:08d} " + "x" * 32000}) + "\n")
    return rows


def column_digest(m, ds):
    return hashlib.sha256((m / ds / "main" / "t" / "lines.txt").read_bytes()).hexdigest()


@pytest.mark.skipif(SANITIZE, reason="the fetch's buffers are the point, not its checks")
def test_a_large_source_is_spooled_to_disk_and_fetched_in_parallel(lake, mount, tmp_path,
                                                                   monkeypatch):
    """A source over 64 MiB is fetched into an unlinked file in $TMPDIR, not into memory, as
    ranged GETs of the part size with `parallel` of them in flight at once; the dataset equals
    the local file's import, and nothing is left in $TMPDIR."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    rows = write_lines(src / "a.jsonl", 80)
    size = (src / "a.jsonl").stat().st_size
    # 20 MB/s a response: 20 parts of 4 MiB take 4 s one at a time, 1 s four at a time.
    web = Nginx(tmp_path / "nginx", src, limit_rate="20m")
    try:
        monkeypatch.setenv("TMPDIR", str(spool))
        monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(4 * MiB))
        monkeypatch.setenv("TENSORFS_HTTP_PARALLEL", "4")
        err, files, grew = watch_import(lake, "web", tmp_path / "err", "--jsonl", f"{web.url}/a.jsonl")
        log = web.access_log()
    finally:
        web.stop()
    held = [f for f in files if f.startswith(str(spool) + "/")]
    assert held and all(f.endswith(" (deleted)") for f in held), (files, err)
    assert grew < 40 * MiB, f"shared memory grew by {grew / MiB:.0f} MiB during the import"
    assert os.listdir(spool) == []
    gets = sorted((int(r[6:].split("-")[0]), int(r.split("-")[1]), t0, t1)
                  for st, t0, t1, r, req in log if req.startswith("GET") and st == 206)
    assert [(a, b) for a, b, _, _ in gets] == \
        [(o, min(o + 4 * MiB, size) - 1) for o in range(0, size, 4 * MiB)], log
    at_once = max(sum(1 for _, _, s, e in gets if s <= t < e) for _, _, t, _ in gets)
    assert at_once >= 2, f"the parts were fetched one at a time: {gets}"
    lake.create("local")
    lake.import_("local", {}, "--jsonl", src / "a.jsonl")
    m = mount(lake)
    assert lake.info("web")["rows"] == rows
    assert column_digest(m, "web") == column_digest(m, "local")


def test_a_source_that_cannot_be_spooled_is_held_in_memory(lake, tmp_path, monkeypatch):
    """With no spool directory, a large source is fetched into memory after all, with a
    warning that names the reason and $TMPDIR."""
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "x.npy", np.arange(9 * MiB, dtype=np.int64).reshape(-1, 8))
    web = Nginx(tmp_path / "nginx", src)
    try:
        monkeypatch.setenv("TMPDIR", str(tmp_path / "none"))
        lake.create("d")
        p = lake.import_("d", {"x": f"{web.url}/x.npy"})
    finally:
        web.stop()
    assert "cannot spool" in p.stderr and str(tmp_path / "none") in p.stderr and \
        "TMPDIR" in p.stderr and "holding it in memory" in p.stderr, p.stderr
    assert lake.info("d")["rows"] == 9 * MiB // 8


def test_a_large_source_survives_failed_ranges(lake, mount, tmp_path, monkeypatch):
    """Ranged GETs of a spooled source that fail (503, 429, resets, short bodies, stalls) are
    retried one by one: the dataset equals the local file's import."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    rows = write_lines(src / "a.jsonl", 72)
    web = Nginx(tmp_path / "nginx", src)
    proxy = FaultProxy(web.port, rate=0.3, seed=5, stall_s=2.5, workdir=tmp_path,
                       faults=("503", "429", "reset", "truncate", "stall"))
    try:
        for k, v in (("TMPDIR", spool), ("TENSORFS_HTTP_PART_SIZE", 4 * MiB),
                     ("TENSORFS_HTTP_PARALLEL", 4), ("TENSORFS_HTTP_STALL_MS", 1000),
                     ("TENSORFS_HTTP_BACKOFF_MS", 5), ("TENSORFS_HTTP_BACKOFF_MAX_MS", 50),
                     ("TENSORFS_HTTP_RETRIES", 6)):
            monkeypatch.setenv(k, str(v))
        lake.create("web")
        lake.import_("web", {}, "--jsonl", f"{proxy.endpoint}/lake/a.jsonl")
    finally:
        proxy.stop()
        web.stop()
    assert proxy.injected() >= 3, proxy.counts
    assert os.listdir(spool) == []
    lake.create("local")
    lake.import_("local", {}, "--jsonl", src / "a.jsonl")
    m = mount(lake)
    assert lake.info("web")["rows"] == rows
    assert column_digest(m, "web") == column_digest(m, "local")


def test_a_fetch_that_fails_leaves_the_dataset_unchanged(lake, tmp_path, monkeypatch):
    """The server goes away in the middle of a spooled source's fetch: the import fails naming
    the source and the byte it could not read, nothing is committed, and the spool file is
    gone."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    write_lines(src / "a.jsonl", 72)
    web = Nginx(tmp_path / "nginx", src, limit_rate="10m")
    for k, v in (("TMPDIR", spool), ("TENSORFS_HTTP_PARALLEL", 2),
                 ("TENSORFS_HTTP_BACKOFF_MS", 5), ("TENSORFS_HTTP_RETRIES", 1)):
        monkeypatch.setenv(k, str(v))
    lake.create("d")
    before = lake.info("d")
    url = f"{web.url}/a.jsonl"
    with open(tmp_path / "err", "w") as fe:
        p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url("d"), "--jsonl", url],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe)
        try:
            end = time.monotonic() + 30
            while not any(f.startswith(f"{spool}/") for f in open_files(p.pid)):
                assert p.poll() is None and time.monotonic() < end, "no spool file was seen"
                time.sleep(0.005)
        finally:
            web.stop()
        assert p.wait(timeout=60) != 0
    err = (tmp_path / "err").read_text()
    assert f"{url}: read at byte " in err, err
    assert lake.info("d") == before
    assert os.listdir(spool) == []
