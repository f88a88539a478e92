# SPDX-License-Identifier: MIT
"""`tensorfs import --images`: JPEG and PNG decoded once, equal to PIL's decode (and resize) of
the same files, labels equal to torchvision's ImageFolder, bad files skipped and named."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import REPO_ROOT, run_proc

import tensorfs  # noqa: E402

torchvision = pytest.importorskip("torchvision")

SAMPLE = Path("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg")


def synthetic(rng, h, w):
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 3 % 256], -1)
    return np.clip(a + rng.integers(-20, 20, a.shape), 0, 255).astype(np.uint8)


def make_tree(root):
    """An ImageFolder tree: JPEG and PNG of every mode PIL writes, a nested directory, an
    empty-named-like class, and three bad files."""
    rng = np.random.default_rng(11)
    photo = np.asarray(Image.open(SAMPLE).convert("RGB")) if SAMPLE.exists() else \
        synthetic(rng, 300, 200)
    for d in ("cat", "dog/sub", "emu", "zebra"):
        (root / d).mkdir(parents=True)
    # real photograph cut and scaled into varied sizes
    for i, (y, x, h, w, s) in enumerate(((0, 0, 120, 90, 1.0), (40, 30, 200, 150, 0.37),
                                         (100, 50, 90, 160, 0.6))):
        crop = Image.fromarray(photo[y:y + h, x:x + w])
        crop = crop.resize((max(1, int(crop.width * s)), max(1, int(crop.height * s))))
        crop.save(root / "cat" / f"photo{i}.jpg", quality=88)
    Image.fromarray(synthetic(rng, 33, 21)).save(root / "cat" / "a.png")
    Image.fromarray(synthetic(rng, 30, 30)[:, :, 0]).save(root / "cat" / "grey.png")
    Image.fromarray(synthetic(rng, 25, 35)).convert("RGBA").save(root / "dog" / "rgba.png")
    Image.fromarray(synthetic(rng, 25, 35)).convert("P").save(root / "dog" / "pal.png")
    Image.fromarray(synthetic(rng, 9, 7)).convert("LA").save(root / "dog" / "la.png")
    # 16-bit grey: tensorfs keeps the high byte (PIL's convert("RGB") clips instead)
    wide = (synthetic(rng, 12, 10)[:, :, 0].astype(np.uint16) * 257 + 3)
    Image.fromarray(wide).save(root / "dog" / "sub" / "wide16.png")
    np.save(root.parent / "wide16.npy", wide)
    Image.fromarray(synthetic(rng, 50, 20)).save(root / "dog" / "sub" / "c.jpg", quality=75)
    Image.fromarray(synthetic(rng, 20, 20)[:, :, 0]).save(root / "emu" / "g.JPG")
    Image.fromarray(synthetic(rng, 17, 23)).save(root / "zebra" / "z.jpeg")
    (root / "emu" / "notimage.jpg").write_bytes(b"hello, not a jpeg")
    good = (root / "cat" / "photo0.jpg").read_bytes()
    (root / "cat" / "trunc.jpg").write_bytes(good[:len(good) // 2])
    png = (root / "cat" / "a.png").read_bytes()
    (root / "dog" / "trunc.png").write_bytes(png[:len(png) // 2])
    (root / "emu" / "notes.txt").write_text("not an image at all, and not taken")
    # A decompression bomb: 60 bytes claiming 20000 x 20000 pixels (1.2 GB decoded).
    (root / "zebra" / "bomb.png").write_bytes(
        (REPO_ROOT / "tests/fuzz/corpus/image/regress-bomb.png").read_bytes())
    return {"emu/notimage.jpg", "cat/trunc.jpg", "dog/trunc.png", "zebra/bomb.png"}


def folder(root, bad):
    return torchvision.datasets.ImageFolder(
        str(root), is_valid_file=lambda p: p.lower().endswith((".jpg", ".jpeg", ".png")) and
        os.path.relpath(p, root) not in bad)


def test_images_equal_pil_and_labels_equal_imagefolder(lake, mount, tmp_path):
    root = tmp_path / "tree"
    bad = make_tree(root)
    lake.create("d")
    p = lake.import_("d", {}, "--images", root, "--labels-from-dirs")
    # the summary names what was skipped and why
    assert "imported 12 rows of 4 classes, skipped 4" in p.stdout, p.stdout
    assert "zebra/bomb.png: 20000x20000 pixels, more than the limit" in p.stdout, p.stdout
    assert "cat/trunc.jpg: Premature end of JPEG file" in p.stdout, p.stdout
    assert "emu/notimage.jpg: not a JPEG or PNG image" in p.stdout, p.stdout
    assert "dog/trunc.png:" in p.stdout, p.stdout
    m = mount(lake)
    cols = tensorfs.open(m / "d" / "main")
    ref = folder(root, bad)
    assert cols.rows == len(ref.samples)
    assert [os.path.relpath(s, root) for s, _ in ref.samples] == list(cols["path"])
    assert cols["label"].tolist() == [t for _, t in ref.samples]
    for i, (path, _) in enumerate(ref.samples):
        want = np.asarray(Image.open(path).convert("RGB"))
        if path.endswith("wide16.png"):
            want = np.repeat((np.load(root.parent / "wide16.npy") >> 8).astype(np.uint8)
                             [:, :, None], 3, axis=2)
        got = cols["image"][i]
        assert got.shape == want.shape, path
        # PNG exactly; JPEG too here (the same libjpeg-turbo decodes for PIL), within 1 allowed
        tol = 0 if path.endswith(".png") else 1
        assert int(np.abs(got.astype(int) - want).max()) <= tol, path
    schema = (m / "d" / "main" / "schema.json").read_text()
    assert '"name": "image", "kind": "ragged"' in schema
    # the class names, in label order, on the label column
    label = [c for c in json.loads(schema)["columns"] if c["name"] == "label"][0]
    assert label["classes"] == ref.classes
    assert cols.classes == {"label": ref.classes}


@pytest.mark.parametrize("fit", ["resize", "crop", "pad"])
def test_images_sized(lake, mount, tmp_path, fit):
    root = tmp_path / "tree"
    bad = make_tree(root)
    lake.create("d")
    lake.import_("d", {}, "--images", root, "--size", "24x32", f"--{fit}")
    m = mount(lake)
    img = np.load(m / "d" / "main" / "image.npy", mmap_mode="r")
    paths = list(tensorfs.open(m / "d" / "main")["path"])
    assert img.shape == (len(paths), 24, 32, 3)
    worst = []
    for i, rel in enumerate(paths):
        assert rel not in bad
        if rel.endswith("wide16.png"):
            continue  # PIL clips 16-bit grey where tensorfs keeps the high byte
        im = Image.open(root / rel).convert("RGB")
        if fit == "resize":
            want = np.asarray(im.resize((32, 24), Image.BILINEAR))
        elif fit == "crop":
            # torchvision: shorter side resized to cover, then the centre
            w, h = im.size
            if 32 * h >= 24 * w:
                ow, oh = 32, int(32 * h / w)
            else:
                oh, ow = 24, int(24 * w / h)
            want = np.asarray(torchvision.transforms.functional.center_crop(
                im.resize((ow, oh), Image.BILINEAR), (24, 32)))
        else:
            a = np.asarray(im)[:24, :32]
            want = np.zeros((24, 32, 3), np.uint8)
            want[:a.shape[0], :a.shape[1]] = a
        worst.append(int(np.abs(img[i].astype(int) - want).max()))
    # PIL's fixed-point bilinear, reproduced: equal to the byte
    assert max(worst) == 0, worst


def test_images_strict_and_nothing_half_written(lake, tmp_path):
    root = tmp_path / "tree"
    make_tree(root)
    lake.create("d")
    before = lake.snapshot("d")
    p = lake.import_("d", {}, "--images", root, "--strict", check=False)
    assert p.returncode != 0
    assert "cat/trunc.jpg: Premature end of JPEG file" in p.stderr, p.stderr
    assert lake.snapshot("d") == before
    # a directory with no images at all
    empty = tmp_path / "empty"
    empty.mkdir()
    p = lake.import_("d", {}, "--images", empty, check=False)
    assert p.returncode != 0 and "no .jpg, .jpeg or .png files" in p.stderr
    assert lake.snapshot("d") == before


def test_images_appended_and_other_columns_refused(lake, tmp_path):
    root = tmp_path / "tree"
    make_tree(root)
    lake.create("d")
    lake.import_("d", {}, "--images", root, "--labels-from-dirs")
    lake.import_("d", {}, "--images", root, "--labels-from-dirs")
    info = lake.info("d")
    assert info["rows"] == 24
    classes = [c for c in info["columns"] if c["name"] == "label"][0]["classes"]
    assert classes == sorted(p.name for p in root.iterdir() if p.is_dir())
    # a tree whose classes come after the column's adds them; one whose label 0 means another
    # class is refused, and nothing changes
    more = tmp_path / "more"
    for name in (*classes, "zz new"):
        (more / name).mkdir(parents=True)
    shutil.copy(next((root / classes[0]).glob("*.png")), more / "zz new" / "x.png")
    lake.import_("d", {}, "--images", more, "--labels-from-dirs")
    info = lake.info("d")
    assert [c for c in info["columns"] if c["name"] == "label"][0]["classes"] == \
        [*classes, "zz new"]
    assert info["rows"] == 25
    other = tmp_path / "other"
    (other / "aardvark").mkdir(parents=True)
    shutil.copy(next((root / classes[0]).glob("*.png")), other / "aardvark" / "x.png")
    before = lake.snapshot("d")
    p = lake.import_("d", {}, "--images", other, "--labels-from-dirs", check=False)
    assert p.returncode != 0 and f"label 0 is class '{classes[0]}' there, 'aardvark' here" \
        in p.stderr, p.stderr
    assert lake.snapshot("d") == before
    # ragged rows cannot go into the fixed image column of another dataset, and a dataset with
    # other columns would lose its equal row counts
    lake.create("e")
    lake.import_("e", {"x": np.arange(3)})
    before = lake.snapshot("e")
    p = lake.import_("e", {}, "--images", root, check=False)
    assert p.returncode != 0 and "column x would have 3 rows" in p.stderr, p.stderr
    assert lake.snapshot("e") == before


def test_images_draft_equals_pil_draft(lake, mount, tmp_path):
    """--draft decodes a large JPEG in the DCT domain as PIL's Image.draft("RGB", (w, h)):
    the rows equal PIL's draft + resize (+ crop) to the byte; against the exact path they differ
    by a few levels (the figures in the README come from here)."""
    rng = np.random.default_rng(21)
    root = tmp_path / "big"
    (root / "a").mkdir(parents=True)
    photo = np.asarray(Image.open(SAMPLE).convert("RGB")) if SAMPLE.exists() else \
        synthetic(rng, 600, 512)
    sizes = ((1000, 760), (641, 1300), (500, 450), (230, 260), (3000, 1800))
    for i, (w, h) in enumerate(sizes):
        Image.fromarray(photo).resize((w, h), Image.BICUBIC).save(root / "a" / f"{i}.jpg",
                                                                 quality=92)
    for name, opts in (("exact", ()), ("draft", ("--draft",))):
        lake.create(name)
        lake.import_(name, {}, "--images", root, "--size", "224x224", "--crop", *opts)
    m = mount(lake)
    exact = np.load(m / "exact" / "main" / "image.npy")
    draft = np.load(m / "draft" / "main" / "image.npy")
    paths = list(tensorfs.open(m / "draft" / "main")["path"])
    diffs = []
    for i, rel in enumerate(paths):
        im = Image.open(root / rel)
        im.draft("RGB", (224, 224))
        im = im.convert("RGB")
        w, h = im.size
        ow, oh = (224, int(224 * h / w)) if h >= w else (int(224 * w / h), 224)
        want = np.asarray(torchvision.transforms.functional.center_crop(
            im.resize((ow, oh), Image.BILINEAR), (224, 224)))
        assert np.array_equal(draft[i], want), rel
        d = np.abs(draft[i].astype(int) - exact[i].astype(int))
        diffs.append((rel, int(d.max()), float(d.mean())))
    print("\n--draft against the exact decode (max, mean abs difference):", diffs)
    # An image under twice 224 on a side is decoded whole: no difference.
    assert [mx for rel, mx, _ in diffs if rel == "a/3.jpg"] == [0], diffs
    assert any(mx > 0 for _, mx, _ in diffs), diffs
    # a --draft that cannot apply is refused
    p = lake.import_("exact", {}, "--images", root, "--draft", check=False)
    assert p.returncode == 2 and "--draft" in p.stderr


def test_images_same_whatever_the_threads(lake, tmp_path):
    """The import's output does not depend on --threads: the same chunk objects, byte for
    byte, from 1, 2 and 5 workers."""
    root = tmp_path / "tree"
    make_tree(root)
    chunks = {}
    for th in (1, 2, 5):
        name = f"t{th}"
        lake.create(name)
        lake.import_(name, {}, "--images", root, "--size", "24x32", "--crop",
                     "--labels-from-dirs", "--chunk-size", "4k", "--threads", str(th))
        chunks[th] = lake.chunk_ids(name)
    assert len(chunks[1]) > 3
    assert chunks[1] == chunks[2] == chunks[5]


def test_images_delta_filtered_unless_told(lake, mount, tmp_path):
    """--images stores its pixels delta-filtered (chunks of object version 3, FORMAT.md),
    smaller than unfiltered and read back the same; --filter none writes them as before."""
    from conftest import parse_object_header
    root = tmp_path / "tree"
    make_tree(root)
    versions, sizes, levels = {}, {}, {}
    for name, opts in (("f", ()), ("n", ("--filter", "none")), ("l", ("--level", "5"))):
        lake.create(name)
        lake.import_(name, {}, "--images", root, "--size", "96x128", "--crop",
                     "--frame-size", "8k", *opts)
        heads = [parse_object_header(p.read_bytes()) for _, p in lake.object_files(name)]
        chunks = [h for h in heads if h["type"] == 1]
        versions[name] = {h["version"] for h in chunks}
        sizes[name] = sum(48 + h["payload_size"] for h in chunks)
        levels[name] = {c["name"]: c.get("level") for c in lake.info(name)["columns"]}
    assert 3 in versions["f"], versions  # the image chunk; path and label ones stay as before
    assert 3 not in versions["n"], versions
    assert 3 in versions["l"], versions
    assert sizes["f"] < sizes["n"], sizes
    # Filtered pixels are written at zstd level 1 unless told (as fast to write as level 3's
    # unfiltered pixels, about as small as level 3's filtered ones), the columns beside them
    # (paths) at the import's level; --level still rules them all.
    assert levels == {"f": {"image": 1, "path": 3}, "n": {"image": 3, "path": 3},
                      "l": {"image": 5, "path": 5}}, levels
    m = mount(lake)
    a = np.load(m / "f" / "main" / "image.npy")
    b = np.load(m / "n" / "main" / "image.npy")
    assert a.shape[1:] == (96, 128, 3) and np.array_equal(a, b)


def test_classes_through_a_write_session(lake, tmp_path):
    # parts written apart keep their class names; a part whose labels mean other classes
    # fails the commit, and nothing changes
    a, b = tmp_path / "a", tmp_path / "b"
    rng = np.random.default_rng(3)
    for root, names in ((a, ("cat", "dog")), (b, ("cat", "dog", "emu"))):
        for n in names:
            (root / n).mkdir(parents=True)
            Image.fromarray(synthetic(rng, 8, 8)).save(root / n / "x.png")
    lake.create("d")
    lake.import_("d", {}, "--images", b, "--labels-from-dirs", "--session", "s", "--part", "1")
    lake.import_("d", {}, "--images", a, "--labels-from-dirs", "--session", "s", "--part", "0")
    run_proc(["commit", lake.ds_url("d"), "--session", "s", "--parts", "2"], check=True)
    info = lake.info("d")
    assert info["rows"] == 5
    assert [c for c in info["columns"] if c["name"] == "label"][0]["classes"] == \
        ["cat", "dog", "emu"]
    c = tmp_path / "c"
    (c / "bee").mkdir(parents=True)
    Image.fromarray(synthetic(rng, 8, 8)).save(c / "bee" / "x.png")
    lake.import_("d", {}, "--images", c, "--labels-from-dirs", "--session", "t", "--part", "0")
    before = lake.snapshot("d")
    p = run_proc(["commit", lake.ds_url("d"), "--session", "t", "--parts", "1"])
    assert p.returncode != 0 and "label 0 is class 'cat' there, 'bee' here" in p.stderr, p.stderr
    assert lake.snapshot("d") == before


def test_images_shuffled_by_seed(lake, mount, tmp_path):
    """--shuffle SEED: rows in a random order of the files, the same for the same seed whatever
    the threads, another for another seed; each row the image, path and label the sorted import
    gives that file, and an ImageFolder tree's classes mixed from the first rows on. A bad seed,
    or --shuffle without --images, is refused and changes nothing."""
    root = tmp_path / "tree"
    rng = np.random.default_rng(4)
    for c in range(6):
        (root / f"class{c}").mkdir(parents=True)
        for i in range(8):
            Image.fromarray(synthetic(rng, 20 + i, 24)).save(root / f"class{c}" / f"{i}.jpg")
    opts = ("--images", root, "--size", "16x16", "--labels-from-dirs", "--chunk-size", "4k")
    for name, more in (("s", ()), ("h1", ("--threads", "1")), ("h3", ("--threads", "3")),
                       ("h9", ("--threads", "2"))):
        lake.create(name)
        lake.import_(name, {}, *opts, *more, *(("--shuffle", "9" if name == "h9" else "7")
                                               if name != "s" else ()))
    assert lake.chunk_ids("h1") == lake.chunk_ids("h3")
    m = mount(lake)
    s, h, h9 = (tensorfs.open(m.path / d / "main") for d in ("s", "h1", "h9"))
    ps, ph = list(s["path"]), list(h["path"])
    assert ps == sorted(ps) and ph != ps and sorted(ph) == ps
    assert list(h9["path"]) != ph and sorted(h9["path"]) == ps
    at = {p: i for i, p in enumerate(ps)}
    for i, p in enumerate(ph):
        assert h["label"][i] == s["label"][at[p]], p
        assert np.array_equal(h["image"][i], s["image"][at[p]]), p
    assert len(set(s["label"][:12].tolist())) == 2  # sorted: class by class
    assert len(set(h["label"][:12].tolist())) >= 4  # shuffled: most classes at once

    before = lake.snapshot("s")
    for bad, says in ((("--images", root, "--shuffle", "7x"), "--shuffle 7x: expected a seed"),
                      (("x=" + str(tmp_path / "none.npy"), "--shuffle", "7"),
                       "give it with --images DIR")):
        p = run_proc(["import", lake.ds_url("s"), *map(str, bad)])
        assert p.returncode == 2 and says in p.stderr, p.stderr
    assert lake.snapshot("s") == before
