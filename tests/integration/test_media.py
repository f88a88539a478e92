# SPDX-License-Identifier: MIT
"""Video and audio decoded once: `import --video` and `--audio` (FFmpeg's libraries) give the
frames and samples the `ffmpeg` command gives for the same file and scaling, byte for byte
(H.264 in mp4 and mkv, VP9 in webm and mkv, a variable-frame-rate file sampled by --fps, files
turned by their display matrix); clips are rows with their path, start time, rate and label;
a damaged file is skipped and named, or fails the import with --strict; clip columns read
through views and stage like any fixed column; FFmpeg's libraries are loaded when media is
first decoded, and a command that cannot load them fails clearly, blaming no file. Media are
made here with the ffmpeg command, never downloaded."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from conftest import CLI_TIMEOUT, TENSORFS_BIN, run_proc

import tensorfs  # noqa: E402


def ff(*args):
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *map(str, args)], check=True)


def ffraw(path, vf, h, w):
    out = subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(path), "-vf", vf, "-f",
                          "rawvideo", "-pix_fmt", "rgb24", "-"], check=True,
                         capture_output=True).stdout
    return np.frombuffer(out, np.uint8).reshape(-1, h, w, 3)


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    d = tmp_path_factory.mktemp("media")
    (d / "tree" / "cat").mkdir(parents=True)
    (d / "tree" / "dog").mkdir(parents=True)
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=30:duration=2", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", d / "tree" / "cat" / "a.mp4")
    ff("-f", "lavfi", "-i", "testsrc2=size=80x60:rate=25:duration=2", "-c:v", "libvpx-vp9",
       d / "tree" / "dog" / "b.webm")
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=30:duration=3", "-vf",
       "setpts='N/30/TB+gte(N,40)*0.37/TB+gte(N,70)*0.11/TB'", "-fps_mode", "vfr",
       "-c:v", "libx264", "-pix_fmt", "yuv420p", d / "vfr.mp4")
    (d / "mkv").mkdir()
    ff("-i", d / "tree" / "dog" / "b.webm", "-c", "copy", d / "mkv" / "vp9.mkv")
    ff("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=24:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", d / "mkv" / "h264.mkv")
    (d / "tree" / "notes.txt").write_text("a file beside the class directories is no class\n")
    # turned by the container's display matrix (the phone's way): the same stream, upright
    # only when the matrix is read; 4:4:4 too, and 4:2:2 (chroma halved one way only)
    (d / "turned").mkdir()
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=30:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", d / "turned" / "flat.mp4")
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=30:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv444p", d / "turned" / "flat444.mp4")
    ff("-f", "lavfi", "-i", "testsrc=size=96x64:rate=30:duration=1", "-c:v", "libx264",
       "-pix_fmt", "yuv422p", d / "turned" / "flat422.mp4")
    ff("-i", d / "turned" / "flat422.mp4", "-c", "copy", "-metadata:s:v:0", "rotate=90",
       d / "turned" / "r90_422.mp4")
    for deg in (90, 180, 270):
        ff("-i", d / "turned" / "flat.mp4", "-c", "copy", "-metadata:s:v:0", f"rotate={deg}",
           d / "turned" / f"r{deg}.mp4")
    ff("-i", d / "turned" / "flat444.mp4", "-c", "copy", "-metadata:s:v:0", "rotate=90",
       d / "turned" / "r90_444.mp4")
    good = (d / "tree" / "cat" / "a.mp4").read_bytes()
    (d / "bad").mkdir()
    (d / "bad" / "cut.mp4").write_bytes(good[:len(good) // 3])
    (d / "bad" / "ok.mp4").write_bytes(good)
    ff("-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=1.5", "-f", "lavfi",
       "-i", "sine=frequency=660:sample_rate=44100:duration=1.5", "-filter_complex",
       "amerge=inputs=2", "-c:a", "pcm_s16le", d / "a.wav")
    ff("-i", d / "a.wav", "-c:a", "flac", d / "b.flac")
    ff("-i", d / "a.wav", "-c:a", "libmp3lame", d / "c.mp3")
    return d


def test_clips_equal_ffmpeg(lake, mount, media):
    lake.create("v")
    p = lake.import_("v", {}, "--video", media / "tree", "--size", "32x48", "--resize",
                     "--clip", "8", "--stride", "6", "--labels-from-dirs")
    assert "of 2 classes" in p.stdout
    m = mount(lake)
    d = m.path / "v" / "main"
    video = np.load(d / "video.npy")
    assert video.shape[1:] == (8, 32, 48, 3)
    rows = 0
    for name, label, fps in (("cat/a.mp4", 0, 30.0), ("dog/b.webm", 1, 25.0)):
        ref = ffraw(media / "tree" / name, "scale=48:32:flags=bilinear", 32, 48)
        starts = range(0, len(ref) - 8 + 1, 6)
        for i, s in enumerate(starts):
            assert np.array_equal(video[rows + i], ref[s:s + 8]), (name, s)
        paths = list((d / "path" / "lines.txt").read_text().splitlines())
        assert paths[rows:rows + len(starts)] == [name] * len(starts)
        assert np.allclose(np.load(d / "start_s.npy")[rows:rows + len(starts)],
                           [s / fps for s in starts])
        assert (np.load(d / "fps.npy")[rows:rows + len(starts)] == fps).all()
        assert (np.load(d / "label.npy")[rows:rows + len(starts)] == label).all()
        rows += len(starts)
    assert rows == len(video)
    schema = json.loads((d / "schema.json").read_text())
    assert [c for c in schema["columns"] if c["name"] == "label"][0]["classes"] == ["cat", "dog"]
    # a clip column is a fixed column: a view shuffles it, row for row
    view = np.load(d / "views" / "seed=4" / "video.npy")
    assert sorted(map(bytes, view)) == sorted(map(bytes, video))


def test_matroska_as_ffmpeg(lake, mount, media):
    """H.264 and VP9 in Matroska: whole videos, a row each, in name order, as ffmpeg decodes
    them."""
    lake.create("k")
    lake.import_("k", {}, "--video", media / "mkv", "--size", "24x32", "--resize")
    m = mount(lake)
    rows = tensorfs.open(m.path / "k" / "main")["video"]
    assert len(rows) == 2
    for got, name in zip(rows, ("h264.mkv", "vp9.mkv")):
        ref = ffraw(media / "mkv" / name, "scale=32:24:flags=bilinear", 24, 32)
        assert got.shape == ref.shape and np.array_equal(got, ref), name


@pytest.mark.parametrize("fps", ["10", "7.5", "4"])
def test_fps_samples_by_timestamp_as_ffmpeg(lake, mount, media, fps):
    lake.create("f")
    lake.import_("f", {}, "--video", media / "vfr.mp4", "--size", "32x48", "--fps", fps)
    m = mount(lake)
    got = np.fromfile(m.path / "f" / "main" / "video" / "data.bin", np.uint8).reshape(
        -1, 32, 48, 3)
    ref = ffraw(media / "vfr.mp4", f"fps={fps},scale=48:32:flags=bilinear", 32, 48)
    assert got.shape == ref.shape and np.array_equal(got, ref)


def test_crop_and_native_size(lake, mount, media):
    lake.create("c")
    lake.import_("c", {}, "--video", media / "tree" / "cat" / "a.mp4", "--size", "40x40",
                 "--crop", "--clip", "4")
    m = mount(lake)
    got = np.load(m.path / "c" / "main" / "video.npy").reshape(-1, 40, 40, 3)
    # 96x64 to cover 40x40: 60x40, then the centre (offset 10)
    ref = ffraw(media / "tree" / "cat" / "a.mp4",
                "scale=60:40:flags=bilinear,crop=40:40:10:0", 40, 40)
    assert np.array_equal(got, ref[:len(got)])
    lake.create("n")
    lake.import_("n", {}, "--video", media / "tree" / "dog" / "b.webm")
    m2 = mount(lake, name="m2")
    shapes = np.load(m2.path / "n" / "main" / "video" / "shapes.npy")
    assert shapes.tolist() == [[50, 60, 80, 3]]


@pytest.mark.parametrize("name,turns", [("r90.mp4", 1), ("r180.mp4", 2), ("r270.mp4", 3),
                                        ("r90_444.mp4", 1), ("r90_422.mp4", 1)])
def test_turned_video_upright_as_ffmpeg(lake, mount, media, name, turns):
    src = media / "turned" / name
    h, w = (64, 96) if turns == 2 else (96, 64)
    lake.create("t")
    lake.import_("t", {}, "--video", src)
    lake.create("s")
    lake.import_("s", {}, "--video", src, "--size", "40x30", "--resize")
    m = mount(lake)
    native = tensorfs.open(m.path / "t" / "main")["video"][0]
    sized = tensorfs.open(m.path / "s" / "main")["video"][0]
    # the ffmpeg command turns it upright by itself (autorotate): the same bytes
    ref = ffraw(src, "null", h, w)
    assert native.shape == ref.shape and np.array_equal(native, ref), name
    assert np.array_equal(sized, ffraw(src, "scale=30:40:flags=bilinear", 40, 30)), name
    # and upright as the matrix says (rotate=90: a quarter turn counter-clockwise, as ffprobe's
    # rotation=90): turned back, it is the flat file's frames
    flat = ffraw(media / "turned" / ("flat" + name[4:] if "_" in name else "flat.mp4"),
                 "null", 64, 96)
    assert np.array_equal(np.rot90(native, k=-turns, axes=(1, 2)), flat), name


def test_damaged_video_skipped_or_strict(lake, media):
    lake.create("b")
    p = lake.import_("b", {}, "--video", media / "bad", "--size", "32x48", "--clip", "4")
    assert "skipped 1" in p.stdout and "cut.mp4" in p.stdout, p.stdout
    lake.create("s")
    p = lake.import_("s", {}, "--video", media / "bad", "--size", "32x48", "--clip", "4",
                     "--strict", check=False)
    assert p.returncode != 0 and "cut.mp4" in p.stderr
    assert "rows     0" in run_proc(["info", lake.ds_url("s")], check=True).stdout


def ffmpeg_sonames():
    """The sonames of FFmpeg's libraries on this machine (libavutil.so.57, ...)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    names = set(re.findall(r"\b(lib(?:avformat|avcodec|avutil|swscale|swresample)\.so\.\d+)\s",
                           out))
    assert len(names) >= 5, out
    return sorted(names)


