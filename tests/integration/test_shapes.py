# SPDX-License-Identifier: MIT
"""Row shapes, row counts and chunking edge cases; the exact NPY header layout."""

import ast
import os
import struct

import numpy as np

from conftest import (HEADER_SIZE, check_column_file, check_schema_column, load_schema,
                      read_header, schema_column)


def check_header_bytes(path, shape, descr):
    hdr = read_header(path)
    assert hdr[:8] == b"\x93NUMPY\x01\x00"
    assert struct.unpack("<H", hdr[8:10])[0] == 4086
    text = hdr[10:HEADER_SIZE].decode("ascii")
    assert text.endswith("\n")
    d = ast.literal_eval(text.strip())  # a Python dict literal, as NPY specifies
    assert d == {"descr": descr, "fortran_order": False, "shape": tuple(shape)}, d
    assert os.stat(path).st_size == HEADER_SIZE + int(np.prod(shape)) * np.dtype(descr).itemsize


def test_shapes(lake, mount):
    rng = np.random.default_rng(7)
    n = 1001  # not a multiple of any rows-per-chunk below
    multi = {
        "scalar": rng.integers(-2**40, 2**40, size=n).astype("<i8"),
        "vec": rng.standard_normal((n, 13)).astype("<f4"),
        "t4": rng.integers(-30000, 30000, size=(n, 2, 3, 4, 5)).astype("<i2"),
    }
    lake.build("multi", multi, "--chunk-size", "4k")

    empty = {"e": np.zeros((0, 3), dtype="<f4")}
    lake.build("empty", empty)

    one = {"row": np.arange(5, dtype="<i4").reshape(1, 5) - 2,
           "s": np.array([3.5], dtype="<f8")}
    lake.build("one", one, "--chunk-size", "4k")

    # every row (10000 bytes) is larger than the 4 KiB chunk target
    big = {"img": rng.integers(0, 256, size=(37, 100, 100), dtype=np.uint8)}
    lake.build("big", big, "--chunk-size", "4k")

    m = mount(lake)
    for ds, cols in (("multi", multi), ("empty", empty), ("one", one), ("big", big)):
        main = m.path / ds / "main"
        schema = load_schema(main / "schema.json")
        rows = next(iter(cols.values())).shape[0]
        assert schema["rows"] == rows, ds
        for name, src in cols.items():
            path = main / f"{name}.npy"
            check_header_bytes(path, src.shape, np.dtype(src.dtype).newbyteorder("<").str)
            check_column_file(path, src)
            col = schema_column(schema, name)
            check_schema_column(col, src, name)

    # chunking actually happened, and the 4k target bounds a chunk unless one row exceeds it
    sch = load_schema(m.path / "multi" / "main" / "schema.json")
    for name in multi:
        col = schema_column(sch, name)
        assert col["chunks"] >= 2, col
        assert col["chunk_bytes"] <= 4096, col
    col = schema_column(load_schema(m.path / "big" / "main" / "schema.json"), "img")
    assert col["rows_per_chunk"] == 1 and col["chunks"] == 37, col

    # the empty column: a header and nothing else
    e = m.path / "empty" / "main" / "e.npy"
    assert os.stat(e).st_size == HEADER_SIZE
    with open(e, "rb") as f:
        assert len(f.read()) == HEADER_SIZE
    assert np.load(e).shape == (0, 3)
    assert schema_column(load_schema(m.path / "empty" / "main" / "schema.json"), "e")["chunks"] == 0

    # a single row scalar column reads back through mmap too
    s = np.load(m.path / "one" / "main" / "s.npy", mmap_mode="r")
    assert s.shape == (1,) and float(s[0]) == 3.5
    del s


def test_codecs_and_levels(lake, mount):
    rng = np.random.default_rng(17)
    src = rng.integers(0, 20, size=(20000, 16)).astype("<i4")  # 1.25 MiB, compresses well
    lake.build("z9", {"v": src}, "--codec", "zstd", "--level", "9", "--chunk-size", "256k")
    lake.build("z1", {"v": src}, "--codec", "zstd", "--level", "1", "--chunk-size", "256k")
    lake.build("raw", {"v": src}, "--codec", "raw", "--chunk-size", "256k")
    m = mount(lake)
    for ds, codec, level in (("z9", "zstd", 9), ("z1", "zstd", 1), ("raw", "raw", None)):
        main = m.path / ds / "main"
        col = schema_column(load_schema(main / "schema.json"), "v")
        check_schema_column(col, src, "v")
        assert col["codec"] == codec, ds
        if level is not None:
            assert col["level"] == level, ds
            assert col["stored_bytes"] < src.nbytes // 2, ds
        else:
            assert col["stored_bytes"] >= src.nbytes, ds
        check_column_file(main / "v.npy", src)
