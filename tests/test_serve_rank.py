"""``serve``'s SKU comparison under an SLA and ``--rank-by``: hand-built points with hand-worked answers,
and the command's contract."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest


def _res(tps_user, out_tps, rho, price, sla, ttft=None):  # noqa: ANN001, ANN202
    """A ``_search_sku`` result of one SKU: every point fits, one layout per point."""
    n = len(tps_user)
    ev = {"tps_user": np.array(tps_user, float), "out_tps_gpu": np.array(out_tps, float), "rho": np.array(rho, float),
          "tpot": 1.0 / np.array(tps_user, float), "ttft": np.array(ttft or [0.5] * n, float),
          "gpus": np.full(n, 8.0)}
    sku = SimpleNamespace(info=SimpleNamespace(gpu_hour_cost=price))
    return {"ev": ev, "fit": np.ones(n, bool), "sla": sla, "ranges": False, "sku": sku,
            "b": np.arange(1.0, n + 1), "dpa": np.zeros(n, bool), "ep": np.ones(n), "pp": np.ones(n),
            "tp": np.arange(1.0, n + 1)}


def test_levels_looser_than_the_sla_drop_its_floor():
    # Points at 60, 25 and 12 tok/s/user giving 1,000, 3,000 and 5,000 tok/s/GPU, SLA >= 50 tok/s/user.
    # Level 10: all three qualify -> 5,000; level 20: 60 and 25 -> 3,000; 30 and 50: only 60 -> 1,000;
    # 75: none. (The SLA's floor applied to every level would give 1,000 at 10 and 20.)
    from mi400plan.api.serve import _compare

    sla = {"interactivity": 50.0}
    per = {"a": _res([60, 25, 12], [1000, 3000, 5000], [0.1] * 3, 3.6, sla),
           "b": _res([60], [500], [0.1], 3.6, sla)}
    comp, _ = _compare(per, "tok-per-gpu")
    best = {c.interactivity: c.best["a"] for c in comp}
    assert best[10] == 5000 and best[20] == 3000 and best[30] == 1000 and best[50] == 1000
    assert 75 not in best
    assert [c.interactivity for c in comp if c.below_sla] == [10, 20, 30]
    # $/Mtok out = 3.6 $/h / 3,600 s/h x (1 - 0.1) / 5,000 tok/s x 1e6 = 0.001 x 0.9 / 5,000 x 1e6 = 0.18
    assert comp[0].cost_per_mtok_output["a"] == pytest.approx(0.18)


def test_tpot_bound_still_applies_below_the_interactivity_floor():
    # SLA: >= 50 tok/s/user and TPOT <= 1/20 s. The 12 tok/s/user point (TPOT 83 ms) is out at every level,
    # so level 10 gives the 25 tok/s/user point's 3,000.
    from mi400plan.api.serve import _compare

    sla = {"interactivity": 50.0, "tpot_s": 0.05}
    per = {"a": _res([60, 25, 12], [1000, 3000, 5000], [0.1] * 3, 3.6, sla), "b": _res([60], [1], [0.1], 3.6, sla)}
    comp, _ = _compare(per, "tok-per-gpu")
    assert comp[0].interactivity == 10 and comp[0].best["a"] == 3000


def test_cost_leader_differs_from_throughput_leader():
    # A: 5,000 tok/s/GPU at $3.60/GPU-hour: 0.001 x 0.9 / 5,000 x 1e6 = $0.18/Mtok.
    # B: 4,000 tok/s/GPU at $1.80/GPU-hour: 0.0005 x 0.9 / 4,000 x 1e6 = $0.1125/Mtok.
    from mi400plan.api.serve import _compare

    per = {"A": _res([40], [5000], [0.1], 3.6, {}), "B": _res([40], [4000], [0.1], 1.8, {})}
    by_tps, _ = _compare(per, "tok-per-gpu")
    by_cost, _ = _compare(per, "cost")
    assert by_tps[0].leader == "A" and by_cost[0].leader == "B"
    assert by_cost[0].cost_per_mtok_output == pytest.approx({"A": 0.18, "B": 0.1125})


def test_rank_by_orders_the_rows():
    # Point 0: 1,000 tok/s/GPU, prefill share 0   -> (1 - 0) / 1,000 = 1.0e-3 of the price per Mtok.
    # Point 1:   900 tok/s/GPU, prefill share 0.5 -> 0.5 / 900        = 5.6e-4: cheaper though slower.
    # Point 2:   800 tok/s/GPU, TTFT 0.1 s (the others 0.5 s), prefill share 0.5 -> 6.25e-4.
    from mi400plan.api.serve import _rank_key

    res = _res([40, 40, 40], [1000, 900, 800], [0.0, 0.5, 0.5], 2.0, {}, ttft=[0.5, 0.5, 0.1])
    idx = np.arange(3)
    order = {}
    for key in ("tok-per-gpu", "cost", "ttft"):
        res["rank_by"] = key
        order[key] = list(_rank_key(res["ev"], res, idx))
    assert order == {"tok-per-gpu": [0, 1, 2], "cost": [1, 2, 0], "ttft": [2, 0, 1]}


def test_default_rank_rule():
    from mi400plan.serve_rank import default_rank_by

    assert default_rank_by([1.2, 2.0]) == "cost"
    assert default_rank_by([1.2, None]) == "tok-per-gpu"


ARGS = ["serve", "llama3-70b", "--sku", "mi355x", "--sku", "b200", "--no-ranges", "--json"]


def test_cli_sla_comparison_matches_the_search_without_sla(cli):
    """The reproducer: with --interactivity 50 the rows at 10/20/30 are the search without that floor (the
    same numbers as without any SLA), and the rows at 50 and above are the SLA's."""
    free = json.loads(cli(ARGS).stdout)["data"]
    sla = json.loads(cli([*ARGS, "--interactivity", "50"]).stdout)["data"]
    f = {c["interactivity"]: c for c in free["comparison"]}
    s = {c["interactivity"]: c for c in sla["comparison"]}
    for level in (10, 20, 30, 50, 75):
        assert s[level]["best"] == f[level]["best"]
        assert s[level]["below_sla"] is (level < 50)
    assert s[10]["best"]["mi355x"] > 2 * s[50]["best"]["mi355x"]  # the old rows repeated the >= 50 value
    assert sla["rank_by"] == "cost" and "default" in sla["rank_rule"] and "--rank-by" in sla["rank_rule"]


