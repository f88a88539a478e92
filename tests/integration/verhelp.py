# SPDX-License-Identifier: MIT
"""Helpers for the versioning tests (branches, tags, log, diff, update, drop, verify, gc).

They build on conftest's Lake / run_proc / tfs; nothing here changes conftest's behaviour."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CLI_TIMEOUT, SLOW, TENSORFS_BIN, _check_sanitizer_text, run_proc, tfs

HEX64 = re.compile(r"[0-9a-f]{64}")
BRANCH_MOVED = "branch moved, retry"
EX_TEMPFAIL = 75


def committed_id(stdout, ds, branch="main"):
    """The commit id of a write's "committed <id> to <ds>/<branch>" line."""
    m = re.search(r"^committed ([0-9a-f]{64}) to " + re.escape(f"{ds}/{branch}") + r"$",
                  stdout, re.M)
    assert m, f"no 'committed <id> to {ds}/{branch}' line in {stdout!r}"
    return m.group(1)


def write_ok(p, ds, branch="main"):
    """A CompletedProcess of a write that must have succeeded -> its commit id."""
    assert p.returncode == 0, f"write failed (rc {p.returncode}):\n{p.stdout}\n{p.stderr}"
    return committed_id(p.stdout, ds, branch)


# -- CLI wrappers ---------------------------------------------------------------------------------

def import_(lake, ds, columns, *opts, branch=None):
    """import that must succeed; returns the new commit id."""
    o = list(opts) + (["--branch", branch] if branch else [])
    return write_ok(lake.import_(ds, columns, *o), ds, branch or "main")


def update_proc(lake, ds, col, start, arr, *opts, branch=None):
    path = arr if isinstance(arr, (str, Path)) else lake.write_npy(arr, name=col)
    args = ["update", lake.ds_url(ds), col, f"{start}={path}"] + [str(o) for o in opts]
    if branch:
        args += ["--branch", branch]
    return run_proc(args)


def update(lake, ds, col, start, arr, *opts, branch=None):
    """update that must succeed; returns the new commit id."""
    return write_ok(update_proc(lake, ds, col, start, arr, *opts, branch=branch), ds,
                    branch or "main")


def drop(lake, ds, col, *opts, branch=None):
    args = ["drop", lake.ds_url(ds), col] + [str(o) for o in opts]
    if branch:
        args += ["--branch", branch]
    return write_ok(run_proc(args), ds, branch or "main")


def branch(lake, ds, name, frm=None):
    args = ["branch", lake.ds_url(ds), name] + (["--from", frm] if frm else [])
    rc, out, err = tfs(*args)
    assert rc == 0, f"branch {name} failed: {out}{err}"
    m = re.fullmatch(r"created branch " + re.escape(name) + r" at ([0-9a-f]{64})\n", out)
    assert m, f"unexpected output of `tensorfs branch`: {out!r}"
    return m.group(1)


def tag(lake, ds, name, at=None):
    args = ["tag", lake.ds_url(ds), name] + (["--at", at] if at else [])
    rc, out, err = tfs(*args)
    assert rc == 0, f"tag {name} failed: {out}{err}"
    m = re.search(r"([0-9a-f]{64})", out)
    assert m, f"`tensorfs tag` printed no commit id: {out!r}"
    return m.group(1)


def head(lake, ds, name="main", kind="heads"):
    """The commit id a ref file holds (checked to be exactly '<64hex>\\n')."""
    raw = (lake.root / ds / "refs" / kind / name).read_bytes()
    assert re.fullmatch(rb"[0-9a-f]{64}\n", raw), f"ref {kind}/{name} is malformed: {raw!r}"
    return raw[:64].decode()


def log_text(lake, ds, ref=None, n=None):
    args = ["log", lake.ds_url(ds)] + ([ref] if ref else []) + (["-n", n] if n is not None else [])
    rc, out, err = tfs(*args)
    assert rc == 0, f"tensorfs log failed: {err}"
    return out


def parse_log(text):
    """Parse `tensorfs log` output strictly -> [{commit, parents, date, rows, message}]."""
    lines = text.split("\n")
    assert lines[-1] == "", f"log output does not end with a newline: {text[-200:]!r}"
    lines.pop()
    out, i = [], 0
    while i < len(lines):
        e = {"parents": []}
        m = re.fullmatch(r"commit ([0-9a-f]{64})", lines[i])
        assert m, f"log line {i}: expected 'commit <id>', got {lines[i]!r}"
        e["commit"] = m.group(1)
        i += 1
        while i < len(lines) and lines[i].startswith("parent "):
            m = re.fullmatch(r"parent ([0-9a-f]{64})", lines[i])
            assert m, f"log line {i}: bad parent line {lines[i]!r}"
            e["parents"].append(m.group(1))
            i += 1
        m = re.fullmatch(r"date   (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", lines[i])
        assert m, f"log line {i}: expected 'date   YYYY-MM-DD HH:MM:SS UTC', got {lines[i]!r}"
        e["date"] = m.group(1)
        i += 1
        m = re.fullmatch(r"rows   (\d+)", lines[i])
        assert m, f"log line {i}: expected 'rows   N', got {lines[i]!r}"
        e["rows"] = int(m.group(1))
        i += 1
        assert lines[i] == "", f"log line {i}: expected a blank line, got {lines[i]!r}"
        i += 1
        msg = []
        while i < len(lines) and lines[i] != "":
            assert lines[i].startswith("    "), f"log line {i}: message not indented: {lines[i]!r}"
            msg.append(lines[i][4:])
            i += 1
        assert i < len(lines), "log: a commit block does not end with a blank line"
        i += 1
        e["message"] = "\n".join(msg)
        out.append(e)
    return out


