# SPDX-License-Identifier: MIT
"""Batched staging: the daemon gathers rows into shared slots; the loader only maps them.

``Stager`` speaks the text protocol of ``<mount>/.tensorfs/control`` (documented in
``tensorfs/control.h`` and the README), and asks for each next batch with the protocol's
TFS_CTL_IOC_NEXT ioctl: one call into the daemon a batch where a text request makes two. Host
batches are numpy arrays on the daemon's shared-memory slot file (zero-copy, read-only); CUDA
batches are torch tensors on the daemon's device slots, opened through CUDA IPC, after the
current stream waits on the slot's event.

A batch is valid until it is released: ``batch.release()``, ``stager.release(batch)``, the next
step of the iterator, or closing the stager. Copy what must outlive that.
"""

import collections
import contextlib
import ctypes
import ctypes.util
import errno as _errno
import fcntl
import glob
import mmap
import os

import numpy as np

__all__ = ["Stager", "Batch", "StagingError"]


class StagingError(OSError):
    """An ``error NAME message`` reply. ``errno`` is the code, ``name`` its symbolic name."""

    def __init__(self, name, message):
        super().__init__(getattr(_errno, name, _errno.EIO), f"{name} {message}")
        self.name = name
        self.message = message


class Batch(dict):
    """Column name -> array of one staged batch (numpy on host, torch on cuda)."""

    def __init__(self, stager, info, arrays):
        super().__init__(arrays)
        self._stager = stager
        self.slot = int(info["slot"])
        self.rows = int(info["rows"])
        self.pos = int(info["pos"])
        self.released = False

    def release(self):
        if not self.released:
            self._stager.release(self)

    def __repr__(self):
        cols = ", ".join(f"{k}: {tuple(v.shape)}" if hasattr(v, "shape")
                         else f"{k}: {type(v).__name__}[{len(v)}]" for k, v in self.items())
        return f"<tensorfs.Batch slot={self.slot} rows={self.rows} pos={self.pos}; {cols}>"


_COL_KEYS = ("offset", "dtype", "shape", "kind", "offsets", "data", "data_bytes", "shapes",
             "rank")


def _parse_reply(text):
    """'ok k=v ... col=A offset=.. dtype=.. shape=.. col=B ...' -> (dict, [column dicts])."""
    fields, cols = {}, []
    for tok in text.split()[1:]:
        key, _, val = tok.partition("=")
        if key == "col":
            cols.append({"name": val})
        elif cols and key in _COL_KEYS:
            cols[-1][key] = val
        else:
            fields[key] = val
    return fields, cols


# The structs of the ioctls the Stager uses (tensorfs/control.h), as ctypes lays them out like
# the C compiler: a layout that drifted would change the command's size field, and the daemon
# would answer ENOTTY to it (then the text request is used: a test checks that the ioctls are).
_CTL_ABI, _CTL_MAX_COLS, _CTL_MAX_DIMS, _CTL_MAX_ROWS = 2, 16, 32, 1024


class _CtlStatus(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int32), ("abi", ctypes.c_uint32), ("msg", ctypes.c_char * 248)]


class _CtlCol(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 136), ("dtype", ctypes.c_char * 8),
                ("ndim", ctypes.c_uint32), ("kind", ctypes.c_uint32),
                ("shape", ctypes.c_uint64 * _CTL_MAX_DIMS), ("offset", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("data", ctypes.c_uint64),
                ("shapes", ctypes.c_uint64)]


class _CtlBatch(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_uint32), ("slot", ctypes.c_uint32),
                ("rows", ctypes.c_uint64), ("pos", ctypes.c_uint64),
                ("device", ctypes.c_int32), ("ncols", ctypes.c_uint32),
                ("path", ctypes.c_char * 256), ("file_bytes", ctypes.c_uint64),
                ("ipc_mem", ctypes.c_uint8 * 64), ("ipc_event", ctypes.c_uint8 * 64),
                ("cols", _CtlCol * _CTL_MAX_COLS)]


