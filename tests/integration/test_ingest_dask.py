# SPDX-License-Identifier: MIT
"""tensorfs.ingest on Dask: a LocalCluster of 2 worker processes writes 8 parts of a JSON Lines
source into an s3:// lake on the test server, one worker killed mid-run; the commit equals a
single-machine import of the same source row for row, and verify passes."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from conftest import REPO_ROOT, TENSORFS_BIN, run_proc
from s3help import S3Server, UrlLake, s3_env

if os.environ.get("TENSORFS_REQUIRE_TOOLS") == "1":
    import distributed  # make test and CI install python3-distributed: missing is a failure
else:
    distributed = pytest.importorskip("distributed",
                                      reason="python3-distributed is not installed")
import dask.bag as db  # noqa: E402  (dask comes with distributed)

import tensorfs  # noqa: E402


@pytest.fixture
def s3(tmp_path, monkeypatch):
    srv = S3Server(tmp_path / "s3data", buckets=("lake",))
    s3_env(monkeypatch, srv.endpoint)
    # Worker processes import tensorfs.dask_ingest and run the CLI.
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT / "packaging" / "python"))
    monkeypatch.setenv("TENSORFS_BIN", TENSORFS_BIN)
    yield srv
    srv.stop()


def records(part, n, rng):
    for i in range(n):
        yield {"id": part * 1_000_000 + i, "score": float(rng.random()),
               "tags": [int(t) for t in rng.integers(0, 100, size=i % 5 + 1)],
               "name": f"part {part} row {i} " + "ü" * (i % 4)}


def write_sources(tmp_path, nparts, rows):
    rng = np.random.default_rng(3)
    paths = []
    for p in range(nparts):
        path = tmp_path / f"part{p}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for r in records(p, rows, rng):
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        paths.append(path)
    whole = tmp_path / "all.jsonl"
    whole.write_bytes(b"".join(p.read_bytes() for p in paths))
    return paths, whole


def same_dataset(m, a, b):
    va, vb = m / a / "main", m / b / "main"
    for f in ("id.npy", "score.npy", "tags/offsets.npy", "tags/shapes.npy", "name/offsets.npy"):
        x, y = np.load(va / f), np.load(vb / f)
        assert x.shape == y.shape and (x == y).all(), f
    for f in ("tags/data.bin", "name/data.bin", "name/lines.txt"):
        assert (va / f).read_bytes() == (vb / f).read_bytes(), f


def lake_with_reference(url, tmp_path, nparts, rows):
    """A lake holding `one`, the sources imported by one machine, and `par`, empty, for the
    parts; and the sources' paths."""
    lake = UrlLake(url, tmp_path / "npy")
    paths, whole = write_sources(tmp_path, nparts, rows)
    lake.create("one")
    run_proc(["import", lake.ds_url("one"), "--jsonl", whole, "--quiet"], check=True)
    lake.create("par")
    return lake, paths


def test_dask_ingest_with_a_worker_killed(s3, tmp_path, mount):
    lake, paths = lake_with_reference("s3://lake/l", tmp_path, 8, 6000)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, host="127.0.0.1")
    client = distributed.Client(cluster)
    try:
        pids = client.run(os.getpid)
        result, error = {}, []

        def run():
            try:
                result.update(tensorfs.ingest(lake.ds_url("par"), paths, message="dask",
                                              session="dk",
                                              import_args=("--level", "19", "--threads", "1")))
            except BaseException as e:  # reported below
                error.append(e)

        t = threading.Thread(target=run)
        t.start()
        # Kill a worker once a part is recorded and others are under way.
        deadline = time.time() + 60
        while time.time() < deadline:
            ls = run_proc(["session", "ls", lake.ds_url("par")]).stdout.splitlines()
            if len(ls) > 1:
                break
            time.sleep(0.05)
        assert len(ls) > 1, "no part recorded within 60 s"
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        assert int(ls[1].split()[1]) < 8, "every part was written before the kill"
        assert t.is_alive()
        t.join(timeout=300)
        assert not t.is_alive()
        assert not error, error
    finally:
        client.close()
        cluster.close()
    assert result["rows"] == 8 * 6000 and result["parts"] == 8
    m = mount(lake)
    same_dataset(m, "one", "par")
    assert run_proc(["verify", lake.ds_url("par")]).returncode == 0
    log = run_proc(["log", lake.ds_url("par")], check=True).stdout
    assert log.count("commit ") == 2  # the root and the one commit of all 8 parts


