# SPDX-License-Identifier: MIT
"""How a URL source is fetched: a large one into an unlinked file in $TMPDIR, not into memory;
as ranged GETs of the [http] part size, `parallel` of them in flight at once, each retried on
its own; read by the importer as its bytes arrive (a tar's samples, an .npy's rows), so that
the import overlaps the fetch; a fetch that fails fails the import, never passing for damage in
the source, and leaves the dataset as it was."""
import contextlib
import hashlib
import json
import os
import subprocess
import time

import numpy as np
import pytest

from conftest import SANITIZE, TENSORFS_BIN, _check_sanitizer_text, write_tar
from faultproxy import FaultProxy
from test_megatron import write_megatron
from s3help import Nginx


MiB = 1 << 20


def shmem():
    """The machine's shared memory in bytes (/proc/meminfo Shmem: tmpfs files and memfds)."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Shmem in /proc/meminfo")


def open_files(pid):
    """The paths of what process pid has open (those it closes meanwhile may be missing)."""
    out = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                out.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return out


def spooled(files, spool):
    """Those of files that are a source's spool file in spool: unlinked, unnamed (O_TMPFILE:
    "#INODE") or named tensorfs-source-* (where O_TMPFILE is not supported); not a sanitizer
    runtime's own files there."""
    return [f for f in files if f.startswith(f"{spool}/") and f.endswith(" (deleted)") and
            os.path.basename(f).startswith(("#", "tensorfs-source-"))]


def watch(lake, ds, errfile, sample, *args):
    """`tensorfs import` into ds, run to its end with sample(pid) called every 2 ms; its stderr
    (the import must succeed)."""
    lake.create(ds)
    end = time.monotonic() + 120
    with open(errfile, "w") as fe:
        p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url(ds), *map(str, args)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe)
        while p.poll() is None:
            sample(p.pid)
            if time.monotonic() > end:
                p.kill()
                p.wait()
                pytest.fail(f"import {ds} did not end in 120 s")
            time.sleep(0.002)
    err = errfile.read_text()
    _check_sanitizer_text(err, "tensorfs import")
    assert p.returncode == 0, err
    return err


def watch_import(lake, ds, errfile, *args):
    """watch() sampling the import's open files and the machine's shared memory: (stderr, the
    files it had open, peak Shmem growth in bytes)."""
    base, files, peak = shmem(), set(), [0]

    def sample(pid):
        peak[0] = max(peak[0], shmem() - base)
        files.update(open_files(pid))
    return watch(lake, ds, errfile, sample, *args), files, peak[0]


def watch_disk(lake, ds, errfile, disk, *args):
    """watch() sampling the bytes in use on disk (a file system): (stderr, the peak bytes in
    use)."""
    peak = [0]

    def sample(_):
        v = os.statvfs(disk)
        peak[0] = max(peak[0], (v.f_blocks - v.f_bfree) * v.f_frsize)
    return watch(lake, ds, errfile, sample, *args), peak[0]


def write_lines(path, mib):
    """About mib MiB of JSON Lines, a 32 KB text field a row; returns the row count."""
    rows = mib * MiB // 32032
    with open(path, "w") as f:
        for i in range(rows):
            f.write(json.dumps({"i": i, "t": f"{i:08d} " + "x" * 32000}) + "\n")
    return rows


def quick_to_fail(monkeypatch, spool):
    """Spool to spool, 2 ranges at once, one retry 5 ms later: a server that goes away fails
    the fetch at once."""
    for k, v in (("TMPDIR", spool), ("TENSORFS_HTTP_PARALLEL", 2),
                 ("TENSORFS_HTTP_BACKOFF_MS", 5), ("TENSORFS_HTTP_RETRIES", 1)):
        monkeypatch.setenv(k, str(v))


def small_ranges(monkeypatch):
    """Ranges of 1 MiB, 2 at once: a source read once is fetched 8 MiB ahead of its reader."""
    monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(MiB))
    monkeypatch.setenv("TENSORFS_HTTP_PARALLEL", "2")


def column_digest(m, ds):
    return hashlib.sha256((m / ds / "main" / "t" / "lines.txt").read_bytes()).hexdigest()


def same_as_local(lake, mount, ds, path, rows):
    """ds, imported from path's URL, holds the rows of path imported from the local disk."""
    lake.create("local")
    lake.import_("local", {}, "--jsonl", path)
    m = mount(lake)
    assert lake.info(ds)["rows"] == rows
    assert column_digest(m, ds) == column_digest(m, "local")


