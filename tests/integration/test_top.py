# SPDX-License-Identifier: MIT
"""Watching a mount: .tensorfs/metrics is valid Prometheus text whose counters follow the reads;
`tensorfs stats` prints the counters (--json: as .tensorfs/stats); `tensorfs top` runs in a tmux
pane, its figures move while a reader works, `s` changes the sort and `q` quits; without a
terminal it prints a line per interval."""

import json
import os
import re
import shutil
import subprocess
import time

import numpy as np
import pytest

from conftest import SLOW, TENSORFS_BIN, run_proc

REQUIRE = os.environ.get("TENSORFS_REQUIRE_TOOLS") == "1"

SAMPLE = re.compile(r'^(tensorfs_[a-z_]+)(\{[a-z_]+="[^"\\]*"(,[a-z_]+="[^"\\]*")*\})? '
                    r'(-?[0-9.]+(e[+-]?[0-9]+)?)$')


def build(lake):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 255, size=(4000, 1024), dtype=np.uint8)  # 4 MB, several chunks
    lake.build("ds", {"x": x}, "--chunk-size", "256k")
    return x


def metrics(m):
    """Parse .tensorfs/metrics, checking the format on the way: {name{labels}: value}."""
    text = (m.path / ".tensorfs" / "metrics").read_text()
    declared, out = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in declared, f"{name} declared twice"
            declared[name] = None
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name in declared and kind in ("counter", "gauge"), line
            declared[name] = kind
            if kind == "counter":
                assert name.endswith("_total"), name
        else:
            g = SAMPLE.match(line)
            assert g, f"not a sample line: {line!r}"
            assert declared.get(g.group(1)), f"{g.group(1)} has no # TYPE before it"
            out[g.group(1) + (g.group(2) or "")] = float(g.group(4))
    return out


def test_metrics_follow_reads(lake, mount):
    x = build(lake)
    m = mount(lake)
    before = metrics(m)
    for name in ("tensorfs_read_bytes_total", "tensorfs_cache_hits_total",
                 "tensorfs_reader_wait_seconds_total", "tensorfs_cache_budget_bytes",
                 "tensorfs_prefetch_inflight_bytes", 'tensorfs_store_requests_total{op="get"}',
                 "tensorfs_staging_slots", "tensorfs_lookup_errors_total", "tensorfs_views",
                 "tensorfs_views_idle_bytes", "tensorfs_view_mem_bytes", "tensorfs_nodes",
                 "tensorfs_staging_gpu_cache_held_bytes",
                 "tensorfs_staging_gpu_cache_given_back_total"):
        assert name in before, name
    got = np.load(m.path / "ds" / "main" / "x.npy")
    assert np.array_equal(got, x)
    after = metrics(m)
    size = os.path.getsize(m.path / "ds" / "main" / "x.npy")
    assert after["tensorfs_read_bytes_total"] - before["tensorfs_read_bytes_total"] >= x.nbytes
    assert after["tensorfs_read_bytes_total"] <= 2 * size
    v = 'tensorfs_version_read_bytes_total{dataset="ds",version="main"}'
    assert after[v] == after["tensorfs_read_bytes_total"]
    assert after["tensorfs_cache_misses_total"] + after["tensorfs_prefetch_loaded_total"] > 0
    assert after["tensorfs_reader_wait_seconds_total"] >= before["tensorfs_reader_wait_seconds_total"]
    # a view's reads count toward its version
    np.load(m.path / "ds" / "main" / "views" / "seed=1" / "x.npy")
    assert metrics(m)[v] > after[v]


def test_stats_command(lake, mount):
    build(lake)
    m = mount(lake)
    np.load(m.path / "ds" / "main" / "x.npy")
    p = run_proc(["stats", str(m.path), "--json"], check=True)
    js = json.loads(p.stdout)
    assert js["fuse"]["read_bytes_requested"] > 0
    assert js["versions"][0]["dataset"] == "ds" and js["versions"][0]["version"] == "main"
    assert "staging" in js and "reader_wait_s" in js["cache"]
    p = run_proc(["stats", str(m.path)], check=True)
    assert re.search(r"^ds\s+main\s+\d+", p.stdout, re.M), p.stdout
    assert "Cache" in p.stdout and "Prefetch" in p.stdout
    assert re.search(r"^Views\s+built \d+ .* nodes \d+", p.stdout, re.M), p.stdout
    # The column was read cold: its loads took time, and so did the store's reads.
    g = re.search(r"^Loads .*; ([\d.]+) s and ([\d.]+) s in all", p.stdout, re.M)
    assert g and float(g.group(1)) > 0 and float(g.group(2)) > 0, p.stdout
    bad = run_proc(["stats", "/"])
    assert bad.returncode == 1 and "tensorfs mount" in bad.stderr


def test_top_without_a_terminal_prints_lines(lake, mount):
    build(lake)
    m = mount(lake)
    p = subprocess.run([TENSORFS_BIN, "top", str(m.path), "-n", "3", "-d", "0.2"],
                       capture_output=True, text=True, timeout=30 * SLOW)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 3 and all(" read " in ln and "MB/s" in ln and " loading " in ln
                                   for ln in lines), lines


def tmux(sock, *args, check=True):
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True,
                          check=check, timeout=30)


def pane(sock):
    return tmux(sock, "capture-pane", "-p", "-t", "top").stdout


def reads_shown(text):
    g = re.search(r"^Read .* reads (\d+) ", text, re.M)
    return int(g.group(1)) if g else None


def test_top_in_tmux(lake, mount, tmp_path):
    if not shutil.which("tmux"):
        if REQUIRE:
            pytest.fail("needs tmux (TENSORFS_REQUIRE_TOOLS=1: required here)", pytrace=False)
        pytest.skip("needs tmux (packaging/deps.sh test installs it)")
    x = build(lake)
    m = mount(lake)
    sock = f"tensorfs-test-{os.getpid()}"
    try:
        tmux(sock, "new-session", "-d", "-s", "top", "-x", "160", "-y", "40",
             f"TERM=xterm {TENSORFS_BIN} top {m.path} -d 0.2")
        deadline = time.time() + 10 * SLOW
        while reads_shown(pane(sock)) is None and time.time() < deadline:
            time.sleep(0.1)
        first = pane(sock)
        assert reads_shown(first) == 0, first
        assert "sort: MB/s" in first and "DATASET" in first

        assert np.array_equal(np.load(m.path / "ds" / "main" / "x.npy"), x)
        deadline = time.time() + 10 * SLOW
        while (reads_shown(pane(sock)) or 0) == 0 and time.time() < deadline:
            time.sleep(0.1)
        moved = pane(sock)
        assert reads_shown(moved) > 0, moved
        assert re.search(r"^ds\s+main\s+[1-9]\d*\s", moved, re.M), moved

        tmux(sock, "send-keys", "-t", "top", "s")
        deadline = time.time() + 5 * SLOW
        while "sort: reads/s" not in pane(sock) and time.time() < deadline:
            time.sleep(0.1)
        assert "sort: reads/s" in pane(sock)

        tmux(sock, "send-keys", "-t", "top", "q")
        deadline = time.time() + 5 * SLOW
        while tmux(sock, "has-session", "-t", "top", check=False).returncode == 0 \
                and time.time() < deadline:
            time.sleep(0.1)
        assert tmux(sock, "has-session", "-t", "top", check=False).returncode != 0, \
            "top did not quit on q"
    finally:
        tmux(sock, "kill-server", check=False)
