# SPDX-License-Identifier: MIT
"""Parallel ingest on Dask: many parts, one commit (``tensorfs.ingest``).

:func:`ingest` converts sources into a dataset version on a Dask cluster (a ``LocalCluster``, a
``dask-ssh`` cluster or a scheduler address, through the current ``distributed.Client``; without
one, Dask's local scheduler). Every partition becomes one part of a write session, written on a
worker by the ``tensorfs`` importer (``tensorfs import URL --session ID --part I ...``: nothing is
decoded in Python), and the client commits the parts, in partition order, as one commit
(``tensorfs commit URL --session ID --parts N``). A worker lost mid-part has its partition
written again under the same part number; the commit takes exactly one copy of each part, and the
chunks of an abandoned attempt are garbage that ``tensorfs gc`` removes.

Sources, one part each:

* a path or URL: ``.jsonl``/``.json`` (JSON Lines), ``.npz``, ``.tar`` (one WebDataset shard),
  or a directory of images (an ImageFolder tree: give every part the same class directories,
  as labels are the index of the class directory within the part's tree);
* a tuple or list of ``.tar`` paths: WebDataset shards of one part;
* a dict ``{column: path}``: ``.npy`` files, ``.txt`` files or directories of ``.npy`` files
  (``tensorfs import URL COL=SOURCE ...``);
* a ``dask.bag.Bag`` of dicts, or a ``dask.dataframe.DataFrame``: each partition is written as
  JSON Lines to a temporary file on the worker and imported as such.

``map=`` is a function run on the workers on every record of a Bag or DataFrame (a Bag's items
may then be anything, strings of text for example) that returns the record's dict: tokenizing
stays in the user's hands, in Python, on the cluster. ``tokens="FIELD:uint16"`` (or
``:uint32``, the default) makes the field of id lists it returns a token column, of one dtype in
every part (``tensorfs import --jsonl --tokens``).

The workers must see the sources at the same paths (or URLs) and have the ``tensorfs`` command
(``tensorfs=`` names another) and the lake's credentials in their environment.
"""

import ctypes
import json
import os
import signal
import subprocess
import tempfile
import uuid

__all__ = ["ingest", "IngestError"]


class IngestError(RuntimeError):
    """A part or the commit failed; the message holds the importer's own."""


def _die_with_parent():
    # A worker killed mid-part takes its importer with it: no orphan records a part later.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run(cmd, timeout):
    # Dask gives its workers MALLOC_TRIM_THRESHOLD_=65536; the importer, which allocates and
    # frees chunk-sized buffers all the time, then returns and faults in memory for each one
    # (measured: 3x slower). The importer gets glibc's defaults.
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       errors="replace", timeout=timeout, preexec_fn=_die_with_parent, env=env)
    if p.returncode != 0:
        raise IngestError(f"{' '.join(cmd)}: exit status {p.returncode}\n{p.stderr.strip()}")
    return p.stdout


def _source_args(src):
    """The `tensorfs import` arguments for one part's source."""
    if isinstance(src, dict):
        return [f"{col}={os.fspath(path)}" for col, path in src.items()]
    if isinstance(src, (list, tuple)):
        return ["--webdataset"] + [os.fspath(s) for s in src]
    path = os.fspath(src)
    low = path.lower()
    if low.endswith((".jsonl", ".json")):
        return ["--jsonl", path]
    if low.endswith(".npz"):
        return ["--npz", path]
    if low.endswith(".tar"):
        return ["--webdataset", path]
    if "://" in path or os.path.isdir(path):
        return ["--images", path]
    raise ValueError(f"{path}: not a source ingest knows (.jsonl, .npz, .tar, an image "
                     f"directory, or a dict of column: .npy/.txt/directory)")


def _write_part(url, session, part, args, extra, tensorfs, timeout, retries):
    """On a worker: import one part, again after a failure up to `retries` times. Returns
    (None, report) or (error text, None): every part ends before the client decides."""
    for attempt in range(retries + 1):
        try:
            return None, _run([tensorfs, "import", url, "--session", session, "--part",
                               str(part), "--quiet", *args, *extra], timeout)
        except (IngestError, OSError, subprocess.SubprocessError) as e:
            if attempt == retries:
                return f"part {part}: {e}", None
    return None, None


