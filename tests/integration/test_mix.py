# SPDX-License-Identifier: MIT
"""Weighted mixtures: `tensorfs mix create|update|ls|show|log` records versions pinned to
commits; the mount's mixes/NAME/views/pack=S,.../ interleaves the sources' packed samples by
Megatron-LM's blending rule (source.npy names each sample's source), equal to a plain-Python
reference; shares within one sample of the weights at every prefix; shards never repeat a
sample across ranks; a small source repeats."""
import numpy as np
import pytest

from conftest import flip_byte, parse_object_header, run_proc, write_dir
from packref import blend, pack

FILES = ("tokens.npy", "segments.npy", "doc.npy", "source.npy")


def docs(seed, n, lo, hi):
    rng = np.random.default_rng(seed)
    return [rng.integers(lo, hi, int(rng.integers(0, 50))).astype(np.uint16) for _ in range(n)]


@pytest.fixture
def mixed(lake, tmp_path):
    srcs = {"web": docs(1, 120, 1, 1000), "code": docs(2, 40, 1000, 2000),
            "math": docs(3, 8, 2000, 3000)}
    for name, d in srcs.items():
        lake.build(name, {"tok": write_dir(tmp_path / name, d)})
    return lake, srcs


def mix(lake, *args, check=True):
    return run_proc(["mix", *args[:1], lake.url, *args[1:]], check=check)


def load(m, name, view):
    d = m.path / "mixes" / name / "views" / view
    return [np.load(d / f) for f in FILES]


def test_mixture_equals_the_reference(mixed, mount):
    lake, srcs = mixed
    weights = {"web": 0.6, "code": 0.3, "math": 0.1}
    mix(lake, "create", "lm", *[f"{k}={v}" for k, v in weights.items()], "--seed", "9")
    m = mount(lake)
    for view, kw in (("pack=16,eos=0", {}), ("pack=16,eos=0,epoch=0", {}),
                     ("pack=16,eos=0,epoch=1", {"epoch": 1}),
                     ("pack=16,eos=0,rank=1,world=3", {"rank": 1, "world": 3})):
        got = load(m, "lm", view)
        per = {k: pack(d, 16, eos=0, seed=9) for k, d in srcs.items()}
        names = list(weights)
        order = blend([weights[k] for k in names], [per[k][3] for k in names],
                      kw.get("epoch", 0))
        from packref import shard
        rows = shard(list(range(len(order))), kw.get("rank", 0), kw.get("world", 1))
        want_tok = np.stack([per[names[order[j][0]]][0][order[j][1]] for j in rows])
        want_seg = np.stack([per[names[order[j][0]]][1][order[j][1]] for j in rows])
        want_doc = np.stack([per[names[order[j][0]]][2][order[j][1]] for j in rows])
        want_src = np.array([order[j][0] for j in rows], np.uint8)
        for g, w in zip(got, (want_tok, want_seg, want_doc, want_src)):
            assert g.dtype == w.dtype and np.array_equal(g, w), view


