# SPDX-License-Identifier: MIT
"""s3:// lakes against a real S3-protocol server on loopback (s3rver: it checks the access key
but not SigV4 signatures, which test_sigv4_botocore.py and the C unit tests cover): create, import, ls, info, log, branch, mount and read everything back; faults injected
by a proxy; configuration files and named remotes."""

import json
import os
import re
import time
import urllib.request

import numpy as np
import pytest

from conftest import HEADER_SIZE, check_column_file, load_schema, opened, run_proc, tfs
import s3help
from faultproxy import FaultProxy
from s3help import S3Server, UrlLake, s3_env


@pytest.fixture
def s3(tmp_path, monkeypatch):
    srv = S3Server(tmp_path / "s3data", buckets=("lake", "other"))
    s3_env(monkeypatch, srv.endpoint)
    yield srv
    srv.stop()


def columns(seed=0, rows=50_000):
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 255, size=(rows, 8, 8), dtype=np.uint8),
        "label": rng.integers(0, 1000, size=rows).astype(np.int64),
        "emb": rng.standard_normal((rows, 16)).astype(np.float32),
    }


def stats(mnt):
    with open(mnt / ".tensorfs" / "stats") as f:
        return json.load(f)


def test_s3_create_import_ls_info_log_mount(s3, tmp_path, mount):
    lk = UrlLake("s3://lake/lakes/main", tmp_path / "npy")
    cols = columns(1)
    lk.create("ds")
    lk.import_("ds", cols, "-m", "first", "--chunk-size", "256k")
    more = columns(2, rows=1000)
    lk.import_("ds", more, "-m", "second")
    rc, out, err = tfs("branch", lk.ds_url("ds"), "dev")
    assert rc == 0, err
    rc, out, err = tfs("ls", lk.url)
    assert rc == 0, err
    assert out.split() == ["ds"]
    info = lk.info("ds")
    assert info["rows"] == 51_000
    rc, out, err = tfs("log", lk.ds_url("ds"))
    assert rc == 0, err
    assert "second" in out and "first" in out and "create dataset" in out
    # refs as users write them: an abbreviated id (listed from the bucket) and ancestors
    ids = re.findall(r"^commit ([0-9a-f]{64})$", out, re.M)
    rc, out, err = tfs("log", lk.ds_url("ds"), ids[0][:6] + "~1", "-n", "1")
    assert rc == 0 and out.startswith(f"commit {ids[1]}"), (out, err)
    rc, out, err = tfs("info", lk.ds_url("ds"), "--ref", "main^^", "--json")
    assert rc == 0 and ids[2] in out, err
    # Nothing but the lake's objects in the bucket, under the prefix.
    keys = [p.relative_to(s3.root / "lake") for p in (s3.root / "lake").rglob("*")
            if p.is_file()]
    assert keys and all(str(k).startswith("lakes/main/ds/") for k in keys), keys[:5]

    m = mount(lk)
    assert sorted(n for n in os.listdir(m.path) if not n.startswith(".")) == ["ds"]
    assert {"commits", "dev", "main"} <= set(os.listdir(m / "ds"))
    for name, src in cols.items():
        full = np.concatenate([src, more[name]])
        check_column_file(m / "ds" / "main" / f"{name}.npy", full)
        check_column_file(m / "ds" / "dev" / f"{name}.npy", full)
    schema = load_schema(m / "ds" / "main" / "schema.json")
    assert schema["rows"] == 51_000
    st = stats(m.path)
    assert st["store"]["url"] == "s3://lake/lakes/main"
    assert st["store"]["gets"] > 0
    # A remote lake gets a chunk loader for 3 of every 4 connections the HTTP pool allows.
    assert st["prefetch"]["threads"] == max(24, os.cpu_count())