def log_of(lake, ds, ref=None, n=None):
    return parse_log(log_text(lake, ds, ref, n))


def diff_lines(lake, ds, ref1, ref2):
    rc, out, err = tfs("diff", lake.ds_url(ds), ref1, ref2)
    assert rc == 0, f"tensorfs diff {ref1} {ref2} failed: {err}"
    assert out == "" or out.endswith("\n")
    return out.splitlines()


def by_column(lines):
    """Group diff lines by column name, keeping their order within a column."""
    g = {}
    for ln in lines:
        m = re.fullmatch(r"[-+~] column (\S+)(?: .*)?", ln)
        assert m, f"unexpected diff line {ln!r}"
        g.setdefault(m.group(1), []).append(ln)
    return g


def changed_ranges(name, chunks, rpc, common):
    """Expected '~ ... changed' lines: chunk indices -> merged, chunk-aligned, clipped ranges."""
    out, run = [], None
    for k in sorted(set(chunks)):
        r0, r1 = k * rpc, min((k + 1) * rpc, common)
        if r0 >= common:
            continue
        if run and run[1] == r0:
            run[1] = r1
        else:
            if run:
                out.append(run)
            run = [r0, r1]
    if run:
        out.append(run)
    return [f"~ column {name} rows {a}..{b - 1} changed" for a, b in out]


def chunks_of(start, n, rpc):
    return range(start // rpc, (start + n - 1) // rpc + 1)


def verify(lake, ds):
    rc, out, err = tfs("verify", lake.ds_url(ds))
    return rc, out, err


def verify_ok(lake, ds):
    rc, out, err = verify(lake, ds)
    assert rc == 0 and re.search(r"\b0 problems", out), \
        f"verify found problems (rc {rc}):\n{out}\n{err}"
    return out


GC_RE = re.compile(r"(would delete|deleted) (\d+) unreachable objects \((\d+) bytes\), kept (\d+) "
                   r"reachable and (\d+) younger than")


def gc(lake, ds, *opts, ok=True):
    rc, out, err = tfs("gc", lake.ds_url(ds), *opts)
    if not ok:
        return rc, out, err
    assert rc == 0, f"gc failed (rc {rc}):\n{out}\n{err}"
    m = GC_RE.search(out)
    assert m, f"unexpected gc summary: {out!r}"
    tm = re.search(r"(\d+) temporary files?", out)
    return {"deleted": int(m.group(2)), "bytes": int(m.group(3)), "kept": int(m.group(4)),
            "young": int(m.group(5)), "temp": int(tm.group(1)) if tm else None, "out": out}


# -- the store on disk ----------------------------------------------------------------------------

def object_paths(lake, ds):
    """{64-hex id: path} of every object file of a dataset."""
    return dict(lake.object_files(ds))


def object_type(path):
    with open(path, "rb") as f:
        hdr = f.read(48)
    assert hdr[:4] == b"TFSO", f"{path}: not an object"
    return hdr[6]


def tree_bytes(root):
    total = 0
    for dirpath, _, files in os.walk(root):
        for fn in files:
            total += os.lstat(os.path.join(dirpath, fn)).st_size
    return total


def tmp_files(root):
    out = []
    for dirpath, _, files in os.walk(root):
        out += [Path(dirpath) / f for f in files if f.startswith(".tmp-")]
    return out


def set_ref(lake, ds, name, commit, kind="heads"):
    """Point a ref at `commit` atomically (simulates a reset; tensorfs has no such command)."""
    tmp = lake.root / f"reset-{os.getpid()}"
    tmp.write_bytes(commit.encode() + b"\n")
    os.replace(tmp, lake.root / ds / "refs" / kind / name)


def age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


# -- processes ------------------------------------------------------------------------------------

def popen_tfs(*args):
    return subprocess.Popen([TENSORFS_BIN] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace")


def finish(p, timeout=None):
    try:
        out, err = p.communicate(timeout=timeout or CLI_TIMEOUT)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail(f"tensorfs {p.args} hung")
    _check_sanitizer_text(err, " ".join(map(str, p.args)))
    return p.returncode, out, err


def has_open(pid, path):
    """Does process `pid` have `path` open?"""
    d = f"/proc/{pid}/fd"
    try:
        for fd in os.listdir(d):
            try:
                if os.readlink(os.path.join(d, fd)) == str(path):
                    return True
            except OSError:
                pass
    except OSError:
        pass
    return False


def stop_when_open(p, path, timeout=10.0):
    """SIGSTOP process p as soon as it has `path` open; True if stopped while running."""
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if p.poll() is not None:
            return False
        if has_open(p.pid, path):
            os.kill(p.pid, signal.SIGSTOP)
            return p.poll() is None
        time.sleep(0.0005)
    return False


def wait_until(pred, timeout, what, interval=0.1):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            pytest.fail(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)
