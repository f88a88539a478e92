# SPDX-License-Identifier: MIT
"""The control file's sessions: leases given back when a loader closes or dies, sessions side by
side, a shell's session, who may open the file, and the limits over all sessions."""

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import REPO_ROOT, SLOW

import tensorfs  # noqa: E402
from ctlhelp import N, Session, build, ctl_path, fields, shm_files, staging_stats, wait_for


def test_leases_released_on_close_and_stats(lake, mount):
    build(lake)
    m = mount(lake)
    pid = m.proc.pid
    a, b = Session(m), Session(m)
    r = a.req("open d/main cols=label,image depth=3 batch=16")
    assert r.startswith("ok stream=1 ") and fields(r)["slots"] == "3", r
    slots = {fields(a.req(f"stage stream=1 range={i}:{i + 10}"))["slot"] for i in range(3)}
    assert slots == {"0", "1", "2"}
    assert a.req("stage stream=1 rows=1").startswith("error EBUSY ")
    st = fields(b.req("stats"))
    assert st["leased"] == "3" and st["sessions"] == "2" and st["session_leased"] == "0"
    assert staging_stats(m)["slots_leased"] == 3
    assert len(shm_files(pid)) == 1
    assert a.req("release stream=1 slot=1") == "ok"
    assert fields(b.req("stats"))["leased"] == "2"
    a.close()  # the loader goes away: its leases and files go too
    wait_for(lambda: fields(b.req("stats"))["leased"] == "0", "leases released on close")
    assert fields(b.req("stats"))["sessions"] == "1"
    assert shm_files(pid) == []
    # close stream: the same, without closing the session
    assert b.req("open d/main cols=label").startswith("ok stream=1 ")
    assert fields(b.req("stage stream=1 rows=3,4"))["rows"] == "2"
    assert b.req("close stream=1") == "ok"
    assert fields(b.req("stats"))["leased"] == "0" and shm_files(pid) == []
    assert b.req("stage stream=1 rows=1").startswith("error ENOENT ")
    b.close()


LOADER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import tensorfs
s = tensorfs.Stager(sys.argv[2], "d/main", ["image"], depth=4, batch_size=32)
held = [s.stage(range(i, i + 32)) for i in range(3)]
print("ready", flush=True)
time.sleep(60)
"""


def test_leases_released_when_loader_is_killed(lake, mount):
    build(lake)
    m = mount(lake)
    pid = m.proc.pid
    watcher = Session(m)
    p = subprocess.Popen([sys.executable, "-c", LOADER, str(REPO_ROOT / "packaging" / "python"),
                          str(m.path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        assert fields(watcher.req("stats"))["leased"] == "3"
        assert len(shm_files(pid)) == 1
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
        wait_for(lambda: fields(watcher.req("stats"))["leased"] == "0",
                 "leases of a killed loader released")
        wait_for(lambda: not shm_files(pid), "slot file of a killed loader removed")
        assert fields(watcher.req("stats"))["sessions"] == "1"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdout.close()
        watcher.close()


def _child_try(m, uid, stage):
    """Fork; the child becomes uid and uses the control file. Returns its (status, text)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(r)
            os.chdir(m.path / ".tensorfs")  # the test's tmp dirs are not searchable by uid
            os.setgid(uid)
            os.setgroups([])
            os.setuid(uid)
            try:
                fd = os.open("control", os.O_RDWR)
            except OSError as e:
                os.write(w, f"open {errno.errorcode[e.errno]}".encode())
                os._exit(0)
            msg = "opened"
            if stage:
                os.write(fd, b"open d/main cols=label\nstage stream=1 rows=5,6\n")
                time.sleep(0.2)
                reply = os.read(fd, 65536).decode().splitlines()[-1]
                if reply.startswith("error "):
                    os.write(w, reply.encode())
                    os._exit(0)
                f = dict(t.split("=", 1) for t in reply.split()[1:] if "=" in t)
                with open(f["file"], "rb") as fh:
                    fh.seek(int(f["offset"]))
                    msg = "read " + ",".join(map(str, np.frombuffer(fh.read(16), "<i8")))
            os.write(w, msg.encode())
        except BaseException as e:  # noqa: BLE001
            os.write(w, f"child failed: {e!r}".encode())
            code = 1
        os._exit(code)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    return status, data.decode()


