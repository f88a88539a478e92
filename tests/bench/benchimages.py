#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench.py's image cases: a shuffled view epoch against a DataLoader over JPEG files (8), and
the image import's decode rate and a training read against ImageFolder (9)."""

import gc
import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchkit import BenchError, COLUMN, DATASET, log, med, MiB, REPO_ROOT  # noqa: E402


class JpegRows:
    """Map-style dataset over a folder of JPEG files, decoded the way torchvision's default
    image loader does it (PIL open, convert("RGB")), returned as HWC uint8 tensors."""

    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import torch
        from PIL import Image
        with Image.open(self.files[i]) as im:
            return torch.from_numpy(np.array(im.convert("RGB")))


def jpeg_folder(ctx, n):
    """The column's first n rows as JPEG files (quality 90), made once per work directory."""
    from PIL import Image
    d = ctx.work / f"jpeg-{n}"
    done = d / ".complete"
    files = [d / f"{i:07d}.jpg" for i in range(n)]
    if done.exists():
        return files
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    src = np.load(ctx.npy, mmap_mode="r")
    for i, f in enumerate(files):
        Image.fromarray(np.asarray(src[i])).save(f, quality=90)
    done.touch()
    return files


def case8(ctx, res):
    """A shuffled view epoch vs a PyTorch DataLoader over a folder of the same images as JPEG
    files (the loader most training code starts from), both cold, batches of --batch-size."""
    a = ctx.args
    import torch
    from torch.utils.data import DataLoader
    sys.path.insert(0, str(REPO_ROOT / "packaging" / "python"))
    import tensorfs.torch as tfs_torch
    if ctx.data["row_shape"][-1] != 3 or len(ctx.data["row_shape"]) != 3:
        raise BenchError("case 8 needs image rows (--row-shape H,W,3)")
    n = min(a.dl_rows, ctx.data["rows"])
    t0 = time.perf_counter()
    files = jpeg_folder(ctx, n)
    jpeg_bytes = sum(f.stat().st_size for f in files)
    res.update({"rows": n, "jpeg_files_bytes": jpeg_bytes,
                "jpeg_build_s": time.perf_counter() - t0, "batch_size": a.batch_size})
    view = f"seed={a.seed},epoch=0"
    rows = ctx.data["rows"]
    times = {"view": [], "view_dl2": [], "jpeg_dl0": [], "jpeg_dl2": []}

    def drain(dl, want):
        t = time.perf_counter()
        got = sum(b.shape[0] for b in dl)
        if got != want:
            raise BenchError(f"DataLoader yielded {got} rows, expected {want}")
        return time.perf_counter() - t

    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vdir = m.path / DATASET / "main" / "views" / view
            os.stat(vdir / f"{COLUMN}.npy")
            ctx.cache.drop()
            t = time.perf_counter()
            mm = np.load(vdir / f"{COLUMN}.npy", mmap_mode="r")
            for i in range(0, mm.shape[0], a.batch_size):
                torch.from_numpy(np.array(mm[i:i + a.batch_size]))
            times["view"].append(time.perf_counter() - t)
            del mm
        with ctx.mount() as m:
            vdir = m.path / DATASET / "main" / "views" / view
            os.stat(vdir / f"{COLUMN}.npy")
            ctx.cache.drop()
            ds = tfs_torch.Dataset(vdir, columns=[COLUMN])
            times["view_dl2"].append(drain(DataLoader(ds, batch_size=a.batch_size,
                                                      num_workers=2), rows))
            del ds
        for w in (0, 2):
            ctx.cache.drop()
            g = torch.Generator()
            g.manual_seed(a.seed)
            dl = DataLoader(JpegRows(files), batch_size=a.batch_size, shuffle=True, generator=g,
                            num_workers=w)
            times[f"jpeg_dl{w}"].append(drain(dl, n))
            del dl
            gc.collect()
    v = {k: (rows if k.startswith("view") else n) / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "samples_per_s": v[k]} for k, ts in times.items()})
    log(f"  shuffled view: {v['view']:,.0f} samples/s read in batches, {v['view_dl2']:,.0f} "
        f"through a DataLoader (2 workers); JPEG folder DataLoader: {v['jpeg_dl0']:,.0f} "
        f"(0 workers), {v['jpeg_dl2']:,.0f} (2 workers)")
    best = max(v["jpeg_dl0"], v["jpeg_dl2"])
    note = (f"view: all {rows} rows; JPEG: the first {n} rows as {n} files "
            f"({jpeg_bytes / MiB:.0f} MiB), shuffle; samples/s")
    ctx.add(8, "cold shuffled view epoch, batches of rows", v["view"], "samples/s",
            "DataLoader over JPEG files, best of 0/2 workers", best, target=("ratio", 10.0),
            note=note)
    ctx.add(8, "cold shuffled view epoch, DataLoader 2 workers", v["view_dl2"], "samples/s",
            "DataLoader over JPEG files, 2 workers", v["jpeg_dl2"], note=note)

