# SPDX-License-Identifier: MIT
"""Helpers for the control file's tests: the lake they stage from, raw text sessions, replies
and the daemon's staging counters."""

import json
import os
import time

import numpy as np
import pytest

from conftest import REPO_ROOT, SLOW

N = 3000
CTL_CLIENT = os.environ.get("TENSORFS_CTL_CLIENT") or str(REPO_ROOT / "build" / "rel" / "tests"
                                                          / "ctl_client")


def build(lake):
    rng = np.random.default_rng(1)
    cols = {
        "image": rng.integers(0, 256, size=(N, 8, 8, 3), dtype=np.uint8),
        "label": np.arange(N, dtype=np.int64) * 3 + 1,
        "feat": rng.standard_normal((N, 5)).astype(np.float32),
    }
    # Small chunks: batches cross many chunk boundaries.
    lake.build("d", cols, "--chunk-size", "16k")
    return cols


def ctl_path(m):
    return m.path / ".tensorfs" / "control"


class Session:
    """A raw text session: one os.open'ed control file."""

    def __init__(self, m):
        self.fd = os.open(ctl_path(m), os.O_RDWR)

    def req(self, line):
        os.write(self.fd, line if isinstance(line, bytes) else (line + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = os.read(self.fd, 65536)
            assert chunk, f"no reply to {line!r}"
            buf += chunk
        assert buf.count(b"\n") == 1, f"more than one reply line to {line!r}: {buf!r}"
        return buf.decode().rstrip("\n")

    def close(self):
        os.close(self.fd)


def fields(reply):
    return dict(t.split("=", 1) for t in reply.split()[1:] if "=" in t)


def staging_stats(m):
    return json.loads((m.path / ".tensorfs" / "stats").read_bytes())["staging"]


def wait_for(pred, what, timeout=10.0):
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def shm_files(pid):
    """The slot files of daemon pid's streams (not those of slots kept after their streams
    closed, tensorfs-PID-kept-N: the daemon's until a stream takes them or it frees them)."""
    return [f for f in os.listdir("/dev/shm")
            if f.startswith(f"tensorfs-{pid}-") and not f.startswith(f"tensorfs-{pid}-kept-")]
