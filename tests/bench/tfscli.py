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
    """Unmount, waiting a little for files still open (a memmap not yet collected); as a last
    resort detach it lazily, so that no mount outlives the bench."""
    import gc
    import time

    gc.collect()
    for _ in range(20):
        if subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True).returncode == 0:
            return
        if not os.path.ismount(mnt):
            return
        time.sleep(0.1)
        gc.collect()
    subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


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
