# SPDX-License-Identifier: MIT
"""The chunk cache and prefetcher on a real mount: bytes stay right under eviction pressure,
prefetch works on a sequential scan and stays idle on random access, and the stats file."""

import json
import os
import threading

import numpy as np

from conftest import HEADER_SIZE, opened

MiB = 1 << 20


def stats(m):
    with open(m.path / ".tensorfs" / "stats") as f:
        return json.load(f)


def column(rows, row, seed):
    rng = np.random.default_rng(seed)
    # compressible but not trivial: random nibbles
    return (np.frombuffer(rng.bytes(rows * row), dtype=np.uint8) & 0x0F).reshape(rows, row)


def test_stats_file(lake, mount):
    lake.build("d", {"x": np.arange(1000, dtype=np.int32)})
    m = mount(lake)
    assert ".tensorfs" in os.listdir(m.path)
    assert "stats" in os.listdir(m.path / ".tensorfs")
    s = stats(m)
    for key in ("hits", "misses", "evictions", "bytes_decompressed", "budget"):
        assert key in s["cache"]
    for key in ("loaded", "hits", "wasted", "threads"):
        assert key in s["prefetch"]
    for key in ("gets", "bytes_fetched"):
        assert key in s["store"]
    np.load(m.path / "d" / "main" / "x.npy")
    s2 = stats(m)
    assert s2["cache"]["misses"] >= 1
    assert s2["store"]["bytes_fetched"] > s["store"]["bytes_fetched"]


def test_eviction_pressure(lake, mount):
    """A 1 MiB cache over 8 MiB of 64 KiB chunks, 8 threads reading random and sequential
    ranges at once: every byte right, and the cache really evicted."""
    src = column(2048, 4096, 1)
    lake.build("d", {"x": src}, "--chunk-size", "64k")
    m = mount(lake, opts=["cache_mem=1M"])
    path = m.path / "d" / "main" / "x.npy"
    flat = memoryview(src.reshape(-1))
    size = HEADER_SIZE + src.nbytes
    errors = []

    def random_reader(seed):
        rng = np.random.default_rng(seed)
        with opened(path) as fd:
            for _ in range(300):
                off = int(rng.integers(HEADER_SIZE, size))
                n = int(rng.integers(1, 200_000))
                got = os.pread(fd, n, off)
                want = flat[off - HEADER_SIZE:off - HEADER_SIZE + n]
                if got != want:
                    errors.append(f"random {off}+{n}")
                    return

    def sequential_reader(step):
        with opened(path) as fd:
            off = HEADER_SIZE
            while off < size:
                got = os.pread(fd, step, off)
                if got != flat[off - HEADER_SIZE:off - HEADER_SIZE + step]:
                    errors.append(f"sequential {off}+{step}")
                    return
                off += step

    # The kernel page cache would serve repeated ranges without asking the daemon: dropping it
    # while the readers run sends most of their reads to the daemon's cache.
    def dontneed():
        with opened(path) as fd:
            for _ in range(50):
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)

    threads = [threading.Thread(target=random_reader, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=sequential_reader, args=(s,))
                for s in (4096, 65536, 1 << 20, 300_001)]
    threads.append(threading.Thread(target=dontneed))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    s = stats(m)
    assert s["cache"]["evictions"] > 0, s
    assert s["cache"]["bytes"] <= 2 * MiB, s  # budget plus what readers held at the end


def test_prefetch_sequential_scan(lake, mount):
    src = column(4096, 4096, 2)  # 16 MiB in 64 chunks of 256 KiB
    lake.build("d", {"x": src}, "--chunk-size", "256k")
    m = mount(lake, opts=["cache_mem=64M", "prefetch_threads=2"])
    path = m.path / "d" / "main" / "x.npy"
    a = np.load(path, mmap_mode="r")
    for i in range(0, a.shape[0], 256):  # a front-to-back scan through mmap page faults
        assert np.array_equal(a[i:i + 256], src[i:i + 256])
    del a
    s = stats(m)["prefetch"]
    assert s["sequential_streams"] >= 1, s
    assert s["loaded"] >= 16, s
    assert s["hits"] >= 16, s  # chunks a reader used after the prefetcher loaded them
    assert s["wasted"] <= 2, s


