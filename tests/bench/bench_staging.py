#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Batched staging benchmark: host-staged batches/s vs. numpy fancy-indexing vs. a DataLoader.

    TENSORFS_BIN=build/rel/tensorfs /usr/bin/python3 tests/bench/bench_staging.py [--size-mb 256]
        [--batch 256] [--batches 200] [--row 32x32x3] [--device cuda:0] [--cache-gpu SIZE]
        [--workdir DIR] [--json PATH] [--profile FILE]

It builds an image-like uint8 column (32x32x3 per row) and an int64 label column, imports them,
mounts the lake, and then, for the same random batches of row indices (a shuffled epoch), times:

  stage      tensorfs.Stager.stage(rows) (the daemon gathers both columns into a shared-memory
             slot; the loader gets zero-copy numpy arrays), slot released after each batch
  next       tensorfs.Stager over a shuffled view, next(B) (batches made ahead by the daemon)
  next-cold-epoch  the same over a whole epoch from a fresh daemon with the kernel's caches
             dropped (the lake read from disk), before anything else
  fancy      numpy fancy indexing of np.load(mmap_mode='r') of the mounted .npy files
  dataloader torch.utils.data.DataLoader(num_workers=2, batch_size=B) over a map-style dataset
             whose __getitem__ reads one row of each column from the mounted mmaps, with a
             sampler that yields the same row order

With --device cuda:0 (torch with CUDA needed), batches go to the GPU, against the true limit,
the copy engine's bandwidth from pinned memory, measured in the same run:

  pinned     torch: a pinned host tensor of one batch's bytes copied to the device
  next-cuda  tensorfs.Stager(device="cuda:0") over the shuffled view: the daemon's gather kernel
             fills the device slot (with --cache-gpu, the mount's -o cache_gpu; the mount
             has -o cuda_init=N)
  fancy-cuda numpy fancy indexing of the mmaps, pin_memory(), .cuda()
  loader-cuda the DataLoader above with pin_memory=True, each batch .cuda()