def test_ffmpeg_is_not_linked():
    """The program starts without FFmpeg's libraries (about 130 shared objects with their
    dependencies): they are opened when media is first decoded."""
    dyn = subprocess.run(["readelf", "-d", TENSORFS_BIN], capture_output=True, text=True,
                         check=True).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
    assert needed and not [n for n in needed if re.match(r"lib(av|sw)", n)], needed


def test_ffmpeg_that_cannot_load_fails_the_import_clearly(lake, media, tmp_path):
    """With FFmpeg's libraries broken (files of their names that are no shared objects, first
    on the library path), a video import, a JSON Lines import naming videos and an audio
    import each fail, name the library, blame no file and leave the dataset as it was; every
    command that decodes no media (an image import here) works as before."""
    broken = tmp_path / "lib"
    broken.mkdir()
    for so in ffmpeg_sonames():
        (broken / so).write_text("not a shared object\n")
    env = dict(os.environ, LD_LIBRARY_PATH=f"{broken}:{os.environ.get('LD_LIBRARY_PATH', '')}")

    def tfs_env(*args):
        return subprocess.run([TENSORFS_BIN, *map(str, args)], env=env, capture_output=True,
                              text=True, timeout=CLI_TIMEOUT)

    (tmp_path / "m.jsonl").write_text(
        json.dumps({"caption": "a", "clip": str(media / "tree" / "cat" / "a.mp4")}) + "\n")
    lake.create("nf")
    for args in (["--video", media / "tree", "--size", "32x48", "--clip", "4"],
                 ["--jsonl", tmp_path / "m.jsonl", "--media", "clip=video"],
                 ["--audio", media / "a.wav"], ["--audio", media / "a.wav", "--strict"]):
        p = tfs_env("import", lake.ds_url("nf"), *args)
        assert p.returncode != 0, (args, p.stdout, p.stderr)
        assert "FFmpeg's libraries" in p.stderr and "libav" in p.stderr, p.stderr
        assert "skipped" not in p.stdout + p.stderr and "a.mp4" not in p.stderr, p.stderr
        assert "dataset is unchanged" in p.stderr, p.stderr
    info = run_proc(["info", lake.ds_url("nf")], check=True).stdout
    assert "rows     0" in info and "create dataset" in info, info
    from PIL import Image

    (tmp_path / "img" / "c").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "img" / "c" / "0.png")
    lake.create("im")
    p = tfs_env("import", lake.ds_url("im"), "--images", tmp_path / "img")
    assert p.returncode == 0 and "imported 1 row\n" in p.stdout, p.stderr


