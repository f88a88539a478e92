# SPDX-License-Identifier: MIT
"""Media and image files named by URL: a video or audio file is demuxed as its object arrives
(its last parts fetched first: an mp4's index is at its end), so its decode runs while the rest
is fetched; an image tree's files are fetched many at once, ahead of the decoders; a fetch that
fails fails the import, never passing for a file that does not decode; a file that is not there
is skipped and named, as a local one is."""
import json
import subprocess
import time

import pytest

from conftest import TENSORFS_BIN, _check_sanitizer_text
from faultproxy import FaultProxy
from s3help import Nginx

MiB = 1 << 20


def ff(*args):
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *map(str, args)], check=True)


def noisy_video(path, seconds):
    """An mp4 of 320x240 noise, about 2.9 MB a second, its index (moov) at its end."""
    ff("-f", "lavfi", "-i", f"testsrc2=size=320x240:rate=25:duration={seconds},"
       "noise=alls=60:allf=t", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
       "-qp", "10", path)
    data = path.read_bytes()
    assert data.find(b"moov") > data.find(b"mdat") > 0, "the index is not at the end"
    return len(data)


def cpu_s(pid):
    """CPU seconds process pid has used (user + system), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / 100.0


def run_import(lake, ds, *args, sample=None):
    """`tensorfs import` into a new ds, sample(pid) called every 2 ms while it runs: the
    finished process (stdout and stderr as text)."""
    lake.create(ds)
    p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url(ds), *map(str, args)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120
    while sample and p.poll() is None:
        sample(p.pid)
        assert time.monotonic() < end, f"import {ds} did not end in 120 s"
        time.sleep(0.002)
    out, err = p.communicate(timeout=120)
    _check_sanitizer_text(err, "tensorfs import")
    p.stdout, p.stderr = out, err
    return p


def small_ranges(monkeypatch):
    monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(MiB))
    monkeypatch.setenv("TENSORFS_HTTP_PARALLEL", "2")


def test_a_video_is_decoded_as_it_arrives(lake, mount, tmp_path, monkeypatch):
    """A 23 MB mp4 with its index at its end, fetched at about 8 MB/s: its last parts are asked
    for first, and the decode runs while the rest comes: 40% of the import's CPU time is spent
    before the last byte arrives (the rest is the rows' compression, after the decode), where a
    file fetched whole first is decoded after it (4%). The rows equal the local file's."""
    src = tmp_path / "src"
    src.mkdir()
    size = noisy_video(src / "v.mp4", 8)
    web = Nginx(tmp_path / "nginx", src, limit_rate="4m")
    small_ranges(monkeypatch)
    seen = []  # (wall time, CPU seconds)

    def sample(pid):
        c = cpu_s(pid)
        if c is not None:
            seen.append((time.time(), c))
    try:
        p = run_import(lake, "web", "--video", f"{web.url}/v.mp4", "--clip", "8",
                       sample=sample)
        log = web.access_log()
    finally:
        web.stop()
    assert p.returncode == 0, p.stderr
    gets = sorted((t0, t1, int(r[6:].split("-")[0])) for st, t0, t1, r, req, _ in log
                  if req.startswith("GET") and st == 206)
    last_byte = max(t1 for _, t1, _ in gets)
    total = seen[-1][1]
    before = max((c for t, c in seen if t <= last_byte), default=0.0)
    print(f"CPU {before:.2f} of {total:.2f} s before the last byte, "
          f"{last_byte - gets[0][0]:.1f} s of fetch")
    assert gets[0][2] >= size - 2 * MiB, f"the tail was not fetched first: {gets[:3]}"
    assert before >= 0.25 * total, \
        f"only {before:.2f} of {total:.2f} CPU seconds before the last byte came"
    lake.create("local")
    lake.import_("local", {}, "--video", src / "v.mp4", "--clip", "8")
    m = mount(lake)
    assert lake.info("web")["rows"] == lake.info("local")["rows"] == 25
    for f in ("video/data.bin", "video/shapes.npy", "start_s.npy"):
        assert (m / "web" / "main" / f).read_bytes() == (m / "local" / "main" / f).read_bytes(), f


def import_slowly(lake, tmp_path, monkeypatch, src, *args):
    """Import src's files (args' "URL" replaced by its URL) into "web" on one thread through a
    proxy that adds 50 ms to every request, at most 6 of them at once: (the process, the most
    requests it had in flight at once)."""
    web = Nginx(tmp_path / "nginx", src, autoindex=True)
    proxy = FaultProxy(web.port, delay_s=0.05, workdir=tmp_path)
    monkeypatch.setenv("TENSORFS_HTTP_MAX_INFLIGHT", "6")
    url = f"{proxy.endpoint}/lake"
    try:
        p = run_import(lake, "web", *(a.replace("URL", url) for a in args), "--threads", "1")
    finally:
        proxy.stop()
        web.stop()
    assert p.returncode == 0, p.stderr
    print(f"{proxy.counts['requests_in_flight_max']} requests at once")
    return p, proxy.counts["requests_in_flight_max"]


def same_files(m, files):
    """Datasets web and local hold the same bytes in files."""
    for f in files:
        assert (m / "web" / "main" / f).read_bytes() == (m / "local" / "main" / f).read_bytes(), f


def test_an_image_tree_is_fetched_ahead(lake, mount, tmp_path, monkeypatch):
    """An image tree by URL imported on one thread: its files are fetched many at once (up to
    [http] max_inflight), not one after another by the decoder, and the rows equal the local
    tree's import."""
    from PIL import Image
    import numpy as np

    src = tmp_path / "src"
    rng = np.random.default_rng(2)
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(40):
            Image.fromarray(rng.integers(0, 256, (64, 96, 3), dtype=np.uint8)).save(
                src / c / f"{i:02d}.png")
    _, at_once = import_slowly(lake, tmp_path, monkeypatch, src, "--images", "URL/",
                               "--labels-from-dirs")
    assert 3 <= at_once <= 6, f"{at_once} requests at once"
    lake.create("local")
    lake.import_("local", {}, "--images", src, "--labels-from-dirs")
    same_files(mount(lake), ("image/data.bin", "image/shapes.npy", "label.npy", "path/lines.txt"))


def test_a_video_tree_is_fetched_ahead(lake, mount, tmp_path, monkeypatch):
    """A tree of video clips by URL imported on one thread: its small files are fetched many at
    once ahead of their decode (one GET each, read from memory), a file over 4 MiB is demuxed
    as it arrives instead, and the rows equal the local tree's import."""
    src = tmp_path / "src"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(6):
            ff("-f", "lavfi", "-i", f"testsrc=size=32x24:rate=10:duration={1 + i % 2}",
               "-c:v", "libx264", "-pix_fmt", "yuv420p", src / c / f"{i}.mp4")
    big = noisy_video(src / "b" / "big.mp4", 2)
    assert big > 4 * MiB
    args = ["--clip", "4", "--size", "16x24", "--labels-from-dirs"]
    _, at_once = import_slowly(lake, tmp_path, monkeypatch, src, "--video", "URL/", *args)
    # The large file's own fetch has ranges of its own in flight.
    assert 3 <= at_once <= 6 + 8, f"{at_once} requests at once"
    lake.create("local")
    lake.import_("local", {}, "--video", src, *args)
    assert lake.info("web")["rows"] == lake.info("local")["rows"] > 13
    same_files(mount(lake), ("video.npy", "start_s.npy", "label.npy", "path/lines.txt"))


def test_a_manifests_images_are_fetched_ahead(lake, mount, tmp_path, monkeypatch):
    """A JSON Lines manifest by URL naming images beside it: a block's images are fetched many
    at once, ahead of the records that decode them (not a HEAD and a GET a record, one record
    after another); a record naming a missing image, or with a field of the wrong kind, is
    skipped and named; the rows equal the local manifest's import."""
    from PIL import Image
    import numpy as np

    src = tmp_path / "src"
    (src / "img").mkdir(parents=True)
    rng = np.random.default_rng(4)
    recs = []
    for i in range(60):
        Image.fromarray(rng.integers(0, 256, (24 + i % 5, 32, 3), dtype=np.uint8)).save(
            src / "img" / f"{i:02d}.png")
        recs.append({"cap": f"caption {i}", "img": f"img/{i:02d}.png"})
    recs[7]["img"] = "img/gone.png"
    recs[11]["cap"] = 11  # not text: a bad record, whose image is fetched and dropped
    (src / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    p, at_once = import_slowly(lake, tmp_path, monkeypatch, src, "--jsonl", "URL/m.jsonl",
                               "--media", "img=image")
    assert "gone.png" in p.stderr and "line 12" in p.stderr, p.stderr
    assert 3 <= at_once <= 6, f"{at_once} requests at once"
    lake.create("local")
    lake.import_("local", {}, "--jsonl", src / "m.jsonl", "--media", "img=image")
    assert lake.info("web")["rows"] == lake.info("local")["rows"] == 58
    same_files(mount(lake), ("img/data.bin", "img/shapes.npy", "cap/lines.txt"))


def quick_to_fail(monkeypatch):
    small_ranges(monkeypatch)
    monkeypatch.setenv("TENSORFS_HTTP_BACKOFF_MS", "5")
    monkeypatch.setenv("TENSORFS_HTTP_RETRIES", "1")


def stop_once_answering(web, p, what, suffix):
    """Stop web once it has answered a GET of a file whose name ends in suffix, for the running
    import p: not the tree's listing or the JSON Lines file before it, whose reply may still be
    on its way when the server stops (the import then fails there, before any media file)."""
    end = time.monotonic() + 30
    while not any(req.startswith("GET") and req.split(" ")[1].endswith(suffix)
                  for _, _, _, _, req, _ in web.access_log()):
        assert p.poll() is None and time.monotonic() < end, f"no GET of {what} was answered"
        time.sleep(0.005)
    web.stop()


@pytest.mark.parametrize("kind", ["video", "images", "manifest"])
def test_a_fetch_that_fails_fails_the_import(lake, tmp_path, monkeypatch, kind):
    """The server goes away while a video, a tree of images or the images a JSON Lines file
    names are fetched: the import fails naming the file; nothing is skipped as if the file did
    not decode, and the dataset stays as it was."""
    from PIL import Image
    import numpy as np

    src = tmp_path / "src"
    src.mkdir()
    if kind == "video":
        noisy_video(src / "v.mp4", 8)
        args = ["--video", "URL/v.mp4"]
    else:
        rng = np.random.default_rng(1)
        for i in range(200):
            Image.fromarray(rng.integers(0, 256, (256, 256, 3), dtype=np.uint8)).save(
                src / f"{i:03d}.png")
        (src / "m.jsonl").write_text("".join(json.dumps({"img": f"{i:03d}.png"}) + "\n"
                                             for i in range(200)))
        args = ["--images", "URL/"] if kind == "images" else \
            ["--jsonl", "URL/m.jsonl", "--media", "img=image"]
    web = Nginx(tmp_path / "nginx", src, limit_rate="2m", autoindex=True)
    quick_to_fail(monkeypatch)
    lake.create("d")
    before = lake.info("d")
    p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url("d"), "--threads", "2",
                          *(a.replace("URL", web.url.rstrip("/")) for a in args)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        stop_once_answering(web, p, kind, ".mp4" if kind == "video" else ".png")
    finally:
        web.stop()
    _, err = p.communicate(timeout=60)
    _check_sanitizer_text(err, "tensorfs import")
    assert p.returncode != 0, err
    assert "skipped" not in err and "dataset is unchanged" in err, err
    assert {"video": "v.mp4: cannot fetch", "images": ".png: cannot read",
            "manifest": ".png: cannot fetch"}[kind] in err, err
    assert lake.info("d") == before


def test_a_missing_media_file_is_skipped_and_named(lake, tmp_path):
    """A JSON Lines record naming a video that is not at its URL is a bad record: skipped and
    named (the others imported), as one naming a missing local file is; --strict fails."""
    src = tmp_path / "src"
    src.mkdir()
    ff("-f", "lavfi", "-i", "testsrc=size=32x24:rate=10:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", src / "a.mp4")
    (src / "m.jsonl").write_text("".join(json.dumps({"n": n, "clip": c}) + "\n" for n, c in
                                         ((0, "a.mp4"), (1, "gone.mp4"), (2, "a.mp4"))))
    web = Nginx(tmp_path / "nginx", src)
    try:
        p = run_import(lake, "d", "--jsonl", f"{web.url}/m.jsonl", "--media", "clip=video")
        strict = run_import(lake, "s", "--jsonl", f"{web.url}/m.jsonl", "--media",
                            "clip=video", "--strict")
    finally:
        web.stop()
    assert p.returncode == 0, p.stderr
    assert "gone.mp4" in p.stderr and "skipped" in p.stderr, p.stderr
    assert lake.info("d")["rows"] == 2
    assert strict.returncode != 0 and "gone.mp4" in strict.stderr, strict.stderr
    assert lake.info("s")["rows"] == 0
