# SPDX-License-Identifier: MIT
"""Fixtures and helpers for the tensorfs integration tests (real FUSE mounts, real numpy).

The binary is $TENSORFS_BIN (absolute path) or <repo root>/tensorfs. A missing binary makes
every test fail (never skip). Every mount started here is unmounted in teardown, whatever
happened in the test; a daemon that does not exit after the unmount is killed and reported.

Test modules import the plain helpers with ``from conftest import ...`` (pytest's default
"prepend" import mode puts this directory on sys.path).
"""

import contextlib
import gc
import io
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

# Also when tests/gpu loads this file by path, outside pytest's prepend mode.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mountinfo import is_mounted  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
# The Python client from the tree, for every test that imports tensorfs.
sys.path.insert(0, str(REPO_ROOT / "packaging" / "python"))
TENSORFS_BIN = os.environ.get("TENSORFS_BIN") or str(REPO_ROOT / "tensorfs")
SANITIZE = os.environ.get("TENSORFS_SANITIZE") == "1"
# Sanitizer builds run roughly 3x slower: stretch every timeout.
SLOW = 3.0 if SANITIZE else 1.0
FUSERMOUNT = shutil.which("fusermount3") or "/usr/bin/fusermount3"

HEADER_SIZE = 4096  # every mounted .npy has its data at exactly this offset
NPY_MAGIC_V1 = b"\x93NUMPY\x01\x00"
MOUNT_TIMEOUT = 15.0 * (2.0 if SANITIZE else 1.0)
CLI_TIMEOUT = 120.0 * SLOW

# Markers a sanitizer leaves in a log: a daemon that prints one has a memory bug.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")

# Every Mount ever started in this session, so that nothing outlives pytest.
_ALL_MOUNTS = []


# --------------------------------------------------------------------------------------------
# The binary and the CLI
# --------------------------------------------------------------------------------------------

def require_binary():
    if not (os.path.isfile(TENSORFS_BIN) and os.access(TENSORFS_BIN, os.X_OK)):
        pytest.fail(f"tensorfs binary not found or not executable: {TENSORFS_BIN!r} "
                    f"(build it with `make`, or set TENSORFS_BIN to an absolute path)",
                    pytrace=False)


def _fmt_proc(cmd, rc, out, err):
    return (f"command: {' '.join(map(str, cmd))}\nexit status: {rc}\n"
            f"--- stdout ---\n{out}\n--- stderr ---\n{err}")


def run_proc(args, timeout=None, check=False):
    """Run `tensorfs ARGS...`; returns a CompletedProcess (text). A hang fails the test."""
    require_binary()
    cmd = [TENSORFS_BIN] + [str(a) for a in args]
    timeout = timeout or CLI_TIMEOUT
    try:
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"tensorfs timed out after {timeout:.0f}s\n"
                    + _fmt_proc(cmd, "timeout", _s(e.stdout), _s(e.stderr)))
    if check and p.returncode != 0:
        pytest.fail("tensorfs failed\n" + _fmt_proc(cmd, p.returncode, p.stdout, p.stderr))
    _check_sanitizer_text(p.stderr, "tensorfs " + " ".join(map(str, args)))
    return p