@pytest.mark.parametrize("name", ["a.wav", "b.flac", "c.mp3"])
def test_audio_equals_ffmpeg(lake, mount, media, name):
    lake.create("a")
    lake.import_("a", {}, "--audio", media / name, "--rate", "16000", "--mono")
    ref = np.frombuffer(subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-i", str(media / name), "-ar", "16000", "-ac", "1",
         "-f", "f32le", "-"], check=True, capture_output=True).stdout, np.float32)
    m = mount(lake)
    got = np.fromfile(m.path / "a" / "main" / "audio" / "data.bin", np.float32)
    assert len(got) == len(ref) and np.abs(got - ref).max() == 0.0
    # clips of 0.25 s, every 0.5 s: fixed rows (4000, 1)
    lake.create("k")
    lake.import_("k", {}, "--audio", media / name, "--rate", "16000", "--mono", "--clip",
                 "0.25", "--stride", "0.5")
    m2 = mount(lake, name="m2")
    clips = np.load(m2.path / "k" / "main" / "audio.npy")
    assert clips.shape == (3, 4000, 1)
    for i in range(3):
        assert np.array_equal(clips[i, :, 0], ref[i * 8000:i * 8000 + 4000])
    assert np.allclose(np.load(m2.path / "k" / "main" / "start_s.npy"), [0, 0.5, 1.0])