def test_cli_rank_by_flag(cli):
    out = json.loads(cli([*ARGS, "--interactivity", "50", "--rank-by", "tok-per-gpu"]).stdout)["data"]
    assert out["rank_by"] == "tok-per-gpu" and "--rank-by" in out["rank_rule"]
    for c in out["comparison"]:
        assert c["leader"] == max(c["best"], key=lambda n: c["best"][n] or 0)
    rows = [r for r in out["rows"] if r["sku"] == "b200"]
    tps = [r["tokens_per_s_per_gpu"] for r in rows]
    assert tps == sorted(tps, reverse=True)
    bad = cli([*ARGS, "--rank-by", "speed"])
    assert bad.exit_code == 2 and "--rank-by" in bad.stdout


def test_cli_rank_by_cost_orders_rows_by_cost(cli):
    out = json.loads(cli([*ARGS, "--interactivity", "30", "--rank-by", "cost"]).stdout)["data"]
    for sku in ("mi355x", "b200"):
        cost = [r["cost_per_mtok_output"] for r in out["rows"] if r["sku"] == sku]
        assert cost == sorted(cost)
    for c in out["comparison"]:
        costs = {n: v for n, v in c["cost_per_mtok_output"].items() if v is not None}  # None: no point at that level
        assert c["leader"] == min(costs, key=lambda n: costs[n])
