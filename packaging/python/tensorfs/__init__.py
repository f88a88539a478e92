# SPDX-License-Identifier: MIT
"""numpy helpers for tensorfs mounts.

A version directory (``<mount>/<dataset>/<ref>`` or ``.../commits/<id>``) and a view directory
(``.../views/<params>``) hold one ``<column>.npy`` per column. :func:`open` maps them all;
:func:`view_path` spells a view's directory name from its parameters.
"""

import os
import urllib.parse
from builtins import open as builtins_open

import numpy as np

__all__ = ["open", "view_path", "Columns", "Stager", "StagingError"]


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


class Columns(dict):
    """Column name -> read-only numpy memmap, all with the same number of rows."""

    def __init__(self, path, arrays):
        super().__init__(arrays)
        self.path = path

    @property
    def rows(self):
        return next(iter(self.values())).shape[0] if dict.__len__(self) else 0

    def __repr__(self):
        cols = ", ".join(f"{k}: {v.dtype}{tuple(v.shape[1:])}" for k, v in self.items())
        return f"<tensorfs.Columns {self.path!r}: {self.rows} rows; {cols}>"


def open(path, columns=None):  # noqa: A001 - the package's entry point, as tensorfs.open
    """Map the columns of a version or view directory: name -> numpy memmap (mode 'r').

    columns: names to map (default: every column). A missing column is a KeyError."""
    path = os.fspath(path)
    names = sorted(n[:-4] for n in os.listdir(path) if n.endswith(".npy"))
    if columns is not None:
        missing = [c for c in columns if c not in names]
        if missing:
            raise KeyError(f"{path}: no column {', '.join(missing)} (has {', '.join(names)})")
        names = list(columns)
    return Columns(path, {n: _load(os.path.join(path, n + ".npy")) for n in names})


def _load(path):
    """A read-only memmap; numpy cannot map an array with no elements, so those are loaded."""
    with builtins_open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        shape, _, _ = np.lib.format._read_array_header(f, version)
    if 0 in shape:
        return np.load(path)
    return np.load(path, mmap_mode="r")


_KEYS = ("seed", "epoch", "block", "rank", "world", "drop_last", "start", "where")


def view_path(version_dir, seed=None, epoch=None, rank=None, world=None, block=None,
              start=None, drop_last=None, where=None):
    """The directory of a view of version_dir with these parameters (None: left out).

    The name is the same on every machine for the same parameters, so every rank of a job and
    every restart sees the same order. ``where`` is %-encoded where a file name needs it."""
    params = dict(seed=seed, epoch=epoch, block=block, rank=rank, world=world,
                  drop_last=None if drop_last is None else int(bool(drop_last)), start=start)
    parts = []
    for key in _KEYS[:-1]:
        v = params[key]
        if v is None:
            continue
        if int(v) < 0:
            raise ValueError(f"{key}={v}: must not be negative")
        parts.append(f"{key}={int(v)}")
    if (rank is None) != (world is None):
        raise ValueError("give rank and world together")
    if where is not None:
        # '/' cannot be in a file name and '%' starts an escape; spaces read badly in shells.
        parts.append("where=" + urllib.parse.quote(where, safe="()<>=!,.-_"))
    if not parts:
        parts.append("world=1")
    return os.path.join(os.fspath(version_dir), "views", ",".join(parts))


def __getattr__(name):
    """Stager (batched staging through the control file) loads on first use."""
    if name in ("Stager", "StagingError", "Batch"):
        from . import staging

        return getattr(staging, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