def test_concurrent_sessions(lake, mount):
    cols = build(lake)
    m = mount(lake)
    failures = []

    def worker(k):
        try:
            rng = np.random.default_rng(100 + k)
            target = "d/main" if k % 2 else "d/main/views/seed=%d" % k
            view_rows = None
            if k % 2 == 0:
                view_rows = (np.array(tensorfs.open(m.path / target)["label"]) - 1) // 3
            with tensorfs.Stager(m.path, target, ["image", "label"], batch_size=64) as s:
                for _ in range(25):
                    rows = rng.integers(0, N, size=64)
                    b = s.stage(rows)
                    src = rows if view_rows is None else view_rows[rows]
                    if not (np.array_equal(b["image"], cols["image"][src]) and
                            np.array_equal(b["label"], cols["label"][src])):
                        failures.append(f"worker {k}: wrong batch")
                    b.release()
                n = 0
                for b in s.batches(50):
                    n += b.rows
                if n != N:
                    failures.append(f"worker {k}: next covered {n} rows")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"worker {k}: {e!r}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120 * SLOW)
    assert not failures, failures
    # The kernel releases a closed file after close() returns: wait for the daemon to see it.
    wait_for(lambda: staging_stats(m)["sessions"] == 0, "every session closed")
    st = staging_stats(m)
    assert st["sessions"] == 0 and st["slots_leased"] == 0 and st["streams"] == 0


