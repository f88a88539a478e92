# SPDX-License-Identifier: MIT
"""tensorfs sql: SQL over a version's columns through SQLite's virtual table, equal to pandas
evaluating the same predicates on the same data (scalars, text, JSON in text, ragged and
fixed tensors, several chunks, empty results); errors named; constraints pushed down so that
a filter on one column reads no chunk of another."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from conftest import run_proc


def records(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append({
            "label": int(rng.integers(0, 10)),
            "score": float(np.float32(rng.random())),
            "flag": bool(rng.random() < 0.3),
            "caption": f"row {i}, \"quoted\"" if i % 7 == 0 else f"row {i}",
            "meta": {"quality": "high" if rng.random() < 0.4 else "low", "n": i},
            "tok": [int(x) for x in rng.integers(0, 1000, int(rng.integers(0, 9)))],
            "emb": [float(np.float32(x)) for x in rng.random(4)],
        })
    return out


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return records(3000)


@pytest.fixture
def ds(lake, tmp_path, data):
    with open(tmp_path / "r.jsonl", "w") as f:
        for r in data:
            f.write(json.dumps(r) + "\n")
    lake.create("q")
    lake.import_("q", {}, "--jsonl", tmp_path / "r.jsonl", "--fixed", "emb",
                 "--chunk-size", "8k")
    df = pd.DataFrame(data)
    df["quality"] = [m["quality"] for m in df["meta"]]
    return lake, df


def sql(lake, query, *opts, check=True):
    return run_proc(["sql", lake.ds_url("q"), query, *opts], check=check)


def rows_json(p):
    return [json.loads(line) for line in p.stdout.splitlines()]


def test_filters_and_groups_equal_pandas(ds):
    lake, df = ds
    got = rows_json(sql(lake, "SELECT rowid, label, score FROM t WHERE label IN (1, 2) "
                              "AND score > 0.5 ORDER BY rowid", "--json"))
    want = df[df.label.isin([1, 2]) & (df.score > 0.5)]
    assert [r["rowid"] for r in got] == list(want.index)
    assert [r["label"] for r in got] == list(want.label)
    assert np.allclose([r["score"] for r in got], want.score)

    got = rows_json(sql(lake, "SELECT label, count(*) AS n, avg(score) AS m FROM t "
                              "GROUP BY label ORDER BY label", "--json"))
    want = df.groupby("label").score.agg(["count", "mean"])
    assert [r["label"] for r in got] == list(want.index)
    assert [r["n"] for r in got] == list(want["count"])
    assert np.allclose([r["m"] for r in got], want["mean"])


def test_json_output_is_json_with_exact_floats(ds):
    """--json is strict JSON that reads back every float exactly: the shortest text of each
    double, infinities as +-9e999 (as SQLite's json() writes them), no bare inf or nan."""
    lake, df = ds
    p = sql(lake, "SELECT rowid, score, 0.1 AS x, 1e308 * 10 AS big, -1e308 * 10 AS small, "
                  "1.0 / 3 AS third FROM t ORDER BY rowid LIMIT 50", "--json")
    got = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
           for line in p.stdout.splitlines()]
    assert [r["score"] for r in got] == list(df.score[:50])  # exact, not close
    assert all(r["x"] == 0.1 and r["third"] == 1.0 / 3 for r in got)
    assert all(r["big"] == float("inf") and r["small"] == float("-inf") for r in got)
    assert '"x":0.1,' in p.stdout and "inf" not in p.stdout


def test_json_in_text_bool_and_rowid(ds):
    lake, df = ds
    got = rows_json(sql(lake, "SELECT rowid FROM t WHERE json_extract(meta, '$.quality') = "
                              "'high' AND flag", "--json"))
    want = df[(df.quality == "high") & df.flag]
    assert [r["rowid"] for r in got] == list(want.index)
    got = rows_json(sql(lake, "SELECT caption, label FROM t WHERE rowid = 2023", "--json"))
    assert got == [{"caption": df.caption[2023], "label": int(df.label[2023])}]


def test_tensors_shapes_and_lengths(ds):
    lake, df = ds
    got = rows_json(sql(lake, "SELECT rowid, tok_len, length(tok) AS bytes, tok_shape, "
                              "emb_shape, length(emb) AS eb FROM t WHERE rowid BETWEEN 100 "
                              "AND 140", "--json"))
    assert [r["rowid"] for r in got] == list(range(100, 141))
    for r in got:
        n = len(df.tok[r["rowid"]])
        assert r["tok_len"] == n and r["bytes"] == 8 * n
        assert json.loads(r["tok_shape"]) == [n]
        assert json.loads(r["emb_shape"]) == [4] and r["eb"] == 32  # 4 float64
    blob = sql(lake, "SELECT tok FROM t WHERE rowid = 7", "--csv").stdout.splitlines()[1]
    assert np.array_equal(np.frombuffer(bytes.fromhex(blob), "<i8"), df.tok[7])


