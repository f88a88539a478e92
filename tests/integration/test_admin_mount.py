# SPDX-License-Identifier: MIT
"""Mounting the way admins mount: `mount -t fuse.tensorfs`, an fstab line (`mount -T FILE`), the
systemd unit example, `mount -t tensorfs` through mount.tensorfs; and the mount-point checks
(a second mount on a tensorfs mount, a dead mount, a non-empty directory).

mount(8) runs its helpers with the default PATH and looks for them in /sbin, so the tests that
go through mount(8) run in a private mount namespace (unshare -m) where a scratch directory
holding `tensorfs` is bind-mounted over /usr/local/sbin (or over /usr/sbin for mount.tensorfs).
Nothing outside the namespace changes, and the namespace's mount is unmounted before it ends."""

import configparser
import errno
import os
import shutil
import signal
import subprocess
import textwrap
import time

import numpy as np
import pytest

from conftest import (REPO_ROOT, SLOW, TENSORFS_BIN, is_mounted, kill_pids, leased_batch,
                      pids_for_path, require_binary, run_proc, unmount)

EXAMPLES = REPO_ROOT / "packaging" / "examples"


def build(lake):
    src = np.arange(30000, dtype="<i8").reshape(3000, 10)
    lake.build("ds", {"x": src})
    return src


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")


def in_namespace(tmp_path, bindir_over, mnt, commands):
    """Run a shell script in a private mount namespace where the directory holding `tensorfs`
    (and mount.tensorfs) is bind-mounted over bindir_over. The script unmounts mnt on exit.
    Returns the CompletedProcess."""
    bindir = tmp_path / "helpers"
    bindir.mkdir(exist_ok=True)
    for name in ("tensorfs", "mount.tensorfs"):
        link = bindir / name
        if not link.exists():
            link.symlink_to(TENSORFS_BIN)
    py_check = textwrap.dedent("""
        import numpy as np, sys
        a = np.load(sys.argv[1], mmap_mode="r")
        b = np.arange(30000, dtype="<i8").reshape(3000, 10)
        sys.exit(0 if a.shape == b.shape and np.array_equal(a, b) else 3)
    """)
    (tmp_path / "check.py").write_text(py_check)
    script = textwrap.dedent(f"""
        set -e
        trap 'fusermount3 -u {mnt} 2>/dev/null || umount -l {mnt} 2>/dev/null || true' EXIT
        mount --bind {bindir} {bindir_over}
        {commands}
        /usr/bin/python3 {tmp_path}/check.py {mnt}/ds/main/x.npy
        echo "MOUNTED: $(findmnt -n -o FSTYPE,OPTIONS {mnt})"
        fusermount3 -u {mnt}
        trap - EXIT
    """)
    try:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            script], capture_output=True, text=True, timeout=60 * SLOW)
        if "cannot change root filesystem propagation" in p.stderr:
            # In a chroot whose root is not a mount point no namespace can be made private,
            # and a bind mount in a shared one would reach the machine's own /usr/local/sbin.
            pytest.skip("/ is not a mount point here (a chroot?): no private mount namespace")
        return p
    finally:
        # The daemon lives in the namespace; whatever happened, none may survive.
        left = pids_for_path(mnt)
        if left:
            kill_pids(left)


def check_ran(p, fstype="fuse.tensorfs"):
    assert p.returncode == 0, f"status {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    line = [x for x in p.stdout.splitlines() if x.startswith("MOUNTED: ")]
    assert line and line[0].split()[1] == fstype, p.stdout
    return line[0]


@pytest.fixture
def root_ns():
    require_binary()
    if os.geteuid() != 0:
        pytest.skip("mount(8) with helpers and namespaces needs root")
    need("unshare", "findmnt", "mount", "fusermount3")