class _CtlNext(ctypes.Structure):
    _fields_ = [("st", _CtlStatus), ("stream", ctypes.c_uint32), ("release", ctypes.c_int32),
                ("batch", ctypes.c_uint64), ("out", _CtlBatch)]


class _CtlStage(ctypes.Structure):
    class U(ctypes.Union):
        _fields_ = [("rows", ctypes.c_uint64 * _CTL_MAX_ROWS), ("batch", _CtlBatch)]

    _fields_ = [("st", _CtlStatus), ("stream", ctypes.c_uint32), ("mode", ctypes.c_uint32),
                ("slot", ctypes.c_int32), ("nrows", ctypes.c_uint32),
                ("start", ctypes.c_uint64), ("count", ctypes.c_uint64), ("u", U)]


class _CtlRelease(ctypes.Structure):
    _fields_ = [("st", _CtlStatus), ("stream", ctypes.c_uint32), ("slot", ctypes.c_int32)]


class _CtlSeek(ctypes.Structure):
    _fields_ = [("st", _CtlStatus), ("stream", ctypes.c_uint32), ("pad0", ctypes.c_uint32),
                ("pos", ctypes.c_uint64)]


def _iowr(nr, struct):
    """_IOWR(0xB9, nr, struct): direction read|write, size, type, number."""
    return (3 << 30) | (ctypes.sizeof(struct) << 16) | (0xB9 << 8) | nr


_IOC_STAGE, _IOC_RELEASE, _IOC_SEEK = _iowr(2, _CtlStage), _iowr(3, _CtlRelease), _iowr(6, _CtlSeek)
_IOC_NEXT = _iowr(7, _CtlNext)
_ROWS, _RANGE = 1, 2  # enum tfs_ctl_mode
_KINDS = {1: "ragged", 2: "text", 3: "bytes"}


def _batch_fields(b):
    """A struct tfs_ctl_batch -> the (dict, [column dicts]) of its text reply."""
    info = {"stream": str(b.stream), "slot": str(b.slot), "rows": str(b.rows),
            "pos": str(b.pos)}
    if b.device < 0:
        info["file"] = os.fsdecode(b.path)
        info["file_bytes"] = str(b.file_bytes)
    else:
        info["device"] = f"cuda:{b.device}"
        info["ipc"] = bytes(b.ipc_mem).hex()
        info["event"] = bytes(b.ipc_event).hex()
    cols, total = [], 0
    for c in b.cols[:b.ncols]:
        col = {"name": c.name.decode(), "dtype": c.dtype.decode()}
        total += c.bytes
        if c.kind in _KINDS:
            col.update(kind=_KINDS[c.kind], offsets=str(c.offset), data=str(c.data),
                       data_bytes=str(c.bytes))
            if c.kind == 1:
                col.update(shapes=str(c.shapes), rank=str(c.ndim))
        else:
            col.update(offset=str(c.offset), shape=",".join(map(str, c.shape[:c.ndim])))
        cols.append(col)
    info["bytes"] = str(total)
    return info, cols