def tfs(*args, timeout=None):
    """Run the CLI; returns (rc, stdout, stderr)."""
    p = run_proc(args, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def _s(x):
    if x is None:
        return ""
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    return x


def _check_sanitizer_text(text, what):
    for m in SANITIZER_MARKERS:
        if m in text:
            pytest.fail(f"sanitizer report from {what}:\n{text[-8000:]}")


# --------------------------------------------------------------------------------------------
# Lakes
# --------------------------------------------------------------------------------------------

class Npy:
    """A column input with an explicit NPY format version, e.g. Npy(arr, (2, 0))."""

    def __init__(self, arr, version=None):
        self.arr = arr
        self.version = version


class Lake:
    """A lake directory plus a scratch directory for the .npy inputs."""

    def __init__(self, root, scratch):
        self.root = Path(root)
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._n = 0

    @property
    def url(self):
        return "file://" + str(self.root)

    def ds_url(self, ds):
        return f"{self.url}/{ds}"

    # -- inputs ------------------------------------------------------------------------------
    def write_npy(self, arr, version=None, name="col"):
        """Write arr as an .npy file (format version `version`, None = numpy's choice)."""
        self._n += 1
        path = self.scratch / f"{self._n:04d}_{name}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, np.asanyarray(arr), version=version,
                                      allow_pickle=True)
        return path

    def _col_args(self, columns):
        args = []
        for name, v in columns.items():
            if isinstance(v, (str, Path)):
                path = v  # a path or a URL (which Path would fold: s3://b -> s3:/b)
            elif isinstance(v, Npy):
                path = self.write_npy(v.arr, v.version, name)
            else:
                path = self.write_npy(v, None, name)
            args.append(f"{name}={path}")
        return args

    # -- CLI ---------------------------------------------------------------------------------
    def create(self, ds, check=True):
        return run_proc(["create", self.ds_url(ds)], check=check)

    def import_(self, ds, columns, *opts, check=True, timeout=None):
        """`tensorfs import URL COL=FILE... OPTS...`; columns maps name -> array | Npy | path."""
        args = ["import", self.ds_url(ds)] + self._col_args(columns) + [str(o) for o in opts]
        return run_proc(args, check=check, timeout=timeout)

    def build(self, ds, columns, *opts, timeout=None):
        """create + one import, both must succeed. Returns the import's CompletedProcess."""
        self.create(ds)
        return self.import_(ds, columns, *opts, timeout=timeout)

    def info(self, ds, ref=None):
        args = ["info", self.ds_url(ds), "--json"]
        if ref is not None:
            args += ["--ref", ref]
        p = run_proc(args, check=True)
        try:
            return json.loads(p.stdout)
        except ValueError as e:
            pytest.fail(f"`tensorfs info --json` printed invalid JSON ({e}):\n{p.stdout}")

    def refs(self, ds):
        """{relative path: bytes} of everything under <ds>/refs."""
        out = {}
        base = self.root / ds / "refs"
        if base.is_dir():
            for dirpath, _, files in os.walk(base):
                for fn in files:
                    p = Path(dirpath) / fn
                    out[str(p.relative_to(base))] = p.read_bytes()
        return out

    def snapshot(self, ds):
        """What must not change when an import fails: the refs and `info --json`."""
        p = run_proc(["info", self.ds_url(ds), "--json"])
        return {"refs": self.refs(ds), "info_rc": p.returncode, "info": p.stdout}

    def chunk_ids(self, ds):
        """Sorted 64-hex ids of a dataset's chunk objects (content-addressed: equal ids, equal
        bytes)."""
        return sorted(oid for oid, path in self.object_files(ds)
                      if parse_object_header(path.read_bytes())["type"] == 1)

    def object_files(self, ds):
        """[(64-hex id, path)] of every object file of a dataset."""
        out = []
        base = self.root / ds / "objects"
        for d in sorted(base.iterdir()):
            if d.is_dir() and len(d.name) == 2:
                for f in sorted(d.iterdir()):
                    if len(f.name) == 62:
                        out.append((d.name + f.name, f))
        return out


def flip_byte(path, off, mask=0x21):
    """Damage an object file (kept read-only) at one byte, in place."""
    mode = os.stat(path).st_mode
    os.chmod(path, mode | stat.S_IWUSR)
    try:
        with open(path, "r+b") as f:
            f.seek(off)
            byte = f.read(1)
            f.seek(off)
            f.write(bytes([byte[0] ^ mask]))
    finally:
        os.chmod(path, stat.S_IMODE(mode))


def read_ragged(coldir, dtype):
    """The rows of a mounted ragged COLUMN/ directory: data.bin cut at offsets.npy, each of
    dtype and reshaped to its shapes.npy row."""
    offsets = np.load(coldir / "offsets.npy")
    shapes = np.load(coldir / "shapes.npy")
    data = np.fromfile(coldir / "data.bin", dtype=np.uint8)
    return [data[offsets[i]:offsets[i + 1]].view(dtype).reshape(shapes[i])
            for i in range(len(offsets) - 1)]


def parse_object_header(raw):
    assert len(raw) >= 48, "object file shorter than its 48-byte header"
    assert raw[:4] == b"TFSO", f"bad object magic {raw[:4]!r}"
    return {
        "version": struct.unpack_from("<H", raw, 4)[0],
        "type": raw[6],
        "codec": raw[7],
        "raw_size": struct.unpack_from("<Q", raw, 16)[0],
        "payload_size": struct.unpack_from("<Q", raw, 24)[0],
    }


# --------------------------------------------------------------------------------------------
# Mounts
# --------------------------------------------------------------------------------------------

