# SPDX-License-Identifier: MIT
"""Every accepted dtype, byte order, memory order and NPY version round-trips through a mount."""

import os

import numpy as np

from conftest import Npy, check_column_file, check_schema_column, load_schema, schema_column

N = 1000


def rand(rng, dtype, shape):
    dt = np.dtype(dtype)
    native = dt.newbyteorder("=")
    if dt.kind == "b":
        a = rng.integers(0, 2, size=shape).astype(bool)
    elif dt.kind in "iu":
        info = np.iinfo(native)
        a = rng.integers(info.min, info.max, size=shape, dtype=native, endpoint=True)
    elif dt.kind == "f":
        a = (rng.standard_normal(shape) * 100).astype(native)
        flat = a.reshape(-1)
        # special values must survive bit-exactly too
        flat[:5] = np.array([np.nan, -0.0, np.inf, -np.inf, np.finfo(native).tiny / 4],
                            dtype=native)
    elif dt.kind == "c":
        a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(native)
        flat = a.reshape(-1)
        flat[:3] = np.array([complex(np.nan, 1), complex(-0.0, np.inf), complex(1, -np.inf)],
                            dtype=native)
    else:
        raise AssertionError(dt)
    return a.astype(dt)


def test_dtypes(lake, mount):
    rng = np.random.default_rng(20261121)
    cols = {
        "c_bool": rand(rng, "?", (N,)),
        "c_i1": rand(rng, "i1", (N, 3)),
        "c_i2": rand(rng, "<i2", (N,)),
        "c_i4": rand(rng, "<i4", (N, 2, 2)),
        "c_i8": rand(rng, "<i8", (N,)),
        "c_u1": rand(rng, "u1", (N, 5)),
        "c_u2": rand(rng, "<u2", (N,)),
        "c_u4": rand(rng, "<u4", (N,)),
        "c_u8": rand(rng, "<u8", (N, 3)),
        "c_f2": rand(rng, "<f2", (N, 7)),
        "c_f4": rand(rng, "<f4", (N,)),
        "c_f8": rand(rng, "<f8", (N, 2)),
        "c_c8": rand(rng, "<c8", (N,)),
        "c_c16": rand(rng, "<c16", (N, 3)),
        # big-endian inputs are stored (and mounted) little-endian with equal values
        "be_i4": rand(rng, ">i4", (N, 3)),
        "be_f8": rand(rng, ">f8", (N,)),
        "be_c16": rand(rng, ">c16", (N, 2)),
        "be_u2": rand(rng, ">u2", (N,)),
        # Fortran-ordered inputs are mounted in C order with equal values
        "fort_f4": np.asfortranarray(rand(rng, "<f4", (N, 4, 5))),
        "fort_be_i8": np.asfortranarray(rand(rng, ">i8", (N, 3, 2))),
    }
    assert not cols["fort_f4"].flags.c_contiguous and cols["fort_f4"].flags.f_contiguous
    assert cols["be_i4"].dtype.byteorder == ">"
    inputs = dict(cols)
    # NPY format versions 2.0 and 3.0
    cols["v2_f4"] = rand(rng, "<f4", (N, 6))
    inputs["v2_f4"] = Npy(cols["v2_f4"], (2, 0))
    cols["v3_i2"] = rand(rng, "<i2", (N,))
    inputs["v3_i2"] = Npy(cols["v3_i2"], (3, 0))
    cols["v2_be_u4"] = rand(rng, ">u4", (N, 2))
    inputs["v2_be_u4"] = Npy(cols["v2_be_u4"], (2, 0))

    # small chunks so that every dtype is split over several chunks
    lake.build("types", inputs, "--chunk-size", "4k", "-m", "all the dtypes")
    m = mount(lake)
    main = m.path / "types" / "main"
    names = set(n for n in os.listdir(main) if n.endswith(".npy"))
    assert names == {c + ".npy" for c in cols}

    schema = load_schema(main / "schema.json")
    assert schema["rows"] == N
    assert sorted(c["name"] for c in schema["columns"]) == sorted(cols)
    for name, src in cols.items():
        check_column_file(main / f"{name}.npy", src)
        check_schema_column(schema_column(schema, name), src, name)
    assert schema_column(schema, "c_c16")["chunks"] > 1

    # the JSON the CLI prints is the mount's schema.json
    assert lake.info("types") == schema
