"""Tables fit the terminal: secondary columns give way first, then rows print as records;
``--wide`` keeps the natural width. Nothing is cut."""

from __future__ import annotations

import io

from mi400plan.render.table import make_console, print_table

COMM_16 = ["comm", "all-reduce", "--size", "1KiB..8GiB", "--group", "16", "--sku", "mi355x"]


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def test_comm_drops_the_secondary_range_column_at_80_and_says_so(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(COMM_16).stdout
    assert max(len(line) for line in _lines(out)) <= 80
    assert "fast..slow us" not in out.split("\n")[2]  # header row
    assert "not shown at this width: fast..slow us" in " ".join(out.split())
    # one line per size for the sizes whose path is one word (the bandwidth-bound sizes)
    big = [line for line in _lines(out) if line.lstrip().startswith("8.0 GiB")]
    assert len(big) == 1 and "2x8(direct+ring)" in big[0]


def test_wide_keeps_every_column(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli([*COMM_16, "--wide"]).stdout
    assert "fast..slow us" in out and "not shown at this width" not in out
    assert max(len(line) for line in _lines(out)) > 80


def test_record_view_when_no_column_can_give_way():
    buf = io.StringIO()
    console = make_console(buf, ascii=True)
    console.width = 40
    long = "x" * 30
    print_table(console, ["", ("alpha", "right"), "beta gamma"], [["row one", long, "b1"], ["row two", "2", long]],
                title="T")
    lines = _lines(buf.getvalue())
    assert max(len(line) for line in lines) <= 40
    text = "\n".join(lines)
    assert lines[0] == "T"
    assert "row one" in lines[1] and "row two" in text  # the unlabelled first column names each record
    assert "alpha       xxxx" in text and "beta gamma  b1" in text
    assert text.count("x") == 60  # nothing cut: a word longer than the line folds onto the next


def test_table_that_fits_is_a_table():
    buf = io.StringIO()
    console = make_console(buf, ascii=True)
    console.width = 40
    print_table(console, ["a", ("b", "right")], [["x", "1"], ["y", "22"]])
    assert _lines(buf.getvalue()) == ["a   b", "-----", "x   1", "y  22"]


def test_csv_booleans_and_whole_byte_counts():
    from mi400plan.render.csvout import write_csv

    buf = io.StringIO()
    write_csv([{"fits": True, "ok": False, "memory_bytes.total": 195021630016.0, "bw_bytes_per_s": 1.5e11,
                "ratio": 2.0}], buf)
    assert buf.getvalue().splitlines() == [
        "fits,ok,memory_bytes.total,bw_bytes_per_s,ratio",
        "true,false,195021630016,150000000000.0,2.0",
    ]