def test_empty_result_and_formats(ds):
    lake, df = ds
    p = sql(lake, "SELECT rowid FROM t WHERE label > 100")
    assert p.stdout.splitlines()[-1] == "(0 rows)"
    assert sql(lake, "SELECT rowid FROM t WHERE label > 100", "--json").stdout == ""
    csv = sql(lake, "SELECT rowid, caption FROM t WHERE rowid < 8 ORDER BY rowid",
              "--csv").stdout
    back = pd.read_csv(__import__("io").StringIO(csv))
    assert list(back.caption) == list(df.caption[:8])
    table = sql(lake, "SELECT label, caption FROM t WHERE rowid IN (1, 2)").stdout.splitlines()
    assert re.match(r"^label\s+caption$", table[0]) and table[-1] == "(2 rows)"


@pytest.mark.parametrize("query,why", [
    ("SELEKT 1", "syntax error"),
    ("SELECT nope FROM t", "no such column: nope"),
    ("SELECT * FROM missing", "no such table: missing"),
    ("", "no statement to run"),
    (" ;\n", "no statement to run"),
    # A statement after the first was left unrun without a word.
    ("SELECT count(*) FROM t; SELECT 1", 'one statement at a time: "SELECT 1" follows'),
    ("SELECT 1; garbage", 'one statement at a time: "garbage" follows'),
    # Writes changed nothing but the process's in-memory database and printed "(0 rows)".
    ("DROP TABLE t", "this one writes"),
    ("CREATE TABLE x(a)", "this one writes"),
])
def test_errors_are_named(ds, query, why):
    lake, _ = ds
    p = sql(lake, query, check=False)
    assert p.returncode == 1 and why in p.stderr, p.stderr
    assert p.stdout == ""


def test_one_statement_with_trailing_separators_and_comments(ds):
    lake, df = ds
    for q in ("SELECT count(*) FROM t;", "SELECT count(*) FROM t ; -- all rows\n",
              "SELECT count(*) FROM t /* all */;;"):
        assert json.loads(sql(lake, q, "--json").stdout) == {"count(*)": len(df)}


def test_attach_opens_no_file(ds, tmp_path):
    lake, _ = ds
    target = tmp_path / "other.db"
    p = sql(lake, f"ATTACH DATABASE '{target}' AS o", check=False)
    assert p.returncode == 1 and "attached databases" in p.stderr, p.stderr
    assert not target.exists()


def test_filter_on_one_column_reads_no_chunk_of_another(lake, tmp_path):
    """Pushdown, observed in the store's counters: a filter on label over a dataset with a large
    image column fetches label's chunks and none of image's."""
    rng = np.random.default_rng(1)
    np.save(tmp_path / "img.npy", rng.integers(0, 255, (1500, 32, 32, 3), dtype=np.uint8))
    labels = rng.integers(0, 10, 1500).astype(np.int64)
    np.save(tmp_path / "lab.npy", labels)
    lake.create("q")
    lake.import_("q", {"image": tmp_path / "img.npy", "label": tmp_path / "lab.npy"},
                 "--chunk-size", "64k")

    def gets(query):
        p = run_proc(["sql", lake.ds_url("q"), query, "--json", "--stats"], check=True)
        m = re.search(r"store: (\d+) gets", p.stderr)
        return int(m.group(1)), rows_json(p)

    n, got = gets("SELECT rowid FROM t WHERE label = 3")
    assert [r["rowid"] for r in got] == list(np.flatnonzero(labels == 3))
    image_chunks = 1500 * 32 * 32 * 3 // (64 << 10)
    assert n < 12, n  # manifest, commit, refs and label's chunk or two: no image chunk
    n_all, _ = gets("SELECT count(*) FROM t WHERE length(image) > 0")
    assert n_all > image_chunks, n_all


def test_in_lists_and_order_by_rowid(ds):
    """An IN list on a pushed-down column reaches the table a value at a time; ORDER BY rowid
    still orders the whole result."""
    lake, df = ds
    got = rows_json(sql(lake, "SELECT rowid FROM t WHERE label IN (7, 1) ORDER BY rowid",
                        "--json"))
    assert [r["rowid"] for r in got] == list(df[df.label.isin([1, 7])].index)
    got = rows_json(sql(lake, "SELECT rowid FROM t WHERE rowid IN (50, 3, 20) ORDER BY rowid",
                        "--json"))
    assert [r["rowid"] for r in got] == [3, 20, 50]
