#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: video decoded once at import against decoding every step, in one invocation.

Data: --videos H.264 files made with the ffmpeg command (testsrc2, 320x240, 30 fps, --seconds
each) in a scratch directory.

  import      `tensorfs import --video DIR --clip 16 --size 112x112` at --threads 1 and every
              CPU, clips/s, against PyAV (python3-av) decoding the same files into the same
              clips (frames to RGB 112x112, bilinear) in one process, and against
              torchvision.io.read_video (python3-torchvision; frames resized by
              torch.nn.functional.interpolate, bilinear): clips/s per core
  read        an epoch of clips through a shuffled view (views/seed=1/video.npy by mmap), against
              what a loader without tensorfs does each step: open the file, seek, decode 16
              frames with PyAV; clips/s, both

    /usr/bin/python3 tests/bench/bench_media.py [--videos 24] [--seconds 4]
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tfscli import run, unmount, workdir  # noqa: E402

CLIP, SIZE = 16, 112


def pyav_clips(path):
    import av

    frames = []
    with av.open(str(path)) as c:
        for f in c.decode(video=0):
            frames.append(f.to_ndarray(width=SIZE, height=SIZE, format="rgb24",
                                       interpolation="BILINEAR"))
    return [np.stack(frames[s:s + CLIP]) for s in range(0, len(frames) - CLIP + 1, CLIP)]


def torchvision_clips(path):
    import torch
    from torchvision.io import read_video

    torch.set_num_threads(1)  # one core, as the others
    frames, _, _ = read_video(str(path), pts_unit="sec", output_format="TCHW")
    small = torch.nn.functional.interpolate(frames.float(), size=(SIZE, SIZE), mode="bilinear",
                                            align_corners=False)
    small = small.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
    return [small[s:s + CLIP] for s in range(0, len(small) - CLIP + 1, CLIP)]


def pyav_one_clip(path, start_s):
    import av

    out = []
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        c.seek(int(start_s / s.time_base), stream=s, backward=True)
        for f in c.decode(s):
            if f.time is not None and f.time + 1e-6 < start_s:
                continue
            out.append(f.to_ndarray(width=SIZE, height=SIZE, format="rgb24",
                                    interpolation="BILINEAR"))
            if len(out) == CLIP:
                break
    return np.stack(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--videos", type=int, default=24)
    ap.add_argument("--seconds", type=float, default=4)
    a = ap.parse_args()
    cores = os.cpu_count() or 1
    with workdir("tfs-bench-media-") as work:
        src = work / "videos"
        src.mkdir()
        for i in range(a.videos):
            subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                            f"testsrc2=size=320x240:rate=30:duration={a.seconds}", "-vf",
                            f"hue=h={i * 15}", "-c:v", "libx264", "-pix_fmt", "yuv420p",
                            str(src / f"v{i:03d}.mp4")], check=True)
        lake = f"file://{work}/lake"
        rates = {}
        for th in sorted({1, cores}):
            run("create", f"{lake}/v{th}")
            t = time.perf_counter()
            run("import", f"{lake}/v{th}", "--video", src, "--clip", CLIP, "--size",
                f"{SIZE}x{SIZE}", "--threads", th, "-q")
            rates[th] = time.perf_counter() - t
        t = time.perf_counter()
        n = sum(len(pyav_clips(f)) for f in sorted(src.iterdir()))
        t_av = time.perf_counter() - t
        try:
            t = time.perf_counter()
            n_tv = sum(len(torchvision_clips(f)) for f in sorted(src.iterdir()))
            t_tv = time.perf_counter() - t
            assert n_tv == n, (n_tv, n)
        except ImportError:
            t_tv = None
        print(f"{a.videos} videos of {a.seconds:g} s, {n} clips of {CLIP} frames at {SIZE}x{SIZE}")
        print(f"import: PyAV decode, 1 process {n / t_av:8.1f} clips/s")
        if t_tv:
            print(f"        torchvision.io, 1 process {n / t_tv:6.1f} clips/s")
        else:
            print("        torchvision.io: not installed (python3-torchvision)")
        for th, t in rates.items():
            print(f"        tensorfs --threads {th:2d}    {n / t:8.1f} clips/s  "
                  f"{n / t / th / (n / t_av):.2f}x PyAV per core" +
                  (f", {n / t / th / (n / t_tv):.2f}x torchvision.io per core" if t_tv else ""))
        run("mount", lake, work / "mnt")
        try:
            view = work / "mnt" / f"v{cores}" / "main" / "views" / "seed=1"
            t = time.perf_counter()
            mm = np.load(view / "video.npy", mmap_mode="r")
            for i in range(0, len(mm), 8):
                np.array(mm[i:i + 8])
            t_view = time.perf_counter() - t
            paths = (work / "mnt" / f"v{cores}" / "main" / "path" / "lines.txt").read_text() \
                .splitlines()
            starts = np.load(work / "mnt" / f"v{cores}" / "main" / "start_s.npy")
            order = np.random.default_rng(1).permutation(len(paths))
            t = time.perf_counter()
            for i in order:
                pyav_one_clip(src / paths[i], float(starts[i]))
            t_dec = time.perf_counter() - t
            print(f"read an epoch: shuffled view {len(mm) / t_view:9.1f} clips/s; decoding each "
                  f"step (PyAV seek + 16 frames) {len(order) / t_dec:7.1f} clips/s: "
                  f"{t_dec / t_view:.1f}x")
            del mm  # the mapping holds the file open: the mount could not go
        finally:
            unmount(work / "mnt")


if __name__ == "__main__":
    main()
