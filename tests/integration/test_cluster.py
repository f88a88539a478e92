# SPDX-License-Identifier: MIT
"""Many nodes on one machine: mounts of one s3:// lake, each with its own cache, sharing a cache
tier on another bucket. The origin sits behind a counting proxy, so what each node fetched from
it is counted at the server's side. A second node reads what the first fetched from the tier,
not the origin; damaged tier objects are ignored, never served; DDP views over two nodes read
every row once, and with the tier the origin serves one copy of the epoch's chunks."""

import json
import os
import time
import urllib.request

import numpy as np
import pytest

from conftest import HEADER_SIZE, opened
from faultproxy import FaultProxy
import s3help
from s3help import S3Server, UrlLake

ROWS = 40_000


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """The S3 server (buckets lake and tier), a counting proxy in front of the origin, and a
    config with the remotes `origin` (through the proxy) and `tier` (direct)."""
    srv = S3Server(tmp_path / "s3data", buckets=("lake", "tier"))
    proxy = FaultProxy(srv.port, workdir=str(tmp_path))
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL",
              "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(k, raising=False)
    cfg = tmp_path / "tensorfs.ini"
    remote = """[remote "{name}"]
endpoint = {endpoint}
region = us-east-1
path_style = true
access_key = {a}
secret_key = {s}
"""
    cfg.write_text(remote.format(name="origin", endpoint=proxy.endpoint, a=s3help.ACCESS_KEY,
                                 s=s3help.SECRET_KEY) +
                   remote.format(name="tier", endpoint=srv.endpoint, a=s3help.ACCESS_KEY,
                                 s=s3help.SECRET_KEY))
    os.chmod(cfg, 0o600)
    monkeypatch.setenv("TENSORFS_CONFIG", str(cfg))
    yield srv, proxy
    proxy.stop()
    srv.stop()


def build(tmp_path):
    lake = UrlLake("s3://origin@lake/l", tmp_path / "npy")
    rng = np.random.default_rng(7)
    cols = {"idx": np.arange(ROWS, dtype=np.int64),
            "x": rng.integers(0, 255, size=(ROWS, 64), dtype=np.uint8)}
    lake.create("d")
    lake.import_("d", cols, "--chunk-size", "128k")
    return lake, cols


def stats(m):
    with open(m.path / ".tensorfs" / "stats") as f:
        return json.load(f)