def unmount(path, tries=10):
    """fusermount3 -u with retries (busy), then a lazy unmount. Returns a note or None."""
    path = str(path)
    if not is_mounted(path):
        return None
    gc.collect()  # drop stray memmaps that keep the mount busy
    last = ""
    for _ in range(tries):
        p = subprocess.run([FUSERMOUNT, "-u", path], capture_output=True, text=True)
        if p.returncode == 0 or not is_mounted(path):
            return None
        last = p.stderr.strip()
        time.sleep(0.3)
        gc.collect()
    subprocess.run([FUSERMOUNT, "-uz", path], capture_output=True, text=True)
    return f"`fusermount3 -u` kept failing ({last}); unmounted lazily"


def pids_for_path(path):
    """Pids (not ours, not fusermount) whose command line mentions `path`."""
    needle = os.fsencode(str(path))
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle in cmd and b"fusermount" not in cmd.split(b"\0")[0]:
            pids.append(int(d))
    return pids


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "?"


def kill_pids(pids):
    """SIGTERM then SIGKILL the given pids (processes this test suite started)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + 3
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except OSError:
        return False
    return False


def leased_batch(mnt, target, pids):
    """Open the control file of the mount at mnt, open a stream over `target` (DATASET/REF,
    column x) and take a batch: the session (its fd) and the daemon's slot files (named after
    one of pids) while the batch is leased."""
    ctl = os.open(Path(mnt) / ".tensorfs" / "control", os.O_RDWR)
    os.write(ctl, f"open {target} cols=x depth=2 batch=64\nnext stream=1 batch=64\n".encode())
    buf = b""
    while buf.count(b"\n") < 2:
        buf += os.read(ctl, 65536)
    assert buf.startswith(b"ok ") and b"\nok " in buf, buf
    files = [f for f in os.listdir("/dev/shm")
             if any(f.startswith(f"tensorfs-{p}-") for p in pids)]
    assert files, "no slot file while a batch is leased"
    return ctl, files


def vm_rss(pid, field="VmRSS"):
    """VmRSS of a process in bytes (None when it is gone); field: another of its memory figures
    in /proc/PID/status (VmHWM: its peak RSS so far)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class Mount:
    """`tensorfs mount LAKE MNT -f [-o ...]` in the foreground, stderr captured to a file."""

    def __init__(self, lake, mnt, opts=(), log_path=None):
        self.lake_url = lake.url if isinstance(lake, Lake) else "file://" + str(lake)
        self.path = Path(mnt)
        self.opts = list(opts)
        self.log_path = Path(log_path) if log_path else self.path.parent / (self.path.name + ".log")
        self.proc = None
        self.stopped = False
        self._logf = None

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __truediv__(self, other):
        return self.path / other

    def start(self):
        require_binary()
        self.path.mkdir(parents=True, exist_ok=True)
        cmd = [TENSORFS_BIN, "mount", self.lake_url, str(self.path), "-f"]
        if self.opts:
            cmd += ["-o", ",".join(self.opts)]
        self._logf = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._logf,
                                     stderr=subprocess.STDOUT)
        _ALL_MOUNTS.append(self)
        deadline = time.time() + MOUNT_TIMEOUT
        while True:
            if is_mounted(self.path) and os.path.ismount(self.path):
                return self
            rc = self.proc.poll()
            if rc is not None:
                self.stop()
                pytest.fail(f"`{' '.join(cmd)}` exited with status {rc} before the mount "
                            f"was up; its log:\n{self.log()[-8000:]}")
            if time.time() > deadline:
                self.stop()
                pytest.fail(f"`{' '.join(cmd)}`: mount not up after {MOUNT_TIMEOUT:.0f}s; "
                            f"its log:\n{self.log()[-8000:]}")
            time.sleep(0.03)

    def stop(self):
        """Unmount and reap the daemon. Returns a list of problems (empty when clean)."""
        if self.stopped:
            return []
        self.stopped = True
        problems = []
        note = unmount(self.path)
        if note:
            problems.append(note)
        if self.proc is not None:
            # after a lazy unmount the daemon lives on while files stay open: do not wait long
            wait = (3 if note else 10) * SLOW
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                problems.append("the daemon did not exit within %ds of the unmount; killed it"
                                % wait)
                kill_pids([self.proc.pid])
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=5)
            rc = self.proc.returncode
            if rc not in (0, None) and not problems:
                problems.append(f"the daemon exited with status {rc} after the unmount")
        if self._logf:
            self._logf.close()
        # Belt and braces: nothing mentioning this mount point may survive.
        left = pids_for_path(self.path)
        if left:
            problems.append("processes left behind: " + "; ".join(cmdline(p) for p in left))
            kill_pids(left)
        if is_mounted(self.path):
            subprocess.run([FUSERMOUNT, "-uz", str(self.path)], capture_output=True)
            problems.append("still mounted after teardown")
        log = self.log()
        for m in SANITIZER_MARKERS:
            if m in log:
                problems.append("sanitizer report in the daemon log")
                break
        if problems:
            problems.append("daemon log (tail):\n" + log[-8000:])
        return problems

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        problems = self.stop()
        if exc_type is None and problems:
            pytest.fail("mount teardown: " + "\n".join(problems))
        return False


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(scope="session", autouse=True)
def _no_daemon_survives():
    yield
    for m in _ALL_MOUNTS:
        m.stop()


