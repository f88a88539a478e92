# SPDX-License-Identifier: MIT
"""PyTorch helpers for tensorfs mounts: a map-style Dataset over column memmaps, and the view
of an epoch for this process's rank."""

import errno
import os

import numpy as np
import torch
import torch.utils.data

import tensorfs

__all__ = ["Dataset", "epoch_view", "collate"]


class Dataset(torch.utils.data.Dataset):
    """Rows of a version or view directory as tensors.

    Each item is a dict column -> tensor (or the tensor itself when one column is selected),
    passed through ``transform`` when given: a ragged column's row is a tensor of its own shape,
    a text column's a str, a bytes column's bytes. Batch rows of several shapes with
    :func:`collate`. Memmaps are opened lazily in each process, so the
    dataset works with ``DataLoader(num_workers=N)``: workers share the daemon's cache and the
    kernel's page cache, not copies of the data.

    Over a view with ``on_error=skip``, a bad row (in a chunk damaged for good, which the view's
    files read as zeros) is left out: its index yields the next healthy row of the view's order
    instead, so batches stay full and every rank decides alike. A row that reads as zeros is
    checked against the view's ``.bad_rows``, so healthy rows cost nothing extra."""

    def __init__(self, path, columns=None, transform=None):
        # One commit for the dataset's life: workers reopen the files of the commit whose row
        # count len() gave, however the branch moves meanwhile.
        self.path = tensorfs.pin(path)
        cols = tensorfs.open(self.path, columns)
        self.columns = list(cols.keys())
        self.rows = cols.rows
        self.transform = transform
        params = os.path.basename(os.path.normpath(self.path)).split(",")
        self.skip_bad = "on_error=skip" in params
        self._cols = None  # per process

    def __len__(self):
        return self.rows

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_cols"] = None  # memmaps are reopened in the worker
        return state

    def __getitem__(self, i):
        if self._cols is None:
            self._cols = tensorfs.open(self.path, self.columns)
        if i < 0:
            i += self.rows
        if not 0 <= i < self.rows:
            raise IndexError(f"row {i} out of range for {self.rows} rows")
        rows = {c: self._cols[c][i] for c in self.columns}
        if self.skip_bad:
            rows = self._healthy(i, rows)
        item = {c: _item(r) for c, r in rows.items()}
        if len(self.columns) == 1:
            item = item[self.columns[0]]
        return self.transform(item) if self.transform else item


    def _healthy(self, i, rows):
        """rows (row i) or, when row i is bad, the next healthy row of the order."""
        bad = None
        for step in range(self.rows):
            j = (i + step) % self.rows
            if step:
                rows = {c: self._cols[c][j] for c in self.columns}
            if not any(_zeros(r) for r in rows.values()):
                return rows  # a bad row is zeros in the columns whose chunk is bad
            if bad is None:  # read once a call: rows found bad meanwhile are in it
                with open(os.path.join(self.path, ".bad_rows")) as f:
                    bad = {int(n) for n in f.read().split()}
            if j not in bad:
                return rows  # zeros that are the data
        raise OSError(errno.EIO, f"{self.path}: every row is bad")


def _zeros(row):
    """Whether a row holds nothing but zeros (how a view pads a bad row)."""
    if isinstance(row, str):
        return not row.strip("\0")
    if isinstance(row, (bytes, bytearray, memoryview)):
        return not any(row)
    return not np.asarray(row).any()


# Unsigned dtypes torch has no tensors of (or only in name: no indexing, no embedding lookup):
# widened to the signed dtype that holds every value. uint16 is how token ids are stored.
_WIDER = {np.dtype(np.uint16): np.int32, np.dtype(np.uint32): np.int64,
          np.dtype(np.uint64): np.int64}


def _item(row):
    """A row as a DataLoader passes it on: arrays as tensors (copied out of the mapping; uint16
    as int32, uint32 and uint64 as int64), str and bytes as they are."""
    if not isinstance(row, (np.ndarray, np.generic)):
        return row
    a = np.asarray(row)
    wider = _WIDER.get(a.dtype)
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise ValueError(f"a uint64 value {a.max()} does not fit torch's int64")
    return torch.from_numpy(np.array(a, dtype=wider))  # one copy, widened as it is made


def _collate_one(rows, pad):
    if not isinstance(rows[0], torch.Tensor):
        return list(rows)  # str, bytes
    shapes = {tuple(r.shape) for r in rows}
    if len(shapes) == 1:
        return torch.stack(rows)
    if not pad:
        return list(rows)
    # Zeros after each row, up to the batch's largest extent in every dimension.
    most = [max(s[d] for s in shapes) for d in range(rows[0].dim())]
    out = rows[0].new_zeros((len(rows), *most))
    for i, r in enumerate(rows):
        out[(i, *(slice(0, n) for n in r.shape))] = r
    return out, torch.tensor([list(r.shape) for r in rows], dtype=torch.int64)


def collate(pad=False):
    """A DataLoader ``collate_fn`` for rows of several shapes (ragged columns) and text.

    Rows of one shape stack into a tensor, as the default collate does; str and bytes rows stay
    a list. Rows of several shapes are a list of tensors, or with ``pad=True`` a pair
    (zero-padded tensor of the batch's largest shape, int64 shapes of the rows)."""
    def fn(batch):
        if isinstance(batch[0], dict):
            return {k: _collate_one([b[k] for b in batch], pad) for k in batch[0]}
        return _collate_one(list(batch), pad)
    return fn


def epoch_view(path, seed, epoch, rank=None, world=None, **params):
    """The view directory of one epoch for this process: a shuffle by (seed, epoch) and, when
    torch.distributed is initialised and rank/world are not given, this process's shard."""
    if rank is None and world is None and torch.distributed.is_available() \
            and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    return tensorfs.view_path(path, seed=seed, epoch=epoch, rank=rank, world=world, **params)
