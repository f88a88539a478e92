# SPDX-License-Identifier: MIT
"""CUDA staging on a machine with a GPU; every test SKIPS (loudly) without a device.

    TENSORFS_BIN=build/rel/tensorfs /usr/bin/python3 -m pytest -v -s tests/gpu

Staged CUDA batches must equal the host backend's; a separate loader process opens the IPC
handles; staging throughput is compared with pinned cudaMemcpy bandwidth (target >= 0.8).
The CUDA runtime is reached through ctypes, so torch need not be built with CUDA.
"""

import ctypes
import glob
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging" / "python"))
import tensorfs  # noqa: E402


def _cudart():
    for p in sorted(glob.glob(os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"),
                                           "lib64", "libcudart.so*"))) + ["libcudart.so"]:
        try:
            return ctypes.CDLL(p)
        except OSError:
            continue
    return None


RT = _cudart()


def _device_count():
    if RT is None:
        return 0
    n = ctypes.c_int(0)
    return n.value if RT.cudaGetDeviceCount(ctypes.byref(n)) == 0 else 0


# Each test is reported as skipped, with the reason, where there is no device (a module-level
# skip would collect nothing, which pytest reports as an error).
pytestmark = pytest.mark.skipif(_device_count() == 0,
                                reason="no CUDA device (or no usable libcudart): GPU staging "
                                       "not run")


class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def ck(rc, what):
    assert rc == 0, f"{what}: CUDA error {rc}"


class Loader:
    """Opens a stager's IPC allocations and events once, reads slots back to the host."""

    def __init__(self):
        self.mems, self.events = {}, {}

    def read(self, fields, cols):
        ptr = self.mems.get(fields["ipc"])
        if ptr is None:
            p = ctypes.c_void_p()
            ck(RT.cudaIpcOpenMemHandle(ctypes.byref(p),
                                       Handle.from_buffer_copy(bytes.fromhex(fields["ipc"])), 1),
               "cudaIpcOpenMemHandle")
            ptr = self.mems[fields["ipc"]] = p.value
        ev = self.events.get(fields["event"])
        if ev is None:
            e = ctypes.c_void_p()
            ck(RT.cudaIpcOpenEventHandle(ctypes.byref(e),
                                         Handle.from_buffer_copy(bytes.fromhex(fields["event"]))),
               "cudaIpcOpenEventHandle")
            ev = self.events[fields["event"]] = e
        ck(RT.cudaEventSynchronize(ev), "cudaEventSynchronize")
        out = {}
        rows = int(fields["rows"])
        for c in cols:
            if "kind" in c:  # rows of any size: their data, offsets and (ragged) shapes
                parts = {"data": ("data", (int(c["data_bytes"]),), "|u1"),
                         "offsets": ("offsets", (rows + 1,), "<u8")}
                if c["kind"] == "ragged":
                    parts["shapes"] = ("shapes", (rows, int(c["rank"])), "<i8")
                for key, (field, shape, dt) in parts.items():
                    a = np.empty(shape, dtype=np.dtype(dt))
                    if a.nbytes:
                        ck(RT.cudaMemcpy(ctypes.c_void_p(a.ctypes.data),
                                         ctypes.c_void_p(ptr + int(c[field])),
                                         ctypes.c_size_t(a.nbytes), 2), "cudaMemcpy D2H")
                    out[f"{c['name']}.{key}"] = a
                continue
            shape = tuple(int(x) for x in c["shape"].split(","))
            a = np.empty(shape, dtype=np.dtype(c["dtype"]))
            ck(RT.cudaMemcpy(ctypes.c_void_p(a.ctypes.data), ctypes.c_void_p(ptr + int(c["offset"])),
                             ctypes.c_size_t(a.nbytes), 2), "cudaMemcpy D2H")
            out[c["name"]] = a
        return out

    def close(self):
        # Before the stager closes: the daemon then frees the allocation and the events, and
        # cudaFree of memory still open in an importer is undefined.
        for e in self.events.values():
            RT.cudaEventDestroy(e)
        for p in self.mems.values():
            RT.cudaIpcCloseMemHandle(ctypes.c_void_p(p))
        self.events.clear()
        self.mems.clear()


def raw(stager, line):
    from tensorfs.staging import _parse_reply
    return _parse_reply(stager.request(line))


N = 20000


def build(lake):
    rng = np.random.default_rng(3)
    cols = {"image": rng.integers(0, 256, size=(N, 32, 32, 3), dtype=np.uint8),
            "label": np.arange(N, dtype=np.int64)}
    lake.build("d", cols, "--chunk-size", "1M")
    return cols


def test_cuda_batches_equal_host(lake, mount):
    cols = build(lake)
    m = mount(lake)
    rng = np.random.default_rng(5)
    loader = Loader()
    with tensorfs.Stager(m.path, "d/main", ["image", "label"], device="host",
                         batch_size=512) as h, \
         tensorfs.Stager(m.path, "d/main", ["image", "label"], device="cuda:0",
                         batch_size=512) as g:
        for _ in range(20):
            rows = rng.integers(0, N, size=512)
            hb = h.stage(rows)
            f, c = raw(g, f"stage stream={g.stream} rows=" + ",".join(map(str, rows)))
            got = loader.read(f, c)
            for name in ("image", "label"):
                assert np.array_equal(got[name], hb[name]), name
                assert np.array_equal(got[name], cols[name][rows]), name
            hb.release()
            g.release(int(f["slot"]))
        loader.close()


