# SPDX-License-Identifier: MIT
"""What the small benchmark scripts share: the tensorfs binary (TENSORFS_BIN, or the tree's),
running it, and a scratch directory whose mount is undone and files removed at the end."""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TFS = os.environ.get("TENSORFS_BIN") or str(REPO / "tensorfs")


def run(*args):
    """Run `tensorfs ARGS`; exit with its message when it fails. Returns its stdout."""
    p = subprocess.run([TFS, *map(str, args)], capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"tensorfs {' '.join(map(str, args))}: {p.stderr}")
    return p.stdout


def unmount(mnt):
    subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)


@contextlib.contextmanager
def workdir(prefix):
    """A scratch directory with an empty mnt/ in it; unmounted and removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    (work / "mnt").mkdir()
    try:
        yield work
    finally:
        unmount(work / "mnt")
        shutil.rmtree(work, ignore_errors=True)
