#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Regenerate the seed corpora under tests/fuzz/corpus/ (run from anywhere; needs numpy, the
zstd CLI and a built tensorfs: TENSORFS_BIN or ./tensorfs)."""
import io
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")
TENSORFS = os.environ.get("TENSORFS_BIN", os.path.join(ROOT, "tensorfs"))


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None, keep_data=16):
    """An NPY file as numpy writes it, with at most keep_data bytes of array data."""
    b = io.BytesIO()
    if version is None:
        np.save(b, arr)
    else:
        np.lib.format.write_array(b, arr, version=version)
    raw = b.getvalue()
    major = raw[6]
    hlen = struct.unpack("<H" if major == 1 else "<I", raw[8:10] if major == 1 else raw[8:12])[0]
    start = (10 if major == 1 else 12) + hlen
    return raw[: start + keep_data]


def npy_seeds():
    put("npy", "i8_vec", npy_bytes(np.arange(5, dtype="<i8")))
    put("npy", "f4_matrix", npy_bytes(np.zeros((3, 4), dtype="<f4")))
    put("npy", "f8_big_endian_3d", npy_bytes(np.zeros((2, 2, 2), dtype=">f8")))
    put("npy", "bool", npy_bytes(np.array([True, False])))
    put("npy", "u1_images", npy_bytes(np.zeros((2, 8, 8, 3), dtype="u1")))
    put("npy", "c8", npy_bytes(np.zeros(3, dtype="<c8")))
    put("npy", "f2_fortran", npy_bytes(np.asfortranarray(np.zeros((3, 2), dtype="<f2"))))
    put("npy", "v2_i4", npy_bytes(np.arange(4, dtype="<i4"), version=(2, 0)))
    put("npy", "v3_u2", npy_bytes(np.arange(4, dtype="<u2"), version=(3, 0)))
    put("npy", "zero_d", npy_bytes(np.array(7, dtype="<i8")))
    put("npy", "structured", npy_bytes(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])))
    put("npy", "empty_rows", npy_bytes(np.zeros((0, 5), dtype="<f4")))
    put("npy", "truncated", npy_bytes(np.arange(5, dtype="<i8"))[:40])


def dtype_seeds():
    for i, d in enumerate(["<f4", ">i2", "|u1", "=f8", "b1", "<c16", "<f2", "|b1", "i8", ">c8",
                           "<u8", "<i1", "f16", "<U4", "O"]):
        put("dtype", "d%02d" % i, d)


def decode_object(path):
    with open(path, "rb") as f:
        obj = f.read()
    assert obj[:4] == b"TFSO", path
    otype, codec = obj[6], obj[7]
    payload = obj[48:]
    if codec == 1:
        payload = subprocess.run(["zstd", "-dc"], input=payload, stdout=subprocess.PIPE,
                                 check=True).stdout
    return otype, obj, payload


def framed_objects(tmp, ds, version, most):
    """The first `most` framed chunk objects of object version `version` in a dataset."""
    out = []
    objdir = os.path.join(tmp, "lake", ds, "objects")
    for sub in sorted(os.listdir(objdir)):
        for name in sorted(os.listdir(os.path.join(objdir, sub))):
            with open(os.path.join(objdir, sub, name), "rb") as f:
                obj = f.read()
            if obj[7] == 2 and obj[4] == version and len(out) < most:
                out.append(obj)
    return out


def lake_seeds():
    tmp = tempfile.mkdtemp(prefix="tfs-mkcorpus-")
    try:
        lake = "file://%s/lake" % tmp
        url = lake + "/ds"
        label = os.path.join(tmp, "label.npy")
        image = os.path.join(tmp, "image.npy")
        np.save(label, (np.arange(100) % 10).astype("<i8"))
        np.save(image, np.arange(100 * 2 * 3, dtype="<f4").reshape(100, 2, 3))
        run = lambda *a: subprocess.run([TENSORFS, *a], check=True, stdout=subprocess.DEVNULL)
        run("create", url)
        run("import", url, "label=" + label, "image=" + image, "--chunk-size", "256",
            "-m", "first import\nwith a second line")
        run("import", url, "label=" + label, "image=" + image, "--chunk-size", "256",
            "--codec", "raw", "-m", "second")
        seen = {1: 0, 2: 0, 3: 0}
        objdir = os.path.join(tmp, "lake", "ds", "objects")
        for sub in sorted(os.listdir(objdir)):
            for name in sorted(os.listdir(os.path.join(objdir, sub))):
                otype, obj, text = decode_object(os.path.join(objdir, sub, name))
                if otype == 1 and seen[1] >= 2:
                    continue
                seen[otype] += 1
                kind = {1: "chunk", 2: "manifest", 3: "commit"}[otype]
                if otype != 1:
                    put(kind, "%s%d" % (kind, seen[otype]), text)
                # fuzz_object: mode byte (expected type in bits 4..5) + the object as stored,
                # and the same with every checksum fix-up on, for mutations to stay valid.
                put("object", "%s%d" % (kind, seen[otype]), bytes([otype << 4]) + obj)
                put("object", "%s%d_fixups" % (kind, seen[otype]), bytes([otype << 4 | 7]) + obj)
        # fuzz_frames: framed chunks (4 KiB frames of a 20 KiB chunk), as stored and with every
        # fix-up on; the half-zero column has frames zstd shrinks and frames it keeps as they are.
        wide = os.path.join(tmp, "wide.npy")
        rows = np.random.default_rng(1).integers(0, 256, size=(8, 2560)).astype("u1")
        rows[::2] = 0
        np.save(wide, rows)
        run("create", lake + "/fr")
        run("import", lake + "/fr", "wide=" + wide, "--chunk-size", "20k", "--frame-size", "4k",
            "-m", "framed")
        for n, obj in enumerate(framed_objects(tmp, "fr", 2, 2), 1):
            put("frames", "chunk%d" % n, b"\x00" + obj)
            put("frames", "chunk%d_fixups" % n, b"\x07" + obj)
        # ... and delta-filtered ones (object version 3): image rows of 16 lines of 96 bytes.
        img = os.path.join(tmp, "img.npy")
        y, x = np.mgrid[0:16, 0:96]
        np.save(img, np.stack([(x * 2 + y * 3 + r) % 256 for r in range(40)]).astype("u1"))
        run("create", lake + "/dl")
        run("import", lake + "/dl", "img=" + img, "--chunk-size", "20k", "--frame-size", "4k",
            "--filter", "delta", "-m", "filtered")
        for n, obj in enumerate(framed_objects(tmp, "dl", 3, 1), 1):
            put("frames", "delta%d" % n, b"\x00" + obj)
            put("frames", "delta%d_fixups" % n, b"\x07" + obj)
    finally:
        shutil.rmtree(tmp)


def handwritten_seeds():
    h = "0123456789abcdef" * 4
    put("manifest", "empty", "tensorfs-manifest 1\nrows 0\n")
    put("manifest", "raw_3d", "tensorfs-manifest 1\nrows 3\ncolumn vol\ndtype <u2\nshape 2 3 4\n"
        "row_bytes 48\nrows 3\nrows_per_chunk 2\nchunk_bytes 96\ncodec raw 0\nchunks 2\n"
        "%s 144\n%s 96\nend\n" % (h, h.upper()))
    put("manifest", "newer", "tensorfs-manifest 2\nrows 0\n")
    put("commit", "merge", "tensorfs-commit 1\nmanifest %s\nparent %s\nparent %s\n"
        "time 1700000000\nrows 3\n\nmerge\n\nbody" % (h, h, h[::-1]))
    put("commit", "root", "tensorfs-commit 1\nmanifest %s\ntime 0\nrows 0\n\n" % h)
    put("object", "encode_text", b"\x28" + b"tensorfs-manifest 1\nrows 0\n" * 8)
    put("object", "encode_bytes", b"\x18" + bytes(range(256)))
    put("frames", "encode_bytes", b"\x48" + bytes(range(256)) * 3)
    put("frames", "encode_delta", b"\x4e" + bytes(range(256)) * 3)
    put("sigv4", "simple", b"/bucket/key\0\0host\0example.com\0x-amz-date\020240101T000000Z")
    put("sigv4", "encoded", b"/b/a b/%2F/%zz/\xc3\xa9\0list-type=2&prefix=a%2Fb&x&&y=&z=1+2"
        b"\0Host\0 h:9000 \0X-Amz-Meta\0a  b\0x-amz-meta\0c")
    for i, v in enumerate([
            "seed=1,epoch=2,rank=0,world=4",
            "where=label%20in%20(1,2)",
            "where=x > 3 and not flag",
            "seed=7,block=2,world=3,rank=2,start=5,drop_last=1,where=(label==1 or h<0.5) and u!=3",
            "where=label not in (1,2,3) or x<=-0.0",
            "where=vec>1",
            "where=z==1",
            "world=3,rank=1,start=100",
            "where=h>=1e3 or h!=h",
            "seed=0,epoch=18446744073709551615,block=1",
            "rank=4,world=4",
            "color=red",
            "seed=3,world=4,rank=1,stride=7,start=100",
            "seed=1,on_error=skip,stride=3,drop_last=1,world=3,rank=2",
            "stride=1,world=18446744073709551615,rank=18446744073709551614",
            "on_error=pad,where=label<5"]):
        put("view", "v%02d" % i, v)


def media_seeds():
    """fuzz_media: a byte that picks video (even) or audio (odd) and the name the demuxer is
    given (bits 1-3: fuzz_media.c's names), then a small file of each container ffmpeg makes."""
    if not shutil.which("ffmpeg"):
        print("ffmpeg not found: no media seeds", file=sys.stderr)
        return
    video = "testsrc=size=16x12:rate=4:duration=1"
    audio = "sine=frequency=300:sample_rate=8000:duration=0.2"
    cases = [  # (name, picks, lavfi source, ffmpeg options)
        ("h264.mp4", 0 << 1, video, ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "2"]),
        ("mjpeg.avi", 4 << 1, video, ["-c:v", "mjpeg", "-q:v", "20"]),
        ("mpeg4.mkv", 2 << 1, video, ["-c:v", "mpeg4", "-q:v", "20"]),
        ("s16.wav", 1 | 1 << 1, audio, []),
        ("flac.flac", 1 | 7 << 1, audio, []),
        ("pcm.mkv", 1 | 2 << 1, audio, ["-c:a", "pcm_s16le"]),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, pick, src, opts in cases:
            out = os.path.join(tmp, name)
            subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", src,
                            *opts, out], check=True)
            with open(out, "rb") as f:
                put("media", name, bytes([pick]) + f.read())


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    npy_seeds()
    dtype_seeds()
    lake_seeds()
    handwritten_seeds()
    media_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
