"""The JSON contract: the envelope's exact keys, and the row fields each command documents.

Readers (CI scripts) depend on these names. Removing or renaming one is a breaking change: it needs a
CHANGELOG entry and a bump of ``schema_version``; this test is the reminder.
"""

from __future__ import annotations

import json

import pytest

ENVELOPE_KEYS = {"schema_version", "command", "status", "data", "errors"}

# command line -> (command name, documented minimum row keys, documented nested keys, other data keys)
CASES = {
    "fit": (
        ["fit", "llama3.1-8b", "--sku", "mi300x", "--sku", "h100", "--json"],
        {"sku", "layout", "fits", "capacity_bytes", "headroom_bytes", "memory_bytes", "reason"},
        {"memory_bytes": {"weights", "gradients", "optimizer", "activations", "kv_cache", "reserve", "total"}},
        {"model", "rows"},
    ),
    "sweep": (
        ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--top", "2", "--json"],
        {"sku", "layout", "memory_bytes", "step_time_s", "time_s", "tokens_per_s", "mfu"},
        {
            "layout": {"tp", "pp", "vpp", "dp", "ep", "cp", "zero", "micro_batch", "recompute"},
            "memory_bytes": {"total"},
        },
        {"rows", "evaluated", "rejected"},
    ),
    "serve": (
        ["serve", "llama3.1-8b", "--sku", "h100", "--top", "2", "--no-ranges", "--json"],
        {"sku", "layout", "concurrency", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "ttft_s", "tpot_s",
         "memory_bytes", "decode_s", "prefill_s"},
        {"layout": {"tp", "pp", "ep", "dp_attention", "replicas"}, "memory_bytes": {"total", "max_concurrency"}},
        {"rows", "evaluated", "rejected", "skus"},
    ),
    "comm": (
        ["comm", "all-reduce", "--size", "1MiB", "--group", "8", "--sku", "mi300x", "--json"],
        {"op", "algorithm", "size_bytes", "group", "tier", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"},
        {},
        {"rows"},
    ),
    "rack": (
        ["rack", "helios", "--json"],
        {
            "rack", "sku", "gpus", "it_power_w", "wall_power_w", "feed_capacity_w", "feeds_ok",
            "liquid_heat_w", "air_heat_w", "coolant_l_per_min", "airflow_m3_per_h",
        },
        {"it_power_w": {"low", "nominal", "high"}},
        {"rows"},
    ),
    "validate": (
        ["validate", "--serve", "--no-loso", "--json"],
        {"id", "dataset", "role", "source", "date", "stack", "family", "sku", "model", "measured_tokens_per_s_per_gpu",
         "predicted_tokens_per_s_per_gpu", "tput_error", "ttft_error", "tpot_error", "loso_tput_error"},
        {},
        {"mode", "rows", "groups", "sources", "loso_sources", "source_definition"},
    ),
}


@pytest.mark.parametrize("command", sorted(CASES))
def test_documented_json_contract(cli, command: str) -> None:
    argv, row_keys, nested, data_keys = CASES[command]
    result = cli(argv)
    assert result.exit_code == 0, result.output
    env = json.loads(result.stdout)
    assert set(env) == ENVELOPE_KEYS
    assert env["schema_version"] == 1
    assert env["command"] == command
    assert env["status"] == "ok" and env["errors"] == []
    data = env["data"]
    assert data_keys <= set(data), data_keys - set(data)
    assert data["rows"], "a successful run has at least one row"
    for row in data["rows"]:
        assert row_keys <= set(row), row_keys - set(row)
        for key, inner in nested.items():
            assert inner <= set(row[key]), (key, inner - set(row[key]))


def test_fit_memory_bytes_are_integers_that_add_up(cli) -> None:
    env = json.loads(cli(["fit", "llama3.1-70b", "--sku", "mi355x", "--tp", "8", "--json"]).stdout)
    mem = env["data"]["rows"][0]["memory_bytes"]
    assert all(isinstance(v, int) for v in mem.values())
    assert mem["total"] == sum(v for k, v in mem.items() if k not in ("total", "fragmentation"))
    assert 0 < mem["fragmentation"] < mem["reserve"]  # the fragmentation share is part of the reserve


def test_failed_request_is_still_an_envelope(cli) -> None:
    result = cli(["fit", "llama3.1-8b", "--sku", "mi999", "--json"])
    assert result.exit_code == 3
    env = json.loads(result.stdout)
    assert set(env) == ENVELOPE_KEYS
    assert env["status"] == "error" and env["data"] is None
    assert env["errors"][0]["code"] == "unknown_name"
    assert "did you mean" in env["errors"][0]["message"]