def test_stereo_stays_stereo(lake, mount, media):
    lake.create("st")
    lake.import_("st", {}, "--audio", media / "a.wav")
    m = mount(lake)
    shapes = np.load(m.path / "st" / "main" / "audio" / "shapes.npy")
    assert shapes.tolist() == [[66150, 2]]


def test_jsonl_records_name_their_media(lake, mount, media, tmp_path):
    """--jsonl FILE --media FIELD=KIND: each record's files are decoded into its row, beside
    its other fields; a record whose file does not decode is a bad row, named."""
    import json

    from PIL import Image

    rng = np.random.default_rng(2)
    (tmp_path / "img").mkdir()
    pics = []
    for i in range(3):
        a = rng.integers(0, 255, (20 + i, 30, 3), dtype=np.uint8)
        Image.fromarray(a).save(tmp_path / "img" / f"{i}.png")
        pics.append(a)
    recs = [{"caption": f"clip {i}", "img": f"img/{i}.png",
             "clip": str(media / "tree" / "cat" / "a.mp4"), "wav": str(media / "a.wav"),
             "score": i / 2} for i in range(3)]
    recs.append(dict(recs[0], img="img/missing.png"))
    with open(tmp_path / "m.jsonl", "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")
    lake.create("mm")
    p = lake.import_("mm", {}, "--jsonl", tmp_path / "m.jsonl", "--media", "img=image",
                     "--media", "clip=video", "--media", "wav=audio", "--rate", "8000",
                     "--mono", "--size", "16x24")
    assert "imported 3 rows, skipped 1" in p.stdout and "missing.png" in p.stdout, p.stdout
    m = mount(lake)
    d = m.path / "mm" / "main"
    import tensorfs
    cols = tensorfs.open(d)
    for i in range(3):
        ref = np.asarray(Image.fromarray(pics[i]).resize((24, 16), Image.BILINEAR))
        assert np.array_equal(cols["img"][i], ref)
    clip = cols["clip"][0]
    assert clip.shape == (60, 16, 24, 3)
    assert np.array_equal(clip, ffraw(media / "tree" / "cat" / "a.mp4",
                                      "scale=24:16:flags=bilinear", 16, 24))
    assert cols["wav"][0].shape == (12000, 1) and cols["wav"][0].dtype == np.float32
    assert list(cols["caption"]) == ["clip 0", "clip 1", "clip 2"]


def test_clips_stage_through_the_control_file(lake, mount, media):
    """Clip columns stage as any column: fixed clips (T, H, W, 3) over a shuffled view, and a
    ragged column of whole videos (frames, H, W, 3), batch rows equal to the view's rows."""
    lake.create("c")
    lake.import_("c", {}, "--video", media / "tree", "--size", "24x32", "--crop", "--clip",
                 "4", "--labels-from-dirs")
    lake.create("w")
    lake.import_("w", {}, "--video", media / "tree" / "cat", media / "vfr.mp4", "--fps", "5")
    m = mount(lake)
    view = "c/main/views/seed=3"
    want = np.load(m.path / view / "video.npy")
    labels = np.load(m.path / view / "label.npy")
    with tensorfs.Stager(m.path, view, ["video", "label"], batch_size=5) as st:
        seen = 0
        for b in st.batches():
            assert b["video"].shape == (b.rows, 4, 24, 32, 3)
            assert np.array_equal(b["video"], want[seen:seen + b.rows])
            assert np.array_equal(b["label"], labels[seen:seen + b.rows])
            seen += b.rows
        assert seen == len(want)
    rows = tensorfs.open(m.path / "w" / "main")["video"]
    with tensorfs.Stager(m.path, "w/main", ["video"], batch_size=2) as st:
        b = st.stage([1, 0])
        assert isinstance(b["video"], tensorfs.Ragged)
        assert [a.shape for a in b["video"]] == [rows[1].shape, rows[0].shape]
        assert rows[0].shape[0] != rows[1].shape[0]
        assert all(np.array_equal(g, rows[i]) for g, i in zip(b["video"], (1, 0)))
        b.release()


