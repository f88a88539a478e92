# SPDX-License-Identifier: MIT
"""Megatron-LM's indexed dataset in and out: `import --megatron PREFIX` and `export URL COL
--megatron PREFIX`. The files are written here as megatron/core/datasets/indexed_dataset.py's
_IndexWriter writes them (header, version 1, dtype code, sequence and document counts, int32
lengths, int64 pointers, int64 document indices) and read back as its _IndexReader reads
them: a round trip gives the same bytes, a damaged index is refused with the dataset unchanged,
and the sequences pack like any token column."""
import re
import struct

import numpy as np
import pytest

from conftest import run_proc
from packref import pack

CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5, np.float64: 6,
         np.float32: 7, np.uint16: 8}


def write_megatron(prefix, seqs, dtype, doc_ends=None, modes=None):
    """_IndexWriter's layout; doc_ends: the document index (default: a document a sequence)."""
    lengths = [len(s) for s in seqs]
    pointers, at = [], 0
    for n in lengths:
        pointers.append(at)
        at += n * np.dtype(dtype).itemsize
    docs = list(range(len(seqs) + 1)) if doc_ends is None else doc_ends
    with open(f"{prefix}.bin", "wb") as f:
        for s in seqs:
            f.write(np.asarray(s, dtype).tobytes())
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", CODES[dtype]))
        f.write(struct.pack("<Q", len(seqs)))
        f.write(struct.pack("<Q", len(docs)))
        f.write(np.array(lengths, np.int32).tobytes())
        f.write(np.array(pointers, np.int64).tobytes())
        f.write(np.array(docs, np.int64).tobytes())
        if modes is not None:
            f.write(np.array(modes, np.int8).tobytes())


def read_megatron(prefix):
    """_IndexReader's reading: (dtype code, sequences, document index)."""
    raw = open(f"{prefix}.idx", "rb").read()
    assert raw[:9] == b"MMIDIDX\x00\x00" and struct.unpack_from("<Q", raw, 9)[0] == 1
    code = raw[17]
    n, d = struct.unpack_from("<QQ", raw, 18)
    lengths = np.frombuffer(raw, np.int32, n, 34)
    pointers = np.frombuffer(raw, np.int64, n, 34 + 4 * n)
    docs = np.frombuffer(raw, np.int64, d, 34 + 12 * n)
    dtype = {v: k for k, v in CODES.items()}[code]
    bin_ = np.fromfile(f"{prefix}.bin", np.uint8)
    seqs = [bin_[p:p + l * np.dtype(dtype).itemsize].view(dtype)
            for p, l in zip(pointers, lengths)]
    return code, seqs, docs


def corpus(seed, n, dtype, vocab):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, vocab, int(rng.integers(0, 50))).astype(dtype) for _ in range(n)]
    seqs[2] = np.zeros(0, dtype)
    return seqs


@pytest.mark.parametrize("dtype,vocab,docs", [
    (np.uint16, 50257, None),
    (np.int32, 128256, None),
    (np.uint16, 32000, "grouped"),
])
def test_round_trip_is_byte_identical(lake, mount, tmp_path, dtype, vocab, docs):
    seqs = corpus(1, 120, dtype, vocab)
    doc_ends = None
    if docs:  # several sequences a document, and an empty document
        doc_ends = [0, 3, 3, 10, 50, 51, 120]
    src = tmp_path / "src"
    write_megatron(src, seqs, dtype, doc_ends)
    lake.create("m")
    p = lake.import_("m", {}, "--megatron", src)
    assert "imported 120 rows" in p.stdout, p.stdout
    out = tmp_path / "out"
    run_proc(["export", lake.ds_url("m"), "tokens", "--megatron", out], check=True)
    for ext in (".bin", ".idx"):
        assert (tmp_path / f"out{ext}").read_bytes() == (tmp_path / f"src{ext}").read_bytes(), ext
    code, back, d = read_megatron(out)
    assert code == CODES[dtype] and len(back) == len(seqs)
    assert all(np.array_equal(a, b) for a, b in zip(back, seqs))
    # the sequences are a token column: ids unsigned, packed like any other
    m = mount(lake)
    tok = np.load(m.path / "m" / "main" / "views" / "pack=32,eos=0,seed=2" / "tokens.npy")
    want = pack([s.astype(np.uint16 if dtype == np.uint16 else np.uint32) for s in seqs], 32,
                eos=0, seed=2)[0]
    assert np.array_equal(tok, want)


def test_int64_ids_are_narrowed_when_they_fit(lake, tmp_path):
    seqs = corpus(2, 20, np.int64, 70000)
    write_megatron(tmp_path / "a", seqs, np.int64)
    lake.create("w")
    lake.import_("w", {}, "--megatron", tmp_path / "a", "--column", "ids")
    info = run_proc(["info", lake.ds_url("w")], check=True).stdout
    assert re.search(r"^\s*ids\s+<u4\s+ragged, rank 1", info, re.M), info
    write_megatron(tmp_path / "b", [np.array([1, 2**33], np.int64)], np.int64)
    lake.create("x")
    p = lake.import_("x", {}, "--megatron", tmp_path / "b", check=False)
    assert p.returncode != 0 and "does not fit uint32" in p.stderr, p.stderr
    # uint32 ids are exported as Megatron-LM's int32: one past 2^31 - 1 is refused, no file left
    write_megatron(tmp_path / "c", [np.array([1, 2], np.int64), np.array([7, 2**31], np.int64)],
                   np.int64)
    lake.create("y")
    lake.import_("y", {}, "--megatron", tmp_path / "c")
    p = run_proc(["export", lake.ds_url("y"), "tokens", "--megatron", tmp_path / "out"])
    assert p.returncode != 0 and "token id 2147483648 (token 3) does not fit" in p.stderr, \
        p.stderr
    assert not list(tmp_path.glob("out*")), list(tmp_path.glob("out*"))


@pytest.mark.parametrize("damage,why", [
    ("magic", "no MMIDIDX header"),
    ("version", "index version 2"),
    ("code", "holds no token ids"),
    ("truncated", "do not fit"),
    ("pointer", "lies outside"),
    ("negative", "negative token id"),
    ("docs", "out of order or range"),
    ("modes", "multimodal"),
])
def test_damaged_index_is_refused_and_nothing_is_written(lake, tmp_path, damage, why):
    seqs = corpus(3, 30, np.int32, 1000)
    if damage == "negative":
        seqs[5][0] = -4
    write_megatron(tmp_path / "c", seqs, np.float32 if damage == "code" else np.int32,
                   doc_ends=[0, 5, 3, 30] if damage == "docs" else None,
                   modes=[0] * 30 if damage == "modes" else None)
    idx = bytearray((tmp_path / "c.idx").read_bytes())
    if damage == "magic":
        idx[0:1] = b"X"
    elif damage == "version":
        idx[9:17] = struct.pack("<Q", 2)
    elif damage == "truncated":
        idx = idx[:60]
    elif damage == "pointer":
        struct.pack_into("<q", idx, 34 + 4 * 30 + 8 * 7, 10**9)
    (tmp_path / "c.idx").write_bytes(bytes(idx))
    lake.create("d")
    before = sorted(p.name for p in (lake.root / "d").rglob("*"))
    p = lake.import_("d", {}, "--megatron", tmp_path / "c", check=False)
    assert p.returncode != 0 and why in p.stderr, p.stderr
    assert "unchanged" in p.stderr
    assert sorted(p.name for p in (lake.root / "d").rglob("*")) == before