def _to_jsonable(v):
    try:
        import numpy as np
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
    except ImportError:
        pass
    return v


def _write_records(records, url, session, part, extra, tensorfs, timeout, retries, fn=None):
    """On a worker: one partition of dicts (or of items fn makes dicts of), as JSON Lines,
    imported as one part."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", encoding="utf-8") as f:
        for r in records:
            if fn is not None:
                r = fn(r)
            f.write(json.dumps({k: _to_jsonable(v) for k, v in r.items()},
                               ensure_ascii=False))
            f.write("\n")
        f.flush()
        return _write_part(url, session, part, ["--jsonl", f.name], extra, tensorfs, timeout,
                           retries)


def _write_frame(frame, url, session, part, extra, tensorfs, timeout, retries, fn=None):
    """On a worker: one partition of a dask DataFrame, as JSON Lines."""
    return _write_records(frame.to_dict(orient="records"), url, session, part, extra, tensorfs,
                          timeout, retries, fn)


def _tasks(url, sources, session, extra, tensorfs, timeout, retries, fn=None):
    """One dask.delayed per part, in part order."""
    import dask

    try:
        import dask.bag as db
    except ImportError:
        db = None
    try:
        import dask.dataframe as dd
    except ImportError:
        dd = None
    run = (extra, tensorfs, timeout, retries)
    if db is not None and isinstance(sources, db.Bag):
        return [dask.delayed(_write_records, pure=False)(p, url, session, i, *run, fn)
                for i, p in enumerate(sources.to_delayed())]
    if dd is not None and isinstance(sources, dd.DataFrame):
        return [dask.delayed(_write_frame, pure=False)(p, url, session, i, *run, fn)
                for i, p in enumerate(sources.to_delayed())]
    if fn is not None:
        raise ValueError("ingest: map= applies to a dask Bag or DataFrame")
    return [dask.delayed(_write_part, pure=False)(url, session, i, _source_args(s), *run)
            for i, s in enumerate(sources)]


def ingest(url, sources, *, message="", branch=None, session=None, import_args=(),
           tensorfs=None, timeout=None, retries=2, map=None, tokens=None):
    """Import `sources` (see the module's text) into dataset `url` (LAKE_URL/DATASET, created
    beforehand with ``tensorfs create``) as one commit, each source or partition a part written
    on a Dask worker. `import_args`: more ``tensorfs import`` options for every part (for example
    ``("--chunk-size", "1M", "--strict")``). `retries`: how often Dask runs a part again after it
    failed (a lost worker's part is run again regardless, by Dask's own rules). `map`: a
    function of each record of a Bag or DataFrame, run on the workers, returning its dict.
    `tokens`: "FIELD" or "FIELD:uint16|uint32" (default uint32): that field's lists of ids are
    a token column.

    Returns ``{"commit": id, "rows": n, "parts": n, "session": id}``. On failure raises
    :class:`IngestError`; the session is aborted and the dataset is unchanged."""
    import dask

    tensorfs = tensorfs or os.environ.get("TENSORFS_BIN") or "tensorfs"
    session = session or "ingest-" + uuid.uuid4().hex[:16]
    extra = list(import_args)
    if tokens:
        extra += ["--tokens", tokens if ":" in tokens else tokens + ":uint32"]
    tasks = _tasks(url, sources, session, extra, tensorfs, timeout, retries, map)
    if not tasks:
        raise ValueError("ingest: no sources")
    try:
        errors = [err for err, _ in dask.compute(*tasks) if err]
    except BaseException:
        subprocess.run([tensorfs, "session", "abort", url, session], capture_output=True)
        raise
    if errors:
        subprocess.run([tensorfs, "session", "abort", url, session], capture_output=True)
        raise IngestError("\n".join(errors))
    cmd = [tensorfs, "commit", url, "--session", session, "--parts", str(len(tasks))]
    if message:
        cmd += ["-m", message]
    if branch:
        cmd += ["--branch", branch]
    out = _run(cmd, timeout)
    # "committed <id> to <ds>/<branch>: session <id>, <n> rows"
    words = out.split()
    return {"commit": words[1], "rows": int(words[-2]), "parts": len(tasks),
            "session": session}