@pytest.fixture
def tfs_bin():
    """The binary's path; fails the test when it is missing."""
    require_binary()
    return TENSORFS_BIN


@pytest.fixture
def lake(tmp_path, tfs_bin):
    """An empty (not yet created) lake directory under tmp_path."""
    return Lake(tmp_path / "lake", tmp_path / "npy")


@pytest.fixture
def mount(tmp_path, request):
    """Factory: mount(lake, opts=(), name="mnt") -> started Mount; unmounted in teardown.

    Teardown fails the test when the daemon misbehaves at exit (does not exit after the
    unmount, exits non-zero, leaves a sanitizer report), unless the test already failed,
    in which case it only cleans up and prints the daemon log."""
    mounts = []

    def factory(lk, opts=(), name="mnt"):
        m = Mount(lk, tmp_path / name, opts)
        mounts.append(m)
        return m.start()

    yield factory
    problems = []
    for m in reversed(mounts):
        p = m.stop()
        if p:
            problems.append(f"[{m.path}] " + "\n".join(p))
    rep = getattr(request.node, "rep_call", None)
    failed = rep is not None and rep.failed
    if failed:
        for m in mounts:
            print(f"---- daemon log of {m.path} ----\n{m.log()[-6000:]}")
    elif problems:
        pytest.fail("mount teardown: " + "\n".join(problems), pytrace=False)


# --------------------------------------------------------------------------------------------
# Checking mounted files
# --------------------------------------------------------------------------------------------

def write_text(path, rows, newline="\n"):
    """A text source: one row a line."""
    path.write_bytes(newline.join(rows).encode() + newline.encode())
    return path


def write_dir(path, arrays):
    """A directory source: one .npy file a row, in name order."""
    path.mkdir()
    for i, a in enumerate(arrays):
        np.save(path / f"{i:06d}.npy", a)
    return path


def le_dtype(dt):
    """The dtype a mounted file must have: the input's, little-endian."""
    return np.dtype(dt).newbyteorder("<")


def parse_mounted_header(buf):
    """Check the first 4096 bytes of a mounted .npy; returns (shape, fortran_order, dtype)."""
    assert len(buf) >= HEADER_SIZE, f"file shorter than its {HEADER_SIZE}-byte header"
    assert buf[:8] == NPY_MAGIC_V1, f"not an NPY v1.0 magic: {buf[:8]!r}"
    hlen = struct.unpack("<H", buf[8:10])[0]
    assert hlen == HEADER_SIZE - 10, f"header length field {hlen}, expected {HEADER_SIZE - 10}"
    assert buf[HEADER_SIZE - 1:HEADER_SIZE] == b"\n", "header does not end with a newline"
    buf[10:HEADER_SIZE].decode("ascii")  # must be ASCII
    f = io.BytesIO(bytes(buf[:HEADER_SIZE]))
    assert np.lib.format.read_magic(f) == (1, 0)
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    assert f.tell() == HEADER_SIZE
    return shape, fortran, dtype


def read_header(path):
    with open(path, "rb") as f:
        return f.read(HEADER_SIZE)