def test_long_files_equal_ffmpeg_from_their_spool(lake, mount, tmp_path):
    """A file whose decoded frames or samples pass 16 MiB is held in a spool file while it is
    imported: its clips (overlapping ones too) and its whole-file rows equal ffmpeg's, and a long
    file cut short is still skipped whole."""
    ff("-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=12", "-c:v", "libx264",
       "-pix_fmt", "yuv420p", "-g", "50", "-movflags", "+faststart",
       tmp_path / "long.mp4")  # 300 frames: 69 MB decoded
    good = (tmp_path / "long.mp4").read_bytes()
    (tmp_path / "cut").mkdir()
    # its index first: the cut is found after 200 frames (46 MB) have decoded
    (tmp_path / "cut" / "cut.mp4").write_bytes(good[:len(good) * 2 // 3])
    (tmp_path / "cut" / "ok.mp4").write_bytes(good)
    ff("-f", "lavfi", "-i", "sine=frequency=300:sample_rate=48000:duration=120", "-ac", 2,
       tmp_path / "long.wav")  # 46 MB of float samples
    lake.create("v")
    lake.import_("v", {}, "--video", tmp_path / "long.mp4", "--clip", "16", "--stride", "10")
    lake.create("c")
    p = lake.import_("c", {}, "--video", tmp_path / "cut", "--clip", "16")
    assert "skipped 1" in p.stdout and "cut.mp4: damaged" in p.stdout, p.stdout
    lake.create("a")
    lake.import_("a", {}, "--audio", tmp_path / "long.wav")
    lake.create("k")
    lake.import_("k", {}, "--audio", tmp_path / "long.wav", "--clip", "1.5", "--stride", "1")
    m = mount(lake)
    ref = ffraw(tmp_path / "long.mp4", "null", 240, 320)
    # without --size a video column is ragged: every clip here has one shape
    video = np.fromfile(m.path / "v" / "main" / "video" / "data.bin",
                        np.uint8).reshape(-1, 16, 240, 320, 3)
    starts = range(0, len(ref) - 16 + 1, 10)
    assert len(video) == len(starts) == 29
    for i, s in enumerate(starts):
        assert np.array_equal(video[i], ref[s:s + 16]), s
    assert (m.path / "c" / "main" / "path" / "lines.txt").read_text() == "ok.mp4\n" * 18
    samples = np.frombuffer(subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-i", str(tmp_path / "long.wav"), "-f", "f32le", "-"],
        check=True, capture_output=True).stdout, np.float32).reshape(-1, 2)
    whole = np.fromfile(m.path / "a" / "main" / "audio" / "data.bin", np.float32)
    assert np.array_equal(whole, samples.reshape(-1))
    clips = np.fromfile(m.path / "k" / "main" / "audio" / "data.bin",
                        np.float32).reshape(-1, 72000, 2)  # ragged without --rate
    assert clips.shape == (119, 72000, 2)
    for i in range(len(clips)):
        assert np.array_equal(clips[i], samples[i * 48000:i * 48000 + 72000]), i


def test_video_tree_shuffled_by_seed(lake, mount, media):
    """--video DIR --shuffle SEED: the tree's files in a random order fixed by the seed (each
    file's rows as the sorted import has them); several sources cannot be shuffled."""
    opts = ("--video", media / "turned", "--size", "16x16")
    for ds, more in (("s", ()), ("h", ("--shuffle", "3"))):
        lake.create(ds)
        lake.import_(ds, {}, *opts, *more)
    m = mount(lake)
    s, h = (tensorfs.open(m.path / ds / "main") for ds in ("s", "h"))
    ps, ph = list(s["path"]), list(h["path"])
    assert ps == sorted(ps) and ph != ps and sorted(ph) == ps
    for i, p in enumerate(ph):
        assert np.array_equal(h["video"][i], s["video"][ps.index(p)]), p
    before = lake.snapshot("s")
    p = lake.import_("s", {}, "--video", media / "turned", media / "mkv", "--shuffle", "3",
                     check=False)
    assert p.returncode != 0 and "--shuffle orders one directory's files" in p.stderr, p.stderr
    assert lake.snapshot("s") == before
