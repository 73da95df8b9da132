"""``sweep`` over the estimate ranges: corner searches, spans and the conclusions that flip.

The synthetic profiles below make the answers visible by hand: fabrics and HBM so fast that
communication and memory-bound time are negligible, no GEMM overhead, and two SKUs that differ only
in peak FLOP/s x matmul efficiency. Then, for every layout, a higher effective matmul rate gives a
shorter (never longer) step, so the faster SKU at each corner is the one with the higher rate.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SOURCES = '[sources]\nP = "synthetic test profile"\n'

MODEL = """name = "tiny-test"
display_name = "Tiny test model"
family = "test"
hidden_size = 512
num_layers = 4
vocab_size = 8192
ffn_dim = 2048
ffn_kind = "swiglu"
norm = "rmsnorm"
tie_embeddings = false
position_embedding = "rope"
max_seq_len = 1024

[attention]
kind = "gqa"
num_heads = 8
num_kv_heads = 8
"""


def _fabric(name: str, tier: str, domain: int, latency: str = "0") -> str:
    return f"""name = "{name}"
display_name = "{name}"
tier = "{tier}"
topology = "switched"
domain_size = {domain}
bw_per_gpu_per_dir_gb_per_s = 1000000
hop_latency_us = {latency}
efficiency = 1.0

{SOURCES}"""


def _acc(name: str, *, peak: str, matmul: str, capacity: str = "80", out: str = "t-out", up: str = "t-up") -> str:
    return f"""name = "{name}"
display_name = "{name}"
vendor = "Test"

[memory]
hbm_capacity_gb = {capacity}
hbm_bandwidth_tb_per_s = 1000

[compute]
bf16_dense_tflops = {peak}

[interconnect]
scale_up_fabric = "{up}"
scale_out_fabric = "{out}"

[efficiency]
matmul_bf16 = {matmul}
hbm_bandwidth = 1.0
gemm_overhead_us = 0

