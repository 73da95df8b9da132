"""``profiles list`` as one line per profile (the figures people compare), ``--kind models`` with
parameter counts, ``--wide`` for sources and notes, and ``profiles show`` grouped by section with long
notes under each table -- at 80 and 120 columns and piped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mi400plan.profiles import Catalog


def _names(kind: str) -> list[str]:
    return Catalog.default([]).names(kind)


@pytest.mark.parametrize("columns", ["80", "120", None])
def test_list_is_one_line_per_profile(cli, monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)  # piped: natural width
    else:
        monkeypatch.setenv("COLUMNS", columns)
    out = cli(["profiles", "list"]).stdout
    lines = out.splitlines()
    for kind in ("accelerators", "fabrics", "racks", "models", "costs"):
        for name in _names(kind):
            starts = [ln for ln in lines if ln.split()[:1] == [name]]
            assert starts, (kind, name)
    assert "────" not in out  # no record view
    total = sum(len(_names(k)) for k in ("accelerators", "fabrics", "racks", "models", "costs"))
    assert len(lines) < 2 * total  # 826 lines at 80 columns before (each profile a record)
    if columns is not None:
        assert max(len(ln.rstrip()) for ln in lines) <= int(columns)


def test_accelerator_line_has_vendor_year_hbm_peaks_and_tdp(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(["profiles", "list", "--kind", "accelerators"]).stdout
    assert re.search(r"^vendor|\bvendor\b", out, re.M) and "TDP" in out
    # MI355X: 288 GiB = 288 x 2^30 B = 309.2 GB; BF16 2,516.6 TFLOP/s = 2.52 PF, FP8 5.03, FP4 10.07; 1,400 W
    row = next(ln for ln in out.splitlines() if ln.startswith("mi355x "))
    assert row.split() == ["mi355x", "AMD", "2025", "309.2", "2.52", "5.03", "10.07", "1,400"]
    assert "roadmap" in next(ln for ln in out.splitlines() if ln.startswith("mi500 "))


def test_models_show_parameter_counts_layers_and_context(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(["profiles", "list", "--kind", "models"]).stdout
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines() if ln.split()}
    # Llama 3.1 8B: 8.03B parameters (model card), 32 layers, 128K = 131,072 tokens of context
    assert rows["llama3.1-8b"][1:5] == ["8.0", "8.0", "32", "131,072"]
    # DeepSeek-V3: 671B total, 37B active (technical report; 37.6 counting the shared MTP-free stack), 61 layers
    total, active = float(rows["deepseek-v3"][1].replace(",", "")), float(rows["deepseek-v3"][2])
    assert abs(total - 671) < 1 and 37 <= active < 38.5 and rows["deepseek-v3"][3] == "61"
    data = json.loads(cli(["profiles", "list", "--kind", "models", "--json"]).stdout)["data"]["rows"]
    llama = next(r for r in data if r["name"] == "llama3.1-70b")
    assert llama["num_layers"] == 80 and llama["max_seq_len"] == 131072
    assert 70.0e9 < llama["params_total"] < 71.0e9 and llama["params_total"] == llama["params_active"]


def test_wide_adds_sources_and_notes(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    plain = cli(["profiles", "list", "--kind", "accelerators"]).stdout
    wide = cli(["profiles", "list", "--kind", "accelerators", "--wide"]).stdout
    header = re.compile(r"^name +vendor .* status +aliases +origin .* sources\s*$", re.M)
    assert not header.search(plain) and header.search(wide), wide[:600]
    assert "bundled" not in plain and re.search(r"^mi355x .* bundled ", wide, re.M)
    assert "notes:" not in plain and re.search(r"^notes:\n", wide, re.M)
    assert re.search(r"^  mi355x: \(1\) FP6 runs on the FP4 datapath", wide, re.M)  # notes after the table
    assert "FP4 formats: OCP MXFP4 only" in " ".join(wide.split())


@pytest.mark.parametrize("columns", ["80", "120"])
def test_show_groups_fields_and_puts_long_notes_after_the_table(cli, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    out = cli(["profiles", "show", "mi355x"]).stdout
    lines = out.splitlines()
    assert all(len(ln.rstrip()) <= int(columns) for ln in lines)
    assert "────" not in out
    sections = [ln.strip() for ln in lines if re.fullmatch(r"(silicon|memory|compute|power|interconnect|efficiency)\s*", ln)]
    assert sections[:4] == ["silicon", "memory", "compute", "power"]
    mem = lines.index(next(ln for ln in lines if ln.strip() == "memory"))
    cap = next(i for i in range(mem, len(lines)) if lines[i].startswith("hbm_capacity"))
    assert lines[cap].rstrip().endswith("[1]")
    note = next(i for i in range(cap, len(lines)) if lines[i].startswith("  [1] vendor: '288 GB HBM3E'"))
    assert note > cap and not lines[note - 1].startswith("  [")  # the note follows the memory table
    assert len(lines) < 200  # 288 lines at 120 columns before


KINDS = ("accelerators", "fabrics", "racks", "models", "costs")


def _shows_as_a_table_within_80_columns(cli, kind: str, name: str) -> None:  # noqa: ANN001
    out = cli(["profiles", "show", name, "--kind", kind]).stdout
    assert "────" not in out, (kind, name)
    assert all(len(ln.rstrip()) <= 80 for ln in out.splitlines()), (kind, name)


def _widest(kind: str) -> str:
    """The profile of ``kind`` whose file is longest (the most fields, sources and notes to lay out)."""
    cat = Catalog.default([])
    return max(_names(kind), key=lambda n: (len(Path(cat.get(kind, n).path).read_text(encoding="utf-8")), n))


@pytest.mark.parametrize("kind", KINDS)
def test_the_fullest_profile_of_each_kind_shows_as_records_nowhere_at_80_columns(cli, monkeypatch, kind):
    monkeypatch.setenv("COLUMNS", "80")
    for name in sorted({_names(kind)[0], _widest(kind)}):
        _shows_as_a_table_within_80_columns(cli, kind, name)


@pytest.mark.slow  # every bundled profile: 5-10 s (the fullest of each kind is checked above, quickly)
def test_no_bundled_profile_shows_as_records_at_80_columns(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    for kind in KINDS:
        for name in _names(kind):
            _shows_as_a_table_within_80_columns(cli, kind, name)
