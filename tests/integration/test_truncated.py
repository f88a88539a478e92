# SPDX-License-Identifier: MIT
"""No partial import from a cut file: .npz, WebDataset .tar, JSON Lines and .npy cut at many
points (every member boundary and inside headers, every 512-byte block of a tar). An .npz or .npy
cut anywhere is refused with the dataset unchanged; a tar or JSON Lines file keeps its whole
samples and names what it lost, or with --strict commits nothing."""

import io
import json
import tarfile
import zipfile

import numpy as np


def npz_bytes():
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(300), b=np.arange(300) * 2.5, c=np.ones((300, 4), np.uint8))
    return buf.getvalue()


def test_npz_cut_anywhere_is_refused(lake, tmp_path):
    raw = npz_bytes()
    z = zipfile.ZipFile(io.BytesIO(raw))
    cuts = set()
    for info in z.infolist()[1:]:
        o = info.header_offset
        cuts |= {o, o + 1, o + 10, o + 30, o + 31}  # at the member, in its header, after it
    cd = raw.rfind(b"PK\x01\x02")
    cuts |= {cd, cd + 5, len(raw) - 22, len(raw) - 1}  # the central directory and its end
    lake.create("n")
    before = lake.snapshot("n")
    for cut in sorted(cuts):
        path = tmp_path / f"cut{cut}.npz"
        path.write_bytes(raw[:cut])
        p = lake.import_("n", {}, "--npz", path, check=False)
        assert p.returncode != 0, f"cut at {cut} of {len(raw)}: committed\n{p.stdout}"
        assert "unchanged" in p.stderr
        assert lake.snapshot("n") == before, f"cut at {cut}"
    whole = tmp_path / "whole.npz"
    whole.write_bytes(raw)
    lake.import_("n", {}, "--npz", whole)
    assert lake.info("n")["rows"] == 300


def test_npz_member_shorter_than_its_header_is_refused(lake, tmp_path):
    """A whole zip (every CRC right) whose array holds fewer rows than its NPY header says,
    in the array's first piece or past it (an array is read a piece of rows at a time)."""
    lake.create("n")
    before = lake.snapshot("n")
    for rows, kept in ((300, 200), (600_000, 599_999), (600_000, 0)):
        buf = io.BytesIO()
        np.save(buf, np.arange(rows, dtype=np.int64))
        raw = buf.getvalue()
        head = len(raw) - 8 * rows
        path = tmp_path / f"short{rows}_{kept}.npz"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("a.npy", raw[:head + 8 * kept])
            z.writestr("b.npy", raw)
        p = lake.import_("n", {}, "--npz", path, check=False)
        assert p.returncode != 0, p.stdout
        assert "a.npy: shorter than its NPY header says" in p.stderr, p.stderr
        assert lake.snapshot("n") == before
    # ending inside its header, at every length short of it
    buf = io.BytesIO()
    np.save(buf, np.arange(3))
    raw = buf.getvalue()
    for cut in (0, 5, 9, 10, 63, 64, 100, len(raw) - 25):
        path = tmp_path / f"head{cut}.npz"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("a.npy", raw[:cut])
        p = lake.import_("n", {}, "--npz", path, check=False, timeout=30)
        assert p.returncode != 0, p.stdout
        assert "a.npy: " in p.stderr and "unchanged" in p.stderr, p.stderr
        assert lake.snapshot("n") == before


def wds_bytes(n=12):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for i in range(n):
            for ext, data in (("cls", str(i % 3).encode()), ("txt", b"row %d " % i * 40)):
                ti = tarfile.TarInfo(f"s{i:04d}.{ext}")
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def whole_samples(raw, cut):
    """The samples whose members all end at or before cut."""
    t = tarfile.open(fileobj=io.BytesIO(raw))
    ends = {}
    for m in t.getmembers():
        key = m.name.split(".")[0]
        ends[key] = max(ends.get(key, 0), m.offset_data + m.size)
    return sum(1 for e in ends.values() if e <= cut)


def test_webdataset_cut_keeps_whole_samples_or_nothing(lake, tmp_path):
    raw = wds_bytes()
    last = max(m.offset_data + m.size for m in tarfile.open(fileobj=io.BytesIO(raw)))
    end = (last + 511) // 512 * 512  # then the two end-of-archive blocks
    # Every 512-byte boundary up to the second end block, and points inside headers.
    cuts = sorted(set(range(512, end + 1024, 512)) | {512 * 4 + 100, 512 * 9 + 7})
    for i, cut in enumerate(cuts):
        path = tmp_path / f"cut{cut}.tar"
        path.write_bytes(raw[:cut])
        want = whole_samples(raw, cut)
        ds = f"w{i}"
        lake.create(ds)
        before = lake.snapshot(ds)
        p = lake.import_(ds, {}, "--webdataset", path, "--strict", check=False)
        assert p.returncode != 0, f"--strict, cut at {cut}: committed\n{p.stdout}"
        assert lake.snapshot(ds) == before
        p = lake.import_(ds, {}, "--webdataset", path, check=False)
        if want == 0:
            # The first sample's fields are the columns: cut inside it, it may pass for a
            # sample of fewer fields, but the damage is named either way.
            assert p.returncode != 0 or "cut short" in p.stdout + p.stderr
            continue
        assert p.returncode == 0, p.stderr
        rows = lake.info(ds)["rows"]
        # The whole samples before the cut; the last of them may be dropped when the cut is
        # inside the next one's data (it is then not known to be whole).
        assert rows in (want, want - 1) and rows >= 1, (cut, rows, want)
        assert "cut short" in p.stdout + p.stderr and path.name in p.stdout + p.stderr
    # Whole, with its end blocks (and without the padding to a 10 KiB record): all of it.
    path = tmp_path / "whole.tar"
    path.write_bytes(raw[:end + 1024])
    lake.create("whole")
    p = lake.import_("whole", {}, "--webdataset", path, "--strict")
    assert lake.info("whole")["rows"] == 12 and "cut short" not in p.stdout + p.stderr


def test_jsonl_and_npy_cut(lake, tmp_path):
    raw = "".join(json.dumps({"a": i, "t": "x" * i}) + "\n" for i in range(40)).encode()
    for cut in (len(raw) - 1, len(raw) - 15, len(raw) // 2 + 3):
        path = tmp_path / f"cut{cut}.jsonl"
        path.write_bytes(raw[:cut])
        ds = f"j{cut}"
        lake.create(ds)
        before = lake.snapshot(ds)
        whole = raw[:cut].count(b"\n")
        last_ok = raw[:cut].endswith(b"}")  # cut exactly before a newline: still a record
        p = lake.import_(ds, {}, "--jsonl", path, "--strict", check=False)
        if last_ok:
            assert p.returncode == 0 and lake.info(ds)["rows"] == whole + 1
            continue
        assert p.returncode != 0 and lake.snapshot(ds) == before
        p = lake.import_(ds, {}, "--jsonl", path)
        assert lake.info(ds)["rows"] == whole
        assert "skipped 1" in p.stdout
    buf = io.BytesIO()
    np.save(buf, np.arange(1000, dtype=np.int64))
    raw = buf.getvalue()
    lake.create("x")
    before = lake.snapshot("x")
    for cut in (10, 64, 127, 128, 129, len(raw) - 8, len(raw) - 1):
        path = tmp_path / f"cut{cut}.npy"
        path.write_bytes(raw[:cut])
        p = lake.import_("x", {"x": path}, check=False)
        assert p.returncode != 0, f"cut at {cut}"
        assert lake.snapshot("x") == before
