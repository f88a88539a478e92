# SPDX-License-Identifier: MIT
"""Random preads at odd offsets and lengths agree byte for byte with header + source data."""

import os

import numpy as np

from conftest import HEADER_SIZE, expected_file_bytes, load_schema, opened, schema_column

ROWS = 50_000  # x 74 bytes per row = 3.7 MB per column


def make_ranges(rng, size, chunk_bytes, count):
    """(offset, length) pairs biased towards the interesting places."""
    nchunks = (size - HEADER_SIZE) // chunk_bytes + 1
    out = []
    for i in range(count):
        kind = i % 5
        if kind == 0:    # anywhere, including past EOF
            off = int(rng.integers(0, size + 1000))
        elif kind == 1:  # around the header / data boundary
            off = int(rng.integers(max(0, HEADER_SIZE - 300), HEADER_SIZE + 300))
        elif kind == 2:  # around a chunk boundary
            b = HEADER_SIZE + int(rng.integers(1, nchunks)) * chunk_bytes
            off = int(rng.integers(max(0, b - 300), b + 300))
        elif kind == 3:  # near EOF, sometimes past it
            off = int(rng.integers(max(0, size - 400), size + 50))
        else:            # page-unaligned, odd
            off = int(rng.integers(0, size)) | 1
        r = rng.random()
        if r < 0.35:
            n = int(rng.integers(1, 65))
        elif r < 0.7:
            n = int(rng.integers(1, 5000))
        elif r < 0.95:
            n = int(rng.integers(1, 300_001))
        else:
            n = int(rng.integers(chunk_bytes, 3 * chunk_bytes))  # spans whole chunks
        out.append((off, n))
    return out


def test_pread_random(lake, mount):
    rng = np.random.default_rng(11)
    # compressible but not trivial: small integers
    src = rng.integers(0, 1000, size=(ROWS, 37)).astype("<i2")
    lake.build("z", {"col": src}, "--chunk-size", "64k", "--codec", "zstd")
    lake.build("r", {"col": src}, "--chunk-size", "64k", "--codec", "raw")
    m = mount(lake)
    for ds, codec in (("z", "zstd"), ("r", "raw")):
        main = m.path / ds / "main"
        col = schema_column(load_schema(main / "schema.json"), "col")
        assert col["codec"] == codec
        chunk_bytes = col["chunk_bytes"]
        assert 4096 < chunk_bytes <= 65536 and col["chunks"] >= 50
        path = main / "col.npy"
        want = expected_file_bytes(path, src)
        size = len(want)
        assert os.stat(path).st_size == size
        with opened(path) as fd:
            for off, n in make_ranges(rng, size, chunk_bytes, 1000):
                got = os.pread(fd, n, off)
                exp = want[off:off + n]
                if got != exp:
                    # find the first differing byte for the message
                    k = next((i for i in range(min(len(got), len(exp))) if got[i] != exp[i]),
                             min(len(got), len(exp)))
                    raise AssertionError(
                        f"{ds}: pread(off={off}, n={n}) returned {len(got)} bytes, expected "
                        f"{len(exp)}; first difference at file offset {off + k} "
                        f"(size {size}, chunk_bytes {chunk_bytes})")
            # reads at and past EOF
            assert os.pread(fd, 100, size) == b""
            assert os.pread(fd, 100, size + 12345) == b""
            assert os.pread(fd, 1 << 20, size - 10) == want[-10:]
        # and the whole file front to back in odd-sized reads
        got = bytearray()
        with open(path, "rb", buffering=0) as f:
            while True:
                b = f.read(77_777)
                if not b:
                    break
                got += b
        assert bytes(got) == want, f"{ds}: sequential read differs"
