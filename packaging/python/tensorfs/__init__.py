# SPDX-License-Identifier: MIT
"""numpy helpers for tensorfs mounts.

A version directory (``<mount>/<dataset>/<ref>`` or ``.../commits/<id>``) and a view directory
(``.../views/<params>``) hold one ``<column>.npy`` per fixed column, and a ``<column>/``
directory (``data.bin``, ``offsets.npy``, ``shapes.npy`` for ragged tensors) per ragged, text or
bytes column. :func:`open` maps them all: fixed columns as numpy memmaps, the others as
sequences (:class:`Ragged`, :class:`Text`, :class:`Bytes`) whose items come straight from the
mapped files; :func:`view_path` spells a view's directory name from its parameters.
"""

import errno
import json
import os
import re
import urllib.parse
from builtins import open as builtins_open

import numpy as np

__all__ = ["open", "pin", "view_path", "Columns", "Ragged", "Text", "Bytes", "Stager", "StagingError"]


def _read_version():
    """The version: _version.py, written by the build from the top-level VERSION file, or that
    file itself when the package is used from a source tree that was never built."""
    try:
        from ._version import __version__ as v
        return v
    except ImportError:
        path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "VERSION")
        with builtins_open(path) as f:
            return f.read().strip()


__version__ = _read_version()


class _Rows:
    """Rows of a ``<column>/`` directory: row i is data.bin[offsets[i]:offsets[i+1]]."""

    def __init__(self, path):
        self.path = path
        self.offsets = _load(os.path.join(path, "offsets.npy"))
        size = os.path.getsize(os.path.join(path, "data.bin"))
        # numpy cannot map an empty file
        self.data = (np.memmap(os.path.join(path, "data.bin"), dtype=np.uint8, mode="r")
                     if size else np.zeros(0, dtype=np.uint8))

    @classmethod
    def of(cls, data, offsets, shapes=None, dtype=None):
        """Rows over arrays already in memory (a staged batch's): data uint8, offsets uint64
        (rows + 1), and for Ragged shapes (rows x rank) and the element dtype."""
        self = cls.__new__(cls)
        self.path = None
        self.data = data
        self.offsets = offsets
        if shapes is not None:
            self.shapes = shapes
        if dtype is not None:
            self.dtype = np.dtype(dtype)
        return self

    def __len__(self):
        return len(self.offsets) - 1

    def _span(self, i):
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"row {i} out of range for {n} rows")
        return self.data[int(self.offsets[i]):int(self.offsets[i + 1])], i

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._row(*self._span(i))

    def __iter__(self):
        return (self[i] for i in range(len(self)))


class Ragged(_Rows):
    """A ragged column: item i is a read-only numpy array of its own shape, a view of the mapped
    data (no copy)."""

    def __init__(self, path, dtype):
        super().__init__(path)
        self.dtype = np.dtype(dtype)
        self.shapes = _load(os.path.join(path, "shapes.npy"))

    def _row(self, raw, i):
        return raw.view(self.dtype).reshape(tuple(int(d) for d in self.shapes[i]))


class Text(_Rows):
    """A text column: item i is a str."""

    dtype = np.dtype(object)

    def _row(self, raw, i):
        return bytes(raw).decode("utf-8")


class Bytes(_Rows):
    """A bytes column: item i is a bytes object."""

    dtype = np.dtype(object)

    def _row(self, raw, i):
        return bytes(raw)


def _schema_columns(path):
    """The columns of schema.json of the version directory path is or is under (a view:
    REF/views/PARAMS; a saved query: REF/queries/NAME[/views/PARAMS]); [] for a mixture's view
    (mixes/NAME/views/PARAMS: .npy files only); None when none of these: path is no version or
    view directory of a mount."""
    up = [os.fspath(path)]
    for _ in range(4):
        up.append(os.path.dirname(up[-1]))
    for depth in (0, 2, 4):
        p = up[depth]
        if depth == 2 and os.path.basename(up[1]) not in ("views", "queries"):
            continue
        if depth == 4 and (os.path.basename(up[1]) != "views"
                           or os.path.basename(up[3]) != "queries"):
            continue
        try:
            with builtins_open(os.path.join(p, "schema.json"), "rb") as f:
                return json.load(f)["columns"]
        except OSError:
            if depth == 2 and os.path.isfile(os.path.join(p, "mix.txt")):
                return []
    return None


