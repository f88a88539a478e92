#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Benchmark: import throughput on 1, 2 and every thread, against PIL.

Data, made in a scratch directory: --images JPEG files of 256x256 (quality 90, a photograph's
worth of detail: smooth gradients plus noise), in 10 class directories; a JSON Lines file of
--rows rows (ints, floats, booleans, text and a list); WebDataset shards of the same JPEG files
with a .cls and a .txt each.

  PIL, 1 process     open + convert("RGB") + resize (shorter side 224, bilinear) + centre crop,
                     the image transform a training pipeline runs, one file after another
  PIL, N processes   the same on a multiprocessing Pool of every CPU
  import --images    --size 224x224 --crop --labels-from-dirs (the same pixels as PIL's), at
                     --threads 1, 2 and every CPU: decode, resize, zstd, hash and write
  disk               the import's bytes written as fresh 4 MiB files and fsync'ed: the rate
                     no thread count can pass (each image rate is printed as a share of it)
  import --jsonl     rows/s at 1, 2 and every CPU, and as a share of the disk's bound
  import --webdataset  rows/s at 1, 2 and every CPU (decoded images, ragged), the same
  --filter none      images and WebDataset once more with their pixels stored as they are
                     (the default delta-filters them): the bytes written and the rate at 1
                     thread and every CPU, against the default's

Prints each rate with its ratio to its baseline (PIL per core, the 1-thread import), run in this
invocation, and the machine's cores as well as its CPUs: where two hardware threads share a core,
scaling past the core count is judged against the cores too. An import's time includes what does not
depend on its size: the process's start, the lake's and dataset's opening, the commit. That part is
measured too (an import of the first 20 images, 20 WebDataset samples or 1% of the JSON Lines
rows, at most 1,000, at the same thread count) and printed beside each rate, with the rate past
them ((N - n) / (T(N) - T(n))): on many cores an import of a few thousand images or a few
hundred thousand rows takes under a second, and the part that does not scale is then a visible
share of it. Each import also prints the CPU its process spent a row (user and system,
every thread; against the 1-thread run's) and how busy its threads were (CPU over threads x
wall): an import short of linear with CPU a row grown is work slowed per core (shared caches,
memory bandwidth, hardware threads); one with threads idle waited (on the one thread every row
goes through, or the disk). The targets (issue: import on every core): images >= 1.5x PIL per core at 1
thread, >= 1.8x from 1 to 2 threads, >= 0.8x linear to every core and >= 1.2x the PIL pool.

    /usr/bin/python3 tests/bench/bench_import.py [--images 2000] [--rows 300000]
        [--kinds images,jsonl,webdataset]

--kinds picks the imports to time (the images are made for every kind: WebDataset's shards hold
them); PIL is measured only with images. The disk's bound is measured for each kind, from the
bytes an import of it writes: WebDataset's decoded pixels (256x256x3, not resized) are more
bytes an image than the image import's, and on a fast many-core machine either can be bound by
the disk rather than by its threads.
"""

import argparse
import glob
import io
import json
import multiprocessing
import os
import resource
import shutil
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tfscli import TFS, run, workdir  # noqa: E402


def make_images(root, n):
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:256, 0:256]
    files = []
    for i in range(n):
        d = root / f"class{i % 10:02d}"
        d.mkdir(parents=True, exist_ok=True)
        a = np.stack([(xx * (i % 7 + 1)) % 256, (yy * (i % 5 + 1)) % 256, (xx + yy + i) % 256],
                     -1)
        a = np.clip(a + rng.integers(-24, 24, a.shape), 0, 255).astype(np.uint8)
        f = d / f"{i:06d}.jpg"
        Image.fromarray(a).save(f, quality=90)
        files.append(f)
    return files


def pil_one(path):
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        if w <= h:
            ow, oh = 224, int(224 * h / w)
        else:
            oh, ow = 224, int(224 * w / h)
        im = im.resize((ow, oh), Image.BILINEAR)
        left, top = round((ow - 224) / 2), round((oh - 224) / 2)
        return len(im.crop((left, top, left + 224, top + 224)).tobytes())


def make_jsonl(path, n):
    rng = np.random.default_rng(1)
    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps({"id": i, "score": float(rng.standard_normal()),
                                "ok": bool(i % 2), "text": f"row {i} of the benchmark's text",
                                "vec": [int(v) for v in rng.integers(0, 999, 8)]}) + "\n")


def make_shards(work, files, nshards=4, stem="s"):
    shards = [work / f"{stem}{i}.tar" for i in range(nshards)]
    tars = [tarfile.open(s, "w") for s in shards]
    for i, f in enumerate(files):
        t = tars[i * nshards // len(files)]
        for name, data in ((f"{i:06d}.jpg", f.read_bytes()), (f"{i:06d}.cls", b"%d" % (i % 10)),
                           (f"{i:06d}.txt", b"caption %d" % i)):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    for t in tars:
        t.close()
    return shards


def disk_write_rate(d, total, file_bytes=4 << 20):
    """MB/s at which fresh files of file_bytes land in directory d and are made durable, as an
    import writes its chunks: total bytes written, each file started on its way to the disk
    as it is closed (sync_file_range), all fsync'ed at the end."""
    d.mkdir(parents=True, exist_ok=True)
    buf = os.urandom(file_bytes)  # incompressible, as decoded pixels mostly are
    n = max(1, total // file_bytes)
    t = time.perf_counter()
    fds = []
    for i in range(n):
        fd = os.open(d / f"f{i}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, buf)
        fds.append(fd)
    for fd in fds:
        os.fsync(fd)
        os.close(fd)
    rate = n * file_bytes / (time.perf_counter() - t) / 1e6
    shutil.rmtree(d)
    return rate


def tree_bytes(d):
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def disk_bound(work, lake, label, n, unit, *args):
    """The disk's part: an import writes its chunks and makes them durable; the same bytes
    written as fresh files and fsync'ed bound the import, whatever its threads. Imports args
    once to learn its bytes, prints the bound and returns it in units (rows, images) a second."""
    run("create", f"{lake}/size-{label}")
    run("import", f"{lake}/size-{label}", *args, "-q")
    written = tree_bytes(work / "lake" / f"size-{label}")
    disk = disk_write_rate(work / "disk", written)
    bound = n / (written / (disk * 1e6))
    print(f"disk: an import of these {label} writes {written / 1e6:,.0f} MB; fresh files "
          f"of 4 MiB written and fsync'ed at {disk:,.0f} MB/s: at most {bound:,.0f} "
          f"{unit}/s whatever the threads")
    return bound


def physical_cores():
    """Cores, as against hardware threads: the (package, core) pairs sysfs lists; None where it
    does not say. Threads that share a core share its decoder and caches, so an import (or a
    PIL pool) scales with cores, not CPUs, past their count."""
    seen = set()
    for d in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        try:
            seen.add((Path(d, "physical_package_id").read_text().strip(),
                      Path(d, "core_id").read_text().strip()))
        except OSError:
            return None
    return len(seen) or None


class Timed:
    """One import's wall seconds and the CPU seconds its process spent (user and system, every
    thread). Their quotient over the thread count says why an import falls short of linear:
    CPU per row that grows with the threads is work that got slower per core (shared caches,
    memory bandwidth, hardware threads); busy well under 1 is threads left waiting (on the
    one thread every row goes through, or the disk)."""

    def __init__(self, wall, cpu):
        self.wall, self.cpu = wall, cpu

    def busy(self, threads):
        return self.cpu / (self.wall * threads)


def timed_import(lake, name, *args):
    """One import into a new dataset of the lake, as a Timed. Outputs stay until the bench ends:
    a run right after the removal of hundreds of files would pay for ext4's search past inodes
    deleted seconds ago (about 7% of an import's time here), which no import into a standing
    lake does. (They no longer fill the page cache: an import drops its chunks' pages once they
    are durable.)"""
    run("create", f"{lake}/{name}")
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    run("import", f"{lake}/{name}", *args, "-q")
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Timed(wall, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)


def cpu_note(tm, n, th, one, unit):
    """'CPU ms a unit, busy share' of a run, and the CPU per unit against the 1-thread run's."""
    per = tm.cpu / n
    grew = f" ({per / (one.cpu / n):.2f}x 1 thread's)" if th > 1 else ""
    us = f"{per * 1e6:,.2f}" if per < 1e-4 else f"{per * 1e6:,.0f}"
    return (f"CPU {us} us/{unit}{grew}, threads busy "
            f"{tm.busy(th):.2f} of the wall time")


def of_cores(speedup, th, phys, shared):
    """The speedup as a share of linear in cores, where threads past the cores share them."""
    if not shared or th <= phys:
        return ""
    return f", {speedup / phys:.2f} of linear in cores"


def images(a, work, files, few, counts, phys, shared, lake, best):
    """PIL on 1 process and on every CPU, the disk's bound, and the image import at each thread
    count against them."""
    cores = os.cpu_count() or 1
    t = min(_timed(lambda: [pil_one(f) for f in files]) for _ in range(a.repeat))
    pil1 = a.images / t
    with multiprocessing.Pool(cores) as pool:
        t = min(_timed(lambda: pool.map(pil_one, files, chunksize=16))
                for _ in range(a.repeat))
    pilN = a.images / t
    print(f"PIL open+convert+resize+crop: 1 process {pil1:,.0f} images/s, "
          f"{cores} processes {pilN:,.0f} ({pilN / pil1:.2f}x)")
    rates = {}
    opts = ("--size", "224x224", "--crop", "--labels-from-dirs")
    disk_ips = disk_bound(work, lake, "images", a.images, "images", "--images", work / "tree",
                          *opts)
    runs = {}
    for th in counts:
        runs[th] = tm = best("--images", work / "tree", *opts, "--threads", th)
        t, t0 = tm.wall, best("--images", work / "few", *opts, "--threads", th).wall
        rates[th] = a.images / t
        print(f"import --images --threads {th:>2}: {rates[th]:8,.0f} images/s  "
              f"{rates[th] / th / pil1:.2f}x PIL per core  "
              f"{rates[th] / rates[1]:.2f}x 1 thread ({rates[th] / rates[1] / th:.2f} of "
              f"linear{of_cores(rates[th] / rates[1], th, phys, shared)})  "
              f"{rates[th] / pilN:.2f}x the PIL pool  {rates[th] / disk_ips:.2f} "
              f"of the disk's bound; of its {t:.2f} s, "
              f"{t0 * 1e3:.0f} ms for {few} images (past them "
              f"{(a.images - few) / max(t - t0, 1e-9):,.0f} images/s); "
              f"{cpu_note(tm, a.images, th, runs[1], 'image')}")
    unfiltered(work, lake, "images", a.images, "image", ["--images", work / "tree", *opts],
               rates, runs, best)


def unfiltered(work, lake, label, n, unit, args, rates, runs, best):
    """The pixels as they are (the default filters them: README, "Ragged, text and images"):
    the bytes written and the rate at 1 thread and at every one, against the default's (rates,
    runs: its own by thread count; disk_bound imported it once as size-LABEL)."""
    run("create", f"{lake}/size-{label}-none")
    run("import", f"{lake}/size-{label}-none", *args, "--filter", "none", "-q")
    plain = tree_bytes(work / "lake" / f"size-{label}-none")
    filtered = tree_bytes(work / "lake" / f"size-{label}")
    print(f"--{label} --filter none: writes {plain / 1e6:,.0f} MB against the default's "
          f"{filtered / 1e6:,.0f} ({plain / filtered:.2f}x)")
    for th in sorted({1, os.cpu_count() or 1}):
        tm = best(*args, "--filter", "none", "--threads", th)
        rate = n / tm.wall
        print(f"import --{label} --filter none --threads {th:>2}: {rate:8,.0f} {unit}s/s; the "
              f"default (delta) is {rates[th] / rate:.2f}x that; "
              f"{cpu_note(tm, n, th, runs[1], unit)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=300000)
    ap.add_argument("--repeat", type=int, default=2, help="best of N runs of each")
    ap.add_argument("--kinds", default="images,jsonl,webdataset",
                    help="which imports to time, comma-separated")
    a = ap.parse_args()
    kinds = a.kinds.split(",")
    unknown = set(kinds) - {"images", "jsonl", "webdataset"}
    if unknown:
        ap.error(f"unknown --kinds {', '.join(sorted(unknown))}")
    cores = os.cpu_count() or 1
    counts = sorted({1, 2, cores})
    phys = physical_cores()
    shared = phys is not None and phys < cores
    print(f"tensorfs {TFS}; {cores} CPUs" +
          (f" on {phys} cores ({cores // phys} hardware threads a core: linear past {phys} "
           "threads is not to be had; 'of linear' is also given against the cores)"
           if shared else ""))
    with workdir("tfs-bench-import-") as work:
        files = make_images(work / "tree", a.images)
        few = 20
        few_rows = max(1, min(1000, a.rows // 100))
        for f in files[:few]:
            d = work / "few" / f.parent.name
            d.mkdir(parents=True, exist_ok=True)
            os.link(f, d / f.name)
        if "jsonl" in kinds:
            make_jsonl(work / "a.jsonl", a.rows)
            make_jsonl(work / "few.jsonl", few_rows)
        shards = make_shards(work, files) if "webdataset" in kinds else []
        few_shards = make_shards(work, files[:few], stem="few") if shards else []
        lake = f"file://{work}/lake"
        k = [0]

        def best(*args):
            k[0] += 1
            return min((timed_import(lake, f"d{k[0]}_{r}", *args) for r in range(a.repeat)),
                       key=lambda tm: tm.wall)

        if "images" in kinds:
            images(a, work, files, few, counts, phys, shared, lake, best)
        for label, args, n, fargs, fn in (
                ("jsonl", ["--jsonl", work / "a.jsonl"], a.rows,
                 ["--jsonl", work / "few.jsonl"], few_rows),
                ("webdataset", ["--webdataset", *shards], a.images,
                 ["--webdataset", *few_shards], few)):
            if label not in kinds:
                continue
            rates, runs = {}, {}
            bound = disk_bound(work, lake, label, n, "rows", *args)
            for th in counts:
                runs[th] = tm = best(*args, "--threads", th)
                t0 = best(*fargs, "--threads", th).wall
                rates[th] = n / tm.wall
                print(f"import --{label} --threads {th:>2}: {rates[th]:10,.0f} rows/s  "
                      f"{rates[th] / rates[1]:.2f}x 1 thread ({rates[th] / rates[1] / th:.2f} "
                      f"of linear{of_cores(rates[th] / rates[1], th, phys, shared)}); "
                      f"{rates[th] / bound:.2f} of the disk's bound; of its {tm.wall:.2f} s, "
                      f"{t0 * 1e3:.0f} ms for {fn} rows (past them "
                      f"{(n - fn) / max(tm.wall - t0, 1e-9):,.0f} rows/s); "
                      f"{cpu_note(tm, n, th, runs[1], 'row')}")
            if label == "webdataset":  # decoded images: filtered unless told
                unfiltered(work, lake, label, n, "row", args, rates, runs, best)


def _timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