@pytest.mark.skipif(SANITIZE, reason="the fetch's buffers are the point, not its checks")
def test_a_large_source_is_spooled_to_disk_and_fetched_in_parallel(lake, mount, tmp_path,
                                                                   monkeypatch):
    """A source over 64 MiB is fetched into an unlinked file in $TMPDIR, not into memory, as
    ranged GETs of the part size with `parallel` of them in flight at once; the dataset equals
    the local file's import, and nothing is left in $TMPDIR."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    rows = write_lines(src / "a.jsonl", 80)
    size = (src / "a.jsonl").stat().st_size
    # 20 MB/s a response: 20 parts of 4 MiB take 4 s one at a time, 1 s four at a time.
    web = Nginx(tmp_path / "nginx", src, limit_rate="20m")
    try:
        monkeypatch.setenv("TMPDIR", str(spool))
        monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(4 * MiB))
        monkeypatch.setenv("TENSORFS_HTTP_PARALLEL", "4")
        err, files, grew = watch_import(lake, "web", tmp_path / "err", "--jsonl", f"{web.url}/a.jsonl")
        log = web.access_log()
    finally:
        web.stop()
    assert spooled(files, spool), (files, err)
    assert grew < 40 * MiB, f"shared memory grew by {grew / MiB:.0f} MiB during the import"
    assert os.listdir(spool) == []
    gets = sorted((int(r[6:].split("-")[0]), int(r.split("-")[1]), t0, t1)
                  for st, t0, t1, r, req, _ in log if req.startswith("GET") and st == 206)
    assert [(a, b) for a, b, _, _ in gets] == \
        [(o, min(o + 4 * MiB, size) - 1) for o in range(0, size, 4 * MiB)], log
    at_once = max(sum(1 for _, _, s, e in gets if s <= t < e) for _, _, t, _ in gets)
    assert at_once >= 2, f"the parts were fetched one at a time: {gets}"
    same_as_local(lake, mount, "web", src / "a.jsonl", rows)


def test_a_source_that_cannot_be_spooled_is_held_in_memory(lake, tmp_path, monkeypatch):
    """With no spool directory, a large source is fetched into memory after all, with a
    warning that names the reason and $TMPDIR."""
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "x.npy", np.arange(9 * MiB, dtype=np.int64).reshape(-1, 8))
    web = Nginx(tmp_path / "nginx", src)
    try:
        monkeypatch.setenv("TMPDIR", str(tmp_path / "none"))
        lake.create("d")
        p = lake.import_("d", {"x": f"{web.url}/x.npy"})
    finally:
        web.stop()
    assert "cannot spool" in p.stderr and str(tmp_path / "none") in p.stderr and \
        "TMPDIR" in p.stderr and "holding it in memory" in p.stderr, p.stderr
    assert lake.info("d")["rows"] == 9 * MiB // 8


def test_a_large_source_survives_failed_ranges(lake, mount, tmp_path, monkeypatch):
    """Ranged GETs of a spooled source that fail (503, 429, resets, short bodies, stalls) are
    retried one by one: the dataset equals the local file's import."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    rows = write_lines(src / "a.jsonl", 72)
    web = Nginx(tmp_path / "nginx", src)
    proxy = FaultProxy(web.port, rate=0.3, seed=5, stall_s=2.5, workdir=tmp_path,
                       faults=("503", "429", "reset", "truncate", "stall"))
    try:
        for k, v in (("TMPDIR", spool), ("TENSORFS_HTTP_PART_SIZE", 4 * MiB),
                     ("TENSORFS_HTTP_PARALLEL", 4), ("TENSORFS_HTTP_STALL_MS", 1000),
                     ("TENSORFS_HTTP_BACKOFF_MS", 5), ("TENSORFS_HTTP_BACKOFF_MAX_MS", 50),
                     ("TENSORFS_HTTP_RETRIES", 6)):
            monkeypatch.setenv(k, str(v))
        lake.create("web")
        lake.import_("web", {}, "--jsonl", f"{proxy.endpoint}/lake/a.jsonl")
    finally:
        proxy.stop()
        web.stop()
    assert proxy.injected() >= 3, proxy.counts
    assert os.listdir(spool) == []
    same_as_local(lake, mount, "web", src / "a.jsonl", rows)