class Columns(dict):
    """Column name -> a read-only numpy memmap (fixed columns) or a sequence of rows (ragged,
    text, bytes), all with the same number of rows."""

    def __init__(self, path, arrays, classes=None):
        super().__init__(arrays)
        self.path = path
        #: {label column: its class names, label i is names[i]} (import --labels-from-dirs)
        self.classes = classes or {}

    @property
    def rows(self):
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    def __repr__(self):
        cols = ", ".join(f"{k}: {v.dtype}{tuple(v.shape[1:])}" if isinstance(v, np.ndarray)
                         else f"{k}: {type(v).__name__.lower()} {v.dtype}"
                         for k, v in self.items())
        return f"<tensorfs.Columns {self.path!r}: {self.rows} rows; {cols}>"


def pin(path):
    """The directory of the same version or view at the commit its branch or tag names now
    (``<dataset>/commits/<id>[/views/<params>]``), from the version directory's
    ``user.tensorfs.commit`` attribute; path itself when it is pinned already or is no
    tensorfs directory.

    Every open of a branch path resolves the branch again (as two ``git checkout``s would), so
    files opened one after another, or a file numpy opens twice, can come from two commits
    when the branch moves between them. Everything opened below the pinned path is one commit."""
    p = os.path.abspath(os.fspath(path))
    vdir, tail = p, ""
    if os.path.basename(os.path.dirname(p)) == "views":
        vdir, tail = os.path.dirname(os.path.dirname(p)), os.path.join("views", os.path.basename(p))
    if os.path.basename(os.path.dirname(vdir)) == "commits":
        return os.fspath(path)
    try:
        cid = os.getxattr(vdir, "user.tensorfs.commit").decode("ascii")
    except (OSError, UnicodeDecodeError):
        return os.fspath(path)
    pinned = os.path.join(os.path.dirname(vdir), "commits", cid, tail)
    return pinned if os.path.isdir(pinned) else os.fspath(path)


def open(path, columns=None):  # noqa: A001 - the package's entry point, as tensorfs.open
    """Map the columns of a version or view directory: name -> numpy memmap (mode 'r') for a
    fixed column, or a :class:`Ragged`, :class:`Text` or :class:`Bytes` sequence.

    A branch or tag is resolved once (:func:`pin`): every column comes from the commit it
    names at this call, however the branch moves meanwhile; ``Columns.path`` is that commit's
    directory. columns: names to map (default: every column). A missing column is a KeyError."""
    path = pin(path)
    entries = os.listdir(path)
    schema = _schema_columns(path)
    if schema is None:
        raise FileNotFoundError(errno.ENOENT, "not a version or view directory of a tensorfs "
                                "mount (no schema.json)", path)
    names = {n[:-4] for n in entries if n.endswith(".npy")}
    dirs = {n for n in entries if n not in ("views",) and
            os.path.isfile(os.path.join(path, n, "offsets.npy"))}
    every = sorted(names | dirs)
    if columns is not None:
        missing = [c for c in columns if c not in every]
        if missing:
            raise KeyError(f"{path}: no column {', '.join(missing)} (has {', '.join(every)})")
        every = list(columns)
    kinds = {c["name"]: (c.get("kind", "fixed"), c["dtype"]) for c in schema}
    classes = {c["name"]: c["classes"] for c in schema if "classes" in c and c["name"] in every}
    out = {}
    for n in every:
        if n in names:
            out[n] = _load(os.path.join(path, n + ".npy"))
            continue
        kind, dtype = kinds.get(n, ("bytes", "|u1"))
        cls = {"ragged": Ragged, "text": Text}.get(kind, Bytes)
        out[n] = Ragged(os.path.join(path, n), dtype) if cls is Ragged \
            else cls(os.path.join(path, n))
    return Columns(path, out, classes)


