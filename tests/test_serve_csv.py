"""What a reader of ``serve --format csv`` and ``--json`` sees: each row names the serving stack that
priced it, counts are integers, and a sizing error prints the flags as they were typed."""

from __future__ import annotations

import csv
import io
import json

import pytest

# The vendors' reference stacks (profiles/serving: trtllm for NVIDIA, rocm-vllm for AMD).
DEFAULT_STACK = {"mi300x": "rocm-vllm", "b200": "trtllm"}


def _csv(cli, args: list[str]) -> list[dict[str, str]]:  # noqa: ANN001
    r = cli([*args, "--format", "csv"])
    assert r.exit_code == 0, r.output
    return list(csv.DictReader(io.StringIO(r.stdout)))


@pytest.mark.parametrize("extra", [[], ["--scenario", "offline"]], ids=["steady-state", "scenario"])
def test_every_csv_row_names_its_serving_stack(cli, extra):  # noqa: ANN001
    args = ["serve", "llama3-70b", "--sku", "mi300x,b200", *extra]
    rows = _csv(cli, args)
    skus = {s["sku"]: s["serving_stack"] for s in json.loads(cli([*args, "--json"]).stdout)["data"]["skus"]}
    assert {r["sku"] for r in rows} == {"mi300x", "b200"}
    for r in rows:
        assert r["serving_stack"].split(" ")[0] == DEFAULT_STACK[r["sku"]]
        assert r["serving_stack"] == skus[r["sku"]]  # the JSON's skus[].serving_stack, word for word
    header = list(rows[0])
    assert header.index("serving_stack") == header.index("sku") + 1


def test_stack_flag_shows_in_every_row(cli):  # noqa: ANN001
    rows = _csv(cli, ["serve", "llama3-70b", "--sku", "b200", "--stack", "vllm"])
    assert rows and all(r["serving_stack"].startswith("vllm ") for r in rows)


@pytest.mark.parametrize("extra", [[], ["--scenario", "offline"]], ids=["steady-state", "scenario"])
def test_gpu_counts_are_integers_in_csv_and_json(cli, extra):  # noqa: ANN001
    args = ["serve", "llama3-70b", "--sku", "mi300x", "--gpus", "8", *extra]
    for r in _csv(cli, args):
        assert r["layout.prefill_gpus_per_decode_replica"] == "0"  # was "0.0" (aggregated: no prefill pool)
        assert r["layout.gpus_per_replica"] in ("1", "2", "4", "8")
        assert "gpus" not in r or r["gpus"] in ("1", "2", "4", "8")
    data = json.loads(cli([*args, "--json"]).stdout)["data"]
    rows = data["scenario_rows"] if extra else data["rows"]
    for r in rows:
        assert type(r["layout"]["prefill_gpus_per_decode_replica"]) is int
        if not extra:
            assert type(r["gpus"]) is int and r["gpus"] == r["layout"]["gpus_per_replica"]


def test_fleet_gpu_counts_are_integers_in_json(cli):  # noqa: ANN001
    fleet = json.loads(cli(["serve", "llama3-70b", "--sku", "mi300x", "--racks", "2", "--json"]).stdout)["data"]["fleet"]
    (f,) = fleet
    assert type(f["gpus_per_replica"]) is int and type(f["gpus_in_replicas"]) is int
    assert f["gpus_in_replicas"] == f["replicas"] * f["gpus_per_replica"]


def test_disaggregated_prefill_gpus_stay_fractional(cli):  # noqa: ANN001
    """A prefill pool sized to the decode pool's request rate is a ratio: it keeps its fraction."""
    rows = json.loads(cli(["serve", "llama3-70b", "--sku", "mi300x", "--disagg", "--json"]).stdout)["data"]["rows"]
    ratios = [r["layout"]["prefill_gpus_per_decode_replica"] for r in rows]
    assert any(isinstance(x, float) and not x.is_integer() for x in ratios)


def test_a_sizing_error_prints_list_flags_as_typed(cli, monkeypatch):  # noqa: ANN001
    import mi400plan.api.fleet as fleet

    def overflow(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise OverflowError("math range error")

    monkeypatch.setattr(fleet, "serve_fleet", overflow)
    r = cli(["serve", "llama3-70b", "--sku", "mi300x,b200", "--concurrency", "1,4"])
    assert r.exit_code == 2
    text = " ".join(r.output.split())
    assert "--sku mi300x,b200" in text and "--concurrency 1,4" in text
    assert "[" not in text.split("numbers given")[1]  # no Python list repr
    assert "model llama3-70b" not in text  # the positional MODEL is no flag


def test_scenario_limits_read_as_typed_and_no_rate_note_only_with_limits(cli):  # noqa: ANN001
    base = ["serve", "llama3-70b", "--sku", "b200", "--format", "md", "--candidates", "1"]
    r = cli([*base, "--scenario", "server", "--ttft-p99", "1.5s", "--tpot-p99", "40ms"])
    assert r.exit_code == 0, r.output
    assert "p99 TTFT <= 1.5 s, p99 TPOT <= 40 ms" in r.stdout  # were "1,500 ms" and "40.0 ms"
    assert "'no: X' where no rate meets the limits" in r.stdout
    r = cli([*base, "--scenario", "single-stream"])
    assert r.exit_code == 0, r.output
    assert "no latency limits" in r.stdout and "no rate meets" not in r.stdout


def test_fleet_point_names_the_layout_as_the_tables_do(cli):  # noqa: ANN001
    """The fleet's point reads as the layout column (``TP1 x 227 in flight``): no ``PP1``."""
    res = json.loads(cli(["serve", "llama3-70b", "--sku", "mi300x", "--racks", "1", "--pp", "1", "--json"]).stdout)
    (f,) = res["data"]["fleet"]
    assert "PP" not in f["point"] and f["point"].startswith("TP") and f["point"].endswith(" in flight")
