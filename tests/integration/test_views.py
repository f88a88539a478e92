# SPDX-License-Identifier: MIT
"""Views: shuffle, shards, filters and start as directories; the Python client over them."""

import errno
import json
import os
import re
import time

import numpy as np
import pytest
import torch

from conftest import run_proc, tfs

import tensorfs  # noqa: E402
import tensorfs.torch  # noqa: E402

N = 20_000
CLASSES = 10


def build(lake, chunk="16k"):
    """Class-sorted labels (the worst case for a shuffle), a row id, and a 64-byte feature."""
    label = np.repeat(np.arange(CLASSES, dtype=np.int64), N // CLASSES)
    rid = np.arange(N, dtype=np.int32)
    feat = (rid[:, None] * 7 + np.arange(16)[None, :]).astype(np.float32)
    lake.build("d", {"label": label, "rid": rid, "feat": feat}, "--chunk-size", chunk)
    return label, rid, feat


def view(m, **kw):
    return tensorfs.view_path(m.path / "d" / "main", **kw)


def test_shuffle_is_a_permutation_and_deterministic(lake, mount):
    label, rid, feat = build(lake)
    m = mount(lake)
    a = tensorfs.open(view(m, seed=7, epoch=0))
    order = np.array(a["rid"])
    assert sorted(order.tolist()) == list(range(N))  # every row exactly once
    assert not np.array_equal(order, rid)
    assert np.array_equal(a["label"], label[order])  # columns move together
    assert np.array_equal(a["feat"], feat[order])
    again = np.array(tensorfs.open(view(m, seed=7, epoch=0))["rid"])
    assert np.array_equal(order, again)
    other_epoch = np.array(tensorfs.open(view(m, seed=7, epoch=1))["rid"])
    other_seed = np.array(tensorfs.open(view(m, seed=8, epoch=0))["rid"])
    assert (order != other_epoch).mean() > 0.9
    assert (order != other_seed).mean() > 0.9
    # The CLI computes the same order without a mount.
    p = run_proc(["view", lake.ds_url("d"), "--seed", "7", "--epoch", "0", "-n", "50"],
                 check=True)
    lines = p.stdout.splitlines()
    assert lines[0].endswith(f": {N} rows"), lines[0]  # no filter: nothing said of one
    assert [int(x) for x in lines[1:]] == order[:50].tolist()


def test_same_order_after_remount(lake, mount):
    build(lake)
    m = mount(lake, name="m1")
    first = np.array(tensorfs.open(view(m, seed=3, epoch=5, rank=1, world=3))["rid"])
    assert not m.stop()
    m = mount(lake, name="m2")
    second = np.array(tensorfs.open(view(m, seed=3, epoch=5, rank=1, world=3))["rid"])
    assert np.array_equal(first, second)


def test_shards_partition(lake, mount):
    build(lake)
    m = mount(lake)
    world = 4  # divides N: the shards partition the rows exactly
    shards = [np.array(tensorfs.open(view(m, seed=11, epoch=2, rank=r, world=world))["rid"])
              for r in range(world)]
    assert all(len(s) == N // world for s in shards)
    allrows = np.concatenate(shards)
    assert sorted(allrows.tolist()) == list(range(N))
    # Not dividing: padding (default) keeps lengths equal; drop_last drops the tail.
    world = 3
    padded = [np.array(tensorfs.open(view(m, seed=11, epoch=2, rank=r, world=world))["rid"])
              for r in range(world)]
    assert {len(s) for s in padded} == {-(-N // world)}
    assert set(np.concatenate(padded).tolist()) == set(range(N))
    dropped = [np.array(tensorfs.open(view(m, seed=11, epoch=2, rank=r, world=world,
                                           drop_last=True))["rid"]) for r in range(world)]
    assert {len(s) for s in dropped} == {N // world}
    d = np.concatenate(dropped)
    assert len(set(d.tolist())) == len(d)  # disjoint
    # The order of a shard does not depend on who else reads: the same with world=1 slices.
    full = np.array(tensorfs.open(view(m, seed=11, epoch=2))["rid"])
    assert np.array_equal(dropped[1], full[N // 3:2 * (N // 3)])


def test_start_resumes_mid_epoch(lake, mount):
    build(lake)
    m = mount(lake)
    whole = np.array(tensorfs.open(view(m, seed=5, epoch=1, rank=1, world=2))["rid"])
    rest = np.array(tensorfs.open(view(m, seed=5, epoch=1, rank=1, world=2, start=1234))["rid"])
    assert np.array_equal(rest, whole[1234:])
    assert len(tensorfs.open(view(m, seed=5, rank=0, world=2, start=10**9))["rid"]) == 0


def test_filter(lake, mount):
    label, rid, _ = build(lake)
    m = mount(lake)
    a = np.array(tensorfs.open(view(m, where="label<3"))["rid"])
    assert np.array_equal(a, rid[label < 3])
    b = np.array(tensorfs.open(view(m, where="label in (1,5) and not rid >= 19000"))["rid"])
    assert np.array_equal(b, rid[np.isin(label, [1, 5]) & ~(rid >= 19000)])
    c = np.array(tensorfs.open(view(m, where="(label == 9 or label = 0)"))["rid"])
    assert np.array_equal(c, rid[(label == 9) | (label == 0)])
    # filter, then shuffle, then shard
    parts = [np.array(tensorfs.open(view(m, where="label not in (0,1)", seed=1, rank=r,
                                         world=2))["rid"]) for r in range(2)]
    assert sorted(np.concatenate(parts).tolist()) == rid[label >= 2].tolist()
    # the escaped spelling from the issue works as a literal directory name
    d = m.path / "d" / "main" / "views" / "where=label%20in%20(1,2,3)"
    assert np.array_equal(np.load(d / "rid.npy"), rid[np.isin(label, [1, 2, 3])])
    p = run_proc(["view", lake.ds_url("d"), "--where", "label>=8", "-n", "0"], check=True)
    n = int((label >= 8).sum())
    assert f": {n} rows ({n} of {len(label)} match the filter)" in p.stdout, p.stdout


@pytest.mark.parametrize("name,reason", [
    ("seed=abc", "expected a non-negative integer"),
    ("colour=3", "unknown view key"),
    ("rank=2,world=2", "is not below world"),
    ("world=0", "world=0"),
    ("block=0,seed=1", "block=0"),
    ("where=nope<3", "no column 'nope'"),
    ("where=feat<3", "not a real scalar"),
    ("where=label<", "expected a number"),
    ("where=(label<3", "missing ')'"),
    ("seed", "not key=value"),
    ("seed=1,seed=2", "'seed' is given twice"),
    ("seed=1,epoch=2,where=label<3,epoch=2", "'epoch' is given twice"),
    ("where=label<3%00garbage", "%00 (a NUL byte) has no place"),
    ("seed=1%00", "%00 (a NUL byte) has no place"),
])
def test_bad_views_are_enoent_with_a_reason(lake, mount, name, reason):
    build(lake)
    m = mount(lake)
    with pytest.raises(OSError) as ei:
        os.stat(m.path / "d" / "main" / "views" / name)
    assert ei.value.errno == errno.ENOENT
    deadline = time.time() + 5
    while reason not in m.log() and time.time() < deadline:
        time.sleep(0.05)
    assert reason in m.log(), m.log()[-2000:]
    # the reason is readable without the daemon's log, with the path and a time
    errors = (m.path / ".tensorfs" / "errors").read_text().splitlines()
    assert errors and f" d/main/views/{name}: " in errors[-1], errors
    assert reason in errors[-1], errors
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z d/main/views/", errors[-1])
    metrics = (m.path / ".tensorfs" / "metrics").read_text()
    assert re.search(r"^tensorfs_lookup_errors_total [1-9]", metrics, re.M), metrics
    # the daemon keeps serving
    assert len(np.load(m.path / "d" / "main" / "rid.npy")) == N


@pytest.mark.parametrize("kw", [dict(rank=2, world=2), dict(rank=0, world=0),
                                dict(rank=1), dict(seed=-1)])
def test_view_path_refuses_what_no_mount_serves(tmp_path, kw):
    """Refused where the parameters are given, not as an ENOENT from the mount later."""
    with pytest.raises(ValueError):
        tensorfs.view_path(tmp_path, **kw)
    with pytest.raises(ValueError):
        tensorfs.elastic_view(tmp_path, 3, 2, 16)


def test_open_of_a_directory_that_is_no_version(tmp_path):
    """A directory without schema.json (a wrong path, the mount's root) was an empty Columns."""
    np.save(tmp_path / "x.npy", np.arange(3))
    with pytest.raises(FileNotFoundError, match="no schema.json") as ei:
        tensorfs.open(tmp_path)
    assert ei.value.errno == errno.ENOENT


def test_views_dir_lists_readme_only(lake, mount):
    build(lake)
    m = mount(lake)
    vdir = m.path / "d" / "main" / "views"
    assert os.listdir(vdir) == ["README"]
    text = (vdir / "README").read_text()
    for key in ("seed=", "epoch=", "rank=", "world=", "block=", "start=", "drop_last", "where="):
        assert key in text
    # views of a commit directory work the same
    commit = json.loads((m.path / "d" / "main" / "schema.json").read_text())["commit"]
    cdir = m.path / "d" / "commits" / commit
    a = np.load(cdir / "views" / "seed=1" / "rid.npy")
    b = np.load(m.path / "d" / "main" / "views" / "seed=1" / "rid.npy")
    assert np.array_equal(a, b)


def test_shuffle_quality(lake, mount):
    """Class-sorted data: the shuffled label sequence has no long runs and near-uniform class
    counts in every window of 1,000 rows. Rows of 256 bytes in 8 KiB chunks: the default window
    (64 MiB of chunks) spans every class run many times over."""
    n = 50_000
    label = np.repeat(np.arange(CLASSES, dtype=np.int64), n // CLASSES)
    pixels = np.zeros((n, 256), dtype=np.uint8)
    lake.build("q", {"label": label, "pixels": pixels}, "--chunk-size", "8k")
    m = mount(lake)
    seq = np.array(np.load(tensorfs.view_path(m.path / "q" / "main", seed=1, epoch=0)
                           + "/label.npy"))
    assert sorted(seq.tolist()) == sorted(label.tolist())
    runs = np.diff(np.flatnonzero(np.diff(np.concatenate(([-1], seq, [-1]))) != 0))
    assert runs.max() <= 8, runs.max()
    for w in range(0, n - 1000 + 1, 1000):
        counts = np.bincount(seq[w:w + 1000], minlength=CLASSES)
        assert counts.min() >= 50 and counts.max() <= 160, (w, counts)


def test_dataloader_over_a_shard(lake, mount):
    _, rid, feat = build(lake)
    m = mount(lake)
    path = tensorfs.torch.epoch_view(m.path / "d" / "main", seed=9, epoch=0, rank=1, world=2)
    ds = tensorfs.torch.Dataset(path, columns=["rid", "feat"])
    assert len(ds) == N // 2
    dl = torch.utils.data.DataLoader(ds, batch_size=256, shuffle=False, num_workers=2)
    seen = []
    for batch in dl:
        seen.append(batch["rid"].numpy())
        assert torch.equal(batch["feat"], torch.from_numpy(feat[batch["rid"].numpy()]))
    seen = np.concatenate(seen)
    shard = np.array(tensorfs.open(path)["rid"])
    assert np.array_equal(seen, shard)  # every row of the shard, once, in view order
    assert len(set(seen.tolist())) == len(seen)
    other = np.array(tensorfs.open(tensorfs.torch.epoch_view(
        m.path / "d" / "main", seed=9, epoch=0, rank=0, world=2))["rid"])
    assert sorted(np.concatenate([seen, other]).tolist()) == list(range(N))
    one = tensorfs.torch.Dataset(path, columns=["rid"], transform=lambda t: t * 2)
    assert int(one[0]) == 2 * int(shard[0])


def test_view_scan_prefetches_in_view_order(lake, mount):
    """Reading a shuffled view front to back drives the prefetcher through its chunk order."""
    n = 8192
    big = (np.arange(n, dtype=np.int64)[:, None] * np.ones((1, 512), np.int64)).astype(np.int64)
    lake.build("p", {"big": big}, "--chunk-size", "256k")  # 64 rows of 4 KiB per chunk
    m = mount(lake, opts=["cache_mem=64M", "prefetch_threads=2"])
    a = np.load(tensorfs.view_path(m.path / "p" / "main", seed=2) + "/big.npy", mmap_mode="r")
    order = np.array(np.load(tensorfs.view_path(m.path / "p" / "main", seed=2) + "/big.npy",
                             mmap_mode="r")[:, 0])
    assert sorted(order.tolist()) == list(range(n))
    for i in range(0, n, 256):
        assert np.array_equal(a[i:i + 256, 0], order[i:i + 256])
    s = json.loads((m.path / ".tensorfs" / "stats").read_text())["prefetch"]
    assert s["sequential_streams"] >= 1, s
    assert s["loaded"] > 0 and s["hits"] > 0, s


def test_view_read_schedules_every_chunk_it_spans(lake, mount):
    """One read of a view takes rows of many chunks: the loaders get all of them at once (not
    the reader's thread one after another)."""
    n = 8192
    big = (np.arange(n, dtype=np.int64)[:, None] * np.ones((1, 512), np.int64)).astype(np.int64)
    lake.build("q", {"big": big}, "--chunk-size", "256k")  # 64 rows of 4 KiB per chunk
    m = mount(lake, opts=["cache_mem=64M", "prefetch_threads=2"])
    vdir = tensorfs.view_path(m.path / "q" / "main", seed=5)
    rows = 16
    fd = os.open(vdir + "/big.npy", os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # exactly this read, no readahead
        got = np.frombuffer(os.pread(fd, rows * 4096, 4096), np.int64).reshape(rows, 512)
    finally:
        os.close(fd)
    spanned = len({int(r) // 64 for r in got[:, 0]})
    assert spanned > 4, spanned
    s = json.loads((m.path / ".tensorfs" / "stats").read_text())["prefetch"]
    assert s["scheduled"] >= spanned - 1, (spanned, s)



def classes_per_stretch(labels, stretch=1000):
    return [len(np.unique(labels[i:i + stretch]))
            for i in range(0, len(labels) - stretch + 1, stretch)]


def test_default_shuffle_mixes_class_sorted_data(lake, mount):
    """Rows stored class by class (100 classes, 1 KiB rows: 25 chunks of 4 MiB): with the
    default cache_mem, every 1,000 rows of the default shuffle hold >= 90 classes (the window is
    half the cache, and windows are balanced); an explicit small window mixes less, as
    documented."""
    label = np.repeat(np.arange(100, dtype=np.int64), 1000)
    image = np.zeros((len(label), 1024), np.uint8)
    image[:, 0] = label
    lake.build("c", {"image": image, "label": label})
    m = mount(lake)
    for seed in (1, 2):
        got = np.load(tensorfs.view_path(m.path / "c" / "main", seed=seed) + "/label.npy")
        assert sorted(got.tolist()) == label.tolist()
        counts = classes_per_stretch(got)
        assert min(counts) >= 90, (min(counts), np.mean(counts))
    # block=4 (16 MiB): few classes per stretch, but no stretch left with a stray chunk or two
    counts = classes_per_stretch(np.load(
        tensorfs.view_path(m.path / "c" / "main", seed=1, block=4) + "/label.npy"))
    assert 10 <= min(counts) and np.mean(counts) < 40, (min(counts), np.mean(counts))
    # a smaller cache, a smaller default window (half of 64M: 8 chunks here), mixing less
    m2 = mount(lake, opts=["cache_mem=64M"], name="small")
    counts = classes_per_stretch(np.load(
        tensorfs.view_path(m2.path / "c" / "main", seed=1) + "/label.npy"))
    assert 20 <= np.mean(counts) < 60, (min(counts), np.mean(counts))


def settle(m, deadline):
    """The warm-up's line is logged once its loads are queued: wait until they land (slow under
    sanitizers), nothing in flight and the loaded count still for a quarter of a second."""
    last, still = None, 0
    while time.time() < deadline and still < 5:
        pf = json.loads((m.path / ".tensorfs" / "stats").read_text())["prefetch"]
        now = (pf["loaded"], pf["inflight_bytes"])
        still = still + 1 if now == last and not pf["inflight_bytes"] else 0
        last = now
        time.sleep(0.05)


def test_epoch_warm_loads_the_next_epoch(lake, mount):
    """-o epoch_warm=1: reading the last window of epoch 0 has the next epoch's view built and
    its first chunks loaded; its rows are then read from the cache, and equal the view's."""
    n = 16384
    image = (np.arange(n, dtype=np.int64)[:, None] * np.ones((1, 128), np.int64))
    lake.build("w", {"image": image}, "--chunk-size", "256k")  # 256 rows a chunk, 64 chunks
    m = mount(lake, opts=["cache_mem=64M", "epoch_warm=1"])
    e0 = np.load(m.path / "w" / "main" / "views" / "seed=4,epoch=0" / "image.npy")
    deadline = time.time() + 30
    while "epoch_warm: seed=4,epoch=1: column image" not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    assert "epoch_warm: seed=4,epoch=1: column image" in m.log(), m.log()[-2000:]
    settle(m, deadline)
    before = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    e1 = np.load(m.path / "w" / "main" / "views" / "seed=4,epoch=1" / "image.npy")
    after = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    assert after["misses"] == before["misses"], (before, after)
    assert sorted(e1[:, 0].tolist()) == list(range(n)) and not np.array_equal(e0, e1)
    assert np.array_equal(e1[:, 0], e1[:, 127])


def test_epoch_warm_with_min_keeps_the_next_epoch(lake, mount):
    """-o epoch_warm=1,evict=min on data twice the cache: the warm-up publishes the next epoch's
    order to the eviction, so the chunks it loaded stay while epoch 0's last window is read, and
    epoch 1's first rows come from the cache (LRU, or MIN without that plan, evicted some).
    Windows of 12 chunks: the last one (12 MiB) and the warm-up's half of the cache (16 MiB)
    leave 4 MiB to spare; with none (the default window, half the cache) one run in ten on a
    busy machine lost one of the next epoch's chunks at the turn."""
    n, width = 16384, 512  # 4 KiB rows, 64 MiB; 1 MiB chunks of 256 rows
    image = (np.arange(n, dtype=np.int64)[:, None] * np.ones((1, width), np.int64))
    lake.build("w", {"image": image}, "--chunk-size", "1M")
    m = mount(lake, opts=["cache_mem=32M", "epoch_warm=1", "evict=min"])
    views = m.path / "w" / "main" / "views"
    e0 = np.load(views / "seed=4,block=12,epoch=0" / "image.npy")
    deadline = time.time() + 30
    warmed = "epoch_warm: seed=4,block=12,epoch=1: column image"
    while warmed not in m.log() and time.time() < deadline:
        time.sleep(0.1)
    assert warmed in m.log(), m.log()[-2000:]
    settle(m, deadline)
    before = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    rows = 1024  # the first third of the 12 MiB window
    with open(views / "seed=4,block=12,epoch=1" / "image.npy", "rb", buffering=0) as f:
        head = f.read(4096)
        got = np.frombuffer(f.read(rows * width * 8), np.int64).reshape(rows, width)
    after = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    assert head.startswith(b"\x93NUMPY")
    assert after["misses"] == before["misses"], (before, after)
    e1 = np.load(views / "seed=4,block=12,epoch=1" / "image.npy")
    assert np.array_equal(got, e1[:rows]) and not np.array_equal(e0[:rows], got)
    assert sorted(e1[:, 0].tolist()) == list(range(n))


@pytest.mark.parametrize("after", [4, 16, 3])
def test_elastic_resume_reads_each_row_once(lake, mount, after):
    """stride=B: 8 ranks each read 5 batches of 10 rows, the job stops; it resumes with another
    world size at start = rows read. Before and after together: every row exactly once
    (drop_last=1), or every row with the padding only repeating rows (drop_last=0)."""
    n, b = 1003, 10
    lake.build("e", {"i": np.arange(n, dtype=np.int64)})
    m = mount(lake)
    main = m.path / "e" / "main"
    before = []
    for r in range(8):
        got = np.load(tensorfs.elastic_view(main, r, 8, b, seed=9) + "/i.npy")
        before += got[:5 * b].tolist()
    done = 5 * 8 * b
    order = np.load(tensorfs.view_path(main, seed=9) + "/i.npy").tolist()
    assert sorted(before) == sorted(order[:done])  # the job read a prefix of the order
    for drop_last in (True, False):
        after_rows = []
        lens = set()
        for r in range(after):
            got = np.load(tensorfs.elastic_view(main, r, after, b, rows_before=done, seed=9,
                                                drop_last=drop_last) + "/i.npy").tolist()
            lens.add(len(got))
            after_rows += got
        assert len(lens) == 1  # every rank the same length
        allrows = before + after_rows
        if drop_last:
            assert len(set(allrows)) == len(allrows)
            assert len(allrows) == n - (n - done) % after
        else:
            assert set(allrows) == set(range(n))
            assert len(allrows) - n == (-(n - done)) % after


def test_evict_min_reads_exact_rows(lake, mount):
    """-o evict=min: views over data 3x the cache (windows of 4 chunks) read every row exactly,
    epoch after epoch, while the cache evicts by the readers' plans."""
    n = 12288
    big = np.repeat(np.arange(n, dtype=np.int64)[:, None], 512, axis=1)  # 4 KiB rows
    lake.build("m", {"big": big}, "--chunk-size", "1M")  # 48 MiB in 256-row chunks
    m = mount(lake, opts=["cache_mem=16M", "evict=min"])
    for epoch in range(3):
        got = np.load(tensorfs.view_path(m.path / "m" / "main", seed=3, epoch=epoch,
                                         block=4) + "/big.npy", mmap_mode="r")
        col = np.array(got[:, 0])
        assert sorted(col.tolist()) == list(range(n))
        assert np.array_equal(np.array(got[:, 511]), col)
    # (the budget itself is watched by test_memory_bounded: readahead still in flight may pin
    # chunks past it for a moment)
    s = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    assert s["evictions"] > 0, s


def plans(m):
    return json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]["plans"]


def test_evict_min_control_streams_and_ragged_data(lake, mount):
    """-o evict=min with readers that publish plans through the control file (`next` over a
    view) and through a view's data.bin of a ragged column: every row exact, epoch after epoch,
    with the cache a third of the data; the plans are withdrawn when the readers close."""
    n = 6144
    big = np.repeat(np.arange(n, dtype=np.int64)[:, None], 512, axis=1)  # 4 KiB rows
    lens = (np.arange(n) % 7 + 1) * 300
    ragged = [np.full(int(k), i % 251, dtype=np.uint8) for i, k in enumerate(lens)]
    rdir = lake.scratch / "rag"
    rdir.mkdir()
    for i, r in enumerate(ragged):
        np.save(rdir / f"{i:06d}.npy", r)
    lake.create("m")
    lake.import_("m", {"big": big}, "--chunk-size", "1M")
    rc, _, err = tfs("import", lake.ds_url("m"), f"rag={rdir}/", "--chunk-size", "1M")
    assert rc == 0, err
    m = mount(lake, opts=["cache_mem=8M", "evict=min"])
    main = m.path / "m" / "main"
    for epoch in range(2):
        vdir = tensorfs.view_path(main, seed=5, epoch=epoch, block=2)
        st = tensorfs.Stager(m.path, os.path.relpath(vdir, m.path), ["big"], batch_size=256)
        try:
            assert plans(m) == 1  # the stream's, published at open
            seen = []
            for b in st.batches():
                col = np.array(b["big"][:, 0])
                assert (np.array(b["big"][:, 511]) == col).all()
                seen += col.tolist()
            assert sorted(seen) == list(range(n))
        finally:
            st.close()
        deadline = time.time() + 5  # the release of the control file comes after close()
        while plans(m) and time.time() < deadline:
            time.sleep(0.05)
        assert plans(m) == 0  # withdrawn at close
        order = np.array(np.load(vdir + "/big.npy", mmap_mode="r")[:, 0])
        with open(vdir + "/rag/data.bin", "rb") as f:
            assert plans(m) == 1
            data = f.read()
        want = b"".join(ragged[int(i)].tobytes() for i in order)
        assert data == want, f"epoch {epoch}: the view's data.bin differs"
    s = json.loads((m.path / ".tensorfs" / "stats").read_text())["cache"]
    assert s["evictions"] > 0, s


def test_shuffle_of_a_ragged_column_reads_a_window_at_a_time(lake, mount):
    """A dataset whose widest column is ragged is grouped by that column's data chunks (not by
    its offsets', which put every row in one window): a shuffled view's data.bin, read front to
    back on a cache a third of the column, fetches its bytes about once, and every row exact."""
    n = 8000  # 24 MB of rows of 2,000 to 4,000 bytes, as many small images
    rng = np.random.default_rng(8)
    rdir = lake.scratch / "rows"
    rdir.mkdir()
    rows = [rng.integers(0, 256, 2000 + i * 37 % 2000, dtype=np.uint8) for i in range(n)]
    for i, r in enumerate(rows):
        np.save(rdir / f"{i:06d}.npy", r)
    lake.create("g")
    lake.import_("g", {"id": np.arange(n, dtype=np.int64)}, "--chunk-size", "256k")
    rc, _, err = tfs("import", lake.ds_url("g"), f"img={rdir}/", "--chunk-size", "256k")
    assert rc == 0, err
    stored = sum(p.stat().st_size for _, p in lake.object_files("g"))
    m = mount(lake, opts=["cache_mem=8M"])
    vdir = tensorfs.view_path(m.path / "g" / "main", seed=3)
    before = json.loads((m.path / ".tensorfs" / "stats").read_text())["store"]
    with open(vdir + "/img/data.bin", "rb") as f:
        data = f.read()
    after = json.loads((m.path / ".tensorfs" / "stats").read_text())["store"]
    fetched = after["bytes_fetched"] - before["bytes_fetched"]
    assert fetched < 1.5 * stored, (fetched, stored)
    order = np.load(vdir + "/id.npy")
    assert sorted(order.tolist()) == list(range(n)) and order.tolist() != list(range(n))
    assert data == b"".join(rows[int(i)].tobytes() for i in order)

    # Its offsets damaged for good: the view still has an order (those rows placed by the mean
    # row size, as every machine places them), and the rows read as bad rows.
    from conftest import flip_byte, parse_object_header

    offs = [p for _, p in lake.object_files("g")
            if parse_object_header(p.read_bytes())["raw_size"] == (n + 1) * 8]
    assert len(offs) == 1
    flip_byte(offs[0], 48 + 20, 0x5A)
    m = mount(lake, opts=["cache_mem=8M"], name="fresh")  # nothing cached
    vdir = tensorfs.view_path(m.path / "g" / "main", seed=3, on_error="pad")
    again = np.load(vdir + "/id.npy")
    assert sorted(again.tolist()) == list(range(n))