def test_cuda_ragged_and_text_batches_equal_host(lake, mount, tmp_path):
    """Ragged and text columns staged to the device: data, offsets and shapes equal the host
    backend's batch of the same rows."""
    rng = np.random.default_rng(8)
    (tmp_path / "r").mkdir()
    arrays = [rng.standard_normal((int(rng.integers(0, 6)), 3)).astype(np.float32)
              for _ in range(2000)]
    for i, a in enumerate(arrays):
        np.save(tmp_path / "r" / f"{i:05d}.npy", a)
    (tmp_path / "t.txt").write_text("".join(f"row {i} " + "x" * (i % 13) + "\n"
                                            for i in range(2000)))
    lake.build("k", {"r": tmp_path / "r", "t": tmp_path / "t.txt"}, "--chunk-size", "16k")
    m = mount(lake)
    loader = Loader()
    with tensorfs.Stager(m.path, "k/main", ["r", "t"], device="host", batch_size=256) as h, \
         tensorfs.Stager(m.path, "k/main", ["r", "t"], device="cuda:0", batch_size=256) as g:
        for _ in range(10):
            rows = rng.integers(0, 2000, size=256)
            hb = h.stage(rows)
            f, c = raw(g, f"stage stream={g.stream} rows=" + ",".join(map(str, rows)))
            got = loader.read(f, c)
            assert np.array_equal(got["r.offsets"], hb["r"].offsets)
            assert np.array_equal(got["r.shapes"], hb["r"].shapes)
            assert got["r.data"].tobytes() == hb["r"].data.tobytes()
            assert got["t.data"].tobytes() == hb["t"].data.tobytes()
            for i, r in enumerate(rows):
                o = got["r.offsets"]
                row = got["r.data"][o[i]:o[i + 1]].view(np.float32).reshape(got["r.shapes"][i])
                assert np.array_equal(row, arrays[r])
            hb.release()
            g.release(int(f["slot"]))
        loader.close()


CHILD = r"""
import ctypes, sys, numpy as np
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import test_gpu
line = sys.stdin.readline()
from tensorfs.staging import _parse_reply
f, c = _parse_reply(line)
got = test_gpu.Loader().read(f, c)
print(int(got["label"].sum()), int(got["image"].astype(np.int64).sum()), flush=True)
"""


def test_ipc_from_a_separate_process(lake, mount):
    cols = build(lake)
    m = mount(lake)
    with tensorfs.Stager(m.path, "d/main", ["image", "label"], device="cuda:0",
                         batch_size=1000) as g:
        reply = g.request(f"stage stream={g.stream} range=1000:2000")
        p = subprocess.run([sys.executable, "-c", CHILD, str(REPO / "packaging" / "python"),
                            str(Path(__file__).parent)], input=reply + "\n",
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        lab, img = map(int, p.stdout.split())
        assert lab == int(cols["label"][1000:2000].sum())
        assert img == int(cols["image"][1000:2000].astype(np.int64).sum())


def test_staging_throughput_vs_pinned_copy(lake, mount):
    build(lake)
    m = mount(lake)
    batch = 2048
    nbytes = batch * (32 * 32 * 3 + 8)
    # The copy engine's bandwidth from pinned memory.
    host, dev = ctypes.c_void_p(), ctypes.c_void_p()
    ck(RT.cudaHostAlloc(ctypes.byref(host), ctypes.c_size_t(nbytes), 0), "cudaHostAlloc")
    ck(RT.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(nbytes)), "cudaMalloc")
    for _ in range(3):
        RT.cudaMemcpy(dev, host, ctypes.c_size_t(nbytes), 1)
    t0 = time.perf_counter()
    reps = 50
    for _ in range(reps):
        ck(RT.cudaMemcpy(dev, host, ctypes.c_size_t(nbytes), 1), "cudaMemcpy H2D")
    copy_bw = reps * nbytes / (time.perf_counter() - t0)
    RT.cudaFree(dev)
    RT.cudaFreeHost(host)
    # Staging: next batches of the whole (warm) dataset, each waited for on its event.
    loader = Loader()
    with tensorfs.Stager(m.path, "d/main", ["image", "label"], device="cuda:0", depth=6,
                         batch_size=batch) as g:
        def epoch():
            g.seek(0)
            done = 0
            while True:
                try:
                    f, c = raw(g, f"next stream={g.stream} batch={batch}")
                except tensorfs.StagingError:
                    return done
                ev = loader.events.get(f["event"])
                loader.read(f, c[:0])  # opens handles, waits on the event; no copy back
                done += int(f["rows"]) * (32 * 32 * 3 + 8)
                g.request(f"release stream={g.stream} slot={f['slot']}")
                del ev
        epoch()  # warm the cache
        t0 = time.perf_counter()
        staged = epoch()
        stage_bw = staged / (time.perf_counter() - t0)
        loader.close()
    ratio = stage_bw / copy_bw
    print(f"\npinned cudaMemcpy H2D: {copy_bw / 1e9:.2f} GB/s; staging: {stage_bw / 1e9:.2f} GB/s;"
          f" ratio {ratio:.2f} (target >= 0.8)")
    assert ratio >= 0.8, f"staging reaches {ratio:.2f} of pinned copy bandwidth"
