# SPDX-License-Identifier: MIT
"""The control file: batched staging (host backend) through text requests, ioctls and Stager."""

import errno
import os
import subprocess

import numpy as np
import pytest

from conftest import SLOW

import tensorfs  # noqa: E402
from ctlhelp import CTL_CLIENT, N, Session, build, ctl_path, fields, staging_stats, wait_for


def test_host_batches_equal_fancy_indexing(lake, mount):
    build(lake)
    m = mount(lake)
    main = tensorfs.open(m.path / "d" / "main")
    rng = np.random.default_rng(7)
    with tensorfs.Stager(m.path, "d/main", ["image", "label", "feat"], batch_size=256) as s:
        assert s.rows == N and s.slots == 4 and s.batch_size == 256
        for _ in range(20):
            rows = rng.integers(0, N, size=int(rng.integers(1, 257)))  # repeats, any order
            b = s.stage(rows)
            assert b.rows == len(rows)
            for c in ("image", "label", "feat"):
                assert b[c].dtype == main[c].dtype and b[c].shape == (len(rows),) + \
                    main[c].shape[1:]
                assert np.array_equal(b[c], main[c][rows]), c
            b.release()
        for a, z in ((0, 1), (0, 256), (N - 256, N), (1000, 1133), (17, 18)):
            b = s.stage(range(a, z))
            assert b.pos == a and all(np.array_equal(b[c], main[c][a:z]) for c in b)
            s.release(b)
        # An absolute path of a version directory works too.
    with tensorfs.Stager(m.path, m.path / "d" / "main", "label") as s:
        assert np.array_equal(s.stage([5, 4])["label"], main["label"][[5, 4]])
    # Views: rows are view rows.
    vp = tensorfs.view_path(m.path / "d" / "main", seed=3, epoch=1, rank=1, world=3)
    view = tensorfs.open(vp)
    with tensorfs.Stager(m.path, vp, ["image", "feat"], batch_size=128) as s:
        assert s.rows == len(view["image"])
        for _ in range(10):
            rows = rng.integers(0, s.rows, size=100)
            b = s.stage(rows)
            assert np.array_equal(b["image"], view["image"][rows])
            assert np.array_equal(b["feat"], view["feat"][rows])
            b.release()
        b = s.stage(slice(10, 110))
        assert np.array_equal(b["image"], view["image"][10:110])
    del main, view


def test_large_batches_equal_fancy_indexing(lake, mount):
    """Batches of tens of MiB are copied on several threads and past the CPU's caches: the
    bytes are the same as fancy indexing's, for explicit rows and for a view's next."""
    rng = np.random.default_rng(5)
    n = 160
    img = rng.integers(0, 256, size=(n, 3, 224, 224), dtype=np.uint8)  # 147 KiB a row
    lake.build("big", {"image": img, "label": np.arange(n, dtype=np.int64)},
               "--chunk-size", "1M")
    m = mount(lake, ["cache_mem=128M"])
    main = tensorfs.open(m.path / "big" / "main")
    with tensorfs.Stager(m.path, "big/main", ["label", "image"], batch_size=n) as s:
        for size in (n, 97, 61, 7):  # 22.6 MiB down to one copy on this thread
            rows = rng.integers(0, n, size=size)
            b = s.stage(rows)
            assert np.array_equal(b["image"], img[rows])
            assert np.array_equal(b["label"], rows)
            b.release()
    vp = tensorfs.view_path(m.path / "big" / "main", seed=4)
    view = tensorfs.open(vp)
    with tensorfs.Stager(m.path, vp, ["image"], batch_size=70, depth=3) as s:
        got = np.concatenate([b["image"].copy() for b in s.batches(70)])
    assert np.array_equal(got, view["image"][:])
    del main, view


