# SPDX-License-Identifier: MIT
"""Long CLI work shows a progress line on a terminal, stays quiet off one, and takes --progress
and --quiet to force either; an import of 0 rows makes no commit and says so; gc --dry-run says
what it would do."""

import re
import shutil
import subprocess

import numpy as np
import pytest

from conftest import SLOW, TENSORFS_BIN, run_proc


def big(lake):
    rng = np.random.default_rng(5)
    return rng.integers(0, 1000, size=(200000, 16), dtype=np.int64)  # 25.6 MB


def test_import_progress_forced_off_a_terminal(lake):
    lake.create("ds")
    x = big(lake)
    p = lake.import_("ds", {"x": x}, "--progress", "--chunk-size", "1M")
    last = p.stderr.strip().splitlines()[-1]
    assert re.match(r"^import: [\d.]+ MiB of [\d.]+ MiB \(100%\), 200000 of 200000 rows, "
                    r".*/s, [\d.]+ s$", last), p.stderr
    assert "\r" not in p.stderr  # off a terminal: whole lines
    assert p.stdout.startswith("committed ")


def test_no_progress_off_a_terminal_or_with_quiet(lake):
    lake.create("ds")
    x = big(lake)
    p = lake.import_("ds", {"x": x})
    assert "import:" not in p.stderr, p.stderr
    p = lake.import_("ds", {"x": x}, "--progress", "--quiet")
    assert "import:" not in p.stderr, p.stderr


def in_pty(cmd):
    p = subprocess.run(["script", "-qec", cmd, "/dev/null"], capture_output=True,
                       timeout=120 * SLOW)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out
    return out


def test_progress_on_a_terminal(lake):
    """Run under a pseudo-terminal (script(1)): the line is redrawn in place."""
    if not shutil.which("script"):
        pytest.skip("needs script(1) from bsdutils")
    lake.create("ds")
    src = lake.write_npy(big(lake))
    cmd = f"{TENSORFS_BIN} import {lake.ds_url('ds')} x={src} --chunk-size 1M"
    out = in_pty(cmd)  # bytes as the terminal got them (text mode would turn \r into \n)
    assert "\r\x1b[Kimport: " in out and "(100%), 200000 of 200000 rows" in out, out
    out = in_pty(f"{TENSORFS_BIN} verify {lake.ds_url('ds')}")
    assert re.search(r"\r\x1b\[Kverify: \d+ objects", out), out


def test_verify_and_gc_progress(lake):
    lake.build("ds", {"x": big(lake)}, "--chunk-size", "1M")
    p = run_proc(["verify", lake.ds_url("ds"), "--progress"], check=True)
    assert re.search(r"^verify: \d+ objects, [\d.]+ MiB", p.stderr, re.M), p.stderr
    p = run_proc(["gc", lake.ds_url("ds"), "--progress", "--grace", "0"], check=True)
    assert re.search(r"^gc: \d+ objects", p.stderr, re.M), p.stderr


def test_import_of_zero_rows_makes_no_commit(lake):
    lake.build("ds", {"x": np.arange(10, dtype="<i4")})
    log0 = run_proc(["log", lake.ds_url("ds")], check=True).stdout
    p = lake.import_("ds", {"x": np.arange(0, dtype="<i4")})
    assert p.returncode == 0
    assert "no commit" in p.stdout and "0 rows" in p.stdout, p.stdout
    assert run_proc(["log", lake.ds_url("ds")], check=True).stdout == log0
    # a new, empty column is a change of schema: that commits
    lake.create("empty")
    p = lake.import_("empty", {"y": np.zeros((0, 3), dtype="<f4")})
    assert p.stdout.startswith("committed "), p.stdout
    log1 = run_proc(["log", lake.ds_url("empty")], check=True).stdout
    p = lake.import_("empty", {"y": np.zeros((0, 3), dtype="<f4")})
    assert "no commit" in p.stdout
    assert run_proc(["log", lake.ds_url("empty")], check=True).stdout == log1


def test_gc_dry_run_says_would(lake):
    lake.build("ds", {"x": np.arange(1000, dtype="<i8")})
    lake.import_("ds", {"x": np.arange(1000, dtype="<i8")}, "--branch", "main")
    p = run_proc(["gc", lake.ds_url("ds"), "--dry-run", "--grace", "0"], check=True)
    assert "would delete" in p.stdout and "nothing was removed" in p.stdout, p.stdout
    assert "removed 0" not in p.stdout and "deleted" not in p.stdout.replace("would delete", "")