def test_a_fetch_that_fails_leaves_the_dataset_unchanged(lake, tmp_path, monkeypatch):
    """The server goes away in the middle of a spooled source's fetch: the import fails naming
    the source and the byte it could not read, nothing is committed, and the spool file is
    gone."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    write_lines(src / "a.jsonl", 72)
    web = Nginx(tmp_path / "nginx", src, limit_rate="10m")
    quick_to_fail(monkeypatch, spool)
    lake.create("d")
    before = lake.info("d")
    url = f"{web.url}/a.jsonl"
    with open(tmp_path / "err", "w") as fe:
        p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url("d"), "--jsonl", url],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe)
        try:
            end = time.monotonic() + 30
            while not spooled(open_files(p.pid), spool):
                assert p.poll() is None and time.monotonic() < end, "no spool file was seen"
                time.sleep(0.005)
        finally:
            web.stop()
        assert p.wait(timeout=60) != 0
    err = (tmp_path / "err").read_text()
    _check_sanitizer_text(err, "tensorfs import")
    assert f"{url}: read at byte " in err, err
    assert lake.info("d") == before
    assert os.listdir(spool) == []


def write_shard(path, samples, size):
    """A WebDataset shard of `samples` samples, each a class and `size` random bytes."""
    rng = np.random.default_rng(8)
    write_tar(path, ((f"{i:05d}{ext}", data) for i in range(samples)
                     for ext, data in ((".cls", str(i % 7).encode()),
                                       (".bin", rng.bytes(size)))))


def test_an_import_reads_its_source_as_it_arrives(lake, tmp_path, monkeypatch):
    """An .npy's first chunk is written, and a shard's, a JSON Lines file's, a Megatron-LM
    .bin's or an .npz's (its directory at its end, fetched first) first rows imported, while
    many of its ranges are still to come."""
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "x.npy", np.arange(3 * MiB, dtype=np.int64).reshape(-1, 64))  # 24 MiB
    write_shard(src / "s.tar", 48, 512 << 10)  # 24 MiB
    lines = write_lines(src / "a.jsonl", 24)
    write_megatron(src / "m", [np.full(64 << 10, i, np.int32) for i in range(96)], np.int32)
    np.savez(src / "z.npz", y=np.arange(3 * MiB, dtype=np.int64).reshape(-1, 64) + 5)
    # 5 MB/s a response, 2 at once: 24 parts of 1 MiB take about 2.5 s (a sanitizer build
    # parses the first megabytes in a fraction of that).
    web = Nginx(tmp_path / "nginx", src, limit_rate="5m")
    small_ranges(monkeypatch)
    try:
        for ds, args in (("npy", [f"x={web.url}/x.npy"]),
                         ("wds", ["--webdataset", f"{web.url}/s.tar"]),
                         ("jsonl", ["--jsonl", f"{web.url}/a.jsonl"]),
                         ("megatron", ["--megatron", f"{web.url}/m"]),
                         ("npz", ["--npz", f"{web.url}/z.npz"])):
            lake.create(ds)
            objects = lake.root / ds / "objects"
            before = set(objects.rglob("*")) if objects.exists() else set()
            answered = len(web.access_log())
            p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url(ds), *args,
                                  "--chunk-size", "1M", "--threads", "2"],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
            end = time.monotonic() + 60
            while p.poll() is None and not set(objects.rglob("*")) - before:
                assert time.monotonic() < end, f"{ds}: no chunk written in 60 s"
                time.sleep(0.002)
            ranges = len(web.access_log()) - answered
            _, err = p.communicate(timeout=60)
            _check_sanitizer_text(err, "tensorfs import")
            assert p.returncode == 0, err
            print(f"{ds}: {ranges} of 24 ranges in before its first chunk")
            # Fetched whole first, every range (and the HEAD) would be in. A shard's import
            # reads 12 samples ahead (6 MiB) before its first is added.
            assert ranges < 18, f"{ds}: {ranges} of 24 ranges were in before its first chunk"
    finally:
        web.stop()
    assert lake.info("npy")["rows"] == 3 * MiB // 64 and lake.info("wds")["rows"] == 48
    assert lake.info("jsonl")["rows"] == lines and lake.info("megatron")["rows"] == 96
    assert lake.info("npz")["rows"] == 3 * MiB // 64


def test_a_shard_is_fetched_once(lake, tmp_path, monkeypatch):
    """The first shard's fields are found from its first sample, read from the fetch the
    import then reads it from: the shard's bytes cross the network once, not once a pass."""
    src = tmp_path / "src"
    src.mkdir()
    write_shard(src / "s.tar", 48, 512 << 10)  # 24 MiB
    size = (src / "s.tar").stat().st_size
    web = Nginx(tmp_path / "nginx", src, limit_rate="20m")
    small_ranges(monkeypatch)
    try:
        lake.create("d")
        lake.import_("d", {}, "--webdataset", f"{web.url}/s.tar")
        sent = sum(e[5] for e in web.access_log() if e[4].startswith("GET"))
    finally:
        web.stop()
    assert lake.info("d")["rows"] == 48
    assert sent == size, f"{sent / MiB:.1f} MiB sent for a {size / MiB:.1f} " \
        "MiB shard"


