"""The one width rule for tables (``render.table.output_width``): ``--width``, else a usable $COLUMNS
(20 to 1,000), else the terminal's width, else -- output that is not a terminal -- natural width;
and a label glued to its value (``mem 4%``) is never split inside a cell."""

from __future__ import annotations

import io
import re

import pytest

from mi400plan.render.table import KEEP, NATURAL_WIDTH, make_console, output_width, print_table


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        raise OSError("no file descriptor")  # a terminal that will not say its size


@pytest.mark.parametrize("columns", ["0", "-5", "abc", "7", "99999999", ""])
def test_unusable_columns_are_unknown(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    assert output_width(io.StringIO()) == NATURAL_WIDTH  # piped: natural width
    assert output_width(_Tty()) == 80  # a terminal of unknown size: the common 80


def test_width_flag_beats_columns_and_columns_beats_the_pipe(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert output_width(io.StringIO()) == 80
    assert output_width(io.StringIO(), 120) == 120
    monkeypatch.delenv("COLUMNS")
    assert output_width(io.StringIO()) == NATURAL_WIDTH


def test_a_piped_table_prints_whole_rows_not_records(cli, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = cli(["rack", "helios"]).stdout
    assert "────" not in out  # the record view's row rule
    assert re.search(r"^tray +component +count +W each +kW total", out, re.M), out[:400]
    assert re.search(r"^compute +MI455X +72 ", out, re.M)


def test_columns_zero_prints_the_table_at_natural_width(cli):
    out = cli(["rack", "helios"], env={"COLUMNS": "0"}).stdout
    assert re.search(r"^compute +MI455X +72 ", out, re.M)
    assert max(len(line.rstrip()) for line in out.splitlines()) > 100


@pytest.mark.parametrize("width", ["80", "120"])
def test_width_flag_lays_out_for_that_width(cli, width):
    out = cli(["rack", "helios", "--width", width], env={"COLUMNS": "300"}).stdout
    assert max(len(line.rstrip()) for line in out.splitlines()) <= int(width)


def test_width_flag_outside_its_range_is_a_usage_error(cli):
    r = cli(["rack", "helios", "--width", "5"])
    assert r.exit_code == 2 and "--width" in r.output


def test_glued_pairs_stay_on_one_line_at_any_width():
    cells = [["1", f"comp{KEEP}72% attn{KEEP}24% mem{KEEP}4% dp{KEEP}1%"]]
    for width in (20, 24, 30, 40):
        buf = io.StringIO()
        console = make_console(buf, width=width)
        print_table(console, ["#", "breakdown (% of step)"], cells)
        out = buf.getvalue()
        for pair in ("comp 72%", "attn 24%", "mem 4%", "dp 1%"):
            assert pair in out, (width, out)
        assert KEEP not in out


@pytest.mark.parametrize("columns", ["80", "120"])
def test_sweep_breakdown_never_splits_a_label_from_its_value(cli, columns):
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--top", "5", "--no-ranges"],
            env={"COLUMNS": columns})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "breakdown (% of step)" in line)
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Order:"))
    table = lines[start + 2:end]
    assert len(table) >= 5
    for line in table:
        assert not re.search(r"\b(comp|attn|mem|tp|cp|ep|pp|bubble|dp|opt|offl|host)\s*$", line), line
        assert not re.match(r"^\s+\d+%", line[line.find("GiB"):] if "GiB" in line else line), line
    assert max(len(line.rstrip()) for line in lines) <= int(columns)
