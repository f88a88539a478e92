# SPDX-License-Identifier: MIT
"""Framed chunks (zstd and raw columns): a reader that jumps decodes the frame that holds its
rows, not the chunk; a
sequential reader still takes whole chunks; a damaged frame is EIO (never wrong bytes) and its
object named in the log; chunks of one frame (--frame-size 0, and lakes written before frames)
read as before, alongside framed ones in the same column."""

import errno
import json
import os
import struct
import time

import numpy as np
import pytest

from conftest import (HEADER_SIZE, expected_file_bytes, flip_byte, opened,
                      parse_object_header, read_ragged)

ROW = (250,)  # int32: 1,000 bytes a row: `--frame-size 16k` writes frames of 16 whole rows
ROWS = 12_000  # 12 MB: a dozen 1 MiB chunks


def source(seed):
    # Small values: compressible, so frames really are zstd frames.
    return np.random.default_rng(seed).integers(0, 200, size=(ROWS,) + ROW).astype("<i4")


def stats(m):
    with open(m.path / ".tensorfs" / "stats") as f:
        return json.load(f)


def chunk_objects(lake, ds):
    out = []
    for oid, path in lake.object_files(ds):
        raw = path.read_bytes()
        h = parse_object_header(raw)
        if h["type"] == 1:
            out.append((oid, path, h, raw))
    return out


def frame_index(raw):
    """[(offset in the object, stored length, flags)] of a framed chunk (core/FORMAT.md): the
    index has two more fields from version 3 (a filter)."""
    n, _ = struct.unpack_from("<II", raw, 48)
    head = 16 if parse_object_header(raw)["version"] >= 3 else 8
    pos, out = 48 + head + 16 * n + 8, []
    for i in range(n):
        length, flags = struct.unpack_from("<II", raw, 48 + head + 16 * i)
        out.append((pos, length, flags))
        pos += length
    return out


def random_rows(fd, src, rows):
    rb = src[0].nbytes
    for r in rows:
        got = os.pread(fd, rb, HEADER_SIZE + int(r) * rb)
        assert got == src[r].tobytes(), f"row {r} differs"


def odd_reads(fd, want, rng, count, longest, start=HEADER_SIZE):
    """count reads of up to longest bytes at odd offsets from start on, crossing frame and chunk
    boundaries: each the file's bytes, want."""
    for _ in range(count):
        off = int(rng.integers(start, len(want)))
        n = int(rng.integers(1, longest))
        assert os.pread(fd, n, off) == want[off:off + n], (off, n)


def mmap_rows(path, src, rng, count):
    """count rows at random through numpy's mmap of the file, each equal to the source's."""
    mm = np.load(path, mmap_mode="r")
    for r in rng.integers(0, len(src), count):
        assert np.array_equal(mm[r], src[r]), f"mmap row {r}"
    del mm


