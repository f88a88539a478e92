# SPDX-License-Identifier: MIT
"""Packed token views (views/pack=S,...): documents of a token column packed into samples of
S + 1 tokens, equal byte for byte to a plain-Python reference (packref.py) for seeds, sizes,
eos, shards and resumes; every token of every document once per epoch; a bad request refused
with its reason."""

import os

import numpy as np
import pytest

from conftest import run_proc, write_dir
from packref import pack

VIEW_FILES = ("tokens.npy", "segments.npy", "doc.npy")


def documents(seed, n, dtype, longest=60):
    """n documents of 0 to `longest` tokens (some empty, one longer than any sample)."""
    rng = np.random.default_rng(seed)
    docs = [rng.integers(1, 30000, int(rng.integers(0, longest))).astype(dtype)
            for _ in range(n)]
    docs[3] = np.zeros(0, dtype)
    docs[5] = rng.integers(1, 30000, 300).astype(dtype)
    return docs


def view_name(seq, **kw):
    return ",".join([f"pack={seq}"] + [f"{k}={v}" for k, v in kw.items()])


def load(m, ds, name):
    d = m.path / ds / "main" / "views" / name
    return [np.load(d / f) for f in VIEW_FILES]


@pytest.fixture
def tokens_lake(lake, tmp_path):
    docs16 = documents(1, 80, np.uint16)
    docs32 = documents(2, 50, np.int32)
    lake.build("t", {"tok": write_dir(tmp_path / "d16", docs16)})
    lake.build("u", {"tok": write_dir(tmp_path / "d32", docs32),
                     "other": write_dir(tmp_path / "o", docs16[:50])})
    return lake, docs16, docs32


@pytest.mark.parametrize("ds,seq,kw", [
    ("t", 16, {}),
    ("t", 16, {"eos": 0}),
    ("t", 1, {"eos": 7, "seed": 3}),
    ("t", 64, {"seed": 11, "epoch": 2}),
    ("t", 7, {"seed": 5, "eos": 0, "rank": 1, "world": 3}),
    ("t", 7, {"seed": 5, "eos": 0, "rank": 2, "world": 3, "drop_last": 1}),
    ("t", 9, {"seed": 9, "rank": 3, "world": 4, "stride": 5, "start": 7}),
    ("u", 33, {"col": "tok", "eos": 2, "seed": 1}),
])
def test_pack_equals_the_reference(tokens_lake, mount, ds, seq, kw):
    lake, docs16, docs32 = tokens_lake
    m = mount(lake)
    docs = docs16 if ds == "t" else docs32
    ref_kw = {k: v for k, v in kw.items() if k != "col"}
    if "drop_last" in ref_kw:
        ref_kw["drop_last"] = bool(ref_kw["drop_last"])
    want = pack(docs, seq, **ref_kw)[:3]
    got = load(m, ds, view_name(seq, **kw))
    for name, w, g in zip(VIEW_FILES, want, got):
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert np.array_equal(g, w), name