def test_dask_bag_partitions_are_parts(s3, tmp_path, mount):
    """A dask.bag of dicts on Dask's local scheduler: a part per partition, in order."""
    lake, paths = lake_with_reference("s3://lake/b", tmp_path, 3, 500)
    bag = db.read_text([str(p) for p in paths]).map(json.loads)
    assert bag.npartitions == 3
    out = tensorfs.ingest(lake.ds_url("par"), bag)
    assert out["rows"] == 1500 and out["parts"] == 3
    same_dataset(mount(lake), "one", "par")


def test_dask_dataframe_partitions_are_parts(lake, mount):
    """A dask.dataframe: a part per partition, numbers and strings as their columns."""
    import dask.dataframe as dd
    import pandas as pd

    n = 1000
    df = pd.DataFrame({"a": np.arange(n), "b": np.linspace(0.5, 1.5, n),
                       "s": [f"row {i}" for i in range(n)]})
    lake.create("d")
    out = tensorfs.ingest(lake.ds_url("d"), dd.from_pandas(df, npartitions=5),
                          tensorfs=TENSORFS_BIN)
    assert out["rows"] == n and out["parts"] == 5
    v = tensorfs.open(mount(lake) / "d" / "main")
    assert (np.asarray(v["a"]) == df["a"].to_numpy()).all()
    assert (np.asarray(v["b"]) == df["b"].to_numpy()).all()
    assert list(v["s"]) == list(df["s"])


def test_dask_ingest_failure_aborts_and_leaves_the_dataset(s3, tmp_path):
    lake = UrlLake("s3://lake/f", tmp_path / "npy")
    paths, _ = write_sources(tmp_path, 2, 10)
    lake.create("d")
    with pytest.raises(tensorfs.IngestError, match="does-not-exist"):
        tensorfs.ingest(lake.ds_url("d"), paths + [tmp_path / "does-not-exist.jsonl"],
                        session="bad", retries=0)
    assert len(run_proc(["session", "ls", lake.ds_url("d")], check=True).stdout.splitlines()) == 1
    assert lake.info("d")["rows"] == 0


_SP = {}


def _tokenize(line, model):
    """On a worker: a line of text as its SentencePiece ids (the model loaded once a process)."""
    import sentencepiece as spm

    sp = _SP.get(model) or _SP.setdefault(model, spm.SentencePieceProcessor(model_file=model))
    return {"ids": sp.encode(line), "text": line}


def test_dask_tokenizes_with_sentencepiece_into_a_token_column(lake, mount, tmp_path):
    """tensorfs.ingest(map=, tokens=): a SentencePiece model trained here on a small text
    tokenizes every line on the workers; the ids become one token column of one commit, in
    order, which packs."""
    import functools

    import sentencepiece as spm  # python3-sentencepiece (packaging/deps.sh): missing fails
    rng = np.random.default_rng(8)
    words = ["tensor", "mount", "chunk", "cache", "lake", "view", "token", "shard", "epoch",
             "commit", "stream", "pack", "mixture", "weight", "sample", "reader"]
    lines = [" ".join(rng.choice(words, int(rng.integers(3, 15)))) for _ in range(1200)]
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp_path / "sp"),
                                   vocab_size=60, model_type="bpe", minloglevel=2)
    model = str(tmp_path / "sp.model")
    lake.create("t")
    bag = db.from_sequence(lines, npartitions=4)
    out = tensorfs.ingest(lake.ds_url("t"), bag, map=functools.partial(_tokenize, model=model),
                          tokens="ids:uint16", tensorfs=TENSORFS_BIN)
    assert out["rows"] == len(lines) and out["parts"] == 4
    sp = spm.SentencePieceProcessor(model_file=model)
    m = mount(lake)
    v = tensorfs.open(m / "t" / "main")
    assert list(v["text"]) == lines
    ids = v["ids"]
    for i in (0, 1, 599, 1199):
        assert ids[i].dtype == np.uint16 and ids[i].tolist() == sp.encode(lines[i])
    tok = np.load(m / "t" / "main" / "views" / "pack=32,eos=0" / "tokens.npy")
    stream = np.concatenate([np.append(sp.encode(x), 0) for x in lines])
    assert np.array_equal(tok[:, :-1].ravel(), stream[:tok.shape[0] * 32])
