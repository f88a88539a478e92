# SPDX-License-Identifier: MIT
"""Ragged, text and bytes columns: imported from text files and directories of .npy files,
mounted as COLUMN/ with data.bin, offsets.npy, shapes.npy and lines.txt, byte for byte."""

import errno
import os
import random
import subprocess

import numpy as np
import pytest

from conftest import (load_schema, read_ragged, run_proc, schema_column, tar_add, tfs, write_dir,
                      write_tar, write_text)

TEXT_ROWS = ["hello", "wörld", "", "tab\there", "back\\slash", "日本語のテキスト", "emoji 🎉",
             "trailing space ", "x" * 5000]


def escape(row):
    return row.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def commits(lake):
    """Commit ids of main, newest first."""
    log = run_proc(["log", lake.ds_url("d")], check=True).stdout
    return [line.split()[1] for line in log.splitlines() if line.startswith("commit ")]


def read_rows(coldir):
    """Rows of a COLUMN/ directory as bytes, by offsets into data.bin."""
    offsets = np.load(coldir / "offsets.npy")
    data = (coldir / "data.bin").read_bytes()
    assert offsets.dtype == np.uint64 and offsets[0] == 0 and offsets[-1] == len(data)
    assert np.all(np.diff(offsets.astype(np.int64)) >= 0)
    return [data[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def test_text_column_round_trip(lake, mount, tmp_path):
    txt = write_text(tmp_path / "cap.txt", TEXT_ROWS)
    y = np.arange(len(TEXT_ROWS), dtype=np.int64)
    lake.build("d", {"cap": txt, "y": y}, "--chunk-size", "64")
    m = mount(lake)
    cap = m / "d" / "main" / "cap"
    assert sorted(os.listdir(cap)) == ["data.bin", "lines.txt", "offsets.npy"]
    assert sorted(os.listdir(m / "d" / "main")) == ["cap", "schema.json", "views", "y.npy"]
    assert [r.decode() for r in read_rows(cap)] == TEXT_ROWS
    # lines.txt: a row a line, escaped; wc -l and grep work on it
    want = "".join(escape(r) + "\n" for r in TEXT_ROWS).encode()
    assert (cap / "lines.txt").read_bytes() == want
    assert os.path.getsize(cap / "lines.txt") == len(want)
    wc = subprocess.run(["wc", "-l", str(cap / "lines.txt")], capture_output=True, text=True)
    assert wc.stdout.split()[0] == str(len(TEXT_ROWS))
    grep = subprocess.run(["grep", "-n", "slash", str(cap / "lines.txt")], capture_output=True,
                          text=True)
    assert grep.stdout == "5:back\\\\slash\n"
    col = schema_column(load_schema(m / "d" / "main" / "schema.json"), "cap")
    assert col["kind"] == "text" and col["rows"] == len(TEXT_ROWS) and col["type"] == "str"
    assert col["chunks"] > 1  # 64-byte chunks: the rows span several
    assert os.getxattr(cap, "user.tensorfs.kind") == b"text"
    # a fixed column's .npy name does not reach a text column, nor the reverse
    assert not (m / "d" / "main" / "cap.npy").exists()
    assert not (m / "d" / "main" / "y").exists()


def test_lines_txt_random_reads(lake, mount, tmp_path):
    rng = random.Random(5)
    rows = ["".join(rng.choice("ab\\\r\nxyzé") for _ in range(rng.randrange(0, 40)))
            for _ in range(20000)]
    # rows come from a file a row a line: no newlines inside; carriage returns only mid-row
    rows = [r.replace("\n", "").rstrip("\r") for r in rows]
    txt = write_text(tmp_path / "t.txt", rows)
    lake.build("d", {"t": txt}, "--chunk-size", "4k")
    m = mount(lake)
    path = m / "d" / "main" / "t" / "lines.txt"
    want = "".join(escape(r) + "\n" for r in rows).encode()
    assert os.path.getsize(path) == len(want)
    fd = os.open(path, os.O_RDONLY)
    try:
        for _ in range(300):
            off = rng.randrange(0, len(want))
            n = rng.randrange(1, 70000)
            assert os.pread(fd, n, off) == want[off:off + n], (off, n)
    finally:
        os.close(fd)
    assert path.read_bytes() == want


def test_crlf_and_bad_utf8(lake, tmp_path):
    lake.create("d")
    crlf = write_text(tmp_path / "crlf.txt", ["a", "b c", ""], newline="\r\n")
    lake.import_("d", {"t": crlf})
    info = lake.info("d")
    assert schema_column(info, "t")["rows"] == 3
    # invalid UTF-8: the import fails naming the line, and nothing is committed
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\nfine\n\xff\xfebroken\n")
    before = lake.snapshot("d")
    p = lake.import_("d", {"t": bad}, check=False)
    assert p.returncode != 0
    assert "line 3 is not valid UTF-8" in p.stderr, p.stderr
    assert lake.snapshot("d") == before


def test_npy_dir_ragged_and_fixed(lake, mount, tmp_path):
    rng = np.random.default_rng(3)
    shapes = [(4, 5, 3), (0, 5, 3), (1, 1, 3), (60, 40, 3), (7, 2, 3), (0, 0, 3)]
    imgs = [rng.integers(0, 256, size=s, dtype=np.uint8) for s in shapes]
    # one row (7200 bytes) larger than the 4k chunk target: a chunk of its own
    vecs = [rng.standard_normal((i % 4 + 1,)).astype(">f4") for i in range(len(shapes))]
    same = [np.full((2, 2), i, dtype=np.int16) for i in range(len(shapes))]
    lake.build("d", {"img": write_dir(tmp_path / "img", imgs),
                     "vec": write_dir(tmp_path / "vec", vecs),
                     "same": write_dir(tmp_path / "same", same)}, "--chunk-size", "4k")
    m = mount(lake)
    main = m / "d" / "main"
    got = read_ragged(main / "img", np.uint8)
    assert [g.shape for g in got] == shapes
    assert all(np.array_equal(a, b) for a, b in zip(got, imgs))
    # big-endian inputs are stored little-endian with equal values
    got = read_ragged(main / "vec", "<f4")
    assert all(np.array_equal(a, b) for a, b in zip(got, vecs))
    # files of one shape make a fixed column
    assert np.array_equal(np.load(main / "same.npy"), np.stack(same))
    schema = load_schema(main / "schema.json")
    img = schema_column(schema, "img")
    assert img["kind"] == "ragged" and img["ndim"] == 3 and img["type"] == "uint8"
    assert img["data_bytes"] == sum(a.nbytes for a in imgs)
    assert schema_column(schema, "same")["kind"] == "fixed"
    assert os.getxattr(main / "img", "user.tensorfs.ndim") == b"3"
    # every chunk of the data part ends on a row boundary (tensorfs verify reads them all)
    p = run_proc(["verify", lake.ds_url("d")])
    assert p.returncode == 0, p.stderr


def test_append_rows_to_kinds(lake, mount, tmp_path):
    lake.create("d")
    a = ["one", "two", "three"]
    lake.import_("d", {"t": write_text(tmp_path / "a.txt", a),
                       "r": write_dir(tmp_path / "ra", [np.arange(n, dtype=np.int32)
                                                        for n in (1, 2, 3)])},
                 "--chunk-size", "16")
    b = ["four", "", "six ✓"]
    lake.import_("d", {"t": write_text(tmp_path / "b.txt", b),
                       "r": write_dir(tmp_path / "rb", [np.arange(n, dtype=np.int32)
                                                        for n in (0, 5, 1)])})
    m = mount(lake)
    main = m / "d" / "main"
    assert [r.decode() for r in read_rows(main / "t")] == a + b
    got = read_ragged(main / "r", np.int32)
    assert [len(g) for g in got] == [1, 2, 3, 0, 5, 1]
    assert (main / "t" / "lines.txt").read_text() == "".join(x + "\n" for x in a + b)
    # the first commit still shows its three rows
    first = commits(lake)[1]  # newest first: the first import's commit
    old = m / "d" / "commits" / first / "t"
    assert [r.decode() for r in read_rows(old)] == a
    # the wrong kind of rows for a column is refused before anything is written
    before = lake.snapshot("d")
    p = lake.import_("d", {"t": np.arange(6, dtype=np.uint8)}, check=False)
    assert p.returncode != 0 and "holds text rows" in p.stderr, p.stderr
    p = lake.import_("d", {"r": write_dir(tmp_path / "rc", [np.zeros(2, np.float32)] * 6)},
                     check=False)
    assert p.returncode != 0 and "holds ragged rows" in p.stderr, p.stderr
    assert lake.snapshot("d") == before


def test_many_small_rows_and_drop(lake, mount, tmp_path):
    rows = [str(i) for i in range(100_000)]
    lake.build("d", {"n": write_text(tmp_path / "n.txt", rows),
                     "k": np.arange(100_000, dtype=np.int64)})
    m = mount(lake)
    main = m / "d" / "main"
    assert [r.decode() for r in read_rows(main / "n")] == rows
    assert (main / "n" / "lines.txt").read_text().splitlines() == rows
    m.stop()
    # drop takes the column's parts along; diff and gc know the kinds
    run_proc(["drop", lake.ds_url("d"), "n"], check=True)
    info = lake.info("d")
    assert [c["name"] for c in info["columns"]] == ["k"]
    ids = commits(lake)
    p = run_proc(["diff", lake.ds_url("d"), ids[1], ids[0]], check=False)
    assert "- column n" in p.stdout, p.stdout + p.stderr
    p = run_proc(["gc", lake.ds_url("d")])
    assert p.returncode == 0, p.stderr
    assert tfs("verify", lake.ds_url("d"))[0] == 0


def test_views_of_kinds(lake, mount, tmp_path):
    """A view's COLUMN/ holds the view's rows in view order (offsets rebuilt, shapes gathered);
    view filters refuse these kinds with a message."""
    rng = np.random.default_rng(12)
    texts = [f"row {i} " + "é" * (i % 7) for i in range(300)]
    arrays = [rng.integers(0, 100, size=(i % 5, 2), dtype=np.int32) for i in range(300)]
    lake.build("d", {"cap": write_text(tmp_path / "c.txt", texts),
                     "r": write_dir(tmp_path / "r", arrays),
                     "y": np.arange(300, dtype=np.int64)}, "--chunk-size", "1k")
    m = mount(lake)
    for params in ("seed=1", "seed=2,epoch=3,rank=1,world=3", "where=y<100,seed=5"):
        view = m / "d" / "main" / "views" / params
        assert sorted(os.listdir(view)) == [".bad_rows", "cap", "r", "y.npy"]
        assert sorted(os.listdir(view / "r")) == ["data.bin", "offsets.npy", "shapes.npy"]
        assert sorted(os.listdir(view / "cap")) == ["data.bin", "lines.txt", "offsets.npy"]
        order = np.load(view / "y.npy").tolist()  # y is the row number
        assert [r.decode() for r in read_rows(view / "cap")] == [texts[i] for i in order]
        lines = (view / "cap" / "lines.txt").read_bytes()
        assert lines == "".join(escape(texts[i]) + "\n" for i in order).encode()
        assert os.stat(view / "cap" / "lines.txt").st_size == len(lines)
        got = read_ragged(view / "r", "<i4")
        assert len(got) == len(order)
        assert all(np.array_equal(g, arrays[i]) for g, i in zip(got, order))
        # random reads of the view's data.bin, across row boundaries
        data = (view / "cap" / "data.bin").read_bytes()
        fd = os.open(view / "cap" / "data.bin", os.O_RDONLY)
        try:
            for _ in range(50):
                a = int(rng.integers(0, len(data)))
                n = int(rng.integers(1, 200))
                assert os.pread(fd, n, a) == data[a:a + n]
        finally:
            os.close(fd)
    assert not (m / "d" / "main" / "views" / "where=cap==1").exists()
    errors = (m / ".tensorfs" / "errors").read_text()
    assert "'cap' is not a real scalar per row" in errors, errors


def kinds_dataset(lake, tmp_path, n=300):
    """d: text cap, ragged int32 r (shape (i % 5, 2): empty rows too), fixed y = the row
    number, in chunks of about 1 KiB."""
    rng = np.random.default_rng(12)
    texts = [f"row {i} " + "é" * (i % 7) + ("\\\t" if i % 11 == 0 else "") for i in range(n)]
    arrays = [rng.integers(0, 100, size=(i % 5, 2), dtype=np.int32) for i in range(n)]
    lake.build("d", {"cap": write_text(tmp_path / "c.txt", texts),
                     "r": write_dir(tmp_path / "r", arrays),
                     "y": np.arange(n, dtype=np.int64)}, "--chunk-size", "1k")
    return texts, arrays


def test_control_file_batches_of_kinds(lake, mount, tmp_path):
    """Batches of text and ragged columns through the control file: per column the rows' bytes,
    offsets rebuilt from 0 and (ragged) shapes in the slot, equal to the source rows, for
    next over a view, stage by rows and by range; a batch larger than the room is refused
    with E2BIG naming the column, and the stream keeps serving."""
    import tensorfs

    texts, arrays = kinds_dataset(lake, tmp_path)
    m = mount(lake)
    for target in ("d/main/views/seed=4", "d/main/views/seed=1,rank=1,world=2", "d/main"):
        st = tensorfs.Stager(m.path, target, ["cap", "r", "y"], batch_size=32, depth=3)
        try:
            seen = []
            for b in st.batches():
                ys = b["y"].tolist()
                assert isinstance(b["cap"], tensorfs.Text) and len(b["cap"]) == b.rows
                assert list(b["cap"]) == [texts[i] for i in ys]
                assert isinstance(b["r"], tensorfs.Ragged) and len(b["r"]) == b.rows
                for got, i in zip(b["r"], ys):
                    assert got.dtype == np.int32 and np.array_equal(got, arrays[i])
                assert b["cap"].offsets[0] == 0
                seen += ys
            order = np.load(m / target / "y.npy").tolist()
            assert seen == order
            rows = [5, 0, 5, len(order) - 1, 10]  # 0, 5 and 10 are empty ragged rows
            b = st.stage(rows)
            assert list(b["cap"]) == [texts[order[i]] for i in rows]
            assert all(np.array_equal(g, arrays[order[i]]) for g, i in zip(b["r"], rows))
            b.release()
            b = st.stage(range(3, 35))
            assert list(b["cap"]) == [texts[order[i]] for i in range(3, 35)]
            b.release()
        finally:
            st.close()
    # room too small for some batches: refused with the column named, the stream goes on
    st = tensorfs.Stager(m.path, "d/main", ["y", "r"], batch_size=8, room=24)
    try:
        with pytest.raises(tensorfs.StagingError) as e:
            st.stage([4, 9, 14])  # 3 rows of shape (4, 2) int32: 96 bytes
        assert e.value.name == "E2BIG" and "96 bytes of column 'r'" in e.value.message
        b = st.stage([1, 2])  # 8 + 16 bytes
        assert [a.shape for a in b["r"]] == [(1, 2), (2, 2)]
        b.release()
    finally:
        st.close()
    fd = os.open(m / ".tensorfs" / "control", os.O_RDWR)
    try:
        for req, want in (("open d/main cols=cap/data", "error EINVAL unknown column 'cap/data'"),
                          ("open d/main cols=cap room=0", "error EINVAL room=0"),
                          ("open d/main cols=cap batch=300 room=2G",
                           "error E2BIG a slot of 300 rows")):
            os.write(fd, f"{req}\n".encode())
            reply = os.read(fd, 4096).decode()
            assert reply.startswith(want), reply
        os.write(fd, b"open d/main cols=cap,y batch=4\n")
        assert os.read(fd, 4096).startswith(b"ok stream=1 ")
        os.write(fd, b"stage stream=1 rows=1,2\n")
        reply = os.read(fd, 4096).decode()
        assert " col=cap kind=text dtype=|u1 offsets=" in reply and " data_bytes=" in reply, reply
        assert " col=y offset=" in reply and "rank=" not in reply
    finally:
        os.close(fd)


def test_control_file_ioctl_batches_of_kinds(lake, mount, tmp_path):
    """The same batches through the ioctls of libtensorfs-client: tfs_client_batch_row gives
    each row's bytes and shape."""
    from conftest import REPO_ROOT

    client = os.environ.get("TENSORFS_CTL_CLIENT") or str(
        REPO_ROOT / "build" / "rel" / "tests" / "ctl_client")
    texts, arrays = kinds_dataset(lake, tmp_path, n=100)
    m = mount(lake)
    out = tmp_path / "out"
    out.mkdir()
    p = subprocess.run([client, str(m.path), "d/main/views/seed=2", "cap,r,y", "host", str(out),
                        "all:16"], capture_output=True, text=True)
    assert p.returncode == 0 and "end -61" in p.stdout, p.stdout + p.stderr  # ENODATA after the last batch
    order = np.load(m / "d/main/views/seed=2" / "y.npy").tolist()
    seen = []
    for k in range(7):
        ys = np.fromfile(out / f"{k}_y.bin", dtype=np.int64).tolist()
        caps = (out / f"{k}_cap.rows").read_text().splitlines()
        assert [bytes.fromhex(c) .decode() for c in caps] == [texts[i] for i in ys]
        for line, i in zip((out / f"{k}_r.rows").read_text().splitlines(), ys):
            f = line.split(" ")
            shape = tuple(int(x) for x in f[-2:])
            data = bytes.fromhex(f[0]) if len(f) == 3 else b""
            assert np.array_equal(np.frombuffer(data, "<i4").reshape(shape), arrays[i])
        seen += ys
    assert seen == order


def test_python_client_and_torch(lake, mount, tmp_path):
    import torch

    import tensorfs
    import tensorfs.torch

    rng = np.random.default_rng(8)
    imgs = [rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            for h, w in ((3, 4), (5, 2), (1, 1), (2, 6))]
    lake.build("d", {"img": write_dir(tmp_path / "img", imgs),
                     "cap": write_text(tmp_path / "c.txt", ["a", "bé", "", "d\\"]),
                     "y": np.arange(4, dtype=np.int64)})
    m = mount(lake)
    cols = tensorfs.open(m / "d" / "main")
    assert sorted(cols) == ["cap", "img", "y"] and cols.rows == 4
    assert isinstance(cols["img"], tensorfs.Ragged) and isinstance(cols["cap"], tensorfs.Text)
    for a, b in zip(cols["img"], imgs):
        assert np.array_equal(a, b) and not a.flags.writeable  # a view of the mapping
    assert cols["cap"][1] == "bé" and cols["cap"][-1] == "d\\" and cols["cap"][1:3] == ["bé", ""]
    ds = tensorfs.torch.Dataset(m / "d" / "main", columns=["img", "cap", "y"])
    for pad in (False, True):
        dl = torch.utils.data.DataLoader(ds, batch_size=4,
                                         collate_fn=tensorfs.torch.collate(pad=pad))
        b = next(iter(dl))
        assert b["cap"] == ["a", "bé", "", "d\\"]
        assert torch.equal(b["y"], torch.arange(4))
        if pad:
            padded, shapes = b["img"]
            assert padded.shape == (4, 5, 6, 3) and shapes.tolist()[1] == [5, 2, 3]
            assert torch.equal(padded[1, :5, :2], torch.from_numpy(imgs[1]))
            assert int(padded[1, :, 2:].abs().sum()) == 0
        else:
            assert [tuple(t.shape) for t in b["img"]] == [i.shape for i in imgs]


def test_jsonl(lake, mount, tmp_path):
    import json

    import tensorfs

    rows = [{"id": i, "score": (i / 4 if i % 2 else i), "ok": i % 3 == 0,
             "name": ["plain", "ünï\ncode\ttab\\", ""][i % 3], "vec": list(range(i % 4)),
             "emb": [i * 0.5, -i], "meta": [{"k": i}, None, "s", [1, "x"]][i % 4]}
            for i in range(200)]
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    bad = {3: "{not json", 7: json.dumps({**rows[0], "id": "seven"}),
           11: json.dumps({k: v for k, v in rows[0].items() if k != "vec"}),
           15: json.dumps({**rows[0], "emb": [1, 2, 3]}),
           19: json.dumps({**rows[0], "extra": 1})}
    text = []
    for i, line in enumerate(lines):
        if i in bad:
            text.append(bad[i])
        text.append(line)
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(text) + "\n\n", encoding="utf-8")
    lake.create("d")
    p = lake.import_("d", {}, "--jsonl", src, "--fixed", "emb")
    assert "imported 200 rows, skipped 5" in p.stdout, p.stdout
    assert "field 'extra' is not one of the first row's" in p.stdout, p.stdout
    assert "line 4: " in p.stdout and "field 'id' holds another kind of value" in p.stdout
    assert "no field 'vec'" in p.stdout, p.stdout
    assert "--fixed wants 2" in p.stdout, p.stdout
    m = mount(lake)
    cols = tensorfs.open(m / "d" / "main")
    assert cols["id"].tolist() == [r["id"] for r in rows]
    assert cols["id"].dtype == np.int64 and cols["score"].dtype == np.float64
    assert cols["score"].tolist() == [float(r["score"]) for r in rows]
    assert cols["ok"].dtype == np.bool_ and cols["ok"].tolist() == [r["ok"] for r in rows]
    assert list(cols["name"]) == [r["name"] for r in rows]
    assert [v.tolist() for v in cols["vec"]] == [r["vec"] for r in rows]
    assert cols["emb"].shape == (200, 2) and cols["emb"].tolist() == [r["emb"] for r in rows]
    assert [json.loads(x) for x in cols["meta"]] == [r["meta"] for r in rows]
    # a view's lines.txt: its rows in view order, newlines and backslashes escaped, read
    # whole and in small random pieces
    view = m / "d" / "main" / "views" / "seed=3"
    order = np.load(view / "id.npy").tolist()
    byid = {r["id"]: r for r in rows}
    want = "".join(escape(byid[i]["name"]) + "\n" for i in order).encode()
    assert (view / "name" / "lines.txt").read_bytes() == want
    rng = random.Random(5)
    with open(view / "name" / "lines.txt", "rb", buffering=0) as f:
        for _ in range(100):
            a, n = rng.randrange(len(want)), rng.randrange(1, 40)
            assert os.pread(f.fileno(), n, a) == want[a:a + n]
    assert subprocess.run(["wc", "-l"], stdin=open(view / "name" / "lines.txt"),
                          capture_output=True, text=True).stdout.strip() == str(len(order))
    # --strict: the first bad line ends it, and nothing is committed
    lake.create("e")
    before = lake.snapshot("e")
    p = lake.import_("e", {}, "--jsonl", src, "--strict", check=False)
    assert p.returncode != 0 and "line 4" in p.stderr, p.stderr
    assert lake.snapshot("e") == before


def test_killed_row_and_image_imports_leave_the_dataset_as_it_was(lake, tmp_path):
    """kill -9 at spread-out moments of npz, WebDataset, text, .npy-directory, JSON Lines and
    image imports:
    every ref stays on a whole commit, verify passes, and a finished import's rows are all
    there."""
    import time

    from PIL import Image

    from verhelp import finish, head, popen_tfs, verify

    rng = np.random.default_rng(21)
    text = write_text(tmp_path / "t.txt", [f"row {i} " + "x" * (i % 50) for i in range(40000)])
    npdir = write_dir(tmp_path / "r", [rng.integers(0, 9, size=(i % 30, 4), dtype=np.int16)
                                       for i in range(600)])
    jl = tmp_path / "j.jsonl"
    jl.write_text("".join(f'{{"a": {i}, "b": "s{i}", "c": [{i}, 1]}}\n' for i in range(20000)))
    imgs = tmp_path / "imgs" / "c"
    imgs.mkdir(parents=True)
    for i in range(120):
        Image.fromarray(rng.integers(0, 256, size=(64, 48, 3), dtype=np.uint8)).save(
            imgs / f"{i:04d}.png")
    np.savez_compressed(tmp_path / "a.npz", a=rng.integers(0, 9, size=(30000, 8)),
                        b=rng.standard_normal(30000))
    write_tar(tmp_path / "s.tar", ((f"k/{i:05d}.{ext}", data) for i in range(300)
                                   for ext, data in (("cls", str(i).encode()),
                                                     ("txt", f"sample {i}".encode()))))
    runs = {
        "npz": (["--npz", str(tmp_path / "a.npz"), "--chunk-size", "4k"], 30000),
        "wds": (["--webdataset", str(tmp_path / "s.tar"), "--chunk-size", "1k"], 300),
        "text": (["t={}".format(text), "--chunk-size", "4k"], 40000),
        "dir": (["r={}".format(npdir), "--chunk-size", "4k"], 600),
        "jsonl": (["--jsonl", str(jl), "--chunk-size", "4k"], 20000),
        "images": (["--images", str(tmp_path / "imgs"), "--chunk-size", "64k"], 120),
    }
    for name, (args, rows) in runs.items():
        lake.create(name)
        t0 = time.monotonic()
        assert finish(popen_tfs("import", lake.ds_url(name), *args))[0] == 0
        took = time.monotonic() - t0
        assert lake.info(name)["rows"] == rows
        # each kill into a fresh dataset: after it, no rows or all of them
        for k, frac in enumerate((0.0, 0.05, 0.2, 0.4, 0.6, 0.8, 1.0, 1.3)):
            ds = f"{name}{k}"
            lake.create(ds)
            prev = head(lake, ds)
            p = popen_tfs("import", lake.ds_url(ds), *args)
            if frac:
                time.sleep(frac * took)
            p.kill()
            finish(p)
            rc, out, err = verify(lake, ds)
            assert rc == 0, f"{name}, killed at {frac}: {out}\n{err}"
            info = lake.info(ds)
            if head(lake, ds) == prev:
                assert info["rows"] == 0, (name, frac)
            else:
                assert info["parents"] == [prev] and info["rows"] == rows, (name, frac)


def test_npz_array_read_in_pieces(lake, mount, tmp_path):
    """Arrays of several pieces of rows (an .npz member is read about 4 MiB at a time, never
    whole), their rows not a multiple of a piece, big-endian ones swapped piece by piece, stored
    and compressed alike; the column reads back exactly."""
    rng = np.random.default_rng(12)
    x = rng.integers(-30000, 30000, size=(70_001, 33)).astype(">i2")  # 4.6 MB
    y = rng.standard_normal((70_001, 3, 5))
    np.savez(tmp_path / "s.npz", x=x, y=y)
    np.savez_compressed(tmp_path / "c.npz", x=x, y=y)
    for ds in ("s", "c"):
        lake.create(ds)
        p = lake.import_(ds, {}, "--npz", tmp_path / f"{ds}.npz", "--chunk-size", "1M")
        assert "imported 70001 rows" in p.stdout, p.stdout
    m = mount(lake)
    for ds in ("s", "c"):
        got = np.load(m / ds / "main" / "x.npy")
        assert got.dtype == np.dtype("<i2") and np.array_equal(got, x), ds
        assert np.array_equal(np.load(m / ds / "main" / "y.npy"), y), ds


def test_npz_and_webdataset(lake, mount, tmp_path):
    import io
    import tarfile

    from PIL import Image

    import tensorfs

    x = np.arange(60, dtype=">i4").reshape(20, 3)  # big-endian: stored little-endian
    y = np.linspace(0, 1, 20)
    np.savez_compressed(tmp_path / "a.npz", x=x, y=y)
    lake.create("n")
    p = lake.import_("n", {}, "--npz", tmp_path / "a.npz")
    assert "imported 20 rows" in p.stdout
    np.savez(tmp_path / "bad.npz", x=x, z=np.arange(3))
    lake.create("m")
    p = lake.import_("m", {}, "--npz", tmp_path / "bad.npz", check=False)
    assert p.returncode != 0 and "has 3 rows" in p.stderr, p.stderr

    rng = np.random.default_rng(4)
    samples = []
    for shard in range(2):
        with tarfile.open(tmp_path / f"s{shard}.tar", "w") as t:
            for i in range(25):
                key = f"shard{shard}/{i:04d}"
                img = rng.integers(0, 256, size=(int(rng.integers(1, 9)), 5, 3), dtype=np.uint8)
                vec = rng.standard_normal(int(rng.integers(0, 4))).astype(np.float32)
                b = io.BytesIO()
                Image.fromarray(img).save(b, "PNG")
                tar_add(t, key + ".png", b.getvalue())
                tar_add(t, key + ".cls", str(i * 7).encode())
                tar_add(t, key + ".txt", f"caption {i}\nsecond line".encode())
                b = io.BytesIO()
                np.save(b, vec)
                tar_add(t, key + ".npy", b.getvalue())
                tar_add(t, key + ".bin", bytes([i, 0, 255]))
                samples.append((key, img, i * 7, vec))
    lake.create("w")
    p = lake.import_("w", {}, "--webdataset", tmp_path / "s0.tar", tmp_path / "s1.tar")
    assert "imported 50 rows" in p.stdout, p.stdout
    m = mount(lake)
    n = tensorfs.open(m / "n" / "main")
    assert np.array_equal(n["x"], x) and n["x"].dtype == np.dtype("<i4")
    assert np.array_equal(n["y"], y)
    w = tensorfs.open(m / "w" / "main")
    assert sorted(w) == ["bin", "cls", "key", "npy", "png", "txt"]
    assert list(w["key"]) == [s[0] for s in samples]
    assert all(np.array_equal(a, s[1]) for a, s in zip(w["png"], samples))
    assert w["cls"].tolist() == [s[2] for s in samples]
    assert all(np.array_equal(a, s[3]) for a, s in zip(w["npy"], samples))
    assert list(w["txt"])[5] == "caption 5\nsecond line"
    assert list(w["bin"])[9] == bytes([9, 0, 255])
    # a damaged image and a missing field: skipped and named, or --strict fails
    write_tar(tmp_path / "bad.tar",
              [("k/0001." + ext, data) for ext, data in (("png", b"not an image"), ("cls", b"1"),
                                                         ("txt", b"t"), ("npy", b"x"),
                                                         ("bin", b""))] +
              [("k/0002.cls", b"2")])
    p = lake.import_("w2", {}, "--webdataset", tmp_path / "s0.tar", tmp_path / "bad.tar",
                     check=False)
    assert p.returncode != 0  # no such dataset yet
    lake.create("w2")
    p = lake.import_("w2", {}, "--webdataset", tmp_path / "s0.tar", tmp_path / "bad.tar")
    assert "imported 25 rows, skipped 2" in p.stdout, p.stdout
    assert "k/0001: .png: not a JPEG or PNG image" in p.stdout, p.stdout
    assert "k/0002: no .png" in p.stdout, p.stdout
    lake.create("w3")
    before = lake.snapshot("w3")
    p = lake.import_("w3", {}, "--webdataset", tmp_path / "s0.tar", tmp_path / "bad.tar",
                     "--strict", check=False)
    assert p.returncode != 0 and lake.snapshot("w3") == before
    # a field the first sample lacks: the samples are kept without it, and it is named once
    # with its count; --strict refuses it and changes nothing
    write_tar(tmp_path / "extra.tar",
              [(f"e/{i}.{ext}", data) for i in range(3)
               for ext, data in (("cls", b"1"), ("txt", b"t"))
               if ext != "txt" or i > 0] + [("e/1.json", b"{}"), ("e/2.json", b"{}")])
    lake.create("w4")
    p = lake.import_("w4", {}, "--webdataset", tmp_path / "extra.tar")
    assert "imported 3 rows" in p.stdout, p.stdout
    assert "field 'txt' of 2 samples (the first: e/1) is not a field of the first sample" \
        in p.stderr, p.stderr
    assert "field 'json' of 2 samples" in p.stderr, p.stderr
    assert sorted(c["name"] for c in lake.info("w4")["columns"]) == ["cls", "key"]
    before = lake.snapshot("w4")
    p = lake.import_("w4", {}, "--webdataset", tmp_path / "extra.tar", "--strict", check=False)
    assert p.returncode != 0 and "sample e/1: field 'txt' is not a field" in p.stderr
    assert lake.snapshot("w4") == before


def test_c_client_reads_rows(lake, mount, tmp_path):
    """libtensorfs-client's row reader (tfs_client_rows_open / tfs_client_row) over the mount."""
    from conftest import REPO_ROOT

    client = os.environ.get("TENSORFS_CTL_CLIENT") or str(
        REPO_ROOT / "build" / "rel" / "tests" / "ctl_client")
    rows = ["a", "", "üñ\\", "x" * 300]
    imgs = [np.arange(6, dtype=np.int16).reshape(2, 3), np.zeros((0, 3), np.int16),
            np.full((1, 3), -2, np.int16)]
    lake.create("d")
    lake.import_("d", {"t": write_text(tmp_path / "t.txt", rows + ["z"]),
                       "r": write_dir(tmp_path / "r", imgs + [np.ones((4, 3), np.int16)] +
                                      [np.ones((1, 3), np.int16)])},
                 "--chunk-size", "64")
    m = mount(lake)
    out = subprocess.run([client, "rows", str(m / "d" / "main" / "t")], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "rows 5 ndim 0" and out[-1] == "end"
    for i, r in enumerate(rows):
        idx, n, hexed = (out[1 + i].split(" ") + [""])[:3]
        assert int(idx) == i and bytes.fromhex(hexed) == r.encode() and int(n) == len(r.encode())
    out = subprocess.run([client, "rows", str(m / "d" / "main" / "r")], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out[0] == "rows 5 ndim 2"
    for i, a in enumerate(imgs):
        f = out[1 + i].split(" ")
        data = bytes.fromhex(f[2]) if len(f) > 4 else b""
        shape = tuple(int(x) for x in f[-2:])
        assert shape == a.shape
        assert np.array_equal(np.frombuffer(data, "<i2").reshape(shape), a)


def test_jsonl_and_webdataset_append(lake, mount, tmp_path):
    """JSON Lines and WebDataset shards append to a dataset made from them before; a field of
    another kind, or a dataset with other columns, is refused and the dataset stays as it was."""
    import json

    import tensorfs

    (tmp_path / "a.jsonl").write_text("".join(
        json.dumps({"i": i, "t": f"t{i}", "v": list(range(i % 3))}) + "\n" for i in range(5)))
    (tmp_path / "b.jsonl").write_text("".join(
        json.dumps({"i": i, "t": f"u{i}", "v": [i]}) + "\n" for i in range(5, 8)))
    (tmp_path / "c.jsonl").write_text(json.dumps({"i": 1.5, "t": "x", "v": []}) + "\n")
    lake.create("j")
    lake.import_("j", {}, "--jsonl", tmp_path / "a.jsonl")
    lake.import_("j", {}, "--jsonl", tmp_path / "b.jsonl")
    before = lake.snapshot("j")
    p = lake.import_("j", {}, "--jsonl", tmp_path / "c.jsonl", check=False)
    assert p.returncode != 0 and ("column i holds fixed rows of <i8, rank 0; "
                                  f"{tmp_path / 'c.jsonl'} has fixed rows of <f8") in p.stderr, \
        p.stderr
    assert lake.snapshot("j") == before
    # --fixed lists of another length: both row shapes are named
    (tmp_path / "f3.jsonl").write_text(json.dumps({"a": [1, 2, 3]}) + "\n")
    (tmp_path / "f4.jsonl").write_text(json.dumps({"a": [1, 2, 3, 4]}) + "\n")
    lake.create("f")
    lake.import_("f", {}, "--jsonl", tmp_path / "f3.jsonl", "--fixed", "a")
    before = lake.snapshot("f")
    p = lake.import_("f", {}, "--jsonl", tmp_path / "f4.jsonl", "--fixed", "a", check=False)
    assert p.returncode != 0 and ("column a holds fixed rows of <i8, shape 3; "
                                  f"{tmp_path / 'f4.jsonl'} has fixed rows of <i8, shape 4") \
        in p.stderr, p.stderr
    assert lake.snapshot("f") == before
    lake.build("o", {"z": np.arange(3, dtype=np.int64)})
    p = lake.import_("o", {}, "--jsonl", tmp_path / "a.jsonl", check=False)
    assert p.returncode != 0 and "column z would have 3 rows" in p.stderr, p.stderr

    def shard(path, keys):
        write_tar(path, ((f"{k:04d}{ext}", data) for k in keys
                         for ext, data in ((".cls", str(k).encode()), (".txt", f"s{k}".encode()))))

    shard(tmp_path / "s0.tar", range(4))
    shard(tmp_path / "s1.tar", range(4, 6))
    lake.create("w")
    lake.import_("w", {}, "--webdataset", tmp_path / "s0.tar")
    lake.import_("w", {}, "--webdataset", tmp_path / "s1.tar")
    m = mount(lake)
    j = tensorfs.open(m / "j" / "main")
    assert j["i"].tolist() == list(range(8)) and list(j["t"]) == \
        [f"t{i}" for i in range(5)] + [f"u{i}" for i in range(5, 8)]
    assert [v.tolist() for v in j["v"]] == [list(range(i % 3)) for i in range(5)] + \
        [[5], [6], [7]]
    w = tensorfs.open(m / "w" / "main")
    assert w["cls"].tolist() == list(range(6)) and list(w["key"]) == [f"{k:04d}" for k in range(6)]


def test_view_column_files_follow_the_branch_together(lake, mount, tmp_path):
    """A view's COLUMN/ files of a branch that moved show the new commit, all of them: data.bin
    read after the move agrees with offsets.npy and y.npy read after it; a file of the old
    commit opened through a directory held from before is refused as stale (as a view's
    COLUMN.npy is), never served from the new commit."""
    texts = [f"first {i} " + "é" * (i % 5) for i in range(200)]
    lake.build("d", {"cap": write_text(tmp_path / "a.txt", texts),
                     "y": np.arange(200, dtype=np.int64)}, "--chunk-size", "1k")
    m = mount(lake, opts=("ref_ttl=0",))
    view = m / "d" / "main" / "views" / "seed=4"
    order = np.load(view / "y.npy").tolist()
    assert [r.decode() for r in read_rows(view / "cap")] == [texts[i] for i in order]
    os.stat(view / "cap" / "data.bin")
    held = os.open(view / "cap", os.O_RDONLY | os.O_DIRECTORY)  # a directory of the old commit
    more = [f"second {i} " + "ü" * (i % 3) for i in range(300)]
    lake.import_("d", {"cap": write_text(tmp_path / "b.txt", more),
                       "y": np.arange(200, 500, dtype=np.int64)})
    every = texts + more
    for _ in range(3):
        order = np.load(view / "y.npy").tolist()
        assert sorted(order) == list(range(500))
        assert [r.decode() for r in read_rows(view / "cap")] == [every[i] for i in order]
        lines = (view / "cap" / "lines.txt").read_bytes()
        assert lines == "".join(escape(every[i]) + "\n" for i in order).encode()
    # the old commit's directory, held across the move: its files are stale, not the new
    # commit's bytes under the old commit's size (and the kernel's cache of them)
    try:
        for name in ("data.bin", "offsets.npy", "lines.txt"):
            with pytest.raises(OSError) as e:
                os.close(os.open(name, os.O_RDONLY, dir_fd=held))
            assert e.value.errno == errno.ESTALE, (name, e.value)
    finally:
        os.close(held)