def test_a_shard_whose_fetch_fails_fails_the_import(lake, tmp_path, monkeypatch):
    """The server goes away while a shard is imported: the import fails naming the shard's
    URL, without taking the rest of the shard for damage (no sample skipped), and the dataset
    stays as it was."""
    src, spool = tmp_path / "src", tmp_path / "spool"
    src.mkdir()
    spool.mkdir()
    write_shard(src / "s.tar", 72, 1 << 20)  # 72 MiB: spooled
    web = Nginx(tmp_path / "nginx", src, limit_rate="10m")
    quick_to_fail(monkeypatch, spool)
    lake.create("d")
    before = lake.info("d")
    url = f"{web.url}/s.tar"
    p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url("d"), "--webdataset", url],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    objects = lake.root / "d" / "objects"
    before_objects = set(objects.rglob("*")) if objects.exists() else set()
    try:
        end = time.monotonic() + 30
        # the main pass has written a chunk: its fetch is under way
        while not set(objects.rglob("*")) - before_objects:
            assert p.poll() is None and time.monotonic() < end, "no chunk was written"
            time.sleep(0.005)
    finally:
        web.stop()
    out, err = p.communicate(timeout=60)
    _check_sanitizer_text(err, "tensorfs import")
    assert p.returncode != 0, out
    assert f"{url}: read at byte " in err, err
    assert "skipped" not in out + err and "lost" not in out + err, out + err
    assert lake.info("d") == before
    assert os.listdir(spool) == []