def test_s3_loaders_follow_the_connection_pool(s3, tmp_path, mount, monkeypatch):
    """[http] max_inflight sets the remote default of prefetch_threads; the option wins."""
    lk = UrlLake("s3://lake/lakes/pool", tmp_path / "npy")
    lk.create("ds")
    lk.import_("ds", {"x": np.arange(1000, dtype=np.int32)})
    monkeypatch.setenv("TENSORFS_HTTP_MAX_INFLIGHT", "64")
    assert stats(mount(lk, name="m64").path)["prefetch"]["threads"] == max(48, os.cpu_count())
    assert stats(mount(lk, opts=["prefetch_threads=3"], name="m3").path)["prefetch"]["threads"] == 3
    # -o max_inflight is [http] max_inflight for one mount: the loaders follow it too.
    monkeypatch.delenv("TENSORFS_HTTP_MAX_INFLIGHT")
    m = mount(lk, opts=["max_inflight=4", "gather_threads=1"], name="m4")
    assert stats(m.path)["prefetch"]["threads"] == 3
    assert (np.load(m / "ds" / "main" / "x.npy") == np.arange(1000)).all()


def test_s3_large_object_multipart_and_parallel_ranges(s3, tmp_path, mount, monkeypatch):
    """A single 70 MiB chunk is uploaded in parts and read back as parallel 1 MiB ranges."""
    monkeypatch.setenv("TENSORFS_HTTP_PART_SIZE", "1M")
    lk = UrlLake("s3://other", tmp_path / "npy")
    rng = np.random.default_rng(5)
    big = rng.integers(0, 2**63, size=(70 * 2**20 // 8,), dtype=np.uint64)
    lk.create("big")
    lk.import_("big", {"x": big}, "--chunk-size", "80M", "--codec", "raw")
    objs = [p for p in (s3.root / "other" / "big" / "objects").rglob("*") if p.is_file()
            and p.stat().st_size > 64 * 2**20]
    assert objs, "expected one object above the multipart threshold"
    m = mount(lk, opts=["prefetch_threads=0"])
    check_column_file(m / "big" / "main" / "x.npy", big)
    assert stats(m.path)["store"]["bytes_fetched"] >= big.nbytes


def _s3_raw(s3, method, key, data=None):
    """One request on bucket `lake` as a foreign client would make it (s3rver takes unsigned
    requests). Returns the body; a failure status raises."""
    req = urllib.request.Request(f"{s3.endpoint}/lake/{key}", data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def _s3_put_raw(s3, key, data):
    _s3_raw(s3, "PUT", key, data)


def _s3_age(s3, key, seconds):
    """Backdate an object as s3rver reports it (its Last-Modified is its file's mtime)."""
    t = time.time() - seconds
    os.utime(s3.root / "lake" / f"{key}._S3rver_object", (t, t))


def test_s3_gc_sweeps_garbage_and_leftovers(s3, tmp_path):
    """gc on S3: unreachable objects, abandoned ref locks and multipart uploads begun before the
    grace go; reachable objects, young garbage, a live lock, a young upload and uploads of other
    prefixes stay; every version still verifies."""
    base = s3.root / "lake"
    objdir = base / "lakes/gc/ds/objects"
    uploads = base / "._S3rver_uploads"

    def initiate(key, age_s):
        body = _s3_raw(s3, "POST", f"{key}?uploads", b"")
        uid = re.search(rb"<UploadId>([^<]+)</UploadId>", body).group(1).decode()
        t = time.time() - age_s
        os.utime(uploads / uid / "key", (t, t))  # its Initiated time
        return uid

    def stored():
        return {str(p.relative_to(base))[:-len("._S3rver_object")]
                for p in objdir.rglob("*._S3rver_object")}

    lk = UrlLake("s3://lake/lakes/gc", tmp_path / "npy")
    lk.create("ds")
    lk.import_("ds", columns(3, rows=4000), "--chunk-size", "16k")
    rc, _, err = tfs("branch", lk.ds_url("ds"), "side")
    assert rc == 0, err
    reachable = stored()
    first = (base / "lakes/gc/ds/refs/heads/side._S3rver_object").read_bytes()
    lk.import_("ds", columns(4, rows=3000), "--branch", "side")
    garbage = sorted(stored() - reachable)
    assert len(garbage) > 2
    _s3_put_raw(s3, "lakes/gc/ds/refs/heads/side", first)  # a reset: the import is garbage
    for k in reachable | set(garbage):
        _s3_age(s3, k, 2 * 86400)
    _s3_age(s3, garbage[0], 0)  # written a moment ago: inside the grace
    _s3_put_raw(s3, "lakes/gc/ds/refs/heads/.lock", b"4242-1 1000\n")  # a dead writer's
    _s3_age(s3, "lakes/gc/ds/refs/heads/.lock", 2 * 86400)
    _s3_put_raw(s3, "lakes/gc/ds/refs/tags/.lock", f"4343-1 {int(time.time())}\n".encode())
    dead = initiate("lakes/gc/ds/objects/ab/" + "c" * 62, 2 * 86400)  # a killed writer's
    young = initiate("lakes/gc/ds/objects/cd/" + "e" * 62, 0)        # one in progress
    other = initiate("lakes/other/ds/objects/ab/" + "c" * 62, 2 * 86400)  # not this dataset

    rc, out, err = tfs("gc", lk.ds_url("ds"))
    assert rc == 0, err
    m = re.search(r"deleted (\d+) unreachable .* kept (\d+) reachable and (\d+) younger .* "
                  r"removed (\d+) temporary", out)
    assert m, out
    assert tuple(map(int, m.groups())) == (len(garbage) - 1, len(reachable), 1, 2), out
    assert sorted(p.name for p in uploads.iterdir()) == sorted([young, other])
    assert dead not in os.listdir(uploads)
    assert stored() == reachable | {garbage[0]}
    assert not (base / "lakes/gc/ds/refs/heads/.lock._S3rver_object").exists()
    assert (base / "lakes/gc/ds/refs/tags/.lock._S3rver_object").exists()  # live: kept
    rc, out, err = tfs("verify", lk.ds_url("ds"))
    assert rc == 0, out + err


def test_s3_killed_writers_never_damage_a_version(s3, tmp_path, mount):
    """Imports to S3 killed (SIGKILL) at points spread over an unkilled run: afterwards every
    version verifies and the branch names either the old or the new commit, whole. A lock
    object left by a writer killed inside its ref update is advisory: it is removed here as its
    30 s staleness would (the next writer would otherwise wait that out)."""
    from verhelp import finish, popen_tfs

    rng = np.random.default_rng(31)
    base = s3.root / "lake"
    ref = base / "kill/ds/refs/heads/main._S3rver_object"
    lock = "kill/ds/refs/heads/.lock"
    lk = UrlLake("s3://lake/kill", tmp_path / "npy")
    x = rng.standard_normal((2000, 128)).astype("<f4")
    lk.create("ds")
    lk.import_("ds", {"x": x}, "--chunk-size", "64k")

    def args(i):
        a = rng.standard_normal((3000, 128)).astype("<f4")
        return a, ["import", lk.ds_url("ds"), f"x={lk.write_npy(a, name=f'k{i}')}", "-m",
                   f"op{i}", "--chunk-size", "64k", "--threads", "1"]

    a, argv = args(0)
    t0 = time.monotonic()
    rc, _, err = finish(popen_tfs(*argv))
    took = time.monotonic() - t0
    assert rc == 0, err
    x = np.concatenate([x, a])
    delays = [0.0, 0.002] + [took * f for f in (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.95, 1.1)]
    for i, delay in enumerate(delays, 1):
        prev = ref.read_bytes()
        a, argv = args(i)
        p = popen_tfs(*argv)
        time.sleep(delay)
        p.kill()
        finish(p)
        if (base / f"{lock}._S3rver_object").exists():
            _s3_raw(s3, "DELETE", lock)
        rc, out, err = tfs("verify", lk.ds_url("ds"))
        assert rc == 0, f"verify after a kill at {delay * 1000:.0f} ms:\n{out}\n{err}"
        info = lk.info("ds")
        if ref.read_bytes() != prev:
            assert info["message"] == f"op{i}", info
            x = np.concatenate([x, a])
        assert info["rows"] == len(x), (delay, info)
    m = mount(lk)
    check_column_file(m / "ds" / "main" / "x.npy", x)


def test_s3_conditional_writes_race(tmp_path, monkeypatch):
    """A server that honours conditional PUTs (If-None-Match: *, If-Match: etag): refs move by
    ETag with no lock object, and of writers racing on one branch each either commits or exits
    75 ("branch moved, retry"): no commit is lost, none is half-applied."""
    from verhelp import finish, popen_tfs

    srv = S3Server(tmp_path / "s3data", conditional=True)
    try:
        s3_env(monkeypatch, srv.endpoint, TENSORFS_LOG="debug")
        lk = UrlLake("s3://lake/cond", tmp_path / "npy")
        rc, _, err = tfs("create", lk.ds_url("ds"))
        assert rc == 0, err
        assert "ignores conditional writes" not in err, err
        base = np.arange(1000, dtype=np.int64)
        lk.import_("ds", {"x": base})
        rows = [100, 200, 300, 400, 500, 600]
        arrays = [np.full(n, i + 1, dtype=np.int64) for i, n in enumerate(rows)]
        procs = [popen_tfs("import", lk.ds_url("ds"), f"x={lk.write_npy(a, name=f'r{i}')}",
                           "-m", f"racer {i}") for i, a in enumerate(arrays)]
        results = [finish(p) for p in procs]
        won = [i for i, (rc, _, _) in enumerate(results) if rc == 0]
        assert all(rc in (0, 75) for rc, _, _ in results), results
        assert won, results
        for rc, _, err in results:
            assert rc == 0 or "branch moved" in err, err
        info = lk.info("ds")
        assert info["rows"] == 1000 + sum(rows[i] for i in won), (won, info)
        rc, out, err = tfs("log", lk.ds_url("ds"))
        assert rc == 0 and sum(f"racer {i}" in out for i in range(len(rows))) == len(won), out
        rc, out, err = tfs("verify", lk.ds_url("ds"))
        assert rc == 0, out + err
        assert ".lock" not in srv.log_path.read_text(errors="replace")
    finally:
        srv.stop()


def test_s3_without_conditional_writes_uses_the_lock(s3, tmp_path, monkeypatch):
    """s3rver as it is ignores conditional PUTs: the probe notices, and refs move under the
    lock object instead."""
    monkeypatch.setenv("TENSORFS_LOG", "debug")
    lk = UrlLake("s3://lake/nocond", tmp_path / "npy")
    rc, _, err = tfs("create", lk.ds_url("ds"))
    assert rc == 0 and "ignores conditional writes" in err, err
    assert ".lock" in s3.log_path.read_text(errors="replace")


def test_s3_faults_retried_exact_bytes(s3, tmp_path, mount, monkeypatch):
    """30% of reads fail (503, 429, resets, truncation, corruption, stalls): the scan returns
    exactly the right bytes and the retries are counted."""
    lk_direct = UrlLake("s3://lake/f", tmp_path / "npy")
    cols = columns(3, rows=40_000)
    lk_direct.build("ds", cols, "--chunk-size", "128k")
    proxy = FaultProxy(s3.port, rate=0.3, seed=7, stall_s=2.5, workdir=tmp_path)
    try:
        s3_env(monkeypatch, proxy.endpoint, TENSORFS_HTTP_TIMEOUT_MS=1000,
               TENSORFS_HTTP_STALL_MS=1000, TENSORFS_HTTP_BACKOFF_MS=5,
               TENSORFS_HTTP_BACKOFF_MAX_MS=50, TENSORFS_HTTP_RETRIES=6)
        lk = UrlLake("s3://lake/f", tmp_path / "npy")
        rc, out, err = tfs("info", lk.ds_url("ds"))
        assert rc == 0, err
        m = mount(lk)
        for name, src in cols.items():
            check_column_file(m / "ds" / "main" / f"{name}.npy", src)
        st = stats(m.path)
    finally:
        proxy.stop()
    assert proxy.injected() >= 10, proxy.counts
    for f in ("503", "429", "reset", "truncate", "corrupt"):
        assert proxy.counts[f] > 0, proxy.counts
    retries = st["store"].get("retries")
    if retries is not None:
        assert retries > 0
    m.stop()
    assert "request attempts were retried" in m.log(), m.log()[-3000:]


def test_a_lake_in_a_bucket_encrypted_with_a_kms_key_reads(s3, tmp_path, mount, monkeypatch):
    """S3 gives an object encrypted with a KMS key an ETag of 32 hex digits that is not the MD5
    of its bytes (x-amz-server-side-encryption: aws:kms): refs and markers, checked against an
    MD5 ETag, are not taken for damaged on such a bucket, and the lake reads."""
    lk_direct = UrlLake("s3://lake/k", tmp_path / "npy")
    cols = columns(5, rows=5_000)
    lk_direct.build("ds", cols)
    proxy = FaultProxy(s3.port, kms=True, workdir=tmp_path)
    try:
        s3_env(monkeypatch, proxy.endpoint)
        lk = UrlLake("s3://lake/k", tmp_path / "npy")
        rc, out, err = tfs("info", lk.ds_url("ds"))
        assert rc == 0 and "ETag" not in err, err
        m = mount(lk)
        for name, src in cols.items():
            check_column_file(m / "ds" / "main" / f"{name}.npy", src)
        m.stop()
    finally:
        proxy.stop()
    assert proxy.counts["requests"] > 0, proxy.counts


def test_s3_waited_chunks_come_in_parallel_ranges(s3, tmp_path, mount, monkeypatch):
    """A chunk a reader waits for (no read-ahead here) is requested as parallel ranges of 1 MiB
    or more, through faults on those ranges too: exactly the right bytes."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 255, size=(3 * 1024 + 100, 4096), dtype=np.uint8)  # 4 chunks
    lk_direct = UrlLake("s3://lake/w", tmp_path / "npy")
    lk_direct.build("ds", {"x": x}, "--chunk-size", "4M", "--codec", "raw")
    proxy = FaultProxy(s3.port, rate=0.3, seed=3, stall_s=2.5, workdir=tmp_path)
    try:
        s3_env(monkeypatch, proxy.endpoint, TENSORFS_HTTP_TIMEOUT_MS=1000,
               TENSORFS_HTTP_STALL_MS=1000, TENSORFS_HTTP_BACKOFF_MS=5,
               TENSORFS_HTTP_BACKOFF_MAX_MS=50, TENSORFS_HTTP_RETRIES=6)
        m = mount(UrlLake("s3://lake/w", tmp_path / "npy"), opts=["prefetch_threads=0"])
        check_column_file(m / "ds" / "main" / "x.npy", x)
        st = stats(m.path)
    finally:
        proxy.stop()
    assert st["store"]["urgent_gets"] == 4, st["store"]
    # Three 4 MiB chunks in 4 ranges each and the last (100 rows) in one, at least, plus the
    # ranges of faulted attempts.
    assert proxy.counts["ranged"] >= 13, proxy.counts
    assert proxy.injected() >= 3, proxy.counts


def test_s3_time_in_loads_and_store_reads_is_in_the_stats(s3, tmp_path, mount, monkeypatch):
    """The time chunk loads take, and the store's share of it, show in the stats and the
    metrics: rows of 8 chunks read one after another through a link that delays every request
    by 50 ms add at least 50 ms a request to both."""
    rng = np.random.default_rng(12)
    x = rng.integers(0, 16, size=(8 * 64, 4096), dtype=np.uint8)  # 8 chunks of 64 rows
    UrlLake("s3://lake/t", tmp_path / "npy").build("ds", {"x": x}, "--chunk-size", "256k")
    proxy = FaultProxy(s3.port, delay_s=0.05, workdir=tmp_path)
    try:
        s3_env(monkeypatch, proxy.endpoint)
        m = mount(UrlLake("s3://lake/t", tmp_path / "npy"), opts=["prefetch_threads=0"])
        path = m.path / "ds" / "main" / "x.npy"
        os.stat(path)  # the version's lookup, before the window
        before = stats(m.path)
        with opened(path) as fd:
            for k in range(8):
                r = 64 * k + 7
                assert os.pread(fd, 4096, HEADER_SIZE + r * 4096) == x[r].tobytes()
        after = stats(m.path)
        with open(m.path / ".tensorfs" / "metrics") as f:
            metrics = dict(line.split() for line in f if line.startswith("tensorfs_"))
    finally:
        proxy.stop()
    st, st0 = after["store"], before["store"]
    requests = st["gets"] + st["ranged_gets"] - st0["gets"] - st0["ranged_gets"]
    read = st["read_s"] - st0["read_s"]
    load = after["cache"]["load_s"] - before["cache"]["load_s"]
    assert requests >= 8, st
    # Every request of the window was made by a load (a frame index or a frame of each chunk).
    assert read >= 0.05 * requests and load >= 0.05 * requests, (requests, read, load)
    assert float(metrics["tensorfs_store_read_seconds_total"]) >= st["read_s"]
    assert float(metrics["tensorfs_cache_load_seconds_total"]) >= after["cache"]["load_s"]


def test_s3_staged_batch_fetches_its_chunks_at_once(s3, tmp_path, mount, monkeypatch):
    """A batch staged on a cold cache has its chunks fetched together, not one after another
    (no read-ahead here), for a fixed column and for a text column's data: the store sees
    several in flight at once, each request delayed 50 ms; the bytes are the rows'."""
    import tensorfs
    rng = np.random.default_rng(4)
    x = rng.integers(0, 255, size=(24 * 64, 1024), dtype=np.uint8)  # 24 chunks of 64 rows
    lines = [f"{i} " + "".join(chr(97 + int(c)) for c in rng.integers(0, 26, size=1000))
             for i in range(len(x))]  # 24 chunks of data, about
    txt = tmp_path / "t.txt"
    txt.write_text("".join(t + "\n" for t in lines))
    lk_direct = UrlLake("s3://lake/sb", tmp_path / "npy")
    lk_direct.build("ds", {"x": x, "t": txt}, "--chunk-size", "64k")
    rows = np.arange(24) * 64 + rng.integers(0, 64, size=24)  # a row of each chunk
    rng.shuffle(rows)
    seen = {}
    for col in ("x", "t"):  # each on a fresh mount: a cold cache
        proxy = FaultProxy(s3.port, delay_s=0.05, workdir=tmp_path)
        try:
            s3_env(monkeypatch, proxy.endpoint)
            m = mount(UrlLake("s3://lake/sb", tmp_path / "npy"), opts=["prefetch_threads=0"])
            with tensorfs.Stager(m.path, "ds/main", [col], batch_size=24) as s:
                b = s.stage(rows)
                if col == "x":
                    assert np.array_equal(b["x"], x[rows])
                else:
                    assert list(b["t"]) == [lines[r] for r in rows]
                b.release()
            m.stop()
        finally:
            proxy.stop()
        seen[col] = (proxy.counts["object_gets"], proxy.counts["objects_in_flight_max"])
    for gets, in_flight in seen.values():
        assert gets >= 20 and in_flight >= 2, seen


@pytest.mark.parametrize("chunk", ["256k", "4M"])
def test_s3_persistent_corruption_is_eio(s3, tmp_path, mount, monkeypatch, chunk):
    """Damage that does not go away is EIO, for a chunk fetched whole (256k) and one a reader
    waits for in parallel ranges (4M: only the first range carries the damaged header)."""
    rows = 200_000 if chunk == "256k" else 1_000_000
    lk_direct = UrlLake("s3://lake/c", tmp_path / "npy")
    cols = {"x": np.arange(rows, dtype=np.int64)}
    lk_direct.build("ds", cols, "--chunk-size", chunk, "--codec", "raw")
    proxy = FaultProxy(s3.port, persistent_corrupt=True, workdir=tmp_path)
    try:
        s3_env(monkeypatch, proxy.endpoint, TENSORFS_HTTP_BACKOFF_MS=5)
        m = mount(UrlLake("s3://lake/c", tmp_path / "npy"))
        path = m / "ds" / "main" / "x.npy"
        assert os.path.getsize(path) == 4096 + rows * 8
        with open(path, "rb") as f:
            f.read(4096)  # the header is synthesised: fine
            with pytest.raises(OSError) as e:
                f.read(8 * 1000)
        assert e.value.errno == 5  # EIO, never wrong bytes
    finally:
        proxy.stop()
    assert proxy.counts["persistent_corrupt"] >= 2  # fetched, then refetched once
    m.stop()
    assert "checksum" in m.log()


def test_s3_config_file_named_remote(s3, tmp_path, monkeypatch):
    """A named remote from a config file (s3://REMOTE@bucket/...) with the secrets in it; a
    config file holding secrets that others can read is refused, and no secret is printed."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(k)
    cfg = tmp_path / "tensorfs.ini"
    cfg.write_text(f"""; test configuration
[http]
retries = 2

[remote "local"]
endpoint = {s3.endpoint}
region = us-east-1
path_style = true
access_key = {s3help.ACCESS_KEY}
secret_key = {s3help.SECRET_KEY}
""")
    os.chmod(cfg, 0o600)
    monkeypatch.setenv("TENSORFS_CONFIG", str(cfg))
    url = "s3://local@lake/cfg/ds"
    run_proc(["create", url], check=True)
    lk = UrlLake("s3://local@lake/cfg", tmp_path / "npy")
    lk.import_("ds", {"a": np.arange(100, dtype=np.int16)})
    rc, out, err = tfs("ls", "s3://local@lake/cfg")
    assert rc == 0 and out.split() == ["ds"], err
    # --config FILE works the same without the environment variable.
    monkeypatch.delenv("TENSORFS_CONFIG")
    rc, out, err = tfs("--config", cfg, "ls", "s3://local@lake/cfg")
    assert rc == 0 and out.split() == ["ds"], err
    rc, out, err = tfs("--config", cfg, "ls", "s3://nosuch@lake/cfg")
    assert rc != 0 and "no remote 'nosuch'" in err
    # Readable by others: refused, with a clear message and without the secret.
    os.chmod(cfg, 0o644)
    rc, out, err = tfs("--config", cfg, "ls", "s3://local@lake/cfg")
    assert rc != 0
    assert "readable" in err or "accessible" in err
    assert "chmod 600" in err
    assert s3help.SECRET_KEY not in (out + err).replace("S3RVER@", "")
    # Unknown keys are errors (a typo must not silently drop a setting).
    cfg.write_text("[s3]\nendpont = http://x\n")
    os.chmod(cfg, 0o600)
    rc, out, err = tfs("--config", cfg, "ls", "s3://lake/cfg")
    assert rc != 0 and "unknown key 'endpont'" in err


def test_s3_bad_credentials_fail_clearly(s3, tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-value")
    rc, out, err = tfs("ls", "s3://lake/x")
    assert rc != 0
    assert "403" in err and "InvalidAccessKeyId" in err
    assert "wrong-secret-value" not in out + err


def test_s3_http_readonly_and_unreachable(tmp_path, monkeypatch):
    """A server that is not there: bounded retries, then a clear error (no hang)."""
    port = s3help.free_port()
    s3_env(monkeypatch, f"http://127.0.0.1:{port}", TENSORFS_HTTP_RETRIES=2,
           TENSORFS_HTTP_BACKOFF_MS=5)
    rc, out, err = tfs("ls", "s3://lake/x", timeout=30)
    assert rc != 0
    assert "attempts" in err


def test_unmount_does_not_wait_out_retries(s3, tmp_path, mount, monkeypatch):
    """The server stops answering while chunks are loading: after the unmount the daemon
    cancels its requests and exits promptly instead of running through every retry (with
    these settings those alone would take well over a minute)."""
    import signal
    import time

    src = np.random.default_rng(3).integers(0, 60, size=(2048, 16384), dtype=np.uint8)
    lk = UrlLake("s3://lake/u", tmp_path / "npy")
    lk.build("ds", {"x": src}, "--chunk-size", "1M")
    monkeypatch.setenv("TENSORFS_HTTP_STALL_MS", "3000")
    monkeypatch.setenv("TENSORFS_HTTP_TIMEOUT_MS", "20000")
    m = mount(lk, opts=["prefetch_threads=8"])
    with open(m / "ds" / "main" / "x.npy", "rb") as f:
        f.read(8 << 20)  # a sequential start: loads run ahead
        os.kill(s3.proc.pid, signal.SIGSTOP)
        time.sleep(0.3)
    try:
        t0 = time.monotonic()
        assert not m.stop()  # unmount, then the daemon must exit on its own
        took = time.monotonic() - t0
    finally:
        os.kill(s3.proc.pid, signal.SIGCONT)
    assert took < 15, f"the daemon took {took:.1f} s to exit after the unmount"


@pytest.mark.parametrize("codec", ["zstd", "raw"])
def test_s3_random_rows_fetch_frames_and_scans_fill_the_disk_cache(s3, tmp_path, mount, codec):
    """A reader that jumps through a remote lake fetches frames by ranged GETs, never whole
    chunks (a raw column's chunks are framed too); once a scan has put the chunk objects in the
    disk cache, the same random reads are served from its files and the origin sees no
    request."""
    lk = UrlLake(f"s3://lake/frames-{codec}", tmp_path / "npy")
    rows = np.random.default_rng(3).integers(0, 50, size=(24_000, 500)).astype(np.uint16)
    lk.create("ds")
    lk.import_("ds", {"x": rows}, "--chunk-size", "1M", "--frame-size", "16k", "--codec", codec)
    idx = np.random.default_rng(4).permutation(len(rows))[:300].tolist()
    cache = tmp_path / "cache"
    opts = ["cache_mem=4M", f"cache_dir={cache}", "cache_disk=64M"]

    def read_random(m):
        path = m / "ds" / "main" / "x.npy"
        rb = rows[0].nbytes
        with open(path, "rb", buffering=0) as f:
            for r in idx:
                f.seek(HEADER_SIZE + r * rb)
                assert f.read(rb) == rows[r].tobytes(), f"row {r}"

    m = mount(lk, opts=opts)
    read_random(m)
    st = stats(m.path)
    assert st["store"]["ranged_gets"] > 200, st["store"]
    # 300 rows of 1,000 bytes: frames (16 whole rows) and now and then a whole chunk, where two
    # rows in a row happen to fall close together; never most of the column.
    assert st["store"]["bytes_fetched"] < rows.nbytes / 3, st["store"]
    # A scan takes whole chunks, which the disk cache keeps.
    check_column_file(m / "ds" / "main" / "x.npy", rows)
    assert stats(m.path)["disk_cache"]["fills"] >= 8
    m.stop()

    m = mount(lk, opts=opts, name="mnt2")
    read_random(m)
    st = stats(m.path)
    assert st["disk_cache"]["range_hits"] > 200, st["disk_cache"]
    assert st["store"]["ranged_gets"] == 0, st["store"]