def _load(path):
    """A read-only memmap; numpy cannot map an array with no elements, so those are loaded."""
    with builtins_open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) \
            else np.lib.format.read_array_header_2_0
        shape, _, _ = read(f)
    if 0 in shape:
        return np.load(path)
    return np.load(path, mmap_mode="r")


_KEYS = ("seed", "epoch", "block", "rank", "world", "drop_last", "start", "stride", "where")


def view_path(version_dir, seed=None, epoch=None, rank=None, world=None, block=None,
              start=None, drop_last=None, where=None, stride=None, on_error=None, pack=None,
              eos=None, col=None):
    """The directory of a view of version_dir with these parameters (None: left out).
    ``on_error`` is "fail", "pad" or "skip" (bad rows: README). ``pack=S`` makes a packed view
    of a token column's documents (samples of S + 1 tokens; ``eos``, ``col``: views/README).

    The name is the same on every machine for the same parameters, so every rank of a job and
    every restart sees the same order. ``where`` is %-encoded where a file name needs it."""
    params = dict(seed=seed, epoch=epoch, block=block, rank=rank, world=world,
                  drop_last=None if drop_last is None else int(bool(drop_last)), start=start,
                  stride=stride)
    parts = []
    if pack is not None:
        if int(pack) < 1:
            raise ValueError(f"pack={pack}: at least 1 token a sample")
        if block is not None:
            raise ValueError("block= does not apply to a pack= view")
        parts.append(f"pack={int(pack)}")
        if col is not None:
            if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", str(col)):
                raise ValueError(f"col={col!r}: not a column name")
            parts.append(f"col={col}")
        if eos is not None:
            if int(eos) < 0:
                raise ValueError(f"eos={eos}: a token id is not negative")
            parts.append(f"eos={int(eos)}")
    elif eos is not None or col is not None:
        raise ValueError("eos= and col= belong to pack= views")
    for key in _KEYS[:-1]:
        v = params[key]
        if v is None:
            continue
        if int(v) < 0:
            raise ValueError(f"{key}={v}: must not be negative")
        parts.append(f"{key}={int(v)}")
    if (rank is None) != (world is None):
        raise ValueError("give rank and world together")
    if world is not None and not 0 <= int(rank) < int(world):
        raise ValueError(f"rank={rank}, world={world}: a rank is 0 to world - 1")
    if on_error is not None:
        if on_error not in ("fail", "pad", "skip"):
            raise ValueError(f"on_error={on_error}: expected fail, pad or skip")
        parts.append(f"on_error={on_error}")
    if where is not None:
        # '/' cannot be in a file name and '%' starts an escape; spaces read badly in shells.
        parts.append("where=" + urllib.parse.quote(where, safe="()<>=!,.-_"))
    if not parts:
        parts.append("world=1")
    return os.path.join(os.fspath(version_dir), "views", ",".join(parts))


def elastic_view(version_dir, rank, world, batch_size, step=0, rows_before=0, seed=None,
                 epoch=None, **kw):
    """This rank's view for a job that may change its world size and resume: interleaved shards
    of batch_size rows (``stride``), starting after the rows the whole job has read, which is
    ``rows_before + step * world * batch_size`` (step: batches each rank has read at this world
    size; rows_before: rows read at earlier world sizes). Every rank of every world size then
    reads each row of the epoch once (padding of the last round aside, or none with
    drop_last=True)."""
    if batch_size < 1 or step < 0 or rows_before < 0:
        raise ValueError("batch_size >= 1, step >= 0 and rows_before >= 0")
    return view_path(version_dir, seed=seed, epoch=epoch, rank=rank, world=world,
                     stride=batch_size, start=rows_before + step * world * batch_size, **kw)


def __getattr__(name):
    """Stager (batched staging through the control file) and ingest (parallel import on Dask)
    load on first use."""
    if name in ("Stager", "StagingError", "Batch"):
        from . import staging

        return getattr(staging, name)
    if name in ("ingest", "IngestError"):
        from . import dask_ingest

        return getattr(dask_ingest, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
