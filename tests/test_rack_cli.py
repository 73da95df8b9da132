"""``mi400plan rack`` on the command line: JSON contract, exit codes, table output."""

from __future__ import annotations

import json
import re

import pytest

ROW_KEYS = {
    "rack",
    "sku",
    "gpus",
    "it_power_w",
    "wall_power_w",
    "feed_capacity_w",
    "feeds_ok",
    "liquid_heat_w",
    "air_heat_w",
    "coolant_l_per_min",
    "airflow_m3_per_h",
}


def test_json_envelope_and_row_keys(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--json"])
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["command"] == "rack" and env["status"] == "ok" and env["schema_version"] == 1
    row = env["data"]["rows"][0]
    assert ROW_KEYS <= set(row)
    assert set(row["it_power_w"]) == {"low", "nominal", "high"}
    assert row["rack"] == "helios" and row["sku"] == "mi455x" and row["gpus"] == 72
    assert isinstance(row["feeds_ok"], bool)


def test_check_exits_4_when_feeds_over_budget(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--feeds", "2x415V3ph60A", "--check"])
    assert r.exit_code == 4, r.output
    assert "deficit" in r.stdout and "would need" in r.stdout
    assert "sqrt(3) x 415 V x 60 A" in r.stdout


def test_check_passes_with_enough_feeds(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "gb200-nvl72", "--feeds", "4x415V3ph125A", "--check", "--air-limit-kw", "200"])
    assert r.exit_code == 0, r.output


def test_bad_feed_spec_exits_2(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--feeds", "4x415V"])
    assert r.exit_code == 2, r.output
    assert "cannot read feed set" in r.output and "4x415V3ph60A" in r.output


def test_bad_feed_spec_json_error_envelope(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--feeds", "lots", "--json"])
    assert r.exit_code == 2
    env = json.loads(r.stdout)
    assert env["status"] == "error" and env["errors"][0]["code"] == "usage"


def test_unknown_rack_exits_3_with_suggestion(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helio"])
    assert r.exit_code == 3, r.output
    assert "did you mean" in r.output and "helios" in r.output


def test_odd_feed_count_with_2n_is_usage_error(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--feeds", "3x415V3ph125A", "--redundancy", "2N"])
    assert r.exit_code == 2, r.output


def test_racks_and_gpus_together_is_usage_error(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--racks", "2", "--gpus", "100"])
    assert r.exit_code == 2, r.output


def test_comparison_table_for_several_racks(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "gb200-nvl72", "vr200-nvl144", "--ascii"])
    assert r.exit_code == 0, r.output
    for word in ("Rack comparison", "helios", "gb200-nvl72", "vr200-nvl72", "GPUs/MW", "FP8 PF/kW"):
        assert word in r.stdout


def test_sku_override_and_glycol(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "mi355x-dlc-128", "--sku", "mi350x", "--coolant", "glycol25", "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)["data"]["rows"][0]
    assert row["sku"] == "mi350x"
    gpu = next(c for c in row["components"] if c["kind"] == "gpu")
    assert gpu["each_w"]["nominal"] == 1000  # MI350X TDP replaces MI355X's 1,400 W
    assert row["cooling"]["coolant"] == "glycol25"


def test_facility_table_output(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--gpus", "1000", "--price-per-kwh", "0.08", "--pue", "1.25"])
    assert r.exit_code == 0, r.output
    assert "Facility for 1,000 GPUs: 14 racks" in r.stdout and "USD/day" in r.stdout


def test_csv_output(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "--format", "csv"])
    assert r.exit_code == 0, r.output
    header = r.stdout.splitlines()[0]
    assert "wall_power_w" in header and "feeds.arithmetic" in header


def test_comparison_at_80_columns_loses_no_column_or_value(cli, monkeypatch) -> None:  # noqa: ANN001
    # A narrow terminal used to drop the last columns and print "gb200…", "143.…" instead of values.
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(["rack", "helios", "gb200-nvl72", "mi355x-dlc-128", "mi300x-server"])
    assert r.exit_code == 0, r.output
    assert "\u2026" not in r.stdout
    for name in ("helios", "gb200-nvl72", "mi355x-dlc-128", "mi300x-server", "feeds", "kW/rack", "GPUs/MW"):
        assert name in r.stdout
    # every line fits, and each kW low-high range stays whole on one line, e.g. "143.2-215.4"
    assert all(len(ln.rstrip()) <= 80 for ln in r.stdout.splitlines())
    assert re.search(r"\b\d+\.\d-\d+\.\d\b", r.stdout)


def test_wording_states_dense_fp8_dc_load_and_reference_direction(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios"])
    assert r.exit_code == 0, r.output
    # FP8 per kW is the dense peak: 72 x 20,132.7 TFLOP/s = 1,449.6 PFLOP/s over the nominal wall power
    assert "dense FP8" in r.stdout
    row = json.loads(cli(["rack", "helios", "--json"]).stdout)["data"]["rows"][0]
    assert row["fp8_pflops_per_kw"] == pytest.approx(72 * 20_132.7 / 1_000 / (row["wall_power_w"] / 1e3))
    # the PSU line says what its DC figure is (components / distribution efficiency, above the component sum)
    assert "DC load (components / DC distribution efficiency)" in r.stdout
    # nominal wall power vs S000's 180-220 kW: the message says on which side the nominal lies
    ref = row["reference"]
    if ref["verdict"] == "overlaps":
        side = "below" if row["wall_power_w"] < 180_000 else "above"
        assert f"nominal estimate is {side} the reference range" in ref["message"]


def test_comparison_header_says_dense_fp8(cli) -> None:  # noqa: ANN001
    r = cli(["rack", "helios", "gb200-nvl72"])
    assert "dense FP8 PF/kW" in r.stdout


def test_csv_columns_are_the_json_row_fields(cli) -> None:  # noqa: ANN001
    # helios has a reference power check and mi355x-dlc-128 has none: the CSV used to get both a
    # "reference" column and "reference.*" columns. Components are rows of their own (component.*),
    # one per component line of each rack, after the rack's columns.
    import csv
    import io

    for racks in (["helios", "mi355x-dlc-128"], ["mi355x-dlc-128"], ["helios", "--racks", "2"]):
        rows = json.loads(cli(["rack", *racks, "--json"]).stdout)["data"]["rows"]
        reader = csv.DictReader(io.StringIO(cli(["rack", *racks, "--format", "csv"]).stdout))
        got, header = list(reader), reader.fieldnames
        assert len(got) == sum(len(r["components"]) for r in rows)
        assert "components" not in header and "reference" not in header and "facility" not in header
        assert "reference.verdict" in header and "facility.racks" in header
        assert {"component.component", "component.count", "component.total_w.nominal"} <= set(header)
        first = rows[0]
        mine = [g for g in got if g["rack"] == first["rack"]]
        assert [g["component.component"] for g in mine] == [c["component"] for c in first["components"]]
        assert [int(g["component.count"]) for g in mine] == [c["count"] for c in first["components"]]
        assert all(g["wall_power_w"] == mine[0]["wall_power_w"] for g in mine)
