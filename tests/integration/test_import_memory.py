# SPDX-License-Identifier: MIT
"""An import's memory is bounded by its buffers, not by its input: the sources read through a
mapping (JSON Lines, text files, Megatron-LM's .bin) give their pages back as their rows are
read, and an .npz array is read a piece of rows at a time, so the importing process's peak RSS
stays far below the input's size. Each import's rows
are checked too, so a bound kept by reading less fails."""
import contextlib
import json
import os
import subprocess
import time

import numpy as np
import pytest

from conftest import SANITIZE, TENSORFS_BIN, schema_column, vm_rss
from test_megatron import write_megatron

MiB = 1 << 20
INPUT = 96 * MiB
# The binary and its libraries (about 25 MiB here), chunk buffers of 1 MiB in flight (a few a
# column part and thread), the importer's blocks, and the mapping's pages not yet given back
# (up to 8 MiB). Before the pages were given back, each import's peak passed its input's size.
BOUND = 64 * MiB

pytestmark = pytest.mark.skipif(
    SANITIZE, reason="TENSORFS_SANITIZE=1: a sanitizer's shadow memory and quarantine inflate "
    "RSS, so a memory bound cannot be checked on a sanitizer build")


def import_peak(lake, tmp_path, ds, *args):
    """`tensorfs import` into a new dataset ds, at 2 threads in chunks of 1 MiB, run to its end:
    its peak RSS in bytes, sampled every 5 ms once the binary runs. (Not wait4's ru_maxrss: a
    child forked from this test counts the test's own memory until its exec.)"""
    lake.create(ds)
    cmd = [TENSORFS_BIN, "import", lake.ds_url(ds), *map(str, args), "--chunk-size", "1M",
           "--threads", "2"]
    exe, peak, t0 = os.path.realpath(TENSORFS_BIN), 0, time.monotonic()
    err = tmp_path / f"{ds}.err"
    with open(err, "w") as fe:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fe)
        while p.poll() is None:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{p.pid}/exe") == exe:
                    peak = max(peak, vm_rss(p.pid, "VmHWM") or 0)
            if time.monotonic() - t0 > 300:
                p.kill()
                p.wait()
                pytest.fail(f"import {ds} did not end in 300 s")
            time.sleep(0.005)
    assert p.returncode == 0, err.read_text()
    assert peak, "the import was never seen running"
    return peak


def check(lake, ds, column, rows, peak, what):
    assert schema_column(lake.info(ds), column)["rows"] == rows
    print(f"{what}: peak RSS {peak / MiB:.0f} MiB")
    assert peak < BOUND, f"peak RSS {peak / MiB:.0f} MiB importing {INPUT / MiB:.0f} MiB of {what}"


def test_jsonl_import_gives_back_its_input(lake, tmp_path):
    path, rows = tmp_path / "a.jsonl", INPUT // 32032
    with open(path, "w") as f:
        for i in range(rows):
            f.write(json.dumps({"i": i, "t": f"{i:08d} " + "x" * 32000}) + "\n")
    assert path.stat().st_size > 0.99 * INPUT
    check(lake, "j", "t", rows, import_peak(lake, tmp_path, "j", "--jsonl", path), "lines")


def test_text_import_gives_back_its_input(lake, tmp_path):
    path, rows = tmp_path / "a.txt", INPUT // 4009
    with open(path, "w") as f:
        for i in range(rows):
            f.write(f"{i:08d} " + "y" * 4000 + "\n")
    check(lake, "t", "t", rows, import_peak(lake, tmp_path, "t", f"t={path}"), "lines")


def test_megatron_import_gives_back_its_input(lake, tmp_path):
    rng = np.random.default_rng(5)
    rows = INPUT // (4096 * 4)
    write_megatron(tmp_path / "m", [rng.integers(0, 50000, 4096, dtype=np.int32)
                                    for _ in range(rows)], np.int32)
    peak = import_peak(lake, tmp_path, "m", "--megatron", tmp_path / "m")
    check(lake, "m", "tokens", rows, peak, "tokens")


def test_npz_import_reads_arrays_in_pieces(lake, tmp_path):
    rows = INPUT // 4096
    rng = np.random.default_rng(6)
    np.savez(tmp_path / "a.npz", x=rng.integers(0, 256, (rows, 4096), dtype=np.uint8),
             y=np.arange(rows))
    check(lake, "z", "x", rows, import_peak(lake, tmp_path, "z", "--npz", tmp_path / "a.npz"),
          "arrays")


def ffmpeg(*args):
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *map(str, args)], check=True)


@pytest.mark.parametrize("kind", ["video", "audio"])
def test_media_import_holds_a_file_on_disk(lake, tmp_path, kind):
    """A file's decoded frames or samples (every one of them is kept until the file has decoded
    without damage) go to a spool file past 16 MiB: the peak RSS of a file three times as long
    is about the same, where it grew by the decoded difference (230 MB of frames, 77 MB of
    samples) when they were held in memory."""
    peaks, rows = [], []
    for seconds in (1, 3):
        if kind == "video":
            path = tmp_path / f"v{seconds}.mp4"
            ffmpeg("-f", "lavfi", "-i", f"testsrc=size=320x240:rate=25:duration={20 * seconds}",
                   "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "50", path)
            args = ["--video", path, "--clip", "16"]
        else:
            path = tmp_path / f"a{seconds}.wav"
            ffmpeg("-f", "lavfi", "-i",
                   f"sine=frequency=300:sample_rate=48000:duration={100 * seconds}", "-ac", 2,
                   path)
            args = ["--audio", path, "--clip", "2"]
        ds = f"{kind}{seconds}"
        peaks.append(import_peak(lake, tmp_path, ds, *args, "--strict"))
        rows.append(lake.info(ds)["rows"])
    assert rows == ([31, 93] if kind == "video" else [50, 150]), rows
    print(f"{kind}: peak RSS {peaks[0] / MiB:.0f} MiB, three times as long {peaks[1] / MiB:.0f}")
    assert peaks[1] - peaks[0] < 24 * MiB, f"peak RSS {peaks[0] / MiB:.0f} -> {peaks[1] / MiB:.0f} MiB"