@pytest.mark.parametrize("change", ["content", "size"])
def test_a_source_that_changes_while_read_fails_the_import(lake, tmp_path, monkeypatch, change):
    """The object is replaced between two of its ranges (the same size and another ETag, or
    another size): its ranges would mix two versions, so the import fails saying so, and the
    dataset stays as it was."""
    src = tmp_path / "src"
    src.mkdir()
    write_lines(src / "a.jsonl", 24)
    web = Nginx(tmp_path / "nginx", src, limit_rate="10m")
    for k, v in (("TENSORFS_HTTP_PART_SIZE", MiB), ("TENSORFS_HTTP_PARALLEL", 2)):
        monkeypatch.setenv(k, str(v))
    lake.create("d")
    before = lake.info("d")
    url = f"{web.url}/a.jsonl"
    p = subprocess.Popen([TENSORFS_BIN, "import", lake.ds_url("d"), "--jsonl", url],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 30
        while sum(1 for e in web.access_log() if e[0] == 206) < 2:
            assert p.poll() is None and time.monotonic() < end, "no range was answered"
            time.sleep(0.005)
        new = src / "new.jsonl"
        data = (src / "a.jsonl").read_bytes()
        new.write_bytes(data.replace(b'"i": 1,', b'"i": 7,', 1) if change == "content"
                        else data + b'{"i": -1, "t": "more"}\n')
        st = (src / "a.jsonl").stat()
        os.utime(new, (st.st_atime + 60, st.st_mtime + 60))  # another ETag, surely
        os.replace(new, src / "a.jsonl")
        out, err = p.communicate(timeout=60)
    finally:
        web.stop()
    _check_sanitizer_text(err, "tensorfs import")
    assert p.returncode != 0, out
    assert f"{url}: changed while it was read" in err, err
    assert lake.info("d") == before


def test_the_next_shard_is_fetched_while_one_is_imported(lake, mount, tmp_path, monkeypatch):
    """Shards by URL: a shard's fetch begins as the import of the one before it begins, so the
    second shard's ranges are asked for while the first is still arriving; every sample is
    imported, in order."""
    src = tmp_path / "src"
    src.mkdir()
    for k in range(2):
        write_shard(src / f"s{k}.tar", 16, 512 << 10)  # 8 MiB each
    web = Nginx(tmp_path / "nginx", src, limit_rate="10m")
    small_ranges(monkeypatch)
    try:
        lake.create("d")
        lake.import_("d", {}, "--webdataset", f"{web.url}/s0.tar", f"{web.url}/s1.tar")
        log = [e for e in web.access_log() if e[4].startswith("GET") and e[0] == 206]
    finally:
        web.stop()
    first_ends = [end for _, _, end, _, req, _ in log if "/s0.tar " in req]
    second_starts = [start for _, start, _, _, req, _ in log if "/s1.tar " in req]
    assert min(second_starts) < max(first_ends), "s1.tar was asked for after s0.tar arrived"
    m = mount(lake)
    keys = (m / "d" / "main" / "key" / "lines.txt").read_text().split()
    assert keys == [f"{i:05d}" for i in range(16)] * 2


@pytest.mark.parametrize("spool", ["full", "none"])
def test_a_source_larger_than_disk_and_memory_is_refused(lake, tmp_path, monkeypatch, spool):
    """An object held whole while it is imported (a text file: its rows are counted before
    any is written) larger than the room in the spool directory (or with no spool directory)
    and than a quarter of memory is refused before any of it is fetched, saying what to set;
    the dataset stays as it was."""
    src, dirs = tmp_path / "src", {"full": tmp_path / "spool", "none": tmp_path / "none"}
    src.mkdir()
    dirs["full"].mkdir()
    with open(src / "huge.txt", "wb") as f:
        f.truncate(4 << 40)  # 4 TiB, sparse: more than this disk and a quarter of memory
    web = Nginx(tmp_path / "nginx", src)
    monkeypatch.setenv("TMPDIR", str(dirs[spool]))
    try:
        lake.create("d")
        before = lake.info("d")
        p = lake.import_("d", {"t": f"{web.url}/huge.txt"}, check=False)
        ranged = [e for e in web.access_log() if e[0] == 206]
    finally:
        web.stop()
    assert p.returncode != 0
    assert "huge.txt: cannot spool its 4398046511104 bytes to disk" in p.stderr, p.stderr
    assert ("no room for" if spool == "full" else "No such file") in p.stderr, p.stderr
    assert "set TMPDIR to a directory with room" in p.stderr, p.stderr
    assert ranged == [] and lake.info("d") == before
    assert spool == "none" or os.listdir(dirs["full"]) == []


@contextlib.contextmanager
def small_disk(path, mib):
    """A file system of mib MiB at path (a tmpfs: spool files on it can be seen to fill it),
    unmounted after; the test is skipped where none can be mounted (not root)."""
    path.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m,mode=0700", "tmpfs",
                        str(path)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for $TMPDIR: {p.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.parametrize("kind", ["npy", "webdataset", "megatron", "jsonl"])
def test_a_source_read_once_holds_a_window_of_it_not_all(lake, mount, tmp_path, monkeypatch,
                                                         kind):
    """An .npy's rows and a shard's samples are read once, front to back: the fetch runs a
    window ahead of the import (4 x parallel x part size: 8 MiB here) and the bytes imported
    give their room back, so sources of 96 MiB (an .npy, a Megatron-LM .bin, JSON Lines) and
    2 x 72 MiB (shards) import through a $TMPDIR of 24 MiB, on disk (not
    in memory instead), and the dataset equals the local files' import."""
    src = tmp_path / "src"
    src.mkdir()
    if kind == "npy":
        arr = np.random.default_rng(3).integers(0, 1 << 40, size=(96 * MiB // 64, 8))
        np.save(src / "x.npy", arr)
        names = ["x.npy"]
    elif kind == "jsonl":
        write_lines(src / "a.jsonl", 96)
        names = ["a.jsonl"]
    elif kind == "megatron":
        rng = np.random.default_rng(4)
        write_megatron(src / "m", [rng.integers(0, 1 << 31, 256 << 10, dtype=np.int32)
                                   for _ in range(96)], np.int32)
        names = ["m"]
    else:
        names = ["s0.tar", "s1.tar"]
        for i, name in enumerate(names):  # 72 MiB each: spooled, not in a memfd
            write_tar(src / name, ((f"{i}{k:04d}{ext}", data) for k in range(144)
                                   for ext, data in ((".cls", str(k % 7).encode()),
                                                     (".bin", os.urandom(512 << 10)))))
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    try:
        with small_disk(tmp_path / "spool", 24) as spool:
            monkeypatch.setenv("TMPDIR", str(spool))
            urls = [f"{web.url}/{n}" for n in names]
            args = {"npy": [f"x={urls[0]}"], "megatron": ["--megatron", urls[0]],
                    "jsonl": ["--jsonl", urls[0]], "webdataset": ["--webdataset", *urls]}[kind]
            err, peak = watch_disk(lake, "web", tmp_path / "err", spool, *args,
                                       "--chunk-size", "1M")
            assert os.listdir(spool) == []
    finally:
        web.stop()
    assert "holding it in memory" not in err, err
    # A source's window, a piece given back late and one waited for past it, and the reader's
    # own step (a MiB or so); a shard and the next one, fetched beside it.
    assert peak <= (24 if kind == "webdataset" else 12) * MiB, f"{peak / MiB:.1f} MiB in $TMPDIR"
    print(f"{kind}: at most {peak / MiB:.1f} MiB in $TMPDIR")
    lake.create("local")
    if kind == "npy":
        lake.import_("local", {"x": src / "x.npy"}, "--chunk-size", "1M")
    elif kind == "megatron":
        lake.import_("local", {}, "--megatron", src / "m", "--chunk-size", "1M")
    elif kind == "jsonl":
        lake.import_("local", {}, "--jsonl", src / "a.jsonl", "--chunk-size", "1M")
    else:
        lake.import_("local", {}, "--webdataset", *(src / n for n in names), "--chunk-size", "1M")
    web_info, local_info = lake.info("web"), lake.info("local")
    assert web_info["rows"] == local_info["rows"] == \
        {"npy": 96 * MiB // 64, "megatron": 96, "webdataset": 288, "jsonl": 96 * MiB // 32032}[kind]
    m = mount(lake)
    for f in {"npy": ["x.npy"], "megatron": ["tokens/data.bin", "tokens/offsets.npy"],
              "jsonl": ["i.npy", "t/data.bin"],
              "webdataset": ["cls.npy", "bin/data.bin", "key/lines.txt"]}[kind]:
        assert (m / "web" / "main" / f).read_bytes() == (m / "local" / "main" / f).read_bytes(), f


def test_the_window_is_a_setting(lake, tmp_path, monkeypatch):
    """[http] window sets how far a source read once is fetched ahead of its import, whatever
    the part size and parallel fetches: for an 80 MiB .npy, 8 ranges of 1 MiB in flight (a 32 MiB window by
    default, which a 12 MiB $TMPDIR cannot hold: the source is held in memory, with a warning)
    import through 12 MiB with window = 4M; a window under 1 MiB is refused."""
    src = tmp_path / "src"
    src.mkdir()
    arr = np.random.default_rng(5).integers(0, 1 << 40, size=(80 * MiB // 64, 8))
    np.save(src / "x.npy", arr)
    web = Nginx(tmp_path / "nginx", src)
    monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(MiB))
    monkeypatch.setenv("TENSORFS_HTTP_PARALLEL", "8")
    url = f"x={web.url}/x.npy"
    try:
        with small_disk(tmp_path / "spool", 12) as spool:
            monkeypatch.setenv("TMPDIR", str(spool))
            lake.create("default")
            p = lake.import_("default", {"x": f"{web.url}/x.npy"})
            assert "holding it in memory" in p.stderr, p.stderr
            monkeypatch.setenv("TENSORFS_HTTP_WINDOW", "4M")
            err, peak = watch_disk(lake, "web", tmp_path / "err", spool, url)
            monkeypatch.setenv("TENSORFS_HTTP_WINDOW", "4096")
            lake.create("bad")
            bad = lake.import_("bad", {"x": f"{web.url}/x.npy"}, check=False)
            assert os.listdir(spool) == []
    finally:
        web.stop()
    assert "holding it in memory" not in err, err
    assert peak <= 10 * MiB, f"{peak / MiB:.1f} MiB in $TMPDIR"
    print(f"window 4M: at most {peak / MiB:.1f} MiB in $TMPDIR")
    assert lake.info("web")["rows"] == lake.info("default")["rows"] == len(arr)
    assert bad.returncode != 0 and "HTTP setting window = 4096" in bad.stderr, bad.stderr
    assert lake.info("bad")["rows"] == 0


def test_a_source_read_in_column_order_needs_room_for_all(lake, tmp_path, monkeypatch):
    """A Fortran-ordered .npy is read in column order, so all of it at once: with no room for
    it in $TMPDIR the import fails before fetching past the window, saying what to set, and the
    dataset stays as it was."""
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "f.npy", np.asfortranarray(np.zeros((96 * MiB // 64, 8), dtype=np.int64)))
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    try:
        with small_disk(tmp_path / "spool", 24) as spool:
            monkeypatch.setenv("TMPDIR", str(spool))
            lake.create("d")
            before = lake.info("d")
            p = lake.import_("d", {"x": f"{web.url}/f.npy"}, check=False)
            left = os.listdir(spool)
        sent = sum(e[5] for e in web.access_log() if e[4].startswith("GET"))
    finally:
        web.stop()
    assert p.returncode != 0
    assert "f.npy: needs all its 100663424 bytes held at once" in p.stderr, p.stderr
    assert "set TMPDIR to a directory with room" in p.stderr, p.stderr
    assert lake.info("d") == before and left == []
    assert sent <= 12 * MiB, f"{sent / MiB:.1f} MiB fetched for an import refused"


def test_a_megatron_bin_read_out_of_its_order_is_held_whole(lake, mount, tmp_path,
                                                              monkeypatch):
    """A Megatron-LM index whose sequences lie in .bin in another order than its own is read
    in the index's order: a URL's .bin is then held whole, not a window of it, and every
    sequence arrives as the index says."""
    src = tmp_path / "src"
    src.mkdir()
    seqs = [np.full(64 << 10, i, np.int32) for i in range(96)]  # 24 MiB
    write_megatron(src / "m", seqs[::-1], np.int32)  # .bin: the last sequence first
    idx = bytearray((src / "m.idx").read_bytes())
    size = 4 * (64 << 10)
    np.frombuffer(idx, np.int64, 96, 34 + 4 * 96)[:] = [size * (95 - i) for i in range(96)]
    (src / "m.idx").write_bytes(bytes(idx))
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    try:
        lake.create("d")
        lake.import_("d", {}, "--megatron", f"{web.url}/m")
    finally:
        web.stop()
    m = mount(lake)
    data = np.fromfile(m / "d" / "main" / "tokens" / "data.bin", np.uint32)
    assert np.array_equal(data, np.repeat(np.arange(96, dtype=np.uint32), 64 << 10))


def test_a_text_source_is_fetched_once(lake, mount, tmp_path, monkeypatch):
    """A text file's rows are counted and checked (UTF-8) before anything is written, then
    written: both readings read one fetch, so its bytes cross the network once."""
    src = tmp_path / "src"
    src.mkdir()
    lines = [f"line {i} " + "ü" * (i % 50) for i in range(60000)]
    (src / "a.txt").write_text("\n".join(lines) + "\n")
    size = (src / "a.txt").stat().st_size
    web = Nginx(tmp_path / "nginx", src)
    monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", str(MiB))
    try:
        lake.create("d")
        lake.import_("d", {"t": f"{web.url}/a.txt"})
        sent = sum(e[5] for e in web.access_log() if e[4].startswith("GET"))
    finally:
        web.stop()
    assert sent == size, f"{sent} bytes sent for a {size}-byte file"
    m = mount(lake)
    assert (m / "d" / "main" / "t" / "lines.txt").read_text().splitlines() == lines


def write_widening(path, mib, at):
    """About mib MiB of JSON Lines whose integer fields turn float part-way: field a at each
    fraction of the lines in at (e.g. [0.3]), field b at the next; returns the rows."""
    rows = mib * MiB // 4000
    marks = {int(rows * f): "ab"[i] for i, f in enumerate(at)}
    with open(path, "w") as fo:
        for i in range(rows):
            row = {"a": i, "b": -i, "t": f"{i:08d} " + "y" * 3960}
            if i in marks:
                row[marks[i]] = i + 0.5
            fo.write(json.dumps(row) + "\n")
    return rows


@pytest.mark.parametrize("at", [[0.3], [0.3, 0.9]])
def test_a_jsonl_source_read_again_is_fetched_again(lake, mount, tmp_path, monkeypatch, at):
    """A field that widens past the first guess makes the lines be read again from the start;
    a URL's lines added were given back by then, so it is fetched again, read once again (a
    window of it). A second field widening later makes a third reading, whose kinds are read
    from every line first: fetched once more, held whole. Each fetch but the last stops a
    window past the widened line. The dataset equals the local file's import."""
    src = tmp_path / "src"
    src.mkdir()
    rows = write_widening(src / "w.jsonl", 24, at)
    size = (src / "w.jsonl").stat().st_size
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    try:
        lake.create("web")
        p = lake.import_("web", {}, "--jsonl", f"{web.url}/w.jsonl")
        log = web.access_log()
    finally:
        web.stop()
    heads = [e for e in log if e[4].startswith("HEAD")]
    sent = sum(e[5] for e in log if e[4].startswith("GET"))
    assert len(heads) == len(at) + 1, log
    assert len(at) * size < sent < (len(at) + 1) * size, \
        f"{sent} bytes sent for a {size}-byte file read {len(at) + 1} times"
    assert "read again" in p.stderr, p.stderr
    lake.create("local")
    lake.import_("local", {}, "--jsonl", src / "w.jsonl")
    m = mount(lake)
    assert lake.info("web")["rows"] == rows
    for f in ("a.npy", "b.npy", "t/data.bin"):
        assert (m / "web" / "main" / f).read_bytes() == (m / "local" / "main" / f).read_bytes(), f
    assert np.load(m / "web" / "main" / "a.npy").dtype == np.float64


def test_a_jsonl_source_read_again_still_holds_a_window(lake, tmp_path, monkeypatch):
    """A field widened part-way through 96 MiB of JSON Lines: both readings of it hold a
    window of it, so the import goes through a $TMPDIR of 24 MiB, on disk."""
    src = tmp_path / "src"
    src.mkdir()
    rows = write_widening(src / "w.jsonl", 96, [0.5])
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    try:
        with small_disk(tmp_path / "spool", 24) as spool:
            monkeypatch.setenv("TMPDIR", str(spool))
            err, peak = watch_disk(lake, "web", tmp_path / "err", spool, "--jsonl",
                                       f"{web.url}/w.jsonl")
        heads = [e for e in web.access_log() if e[4].startswith("HEAD")]
    finally:
        web.stop()
    assert "holding it in memory" not in err, err
    assert len(heads) == 2 and peak <= 12 * MiB, (heads, f"{peak / MiB:.1f} MiB in $TMPDIR")
    assert lake.info("web")["rows"] == rows


def test_a_jsonl_source_replaced_before_it_is_read_again_fails(lake, tmp_path, monkeypatch):
    """The object is replaced (same size, another ETag) between the first fetch and the one a
    widened field makes: the rows would mix two versions, so the import fails saying so, and
    the dataset stays as it was."""
    src = tmp_path / "src"
    src.mkdir()
    write_widening(src / "w.jsonl", 24, [0.3])
    web = Nginx(tmp_path / "nginx", src)
    proxy = FaultProxy(web.port, workdir=tmp_path, retag_after_heads=1)
    small_ranges(monkeypatch)
    try:
        lake.create("d")
        before = lake.info("d")
        url = f"{proxy.endpoint}/lake/w.jsonl"
        p = lake.import_("d", {}, "--jsonl", url, check=False)
    finally:
        proxy.stop()
        web.stop()
    assert p.returncode != 0
    assert f"{url}: changed while it was read" in p.stderr, p.stderr
    assert lake.info("d") == before


def test_a_source_read_in_column_order_without_a_spool_is_refused(lake, tmp_path, monkeypatch):
    """With no spool directory a source read once is held in memory, a window of it; one that
    turns out to need all of it at once (a Fortran-ordered array of 4 TiB here) and is more
    than a quarter of memory is refused, saying what to set, and the dataset stays as it was."""
    src = tmp_path / "src"
    src.mkdir()
    rows = (4 << 40) // 64
    with open(src / "f.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<i8", "fortran_order": True,
                                                 "shape": (rows, 8)})
        f.truncate(f.tell() + rows * 64)  # sparse
    web = Nginx(tmp_path / "nginx", src)
    small_ranges(monkeypatch)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "none"))
    try:
        lake.create("d")
        before = lake.info("d")
        p = lake.import_("d", {"x": f"{web.url}/f.npy"}, check=False)
        sent = sum(e[5] for e in web.access_log() if e[4].startswith("GET"))
    finally:
        web.stop()
    assert p.returncode != 0
    assert "f.npy: needs all its" in p.stderr and "set TMPDIR" in p.stderr, p.stderr
    assert lake.info("d") == before
    assert sent <= 12 * MiB, f"{sent / MiB:.1f} MiB fetched for an import refused"
