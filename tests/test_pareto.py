"""``sweep --pareto``: the layouts no other beats on both step time and memory per GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mi400plan.search import SORT_KEYS, pareto_indices


def _cols(n: int) -> dict[str, np.ndarray]:
    return {k: np.zeros(n, dtype=np.int64) for k in SORT_KEYS}


def test_pareto_indices_by_hand():
    # (step s, memory GB): a (1, 90) fastest; b (2, 50) less memory; c (2, 60) dominated by b;
    # d (3, 50) dominated by b (slower, same memory); e (4, 10) least memory; f (1, 95) dominated by a.
    step = np.array([1.0, 2.0, 2.0, 3.0, 4.0, 1.0])
    mem = np.array([90.0, 50.0, 60.0, 50.0, 10.0, 95.0])
    assert list(pareto_indices(step, mem, _cols(6))) == [0, 1, 4]


def test_pareto_indices_keeps_one_of_equal_points():
    step = np.array([2.0, 2.0])
    mem = np.array([5.0, 5.0])
    assert list(pareto_indices(step, mem, _cols(2))) == [0]


def _dominated(a: dict, b: dict) -> bool:
    """b dominates a: no slower, no more memory, better on one."""
    ta, ma = a["step_time_s"], a["memory_bytes"]["total"]
    tb, mb = b["step_time_s"], b["memory_bytes"]["total"]
    return tb <= ta and mb <= ma and (tb < ta or mb < ma)


@pytest.mark.slow  # brute force: over a minute
def test_sweep_pareto_matches_brute_force_over_every_fitting_layout(cli):
    args = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "16", "--no-ranges", "--json"]
    every = json.loads(cli([*args, "--top", "1000000"]).stdout)["data"]
    assert len(every["rows"]) == every["valid"]  # the listing holds every valid, fitting layout
    data = json.loads(cli([*args, "--pareto"]).stdout)["data"]
    front = data["pareto"]
    assert data["pareto_checked"] and len(front) >= 2
    expected = [r for r in every["rows"] if not any(_dominated(r, o) for o in every["rows"])]
    key = lambda r: (r["step_time_s"], r["memory_bytes"]["total"])  # noqa: E731
    assert sorted({key(r) for r in expected}) == [key(r) for r in front]
    assert front[0]["layout"] == data["rows"][0]["layout"]  # the fastest is the #1 layout
    steps = [r["step_time_s"] for r in front]
    mems = [r["memory_bytes"]["total"] for r in front]
    assert steps == sorted(steps) and mems == sorted(mems, reverse=True)


def test_sweep_pareto_table(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "16", "--no-ranges", "--pareto"]).stdout
    assert "Trade-off front (step time vs memory per GPU): mi300x x 16 GPUs" in out
    assert "fastest" in out
    assert all(len(line.rstrip()) <= 80 for line in out.splitlines())


# A batch pinned at 512 sequences (the former default; the planned one also tries 3 x 2^k), so DP divides
# 512 = 2^9; a replica (TP x CP x PP with PP dividing 80 layers = 2^4 x 5) is 2^a or 5 x 2^a GPUs. GPU counts
# that work are then 2^k or 5 x 2^k: 1,000 = 2^3 x 5^3 is neither; the nearest are 640 = 5 x 2^7 below and
# 1,024 = 2^10 above.
NO_LAYOUT = ["sweep", "llama3-70b", "--sku", "mi300x", "--gpus", "1000", "--no-ranges", "--global-batch", "512"]


def test_sweep_without_a_valid_layout_says_so_and_names_the_nearest_counts(cli):
    r = cli([*NO_LAYOUT, "--check"])
    assert r.exit_code == 4
    first = r.stdout.splitlines()[0]
    assert first.startswith("No valid layout that fits: mi300x x 1,000 GPUs (nearest that work: ")
    data = json.loads(cli([*NO_LAYOUT, "--json"]).stdout)["data"]
    (case,) = data["no_layout"]
    assert case["nearest_gpus"] == [640, 1024]
    assert "(nearest that work: 640 and 1,024)" in first


@pytest.mark.slow  # seven more sweeps of a 70B model: 2-4 s
def test_the_nearest_counts_work_and_those_between_do_not(cli):
    for n in (640, 1024):  # each named count does have a valid layout
        d = json.loads(cli(["sweep", "llama3-70b", "--sku", "mi300x", "--gpus", str(n), "--no-ranges", "--top", "1",
                            "--global-batch", "512", "--json"]).stdout)["data"]
        assert d["rows"] and d["rows"][0]["gpus"] == n
    for n in (768, 896, 960, 992, 1008):  # 3, 7, 15, 31, 63 x 2^k: none of these works
        d = json.loads(cli(["sweep", "llama3-70b", "--sku", "mi300x", "--gpus", str(n), "--no-ranges",
                            "--global-batch", "512", "--json"]).stdout)["data"]
        assert not d["rows"]
