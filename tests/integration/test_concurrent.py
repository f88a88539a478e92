# SPDX-License-Identifier: MIT
"""Many threads reading one cold column at once all see the right bytes."""

import os
import threading

import numpy as np

from conftest import HEADER_SIZE, expected_file_bytes, load_schema, schema_column

THREADS = 8
READS = 150


def test_concurrent(lake, mount):
    rng = np.random.default_rng(99)
    src = (rng.standard_normal((32768, 64)) * 8).round().astype("<f4")  # 8 MiB, compressible
    lake.build("cc", {"emb": src}, "--chunk-size", "256k")
    m = mount(lake)
    main = m.path / "cc" / "main"
    col = schema_column(load_schema(main / "schema.json"), "emb")
    assert col["chunks"] >= 16
    path = main / "emb.npy"
    want = expected_file_bytes(path, src)
    size = len(want)

    shared_fd = os.open(path, os.O_RDONLY)
    barrier = threading.Barrier(THREADS)
    errors = []

    def reader(k):
        try:
            trng = np.random.default_rng(1000 + k)
            fd = shared_fd if k % 2 else os.open(path, os.O_RDONLY)
            mm = np.load(path, mmap_mode="r") if k in (2, 5) else None
            barrier.wait(timeout=60)
            try:
                for _ in range(READS):
                    if mm is not None and trng.random() < 0.5:
                        a = int(trng.integers(0, src.shape[0] - 1))
                        b = min(src.shape[0], a + int(trng.integers(1, 600)))
                        if not np.array_equal(np.array(mm[a:b]), src[a:b]):
                            errors.append(f"thread {k}: mmap rows {a}:{b} differ")
                            return
                        continue
                    off = int(trng.integers(0, size))
                    n = int(trng.integers(1, 200_000))
                    got = os.pread(fd, n, off)
                    if got != want[off:off + n]:
                        errors.append(f"thread {k}: pread(off={off}, n={n}) differs "
                                      f"(got {len(got)} bytes)")
                        return
            finally:
                if fd != shared_fd:
                    os.close(fd)
                del mm
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {k}: {e!r}")

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(THREADS)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert not any(t.is_alive() for t in threads), "reader threads hung"
    finally:
        os.close(shared_fd)
    assert not errors, "\n".join(errors)
    # the data region as a whole, once more, now warm
    with open(path, "rb") as f:
        f.seek(HEADER_SIZE)
        assert f.read() == want[HEADER_SIZE:]