def _loaded_cudart():
    """Paths of the CUDA runtimes already mapped into this process (torch's, usually)."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.rstrip("\n").split(None, 5)
                if (len(p) == 6 and os.path.basename(p[5]).startswith("libcudart")
                        and p[5].startswith("/") and p[5] not in paths):
                    paths.append(p[5])
    except OSError:
        pass
    return paths


def _control_path(mountpoint):
    return os.path.join(os.fspath(mountpoint), ".tensorfs", "control")


def _target(mountpoint, version_or_view):
    """A path under the mount (absolute or relative to it) -> DATASET/REF[/views/PARAMS]."""
    v = os.fspath(version_or_view)
    if os.path.isabs(v):
        mnt = os.path.realpath(os.fspath(mountpoint))
        rel = os.path.relpath(os.path.abspath(v), mnt)
        if rel.startswith(".."):
            raise ValueError(f"{v} is not under the mount {mnt}")
        v = rel
    return v.strip("/")


class _DeviceArray:
    """Device memory as torch takes it (the CUDA array interface, an attribute of the instance:
    a class made per tensor, as this was, cost 9 us of a batch's column)."""

    __slots__ = ("__cuda_array_interface__",)

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


class _Cuda:
    """The few CUDA runtime calls a loader needs, through ctypes (torch does the rest)."""

    class Handle(ctypes.Structure):
        _fields_ = [("reserved", ctypes.c_char * 64)]

    def __init__(self):
        import torch

        # torch's own runtime first: a second copy of another version may not suit the driver,
        # and pip wheels keep theirs out of the linker's path.
        names = _loaded_cudart() + [ctypes.util.find_library("cudart")]
        names += sorted(glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib",
                                               "libcudart*.so*")))
        names += sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*"))
        self.lib = None
        for n in names:
            if not n:
                continue
            try:
                self.lib = ctypes.CDLL(n)
                break
            except OSError:
                continue
        if self.lib is None:
            raise OSError(_errno.ENODEV, "cannot load the CUDA runtime (libcudart)")
        self.torch = torch
        self.mems = {}    # ipc hex -> (device pointer, device) (each allocation opened once)
        self.events = {}  # event hex -> (cudaEvent_t, device)

    def _check(self, rc, what):
        if rc:
            self.lib.cudaGetErrorString.restype = ctypes.c_char_p
            msg = self.lib.cudaGetErrorString(rc).decode()
            raise OSError(_errno.EIO, f"{what}: {msg}")

    @contextlib.contextmanager
    def _on(self, device):
        """device current for the calls inside; the thread's current device (torch's, the
        user's) is put back after, since it is per thread state they rely on."""
        prev = ctypes.c_int(device)
        self._check(self.lib.cudaGetDevice(ctypes.byref(prev)), "cudaGetDevice")
        self._check(self.lib.cudaSetDevice(device), "cudaSetDevice")
        try:
            yield
        finally:
            if prev.value != device:
                self.lib.cudaSetDevice(prev.value)

    def mem(self, hexstr, device):
        if hexstr not in self.mems:
            ptr = ctypes.c_void_p()
            h = self.Handle.from_buffer_copy(bytes.fromhex(hexstr))
            with self._on(device):
                self._check(self.lib.cudaIpcOpenMemHandle(ctypes.byref(ptr), h, 1),
                            "cudaIpcOpenMemHandle")
            self.mems[hexstr] = (ptr.value, device)
        return self.mems[hexstr][0]

    def pci(self, device):
        """The PCI bus id of this process's CUDA device number `device` ("0000:3B:00.0")."""
        buf = ctypes.create_string_buffer(32)
        self._check(self.lib.cudaDeviceGetPCIBusId(buf, len(buf), device),
                    "cudaDeviceGetPCIBusId")
        return buf.value.decode()

    def wait(self, hexstr, device):
        if hexstr not in self.events:
            ev = ctypes.c_void_p()
            h = self.Handle.from_buffer_copy(bytes.fromhex(hexstr))
            with self._on(device):
                self._check(self.lib.cudaIpcOpenEventHandle(ctypes.byref(ev), h),
                            "cudaIpcOpenEventHandle")
            self.events[hexstr] = (ev, device)
        stream = self.torch.cuda.current_stream(device).cuda_stream
        self._check(self.lib.cudaStreamWaitEvent(ctypes.c_void_p(stream),
                                                 self.events[hexstr][0], 0),
                    "cudaStreamWaitEvent")

    def tensor(self, ptr, shape, dtype, device):
        cai = _DeviceArray({"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                            "data": (ptr, False), "version": 2, "strides": None})
        return self.torch.as_tensor(cai, device=f"cuda:{device}")

    def close(self):
        # Each on the device it was opened on (the context that owns the mapping).
        for ev, dev in self.events.values():
            with self._on(dev):
                self.lib.cudaEventDestroy(ev)
        for ptr, dev in self.mems.values():
            with self._on(dev):
                self.lib.cudaIpcCloseMemHandle(ctypes.c_void_p(ptr))
        self.events.clear()
        self.mems.clear()


class Stager:
    """A staging stream over a version or view of a mounted lake.

    mountpoint: the mount; version_or_view: "DATASET/REF", "DATASET/commits/ID", either with
    "/views/PARAMS", or such a directory's path; columns: names to stage; device: "host" or
    "cuda:N" (numbered as this process numbers its devices: the daemon is asked for that
    device by its PCI bus id, whatever CUDA_VISIBLE_DEVICES says in either process); depth:
    slots in the ring; batch_size: the most rows a batch may have (default: the daemon's,
    1024 or what fits 1 GiB); ahead: batches of next() made ahead; room: bytes
    of row data a slot holds for each ragged, text or bytes column (default: what the largest
    batch of next() needs). dtype: for a pack view (views/pack=S,...), "int32" or "int64" to
    stage its tokens as, ready for an embedding lookup (default: as stored).

    A batch maps each fixed column to an array of batch_size rows, and each ragged, text or
    bytes column to a tensorfs.Ragged, Text or Bytes over the slot (host), or to a dict of
    "data", "offsets" and, ragged, "shapes" tensors (cuda)."""

    def __init__(self, mountpoint, version_or_view, columns, device="host", depth=4,
                 batch_size=None, ahead=None, room=None, dtype=None):
        if isinstance(columns, str):
            columns = [columns]
        self.columns = list(columns)
        self.device = device
        try:
            self._fd = os.open(_control_path(mountpoint), os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FileNotFoundError(
                _errno.ENOENT, f"{os.fspath(mountpoint)!r} is not a tensorfs mount (it has no "
                ".tensorfs/control)", _control_path(mountpoint)) from None
        self._mm = None
        self._cuda = None
        self._dev = None  # the CUDA device of the batches, as this process numbers it
        self._local = None  # the same, known from `device` (None: the daemon's number is ours)
        self._leased = {}
        self._next, self._stage, self._release = _CtlNext(), _CtlStage(), _CtlRelease()
        self._pending = collections.deque()  # CUDA: (slot, event) let go, not given back
        self._no_ioctl = set()  # commands the daemon answered ENOTTY to (an older daemon)
        try:
            asked = self._by_bus_id(device) if device.startswith("cuda") else device
            req = (f"open {_target(mountpoint, version_or_view)} cols={','.join(self.columns)}"
                   f" depth={int(depth)}")
            if batch_size is not None:
                req += f" batch={int(batch_size)}"
            if ahead is not None:
                req += f" ahead={int(ahead)}"
            if room is not None:
                req += f" room={int(room)}"
            if dtype is not None:
                req += f" dtype={dtype}"
            try:
                reply = self.request(f"{req} device={asked}")
            except StagingError as e:
                # A daemon that does not take a bus id: the device by its number, as before.
                if asked == device or e.name != "EINVAL" or f"'{asked}'" not in e.message:
                    raise
                self._local = None
                reply = self.request(f"{req} device={device}")
            info, _ = _parse_reply(reply)
        except BaseException:
            os.close(self._fd)
            self._fd = None
            raise
        self.stream = int(info["stream"])
        self.rows = int(info["rows"])
        self.slots = int(info["slots"])
        self.batch_size = int(info["batch"])
        self.commit = info["commit"]

    def _by_bus_id(self, device):
        """A CUDA device ("cuda" or "cuda:N", numbered as this process numbers them) as the
        daemon is asked for it: its PCI bus id, which names the same device in every process
        whatever CUDA_VISIBLE_DEVICES says (a loader that sees one GPU as cuda:0 gets its
        batches on that GPU). As given where the id cannot be told: the daemon then takes N as
        its own number, or says why there is no such device."""
        try:
            cuda = _Cuda()
            n = int(device[5:]) if device.startswith("cuda:") else \
                cuda.torch.cuda.current_device()
            bus = cuda.pci(n)
        except Exception:  # no torch, no CUDA runtime or driver, no such device
            return device
        self._cuda, self._local = cuda, n
        return bus

    # -- the protocol -------------------------------------------------------------------------
    def request(self, line):
        """Send one request line; return the 'ok ...' reply or raise StagingError."""
        if self._fd is None:
            raise ValueError("the stager is closed")
        os.write(self._fd, (line.rstrip("\n") + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise OSError(_errno.EPROTO, f"no reply from the control file to {line!r}")
            buf += chunk
        text = buf.decode("utf-8", "replace").rstrip("\n")
        if text.startswith("error "):
            parts = text.split(" ", 2)
            raise StagingError(parts[1], parts[2] if len(parts) > 2 else "")
        return text

    def _batch(self, reply):
        """A batch from its reply: the text line, or what _next_call made of the ioctl's."""
        info, cols = _parse_reply(reply) if isinstance(reply, str) else reply
        arrays = {}
        if "file" in info:
            if self._mm is None:
                with open(info["file"], "rb") as f:
                    self._mm = mmap.mmap(f.fileno(), int(info["file_bytes"]),
                                         access=mmap.ACCESS_READ)
            rows = int(info["rows"])
            for c in cols:
                if "kind" in c:
                    arrays[c["name"]] = self._rows(c, rows)
                    continue
                shape = tuple(int(x) for x in c["shape"].split(","))
                arrays[c["name"]] = np.ndarray(shape, dtype=np.dtype(c["dtype"]),
                                               buffer=self._mm, offset=int(c["offset"]))
        else:
            dev = self._dev = self._local if self._local is not None else \
                int(info["device"].split(":")[1])
            if self._cuda is None:
                self._cuda = _Cuda()
            base = self._cuda.mem(info["ipc"], dev)
            self._cuda.wait(info["event"], dev)
            rows = int(info["rows"])
            for c in cols:
                if "kind" in c:
                    arrays[c["name"]] = self._cuda_rows(c, rows, base, dev)
                    continue
                shape = tuple(int(x) for x in c["shape"].split(","))
                arrays[c["name"]] = self._cuda.tensor(base + int(c["offset"]), shape,
                                                      c["dtype"], dev)
        b = Batch(self, info, arrays)
        self._leased[b.slot] = b
        return b

    def _rows(self, c, rows):
        """A ragged, text or bytes column of a host batch: tensorfs.Ragged, Text or Bytes
        over the slot (no copy)."""
        import tensorfs

        offsets = np.ndarray((rows + 1,), dtype="<u8", buffer=self._mm,
                             offset=int(c["offsets"]))
        data = np.ndarray((int(c["data_bytes"]),), dtype=np.uint8, buffer=self._mm,
                          offset=int(c["data"]))
        if c["kind"] == "ragged":
            shapes = np.ndarray((rows, int(c["rank"])), dtype="<i8", buffer=self._mm,
                                offset=int(c["shapes"]))
            return tensorfs.Ragged.of(data, offsets, shapes, c["dtype"])
        return (tensorfs.Text if c["kind"] == "text" else tensorfs.Bytes).of(data, offsets)

    def _cuda_rows(self, c, rows, base, dev):
        """A ragged, text or bytes column of a CUDA batch: {"data": uint8 tensor, "offsets":
        uint64 tensor (rows + 1)[, "shapes": int64 tensor (rows x rank)]} on the device."""
        out = {"data": self._cuda.tensor(base + int(c["data"]), (int(c["data_bytes"]),),
                                         "|u1", dev),
               # int64: every torch has it, and offsets stay below 2**63
               "offsets": self._cuda.tensor(base + int(c["offsets"]), (rows + 1,), "<i8", dev)}
        if c["kind"] == "ragged":
            out["shapes"] = self._cuda.tensor(base + int(c["shapes"]), (rows, int(c["rank"])),
                                              "<i8", dev)
        return out

    def stage(self, rows, slot=None):
        """Stage the given rows (stream rows: view rows for a view) as one batch."""
        x, idx = self._stage, None
        if isinstance(rows, slice):
            start = rows.start or 0
            stop = self.rows if rows.stop is None else rows.stop
            rows = range(start, stop, rows.step or 1)
        if isinstance(rows, range) and rows.step == 1 and len(rows):
            x.mode, x.start, x.count, x.nrows = _RANGE, rows.start, len(rows), 0
            req = f"stage stream={self.stream} range={rows.start}:{rows.stop}"
        else:
            idx = np.asarray(rows, dtype=np.int64).ravel()
            if idx.size and idx.min() < 0:
                raise ValueError("negative row index")
            req = None
        # TFS_CTL_IOC_STAGE: one call, and up to 1,024 rows in binary (the text request's
        # decimal list costs 18 us to write for 256 rows, 160 us for 2,048, and as much to read).
        if idx is None or idx.size <= _CTL_MAX_ROWS:
            x.stream, x.slot = self.stream, -1 if slot is None else int(slot)
            if idx is not None:
                x.mode, x.start, x.count, x.nrows = _ROWS, 0, 0, idx.size
                np.frombuffer(x.u.rows, dtype="<u8", count=idx.size)[:] = idx
            if self._ioctl(_IOC_STAGE, x):
                return self._batch(_batch_fields(x.u.batch))
        if req is None:
            req = f"stage stream={self.stream} rows=" + ",".join(map(str, idx.tolist()))
        if slot is not None:
            req += f" slot={int(slot)}"
        return self._batch(self.request(req))

    def next(self, batch_size=None, release=None):
        """The next batch_size rows in stream order (fewer at the end); None at the end.
        release: a batch (or slot) given back in the same request."""
        n = self.batch_size if batch_size is None else int(batch_size)
        give = self._give_back(release)
        try:
            reply = self._next_call(n, give)
            if reply is not None:
                return self._batch(reply)
            req = f"next stream={self.stream} batch={n}"
            if give >= 0:
                req += f" release={give}"
            return self._batch(self.request(req))
        except StagingError as e:
            if e.errno == _errno.ENODATA:
                return None
            raise

    def _ioctl(self, cmd, x):
        """x, a request's struct, through ioctl cmd: True, or False when the daemon does not
        have the command (an older one: the text request from then on). A refusal raises
        StagingError, as its text reply would."""
        if self._fd is None:
            raise ValueError("the stager is closed")
        if cmd in self._no_ioctl:
            return False
        x.st.status, x.st.abi = 0, _CTL_ABI
        try:
            fcntl.ioctl(self._fd, cmd, x, True)
        except OSError as e:
            if e.errno != _errno.ENOTTY:
                raise
            self._no_ioctl.add(cmd)
            return False
        if x.st.status < 0:
            raise StagingError(_errno.errorcode.get(-x.st.status, "EIO"),
                               x.st.msg.decode("utf-8", "replace"))
        return True

    def _next_call(self, n, give):
        """next through TFS_CTL_IOC_NEXT: the (dict, [column dicts]) of its batch, or None
        when the daemon does not have the ioctl."""
        x = self._next
        x.stream, x.release, x.batch = self.stream, give, n
        return _batch_fields(x.out) if self._ioctl(_IOC_NEXT, x) else None

    def seek(self, pos=0):
        x = _CtlSeek(stream=self.stream, pos=int(pos))
        if not self._ioctl(_IOC_SEEK, x):
            self.request(f"seek stream={self.stream} pos={int(pos)}")

    def release(self, batch_or_slot):
        """Give a slot back; its arrays may be overwritten from now on."""
        slot = self._let_go(batch_or_slot)
        for i, (s, ev) in enumerate(self._pending):  # let go by next(), not yet given back
            if s == slot:
                ev.synchronize()
                del self._pending[i]
                break
        self._give(slot)

    def _give(self, slot):
        """The daemon's side of a release (TFS_CTL_IOC_RELEASE: one call)."""
        x = self._release
        x.stream, x.slot = self.stream, slot
        if not self._ioctl(_IOC_RELEASE, x):
            self.request(f"release stream={self.stream} slot={slot}")

    def _let_go(self, batch_or_slot, wait=True):
        """This side of a release: the batch is marked released; returns its slot. wait: on
        CUDA, the work queued on the current stream is waited for first."""
        slot = batch_or_slot.slot if isinstance(batch_or_slot, Batch) else int(batch_or_slot)
        b = self._leased.pop(slot, None)
        if b is not None:
            b.released = True
            if self._cuda is not None and b and wait:
                # The daemon may refill the slot as soon as it is released: work queued on it
                # must be done (on the batch's device's stream, whichever device is current).
                self._cuda.torch.cuda.current_stream(self._dev).synchronize()
        return slot

    def _give_back(self, release):
        """For next(release=...): the slot to give back in the request (-1: none).

        A CUDA batch is not waited for there. An event recorded on the current stream after
        the work queued on the batch marks it, and its slot goes back in a later request, once
        the event has completed: the loader goes on queueing work while the device runs what
        it has, as torch lets it. When the loader would hold more than all the slots but two
        (the next batch's, and one the daemon fills ahead), the oldest is waited for."""
        if release is not None:
            held = release.slot if isinstance(release, Batch) else int(release)
            if self._cuda is None or held not in self._leased:
                return self._let_go(release)  # (a slot not ours: the daemon says so)
            self._let_go(release, wait=False)
            ev = self._cuda.torch.cuda.Event()
            ev.record(self._cuda.torch.cuda.current_stream(self._dev))
            self._pending.append((held, ev))
        if not self._pending:
            return -1
        slot, ev = self._pending[0]
        if not ev.query():
            if len(self._pending) + len(self._leased) <= self.slots - 2:
                return -1
            ev.synchronize()
        self._pending.popleft()
        return slot

    def _give_back_all(self):
        """The slots let go by next() and not yet given back: waited for, then given back."""
        while self._pending and self._fd is not None:
            slot, ev = self._pending.popleft()
            ev.synchronize()
            self._give(slot)

    def stats(self):
        """The daemon's staging counters: {'sessions': .., 'leased': .., ...}."""
        info, _ = _parse_reply(self.request("stats"))
        return {k: int(v) for k, v in info.items()}

    def batches(self, batch_size=None, start=None):
        """Iterate over the stream from the cursor (or from `start`) in batches; each batch is
        released when the next one is requested."""
        if start is not None:
            self.seek(start)
        prev = None
        try:
            while True:
                # The batch before is given back in the request for the next (one round trip).
                done = prev if prev is not None and not prev.released else None
                prev = None
                b = self.next(batch_size, release=done)
                if b is None:
                    return
                prev = b
                yield b
        finally:
            if prev is not None and self._fd is not None:
                prev.release()
            self._give_back_all()

    def __iter__(self):
        return self.batches()

    def close(self):
        """Close the stream and the session (the daemon releases every slot)."""
        if self._fd is None:
            return
        leased = bool(self._leased)
        for b in self._leased.values():
            b.released = True
        self._leased.clear()
        pending, self._pending = self._pending, collections.deque()
        try:
            # Closing the file lets the daemon free the slots and events: before that, work on
            # leased batches must be done and our mappings closed (cudaFree of an allocation
            # still open in an importer, or use of an event after its exporter destroyed it, is
            # undefined).
            if self._cuda is not None:
                try:
                    for _, ev in pending:  # let go by next(), not given back yet
                        ev.synchronize()
                    if leased:
                        self._cuda.torch.cuda.current_stream(self._dev).synchronize()
                finally:
                    self._cuda.close()
            # The stream closed by a request: its slots are kept for the next stream of its
            # shape (-o staging_keep) when this returns. The file's release closes it too, but
            # reaches the daemon after close() has returned: the next Stager could open first.
            try:
                self.request(f"close stream={self.stream}")
            except (OSError, ValueError):
                pass
        finally:
            fd, self._fd = self._fd, None
            if self._mm is not None:
                try:
                    self._mm.close()
                except BufferError:
                    pass  # arrays still view it; it goes when they do
                self._mm = None
            os.close(fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return (f"<tensorfs.Stager stream={self.stream} rows={self.rows} device={self.device} "
                f"slots={self.slots} batch_size={self.batch_size}>")