def test_every_token_once_per_epoch_across_ranks(tokens_lake, mount):
    """Unshuffled, the ranks' samples but their last token, rank after rank, are the stream
    (documents and eos in column order) from its start: every token once, in order."""
    lake, docs, _ = tokens_lake
    m = mount(lake)
    seq, world = 8, 4
    stream = np.concatenate([np.append(d, 0) for d in docs])
    n = (len(stream) - 1) // seq
    rows = [load(m, "t", view_name(seq, eos=0, rank=r, world=world, drop_last=1))[0]
            for r in range(world)]
    assert all(len(t) == n // world for t in rows)
    got = np.concatenate([t[:, :-1] for t in rows]).ravel()
    assert np.array_equal(got, stream[:len(got)])
    for t in rows:  # one token of overlap: a sample's last is the next one's first
        assert np.array_equal(t[:-1, -1], t[1:, 0])


def sample_ids(m, name):
    return [tuple(x) for x in load(m, "t", name)[2]]


def test_resume_at_another_world_size_reads_every_sample_once(tokens_lake, mount):
    """stride=B: 8 ranks read 2 batches of 3 samples each, the job stops; it resumes on 3 ranks
    with start=48: every sample of the epoch is read once (samples named by doc.npy)."""
    lake, docs, _ = tokens_lake
    m = mount(lake)
    every = sample_ids(m, "pack=5,seed=21,eos=0")
    assert len(set(every)) == len(every) > 200
    read = []
    for r in range(8):
        read += sample_ids(m, f"pack=5,seed=21,eos=0,rank={r},world=8,stride=3")[:6]
    for r in range(3):
        read += sample_ids(m, f"pack=5,seed=21,eos=0,rank={r},world=3,stride=3,start=48,"
                              f"drop_last=1")
    left = len(every) - 48
    assert len(read) == 48 + left - left % 3
    assert len(set(read)) == len(read)
    assert set(read) <= set(every)


@pytest.mark.parametrize("name,why", [
    ("pack=0", "pack=0"),
    ("pack=8,col=nope", "no column nope"),
    ("pack=8", "token columns; name one"),
    ("pack=8,col=tok,eos=70000", "does not fit"),
    ("pack=8,col=tok,block=2", "block= does not apply"),
    ("pack=8,col=tok,where=tok<3", "not a real scalar"),
    ("pack=8,col=tok,where=nope<3", "no column 'nope'"),
    ("seed=1,eos=3", "belong to pack="),
])
def test_bad_pack_names_are_refused_with_the_reason(tokens_lake, mount, name, why):
    lake, _, _ = tokens_lake
    m = mount(lake)
    ds = "u"
    if "70000" in name:
        ds = "t"
        name = name.replace("col=tok,", "")
    with pytest.raises(FileNotFoundError):
        (m.path / ds / "main" / "views" / name / "tokens.npy").stat()
    errors = (m.path / ".tensorfs" / "errors").read_text()
    assert why in errors, errors
    # the daemon keeps serving
    assert load(m, "t", "pack=4")[0].shape[1] == 5


@pytest.mark.parametrize("vocab,dtype", [(50257, np.uint16), (128256, np.uint32)])
def test_jsonl_tokens_field_is_a_token_column(lake, mount, tmp_path, vocab, dtype):
    """--jsonl FILE --tokens FIELD: the field's lists of ids are a token column, uint16 when
    every id fits, else uint32; the other fields are columns as ever; it packs."""
    import json
    rng = np.random.default_rng(vocab)
    docs = [rng.integers(0, vocab, int(rng.integers(0, 40))) for _ in range(70)]
    docs[4] = np.zeros(0, np.int64)
    docs[9][0] = vocab - 1
    with open(tmp_path / "c.jsonl", "w") as f:
        for i, d in enumerate(docs):
            f.write(json.dumps({"id": i, "ids": d.tolist(), "text": f"doc {i}"}) + "\n")
    lake.create("j")
    lake.import_("j", {}, "--jsonl", tmp_path / "c.jsonl", "--tokens", "ids")
    m = mount(lake)
    got = load(m, "j", "pack=16,col=ids,eos=1,seed=3")
    want = pack([d.astype(dtype) for d in docs], 16, eos=1, seed=3)[:3]
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("rows,why", [
    ([{"ids": [1, -2]}], "is not a token id"),
    ([{"ids": [1, 2**33]}], "is not a token id"),
    ([{"ids": "text"}], "not a list of integers"),
    ([{"other": [1]}], "no such field"),
])
def test_jsonl_tokens_refused_with_the_reason(lake, tmp_path, rows, why):
    import json
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lake.create("b")
    p = lake.import_("b", {}, "--jsonl", tmp_path / "b.jsonl", "--tokens", "ids", check=False)
    assert p.returncode != 0 and why in p.stderr, p.stderr


@pytest.fixture
def scored_lake(lake, tmp_path):
    """Documents with a quality score per document, as a filter or a query would pick them."""
    docs = documents(7, 120, np.uint16)
    quality = np.random.default_rng(8).random(len(docs))
    lake.build("q", {"tok": write_dir(tmp_path / "dq", docs), "quality": quality})
    return lake, docs, quality


@pytest.mark.parametrize("where,keep,kw", [
    ("quality>0.5", lambda q: q > 0.5, {}),
    ("quality>0.5", lambda q: q > 0.5, {"seed": 3, "eos": 0}),
    ("quality<0.3", lambda q: q < 0.3, {"seed": 2, "epoch": 1, "eos": 1, "rank": 1,
                                        "world": 2}),
    ("quality>2", lambda q: q > 2, {"eos": 0}),
])
def test_pack_where_packs_only_the_documents_it_keeps(scored_lake, mount, where, keep, kw):
    """where= over a scalar column picks the documents before the pack: the files equal the
    reference packing those rows alone, doc.npy names rows of the column, none kept is empty."""
    lake, docs, quality = scored_lake
    m = mount(lake)
    rows = np.flatnonzero(keep(quality))
    want = pack(docs, 10, rows=rows, **kw)[:3]
    got = load(m, "q", view_name(10, where=where, **kw))
    for name, w, g in zip(VIEW_FILES, want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.shape, w.shape)
        assert np.array_equal(g, w), name
    assert set(got[2][:, 0]) <= set(rows)
    if not len(rows):
        assert got[0].shape == (0, 11)


def test_view_path_names_pack_views(scored_lake, mount):
    """tensorfs.view_path(..., pack=S, eos=, col=, where=) names the same view as the mount's
    grammar; keys that do not go with pack= are refused before the mount is asked."""
    import tensorfs

    lake, docs, quality = scored_lake
    m = mount(lake)
    main = m.path / "q" / "main"
    vp = tensorfs.view_path(main, pack=10, eos=0, col="tok", seed=3, rank=1, world=2,
                            where="quality > 0.5")
    got = np.load(os.path.join(vp, "tokens.npy"))
    want = pack(docs, 10, rows=np.flatnonzero(quality > 0.5), eos=0, seed=3, rank=1, world=2)
    assert np.array_equal(got, want[0])
    for kw in ({"pack": 0}, {"pack": 8, "block": 2}, {"eos": 0}, {"col": "tok"},
               {"pack": 8, "col": "a/b"}, {"pack": 8, "eos": -1}):
        with pytest.raises(ValueError):
            tensorfs.view_path(main, **kw)


def test_pack_a_saved_query(scored_lake, mount):
    """queries/NAME/views/pack=S,...: the documents a saved query selected, in its order (or
    shuffled), packed; the control file stages them; where= there is refused."""
    from tensorfs.staging import Stager

    lake, docs, quality = scored_lake
    run_proc(["query", "save", lake.ds_url("q"), "best",
              "SELECT rowid FROM t WHERE quality > 0.6 ORDER BY quality DESC"], check=True)
    rows = sorted(np.flatnonzero(quality > 0.6), key=lambda i: -quality[i])
    m = mount(lake)
    views = m.path / "q" / "main" / "queries" / "best" / "views"
    for kw in ({"eos": 0}, {"eos": 0, "seed": 5, "rank": 1, "world": 2}):
        name = view_name(9, **kw)
        want = pack(docs, 9, rows=rows, **kw)[:3]
        got = [np.load(views / name / f) for f in VIEW_FILES]
        for f, w, g in zip(VIEW_FILES, want, got):
            assert g.shape == w.shape and np.array_equal(g, w), (name, f)
    st = Stager(m.path, "q/main/queries/best/views/pack=9,eos=0,seed=5", ["tokens", "doc"],
                batch_size=4)
    try:
        want = pack(docs, 9, rows=rows, eos=0, seed=5)
        b = next(iter(st.batches()))
        assert np.array_equal(b["tokens"], want[0][:4]) and np.array_equal(b["doc"], want[2][:4])
        b.release()
    finally:
        st.close()
    with pytest.raises(FileNotFoundError):
        (views / "pack=9,where=quality>0.9" / "tokens.npy").stat()
    assert "takes no where=" in (m.path / ".tensorfs" / "errors").read_text()


@pytest.mark.parametrize("dtype,np_dtype", [(None, np.uint16), ("int32", np.int32),
                                            ("int64", np.int64)])
def test_pack_view_staged_by_the_control_file(tokens_lake, mount, dtype, np_dtype):
    """A host stream over a pack view: `next` batches of (B, S+1) tokens in the dtype asked
    for, with their segments and docs, equal to the view's files in order; stage by rows too."""
    from tensorfs.staging import Stager

    lake, _, _ = tokens_lake
    m = mount(lake)
    name = "pack=16,eos=0,seed=5,rank=1,world=2"
    want_t, want_s, want_d = load(m, "t", name)
    st = Stager(m.path, f"t/main/views/{name}", ["tokens", "segments", "doc"], batch_size=7,
                dtype=dtype)
    try:
        assert st.rows == len(want_t)
        got = []
        for b in st.batches():
            assert b["tokens"].dtype == np_dtype and b["tokens"].shape[1] == 17
            got.append((np.array(b["tokens"]), np.array(b["segments"]), np.array(b["doc"])))
            b.release()
        for i, w in enumerate((want_t, want_s, want_d)):
            assert np.array_equal(np.concatenate([g[i] for g in got]), w.astype(
                np_dtype if i == 0 else w.dtype))
        b = st.stage([5, 0, 3])
        assert np.array_equal(b["tokens"], want_t[[5, 0, 3]].astype(np_dtype))
        b.release()
    finally:
        st.close()


def test_pack_stream_converts_ids_exactly_or_refuses(lake, mount, tmp_path):
    """Tokens staged as int32 or int64 keep every value: negative int16 ids stay negative, and a
    uint32 id past 2^31 - 1 staged as int32 is an error naming the fix (int64 holds it)."""
    from tensorfs.staging import Stager, StagingError

    neg = [np.array([-5, 3, -32768, 7][: 1 + i % 4], np.int16) for i in range(20)]
    big = [np.array([1, 2**31 + i, 4][: 1 + i % 3], np.uint32) for i in range(20)]
    lake.build("neg", {"tok": write_dir(tmp_path / "neg", neg)})
    lake.build("big", {"tok": write_dir(tmp_path / "big", big)})
    m = mount(lake)
    for ds, docs in (("neg", neg), ("big", big)):
        for dtype in ("int32", "int64"):
            st = Stager(m.path, f"{ds}/main/views/pack=6,eos=0", ["tokens"], batch_size=4,
                        dtype=dtype)
            try:
                if ds == "big" and dtype == "int32":
                    with pytest.raises(StagingError, match="dtype=int64 holds every id"):
                        next(iter(st.batches()))
                    continue
                b = next(iter(st.batches()))
                want = pack([d.astype(np.int64) for d in docs], 6, eos=0)[0][:4]
                assert np.array_equal(np.asarray(b["tokens"], np.int64), want), (ds, dtype)
                b.release()
            finally:
                st.close()


def test_torch_dataset_widens_unsigned_token_ids(lake, mount, tmp_path):
    """tensorfs.torch.Dataset over pack views: uint16 tokens come as int32 tensors and uint32
    as int64 (torch has no such unsigned tensors, and embeddings take signed ids), every value
    kept, through a DataLoader."""
    torch = pytest.importorskip("torch")
    import tensorfs
    import tensorfs.torch

    d16 = documents(9, 40, np.uint16)
    d32 = [np.array([1, 2**32 - 1 - i, 5], np.uint32)[: 1 + i % 3] for i in range(40)]
    lake.build("a", {"tok": write_dir(tmp_path / "a", d16)})
    lake.build("b", {"tok": write_dir(tmp_path / "b", d32)})
    m = mount(lake)
    for ds, dtype in (("a", torch.int32), ("b", torch.int64)):
        vp = tensorfs.view_path(m.path / ds / "main", pack=8, eos=0, seed=1)
        loader = torch.utils.data.DataLoader(tensorfs.torch.Dataset(vp, ["tokens", "doc"]),
                                             batch_size=5)
        got = torch.cat([b["tokens"] for b in loader])
        want = np.load(os.path.join(vp, "tokens.npy"))
        assert got.dtype == dtype and np.array_equal(got.numpy(), want.astype(np.int64)), ds


def test_pack_stream_refuses_unknown_columns_and_dtypes(tokens_lake, mount):
    from tensorfs.staging import Stager, StagingError

    lake, _, _ = tokens_lake
    m = mount(lake)
    with pytest.raises(StagingError, match="tokens, segments, doc"):
        Stager(m.path, "t/main/views/pack=8", ["tok"])
    with pytest.raises(StagingError, match="int32 or int64"):
        Stager(m.path, "t/main/views/pack=8", ["tokens"], dtype="float32")
    with pytest.raises(StagingError, match="pack= view's tokens"):
        Stager(m.path, "t/main", ["tok"], dtype="int32")


@pytest.mark.parametrize("dtype,vocab,want", [(np.int64, 50000, np.uint16),
                                              (np.int32, 100000, np.uint32),
                                              (np.uint8, 200, np.uint16)])
def test_directory_of_token_arrays_is_narrowed(lake, mount, tmp_path, dtype, vocab, want):
    """COL=DIR/ --tokens COL: 1-D integer arrays become a token column, uint16 when every id
    fits, else uint32, even when every document has the same length."""
    rng = np.random.default_rng(vocab)
    docs = [rng.integers(0, vocab, 12).astype(dtype) for _ in range(30)]
    docs[2][0] = vocab - 1
    lake.create("n")
    lake.import_("n", {"tok": write_dir(tmp_path / "d", docs)}, "--tokens", "tok")
    m = mount(lake)
    got = load(m, "n", "pack=8,eos=3")[0]
    want_t = pack([d.astype(want) for d in docs], 8, eos=3)[0]
    assert got.dtype == want and np.array_equal(got, want_t)


@pytest.mark.parametrize("arrays,why", [
    ([np.array([1, -1])], "is not a token id"),
    ([np.array([1, 2**33])], "is not a token id"),
    ([np.array([[1, 2]])], "1-D integer arrays"),
    ([np.array([1.5])], "1-D integer arrays"),
])
def test_bad_token_directories_are_refused(lake, tmp_path, arrays, why):
    lake.create("b")
    p = lake.import_("b", {"tok": write_dir(tmp_path / "d", arrays)}, "--tokens", "tok",
                     check=False)
    assert p.returncode != 0 and why in p.stderr, p.stderr


def test_eos_recorded_at_import_is_the_views_default(lake, mount, tmp_path):
    """--eos ID records a token column's end-of-document id (schema.json "eos"): its pack views
    use it unless their name says another; a second import must agree, an id the dtype cannot
    hold and a column that is no token column are refused, and nothing changes."""
    import json
    docs = documents(4, 40, np.uint16)
    lake.create("e")
    lake.import_("e", {"tok": write_dir(tmp_path / "d", docs)}, "--tokens", "tok", "--eos", "9")
    info = lake.info("e")
    assert [c for c in info["columns"] if c["name"] == "tok"][0]["eos"] == 9
    m = mount(lake)
    got = load(m, "e", "pack=12,seed=2")
    for g, w in zip(got, pack(docs, 12, eos=9, seed=2)[:3]):
        assert np.array_equal(g, w)
    # the view's own eos= wins
    for g, w in zip(load(m, "e", "pack=12,seed=2,eos=5"), pack(docs, 12, eos=5, seed=2)[:3]):
        assert np.array_equal(g, w)
    # the same id again: appended; another, or one uint16 cannot hold: refused, unchanged
    lake.import_("e", {"tok": write_dir(tmp_path / "d2", docs[:3])}, "--tokens", "tok",
                 "--eos", "9")
    before = lake.snapshot("e")
    for eos, why in (("8", "token column tok has eos 9, not 8"),):
        p = lake.import_("e", {"tok": write_dir(tmp_path / "d3", docs[:2])}, "--tokens", "tok",
                         "--eos", eos, check=False)
        assert p.returncode != 0 and why in p.stderr, p.stderr
    lake.create("f")
    p = lake.import_("f", {"tok": write_dir(tmp_path / "d4", docs)}, "--tokens", "tok",
                     "--eos", "70000", check=False)
    assert p.returncode != 0 and "--eos 70000 does not fit column tok's dtype <u2" in p.stderr
    assert lake.snapshot("e") == before and lake.info("f")["rows"] == 0
    # --eos without a token column to put it on is a usage error
    p = lake.import_("f", {"x": write_dir(tmp_path / "d5", docs)}, "--eos", "1", check=False)
    assert p.returncode == 2 and "--eos records" in p.stderr
    # JSON Lines: the token field's column
    with open(tmp_path / "c.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps({"ids": d.tolist()}) + "\n")
    lake.create("j")
    lake.import_("j", {}, "--jsonl", tmp_path / "c.jsonl", "--tokens", "ids:uint16", "--eos",
                 "0")
    assert [c for c in lake.info("j")["columns"] if c["name"] == "ids"][0]["eos"] == 0
    # parts of a write session must agree too: the commit is refused and nothing changes
    lake.create("s")
    for part, eos in ((0, "9"), (1, "7")):
        run_proc(["import", lake.ds_url("s"), "--session", "w", "--part", str(part),
                  f"tok={write_dir(tmp_path / f's{part}', docs)}", "--tokens", "tok",
                  "--eos", eos], check=True)
    before = lake.snapshot("s")
    p = run_proc(["commit", lake.ds_url("s"), "--session", "w", "--parts", "2"])
    assert p.returncode != 0 and "token column tok has eos 9, not 7 (a part's)" in p.stderr, \
        p.stderr
    assert lake.snapshot("s") == before and lake.info("s")["rows"] == 0