def test_mount_t_fuse_tensorfs(lake, tmp_path, root_ns):
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    opts = f"cache_mem=64M,cache_dir={tmp_path}/cache,_netdev,allow_other"
    p = in_namespace(tmp_path, "/usr/local/sbin", mnt,
                     f"mount -t fuse.tensorfs {lake.url} {mnt} -o {opts}")
    line = check_ran(p)
    assert "allow_other" in line  # handed on to the kernel; _netdev stays mount(8)'s own


def test_fstab_line(lake, tmp_path, root_ns):
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    # The example's options, on this test's lake.
    example = [ln.split() for ln in (EXAMPLES / "fstab").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")]
    assert example and all(f[2] == "fuse.tensorfs" for f in example), example
    opts = example[-1][3].replace("/var/cache/tensorfs", f"{tmp_path}/cache").replace(
        "cache_mem=8G", "cache_mem=64M")
    fstab.write_text(f"# test\n{lake.url}  {mnt}  fuse.tensorfs  {opts}  0 0\n")
    p = in_namespace(tmp_path, "/usr/local/sbin", mnt, f"mount -T {fstab} {mnt}")
    check_ran(p)
    assert (tmp_path / "cache").is_dir()


def test_systemd_unit_example(lake, tmp_path, root_ns):
    """What systemd does with the example unit: `mount What Where -t Type -o Options`."""
    build(lake)
    unit = configparser.ConfigParser(interpolation=None)
    unit.optionxform = str
    unit.read(EXAMPLES / "mnt-lake.mount")
    m = unit["Mount"]
    assert m["Where"] == "/mnt/lake" and m["Type"] == "fuse.tensorfs"
    if shutil.which("systemd-analyze"):
        v = subprocess.run(["systemd-analyze", "verify", str(EXAMPLES / "mnt-lake.mount")],
                           capture_output=True, text=True)
        assert v.returncode == 0 and "rror" not in v.stderr, v.stderr
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    opts = m["Options"].replace("/var/cache/tensorfs", f"{tmp_path}/cache").replace(
        "cache_mem=8G", "cache_mem=64M").replace("cache_disk=100G", "cache_disk=1G")
    p = in_namespace(tmp_path, "/usr/local/sbin", mnt,
                     f"mount {lake.url} {mnt} -t {m['Type']} -o {opts}")
    check_ran(p)


def test_mount_t_tensorfs_helper(lake, tmp_path, root_ns):
    """mount -t tensorfs: mount(8) runs /sbin/mount.tensorfs SOURCE DIR -o OPTIONS."""
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = in_namespace(tmp_path, "/usr/sbin", mnt,
                     f"mount -t tensorfs {lake.url} {mnt} -o cache_mem=64M")
    check_ran(p)


# -- mount-point checks ----------------------------------------------------------------------

def start_daemon(lake, mnt, *extra):
    p = subprocess.run([TENSORFS_BIN, "mount", lake.url, str(mnt), *extra],
                       capture_output=True, text=True, timeout=30 * SLOW)
    return p


def mounts_at(mnt):
    with open("/proc/self/mountinfo") as f:
        return sum(1 for ln in f if f" {mnt} " in ln)


@pytest.fixture
def mp(lake, tmp_path):
    """A built lake's mount point, an empty directory; whatever is mounted there goes in
    teardown."""
    require_binary()
    build(lake)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    yield mnt
    cleanup(mnt)


def cleanup(mnt):
    unmount(mnt)
    if is_mounted(mnt):
        subprocess.run(["fusermount3", "-uz", str(mnt)], capture_output=True)
    deadline = time.time() + 5 * SLOW
    while pids_for_path(mnt) and time.time() < deadline:
        time.sleep(0.05)
    kill_pids(pids_for_path(mnt))


def test_second_mount_on_a_tensorfs_mount_is_refused(lake, mp):
    p = start_daemon(lake, mp)
    assert p.returncode == 0, p.stderr
    daemons = pids_for_path(mp)
    p2 = start_daemon(lake, mp)
    assert p2.returncode != 0
    assert "is mounted there already" in p2.stderr and "fusermount3 -u" in p2.stderr, p2.stderr
    assert mounts_at(mp) == 1, "a second mount stacked on the first"
    assert pids_for_path(mp) == daemons


def test_dead_mount_is_named_and_force_cleans_it(lake, mp):
    assert start_daemon(lake, mp).returncode == 0
    for pid in pids_for_path(mp):
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    while pids_for_path(mp) and time.time() < deadline:
        time.sleep(0.05)
    with pytest.raises(OSError) as e:
        os.listdir(mp)
    # ECONNABORTED at first, then ENOTCONN; ECONNREFUSED when the daemon died before it
    # answered the kernel's INIT (a slow, sanitized daemon killed at once)
    assert e.value.errno in (errno.ECONNABORTED, errno.ENOTCONN, errno.ECONNREFUSED)
    p = start_daemon(lake, mp)
    assert p.returncode != 0
    assert "dead mount" in p.stderr and f"fusermount3 -u {mp}" in p.stderr, p.stderr
    assert "--force" in p.stderr
    p = start_daemon(lake, mp, "--force")
    assert p.returncode == 0, p.stderr
    assert "x.npy" in os.listdir(mp / "ds" / "main")
    assert mounts_at(mp) == 1


def test_non_empty_mount_point_needs_nonempty(lake, mp):
    (mp / "keep.txt").write_text("mine")
    p = start_daemon(lake, mp)
    assert p.returncode != 0 and "not empty" in p.stderr and "nonempty" in p.stderr
    assert not is_mounted(mp)
    p = start_daemon(lake, mp, "-o", "nonempty")
    assert p.returncode == 0, p.stderr
    assert "ds" in os.listdir(mp)
    cleanup(mp)
    assert (mp / "keep.txt").read_text() == "mine"


def test_mount_helper_argv_form(lake, mp):
    """mount.fuse3 runs `tensorfs SOURCE DIR -o rw,...,dev,suid`; the CLI takes that form."""
    p = subprocess.run([TENSORFS_BIN, lake.url, str(mp), "-o", "rw,cache_mem=64M,dev,suid"],
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    assert np.load(mp / "ds" / "main" / "x.npy").shape == (3000, 10)
    r = run_proc(["mount", lake.url])
    assert r.returncode == 2  # a usage error still reads as one


def test_killed_during_reads_and_staging_remounts_clean(lake, mp):
    """kill -9 while a reader streams a file and a loader holds staged slots: the next
    `mount --force` on the same path cleans the dead mount and the dead daemon's slot files,
    and readers then get exact bytes."""
    assert start_daemon(lake, mp).returncode == 0
    dead = pids_for_path(mp)
    ctl, slots = leased_batch(mp, "ds/main", dead)
    reader = open(mp / "ds" / "main" / "x.npy", "rb", buffering=0)
    reader.read(4096)  # a read in flight's file, open across the kill
    for pid in dead:
        os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 5
    while pids_for_path(mp) and time.time() < deadline:
        time.sleep(0.05)
    # What the kernel had cached may still be read (and is right); the rest is an error.
    src = np.arange(30000, dtype="<i8").reshape(3000, 10)
    try:
        got = reader.read(4096)
    except OSError:
        got = None
    try:
        reader.close()
    except OSError:  # ECONNABORTED: the daemon is gone
        pass
    if got is not None:  # the mount's header is 4096 bytes: these are rows 0.. of x
        assert got == src.tobytes()[:len(got)]
    try:
        os.close(ctl)
    except OSError:
        pass
    p = start_daemon(lake, mp, "--force")
    assert p.returncode == 0, p.stderr
    assert mounts_at(mp) == 1
    # The new daemon removed the dead one's slot files when it started.
    assert not [f for f in os.listdir("/dev/shm") if f in slots]
    assert np.array_equal(np.load(mp / "ds" / "main" / "x.npy"), src)
