"""``mi400plan budget``: compute-optimal size for a budget, the nearest family model, and its plan."""

from __future__ import annotations

import json
import math

import pytest

from mi400plan.api import open_catalog
from mi400plan.api.budget import budget
from mi400plan.hardware import build_sku
from mi400plan.budget import budget_flops, ladder, nearest
from mi400plan.errors import UsageError
from mi400plan.family import FamilyTemplate


@pytest.fixture(scope="module")
def cat():  # noqa: ANN201
    return open_catalog()


def test_gophers_budget_gives_chinchilla_under_twenty_tokens_per_parameter(cat) -> None:  # noqa: ANN001
    # Hoffmann et al. 2022: Chinchilla, 70B parameters on 1.4T tokens, at Gopher's 5.76e23 FLOPs.
    # N = sqrt(C / (6 x 20)) = sqrt(5.76e23 / 120) = sqrt(4.8e21) = 6.9282e10; D = 20 N = 1.38564e12.
    res = budget(cat, "mi355x", gpus=1024, flops="5.76e23", law="chinchilla-20")
    assert res.params_opt == pytest.approx(6.9282e10, rel=1e-4)
    assert res.tokens_opt == pytest.approx(1.38564e12, rel=1e-4)
    assert res.params_opt == pytest.approx(70e9, rel=0.015) and res.tokens_opt == pytest.approx(1.4e12, rel=0.015)
    assert "20" in res.law.formula and "2203.15556" in res.law.source
    # the family model nearest 69.3B on a log scale, against its two neighbours
    m = res.model
    near = [s for s in ladder(FamilyTemplate()) if abs(s.width - m.hidden_size) == 1024]
    assert all(abs(math.log(m.params_total / 6.9282e10)) <= abs(math.log(s.params_total / 6.9282e10)) for s in near)
    # the same budget spent on it: tokens = C / (6 N_model)
    assert m.tokens == pytest.approx(5.76e23 / (6 * m.params_total), rel=1e-12)
    assert res.plan is not None and res.plan.feasible


def test_approach_3_pair_at_gophers_budget(cat) -> None:  # noqa: ANN001
    # G = (0.34 x 406.4 / (0.28 x 410.7))^(1/0.62) = 1.34473; N = G x (9.6e22)^(0.28/0.62) = 3.21892e10;
    # D = 9.6e22 / N = 2.98237e12 (the law's own constants, Hoffmann et al. eq. 10)
    res = budget(cat, "mi355x", gpus=64, flops="5.76e23", law="chinchilla")
    assert res.params_opt == pytest.approx(3.21892e10, rel=1e-4)
    assert res.tokens_opt == pytest.approx(2.98237e12, rel=1e-4)


def test_budget_flops_by_hand() -> None:
    # 1,024 GPUs x 30 days (2,592,000 s) x 2.5e15 FLOP/s x 0.4 = 2.654208e24 FLOPs
    assert budget_flops(1024, 30 * 86400, 2.5e15, 0.4) == pytest.approx(2.654208e24)


def test_given_mfu_sets_the_budget(cat) -> None:  # noqa: ANN001
    peak = build_sku(cat, "mi355x", "bf16").hw.peak_flops
    res = budget(cat, "mi355x", gpus=512, days="20d", mfu=0.4)
    assert res.compute_flops == pytest.approx(512 * 20 * 86400 * peak * 0.4, rel=1e-12)


def test_days_budget_is_met_by_its_own_plan(cat) -> None:  # noqa: ANN001
    res = budget(cat, "mi355x", gpus=1024, days="30d")
    assert res.plan is not None and res.plan.gpus_used <= 1024
    # the plan trains the model's tokens: days = tokens / (tokens/s) / 86,400
    assert res.plan.days == pytest.approx(res.model.tokens / res.plan.tokens_per_s / 86400, rel=1e-12)
    assert res.plan.feasible == (res.plan.days <= 30 * (1 + 1e-9))


def test_nearest_on_moe_matches_active_parameters() -> None:
    t = FamilyTemplate("moe", 64, 8)
    step = nearest(t, 20e9)
    steps = ladder(t)
    assert all(abs(math.log(step.params_active / 20e9)) <= abs(math.log(s.params_active / 20e9)) for s in steps)


def test_cli_json_and_bad_input(cli) -> None:
    r = cli(["budget", "--sku", "mi355x", "--gpus", "256", "--flops", "1e23", "--law", "chinchilla-20", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["law"]["name"] == "chinchilla-20" and d["model"]["name"].startswith("dense-")
    assert cli(["budget", "--sku", "mi355x", "--gpus", "256"]).exit_code == 2
    assert cli(["budget", "--sku", "mi355x", "--gpus", "256", "--flops", "1e23", "--law", "kaplan"]).exit_code == 2
    assert cli(["budget", "--sku", "mi355x", "--gpus", "256", "--flops", "-5"]).exit_code == 2


def test_bad_family_is_a_usage_error(cat) -> None:  # noqa: ANN001
    with pytest.raises(UsageError):
        budget(cat, "mi355x", gpus=8, flops="1e22", family="sparse")


def test_tiny_budget_says_it_is_below_the_family_and_one_step(cat) -> None:  # noqa: ANN001
    res = budget(cat, "mi355x", gpus=64, flops="1e14")  # 42k tokens: under one step of the planned 48 x 8,192
    assert any("below the family's smallest model" in w for w in res.warnings)
    assert any("less than one optimizer step" in w for w in res.warnings)


def test_budget_bounds_the_cluster(cli) -> None:
    assert cli(["budget", "--sku", "mi355x", "--gpus", "1000000", "--days", "30"]).exit_code == 2
    assert cli(["budget", "--sku", "mi355x", "--gpus", "0", "--days", "30"]).exit_code == 2
    assert cli(["budget", "--sku", "mi355x", "--gpus", "8", "--days", "nan"]).exit_code == 2