@pytest.mark.parametrize("dtypes,want", [
    ((np.uint16, np.uint32), np.uint32),
    ((np.uint16, np.int32), np.int32),
    ((np.int16, np.uint32), np.int64),
    ((np.uint8, np.uint16), np.uint16),
])
def test_sources_of_other_token_dtypes_are_widened(lake, mount, tmp_path, dtypes, want):
    """Sources whose token columns differ in dtype (uint16 where every id fits, uint32 or int32
    elsewhere) mix into the dtype numpy promotes them to, every value kept, per the reference;
    uint64 with a signed source has none and the view is refused with the reason."""
    vocab = {np.uint8: 200, np.uint16: 60000, np.int16: 30000, np.uint32: 100000,
             np.int32: 100000}
    srcs = {}
    for k, dt in enumerate(dtypes):
        rng = np.random.default_rng(k)
        d = [rng.integers(vocab[dt] // 2, vocab[dt], int(rng.integers(1, 40))).astype(dt)
             for _ in range(30)]
        if np.dtype(dt).kind == "i":  # signed ids stay negative when widened
            d = [-x if i % 2 else x for i, x in enumerate(d)]
        srcs[f"s{k}"] = d
        lake.create(f"s{k}")
        lake.import_(f"s{k}", {"tok": write_dir(tmp_path / f"s{k}", d)})
        assert [c for c in lake.info(f"s{k}")["columns"] if c["name"] == "tok"][0]["dtype"] \
            .endswith(np.dtype(dt).str[1:])
    mix(lake, "create", "x", "s0=0.5", "s1=0.5", "--seed", "4")
    m = mount(lake)
    got = load(m, "x", "pack=12,eos=0")
    per = [pack(srcs[f"s{k}"], 12, eos=0, seed=4) for k in range(2)]
    order = blend([0.5, 0.5], [p[3] for p in per])
    want_tok = np.stack([per[s][0][i].astype(want) for s, i in order])
    assert got[0].dtype == want and np.array_equal(got[0], want_tok)
    assert np.array_equal(got[3], [s for s, _ in order])


def test_uint64_and_signed_sources_have_no_common_dtype(lake, mount, tmp_path):
    for name, dt in (("a", np.uint64), ("b", np.int32)):
        lake.create(name)
        lake.import_(name, {"tok": write_dir(tmp_path / name,
                                             [np.arange(1, 9 + i, dtype=dt) for i in range(4)])})
    mix(lake, "create", "y", "a=1", "b=1")
    m = mount(lake)
    with pytest.raises(FileNotFoundError):
        (m.path / "mixes" / "y" / "views" / "pack=4" / "tokens.npy").stat()
    assert "no integer dtype holds both" in (m.path / ".tensorfs" / "errors").read_text()


def test_on_error_pad_reaches_a_mixtures_sources(mixed, mount):
    """A source's damaged token chunk: the mixture's tokens.npy is EIO by default; with
    on_error=pad that source's tokens read as zeros and every other sample is exact."""
    import errno

    lake, srcs = mixed
    mix(lake, "create", "d", "web=0.5", "code=0.5", "--seed", "2")
    chunks = [(len(f.read_bytes()), f) for _, f in lake.object_files("code")
              if parse_object_header(f.read_bytes())["type"] == 1]
    flip_byte(max(chunks)[1], 48 + 40, 0x5A)  # the data part's chunk: the largest
    m = mount(lake)
    views = m.path / "mixes" / "d" / "views"
    with pytest.raises(OSError) as e:
        (views / "pack=8,eos=0" / "tokens.npy").read_bytes()
    assert e.value.errno == errno.EIO
    got, _, _, src = load(m, "d", "pack=8,eos=0,on_error=pad")
    per = {k: pack(srcs[k], 8, eos=0, seed=2) for k in ("web", "code")}
    order = blend([0.5, 0.5], [per["web"][3], per["code"][3]])
    for j, (s, i) in enumerate(order):
        if s == 0:
            assert np.array_equal(got[j], per["web"][0][i]), j
        else:
            assert not got[j].any(), j
    assert (src == 1).sum() > 0


def test_python_opens_a_mixture_view(mixed, mount):
    """tensorfs.open and tensorfs.torch.Dataset read a mixture's view as they read a dataset's
    (its .npy files), uint16 tokens as int32 tensors."""
    import tensorfs

    lake, _ = mixed
    mix(lake, "create", "p", "web=0.5", "code=0.5")
    m = mount(lake)
    view = m.path / "mixes" / "p" / "views" / "pack=8,eos=0,epoch=1"
    cols = tensorfs.open(view)
    assert sorted(cols) == ["doc", "segments", "source", "tokens"]
    for name in cols:
        assert np.array_equal(cols[name], np.load(view / f"{name}.npy")), name
    with pytest.raises(FileNotFoundError):
        tensorfs.open(m.path / "mixes" / "p")
    torch = pytest.importorskip("torch")
    import tensorfs.torch

    loader = torch.utils.data.DataLoader(tensorfs.torch.Dataset(view, ["tokens", "source"]),
                                         batch_size=7)
    got = torch.cat([b["tokens"] for b in loader])
    assert got.dtype == torch.int32 and np.array_equal(got.numpy(), cols["tokens"])


def test_shares_follow_the_weights_and_small_sources_repeat(mixed, mount):
    lake, srcs = mixed
    mix(lake, "create", "w", "web=1", "code=1", "math=2")
    m = mount(lake)
    src = load(m, "w", "pack=8")[3]
    w = np.array([0.25, 0.25, 0.5])
    counts = np.zeros(3)
    for j, s in enumerate(src):
        counts[s] += 1
        assert np.all(np.abs(counts - w * (j + 1)) <= 1.0 + 1e-9), (j, counts)
    math_samples = pack(srcs["math"], 8)[3]
    assert counts[2] > math_samples  # the small source ran out and started over


def test_ranks_never_share_a_sample(mixed, mount):
    """datasets#7868: mixing then sharding by node gives every rank its own samples."""
    lake, _ = mixed
    mix(lake, "create", "r", "web=0.5", "code=0.5", "--seed", "3")
    m = mount(lake)
    every = [tuple(x) + (int(s),) for x, s in zip(*[load(m, "r", "pack=8")[i] for i in (2, 3)])]
    seen = []
    for rank in range(4):
        d, s = (load(m, "r", f"pack=8,rank={rank},world=4,drop_last=1")[i] for i in (2, 3))
        seen += [tuple(x) + (int(y),) for x, y in zip(d, s)]
    assert len(seen) == len(every) // 4 * 4
    assert sorted(seen) == sorted(every[:len(seen)])


def test_versions_are_pinned_and_kept(mixed, mount, tmp_path):
    lake, srcs = mixed
    p = mix(lake, "create", "v", "web=1", "code:tok=1")
    assert "version" in p.stdout
    assert mix(lake, "create", "v", "web=1", check=False).returncode != 0
    m = mount(lake)
    before = load(m, "v", "pack=8")[0]
    # a new commit of a source does not change the mixture: it is pinned
    lake.import_("code", {"tok": write_dir(tmp_path / "more", docs(5, 30, 1000, 2000))})
    m.stop()
    m = mount(lake, name="mnt2")
    assert np.array_equal(load(m, "v", "pack=8")[0], before)
    mix(lake, "update", "v", "web=1", "code=2")
    log = mix(lake, "log", "v").stdout
    assert log.count("version") == 2 and "weight 2" in log, log
    assert mix(lake, "ls").stdout.split() == ["v"]
    shown = mix(lake, "show", "v").stdout
    assert "weight 2" in shown and "weight 1 " in shown


@pytest.mark.parametrize("args,why", [
    (["create", "bad", "nope=1"], "no dataset nope"),
    (["create", "bad", "web=-1"], "positive number"),
    # Past a double's range: written as infinity once, and the mixture unreadable after.
    (["create", "bad", "web=1e999", "code=1"], "at most 1e300"),
    (["create", "bad", "web=inf"], "positive number"),
    (["create", "bad", "web=0x10"], "positive number"),
    (["create", "bad", "web@zzz=1"], "no branch, tag or commit"),
    (["create", "bad", "web:nope=1"], "no column nope"),
    (["update", "none", "web=1"], "no mixture none"),
])
def test_bad_mixtures_are_refused(mixed, args, why):
    lake, _ = mixed
    p = mix(lake, *args, check=False)
    assert p.returncode != 0 and why in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr  # the cause, once
    assert mix(lake, "ls").stdout.strip() == ""


def test_bad_mixture_view_names(mixed, mount):
    lake, _ = mixed
    mix(lake, "create", "b", "web=1", "code=1")
    m = mount(lake)
    for name, why in (("seed=3", "pack= views"), ("pack=8,seed=3", "holds its seed"),
                      ("pack=8,seed=0,epoch=0", "holds its seed"),
                      ("pack=8,col=tok", "names each source's column"),
                      ("pack=8,where=tok<3", "every document of its sources")):
        with pytest.raises(FileNotFoundError):
            (m.path / "mixes" / "b" / "views" / name / "tokens.npy").stat()
        assert why in (m.path / ".tensorfs" / "errors").read_text()
    # the control file says where a mixture's samples are (its files), not "no dataset"
    from tensorfs.staging import Stager, StagingError
    with pytest.raises(StagingError, match="a mixture's views are read as files"):
        Stager(m.path, "mixes/b/views/pack=8", ["tokens"])
    # the views' README is the mixture's: its keys, its files, what it refuses
    text = (m.path / "mixes" / "b" / "views" / "README").read_text()
    assert "Mixture views" in text and "source.npy" in text and "seed=, col=, where=" in text
    assert [p.name for p in (m.path / "mixes" / "b" / "views").iterdir()] == ["README"]