def check_column_file(path, src, check_data=True):
    """A mounted <col>.npy against its source array: header, size, values (bit-exact)."""
    src = np.asarray(src)
    want_dt = le_dtype(src.dtype)
    shape, fortran, dtype = parse_mounted_header(read_header(path))
    assert shape == src.shape, f"{path.name}: shape {shape}, expected {src.shape}"
    assert fortran is False, f"{path.name}: fortran_order must be False"
    assert dtype.str == want_dt.str, f"{path.name}: dtype {dtype.str}, expected {want_dt.str}"
    st = os.stat(path)
    assert st.st_size == HEADER_SIZE + src.nbytes, \
        f"{path.name}: size {st.st_size}, expected {HEADER_SIZE + src.nbytes}"
    if not check_data:
        return
    want = np.ascontiguousarray(src.astype(want_dt)).tobytes()
    if src.size == 0:
        got = np.load(path)
    else:
        got = np.load(path, mmap_mode="r")
    try:
        assert got.shape == src.shape and got.dtype == want_dt
        assert bytes(np.ascontiguousarray(got).tobytes()) == want, \
            f"{path.name}: data differs from the source"
        if src.dtype.kind in "fc":
            assert np.array_equal(got, src, equal_nan=True)
        else:
            assert np.array_equal(got, src)
    finally:
        del got


def expected_file_bytes(path, src):
    """Header bytes (read from the mount, checked) + the source's data bytes."""
    hdr = read_header(path)
    shape, fortran, dtype = parse_mounted_header(hdr)
    assert shape == src.shape and not fortran and dtype == le_dtype(src.dtype)
    return hdr + np.ascontiguousarray(src.astype(le_dtype(src.dtype))).tobytes()


def load_schema(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert os.stat(path).st_size == len(raw), "schema.json st_size differs from its content"
    try:
        return json.loads(raw)
    except ValueError as e:
        pytest.fail(f"schema.json is not valid JSON ({e}):\n{raw[:4000]!r}")


def schema_column(schema, name):
    for c in schema["columns"]:
        if c["name"] == name:
            return c
    pytest.fail(f"column {name!r} not in schema.json: {[c['name'] for c in schema['columns']]}")


def check_schema_column(col, src, name):
    """schema.json's entry for a column against its source array."""
    src = np.asarray(src)
    dt = le_dtype(src.dtype)
    assert col["name"] == name
    assert col["file"] == name + ".npy"
    assert np.dtype(col["dtype"]) == dt, f"{name}: schema dtype {col['dtype']!r}, want {dt.str}"
    assert np.dtype(col["type"]) == dt, f"{name}: schema type {col['type']!r}, want {dt.name}"
    assert list(col["shape"]) == list(src.shape[1:])
    assert col["rows"] == src.shape[0]
    row_bytes = dt.itemsize * int(np.prod(src.shape[1:], dtype=np.int64))
    assert col["row_bytes"] == row_bytes
    rpc = col["rows_per_chunk"]
    assert isinstance(rpc, int) and rpc >= 1
    assert col["chunk_bytes"] == rpc * row_bytes, \
        f"{name}: chunk_bytes {col['chunk_bytes']} != rows_per_chunk*row_bytes {rpc * row_bytes}"
    rows = src.shape[0]
    assert col["chunks"] == -(-rows // rpc), \
        f"{name}: {col['chunks']} chunks for {rows} rows at {rpc} rows per chunk"
    assert col["codec"] in ("zstd", "raw")
    assert isinstance(col["level"], int)
    assert isinstance(col["stored_bytes"], int) and col["stored_bytes"] >= 0


def tar_add(t, name, data):
    """Add a member of these bytes to the open tarfile t."""
    import io
    import tarfile

    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    t.addfile(ti, io.BytesIO(data))


def write_tar(path, members):
    """A tar file of (name, bytes) members in order, as a WebDataset shard is."""
    import tarfile

    with tarfile.open(path, "w") as t:
        for name, data in members:
            tar_add(t, name, data)
    return path


def preads(fd, ranges):
    """[(offset, length)] -> [bytes]"""
    return [os.pread(fd, n, off) for off, n in ranges]


@contextlib.contextmanager
def opened(path, flags=os.O_RDONLY):
    fd = os.open(path, flags)
    try:
        yield fd
    finally:
        os.close(fd)


class RssSampler:
    """Samples a process's VmRSS every `interval` seconds in a thread; .peak in bytes."""

    def __init__(self, pid, interval=0.002):
        self.pid = pid
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def sample(self):
        r = vm_rss(self.pid)
        if r is not None:
            self.peak = max(self.peak, r)
            self.samples += 1
        return r

    def _run(self):
        while not self._stop.is_set():
            self.sample()
            time.sleep(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *a):
        self._stop.set()
        self._t.join()
        self.sample()
        return False
