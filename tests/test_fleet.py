"""``serve --racks N`` / ``--gpus N``: fleet tokens/s and users from whole replicas of one serving point."""

from __future__ import annotations

import json

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