SAMPLE_PHOTO = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


def image_tree(ctx, n, classes=10):
    """An ImageFolder tree of n JPEG files (quality 90) of varied sizes, cut and scaled from
    matplotlib's sample photograph (a real photo) with flips and colour shifts, and every fifth
    one a generated gradient; made once per work directory."""
    from PIL import Image
    d = ctx.work / f"images-{n}"
    if (d / ".complete").exists():
        return d
    shutil.rmtree(d, ignore_errors=True)
    rng = np.random.default_rng(ctx.args.seed)
    photo = np.asarray(Image.open(SAMPLE_PHOTO).convert("RGB")) if SAMPLE_PHOTO.exists() \
        else rng.integers(0, 256, size=(600, 512, 3), dtype=np.uint8)
    for c in range(classes):
        (d / f"class{c:02d}").mkdir(parents=True)
    for i in range(n):
        if i % 5 == 4:
            h, w = int(rng.integers(160, 400)), int(rng.integers(160, 400))
            y, x = np.mgrid[0:h, 0:w]
            a = np.stack([x * 255 // w, y * 255 // h, (x * y) % 256], -1).astype(np.uint8)
            im = Image.fromarray(a)
        else:
            ph, pw = photo.shape[:2]
            ch, cw = int(rng.integers(ph // 3, ph)), int(rng.integers(pw // 3, pw))
            y0, x0 = int(rng.integers(0, ph - ch + 1)), int(rng.integers(0, pw - cw + 1))
            a = photo[y0:y0 + ch, x0:x0 + cw]
            if rng.random() < 0.5:
                a = a[:, ::-1]
            a = np.clip(a.astype(int) + rng.integers(-30, 30, 3), 0, 255).astype(np.uint8)
            im = Image.fromarray(a)
            s = float(rng.uniform(0.5, 1.0))
            im = im.resize((max(32, int(cw * s)), max(32, int(ch * s))), Image.BILINEAR)
        im.save(d / f"class{i % classes:02d}" / f"{i:07d}.jpg", quality=90)
    (d / ".complete").touch()
    return d


def case9(ctx, res):
    """Images in: decode rate of `tensorfs import --images` against PIL's decode of the same
    files, and a training read of the imported tree against torchvision's ImageFolder."""
    a = ctx.args
    import torch
    import torchvision
    import torchvision.transforms as T
    from PIL import Image
    from torch.utils.data import DataLoader

    n = a.image_count
    tree = image_tree(ctx, n)
    files = sorted(tree.glob("*/*.jpg"))
    src_bytes = sum(f.stat().st_size for f in files)
    ctx.cache.evict_paths.append(tree)
    res.update({"images": n, "jpeg_bytes": src_bytes, "batch_size": a.batch_size})

    # decode: PIL and tensorfs's decoder (core/image.c, build/rel/tests/decode_rate), each on
    # one thread over the same files held in memory; then whole imports (decode, zstd, write)
    data = [f.read_bytes() for f in files]
    t = time.perf_counter()
    for d in data:
        with Image.open(io.BytesIO(d)) as im:
            np.asarray(im.convert("RGB"))
    pil = n / (time.perf_counter() - t)
    del data
    rate_bin = os.environ.get("TENSORFS_DECODE_RATE") or str(
        Path(ctx.bin).resolve().parent / "tests" / "decode_rate")
    if not os.access(rate_bin, os.X_OK):
        rate_bin = str(REPO_ROOT / "build" / "rel" / "tests" / "decode_rate")
    out = subprocess.run([rate_bin, *map(str, files)], check=True, capture_output=True,
                         text=True).stdout
    ours = float(out.split()[0])

    def import_rate(ds, *opts):
        subprocess.run([ctx.bin, "create", f"{ctx.lake_url}/{ds}"], check=True,
                       capture_output=True)
        t = time.perf_counter()
        subprocess.run([ctx.bin, "import", f"{ctx.lake_url}/{ds}", "--images", str(tree),
                        "-q", *opts], check=True, capture_output=True)
        return n / (time.perf_counter() - t)

    one = import_rate("img1", "--threads", "1")
    cores = os.cpu_count() or 1
    every = import_rate("imgall")
    res.update({"pil_images_per_s": pil, "decode_images_per_s": ours,
                "import_1_thread_images_per_s": one, "import_all_cores_images_per_s": every,
                "cores": cores})
    log(f"  decode, one thread: tensorfs {ours:,.0f} images/s, PIL {pil:,.0f}; whole import "
        f"(decode, zstd, write) {one:,.0f} on 1 thread, {every:,.0f} on {cores}")
    ctx.add(9, "image decode, one thread", ours, "images/s", "PIL decode, one thread", pil,
            target=("ratio", 1.5), note=f"{n} JPEG files, {src_bytes / MiB:.0f} MiB, in memory")
    ctx.add(9, "import --images, 1 thread", one, "images/s", "PIL decode, one thread", pil,
            note="whole import: decode, zstd level 3, write")
    ctx.add(9, f"import --images, {cores} threads", every, "images/s",
            "PIL decode, one thread", pil, note="whole import")

    # training read: ImageFolder + Resize(256) + CenterCrop(224) + ToTensor, against the tree
    # imported at 224x224 (crop) read through a shuffled view into float tensors
    subprocess.run([ctx.bin, "create", f"{ctx.lake_url}/img224"], check=True,
                   capture_output=True)
    subprocess.run([ctx.bin, "import", f"{ctx.lake_url}/img224", "--images", str(tree),
                    "--size", "224x224", "--crop", "--labels-from-dirs", "-q"], check=True,
                   capture_output=True)
    # uint8 CHW batches on both sides (PILToTensor; the float conversion is the model's, on
    # the device, and costs the same on either side)
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.PILToTensor()])
    times = {"view": [], "folder0": [], "folder2": []}

    def drain(dl):
        t = time.perf_counter()
        got = 0
        for x, y in dl:
            got += x.shape[0]
        if got != n:
            raise BenchError(f"{got} rows, expected {n}")
        return time.perf_counter() - t

    for _ in range(a.cold_reps):
        with ctx.mount() as m:
            vdir = m.path / "img224" / "main" / "views" / f"seed={a.seed},epoch=0"
            os.stat(vdir / "image.npy")
            ctx.cache.drop()
            t = time.perf_counter()
            img = np.load(vdir / "image.npy", mmap_mode="r")
            lab = np.load(vdir / "label.npy", mmap_mode="r")
            for i in range(0, n, a.batch_size):
                x = torch.from_numpy(np.array(img[i:i + a.batch_size]))
                x = x.permute(0, 3, 1, 2)  # CHW, as PILToTensor gives
                torch.from_numpy(np.array(lab[i:i + a.batch_size]))
            times["view"].append(time.perf_counter() - t)
            del img, lab
        for w in (0, 2):
            ctx.cache.drop()
            g = torch.Generator()
            g.manual_seed(a.seed)
            ds = torchvision.datasets.ImageFolder(str(tree), transform=tf)
            times[f"folder{w}"].append(drain(DataLoader(ds, batch_size=a.batch_size,
                                                        shuffle=True, generator=g,
                                                        num_workers=w)))
            gc.collect()
    v = {k: n / med(ts) for k, ts in times.items()}
    res.update({k: {"seconds": ts, "samples_per_s": v[k]} for k, ts in times.items()})
    log(f"  training read: view {v['view']:,.0f} samples/s; ImageFolder "
        f"{v['folder0']:,.0f} (0 workers), {v['folder2']:,.0f} (2 workers)")
    ctx.add(9, "cold view epoch of imported 224x224 images", v["view"], "samples/s",
            "ImageFolder+Resize+CenterCrop, best of 0/2 workers",
            max(v["folder0"], v["folder2"]), target=("ratio", 10.0),
            note="uint8 CHW tensors both sides, shuffled, batch " + str(a.batch_size))