def wait_tier_idle(m, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        t = stats(m)["cache_tier"]
        if t["pending_bytes"] == 0 and t["writes"] + t["write_errors"] + t["dropped"] >= \
                t["misses"] + t["bad"] + t["errors"]:
            return t
        time.sleep(0.05)
    raise AssertionError(f"tier writes still queued after {timeout} s: {t}")


def read_all(m, cols):
    for name, arr in cols.items():
        got = np.load(m / "d" / "main" / f"{name}.npy")
        assert (got == arr).all(), name


TIER = "cache_tier=s3://tier@tier/shared"


@pytest.mark.parametrize("out_of_order", [False, True])
def test_second_node_reads_the_tier_not_the_origin(cluster, tmp_path, mount, out_of_order):
    """out_of_order: node B's scan of x starts with its second MiB, as when the kernel's parallel
    reads of np.load arrive out of order. A read over whole chunks is a scan's: whole chunks
    from the tier serve it, not frames (ranged reads of the origin), and no index is loaded."""
    srv, proxy = cluster
    lake, cols = build(tmp_path)
    base = proxy.snapshot()
    a = mount(lake, opts=("cache_mem=4M", TIER), name="node_a")
    read_all(a, cols)
    ta = wait_tier_idle(a)
    after_a = proxy.snapshot()
    assert ta["hits"] == 0 and ta["writes"] == ta["misses"] > 0, ta
    b = mount(lake, opts=("cache_mem=4M", TIER), name="node_b")
    if out_of_order:
        with opened(b / "d" / "main" / "x.npy") as fd:
            got = os.pread(fd, 1 << 20, 1 << 20)
        data = (1 << 20) - HEADER_SIZE
        assert got == cols["x"].tobytes()[data:data + (1 << 20)]
    read_all(b, cols)
    tb = stats(b)["cache_tier"]
    after_b = proxy.snapshot()
    a_gets = after_a["object_gets"] - base["object_gets"]
    b_gets = after_b["object_gets"] - after_a["object_gets"]
    a_bytes = after_a["object_bytes"] - base["object_bytes"]
    b_bytes = after_b["object_bytes"] - after_a["object_bytes"]
    # Node A fetched the epoch from the origin; node B fetched no object from it.
    assert a_bytes >= cols["x"].nbytes // 4 and a_gets >= ta["misses"], (after_a, ta)
    assert b_gets == 0 and b_bytes == 0, (after_b, tb)
    assert tb["hits"] == ta["writes"] and tb["misses"] == 0 and tb["bad"] == 0, tb
    assert stats(b)["store"]["bytes_fetched"] < 64 * 1024  # refs and markers only
    assert stats(b)["prefetch"]["frame_indexes"] == 0
    # The metrics carry the tier too.
    metrics = (b.path / ".tensorfs" / "metrics").read_text()
    assert f"tensorfs_cache_tier_hits_total {tb['hits']}" in metrics


def _tier_keys(srv):
    """Keys of the objects in the tier bucket, from s3rver's files."""
    root = srv.root / "tier"
    out = []
    for dirpath, _, files in os.walk(root):
        for f in files:
            if f.endswith("._S3rver_object"):
                out.append(os.path.relpath(os.path.join(dirpath, f), root)[:-len("._S3rver_object")])
    return sorted(out)


def _put(srv, key, data):
    req = urllib.request.Request(f"{srv.endpoint}/tier/{key}", data=data, method="PUT")
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


def _get(srv, key):
    with urllib.request.urlopen(f"{srv.endpoint}/tier/{key}", timeout=10) as r:
        return r.read()


def test_damaged_tier_objects_are_ignored_never_served(cluster, tmp_path, mount):
    srv, proxy = cluster
    lake, cols = build(tmp_path)
    a = mount(lake, opts=("cache_mem=4M", TIER), name="node_a")
    read_all(a, cols)
    wait_tier_idle(a)
    keys = [k for k in _tier_keys(srv) if k.startswith("shared/objects/")]
    assert len(keys) > 6, keys
    chunks = [k for k in keys if _get(srv, k)[6] == 1]  # object type 1: chunks
    truncated, forged, garbage = chunks[:3]
    body = _get(srv, truncated)
    _put(srv, truncated, body[:len(body) // 2])
    _put(srv, forged, _get(srv, chunks[3]))  # a valid object, under another id
    _put(srv, garbage, os.urandom(len(body)))
    before = proxy.snapshot()
    b = mount(lake, opts=("cache_mem=4M", TIER), name="node_b")
    read_all(b, cols)  # exact bytes: the three came from the origin
    tb = stats(b)["cache_tier"]
    assert tb["bad"] == 3, tb
    assert proxy.snapshot()["object_gets"] - before["object_gets"] == 3
    log = b.log()
    assert "not what its id says" in log
    # The origin's copies are written back: the tier is whole again.
    wait_tier_idle(b)
    assert _get(srv, truncated) == body


def test_ddp_two_nodes_four_ranks_read_every_row_once(cluster, tmp_path, mount):
    """Two nodes, two ranks each (world=4): every row once across the ranks; with the tier, the
    origin serves each object of the epoch once although both nodes read every window."""
    srv, proxy = cluster
    lake, cols = build(tmp_path)
    nodes = [mount(lake, opts=("cache_mem=4M", TIER), name=f"node{n}") for n in range(2)]
    base = proxy.snapshot()
    seen = []
    for n, node in enumerate(nodes):
        for r in (2 * n, 2 * n + 1):
            view = node / "d" / "main" / "views" / f"seed=3,epoch=1,rank={r},world=4"
            idx = np.load(view / "idx.npy")
            x = np.load(view / "x.npy")
            assert (x == cols["x"][idx]).all()
            seen.append(idx)
        wait_tier_idle(node)
    every = np.concatenate(seen)
    assert len(every) == ROWS and (np.sort(every) == np.arange(ROWS)).all()
    got = proxy.snapshot()
    objects = got["object_gets"] - base["object_gets"]
    t0, t1 = (stats(n)["cache_tier"] for n in nodes)
    # Node 1 fetched from the origin only what node 0 had not (a shard's chunks are in the
    # windows every rank reads): at most the objects node 0 missed, once each.
    assert t1["misses"] <= t0["misses"] // 4, (t0, t1)
    assert objects == t0["misses"] + t1["misses"], (got, t0, t1)


def test_ddp_nodes_without_a_tier_fetch_their_own_shards(cluster, tmp_path, mount):
    """Without a tier each node fetches the chunks of its ranks' shards (contiguous slices of
    the shuffled order, so a few windows each), plus the windows at their edges: not the
    whole epoch."""
    srv, proxy = cluster
    lake, cols = build(tmp_path)
    whole = sum(c["chunks"] for c in lake.info("d")["columns"])
    per_node = []
    for n in range(2):
        node = mount(lake, opts=("cache_mem=4M",), name=f"node{n}")
        s0 = proxy.snapshot()
        for r in (2 * n, 2 * n + 1):
            view = node / "d" / "main" / "views" / f"seed=3,epoch=1,rank={r},world=4,block=4"
            assert (np.load(view / "x.npy") == cols["x"][np.load(view / "idx.npy")]).all()
        per_node.append(proxy.snapshot()["object_gets"] - s0["object_gets"])
    # Counted at the origin: chunks plus the commit and manifest each node reads once.
    for objects in per_node:
        assert objects - 2 < 0.75 * whole, (per_node, whole)
    assert sum(per_node) - 4 >= whole, (per_node, whole)