def test_shell_session(lake, mount):
    cols = build(lake)
    m = mount(lake)
    # What the README shows, in a real shell: no complaint from head, one reply per request.
    script = ("exec 3<>.tensorfs/control; echo 'open d/main cols=label' >&3; head -1 <&3; "
              "echo 'stage stream=1 rows=4,2' >&3; head -1 <&3; echo stats >&3; head -1 <&3")
    p = subprocess.run(["bash", "-c", script], cwd=m.path, capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    out = p.stdout.splitlines()
    assert len(out) == 3 and out[0].startswith("ok stream=1 rows=3000 "), out
    f = fields(out[1])
    assert f["rows"] == "2" and f["dtype"] == "<i8" and f["shape"] == "2"
    assert f["file"].startswith(f"/dev/shm/tensorfs-{m.proc.pid}-")
    # the shell exited: its session and slot file are gone
    wait_for(lambda: staging_stats(m)["sessions"] == 0, "the shell's session to close")
    assert not os.path.exists(f["file"])
    # the same from a shell that checks the bytes while it holds the slot
    script = ("exec 3<>.tensorfs/control; echo 'open d/main cols=label' >&3; head -1 <&3 >/dev/null; "
              "echo 'stage stream=1 rows=4,2' >&3; r=$(head -1 <&3); "
              "f=$(echo \"$r\" | tr ' ' '\\n' | sed -n 's/^file=//p'); "
              "o=$(echo \"$r\" | tr ' ' '\\n' | sed -n 's/^offset=//p'); "
              "dd if=$f bs=1 skip=$o count=16 status=none | od -An -t d8")
    p = subprocess.run(["bash", "-c", script], cwd=m.path, capture_output=True, text=True,
                       timeout=30 * SLOW)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert [int(x) for x in p.stdout.split()] == cols["label"][[4, 2]].tolist()
    # `echo > control` (O_TRUNC) then read: a session per open, so nothing to read
    with open(ctl_path(m), "w") as fh:
        fh.write("stats\n")
    # Python's plain os.open/os.write/os.read
    fd = os.open(ctl_path(m), os.O_RDWR)
    try:
        assert os.read(fd, 100) == b""  # nothing pending
        os.write(fd, b"stats\nstats\n")
        data = b""
        while data.count(b"\n") < 2:
            data += os.read(fd, 7)  # small reads get the rest next time
        assert [ln.split()[0] for ln in data.decode().splitlines()] == ["ok", "ok"]
    finally:
        os.close(fd)


def test_read_only_except_control(lake, mount):
    build(lake)
    m = mount(lake)
    main = m.path / "d" / "main"
    for flags in (os.O_WRONLY, os.O_RDWR):
        with pytest.raises(OSError) as ei:
            os.open(main / "label.npy", flags)
        assert ei.value.errno == errno.EROFS
    with pytest.raises(OSError) as ei:
        os.open(m.path / ".tensorfs" / "stats", os.O_WRONLY)
    assert ei.value.errno == errno.EROFS
    with pytest.raises(OSError) as ei:
        os.open(m.path / ".tensorfs" / "new", os.O_WRONLY | os.O_CREAT, 0o644)
    assert ei.value.errno == errno.EROFS
    with pytest.raises(OSError):
        os.unlink(ctl_path(m))
    assert sorted(os.listdir(m.path / ".tensorfs")) == ["bad_rows", "control", "errors", "metrics", "stats"]
    st = os.stat(ctl_path(m))
    assert oct(st.st_mode & 0o777) == "0o600" and st.st_uid == os.getuid()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_control_file_permissions(lake, mount):
    cols = build(lake)
    m = mount(lake)
    status, text = _child_try(m, 65534, stage=False)
    assert status == 0 and text == "open EACCES", text
    m2 = mount(lake, opts=("allow_other",), name="mnt_other")
    assert oct(os.stat(ctl_path(m2)).st_mode & 0o777) == "0o666"
    status, text = _child_try(m2, 65534, stage=True)
    want = "read " + ",".join(map(str, cols["label"][[5, 6]]))
    if "EOPNOTSUPP" in text or "Operation not supported" in text:
        pytest.skip("/dev/shm has no POSIX ACLs here: " + text)
    assert status == 0 and text == want, text


def test_global_limits(lake, mount):
    """Limits over all sessions: a control file beyond staging_sessions is EBUSY at open, a
    stream beyond staging_streams is an EBUSY reply, slots beyond staging_mem an ENOSPC reply,
    each naming its limit; closing gives the room back, and the daemon keeps serving."""
    build(lake)
    m = mount(lake, opts=("cache_mem=4M", "staging_sessions=2", "staging_streams=3",
                          "staging_mem=1M"))
    a, b = Session(m), Session(m)
    with pytest.raises(OSError) as e:
        os.open(ctl_path(m), os.O_RDWR)
    assert e.value.errno == errno.EBUSY
    assert "staging_sessions=2" in m.log()
    # 64 rows of 201 bytes (image, label, feat) in 2 slots: ~26 KiB a stream.
    ok = [s.req("open d/main cols=image,label,feat depth=2 batch=64") for s in (a, a, b)]
    assert all(r.startswith("ok ") for r in ok), ok
    r = b.req("open d/main cols=label depth=2 batch=64")
    assert r.startswith("error EBUSY") and "staging_streams=3" in r, r
    assert a.req("close stream=1") == "ok"
    r = b.req("open d/main cols=image depth=8 batch=1024")
    assert r.startswith("error ENOSPC") and "staging_mem" in r, r
    r = b.req("open d/main cols=label depth=2 batch=64")
    assert r.startswith("ok "), r
    assert b.req("next stream=2 batch=64").startswith("ok ")
    a.close()
    # The kernel releases a closed file after close() returns: wait for the daemon to see it.
    wait_for(lambda: staging_stats(m)["sessions"] == 1, "a's session closed")
    c = Session(m)  # a's room is back
    assert c.req("stats").startswith("ok ")
    b.close()
    c.close()
    wait_for(lambda: staging_stats(m)["sessions"] == 0, "sessions closed")
    assert not shm_files(m.pid)