Every figure but next-cold-epoch is taken warm (after one untimed pass, with the chunk cache and
page cache holding the data), so it measures the loading path, not the disk. Prints a table;
--json writes one.
The mount is always unmounted before the script exits.
"""

import argparse
import contextlib
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "packaging" / "python"))
import tensorfs  # noqa: E402

BIN = os.environ.get("TENSORFS_BIN") or str(REPO / "tensorfs")
ROW = (32, 32, 3)  # --row


def run(*args):
    subprocess.run([BIN] + [str(a) for a in args], check=True, stdout=subprocess.DEVNULL)


class Mount:
    def __init__(self, lake, mnt, opts="cache_mem=2G"):
        self.mnt = Path(mnt)
        self.mnt.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([BIN, "mount", f"file://{lake}", str(self.mnt), "-f",
                                      "-o", opts], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise RuntimeError("the mount did not come up")
            time.sleep(0.05)

    def stop(self):
        gc.collect()  # drop memmaps that would keep the mount busy
        if subprocess.run(["fusermount3", "-u", str(self.mnt)],
                          stderr=subprocess.DEVNULL).returncode != 0:
            # Still busy (a mapping we could not drop): detach it; the daemon exits when the
            # last file is closed, and the kill below covers the rest.
            subprocess.run(["fusermount3", "-uz", str(self.mnt)], stderr=subprocess.DEVNULL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed(fn, batches):
    fn(batches[: max(1, len(batches) // 4)])  # warm-up (untimed)
    t0 = time.perf_counter()
    fn(batches)
    return len(batches) / (time.perf_counter() - t0)


def profiled(path, fn, batches, what):
    """fn over the batches once more under cProfile; the 25 calls that took the most time of
    their own, with the batch count, written to path."""
    import cProfile
    import io
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    fn(batches)
    pr.disable()
    out = io.StringIO()
    out.write(f"{what}: {len(batches)} batches under cProfile (its own cost inflates Python "
              "calls; C calls' times stand)\n")
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(25)
    Path(path).write_text(out.getvalue())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--row", default="32x32x3", help="a row's shape, uint8")
    ap.add_argument("--device", default="host", help="host, or cuda:N for the GPU cases")
    ap.add_argument("--cache-gpu", help="the mount's -o cache_gpu (with --device cuda:N)")
    ap.add_argument("--profile", metavar="FILE",
                    help="after the timed runs, one more pass of next (next-cuda with --device "
                         "cuda:N) under cProfile: the loader's calls by their own time, to FILE")
    ap.add_argument("--workdir")
    ap.add_argument("--json")
    a = ap.parse_args()
    global ROW
    ROW = tuple(int(x) for x in a.row.split("x"))
    cuda = a.device.startswith("cuda")

    work = Path(a.workdir or tempfile.mkdtemp(prefix="tfs-bench-staging-"))
    n = a.size_mb * (1 << 20) // int(np.prod(ROW))
    rng = np.random.default_rng(0)
    img = rng.integers(0, 64, size=(n,) + ROW, dtype=np.uint8)  # compressible, like pixels
    label = rng.integers(0, 1000, size=n, dtype=np.int64)
    np.save(work / "image.npy", img)
    np.save(work / "label.npy", label)
    del img
    lake = work / "lake"
    if not (lake / "d").exists():
        run("create", f"file://{lake}/d")
        run("import", f"file://{lake}/d", f"image={work / 'image.npy'}",
            f"label={work / 'label.npy'}", "--chunk-size", "4M", "--level", "1")
    order = rng.permutation(n)
    batches = [order[i * a.batch:(i + 1) * a.batch] for i in range(min(a.batches,
                                                                      n // a.batch))]
    opts = f"cache_mem={max(2048, 2 * a.size_mb)}M"
    if cuda:
        # As a GPU job mounts: the device ready at mount, so the chunks the host cases cache
        # first are where the gather kernel reads them.
        opts += f",cuda_init={int(a.device.split(':')[1])}"
    if cuda and a.cache_gpu:
        opts += f",cache_gpu={a.cache_gpu}"
    results = {}
    # A cold epoch: a fresh daemon (empty chunk cache) and the kernel's caches dropped, next()
    # over the shuffled view front to back, as a job's first epoch reads it.
    m = Mount(lake, work / "mnt", opts)
    try:
        with contextlib.suppress(OSError):
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
        cold = tensorfs.Stager(m.mnt, tensorfs.view_path(m.mnt / "d" / "main", seed=1),
                               ["image", "label"], batch_size=a.batch)
        t0 = time.perf_counter()
        nb = sum(1 for _ in cold.batches(a.batch))
        results["next-cold-epoch"] = nb / (time.perf_counter() - t0)
        cold.close()
    finally:
        m.stop()
    m = Mount(lake, work / "mnt", opts)
    try:
        ver = m.mnt / "d" / "main"
        cols = tensorfs.open(ver, ["image", "label"])
        # Warm the whole dataset into the daemon's cache and the page cache once.
        for c in cols.values():
            np.asarray(c).sum()

        stager = tensorfs.Stager(m.mnt, "d/main", ["image", "label"], batch_size=a.batch)

        def stage(bs):
            for b in bs:
                x = stager.stage(b)
                x["image"][0, 0, 0, 0]  # the loader has its batch
                x.release()
        results["stage"] = timed(stage, batches)

        view = tensorfs.view_path(ver, seed=1)
        vstager = tensorfs.Stager(m.mnt, view, ["image", "label"], batch_size=a.batch)

        def nxt(bs):
            vstager.seek(0)
            it = vstager.batches(a.batch)
            for _ in bs:
                x = next(it)
                x["image"][0, 0, 0, 0]
            it.close()
        results["next"] = timed(nxt, batches)
        if a.profile and not cuda:
            profiled(a.profile, nxt, batches, "next")

        def fancy(bs):
            for b in bs:
                idx = np.sort(b)  # numpy reads the mmap faster in order; same rows
                cols["image"][idx]
                cols["label"][idx]
        results["fancy"] = timed(fancy, batches)

        try:
            import torch
            from torch.utils.data import DataLoader, Dataset, Sampler

            class Rows(Dataset):
                def __init__(self, path):
                    self.path, self.c = path, None

                def __len__(self):
                    return n

                def __getitem__(self, i):
                    if self.c is None:  # each worker maps the files itself
                        self.c = tensorfs.open(self.path, ["image", "label"])
                    return torch.from_numpy(np.array(self.c["image"][i])), int(self.c["label"][i])

            class Order(Sampler):
                def __init__(self, idx):
                    self.idx = idx

                def __iter__(self):
                    return iter(self.idx.tolist())

                def __len__(self):
                    return len(self.idx)

            def loader(bs):
                idx = np.concatenate(bs)
                dl = DataLoader(Rows(str(ver)), batch_size=a.batch, sampler=Order(idx),
                                num_workers=2, persistent_workers=False)
                for x, y in dl:
                    pass
            results["dataloader"] = timed(loader, batches)
        except ImportError:
            results["dataloader"] = None
        if cuda:
            import torch
            nbytes = a.batch * (int(np.prod(ROW)) + 8)
            host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
            dev = torch.empty(nbytes, dtype=torch.uint8, device=a.device)

            def pinned(bs):
                for _ in bs:
                    dev.copy_(host, non_blocking=True)
                torch.cuda.synchronize()
            results["pinned"] = timed(pinned, batches)
            gstager = tensorfs.Stager(m.mnt, view, ["image", "label"], device=a.device,
                                      batch_size=a.batch, depth=6)

            def nxt_cuda(bs):
                gstager.seek(0)
                it = gstager.batches(a.batch)
                for _ in bs:
                    x = next(it)
                    x["image"]
                it.close()
                torch.cuda.synchronize()
            results["next-cuda"] = timed(nxt_cuda, batches)
            if a.profile:
                profiled(a.profile, nxt_cuda, batches, "next-cuda")
            gstager.close()

            def fancy_cuda(bs):
                for b in bs:
                    idx = np.sort(b)
                    torch.from_numpy(cols["image"][idx]).pin_memory().to(a.device,
                                                                          non_blocking=True)
                    torch.from_numpy(cols["label"][idx]).pin_memory().to(a.device,
                                                                          non_blocking=True)
                torch.cuda.synchronize()
            results["fancy-cuda"] = timed(fancy_cuda, batches)
            if results.get("dataloader") is not None:
                def loader_cuda(bs):
                    idx = np.concatenate(bs)
                    dl = DataLoader(Rows(str(ver)), batch_size=a.batch, sampler=Order(idx),
                                    num_workers=min(8, os.cpu_count()), pin_memory=True)
                    for x, y in dl:
                        x.to(a.device, non_blocking=True)
                    torch.cuda.synchronize()
                results["loader-cuda"] = timed(loader_cuda, batches)
        stager.close()
        vstager.close()
        cols = None  # its maps go before the unmount
    finally:
        m.stop()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)

    mb = a.batch * (int(np.prod(ROW)) + 8) / 1e6
    print(f"{n} rows, batches of {a.batch} rows ({mb:.2f} MB), {len(batches)} batches, warm")
    print(f"{'case':<12}{'batches/s':>12}{'MB/s':>10}{'x fancy':>10}{'x loader':>10}"
          + (f"{'x pinned':>10}" if cuda else ""))
    for k, v in results.items():
        if v is None:
            print(f"{k:<12}{'n/a':>12}")
            continue
        rf = v / results["fancy"]
        rl = v / results["dataloader"] if results.get("dataloader") else float("nan")
        rp = f"{v / results['pinned']:>10.2f}" if cuda else ""
        print(f"{k:<12}{v:>12.1f}{v * mb:>10.0f}{rf:>10.2f}{rl:>10.2f}{rp}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": n, "batch": a.batch, "batches": len(batches),
                       "batches_per_s": results}, f, indent=2)


if __name__ == "__main__":
    main()
