# SPDX-License-Identifier: MIT
"""`tensorfs mount` without -f daemonises: exits 0 once the mount is up, serves reads, and
goes away after the unmount."""

import os
import select
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import (FUSERMOUNT, SLOW, TENSORFS_BIN, check_column_file, cmdline, is_mounted,
                      kill_pids, leased_batch, pids_for_path, require_binary, unmount)


def build(lake):
    rng = np.random.default_rng(8)
    src = rng.standard_normal((2000, 10)).astype("<f4")
    lake.build("dd", {"x": src})
    return src


def wait_gone(mnt, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not pids_for_path(mnt):
            return []
        time.sleep(0.05)
    return pids_for_path(mnt)


def cleanup(mnt):
    unmount(mnt)
    left = wait_gone(mnt, 5)
    if left:
        kill_pids(left)


def test_daemon_mode(lake, tmp_path):
    require_binary()
    src = build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "daemon.log"
    cmd = [TENSORFS_BIN, "mount", lake.url, str(mnt), "-o", f"log={log}"]
    try:
        t0 = time.time()
        with open(tmp_path / "parent.out", "wb") as fo, open(tmp_path / "parent.err", "wb") as fe:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe)
            try:
                rc = p.wait(timeout=20 * SLOW)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                raise AssertionError("`tensorfs mount` without -f did not return in time")
        perr = (tmp_path / "parent.err").read_text(errors="replace")
        assert rc == 0, f"`tensorfs mount` exited {rc}: {perr}"
        assert time.time() - t0 < 15 * SLOW
        # the mount is up by the time the command returns
        assert is_mounted(mnt) and os.path.ismount(mnt), "mount not up when the command returned"
        daemons = pids_for_path(mnt)
        assert daemons, "no daemon process mentions the mount point"

        check_column_file(mnt / "dd" / "main" / "x.npy", src)
        assert "dd" in os.listdir(mnt)

        r = subprocess.run([FUSERMOUNT, "-u", str(mnt)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        left = wait_gone(mnt, 5 * SLOW)
        assert not left, "daemon still running 5s after the unmount: " + \
            "; ".join(cmdline(x) for x in left)
        assert not is_mounted(mnt)
    finally:
        cleanup(mnt)
    assert log.exists(), "-o log=FILE did not create the log file"
    if log.exists():
        text = log.read_text(errors="replace")
        assert "ERROR: AddressSanitizer" not in text and "runtime error:" not in text, text


def test_daemon_detaches_stdio(lake, tmp_path):
    """A daemon must not hold the caller's stdout/stderr (`x=$(tensorfs mount ...)` returns)."""
    require_binary()
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([TENSORFS_BIN, "mount", lake.url, str(mnt)], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        try:
            rc = p.wait(timeout=20 * SLOW)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError("`tensorfs mount` without -f did not return in time")
        data = {p.stdout.fileno(): b"", p.stderr.fileno(): b""}
        pending = set(data)
        deadline = time.time() + 5 * SLOW
        while pending and time.time() < deadline:
            ready, _, _ = select.select(list(pending), [], [], 0.1)
            for fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    data[fd] += chunk
                else:
                    pending.discard(fd)
        assert rc == 0, f"`tensorfs mount` exited {rc}: {data[p.stderr.fileno()][-4000:]!r}"
        assert not pending, "the daemon keeps the caller's stdout/stderr open"
        assert is_mounted(mnt)
    finally:
        p.stdout.close()
        p.stderr.close()
        cleanup(mnt)
    assert not pids_for_path(mnt)


def test_sigterm_with_open_files_exits_cleanly(lake, mount):
    """SIGTERM while files and directories are open: the kernel never releases them, so the
    daemon frees them itself and exits with status 0 (and, on a sanitizer build, no leak)."""
    import signal
    import subprocess

    lake.build("d", {"x": np.arange(100_000, dtype=np.int64)})
    m = mount(lake)
    f = open(m.path / "d" / "main" / "x.npy", "rb")
    f.read(1 << 16)
    dfd = os.open(m.path / "d" / "main", os.O_RDONLY | os.O_DIRECTORY)
    ctl = os.open(m.path / ".tensorfs" / "control", os.O_RDWR)
    os.write(ctl, b"open d/main cols=x depth=2 batch=16\n")
    assert os.read(ctl, 4096).startswith(b"ok")
    os.kill(m.pid, signal.SIGTERM)
    try:
        m.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("the daemon did not exit on SIGTERM")
    finally:
        for close in (f.close, lambda: os.close(dfd), lambda: os.close(ctl)):
            try:
                close()
            except OSError:
                pass  # the connection is gone
    assert m.proc.returncode == 0, m.log()[-3000:]
    assert not any(k in m.log() for k in ("ERROR: AddressSanitizer", "LeakSanitizer")), \
        m.log()[-3000:]


def syslog_listens():
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.connect("/dev/log")
        return True
    except OSError:
        return False
    finally:
        s.close()


def test_daemon_without_syslog_logs_to_a_named_file(lake, tmp_path):
    """No -o log=FILE and no syslog socket: the daemon's lines go to a file the mount command
    names, instead of being lost."""
    require_binary()
    if syslog_listens():
        import pytest
        pytest.skip("a syslog listens on /dev/log here: the daemon logs there")
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    try:
        p = subprocess.run([TENSORFS_BIN, "mount", lake.url, str(mnt)], capture_output=True,
                           text=True, timeout=30 * SLOW)
        assert p.returncode == 0, p.stderr
        line = [ln for ln in p.stderr.splitlines() if "the daemon logs to " in ln]
        assert line, p.stderr
        path = line[0].split("the daemon logs to ", 1)[1].strip()
        assert os.path.isabs(path) and "mnt" in os.path.basename(path)
        r = subprocess.run([FUSERMOUNT, "-u", str(mnt)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert not wait_gone(mnt, 5 * SLOW)
        text = open(path, errors="replace").read()
        assert f"mounted {lake.url} on {mnt}" in text and f"unmounted {mnt}" in text, text[-2000:]
    finally:
        cleanup(mnt)


def test_stop_while_reading_and_staging_ends_cleanly(lake, mount):
    """SIGTERM while a reader streams a file in another thread and a loader holds a staged
    batch: status 0, the slot files gone. fusermount3 -u meanwhile is refused (the files are
    open: the kernel says EBUSY) and the mount goes on serving; once they close, it unmounts and
    the daemon ends the same way."""
    lake.build("d", {"x": np.arange(400_000, dtype=np.int64)}, "--chunk-size", "64k")
    for how in ("sigterm", "unmount"):
        m = mount(lake, opts=("cache_mem=4M",), name=f"mnt_{how}")
        ctl, files = leased_batch(m.path, "d/main", [m.pid])
        stop = threading.Event()

        def read():
            try:
                with open(m.path / "d" / "main" / "x.npy", "rb", buffering=0) as f:
                    while not stop.is_set() and f.read(1 << 16):
                        pass
            except OSError:
                pass  # the mount went away under it

        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.2)
        if how == "sigterm":
            os.kill(m.pid, signal.SIGTERM)
        else:
            p = subprocess.run(["fusermount3", "-u", str(m.path)], capture_output=True,
                               text=True)
            assert p.returncode != 0 and "busy" in p.stderr.lower(), p.stderr
            assert is_mounted(m.path) and m.proc.poll() is None
            stop.set()
            t.join(timeout=30)
            os.close(ctl)
            ctl = None
            assert subprocess.run(["fusermount3", "-u", str(m.path)]).returncode == 0
        try:
            m.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the daemon did not exit ({how})")
        stop.set()
        t.join(timeout=30)
        try:
            if ctl is not None:
                os.close(ctl)
        except OSError:
            pass
        assert m.proc.returncode == 0, m.log()[-3000:]
        assert not [f for f in os.listdir("/dev/shm") if f in files], how