def test_prefetch_starts_with_a_read_at_the_start(lake, mount):
    """A first read at the start of the data begins a scan: chunks ahead are scheduled at once,
    not after several on-demand loads (each a round trip on a remote store). A first read
    elsewhere schedules nothing."""
    src = column(4096, 4096, 5)
    lake.build("d", {"x": src, "y": src}, "--chunk-size", "256k")
    m = mount(lake, opts=["cache_mem=64M", "prefetch_threads=2"])
    flat = memoryview(src.reshape(-1))
    with opened(m.path / "d" / "main" / "y.npy") as fd:
        assert os.pread(fd, 4096, HEADER_SIZE + 2000 * 4096) == flat[2000 * 4096:2001 * 4096]
    assert stats(m)["prefetch"]["scheduled"] == 0
    with opened(m.path / "d" / "main" / "x.npy") as fd:
        assert os.pread(fd, 4096, HEADER_SIZE) == flat[:4096]
        s = stats(m)["prefetch"]
        assert s["scheduled"] >= 2, s
        assert s["sequential_streams"] == 1, s


def test_no_prefetch_on_random_access(lake, mount):
    src = column(4096, 4096, 3)
    lake.build("d", {"x": src}, "--chunk-size", "256k")
    m = mount(lake, opts=["cache_mem=64M", "prefetch_threads=2"])
    path = m.path / "d" / "main" / "x.npy"
    rng = np.random.default_rng(7)
    flat = memoryview(src.reshape(-1))
    with opened(path) as fd:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for row in rng.permutation(src.shape[0])[:300]:
            off = HEADER_SIZE + int(row) * 4096
            assert os.pread(fd, 4096, off) == flat[int(row) * 4096:int(row) * 4096 + 4096]
    s = stats(m)["prefetch"]
    assert s["loaded"] <= 4, s  # random access must not read ahead
    assert s["wasted"] <= 4, s


def test_disk_cache_survives_remount_and_repairs(lake, mount, tmp_path):
    """Objects fetched once come from the disk cache after a remount (the store sees no chunk
    reads); a damaged cache file is detected by its checksum and fetched again."""
    src = column(1024, 4096, 4)  # 4 MiB in 16 chunks of 256 KiB
    lake.build("d", {"x": src}, "--chunk-size", "256k")
    cache = tmp_path / "dcache"
    opts = ["cache_mem=64M", f"cache_dir={cache}", "cache_disk=64M", "prefetch_threads=0"]

    m = mount(lake, opts=opts, name="m1")
    assert np.array_equal(np.load(m.path / "d" / "main" / "x.npy"), src)
    first = stats(m)
    assert first["disk_cache"]["fills"] >= 16, first
    assert first["store"]["bytes_fetched"] >= src.nbytes // 4  # compressed chunks came from the lake
    assert not m.stop()

    m = mount(lake, opts=opts, name="m2")
    assert np.array_equal(np.load(m.path / "d" / "main" / "x.npy"), src)
    second = stats(m)
    assert second["disk_cache"]["hits"] >= 16, second
    # Only refs and the dataset marker (a few bytes each) may go to the lake.
    assert second["store"]["bytes_fetched"] < 4096, second
    assert not m.stop()

    files = sorted(p for p in cache.iterdir() if not p.name.startswith("."))
    assert len(files) >= 16
    victim = max(files, key=lambda p: p.stat().st_size)  # a chunk, not a small commit
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(bytes(raw))
    m = mount(lake, opts=opts, name="m3")
    assert np.array_equal(np.load(m.path / "d" / "main" / "x.npy"), src)
    third = stats(m)
    assert third["disk_cache"]["bad_files"] == 1, third
    assert 0 < third["store"]["bytes_fetched"] < src.nbytes, third
    assert not m.stop()
    assert victim.read_bytes() != bytes(raw)  # repaired in place


def test_splice_replies_are_exact(lake, mount):
    """-o splice sends the same replies through a pipe: every byte still right."""
    src = column(1024, 4096, 5)
    lake.build("d", {"x": src}, "--chunk-size", "256k")
    m = mount(lake, opts=["splice"])
    assert np.array_equal(np.load(m.path / "d" / "main" / "x.npy"), src)
    with opened(m.path / "d" / "main" / "x.npy") as fd:
        flat = memoryview(src.reshape(-1))
        for off in (HEADER_SIZE - 100, HEADER_SIZE + 262_000, HEADER_SIZE + 1_000_000):
            assert os.pread(fd, 300_000, off)[-1000:] == bytes(
                flat[off - HEADER_SIZE + 300_000 - 1000:off - HEADER_SIZE + 300_000])
