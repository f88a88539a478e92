# SPDX-License-Identifier: MIT
"""Appending rows, adding columns, and imports that must fail without changing anything."""

import re

import numpy as np

from conftest import check_column_file, check_schema_column, load_schema, schema_column, tfs


def expect_failure(lake, ds, columns, *opts, mention=None):
    """An import that must fail and leave the dataset exactly as it was."""
    before = lake.snapshot(ds)
    p = lake.import_(ds, columns, *opts, check=False)
    assert p.returncode != 0, f"import of {list(columns)} should have failed:\n{p.stdout}{p.stderr}"
    assert p.stderr.strip(), "a failed import must say why on stderr"
    if mention:
        assert mention in p.stderr, f"stderr should mention {mention!r}: {p.stderr!r}"
    after = lake.snapshot(ds)
    assert after == before, "a failed import changed the dataset"
    return p


def test_append_and_schema_errors(lake, mount):
    rng = np.random.default_rng(3)
    ds = "appendix"
    lake.create(ds)
    feat1 = rng.standard_normal((700, 3)).astype("<f4")
    label1 = rng.integers(0, 1000, size=700).astype("<i8")
    lake.import_(ds, {"feat": feat1, "label": label1}, "--chunk-size", "4k", "-m", "first")
    info1 = lake.info(ds)
    c1 = info1["commit"]
    assert re.fullmatch(r"[0-9a-f]{64}", c1)
    assert info1["rows"] == 700 and info1["message"] == "first"

    # rows per chunk (4k / 12 bytes) does not divide 700 or 555: the append continues a
    # partial last chunk
    feat2 = rng.standard_normal((555, 3)).astype("<f4")
    label2 = rng.integers(0, 1000, size=555).astype("<i8")
    lake.import_(ds, {"feat": feat2, "label": label2}, "-m", "second")
    info2 = lake.info(ds)
    c2 = info2["commit"]
    assert re.fullmatch(r"[0-9a-f]{64}", c2) and c2 != c1
    assert info2["parents"] == [c1]
    assert info2["rows"] == 1255 and info2["message"] == "second"
    fcol = schema_column(info2, "feat")
    assert fcol["rows"] == 1255
    # --chunk-size applies to the column's creation and sticks
    assert fcol["chunk_bytes"] == schema_column(info1, "feat")["chunk_bytes"] <= 4096

    # older versions stay reachable by commit id
    assert lake.info(ds, ref=c1) == info1
    assert lake.info(ds, ref=c2) == info2
    rc, out, err = tfs("info", lake.ds_url(ds), "--ref", "no-such-ref", "--json")
    assert rc != 0 and err.strip()

    # a new column with exactly the dataset's row count is fine
    extra = rng.integers(0, 256, size=(1255, 2), dtype=np.uint8)
    lake.import_(ds, {"extra": extra})
    info3 = lake.info(ds)
    assert info3["commit"] != c2 and info3["parents"] == [c2] and info3["rows"] == 1255
    assert sorted(c["name"] for c in info3["columns"]) == ["extra", "feat", "label"]

    # dtype mismatch
    expect_failure(lake, ds, {"feat": rng.standard_normal((10, 3)),  # float64
                              "label": np.zeros(10, "<i8"), "extra": np.zeros((10, 2), "u1")},
                   mention="feat")
    expect_failure(lake, ds, {"feat": np.zeros((10, 3), "<f4"), "label": np.zeros(10, "<i4"),
                              "extra": np.zeros((10, 2), "u1")}, mention="label")
    # per-row shape mismatch
    expect_failure(lake, ds, {"feat": np.zeros((10, 4), "<f4"), "label": np.zeros(10, "<i8"),
                              "extra": np.zeros((10, 2), "u1")}, mention="feat")
    expect_failure(lake, ds, {"feat": np.zeros((10, 3), "<f4"), "label": np.zeros((10, 1), "<i8"),
                              "extra": np.zeros((10, 2), "u1")}, mention="label")
    # row counts differ between the files of one call
    expect_failure(lake, ds, {"feat": np.zeros((10, 3), "<f4"), "label": np.zeros(11, "<i8"),
                              "extra": np.zeros((10, 2), "u1")})
    # appending to only some columns would leave them with different row counts
    expect_failure(lake, ds, {"feat": np.zeros((10, 3), "<f4")})
    # a new column whose row count is not the dataset's
    expect_failure(lake, ds, {"late": np.zeros(1000, "<f4")}, mention="late")
    # a mismatch in one column fails the whole call, the valid columns included
    expect_failure(lake, ds, {"feat": np.zeros((10, 3), "<f4"), "label": np.zeros(10, "<i8"),
                              "extra": np.zeros((10, 2), "<i2")}, mention="extra")

    assert lake.info(ds) == info3
    m = mount(lake)
    main = m.path / ds / "main"
    schema = load_schema(main / "schema.json")
    assert schema == info3
    want = {"feat": np.concatenate([feat1, feat2]), "label": np.concatenate([label1, label2]),
            "extra": extra}
    for name, src in want.items():
        check_column_file(main / f"{name}.npy", src)
        check_schema_column(schema_column(schema, name), src, name)


def test_append_many_small(lake, mount):
    """Several small appends, each smaller than a chunk, then one larger than several."""
    rng = np.random.default_rng(4)
    ds = "trickle"
    lake.create(ds)
    parts = []
    commits = []
    for i, n in enumerate((1, 2, 130, 7, 1000, 3)):
        a = rng.integers(-100, 100, size=(n, 5)).astype("<i4")
        parts.append(a)
        # --chunk-size only matters for the call that creates the column
        lake.import_(ds, {"x": a}, *(["--chunk-size", "1k"] if i == 0 else []))
        commits.append(lake.info(ds)["commit"])
    assert len(set(commits)) == len(commits)
    m = mount(lake)
    src = np.concatenate(parts)
    check_column_file(m.path / ds / "main" / "x.npy", src)
    schema = load_schema(m.path / ds / "main" / "schema.json")
    check_schema_column(schema_column(schema, "x"), src, "x")
    assert schema["commit"] == commits[-1]


def test_an_append_onto_a_damaged_last_chunk_fails_once(lake, tmp_path):
    """Rows appended a row at a time (JSON Lines) continue the partial last chunk, read back
    from the lake: when it fails its checksum the import fails naming it, changes nothing, and
    is not run again as if a source's bytes had been damaged on the way."""
    ds = "tail"
    lake.create(ds)
    (tmp_path / "a.jsonl").write_text("".join('{"i": %d, "s": "x%d"}\n' % (i, i)
                                              for i in range(10)))
    p = lake.import_(ds, {}, "--jsonl", str(tmp_path / "a.jsonl"))
    assert p.returncode == 0, p.stderr
    for _, path in lake.object_files(ds):
        raw = bytearray(path.read_bytes())
        if raw[6] == 1:  # a chunk: each column's only, partial, chunk
            raw[len(raw) - 2] ^= 0x40
            path.chmod(0o644)
            path.write_bytes(bytes(raw))
    p = expect_failure(lake, ds, {}, "--jsonl", str(tmp_path / "a.jsonl"),
                       mention="cannot read the last chunk of column")
    assert "damaged on the way" not in p.stderr, p.stderr