@pytest.mark.parametrize("codec", ["zstd", "raw"])
def test_random_rows_decode_frames(lake, mount, codec):
    """Both codecs: a raw column's chunks are framed too (every frame kept as it is), so that a
    random row reads its frame, not the chunk."""
    src = source(1)
    lake.build("f", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k", "--codec", codec)
    chunks = chunk_objects(lake, "f")
    assert chunks and all(h["codec"] == 2 and h["version"] == 2 for _, _, h, _ in chunks), \
        [(h["codec"], h["version"]) for _, _, h, _ in chunks]
    # Frames hold whole rows (16,000 bytes, not 16,384): no row is split between two frames.
    assert {struct.unpack_from("<I", raw, 52)[0] for _, _, _, raw in chunks} == {16_000}

    # A cache of 4 MiB for a 12 MB column: random rows keep missing.
    m = mount(lake, opts=("cache_mem=4M",))
    path = m.path / "f" / "main" / "x.npy"
    rng = np.random.default_rng(2)
    with opened(path) as fd:
        os.pread(fd, HEADER_SIZE, 0)
        before = stats(m)
        random_rows(fd, src, rng.integers(0, ROWS, 3000))
        after = stats(m)
        odd_reads(fd, expected_file_bytes(path, src), rng, 300, 40_000)
    ranged = after["store"]["ranged_gets"] - before["store"]["ranged_gets"]
    decoded = after["cache"]["bytes_decompressed"] - before["cache"]["bytes_decompressed"]
    assert ranged > 1000, f"random rows did not read frames: {ranged} ranged reads"
    # Each missed row decodes its frame (16,000 bytes), not a 1 MiB chunk: well under a chunk's
    # worth per row.
    assert decoded < 3000 * 64 * 1024, f"{decoded} bytes decoded for 3000 rows"

    mmap_rows(path, src, rng, 500)


def test_sequential_scan_takes_whole_chunks(lake, mount):
    src = source(3)
    lake.build("s", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k")
    m = mount(lake, opts=("cache_mem=64M",))
    path = m.path / "s" / "main" / "x.npy"
    with open(path, "rb") as f:
        got = f.read()
    assert got == expected_file_bytes(path, src)
    st = stats(m)
    assert st["store"]["ranged_gets"] == 0, st["store"]
    assert np.array_equal(np.load(path), src)


def test_scan_between_reads_elsewhere_takes_whole_chunks(lake, mount):
    """memcpy of a whole mapping reads its last page first, and the kernel reads ahead around
    it while the scan goes on: a scan that starts mid-column, with reads at the tail between
    its own, takes whole chunks from its first half chunk on, not frames all the way."""
    src = source(8)
    lake.build("t", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k")
    # A small cache: a read-ahead window of a chunk or two, which the tail is well beyond.
    m = mount(lake, opts=("cache_mem=4M",))
    path = m.path / "t" / "main" / "x.npy"
    want = expected_file_bytes(path, src)
    tail = len(want) - 4096
    with opened(path) as fd:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # reads as asked: no kernel read-ahead
        assert os.pread(fd, 4096, tail) == want[tail:]
        pos, n = HEADER_SIZE + 2_500 * src[0].nbytes, 0
        while pos < len(want):
            assert os.pread(fd, 131072, pos) == want[pos:pos + 131072], pos
            pos += 131072
            n += 1
            if n % 4 == 0:
                off = tail - 4096 * (n % 64)
                assert os.pread(fd, 4096, off) == want[off:off + 4096], off
    st = stats(m)
    # The scan's first half chunk in 16 KiB frames, and the tail's reads: about 30. A scan that
    # the reads at the tail kept from counting as one takes frames all the way: over 100.
    assert st["store"]["ranged_gets"] < 64, st["store"]
    assert st["prefetch"]["sequential_streams"] >= 1, st["prefetch"]


def test_backward_scan_takes_whole_chunks(lake, mount):
    """memmove copies a mapping from its end when the addresses suit it: the kernel then reads
    each 512 KiB block before the last, front to back. Such a scan takes whole chunks too, and
    the chunks before it load ahead of it."""
    src = source(9)
    lake.build("b", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k")
    m = mount(lake, opts=("cache_mem=4M",))
    path = m.path / "b" / "main" / "x.npy"
    want = expected_file_bytes(path, src)
    block = 512 * 1024
    with opened(path) as fd:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # reads as asked: no kernel read-ahead
        end = len(want)
        while end > HEADER_SIZE:
            start = max(end - block, HEADER_SIZE)
            for pos in range(start, end, 131072):
                n = min(131072, end - pos)
                assert os.pread(fd, n, pos) == want[pos:pos + n], pos
            end = start
    st = stats(m)
    # Frames for the first half chunk and for the first reads of a block after a jump back
    # that the run does not reach: a few dozen. Frames all the way: several hundred.
    assert st["store"]["ranged_gets"] < 50, st["store"]
    # Read-ahead goes the run's way: the chunks before it load while it reads (12 chunks; a
    # read-ahead only forwards had a chunk or two used, those np.load's first read started).
    assert st["prefetch"]["hits"] >= 5, st["prefetch"]


def test_unframed_chunks_read_alongside_framed(lake, mount):
    """A column written with one frame a chunk (as before frames), then appended to with
    frames: both kinds read, sequentially and at random."""
    a, b = source(4), source(5)
    lake.build("u", {"x": a}, "--chunk-size", "1M", "--frame-size", "0")
    codecs = {h["codec"] for _, _, h, _ in chunk_objects(lake, "u")}
    assert codecs == {1}, codecs
    assert {h["version"] for _, _, h, _ in chunk_objects(lake, "u")} == {1}
    lake.import_("u", {"x": b}, "--frame-size", "16k")
    codecs = {h["codec"] for _, _, h, _ in chunk_objects(lake, "u")}
    assert codecs == {1, 2}, codecs
    both = np.concatenate([a, b])
    m = mount(lake, opts=("cache_mem=4M",))
    path = m.path / "u" / "main" / "x.npy"
    with opened(path) as fd:
        random_rows(fd, both, np.random.default_rng(6).integers(0, len(both), 2000))
    assert np.array_equal(np.load(path), both)


@pytest.mark.parametrize("codec", ["zstd", "raw"])
def test_damaged_frame_is_eio(lake, mount, codec):
    src = source(7)
    lake.build("d", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k", "--codec", codec)
    oid, path, h, raw = sorted(chunk_objects(lake, "d"), key=lambda c: c[0])[0]
    frames = frame_index(raw)
    fi = len(frames) // 2
    off, length, _ = frames[fi]
    flip_byte(path, off + length // 2)

    m = mount(lake, opts=("cache_mem=4M",))
    fpath = m.path / "d" / "main" / "x.npy"
    rb = src[0].nbytes
    rows_per_chunk = 1024 * 1024 // rb
    bad, short = [], []
    with opened(fpath) as fd:
        # Every row, in random order: a reader that jumps, served frames.
        for r in np.random.default_rng(8).permutation(ROWS).tolist():
            try:
                got = os.pread(fd, rb, HEADER_SIZE + r * rb)
            except OSError as e:
                assert e.errno == errno.EIO, e
                bad.append(r)
                continue
            want = src[r].tobytes()
            assert got == want[:len(got)], f"row {r}: wrong bytes"
            if len(got) < rb:
                short.append(r)  # the kernel's pages ran into the damage: never wrong bytes
        # The rows whose pages touch the damaged frame fail (the kernel reads folios of 4 KiB
        # and up, so a little more than the frame's 16 rows), not the whole chunk, whose
        # other frames read from their own checksums; and nothing outside that chunk.
        assert bad, "the damaged frame was never reported"
        assert len(bad) < rows_per_chunk // 4, sorted(bad)
        hit = {r // rows_per_chunk for r in bad + short}
        assert len(hit) == 1, f"rows of chunks {hit} failed: {bad} {short}"
        # Read whole (sequentially), the chunk fails its checksum: EIO, not wrong bytes.
        with pytest.raises(OSError) as ei:
            os.pread(fd, 64 * rb, HEADER_SIZE + bad[0] * rb)
        assert ei.value.errno == errno.EIO
    deadline = time.time() + 5
    while oid not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    assert oid in m.log(), m.log()[-3000:]


@pytest.mark.parametrize("size", ["1k", "3G", "abc"])
def test_frame_size_is_checked(lake, size):
    from conftest import tfs
    lake.create("e")
    npy = lake.write_npy(source(8)[:10])
    rc, _, err = tfs("import", lake.ds_url("e"), f"x={npy}", "--frame-size", size)
    assert rc == 2 and "--frame-size" in err, err


def images(seed, rows=240, h=64, w=96):
    """Image rows as a camera gives them: ramps that change slowly, and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 2, y * 3, x + y], -1)
    out = np.empty((rows, h, w, 3), np.uint8)
    for r in range(rows):
        out[r] = (base + r * 7 + rng.integers(0, 12, base.shape)) % 256
    return out


def stored_bytes(lake, ds):
    return sum(len(raw) for _, _, _, raw in chunk_objects(lake, ds))


def test_delta_filter_reads_back_at_random_and_whole(lake, mount):
    """--filter delta: chunks of version 3 whose frames hold each byte less the byte a line
    above it, smaller than the same rows unfiltered, read back exactly by a reader that jumps
    (frames decoded alone, some starting mid-line), by mmap and by a scan."""
    src = images(1)
    opts = ("--chunk-size", "1M", "--frame-size", "16k")
    lake.build("p", {"x": src}, *opts, "--filter", "none")
    lake.build("q", {"x": src}, *opts, "--filter", "delta")
    plain, chunks = chunk_objects(lake, "p"), chunk_objects(lake, "q")
    assert {h["version"] for _, _, h, _ in plain} == {2}
    assert {(h["codec"], h["version"]) for _, _, h, _ in chunks} == {(2, 3)}
    for _, _, _, raw in chunks:
        assert struct.unpack_from("<II", raw, 56) == (1, 96 * 3)  # delta, a line's bytes
        assert all(fl == 2 for _, _, fl in frame_index(raw)), frame_index(raw)
    small, big = stored_bytes(lake, "q"), stored_bytes(lake, "p")
    assert small * 4 < big * 3, (small, big)

    m = mount(lake, opts=("cache_mem=2M",))
    path = m.path / "q" / "main" / "x.npy"
    rng = np.random.default_rng(2)
    with opened(path) as fd:
        os.pread(fd, HEADER_SIZE, 0)
        before = stats(m)
        random_rows(fd, src, rng.integers(0, len(src), 400))
        after = stats(m)
        odd_reads(fd, expected_file_bytes(path, src), rng, 200, 30_000)
    assert after["store"]["ranged_gets"] - before["store"]["ranged_gets"] > 100
    mmap_rows(path, src, rng, 100)
    assert np.array_equal(np.load(path), src)


def test_damaged_filtered_frame_is_eio(lake, mount):
    src = images(3)
    lake.build("d", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k", "--filter",
               "delta")
    oid, path, h, raw = sorted(chunk_objects(lake, "d"), key=lambda c: c[0])[0]
    assert h["version"] == 3
    off, length, flags = frame_index(raw)[1]
    assert flags == 2
    flip_byte(path, off + length // 2)
    m = mount(lake, opts=("cache_mem=2M",))
    fpath = m.path / "d" / "main" / "x.npy"
    rb = src[0].nbytes
    bad = []
    with opened(fpath) as fd:
        for r in np.random.default_rng(4).permutation(len(src)).tolist():
            try:
                got = os.pread(fd, rb, HEADER_SIZE + r * rb)
            except OSError as e:
                assert e.errno == errno.EIO, e
                bad.append(r)
                continue
            assert got == src[r].tobytes()[:len(got)], f"row {r}: wrong bytes"
    # The rows on that frame's pages, all in that chunk (a row is 18,432 bytes, 56 a chunk).
    assert bad and len({r // (1024 * 1024 // rb) for r in bad}) == 1, sorted(bad)
    assert len(bad) <= 3, sorted(bad)
    deadline = time.time() + 5
    while oid not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    assert oid in m.log(), m.log()[-3000:]


@pytest.mark.parametrize("opts,says", [
    (("--filter", "png"), "--filter png: expected delta or none"),
    (("--filter", "delta", "--codec", "raw"), "--filter delta: the filter is for zstd"),
])
def test_filter_is_checked(lake, opts, says):
    from conftest import tfs
    lake.create("e")
    npy = lake.write_npy(images(8, rows=4))
    before = lake.snapshot("e")
    rc, _, err = tfs("import", lake.ds_url("e"), f"x={npy}", *opts)
    assert rc == 2 and says in err, err
    assert lake.snapshot("e") == before


def test_row_over_several_frames_is_one_read(lake, mount):
    """A row of 40 KB spans three or four 16 KiB frames: a cold read of it is one ranged read
    of those frames (not one a frame), and a column read at random has all its chunks' frame
    indexes loaded together once, not each on a row's critical path."""
    rows, per = 600, 10_000
    src = np.random.default_rng(3).integers(0, 200, size=(rows, per)).astype("<i4")
    lake.build("w", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k")
    nchunks = len(chunk_objects(lake, "w"))
    assert nchunks >= 20
    m = mount(lake, opts=("cache_mem=64M",))  # every row picked is read once: each a miss
    path = m.path / "w" / "main" / "x.npy"
    jumps = [150, 300, 450]  # far from one another and from the header's read
    rng = np.random.default_rng(4)
    picks = [r for r in rng.permutation(rows) if r not in jumps][:200]
    with opened(path) as fd:
        os.pread(fd, HEADER_SIZE, 0)
        random_rows(fd, src, jumps)  # a reader at random: the column's indexes are asked for
        deadline = time.monotonic() + 30
        while stats(m)["prefetch"]["frame_indexes"] < nchunks and time.monotonic() < deadline:
            time.sleep(0.05)
        assert stats(m)["prefetch"]["frame_indexes"] == nchunks, stats(m)["prefetch"]
        while stats(m)["prefetch"]["inflight_bytes"] and time.monotonic() < deadline:
            time.sleep(0.05)
        before = stats(m)
        random_rows(fd, src, picks)
        after = stats(m)
    ranged = after["store"]["ranged_gets"] - before["store"]["ranged_gets"]
    misses = len(picks)
    # One read a row (a row a few frames long): not three or four, and no index read. The
    # kernel reads whole pages, so a read at a chunk's edge also takes a frame of the next.
    edge = sum(1 for r in picks if r % ((1 << 20) // (per * 4)) in (0, 25))
    assert ranged <= misses + edge, f"{ranged} ranged reads for {misses} rows ({edge} at edges)"
    assert ranged >= misses // 2, f"{ranged} ranged reads: were the rows cached?"


def test_ragged_images_filtered_a_line_a_frame(lake, mount, tmp_path):
    """Images of any size (--images without --size: a ragged column) are filtered too, each
    frame with the line of the image that holds most of it: images of one width make chunks of
    version 3 (one line), of several widths version 4 (a frame of another line than the
    chunk's says its own), read back exactly by rows and by random reads of data.bin, smaller
    than with --filter none."""
    from PIL import Image
    want = {}
    for tree, big in (("one", range(12)), ("mixed", (1, 4, 7, 10))):
        root = tmp_path / tree / "x"
        root.mkdir(parents=True)
        want[tree] = []
        for i in range(12):
            h, w = (64, 96) if i in big else (40, 72)
            want[tree].append(images(i, rows=1, h=h, w=w)[0])
            Image.fromarray(want[tree][-1]).save(root / f"{i:02d}.png")
    for name, tree, opts in (("o", "one", ()), ("m", "mixed", ()),
                             ("n", "mixed", ("--filter", "none"))):
        lake.create(name)
        lake.import_(name, {}, "--images", tmp_path / tree, "--frame-size", "8k", *opts)
    versions = {name: [(h["version"], raw) for _, _, h, raw in chunk_objects(lake, name)
                       if h["version"] >= 3] for name in "omn"}
    assert [v for v, _ in versions["o"]] == [3] and not versions["n"], versions
    assert struct.unpack_from("<II", versions["o"][0][1], 56) == (1, 96 * 3)
    assert [v for v, _ in versions["m"]] == [4], versions
    raw = versions["m"][0][1]
    filt, line = struct.unpack_from("<II", raw, 56)
    flags = [fl for _, _, fl in frame_index(raw)]
    lines = {fl >> 8 or line for fl in flags if fl & 2}
    assert filt == 1 and lines == {72 * 3, 96 * 3}, (filt, line, flags)
    assert all(fl & 0xfc == 0 and (fl & 2 or not fl >> 8) for fl in flags), flags
    assert sum(1 for fl in flags if fl & 2) * 4 > len(flags) * 3, flags
    assert stored_bytes(lake, "m") < stored_bytes(lake, "n")

    m = mount(lake, opts=("cache_mem=2M",))
    for name, tree in (("o", "one"), ("m", "mixed")):
        rows = read_ragged(m.path / name / "main" / "image", np.uint8)
        assert [r.shape for r in rows] == [a.shape for a in want[tree]]
        for i, (r, a) in enumerate(zip(rows, want[tree])):
            assert np.array_equal(r, a), i
    flat = np.concatenate([a.ravel() for a in want["mixed"]])
    rng = np.random.default_rng(3)
    with opened(m.path / "m" / "main" / "image" / "data.bin") as fd:
        odd_reads(fd, flat.tobytes(), rng, 200, 20_000, start=0)


def test_webdataset_and_jsonl_images_filtered_unless_told(lake, mount, tmp_path):
    """WebDataset's images and --jsonl's image fields are pixels by construction: filtered
    unless told --filter none (at zstd level 1, the columns beside them at 3), and read back the
    same either way."""
    import io
    import tarfile

    from PIL import Image

    import tensorfs
    from conftest import tar_add
    pics = [images(i, rows=1, h=48 + 8 * (i % 2), w=64)[0] for i in range(10)]
    (tmp_path / "img").mkdir()
    with tarfile.open(tmp_path / "s.tar", "w") as t, open(tmp_path / "d.jsonl", "w") as f:
        for i, a in enumerate(pics):
            b = io.BytesIO()
            Image.fromarray(a).save(b, "PNG")
            tar_add(t, f"{i:04d}.png", b.getvalue())
            tar_add(t, f"{i:04d}.cls", str(i).encode())
            Image.fromarray(a).save(tmp_path / "img" / f"{i}.png")
            f.write(json.dumps({"img": f"img/{i}.png", "y": i}) + "\n")
    sources = {"w": ("--webdataset", tmp_path / "s.tar"),
               "j": ("--jsonl", tmp_path / "d.jsonl", "--media", "img=image")}
    for name, src in sources.items():
        for suffix, opts in (("f", ()), ("n", ("--filter", "none"))):
            lake.create(name + suffix)
            lake.import_(name + suffix, {}, *src, "--frame-size", "8k", *opts)
            versions = {h["version"] for _, _, h, _ in chunk_objects(lake, name + suffix)}
            assert (3 in versions) == (suffix == "f"), (name + suffix, versions)
            levels = {c["name"]: c["level"] for c in lake.info(name + suffix)["columns"]}
            pixels = "png" if name == "w" else "img"
            # the pixels at level 1 when filtered, the other columns at the default, 3
            assert levels.pop(pixels) == (1 if suffix == "f" else 3), (name + suffix, levels)
            assert levels and set(levels.values()) == {3}, (name + suffix, levels)
    m = mount(lake)
    for ds, col in (("wf", "png"), ("wn", "png"), ("jf", "img"), ("jn", "img")):
        cols = tensorfs.open(m.path / ds / "main")
        for i, a in enumerate(pics):
            assert np.array_equal(cols[col][i], a), (ds, i)


def test_cold_shuffled_epoch_reads_each_frame_once(lake, mount):
    """A stream's first batch, cold, reads its rows' frames (a few rows of every chunk); the
    chunks read whole after it take those frames from the cache rather than reading them again,
    so the epoch fetches the column's stored bytes about once (its first batch's frames are a
    quarter of them here), and every batch holds the view's rows."""
    import tensorfs

    src = source(5)
    lake.build("e", {"x": src}, "--chunk-size", "1M", "--frame-size", "16k")
    stored = stored_bytes(lake, "e")
    m = mount(lake, opts=("cache_mem=64M",))
    vp = tensorfs.view_path(m.path / "e" / "main", seed=3)
    before = stats(m)
    with tensorfs.Stager(m.path, vp, ["x"], batch_size=256, depth=3) as g:
        got = [np.array(b["x"]) for b in g.batches()]
    after = stats(m)
    fetched = after["store"]["bytes_fetched"] - before["store"]["bytes_fetched"]
    assert after["store"]["ranged_gets"] > before["store"]["ranged_gets"]  # frames were read
    # Each frame once, and the first batch's chunk indexes: a few KiB a chunk.
    assert fetched < stored * 1.1, (fetched, stored)
    assert np.array_equal(np.concatenate(got), np.array(tensorfs.open(vp)["x"]))


def test_first_batch_reads_whole_chunks_on_a_full_cache(lake, mount):
    """A stream's first batch reads frames only while at most half the cache is full. On a
    cache that other reads filled (as in a later epoch of data larger than the cache) the
    frames, which no reader's plan knows, would be evicted before the chunks the plan needs
    and read again when the batches after read their chunks whole: there every batch reads
    whole chunks, and the rows are the view's all the same."""
    import tensorfs

    lake.build("e", {"x": source(5)}, "--chunk-size", "1M", "--frame-size", "16k")
    lake.build("f", {"y": source(6)}, "--chunk-size", "1M")
    m = mount(lake, opts=("cache_mem=16M",))
    with open(m.path / "f" / "main" / "y.npy", "rb") as f:
        while f.read(1 << 20):  # 12 MB of chunks cached: more than half the cache
            pass
    vp = tensorfs.view_path(m.path / "e" / "main", seed=3)
    before = stats(m)
    with tensorfs.Stager(m.path, vp, ["x"], batch_size=256, depth=3) as g:
        got = [np.array(b["x"]) for b in g.batches()]
    after = stats(m)
    assert after["store"]["ranged_gets"] == before["store"]["ranged_gets"], after["store"]
    assert after["store"]["gets"] - before["store"]["gets"] >= 12
    assert np.array_equal(np.concatenate(got), np.array(tensorfs.open(vp)["x"]))