{SOURCES}"""


def _est(nominal: float, low: float, high: float) -> str:
    return f'{{ nominal = {nominal}, low = {low}, high = {high}, status = "assumed", source = ["P"] }}'


@pytest.fixture()
def profiles(tmp_path: Path):
    """Write a profile directory; ``profiles({"t-a": toml, ...})`` -> its path as a string."""

    def make(accs: dict[str, str]) -> str:
        for kind in ("accelerators", "fabrics", "models"):
            (tmp_path / kind).mkdir(exist_ok=True)
        (tmp_path / "models" / "tiny-test.toml").write_text(MODEL)
        (tmp_path / "fabrics" / "t-up.toml").write_text(_fabric("t-up", "scale_up", 8))
        (tmp_path / "fabrics" / "t-up16.toml").write_text(_fabric("t-up16", "scale_up", 16))
        (tmp_path / "fabrics" / "t-out.toml").write_text(_fabric("t-out", "scale_out", 131072))
        # Scale-out hop latency 0 at nominal, up to 1e6 us = 1 s at the pessimistic end.
        (tmp_path / "fabrics" / "t-out-slow.toml").write_text(
            _fabric("t-out-slow", "scale_out", 131072, latency=_est(0, 0, 1e6)))
        for name, text in accs.items():
            (tmp_path / "accelerators" / f"{name}.toml").write_text(text)
        return str(tmp_path)

    return make


def _sweep(cli, prof: str, skus: list[str], *extra: str) -> dict:
    args = ["sweep", "tiny-test", "--gpus", "8", "--seq", "1024", "--global-batch", "64", "--json",
            "--profiles", prof]
    for s in skus:
        args += ["--sku", s]
    r = cli(args + list(extra))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["data"]


def _kinds(d: dict, kind: str) -> list[dict]:
    return [f for f in d["flips"] if f["kind"] == kind]


# --- (b) SKU ranking -------------------------------------------------------------------------------


def test_ranking_flip_at_the_pessimistic_corner_is_reported(cli, profiles) -> None:
    # t-a: 1000 TFLOP/s x 0.50 = 500 TFLOP/s nominal, x 0.30 = 300 at its low end.
    # t-b: 800 TFLOP/s x 0.50 = 400 TFLOP/s, no range. 500 > 400 at nominal; 300 < 400 pessimistic.
    prof = profiles({
        "t-a": _acc("t-a", peak="1000", matmul=_est(0.5, 0.3, 0.9)),
        "t-b": _acc("t-b", peak="800", matmul="0.5"),
    })
    d = _sweep(cli, prof, ["t-a", "t-b"])
    a, b = (next(s for s in d["skus"] if s["sku"] == n) for n in ("t-a", "t-b"))
    assert a["tokens_per_s"] > b["tokens_per_s"]
    flips = _kinds(d, "ranking")
    assert len(flips) == 1
    f = flips[0]
    assert (f["sku"], f["other_sku"], f["corner"], f["gpus"]) == ("t-a", "t-b", "pessimistic", 8)
    # same GPU count and GPUs per rack (the 8-GPU domain): all three rankings flip together
    assert set(f["metric"].split(",")) == {"time_to_train", "tokens_per_s_per_gpu", "tokens_per_s_per_rack"}
    assert "t-a leads t-b at nominal" in f["detail"]
    assert any("ranking by time to train" in w for w in d["warnings"])


def test_ranking_that_holds_over_the_ranges_is_not_reported(cli, profiles) -> None:
    # t-a worst case 1000 x 0.45 = 450 > t-b's 400 (and t-b has no range): no flip anywhere.
    prof = profiles({
        "t-a": _acc("t-a", peak="1000", matmul=_est(0.5, 0.45, 0.6)),
        "t-b": _acc("t-b", peak="800", matmul="0.5"),
    })
    d = _sweep(cli, prof, ["t-a", "t-b"])
    assert d["ranges_checked"] is True
    assert _kinds(d, "ranking") == []


def test_ranking_flip_only_with_independent_corners_is_called_mixed(cli, profiles) -> None:
    # t-a: 450..600 TFLOP/s (nominal 500); t-b: peak 800 x 0.5..0.6 = 400..480 (nominal 400).
    # Both pessimistic: 450 > 400; both optimistic: 600 > 480; t-a low vs t-b high: 450 < 480.
    prof = profiles({
        "t-a": _acc("t-a", peak="1000", matmul=_est(0.5, 0.45, 0.6)),
        "t-b": _acc("t-b", peak="800", matmul=_est(0.5, 0.5, 0.6)),
    })
    d = _sweep(cli, prof, ["t-a", "t-b"])
    flips = _kinds(d, "ranking")
    assert [(f["sku"], f["other_sku"], f["corner"]) for f in flips] == [("t-a", "t-b", "mixed")]


def test_peak_flops_range_drives_the_corners(cli, profiles) -> None:
    # The range can sit on the peak instead of the efficiency: t-a peak 600..1000 x 0.5 = 300..500.
    prof = profiles({
        "t-a": _acc("t-a", peak=_est(1000, 600, 1000), matmul="0.5"),
        "t-b": _acc("t-b", peak="800", matmul="0.5"),
    })
    d = _sweep(cli, prof, ["t-a", "t-b"])
    ra = next(r for r in d["ranges"] if r["sku"] == "t-a")
    assert ra["pessimistic"]["inputs"]["peak_flops"] == 600e12
    assert ra["optimistic"]["inputs"]["peak_flops"] == 1000e12
    assert [f["corner"] for f in _kinds(d, "ranking")] == ["pessimistic"]


def test_ranking_with_racks_compares_skus_with_different_gpu_counts(cli, profiles) -> None:
    # No rack profiles: a rack is the scale-up domain, 8 GPUs for t-a and 16 for t-b, so --racks 1
    # runs t-a on 8 and t-b on 16 GPUs. Effective rates per GPU: t-a 500 (300..900), t-b 400.
    # Total (time to train) and per rack: t-a 8 x 500 = 4000 < t-b 16 x 400 = 6400 at nominal, but
    # 8 x 900 = 7200 > 6400 at the optimistic corner. Per GPU: t-a leads (500 > 400), 300 < 400 at
    # the pessimistic corner.
    prof = profiles({
        "t-a": _acc("t-a", peak="1000", matmul=_est(0.5, 0.3, 0.9)),
        "t-b": _acc("t-b", peak="800", matmul="0.5", up="t-up16"),
    })
    r = cli(["sweep", "tiny-test", "--sku", "t-a", "--sku", "t-b", "--racks", "1", "--seq", "1024",
             "--global-batch", "64", "--json", "--profiles", prof])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert [(x["sku"], x["gpus"]) for x in d["ranges"]] == [("t-a", 8), ("t-b", 16)]
    got = sorted((f["sku"], f["other_sku"], f["corner"], f["metric"]) for f in _kinds(d, "ranking"))
    assert got == [("t-a", "t-b", "pessimistic", "tokens_per_s_per_gpu"),
                   ("t-b", "t-a", "optimistic", "time_to_train,tokens_per_s_per_rack")]
    assert any("t-b x 16 vs t-a x 8 GPUs" in f["detail"] for f in d["flips"])


# --- (c) fit at the low end of the capacity range ------------------------------------------------


def test_fit_flip_when_low_capacity_is_below_the_fixed_reserve(cli, profiles) -> None:
    # Low end 1 GB: usable = 1 GB x 0.95 = 0.95 GB, below the 2 GiB = 2.15 GB fixed runtime reserve
    # alone, so no layout fits there; the nominal 80 GB holds the 25 M-parameter model easily.
    prof = profiles({"t-a": _acc("t-a", peak="1000", matmul="0.5", capacity=_est(80, 1, 80))})
    d = _sweep(cli, prof, ["t-a"])
    assert d["rows"] and d["rows"][0]["range"]["fits_low_capacity"] is False
    assert d["rows"][0]["range"]["fits_high_capacity"] is True
    fits = _kinds(d, "fit")
    assert len(fits) == 1 and fits[0]["corner"] == "pessimistic"
    assert "no layout fits there" in fits[0]["detail"]
    p = d["ranges"][0]["pessimistic"]
    assert p["layout"] is None and p["nominal_layout_fits"] is False
    assert p["inputs"]["hbm_bytes"] == 1e9
    # no fitting layout at the pessimistic corner: that side of the span is empty
    assert d["ranges"][0]["step_time_s"]["high"] is None
    assert d["ranges"][0]["tokens_per_s"]["low"] is None


def test_no_fit_flip_when_low_capacity_still_holds_the_layout(cli, profiles) -> None:
    # 64 GB x 0.95 = 60.8 GB usable; the tiny model needs under 2.15 GB reserve + ~0.5 GB of
    # states (25 M parameters x 18 B) plus small activations.
    prof = profiles({"t-a": _acc("t-a", peak="1000", matmul="0.5", capacity=_est(80, 64, 80))})
    d = _sweep(cli, prof, ["t-a"])
    assert all(r["range"]["fits_low_capacity"] for r in d["rows"])
    assert _kinds(d, "fit") == []


# --- (d) scaling view ---------------------------------------------------------------------------------


def test_scaling_point_moves_when_scale_out_latency_can_be_one_second(cli, profiles) -> None:
    # At 8 GPUs everything is inside the 8-GPU scale-up domain; at 16 some group crosses to the
    # scale-out tier. Nominal scale-out latency is 0 (and bandwidth 1 PB/s): 16 GPUs scale ~linearly.
    # At the pessimistic end each scale-out message step costs 1 s, far above the whole 8-GPU step
    # (64 x 1024 tokens x ~6 x 25e6 FLOP / (8 x 500e12 FLOP/s) ~ 2.5 ms), so efficiency collapses.
    prof = profiles({"t-a": _acc("t-a", peak="1000", matmul="0.5", out="t-out-slow")})
    args = ["sweep", "tiny-test", "--sku", "t-a", "--gpus", "8,16", "--seq", "1024", "--global-batch", "64",
            "--json", "--profiles", prof]
    r = cli(args)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["scaling_below_90_at"] == {"t-a": None}
    assert d["scaling_below_90_at_corners"]["t-a"] == {"pessimistic": 16, "optimistic": None}
    flips = _kinds(d, "scaling")
    assert [(f["sku"], f["corner"], f["gpus"]) for f in flips] == [("t-a", "pessimistic", 16)]
    r16 = next(x for x in d["ranges"] if x["gpus"] == 16)
    assert r16["scaling_efficiency"]["low"] < 0.9 <= r16["scaling_efficiency"]["nominal"]


# --- spans and the nominal search ----------------------------------------------------------------------


def test_corner_with_only_matmul_ranged_equals_a_matmul_override(cli, profiles) -> None:
    # Only matmul efficiency has a range, so the pessimistic corner of a pinned layout is the same
    # model as the nominal run with --matmul-efficiency set to the low end (0.3).
    prof = profiles({"t-a": _acc("t-a", peak="1000", matmul=_est(0.5, 0.3, 0.9))})
    pin = ["--tp", "2", "--pp", "1", "--cp", "1", "--zero", "1", "--micro-batch", "1", "--recompute", "none"]
    d = _sweep(cli, prof, ["t-a"], *pin)
    lo = _sweep(cli, prof, ["t-a"], *pin, "--matmul-efficiency", "0.3")["rows"][0]
    hi = _sweep(cli, prof, ["t-a"], *pin, "--matmul-efficiency", "0.9")["rows"][0]
    rng = d["rows"][0]["range"]
    assert rng["step_time_s"]["high"] == pytest.approx(lo["step_time_s"], rel=1e-12)
    assert rng["step_time_s"]["low"] == pytest.approx(hi["step_time_s"], rel=1e-12)
    assert rng["tokens_per_s"]["low"] == pytest.approx(lo["tokens_per_s"], rel=1e-12)
    # a command-line value is a measurement: no range left to apply
    assert lo["range"]["step_time_s"]["low"] == pytest.approx(lo["step_time_s"], rel=1e-12)
    assert lo["range"]["step_time_s"]["high"] == pytest.approx(lo["step_time_s"], rel=1e-12)


@pytest.mark.parametrize("model,sku,gpus,precision", [
    ("llama3.1-8b", "mi355x", "64", "bf16"),
    ("llama3.1-8b", "mi455x", "64", "fp8"),
    ("llama3.1-70b", "mi355x", "256", "bf16"),
])
def test_spans_bracket_nominal_and_nominal_best_is_the_plain_search(catalog, model, sku, gpus, precision) -> None:
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.hardware import build_sku
    from mi400plan.pricing import Pricing
    from mi400plan.specs.layout import TrainOptions
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, iter_rows, search
    from mi400plan.specs.layout import train_recipe

    res = sweep(catalog, model, [sku], gpus=gpus, options=TrainOptions(precision=precision), tokens="1T",
                pricing=Pricing(gpu_hour_cost=2.0), report=SweepReport(top=3))
    # the nominal best is exactly what the search returns on the nominal hardware
    spec = catalog.get("models", model).spec
    seq = min(spec.max_seq_len, 8192)
    # at the batch the sweep priced (its planned default: ``batch.batch_law``, tested in test_batch.py)
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision=precision), seq, res.global_batch_seqs)
    plain = next(iter_rows(search(wl, build_sku(catalog, sku, precision).hw, int(gpus), SearchOptions(), top_k=1).top))
    best = res.rows[0]
    assert best.step_time_s == plain["step"]
    assert (best.layout.tp, best.layout.pp, best.layout.cp, best.layout.zero, best.layout.micro_batch) == (
        plain["tp"], plain["pp"], plain["cp"], plain["zero"], plain["micro_batch"])
    for row in res.rows:
        rg = row.range
        assert rg is not None
        for span in (rg.step_time_s, rg.tokens_per_s, rg.days, rg.cost_usd):
            assert span.low <= span.nominal <= span.high
    sr = res.ranges[0]
    for span in (sr.step_time_s, sr.tokens_per_s, sr.tokens_per_s_per_gpu, sr.tokens_per_s_per_rack, sr.days, sr.cost_usd):
        assert span.low <= span.nominal <= span.high
    # step x tokens/s = tokens per step at every corner (1 step = global batch tokens)
    for c in (sr.pessimistic, sr.optimistic):
        assert c.step_time_s * c.tokens_per_s == pytest.approx(res.global_batch_tokens, rel=1e-12)
        # the corner's own best is never slower than the nominal best evaluated there, if that fits
        if c.nominal_layout_fits:
            assert c.step_time_s <= c.nominal_layout_step_time_s * (1 + 1e-12)
        else:
            assert any(f.kind == "fit" and f.sku == sku for f in res.flips)


def test_no_ranges_leaves_the_nominal_result_unchanged(catalog) -> None:
    from mi400plan.api.sweep import SweepReport, sweep

    a = sweep(catalog, "llama3.1-8b", ["mi300x", "mi355x"], gpus="64", report=SweepReport(top=2))
    b = sweep(catalog, "llama3.1-8b", ["mi300x", "mi355x"], gpus="64", report=SweepReport(top=2, ranges=False))
    assert b.ranges_checked is False and b.ranges == [] and b.flips == [] and all(r.range is None for r in b.rows)
    assert [r.model_copy(update={"range": None}) for r in a.rows] == b.rows
    assert a.skus == b.skus


def test_best_layout_flips_are_material(catalog) -> None:
    """A best-layout flip is reported exactly when the layout changes at a corner and the nominal best
    does not fit there or is at least 1% slower there; near-ties stay in ``layout_changes`` only."""
    from mi400plan.api.sweep import LAYOUT_FLIP_MIN_PENALTY, SweepReport, sweep
    from mi400plan.specs.layout import TrainOptions

    fp8, one = TrainOptions(precision="fp8"), SweepReport(top=1)

    assert LAYOUT_FLIP_MIN_PENALTY == 0.01
    res = sweep(catalog, "llama3.1-70b", ["mi355x", "mi455x"], gpus="1024", options=fp8, report=one)
    # A material flip (Llama 3.1 70B on 128 B200, FP8: the nominal best is 4.7 % slower at the
    # optimistic corner) and a near-tie that stays a layout change only (on 128 MI455X: 0.2 %).
    res8 = sweep(catalog, "llama3.1-70b", ["b200"], gpus="128", options=fp8, report=one)
    tie = sweep(catalog, "llama3.1-70b", ["mi455x"], gpus="128", options=fp8, report=one)
    seen_flip = seen_tie = False
    for r in (res, res8, tie):
        for sr in r.ranges:
            for c in (sr.pessimistic, sr.optimistic):
                reported = any(f.kind == "best_layout" and f.sku == sr.sku and f.gpus == sr.gpus and f.corner == c.corner
                               for f in r.flips)
                material = c.layout_changes and (
                    c.nominal_layout_fits is False or c.nominal_layout_step_time_s / c.step_time_s - 1 >= 0.01)
                assert reported == material
                seen_flip |= material
                seen_tie |= c.layout_changes and not material
    assert seen_flip and seen_tie
