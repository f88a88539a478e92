# SPDX-License-Identifier: MIT
"""A damaged chunk object: EIO for exactly its bytes, the rest of the column still reads,
and the daemon names the object in its log."""

import errno
import os
import time

import numpy as np
import pytest

from conftest import (HEADER_SIZE, expected_file_bytes, flip_byte, load_schema, opened,
                      parse_object_header, schema_column)


@pytest.mark.parametrize("codec", ["raw", "zstd"])
def test_corrupt_chunk(lake, mount, codec):
    rng = np.random.default_rng(12345 if codec == "raw" else 54321)
    # 64-byte rows, 16 KiB chunks: chunk boundaries fall on page boundaries of the file.
    # Small values compress well, so zstd chunks really are stored compressed.
    src = rng.integers(0, 100, size=(4000, 16)).astype("<i4")
    lake.build("bad", {"v": src}, "--chunk-size", "16k", "--codec", codec)

    chunks = []
    for oid, path in lake.object_files("bad"):
        raw = path.read_bytes()
        h = parse_object_header(raw)
        if h["type"] == 1:
            chunks.append((oid, path, h, len(raw)))
    assert len(chunks) >= 8, f"expected the column to be split into many chunk objects: {chunks}"
    if codec == "raw":
        assert all(h["codec"] == 0 for _, _, h, _ in chunks)
        candidates = chunks
    else:
        candidates = [c for c in chunks if c[2]["codec"] == 1]
        assert candidates, "no chunk object is stored zstd-compressed"
    oid, path, h, flen = candidates[len(candidates) // 2]
    assert flen == 48 + h["payload_size"]

    # flip one payload byte (before mounting)
    flip_byte(path, 48 + h["payload_size"] // 2, 0x5A)

    m = mount(lake)
    main = m.path / "bad" / "main"
    col = schema_column(load_schema(main / "schema.json"), "v")
    assert col["codec"] == codec
    rpc, row_bytes, nchunks = col["rows_per_chunk"], col["row_bytes"], col["chunks"]
    chunk_bytes = rpc * row_bytes
    assert nchunks == len(chunks), "one object per chunk expected (random data, no dedup)"
    fpath = main / "v.npy"
    want = expected_file_bytes(fpath, src)
    size = len(want)

    bad = []
    with opened(fpath) as fd:
        for k in range(nchunks):
            off = HEADER_SIZE + k * chunk_bytes
            n = min(size, off + chunk_bytes) - off
            try:
                got = os.pread(fd, n, off)
            except OSError as e:
                assert e.errno == errno.EIO, f"chunk {k}: {e!r}, expected EIO"
                bad.append(k)
                continue
            assert got == want[off:off + n], f"chunk {k} (bytes {off}..{off + n}) differs"
        assert len(bad) == 1, f"expected exactly one unreadable chunk, got {bad}"
        k = bad[0]
        lo, hi = HEADER_SIZE + k * chunk_bytes, min(size, HEADER_SIZE + (k + 1) * chunk_bytes)

        # still EIO on a second try (not cached as zeros), for a small read inside it too
        for off, n in ((lo, hi - lo), (lo + 100, 10), (hi - 1, 1)):
            with pytest.raises(OSError) as ei:
                os.pread(fd, n, off)
            assert ei.value.errno == errno.EIO
        # the header and the neighbours still read
        assert os.pread(fd, HEADER_SIZE, 0) == want[:HEADER_SIZE]
        if k > 0:
            assert os.pread(fd, 100, lo - 100) == want[lo - 100:lo]
        if hi < size:
            assert os.pread(fd, 100, hi) == want[hi:hi + 100]
        # a read spanning the bad chunk never returns wrong bytes: an error, or a short
        # read that stops before the damage
        try:
            got = os.pread(fd, size, 0)
        except OSError as e:
            assert e.errno == errno.EIO
        else:
            assert len(got) <= lo and got == want[:len(got)], \
                f"a read over the bad chunk returned {len(got)} bytes"

    # memory-mapped access outside the bad chunk works (never touch the bad rows: SIGBUS)
    mm = np.load(fpath, mmap_mode="r")
    r0, r1 = k * rpc, min(src.shape[0], (k + 1) * rpc)
    assert np.array_equal(np.array(mm[:r0]), src[:r0])
    assert np.array_equal(np.array(mm[r1:]), src[r1:])
    del mm

    # the daemon's log names the damaged object
    deadline = time.time() + 5
    while oid not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    assert oid in m.log(), f"daemon log does not name object {oid}:\n{m.log()[-4000:]}"