def test_next_covers_view_in_order(lake, mount):
    cols = build(lake)
    m = mount(lake)
    vp = tensorfs.view_path(m.path / "d" / "main", seed=11, rank=0, world=2)
    want = np.array(tensorfs.open(vp)["label"])
    with tensorfs.Stager(m.path, vp, ["label", "image"], batch_size=128, depth=4) as s:
        got, imgs = [], []
        for b in s.batches(100):  # batches made ahead while this one is consumed
            assert b.pos == sum(len(x) for x in got)
            got.append(np.array(b["label"]))
            imgs.append(np.array(b["image"]))
        assert np.array_equal(np.concatenate(got), want)
        assert np.array_equal(np.concatenate(imgs), cols["image"][(want - 1) // 3])
        assert s.next(10) is None  # the end
        # Changing the batch size and seeking mid-stream: still in order.
        s.seek(0)
        got = []
        for k in range(40):
            b = s.next(7 + k % 5 * 20)
            if b is None:
                break
            got.append(np.array(b["label"]))
            b.release()
            if k == 5:
                pos = sum(len(x) for x in got)
                s.seek(pos)
        assert np.array_equal(np.concatenate(got), want[:sum(len(x) for x in got)])
    st = staging_stats(m)
    assert st["batches"] > 0 and st["rows"] > 0


def test_next_gives_back_the_batch_before(lake, mount):
    """next ... release=K gives slot K back in the same request: a loader holding one batch at a
    time never runs out of slots; a slot it does not hold is an error reply, no batch is made
    and the stream goes on from where it was."""
    cols = build(lake)
    m = mount(lake)
    s = Session(m)
    f = fields(s.req("open d/main cols=label depth=2 batch=50"))
    stream = f["stream"]
    got, prev = [], ""
    for _ in range(8):  # more batches than slots: each request gives the one before back
        r = s.req(f"next stream={stream} batch=50{prev}")
        assert r.startswith("ok "), r
        b = fields(r)
        with open(b["file"], "rb") as fh:
            fh.seek(int(b["offset"]))
            got.append(np.frombuffer(fh.read(8 * int(b["rows"])), dtype=np.int64))
        prev = f" release={b['slot']}"
        assert staging_stats(m)["slots_leased"] == 1
    assert np.array_equal(np.concatenate(got), cols["label"][:400])
    held = b["slot"]
    other = 1 - int(held)
    r = s.req(f"next stream={stream} batch=50 release={other}")
    assert r.startswith("error EINVAL ") and "not leased" in r, r
    r = s.req(f"next stream={stream} batch=50 release=x")
    assert r.startswith("error EINVAL "), r
    b = fields(s.req(f"next stream={stream} batch=50 release={held}"))
    assert b["pos"] == "400", b  # the refused requests made no batch
    s.close()


def test_stager_asks_through_ioctls(lake, mount):
    """Stager.next, stage, release and seek ask through the control file's ioctls
    (TFS_CTL_IOC_NEXT, STAGE, RELEASE, SEEK: one call into the daemon each, next giving the slot
    before back in it) and get what the text requests give: the same batches of a shuffled view,
    of explicit rows (binary up to 1,024 of them, text beyond) and of ranges, the same errors,
    None at the end."""
    from tensorfs import staging

    cols = build(lake)
    m = mount(lake)
    vp = tensorfs.view_path(m.path / "d" / "main", seed=5)
    order = np.load(os.path.join(vp, "label.npy"))
    rng = np.random.default_rng(9)
    picks = [rng.integers(0, N, 7), rng.integers(0, N, 1024), rng.integers(0, N, 1500),
             range(100, 228), slice(2990, None), slice(10, 40, 3), [N - 1]]
    got, staged = {}, {}
    for how in ("ioctl", "text"):
        with tensorfs.Stager(m.path, vp, ["image", "label", "feat"], depth=2,
                             batch_size=2048) as g:
            if how == "text":  # as with a daemon without them
                g._no_ioctl = {staging._IOC_NEXT, staging._IOC_STAGE, staging._IOC_RELEASE,
                               staging._IOC_SEEK}
            got[how] = [(b.pos, {k: np.array(v) for k, v in b.items()})
                        for b in g.batches(128)]
            assert g.next() is None  # the end, again
            staged[how] = []
            for p in picks:
                b = g.stage(p, slot=1)
                staged[how].append({k: np.array(v) for k, v in b.items()})
                assert b.slot == 1
                b.release()
            with pytest.raises(tensorfs.StagingError) as ei:
                g.stage([0, N])
            assert ei.value.errno == errno.ERANGE
            with pytest.raises(tensorfs.StagingError) as ei:
                g.stage(range(5, 6), slot=2)
            assert ei.value.errno == errno.EINVAL and "slots 0..1" in str(ei.value)
            assert int(g.stats()["leased"]) == 0
            if how == "ioctl":
                assert not g._no_ioctl  # every call went through its ioctl
    assert [p for p, _ in got["ioctl"]] == list(range(0, N, 128))
    for (p, a), (q, b) in zip(got["ioctl"], got["text"], strict=True):
        assert p == q and a.keys() == b.keys()
        for k in a:
            assert np.array_equal(a[k], b[k]), (p, k)
    assert np.array_equal(np.concatenate([a["label"] for _, a in got["ioctl"]]), order)
    assert np.array_equal(np.concatenate([a["feat"] for _, a in got["ioctl"]]),
                          cols["feat"][(order - 1) // 3])
    for p, a, b in zip(picks, staged["ioctl"], staged["text"], strict=True):
        rows = order[np.arange(N)[p] if isinstance(p, slice) else np.asarray(p)]
        for k in a:
            assert np.array_equal(a[k], b[k]), (p, k)
        assert np.array_equal(a["feat"], cols["feat"][(rows - 1) // 3]), p
    # A slot not held: refused with no batch made; the stream goes on from where it was.
    with tensorfs.Stager(m.path, vp, ["label"], depth=2, batch_size=10) as g:
        b = g.next()
        with pytest.raises(tensorfs.StagingError) as ei:
            g.next(release=1 - b.slot)
        assert ei.value.errno == errno.EINVAL and "not leased" in str(ei.value)
        c = g.next(release=b)
        assert c.pos == 10 and list(c["label"]) == list(order[10:20])
        with pytest.raises(tensorfs.StagingError) as ei:
            g.next(batch_size=0, release=c)
        assert ei.value.errno == errno.EINVAL and "at least 1" in str(ei.value)
        with pytest.raises(tensorfs.StagingError) as ei:
            g.seek(N + 1)
        assert ei.value.errno == errno.ERANGE
        g.seek(N - 5)
        assert g.next(release=None).rows == 5
        with pytest.raises(tensorfs.StagingError) as ei:
            g.release(7)
        assert ei.value.errno == errno.EINVAL and "not leased" in str(ei.value)
        assert not g._no_ioctl
    with pytest.raises(ValueError):
        g.next()


def test_a_stream_an_epoch_reuses_the_slots(lake, mount):
    """A stream opened after one of the same shape closed takes its slots (kept, up to
    -o staging_keep bytes): the same memory under the new stream's file name, the old name
    gone, the batches right. Another shape gets slots of its own; staging_keep=0 keeps none."""
    cols = build(lake)
    m = mount(lake)
    ver = m.path / "d" / "main"
    files = []
    for epoch in range(3):  # a Stager an epoch, as a training loop opens them
        vp = tensorfs.view_path(ver, seed=2, epoch=epoch)
        order = np.load(os.path.join(vp, "label.npy"))
        with tensorfs.Stager(m.path, vp, ["image", "label"], depth=3, batch_size=100) as g:
            got, path = [], None
            for b in g.batches():
                got.append(np.array(b["image"]))
                path = os.fsdecode(g._next.out.path)  # the slot file, from the ioctl's reply
            files.append((path, os.stat(path).st_ino))
        assert np.array_equal(np.concatenate(got), cols["image"][(order - 1) // 3])
        # The stream's name goes with it, and its slots are kept, by the time close() returns
        # (it closes the stream by a request before the file).
        assert not os.path.exists(path)
        st = staging_stats(m)["kept"]
        assert st["rings"] == 1 and st["reused"] == epoch and st["bytes"] > 0, st
    assert len({name for name, _ in files}) == 3  # a name a stream
    assert len({ino for _, ino in files}) == 1    # one memory
    # Another shape: slots of its own (the kept ones stay kept).
    with tensorfs.Stager(m.path, "d/main", ["label"], batch_size=10) as g:
        assert list(g.next()["label"]) == list(cols["label"][:10])
    st = staging_stats(m)["kept"]
    assert st["rings"] == 2 and st["reused"] == 2, st
    pid = m.pid
    assert m.stop() == []
    assert not [p for p in os.listdir("/dev/shm") if p.startswith(f"tensorfs-{pid}-")]

    m = mount(lake, opts=("staging_keep=0",))
    for epoch in range(2):
        with tensorfs.Stager(m.path, "d/main", ["label"], batch_size=10) as g:
            assert list(g.next()["label"]) == list(cols["label"][:10])
    wait_for(lambda: staging_stats(m)["sessions"] == 0, "the sessions closed")
    st = staging_stats(m)["kept"]
    assert st == {"budget": 0, "rings": 0, "bytes": 0, "reused": 0, "dropped": 0}, st


def test_kept_slots_count_against_staging_mem(lake, mount):
    """Kept slots and live ones stay within -o staging_mem together: a stream that makes slots
    of its own first frees kept ones past the room the limit leaves it, and a stream of a kept
    shape still takes them however little room is left."""
    cols = build(lake)

    def epoch(m, names):
        """The keep's stats while a stream of these columns is open, and after it closed."""
        with tensorfs.Stager(m.path, "d/main", names, depth=3, batch_size=1000) as g:
            b = g.next()
            for name in names:
                assert np.array_equal(np.array(b[name]), cols[name][:1000]), name
            during = staging_stats(m)["kept"]
        return during, staging_stats(m)["kept"]

    m = mount(lake)
    big = epoch(m, ["image", "label"])[1]["bytes"]   # a ring's slots, as the keep counts them
    small = epoch(m, ["image"])[1]["bytes"] - big
    assert 0 < small < big, (small, big)
    during, after = epoch(m, ["label"])  # plenty of room: every ring stays kept
    assert during["rings"] == 2 and after["rings"] == 3 and after["dropped"] == 0, after
    m.stop()

    # Room for the larger ring's slots and a little more: not for both rings'.
    limit = big + small // 2
    m = mount(lake, opts=(f"staging_mem={limit}",))
    during, after = epoch(m, ["image", "label"])
    assert during["rings"] == 0 and after["rings"] == 1 and after["bytes"] == big, after
    # The same shape takes the kept slots, with no room left beside them.
    during, after = epoch(m, ["image", "label"])
    assert during["rings"] == 0 and during["reused"] == 1, during
    assert after["rings"] == 1 and after["dropped"] == 0, after
    # Another shape: the kept slots go before its own are made, while it is open.
    during, after = epoch(m, ["image"])
    assert during["rings"] == 0 and during["dropped"] == 1, during
    assert after["rings"] == 1 and after["bytes"] == small, after
    during, after = epoch(m, ["image", "label"])
    assert during["rings"] == 0 and during["dropped"] == 2, during
    assert after["bytes"] == big and after["reused"] == 1, after
    pid = m.pid
    assert m.stop() == []
    assert not [p for p in os.listdir("/dev/shm") if p.startswith(f"tensorfs-{pid}-")]


class _Event:
    """torch.cuda.Event's part the Stager uses: done once the test says so or once waited on."""

    def __init__(self):
        self.done = self.waited = False

    def record(self, stream):
        self.stream = stream

    def query(self):
        return self.done

    def synchronize(self):
        self.done = self.waited = True


class _Stream:
    def __init__(self, events):
        self.events = events

    def synchronize(self):
        for e in self.events:
            e.synchronize()


class _Cuda:
    """The Stager's CUDA side with torch's events and streams stood in for (a unit test of
    staging.py's releases: the daemon's batches stay host ones)."""

    def __init__(self):
        import types

        self.events = []

        def event():
            self.events.append(_Event())
            return self.events[-1]

        self.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(
            Event=event, current_stream=lambda dev: _Stream(self.events)))

    def close(self):
        pass


def test_cuda_batches_go_back_once_their_work_is_done(lake, mount):
    """On CUDA, next(release=B) does not wait for the device: an event recorded after the work
    queued on B marks it, and B's slot goes back in a later request once the event completed;
    with all the slots but two held, the oldest is waited for. The loader thus queues work
    ahead of the device, and the daemon never gets a slot whose work is not done."""
    cols = build(lake)
    m = mount(lake)
    with tensorfs.Stager(m.path, "d/main", ["label"], depth=4, batch_size=100) as g:
        fake = g._cuda = _Cuda()
        g._dev = 0
        gave, real = [], g._next_call
        marks = []  # (slot, event) of each batch let go, in order

        def spy(n, give):
            if give >= 0:  # the oldest let go and not yet given back
                slot, ev = next((s, e) for s, e in marks if s is not None)
                assert slot == give and ev.done, "a slot given back before its work was done"
                marks[marks.index((slot, ev))] = (None, ev)
            gave.append(give)
            return real(n, give)

        g._next_call = spy
        got, prev, most = [], None, 0
        for k in range(N // 100 + 1):
            b = g.next(release=prev)
            if prev is not None:
                marks.append((prev.slot, fake.events[-1]))
            if b is None:
                break
            got.append(np.array(b["label"]))
            most = max(most, len(g._pending) + len(g._leased))
            assert staging_stats(m)["slots_leased"] == len(g._pending) + len(g._leased)
            if k >= 10:  # from here on the device keeps up: nothing is waited for
                for e in fake.events:
                    e.done = True
            prev = b
        assert np.array_equal(np.concatenate(got), cols["label"])
        assert most == 3  # the batch in hand and two let go: one slot left to fill ahead
        waited = [e.waited for e in fake.events]
        assert any(waited[:10]) and not any(waited[11:]), waited
        assert gave[:3] == [-1, -1, -1]  # nothing done yet: nothing given back
        g._give_back_all()
        assert not g._pending and staging_stats(m)["slots_leased"] == 0
        # batches(): the same, and every slot back at its end
        g._next_call = real
        g.seek(0)
        fake.events.clear()
        n = sum(b.rows for b in g.batches())
        assert n == N and staging_stats(m)["slots_leased"] == 0
        assert all(e.done for e in fake.events)
        # A batch let go and then released by hand: waited for, given back once.
        g.seek(0)
        b1 = g.next()
        b2 = g.next(release=b1)
        assert b1.released and len(g._pending) == 1
        g.release(b1.slot)
        assert fake.events[-1].waited and not g._pending
        g.release(b2)
        assert staging_stats(m)["slots_leased"] == 0


def test_cuda_init_readies_a_device_or_says_why_not(lake, mount):
    """-o cuda_init=0 on a machine without that device (or a build without CUDA) mounts,
    serves host batches and logs why the device was not made ready; with one, the log says the
    cache's arena was registered at mount, before any stream."""
    cols = build(lake)
    m = mount(lake, opts=("cuda_init=0",))
    with tensorfs.Stager(m.path, "d/main", ["label"], batch_size=16) as s:
        b = s.stage([5, 1, 9])
        assert list(b["label"]) == list(cols["label"][[5, 1, 9]])
        b.release()
    log = m.log()
    assert ("-o cuda_init=0: cuda:0: " in log and "set up when a stream opens" in log) or \
        "is registered with the CUDA driver" in log, log


BAD = [
    ("frobnicate", "EINVAL"),
    ("open", "EINVAL"),
    ("open d/main", "EINVAL"),
    ("open d/main cols=nope", "EINVAL"),
    ("open d/main cols=label,label", "EINVAL"),
    ("open d/nobranch cols=label", "ENOENT"),
    ("open nods/main cols=label", "ENOENT"),
    ("open d/commits/xyz cols=label", "EINVAL"),
    ("open d/main/views/seed=x cols=label", "EINVAL"),
    ("open d/main/views/rank=3,world=2 cols=label", "EINVAL"),
    ("open d/main cols=label device=cuda:0", "ENODEV"),
    ("open d/main cols=label device=cuda:7", "ENODEV"),
    ("open d/main cols=label device=gpu", "EINVAL"),
    ("open d/main cols=label device=0000:ff:1f.7", "ENODEV"),  # a bus id, no device there
    ("open d/main cols=label device=0000:fg:1f.7", "EINVAL"),
    ("open d/main cols=label depth=0", "EINVAL"),
    ("open d/main cols=label depth=1000", "EINVAL"),
    ("open d/main cols=label colour=red", "EINVAL"),
    ("open /elsewhere/d/main cols=label", "EINVAL"),
    ("stage stream=1 rows=3000", "ERANGE"),
    ("stage stream=1 rows=1,99999999999", "ERANGE"),
    ("stage stream=1 range=2990:3001", "ERANGE"),
    ("stage stream=1 range=5:3", "EINVAL"),
    ("stage stream=1 range=5", "EINVAL"),
    ("stage stream=1 rows=1,x", "EINVAL"),
    ("stage stream=1 rows=-1", "EINVAL"),
    ("stage stream=1", "EINVAL"),
    ("stage stream=1 rows=1 range=1:2", "EINVAL"),
    ("stage stream=1 rows=" + ",".join(["1"] * 65), "E2BIG"),
    ("stage stream=1 range=0:65", "E2BIG"),
    ("stage stream=1 rows=1 slot=9", "EINVAL"),
    ("stage stream=9 rows=1", "ENOENT"),
    ("stage stream=x rows=1", "EINVAL"),
    ("stage rows=1", "EINVAL"),
    ("next stream=1 batch=0", "EINVAL"),
    ("next stream=1 batch=65", "E2BIG"),
    ("next stream=1", "EINVAL"),
    ("release stream=1 slot=1", "EINVAL"),
    ("release stream=1", "EINVAL"),
    ("seek stream=1 pos=3001", "ERANGE"),
    ("close stream=5", "ENOENT"),
    ("stats now=1", "EINVAL"),
    ("stage stream=1 rows=1 rows=2", "EINVAL"),
    ("stage stream=1 =1", "EINVAL"),
]


def test_stager_on_a_path_that_is_not_a_mount(tmp_path):
    """Named as such, not as a missing file the user never asked for."""
    with pytest.raises(FileNotFoundError, match="is not a tensorfs mount") as e:
        tensorfs.Stager(tmp_path, "d/main", ["label"], batch_size=8)
    assert e.value.errno == errno.ENOENT
    assert e.value.filename == str(tmp_path / ".tensorfs" / "control")


def test_bad_requests_get_error_replies(lake, mount):
    cols = build(lake)
    m = mount(lake)
    other = tensorfs.Stager(m.path, "d/main", ["label"], batch_size=8)
    held = other.stage([1, 2, 3])
    s = Session(m)
    assert s.req("open d/main cols=label,image depth=2 batch=64").startswith("ok stream=1 ")
    for line, name in BAD:
        r = s.req(line)
        assert r.startswith(f"error {name} "), f"{line!r} -> {r!r}"
        assert len(r.split(" ", 2)[2]) > 5, f"no message: {r!r}"
        # after every bad request the session still works
        ok = s.req("stage stream=1 rows=7,8")
        assert ok.startswith("ok ") and fields(ok)["rows"] == "2", ok
        assert s.req(f"release stream=1 slot={fields(ok)['slot']}") == "ok"
    # numbers as sent, never wrapped
    r = s.req("release stream=1 slot=9223372036854775808")
    assert r.startswith("error EINVAL slot 9223372036854775808:"), r
    r = s.req("next stream=1 batch=18446744073709551615")
    assert r.startswith("error E2BIG batch=18446744073709551615 "), r
    # slots hold what a batch can: a batch larger than the dataset gets slots of its rows
    r = s.req("open d/main cols=image batch=100000000000")
    assert r.startswith("ok ") and fields(r)["batch"] == "3000", r
    assert int(fields(r)["slot_bytes"]) < 3000 * 200 + 4096, r
    assert s.req(f"close stream={fields(r)['stream']}") == "ok"
    # bytes that are not text, NULs inside, an overlong word
    assert s.req(b"\xff\xfe\x00stats\n").startswith("error EINVAL ")
    assert s.req(b"sta\x00ts\n").startswith("error EINVAL ")
    assert s.req("open " + "x" * 5000 + " cols=a").startswith("error ")
    # busy slots
    assert fields(s.req("stage stream=1 rows=1 slot=0"))["slot"] == "0"
    assert s.req("stage stream=1 rows=1 slot=0").startswith("error EBUSY ")
    assert fields(s.req("stage stream=1 rows=1"))["slot"] == "1"
    assert s.req("stage stream=1 rows=1").startswith("error EBUSY no free slot")
    assert s.req("next stream=1 batch=4").startswith("error EBUSY ")
    assert s.req("release stream=1 slot=all") == "ok"
    assert fields(s.req("next stream=1 batch=4"))["pos"] == "0"
    # too many streams in one session
    replies = [s.req("open d/main cols=label batch=1 depth=1") for _ in range(16)]
    assert sum(r.startswith("ok ") for r in replies) == 15
    assert replies[-1].startswith("error EMFILE "), replies[-1]
    s.close()
    # the other session and the daemon are unharmed
    assert np.array_equal(held["label"], cols["label"][[1, 2, 3]])
    assert np.array_equal(other.stage([9])["label"], cols["label"][[9]])
    other.close()
    assert staging_stats(m)["errors"] >= len(BAD)
    assert np.array_equal(np.load(m.path / "d" / "main" / "label.npy"), cols["label"])


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def pending(fd):
    """Whatever replies the session holds now (a read never waits)."""
    return os.read(fd, 65536)


def test_request_split_across_writes(lake, mount):
    """A request is a whole line, however the writer cuts it into write() calls."""
    cols = build(lake)
    m = mount(lake)
    s = Session(m)
    reqs = [b"open d/main cols=label,image batch=4\n", b"stage stream=%d rows=5,6\n",
            b"close stream=%d\n", b"bogus request=1\n"]
    stream = 0
    for req in reqs:
        for cut in range(1, len(req)):
            if b"%d" in req:
                if stream == 0:
                    stream = int(fields(s.req("open d/main cols=label batch=4"))["stream"])
                line = req % stream
            else:
                line = req
            cut = min(cut, len(line) - 1)
            write_all(s.fd, line[:cut])
            assert pending(s.fd) == b"", f"reply to half a request {line[:cut]!r}"
            write_all(s.fd, line[cut:])
            reply = pending(s.fd).decode()
            assert reply.count("\n") == 1, f"{line!r} cut at {cut}: {reply!r}"
            if line.startswith(b"open"):
                assert reply.startswith("ok stream="), reply
                assert s.req(f"close stream={fields(reply)['stream']}") == "ok"
            elif line.startswith(b"stage"):
                f = fields(reply)
                assert f["rows"] == "2", reply
                batch = np.frombuffer(open(f["file"], "rb").read(), dtype=np.uint8)
                off = int(f["offset"])
                got = batch[off:off + 16].view(np.int64)
                assert np.array_equal(got, cols["label"][[5, 6]])
                assert s.req(f"release stream={stream} slot={f['slot']}") == "ok"
            elif line.startswith(b"close"):
                assert reply == "ok\n", reply
                stream = 0
            else:
                assert reply.startswith("error EINVAL unknown request 'bogus'"), reply
    # many requests in one write, the last one cut: the whole ones answer, the cut one waits
    write_all(s.fd, b"stats\nstats\nsta")
    assert pending(s.fd).decode().count("ok sessions=") == 2
    write_all(s.fd, b"ts\n")
    assert pending(s.fd).decode().startswith("ok sessions=")
    s.close()


def test_overlong_request_line(lake, mount):
    """A line over the limit gets one error reply and is dropped to its newline."""
    build(lake)
    m = mount(lake)
    s = Session(m)
    limit = 1 << 20  # TFS_CTL_LINE_MAX
    # exactly at the limit is a request
    line = b"stats" + b" " * (limit - 5)
    write_all(s.fd, line + b"\n")
    assert pending(s.fd).startswith(b"ok sessions="), "a line of the limit was refused"
    # one byte over, in pieces, then a good request after its newline in the same write
    long = b"stage stream=1 rows=" + b"1," * limit
    for i in range(0, len(long), 100000):
        write_all(s.fd, long[i:i + 100000])
    write_all(s.fd, b"9\nstats\n")
    replies = pending(s.fd).decode().splitlines()
    assert len(replies) == 2, replies
    assert replies[0].startswith("error E2BIG request line longer than 1048576 bytes"), replies
    assert replies[1].startswith("ok sessions="), replies
    assert fields(replies[1])["errors"] == "1", replies[1]
    # the session goes on as before
    assert s.req("open d/main cols=label batch=4").startswith("ok stream=1 ")
    s.close()


def test_ioctl_path_from_c_client(lake, mount, tmp_path):
    if not os.access(CTL_CLIENT, os.X_OK):
        pytest.fail(f"ctl_client not built: {CTL_CLIENT} (make builds it)")
    cols = build(lake)
    m = mount(lake)
    out = tmp_path / "out"
    out.mkdir()
    ops = ["rows:5,9,12,2999,0,5", "range:100:164", "next:40", "next:40", "next:100000",
           "rows:3000", "release:2", "text:stats", "seek:2990", "all:4", "stats",
           # TFS_CTL_IOC_NEXT: each batch given back in the call for the next; a slot not
           # leased, or a negative one other than -1, refused with no batch made (the next
           # call goes on from the same row)
           "seek:2990", "each:4", "seek:2500", "after:3:3", "after:3:-2", "after:3:-1",
           "stats"]
    p = subprocess.run([CTL_CLIENT, str(m.path), "d/main", "image,feat", "host", str(out)] + ops,
                       capture_output=True, text=True, timeout=60 * SLOW)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(f"stream 1 rows {N} slots 4 batch 1024"), lines
    expect = [[5, 9, 12, 2999, 0, 5], list(range(100, 164)), list(range(0, 40)),
              list(range(40, 80)), list(range(2990, 2994)), list(range(2994, 2998)),
              list(range(2998, 3000)), list(range(2990, 2994)), list(range(2994, 2998)),
              list(range(2998, 3000)), list(range(2500, 2503))]
    batches = [ln for ln in lines if ln.startswith("batch ")]
    assert len(batches) == len(expect), lines
    for i, rows in enumerate(expect):
        img = np.fromfile(out / f"{i}_image.bin", dtype=np.uint8).reshape(-1, 8, 8, 3)
        feat = np.fromfile(out / f"{i}_feat.bin", dtype="<f4").reshape(-1, 5)
        assert np.array_equal(img, cols["image"][rows]), i
        assert np.array_equal(feat, cols["feat"][rows]), i
    assert f"error -{errno.E2BIG} " in p.stdout   # next:100000
    assert f"error -{errno.ERANGE} " in p.stdout  # rows:3000
    assert f"release -{errno.EINVAL}" in p.stdout  # slot 2 was not leased
    assert p.stdout.count(f"end -{errno.ENODATA} end of stream") == 2
    assert f"error -{errno.EINVAL} slot 3 of stream 1 is not leased" in p.stdout
    assert f"error -{errno.EINVAL} release=-2: a slot, or -1 for none" in p.stdout
    assert "text " in p.stdout and " ok sessions=1 " in p.stdout
    # every slot given back, each:4's last one in the call that found the end
    assert p.stdout.count("stats 0 sessions 1 streams 1 leased 0") == 2, p.stdout
    # ioctl errors: an unknown dataset, a missing device
    for target, col, dev, code in (("nope/main", "image", "host", errno.ENOENT),
                                   ("d/main", "nope", "host", errno.EINVAL),
                                   ("d/main", "image", "cuda:0", errno.ENODEV)):
        p = subprocess.run([CTL_CLIENT, str(m.path), target, col, dev, str(out)],
                           capture_output=True, text=True, timeout=30 * SLOW)
        assert p.returncode == 3 and p.stdout.startswith(f"error -{code} "), p.stdout
    # a command the control file does not know, and ioctls on other files
    import fcntl
    fd = os.open(ctl_path(m), os.O_RDWR)
    try:
        with pytest.raises(OSError) as ei:
            fcntl.ioctl(fd, 0xB9FF, b"\0" * 8)
        assert ei.value.errno in (errno.ENOTTY, errno.EINVAL)
    finally:
        os.close(fd)
    assert staging_stats(m)["slots_leased"] == 0
