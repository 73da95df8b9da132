"""``fit --largest``: the largest family model that fits, and the next larger step that does not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mi400plan.api import open_catalog
from mi400plan.api.largest import largest
from mi400plan.hardware import build_sku
from mi400plan.family import FamilyTemplate
from mi400plan.largest import infer_layouts
from mi400plan.memory import infer_memory, max_context
from mi400plan.params import count_params
from mi400plan.search import SearchOptions, Workload, search
from mi400plan.specs.layout import infer_recipe, train_recipe


@pytest.fixture(scope="module")
def cat():  # noqa: ANN201
    return open_catalog()


def _spec(name: str):  # noqa: ANN202
    t = FamilyTemplate()
    width = int(name.split("-d")[1].split("-")[0])
    return t.model(width)


def test_training_largest_fits_and_next_step_does_not(cat) -> None:  # noqa: ANN001
    res = largest(cat, ["mi300x"], mode="train", gpus=64)
    row = res.rows[0]
    assert row.largest is not None and row.next_larger is not None
    assert row.next_larger.hidden_size == row.largest.hidden_size + 1024
    hw = build_sku(cat, "mi300x", "bf16").hw
    recipe = train_recipe("megatron", precision="bf16")

    def valid(name: str) -> int:
        spec = _spec(name)
        wl = Workload(spec, count_params(spec), recipe, res.seq_len, res.batch)
        return search(wl, hw, 64, SearchOptions(), top_k=1).valid

    assert valid(row.largest.name) > 0  # some layout fits on 64 GPUs
    assert valid(row.next_larger.name) == 0  # no layout of the next step does
    assert row.largest.memory_bytes <= hw.hbm_bytes


def test_inference_largest_agrees_with_max_context(cat) -> None:  # noqa: ANN001
    res = largest(cat, ["mi355x"], mode="infer", gpus=8, seq_len=8192, batch=4)
    row = res.rows[0]
    cap = cat.get("accelerators", "mi355x").spec.hbm_bytes.nominal
    recipe = infer_recipe("bf16")
    big, nxt = _spec(row.largest.name), _spec(row.next_larger.name)
    lay = row.largest.layout
    mc = max_context(big, count_params(big), recipe, capacity_bytes=cap, batch=4, tp=lay["tp"], pp=lay["pp"],
                     ep=lay["ep"])
    assert float(mc) >= 8192 and row.largest.max_context == int(mc)
    # and the memory model agrees: batch 4 x 8,192 tokens of KV cache fit in the HBM at that layout
    mem = infer_memory(big, count_params(big), recipe, tp=lay["tp"], pp=lay["pp"], ep=lay["ep"], batch=4, context=8192)
    assert float(mem.total) <= cap
    # the next step holds less than 8,192 tokens per sequence at every 8-GPU layout
    for tp, pp, ep in infer_layouts(nxt, 8):
        m = max_context(nxt, count_params(nxt), recipe, capacity_bytes=cap, batch=4, tp=tp, pp=pp, ep=ep)
        assert float(np.asarray(m)) < 8192


def test_moe_family_largest(cat) -> None:  # noqa: ANN001
    res = largest(cat, ["mi355x"], mode="infer", gpus=8, family="moe", experts=64, top_k=8, seq_len=8192)
    big = res.rows[0].largest
    assert big is not None and big.params_active < big.params_total
    assert res.rows[0].next_larger is not None and not res.rows[0].next_larger.fits


def test_cli_table_and_json(cli) -> None:
    r = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--mode", "infer", "--seq", "8k", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["rows"][0]["largest"]["fits"] and not d["rows"][0]["next_larger"]["fits"]
    r = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--mode", "infer", "--seq", "8k"])
    assert r.exit_code == 0 and "Largest dense" in r.output


def test_largest_needs_gpus_and_no_model(cli) -> None:
    assert cli(["fit", "--largest", "--sku", "mi355x"]).exit_code == 2
    assert cli(["fit", "llama3.1-8b", "--largest", "--sku", "mi355x", "--gpus", "8"]).exit_code == 2


def test_largest_bounds_the_cluster(cli) -> None:
    assert cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "100000000"]).exit_code == 2
    assert cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "5000", "--mode", "infer"]).exit_code == 2


def test_precision_flag_reaches_infer_and_train(cli) -> None:
    # regression: the CLI passed --precision as a list ("'list' object has no attribute 'lower'", exit 1)
    r = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--mode", "infer", "--precision", "fp8", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["data"]["precision"] == "fp8"
    bad = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--precision", "fp32"])
    assert bad.exit_code == 2 and "not 'fp32'" in bad.output and "[" not in bad.output
    two = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--precision", "bf16,fp8"])
    assert two.exit_code == 2 and "one precision" in two.output


def test_layout_pins_are_honoured(cat) -> None:  # noqa: ANN001
    # Every family model has 8 KV heads; TP must divide them, so TP 3 fits no model at all.
    assert largest(cat, ["mi300x"], mode="train", gpus=48, pins={"tp": [3]}).rows[0].largest is None
    res = largest(cat, ["mi300x"], mode="train", gpus=64, pins={"tp": [2], "pp": [4]})
    lay = res.rows[0].largest.layout
    assert (lay["tp"], lay["pp"]) == (2, 4)
    inf = largest(cat, ["mi355x"], mode="infer", gpus=8, seq_len=8192, pins={"tp": [4]})
    assert inf.rows[0].largest.layout["tp"] == 4


def test_pins_largest_cannot_honour_are_refused(cli) -> None:
    r = cli(["fit", "--largest", "--sku", "mi300x", "--gpus", "64", "--dp", "8"])
    assert r.exit_code == 2 and "--dp" in r.output


def test_plot_is_refused_not_ignored(cli, tmp_path) -> None:
    out = tmp_path / "l.png"
    r = cli(["fit", "--largest", "--sku", "mi300x", "--gpus", "64", "--plot", str(out)])
    assert r.exit_code == 2 and "--plot" in r.output and not out.exists()


def test_tokens_gives_days_that_sweep_of_the_printed_name_reproduces(cat) -> None:  # noqa: ANN001
    from mi400plan.api.sweep import SweepReport, sweep

    res = largest(cat, ["mi300x"], mode="train", gpus=64, tokens="1T")
    run = res.rows[0].run
    assert run is not None and run.model == res.rows[0].largest.name
    # days = tokens / (tokens/s) / 86,400 s; tokens/s = batch tokens / step
    assert run.tokens_per_s == pytest.approx(run.global_batch_tokens / run.step_time_s, rel=1e-12)
    assert run.days == pytest.approx(1e12 / run.tokens_per_s / 86400, rel=1e-12)
    # the printed name is a model sweep accepts, and it prices the same run
    sw = sweep(cat, run.model, ["mi300x"], gpus="64", tokens="1T", report=SweepReport(top=1, ranges=False))
    assert sw.rows[0].days == pytest.approx(run.days, rel=1e-9)
    assert sw.rows[0].global_batch_seqs == run.global_batch_seqs


def test_tokens_needs_largest_train(cli) -> None:
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--tokens", "1T"])
    assert r.exit_code == 2 and "--tokens" in r.output
    r = cli(["fit", "--largest", "--sku", "mi355x", "--gpus", "8", "--mode", "infer", "--tokens", "1T"])
    assert r.exit_code == 2 and "--tokens" in r.output


def test_tokens_table_and_json(cli) -> None:
    args = ["fit", "--largest", "--sku", "mi300x", "--gpus", "64", "--tokens", "1T"]
    r = cli(args)
    assert r.exit_code == 0, r.output
    assert "Training the largest model on 64 GPUs" in r.output and "days" in r.output
    d = json.loads(cli([*args, "--json"]).stdout)["data"]
    assert d["train_tokens"] == 1e12 and d["rows"][0]["run"]["days"] > 0
