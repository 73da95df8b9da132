"""``sweep --deadline`` / ``--budget``: the smallest cluster that trains in time, and its checks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan import deadline as dl
from mi400plan.api import open_catalog
from mi400plan.api.deadline import parse_deadline_days, parse_usd, sweep_deadline
from mi400plan.hardware import build_sku
from mi400plan.errors import UsageError
from mi400plan.params import count_params
from mi400plan.search import SearchOptions, Workload, model_terms, search
from mi400plan.specs.layout import train_recipe

DAY = 86400.0


@pytest.fixture(scope="module")
def cat():  # noqa: ANN201
    return open_catalog()


@pytest.fixture(scope="module")
def setup(cat):  # noqa: ANN001, ANN201
    spec = cat.get("models", "llama3.1-8b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision="bf16"), 8192, 512)
    hw = build_sku(cat, "mi355x", "bf16").hw
    opts = SearchOptions()
    step = dl.size_step(hw.domain)
    bound = dl.throughput_bound(hw.peak_flops, model_terms(spec, wl.counts, 8192, wl.recipe).flops_model)
    return wl, hw, opts, step, dl.candidate_sizes(wl, opts, step, 16384), dl.Pricer(wl, hw, opts), bound


def test_size_step_whole_domains() -> None:
    # 8-GPU node domains step by 8; 64 by 64; NVL72 (72 = 8 x 9) by 8, the largest power of two in it.
    assert dl.size_step(8) == 8 and dl.size_step(64) == 64 and dl.size_step(72) == 8 and dl.size_step(576) == 64


def test_compute_bound_by_hand() -> None:
    # 15e12 tokens x 6 x 70e9 FLOP/token = 6.3e24 FLOP; 30 days = 2,592,000 s; at 2.5e15 FLOP/s per GPU
    # a GPU does 6.48e21 FLOP in 30 days, so 6.3e24 / 6.48e21 = 972.2 GPUs at 100% of peak.
    assert dl.compute_bound_gpus(15e12, 6 * 70e9, 30 * DAY, 2.5e15) == pytest.approx(972.2222, rel=1e-6)


def test_candidates_are_fillable_multiples(setup) -> None:  # noqa: ANN001
    wl, hw, opts, step, sizes, _, _ = setup
    assert sizes == sorted(sizes) and all(s % step == 0 for s in sizes)
    # 8B: 32 heads and 8 KV heads, 32 layers, batch 512: every power of two from 8 to 16,384 is fillable.
    assert {2**k for k in range(3, 15)} <= set(sizes)


def test_reported_cluster_meets_and_next_smaller_does_not(cat) -> None:  # noqa: ANN001
    res = sweep_deadline(cat, "llama3.1-8b", ["mi355x"], tokens="15T", deadline="20d", gpu_hour_cost=2.0)
    a = res.answers[0]
    assert a.meets and a.pick is not None and a.pick.days <= 20
    # days = tokens / (tokens/s) / 86,400 and cost = days x 24 x GPUs x $2/GPU-hour
    assert a.pick.days == pytest.approx(15e12 / a.pick.tokens_per_s / DAY, rel=1e-12)
    assert a.pick.cost_usd == pytest.approx(a.pick.days * 24 * a.pick.gpus * 2.0, rel=1e-12)
    # the next smaller size with a layout, found independently by searching every candidate below
    spec = cat.get("models", "llama3.1-8b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision="bf16"), 8192, 512)
    hw = build_sku(cat, "mi355x", "bf16").hw
    below = [s for s in dl.candidate_sizes(wl, SearchOptions(), 8) if s < a.pick.gpus]
    for s in reversed(below):
        r = search(wl, hw, s, SearchOptions(), top_k=1)
        if r.valid:
            days = 15e12 / (512 * 8192 / r.top["step"][0]) / DAY
            assert days > 20
            assert a.next_smaller is not None and a.next_smaller.gpus == s
            break


@settings(max_examples=25, deadline=None)
@given(t1=st.floats(0.5, 40.0), t2=st.floats(0.5, 40.0), d1=st.floats(3.0, 120.0), d2=st.floats(3.0, 120.0))
def test_monotone_in_tokens_and_deadline(setup, t1: float, t2: float, d1: float, d2: float) -> None:  # noqa: ANN001
    _, _, _, step, sizes, pricer, bound = setup

    def gpus(tokens_t: float, days: float) -> float:
        out = dl.smallest_meeting(sizes, pricer, tokens_t * 1e12 / (days * DAY), bound)
        return float("inf") if out.found is None else out.found.gpus

    lo_t, hi_t = sorted((t1, t2))
    lo_d, hi_d = sorted((d1, d2))
    assert gpus(lo_t, lo_d) <= gpus(hi_t, lo_d)  # more tokens never need fewer GPUs
    assert gpus(lo_t, hi_d) <= gpus(lo_t, lo_d)  # a later deadline never needs more


def test_impossible_deadline_names_the_term_and_exits_4(cli) -> None:
    r = cli(["sweep", "llama3.1-70b", "--sku", "mi355x", "--tokens", "15T", "--deadline", "12h", "--check", "--json"])
    assert r.exit_code == 4, r.output
    a = json.loads(r.stdout)["data"]["answers"][0]
    assert a["pick"] is None and not a["meets"]
    assert "best achievable" in a["limit"] and "stops scaling" in a["limit"]
    assert a["best"]["days"] > 0.5


def test_budget_below_one_step(cat) -> None:  # noqa: ANN001
    res = sweep_deadline(cat, "llama3.1-8b", ["mi355x"], tokens="1T", budget="0.01", gpu_hour_cost=2.0)
    a = res.answers[0]
    assert not a.meets and "below the cost of one optimizer step" in (a.limit or "")


def test_budget_fastest_within(cat) -> None:  # noqa: ANN001
    res = sweep_deadline(cat, "llama3.1-8b", ["mi355x"], tokens="1T", budget="200k", gpu_hour_cost=2.0)
    a = res.answers[0]
    assert a.meets and a.pick is not None and a.pick.cost_usd <= 200e3
    assert all(p.cost_usd is None or p.cost_usd > 200e3 or p.days >= a.pick.days for p in a.priced)


def test_table_lists_each_sku(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--sku", "b200", "--tokens", "2T", "--deadline", "30d"])
    assert r.exit_code == 0, r.output
    assert "Smallest cluster per SKU" in r.output and "mi355x" in r.output and "b200" in r.output


@pytest.mark.parametrize("text,days", [("30d", 30), ("30", 30), ("6w", 42), ("72h", 3), ("2 days", 2)])
def test_parse_deadline(text: str, days: float) -> None:
    assert parse_deadline_days(text) == pytest.approx(days)


@pytest.mark.parametrize("bad", ["0d", "-3d", "soon", "3y"])
def test_bad_deadline(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_deadline_days(bad)


def test_parse_budget() -> None:
    assert parse_usd("$2,500,000") == 2.5e6 and parse_usd("5M") == 5e6
    with pytest.raises(UsageError):
        parse_usd("0")


def test_deadline_with_gpus_is_a_usage_error(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tokens", "1T", "--deadline", "30d"])
    assert r.exit_code == 2


def test_deadline_below_the_compute_bound_of_every_size(cat) -> None:  # noqa: ANN001
    # 1e18 tokens in a day would need far more than 131,072 GPUs even at peak: still a best date
    res = sweep_deadline(cat, "llama3.1-8b", ["mi355x"], tokens="1e18", deadline="1d")
    a = res.answers[0]
    assert a.pick is None and not a.meets and a.best is not None and a.best.gpus == 131072
    assert "best achievable" in (a.limit or "")


def test_deadline_needs_tokens(cat) -> None:  # noqa: ANN001
    with pytest.raises(UsageError):
        sweep_deadline(cat, "llama3.1-8b", ["mi355x"], tokens=None, deadline="30d")
