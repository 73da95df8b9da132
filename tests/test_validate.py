"""``mi400plan validate``: signed errors against hand arithmetic, the group statistics, leave-one-source-out
bookkeeping, the bundled error-band table, and the band ``sweep`` prints."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mi400plan.bands import Band, band_for
from mi400plan.validate import RunMeta, bands_from, loso_errors, signed_error, summarize

DATA = Path(__file__).resolve().parents[1] / "mi400plan" / "data"


def _meta(i: int, source: str, moe: bool = False, stack: str | None = "S", family: str = "F") -> RunMeta:
    return RunMeta(id=f"r{i}", sku="h100", family=family, stack=stack, moe=moe, source=source, source_title=source)


def test_sign_convention_positive_is_optimistic() -> None:
    # measured 10 s, the model says 8 s: it predicts 25 % more tokens/s than measured, +25 %.
    assert signed_error(10.0, 8.0) == pytest.approx(0.25)
    assert signed_error(8.0, 10.0) == pytest.approx(-0.2)


def test_group_statistics_by_hand() -> None:
    pts = [(_meta(0, "a"), 0.10), (_meta(1, "a", moe=True, stack=None), -0.30), (_meta(2, "b", family="G"), 0.02)]
    stats = {(s.group, s.name): s for s in summarize(pts)}
    assert stats[("all", "all")].runs == 3
    assert stats[("all", "all")].mean == pytest.approx((0.10 - 0.30 + 0.02) / 3)
    assert stats[("all", "all")].mean_abs == pytest.approx(0.42 / 3)
    assert stats[("all", "all")].max_abs == pytest.approx(0.30)
    assert stats[("moe", "dense")].runs == 2 and stats[("moe", "MoE")].mean == pytest.approx(-0.30)
    assert stats[("stack", "S")].runs == 2  # the run without a stack is in no stack group
    assert stats[("family", "G")].mean_abs == pytest.approx(0.02)


def test_loso_refits_without_the_held_out_source() -> None:
    metas = [_meta(0, "a"), _meta(1, "b"), _meta(2, "a"), _meta(3, "c")]
    seen = []

    def refit(train, test):
        seen.append((tuple(train), tuple(test)))
        return [100.0 + i for i in test]

    out, sources = loso_errors(metas, refit)
    assert sources == ["a", "b", "c"]
    assert seen == [((1, 3), (0, 2)), ((0, 2, 3), (1,)), ((0, 1, 2), (3,))]
    assert out == [100.0, 101.0, 102.0, 103.0]
    assert loso_errors(metas[:1], refit) == ([None], [])  # one source: nothing to hold out


def test_band_selection_and_text() -> None:
    pts = [(_meta(i, "a"), e) for i, e in enumerate((0.1, -0.2, 0.3))] + [(_meta(9, "b", moe=True), 0.5)]
    bands = bands_from(pts)
    assert [(b.kind, b.stack, b.runs) for b in bands] == [("dense", None, 3), ("dense", "S", 3)]  # MoE: 1 run < 3
    assert bands[0].mean_abs == pytest.approx(0.2) and bands[0].max_abs == pytest.approx(0.3)
    assert band_for(bands, moe=False, stack="S") == bands[1]
    assert band_for(bands, moe=False, stack="other") == bands[0]
    assert band_for(bands, moe=True, stack=None) is None
    assert Band("dense", "Megatron-Core", 41, 0.0912, 0.3).text() == "+-9 % (dense, Megatron-Core, 41 runs)"


def test_bundled_runs_cli_reports_each_signed_error(cli) -> None:
    r = cli(["validate", "--no-loso", "--json"])
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["command"] == "validate" and env["status"] == "ok"
    d = env["data"]
    with (DATA / "train_validation.csv").open(newline="") as f:
        rows = {x["id"]: x for x in csv.DictReader(f)}
    assert len(d["rows"]) + len(d["skipped"]) == len(rows) == 71
    for row in d["rows"]:
        src = rows[row["id"]]
        # measured step by hand: global batch x sequence / (tokens/s per GPU x GPUs)
        step = int(src["gbs"]) * int(src["seq"]) / (float(src["tokens_per_s_per_gpu"]) * int(src["gpus"]))
        assert row["measured_s"] == pytest.approx(step, rel=1e-12)
        assert row["error"] == pytest.approx(row["measured_s"] / row["predicted_s"] - 1, rel=1e-12)
        assert row["stack"] == src["stack"] and row["loso_error"] is None
    overall = next(g for g in d["groups"] if g["group"] == "all")
    # the same figures as tests/test_validation_train.py's pinned ones (one model, one capacity check)
    assert overall["mean_abs"] == pytest.approx(0.107, abs=0.001) and overall["max_abs"] == pytest.approx(0.482, abs=0.001)
    assert {g["name"] for g in d["groups"] if g["group"] == "moe"} == {"dense", "MoE"}
    assert d["loso_sources"] == 0 and d["loso_groups"] == []


def test_a_users_runs_file(cli) -> None:
    runs = Path(__file__).parent / "data" / "calibrate" / "runs.toml"
    r = cli(["validate", str(runs), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert len(d["rows"]) == 5 and {x["family"] for x in d["rows"]} == {"AMD CDNA 4"}
    assert d["loso_sources"] == 0  # one file is one source: nothing to hold out
    one = cli(["validate", str(runs), "--write-bands", str(runs.parent / "bands.json")])
    assert one.exit_code == 2 and "two" in one.output  # one source: no cross-validated band to write
    bad = cli(["validate", str(runs.parent / "missing.toml")])
    assert bad.exit_code in (2, 3) and "missing.toml" in bad.output


def test_schema_names_validate(cli) -> None:
    r = cli(["schema", "validate"])
    assert r.exit_code == 0, r.output
    assert "ValidateRow" in json.loads(r.stdout)["$defs"]


def test_sweep_prints_the_bundled_band(cli) -> None:
    bands = json.loads((DATA / "error_bands.json").read_text())["bands"]
    dense = next(b for b in bands if b["kind"] == "dense" and b["stack"] is None)
    r = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--no-ranges", "--top", "1", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["data"]["rows"][0]
    assert row["error_band"] == dense["mean_abs"]
    assert row["error_band_text"] == f"+-{dense['mean_abs'] * 100:.0f} % (dense, all stacks, {dense['runs']} runs)"
    t = cli(["sweep", "llama3.1-8b", "--sku", "h100", "--gpus", "8", "--no-ranges", "--top", "1"], env={"COLUMNS": "200"})
    assert "empirical error band" in " ".join(t.output.split())


@pytest.mark.slow
def test_bundled_band_table_matches_a_fresh_computation(catalog, tmp_path) -> None:
    """``mi400plan/data/error_bands.json`` is what ``validate --write-bands`` computes now (about 40 s:
    the leave-one-source-out refits)."""
    from mi400plan.api.validate import validate

    res = validate(catalog, write_bands=str(tmp_path))
    fresh = json.loads((tmp_path / "error_bands.json").read_text())
    assert fresh == json.loads((DATA / "error_bands.json").read_text())
    assert res.loso_sources == 13 and res.loso_seconds < 300  # + Megatron-Bridge 26.06, MLPerf v5.0, MLPerf v5.1 GB200 / GB300 / MI355X


def test_a_users_sources_and_stacks_group_and_cross_validate(cli, tmp_path) -> None:
    """Runs that name a source and a stack: grouped by stack, and each source held out in turn (the
    MI355X runs of the other source refit the matmul efficiency, 3 runs a parameter)."""
    src = (Path(__file__).parent / "data" / "calibrate" / "runs.toml").read_text()
    blocks = src.split("[[run]]")
    head, runs = blocks[0], blocks[1:]
    tagged = [f'[[run]]\nsource = "{"A" if i % 2 else "B"}"\nstack = "S{i % 2}"' + b for i, b in enumerate(runs * 2)]
    for i in range(len(tagged)):  # distinct names
        tagged[i] = tagged[i].replace('name = "', f'name = "{i}-', 1)
    f = tmp_path / "runs.toml"
    f.write_text(head + "".join(tagged))
    r = cli(["validate", str(f), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["loso_sources"] == 2 and len(d["rows"]) == 2 * len(runs)
    assert {g["name"] for g in d["groups"] if g["group"] == "stack"} == {"S0", "S1"}
    assert all(x["loso_error"] is not None for x in d["rows"])
