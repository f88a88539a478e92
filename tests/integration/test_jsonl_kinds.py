# SPDX-License-Identifier: MIT
"""A JSON Lines file is read once on a guess of its fields' kinds (the first object's and the
megabyte of lines after it). A row that widens a field past the guess (a float in a field of
integers, a token id past uint16), megabytes into the file, makes the import read the rows
again with the guess widened; a row past that guess too, and every line is read for the kinds
first. Whichever way: the columns take every row's kind and every value, the bad rows are
skipped and named once each, and the chunks are the same whatever the thread count."""
import json
import re

import numpy as np
import pytest

ROWS = 40000


def write(path, widen_at, tokens_past_at, rows=ROWS):
    """~5 MB of rows: `x` an integer until row widen_at (a float there and after), `tok` ids
    below 2**16 until row tokens_past_at, a bad row every 1,999 lines. Returns the good rows,
    the bad lines (1-based) and the first line past the guess (a float x or an id past
    uint16; None if none is)."""
    rng = np.random.default_rng(11)
    good, bad, past = [], [], None
    with open(path, "w") as f:
        for i in range(rows):
            if i % 1999 == 10:
                f.write('{"x": "not a number", "tok": [], "t": "bad"}\n')
                bad.append(i + 1)
                continue
            top = 70000 if i >= tokens_past_at else 60000
            r = {"x": i + 0.5 if i >= widen_at else i,
                 "tok": [int(v) for v in rng.integers(0, top, i % 7)],
                 "t": "row %d %s" % (i, "x" * (i % 90))}
            f.write(json.dumps(r) + "\n")
            good.append(r)
            if past is None and (i >= widen_at or max(r["tok"], default=0) > 65535):
                past = i + 1
    return good, bad, past


@pytest.mark.parametrize("case", ["float", "tokens", "both"])
def test_a_late_widening_reads_the_rows_again(lake, mount, tmp_path, case):
    import tensorfs

    src = tmp_path / "rows.jsonl"
    good, bad, past = write(src, ROWS if case == "tokens" else 30000,
                            ROWS if case == "float" else 35000)
    assert src.stat().st_size > 4 << 20  # the widening row is past the guessed megabyte
    seen = {}
    for th in (1, 3):
        ds = f"d{th}"
        lake.create(ds)
        p = lake.import_(ds, {}, "--jsonl", src, "--tokens", "tok", "--chunk-size", "64k",
                         "--threads", th)
        out = p.stdout + p.stderr
        assert f"imported {len(good)} rows, skipped {len(bad)}" in p.stdout, out
        field = "tok" if case == "tokens" else "x"
        assert re.search(rf"line {past}: field '{field}' holds .*: the rows are read again "
                         "with it widened", out), out
        # A second row past the widened guess (both): every line read for the kinds first.
        assert ("every line is read for the columns' kinds" in out) == (case == "both"), out
        for n in bad:  # each bad row named once, though two readings met it
            assert len(re.findall(rf"warning: line {n}: field 'x' holds another", out)) == 1, (n, out)
        seen[th] = lake.chunk_ids(ds)
    assert seen[1] == seen[3]
    m = mount(lake)
    cols = tensorfs.open(m / "d3" / "main")
    x = np.asarray(cols["x"])
    assert x.dtype == (np.int64 if case == "tokens" else np.float64)
    assert x.tolist() == [r["x"] for r in good]
    assert [v.tolist() for v in cols["tok"]] == [r["tok"] for r in good]
    assert cols["tok"][0].dtype == (np.uint16 if case == "float" else np.uint32)
    assert list(cols["t"]) == [r["t"] for r in good]


def test_a_guess_that_holds_reads_once(lake, mount, tmp_path):
    """Kinds the first megabyte already shows (a float on the second line) need no second
    reading; the chunks equal those of an import whose guess failed on the same rows' kinds."""
    import tensorfs

    src = tmp_path / "rows.jsonl"
    good, bad, _ = write(src, 1, ROWS)
    lake.create("d")
    p = lake.import_("d", {}, "--jsonl", src, "--tokens", "tok:uint16", "--chunk-size", "64k")
    out = p.stdout + p.stderr
    assert f"imported {len(good)} rows, skipped {len(bad)}" in p.stdout, out
    assert "read again" not in out, out
    m = mount(lake)
    x = np.asarray(tensorfs.open(m / "d" / "main")["x"])
    assert x.dtype == np.float64 and x.tolist() == [r["x"] for r in good]


@pytest.mark.parametrize("bad_id", ["past uint16", "negative"])
def test_token_errors_after_the_guess(lake, tmp_path, bad_id):
    """Past the guessed megabyte: a token id over an explicit uint16, or a negative one, fails
    the import as it did when every row was read first, and nothing is committed."""
    src = tmp_path / "rows.jsonl"
    write(src, ROWS, 35000 if bad_id == "past uint16" else ROWS)
    if bad_id == "negative":
        with open(src, "a") as f:
            f.write(json.dumps({"x": 1, "tok": [5, -3], "t": "last"}) + "\n")
    lake.create("e")
    before = lake.snapshot("e")
    p = lake.import_("e", {}, "--jsonl", src, "--tokens",
                     "tok:uint16" if bad_id == "past uint16" else "tok", check=False)
    want = "(0 to 65535)" if bad_id == "past uint16" else "id -3 is not a token id"
    assert p.returncode != 0 and want in p.stderr, p.stderr
    assert lake.snapshot("e") == before
