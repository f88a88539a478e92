# SPDX-License-Identifier: MIT
"""Daemon RSS stays within its configured cache budget while scanning a much larger column, from
a local lake and from S3 (where 24 loaders receive objects too)."""

import json
import os
import time

import numpy as np
import pytest

from conftest import HEADER_SIZE, SANITIZE, RssSampler, opened, vm_rss
from s3help import S3Server, UrlLake, s3_env

MiB = 1 << 20
CACHE = 16 * MiB
OVERHEAD = 48 * MiB  # decode buffers, zstd contexts, thread stacks, FUSE buffers
ROWS, ROW = 30_000, 4096  # ~117 MiB, more than 7x the cache


@pytest.fixture(params=["local", "s3"])
def big_lake(request, tmp_path, monkeypatch):
    if request.param == "local":
        yield request.getfixturevalue("lake")
        return
    srv = S3Server(tmp_path / "s3data", buckets=("lake",))
    s3_env(monkeypatch, srv.endpoint)
    yield UrlLake("s3://lake/mem", tmp_path / "npy")
    srv.stop()


@pytest.mark.skipif(SANITIZE, reason="TENSORFS_SANITIZE=1: AddressSanitizer inflates RSS, "
                    "so a memory bound cannot be checked on a sanitizer build")
def test_memory_bounded(big_lake, mount):
    lake = big_lake
    rng = np.random.default_rng(2026)
    # random nibbles: compress to about half, not trivially
    src = (np.frombuffer(rng.bytes(ROWS * ROW), dtype=np.uint8) & 0x0F).reshape(ROWS, ROW)
    lake.build("big", {"px": src}, timeout=300)
    path_npy = lake.scratch
    for f in path_npy.iterdir():  # the input copy is no longer needed
        f.unlink()

    m = mount(lake, opts=["cache_mem=16M"])
    pid = m.pid
    path = m.path / "big" / "main" / "px.npy"
    size = os.stat(path).st_size
    assert size == HEADER_SIZE + src.nbytes
    baseline = vm_rss(pid)
    assert baseline, "cannot read the daemon's VmRSS"
    data = memoryview(src.reshape(-1))
    with RssSampler(pid) as rss, opened(path) as fd:
        off = HEADER_SIZE
        while off < size:
            n = min(MiB, size - off)
            got = os.pread(fd, n, off)
            if got != data[off - HEADER_SIZE:off - HEADER_SIZE + n]:
                raise AssertionError(f"scan: bytes at {off}..{off + n} differ")
            off += n
            rss.sample()
    growth = rss.peak - baseline
    assert rss.samples > 10
    assert growth < CACHE + OVERHEAD, (
        f"daemon RSS grew by {growth / MiB:.1f} MiB (baseline {baseline / MiB:.1f} MiB, peak "
        f"{rss.peak / MiB:.1f} MiB) scanning {src.nbytes / MiB:.0f} MiB with cache_mem=16M; "
        f"allowed {(CACHE + OVERHEAD) / MiB:.0f} MiB")
    if isinstance(lake, UrlLake):
        st = json.loads((m.path / ".tensorfs" / "stats").read_text())
        assert st["prefetch"]["threads"] >= 24 and st["store"]["bytes_fetched"] > src.nbytes / 3


@pytest.mark.skipif(SANITIZE, reason="TENSORFS_SANITIZE=1: AddressSanitizer inflates RSS, "
                    "so a memory bound cannot be checked on a sanitizer build")
def test_many_view_names_stay_within_view_mem(lake, mount):
    """A training job opens a new view name every epoch on every rank. 2,000 distinct
    names over a dataset of 200k rows (1.6 MB of rows a view), with commits on the mounted
    branch meanwhile: the built views the daemon keeps stay within view_mem (16M here), and
    its RSS within cache_mem + view_mem + a fixed allowance."""
    rows = 200_000
    lake.build("v", {"x": np.arange(rows, dtype=np.int64)}, "--chunk-size", "256k")
    m = mount(lake, opts=["cache_mem=16M", "view_mem=16M", "ref_ttl=0.2"])
    views = m.path / "v" / "main" / "views"
    baseline = vm_rss(m.pid)
    peak = baseline
    names = 0
    for epoch in range(500):
        if epoch % 100 == 50:
            lake.import_("v", {"x": np.arange(10, dtype=np.int64)})  # the branch moves
        for rank in range(4):
            d = views / f"seed=1,epoch={epoch},rank={rank},world=4"
            x = np.load(d / "x.npy", mmap_mode="r")
            assert rows // 4 <= x.shape[0] <= rows // 4 + 20 and x[:8].min() >= 0
            del x
            names += 1
        if epoch % 25 == 0:
            peak = max(peak, vm_rss(m.pid))
    st = json.loads((m.path / ".tensorfs" / "stats").read_text())["views"]
    assert st["idle_bytes"] <= st["view_mem"] == 16 * MiB, st
    assert st["dropped_total"] > names / 2, st  # the views nobody reads any more went
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("2")
    # The kernel forgets the inodes it dropped: their nodes go (the forget path).
    deadline = time.time() + 10
    while True:
        nodes = json.loads((m.path / ".tensorfs" / "stats").read_text())["nodes"]
        if nodes["alive"] < names / 4 or time.time() > deadline:
            break
        time.sleep(0.2)
    assert nodes["alive"] < names / 4 and nodes["freed_total"] > names, nodes
    peak = max(peak, vm_rss(m.pid))
    allowance = 64 * MiB
    assert peak - baseline < CACHE + 16 * MiB + allowance, (
        f"daemon RSS grew by {(peak - baseline) / MiB:.1f} MiB over {names} view names "
        f"(cache_mem 16M, view_mem 16M): {st}")
