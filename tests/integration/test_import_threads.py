"""Every importer works on --threads N threads and writes the same bytes whatever N is: the
chunk objects of an import at 1 thread equal those at 2 and 3 (content-addressed, so equal
bytes), the rows and skips reported are the same, one thread is one thread, and more are
observed busy at once (the importer prints the most it saw)."""
import io
import json
import re
import tarfile

import numpy as np
import pytest
from PIL import Image

from conftest import tar_add

THREADS = (1, 2, 3)


def busy(stdout):
    m = re.search(r"worked on (\d+) threads? at once at most", stdout)
    return int(m.group(1)) if m else None


def make_jsonl(path, rng):
    """~3.5 MB: several of the parser's 1 MiB blocks, bad lines among them."""
    with open(path, "w") as f:
        for i in range(24000):
            if i % 997 == 5:
                f.write("{not json\n")
            elif i % 1999 == 7:
                f.write(json.dumps({"id": i}) + "\n")  # fields missing
            else:
                f.write(json.dumps({
                    "id": i, "score": float(rng.standard_normal()) if i % 3 else i,
                    "ok": bool(i % 2), "text": "row %d %s" % (i, "é" * (i % 7)),
                    "vec": [int(v) for v in rng.integers(0, 99, i % 9)],
                    "meta": {"k": i % 5}}) + "\n")


def make_shards(tmp_path, rng, width=24):
    """Two shards of 120 samples, JPEG and PNG in turn, `width` pixels wide."""
    paths = []
    for shard in range(2):
        p = tmp_path / f"s{shard}.tar"
        with tarfile.open(p, "w") as t:
            for i in range(120):
                key = f"{shard}/{i:04d}"
                img = rng.integers(0, 256, size=(int(rng.integers(8, 40)), width, 3),
                                   dtype=np.uint8)
                b = io.BytesIO()
                Image.fromarray(img).save(b, "JPEG" if i % 2 else "PNG")
                tar_add(t, key + (".jpg" if i % 2 else ".png"), b.getvalue())
                tar_add(t, key + ".cls", str(i % 10).encode())
                tar_add(t, key + ".txt", f"caption {shard} {i}".encode())
                if i % 41 == 3:
                    continue  # no .npy: skipped, named
                b = io.BytesIO()
                np.save(b, rng.standard_normal(int(rng.integers(0, 6))).astype(np.float32))
                tar_add(t, key + ".npy", b.getvalue())
        paths.append(p)
    return paths


def test_every_importer_same_bytes_whatever_the_threads(lake, tmp_path):
    rng = np.random.default_rng(25)
    make_jsonl(tmp_path / "a.jsonl", rng)
    shards = make_shards(tmp_path, rng)
    np.savez(tmp_path / "a.npz", x=rng.standard_normal((5000, 7)),
             y=rng.integers(0, 9, 5000))
    (tmp_path / "lines.txt").write_text("".join(f"line {i} {'x' * (i % 50)}\n"
                                                for i in range(2000)))
    (tmp_path / "dir").mkdir()
    for i in range(2000):
        np.save(tmp_path / "dir" / f"{i:04d}.npy", rng.standard_normal(int(rng.integers(1, 40))))
    np.save(tmp_path / "big.npy", rng.standard_normal((2000, 64)))
    sources = {
        "jsonl": ([], ["--jsonl", tmp_path / "a.jsonl"]),
        "wds": ([], ["--webdataset"] + shards),
        "npz": ([], ["--npz", tmp_path / "a.npz"]),
        "rows": ([f"t={tmp_path / 'lines.txt'}", f"r={tmp_path / 'dir'}/",
                  f"n={tmp_path / 'big.npy'}"], []),
    }
    for kind, (cols, args) in sources.items():
        seen = {}
        for th in THREADS:
            ds = f"{kind}{th}"
            lake.create(ds)
            p = lake.import_(ds, {}, *cols, *args, "--chunk-size", "16k", "--threads", th)
            report = [ln for ln in p.stdout.splitlines() if ln.startswith("imported")]
            seen[th] = (lake.chunk_ids(ds), report)
            if th == 1 and busy(p.stdout) is not None:
                assert busy(p.stdout) == 1, (kind, p.stdout)
        assert len(seen[1][0]) > 8, kind
        assert seen[1] == seen[2] == seen[3], kind
        if kind in ("jsonl", "wds"):  # bad rows, named the same way at every count
            assert "skipped" in seen[1][1][0], seen[1][1]


@pytest.mark.parametrize("kind", ["jsonl", "wds"])
def test_threads_reach_the_work(lake, tmp_path, kind):
    rng = np.random.default_rng(7)
    if kind == "jsonl":
        make_jsonl(tmp_path / "a.jsonl", rng)
        args = ["--jsonl", tmp_path / "a.jsonl"]
    else:
        # Images wide enough that decoding one takes far longer than reading it from the
        # tar, so the reading thread keeps every worker fed even under a sanitizer.
        args = ["--webdataset"] + make_shards(tmp_path, rng, width=512)
    for th, want in ((1, lambda n: n == 1), (3, lambda n: n >= 2)):
        lake.create(f"d{th}")
        p = lake.import_(f"d{th}", {}, *args, "--threads", th)
        assert want(busy(p.stdout)), p.stdout
        assert "skipped" in p.stdout, p.stdout


@pytest.mark.parametrize("th", THREADS)
def test_a_write_that_fails_fails_the_import(lake, tmp_path, th):
    """Chunks that cannot be written (the fan-out folders they go to are files) end the import
    with the store's error, whatever the thread count and wherever it is met (by a column's
    writer adding a block's rows, on the pool beside the other columns or not, or as it
    finishes); nothing is committed."""
    rng = np.random.default_rng(9)
    make_jsonl(tmp_path / "a.jsonl", rng)
    lake.create("d")
    lake.import_("d", {}, "--jsonl", tmp_path / "a.jsonl")  # the first commit's folders stay
    objects = lake.root / "d" / "objects"
    for i in range(256):
        if not (objects / f"{i:02x}").exists():
            (objects / f"{i:02x}").touch()
    before = lake.snapshot("d")
    p = lake.import_("d", {}, "--jsonl", tmp_path / "a.jsonl", "--chunk-size", "16k",
                     "--threads", th, check=False)
    assert p.returncode != 0, p.stdout
    assert "cannot write object: Not a directory" in p.stderr, p.stderr
    assert "the dataset is unchanged" in p.stderr, p.stderr
    assert lake.snapshot("d") == before
