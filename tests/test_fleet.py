"""``serve --racks N`` / ``--gpus N``: fleet tokens/s and users from whole replicas of one serving point."""

from __future__ import annotations

import json
import math

import pytest


def test_fleet_of_racks_by_hand(cli) -> None:
    r = cli(["serve", "llama3.1-70b", "--sku", "mi355x", "--racks", "4", "--tpot", "50ms", "--no-ranges", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    f = d["fleet"][0]
    # mi355x-dlc-128: 128 GPUs per rack, so 4 racks are 512 GPUs
    assert f["gpus_per_rack"] == 128 and f["fleet_gpus"] == 512
    best = max((x for x in d["rows"] if x["sku"] == "mi355x" and x["meets_sla"]),
               key=lambda x: x["tokens_per_s_per_gpu"])
    replicas = int(512 // best["gpus"])
    assert f["replicas"] == replicas
    assert f["users"] == replicas * best["concurrency"]
    assert f["output_tokens_per_s"] == pytest.approx(best["tokens_per_s_per_gpu"] * replicas * best["gpus"])
    assert f["meets_sla"] is True and best["tpot_s"] <= 0.05


def test_fleet_table(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--gpus", "16", "--tpot", "30ms", "--no-ranges"])
    assert r.exit_code == 0, r.output
    assert "Fleet: whole replicas" in r.output


def test_bad_racks(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--racks", "0", "--no-ranges"])
    assert r.exit_code == 2


# --- with --scenario: every fleet figure is the scenario's answer ---------------------------------------

SCEN = ["serve", "llama3.1-8b", "--sku", "mi300x", "--scenario", "server", "--output-len", "256", "--pp", "1",
        "--no-ranges", "--json"]


def _scenario_fleet(cli, *extra: str) -> tuple[dict, dict, dict]:  # noqa: ANN001
    r = cli([*SCEN, *extra])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    (f,) = d["fleet"]
    best = next(x for x in d["scenario_rows"] if x["rank"] == 1)
    return d, f, best


def test_scenario_fleet_of_racks_is_the_scenario_answer_by_hand(cli) -> None:
    """1 rack of mi300x-server = 32 GPUs (profiles/racks: gpus = 32). The point is the server answer (a rate per
    replica r meeting p99 TTFT <= 2 s, p99 TPOT <= 200 ms), not the steady state's: replicas = floor(32 / g),
    requests/s = replicas x r, output tokens/s = replicas x r x 256 (fixed outputs), total adds r x 1,024
    input tokens, users = replicas x r x mean latency (Little), tok/s/user = 1 / median TPOT."""
    d, f, best = _scenario_fleet(cli, "--racks", "1")
    assert best["meets"] and f["scenario"] == "server"
    assert f["gpus_per_rack"] == 32 and f["fleet_gpus"] == 32 and f["racks"] == 1
    g = best["layout"]["tp"] * best["layout"]["pp"]
    rate = best["requests_per_s"]
    n = 32 // g
    assert f["replicas"] == n and f["gpus_in_replicas"] == n * g
    assert f["requests_per_s"] == pytest.approx(n * rate, rel=1e-12)
    assert f["output_tokens_per_s"] == pytest.approx(n * rate * 256, rel=1e-12)
    assert f["total_tokens_per_s"] == pytest.approx(n * rate * (256 + 1024), rel=1e-12)
    assert f["users"] == round(n * best["in_flight"])
    assert f["tokens_per_s_per_user"] == pytest.approx(1.0 / best["tpot_s"]["p50"])
    assert f"{rate:,.2f} req/s" in f["point"] and "server scenario" in f["basis"]
    # the steady state's best point would give another rate (the bug this guards against)
    steady = max(d["rows"], key=lambda x: x["tokens_per_s_per_gpu"])
    assert f["requests_per_s"] != pytest.approx(steady["requests_per_s"] * (32 // steady["gpus"]), rel=1e-3)


def test_scenario_cost_is_the_decode_share_at_the_answer_rate(cli) -> None:
    """$/Mtok out = $/GPU-hour / 3,600 x (1 - rho) / (output tok/s per GPU) x 1e6 with rho = r x P(1,024), the
    prefill seconds of one 1,024-token prompt (the steady-state row's prefill_s.prefill for the layout)."""
    d, f, best = _scenario_fleet(cli, "--gpus", "8")
    price = d["skus"][0]["gpu_hour_cost"]
    lay = best["layout"]
    same = next(x for x in d["rows"] if (x["layout"]["tp"], x["layout"]["pp"]) == (lay["tp"], lay["pp"]))
    rho = best["requests_per_s"] * same["prefill_s"]["prefill"]
    tps_gpu = best["requests_per_s"] * 256 / (lay["tp"] * lay["pp"])
    assert best["tokens_per_s_per_gpu"] == pytest.approx(tps_gpu, rel=1e-12)
    want = price / 3600 * (1 - rho) / tps_gpu * 1e6
    assert 0 < rho < 1
    assert best["cost_per_mtok_output"] == pytest.approx(want, rel=1e-9)
    assert f["cost_per_mtok_output"] == pytest.approx(want, rel=1e-9)


def test_demand_in_requests_sizes_replicas_gpus_and_racks_by_ceiling(cli) -> None:
    """--demand 1000req/s: replicas = ceil(1000 / r), GPUs = replicas x g, racks = ceil(GPUs / 32)."""
    d, f, best = _scenario_fleet(cli, "--demand", "1000req/s")
    g = best["layout"]["tp"] * best["layout"]["pp"]
    n = math.ceil(1000 / best["requests_per_s"])
    assert f["replicas"] == n and f["fleet_gpus"] == n * g and f["racks"] == math.ceil(n * g / 32)
    assert f["requests_per_s"] >= 1000 > (n - 1) * best["requests_per_s"]
    assert f["demand"].startswith("1,000 req/s")


def test_demand_in_output_tokens(cli) -> None:
    """--demand 2Mtok/s: replicas = ceil(2e6 / (r x 256)) (fixed 256-token outputs)."""
    d, f, best = _scenario_fleet(cli, "--demand", "2Mtok/s")
    n = math.ceil(2e6 / (best["requests_per_s"] * 256))
    assert f["replicas"] == n and f["output_tokens_per_s"] >= 2e6


def test_demand_without_a_scenario_uses_the_steady_state_point(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--tpot", "50ms", "--demand", "500req/s", "--no-ranges",
             "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    (f,) = d["fleet"]
    best = max((x for x in d["rows"] if x["meets_sla"]), key=lambda x: x["tokens_per_s_per_gpu"])
    n = math.ceil(500 / best["requests_per_s"])
    assert f["scenario"] is None and f["replicas"] == n and f["fleet_gpus"] == n * best["gpus"]


def test_a_tiny_demand_still_needs_one_replica(cli) -> None:
    d, f, best = _scenario_fleet(cli, "--demand", "1e-300req/s")
    g = best["layout"]["tp"] * best["layout"]["pp"]
    assert f["replicas"] == 1 and f["fleet_gpus"] == g and f["racks"] == 1


def test_ceiling_counts_a_whole_ratio_as_whole() -> None:
    from mi400plan.api.fleet import ceil_count

    assert ceil_count(3.0) == 3 and ceil_count(3 * (1 + 1e-12)) == 3 and ceil_count(3.001) == 4
    assert ceil_count(0.1 * 3 / 0.1) == 3  # 3.0000000000000004


@pytest.mark.parametrize("extra", [["--demand", "1000"], ["--demand", "-5req/s"], ["--demand", "0tok/s"],
                                   ["--demand", "fast"], ["--demand", "1e30req/s"],
                                   ["--demand", "10req/s", "--racks", "2"]])
def test_bad_demand_is_a_usage_error(cli, extra) -> None:  # noqa: ANN001
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--no-ranges", *extra])
    assert r.exit_code == 2, r.output
    assert "--demand" in r.output


def test_scenario_fleet_table_names_the_scenario(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "mi300x", "--scenario", "offline", "--output-len", "256", "--racks",
             "1", "--no-ranges"])
    assert r.exit_code == 0, r.output
    assert "offline scenario answer" in r.output and "Point: the offline scenario's answer" in r.output
