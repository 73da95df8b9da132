"""Shape-aware GEMM and flash-attention model (``mi400plan/gemm.py``): hand arithmetic, a published
GEMM measurement, and properties (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan import gemm

MI300X_BF16_PEAK = 1307.4e12  # AMD MI300X datasheet, dense BF16 FLOP/s


def sku(units=304, ceiling=0.542, peak=MI300X_BF16_PEAK, bw=5.3e12 * 0.8, overhead=5e-6, operand=2.0):
    return gemm.GemmSku(peak, ceiling, bw, units, overhead, operand)


def test_maf_shape_reproduces_amds_hipblaslt_sample_line() -> None:
    """AMD's "Measuring Max-Achievable FLOPs - Part 2" (ROCm blog, 2025), appendix B sample output:
    hipblaslt-bench BF16 M=4096 N=4864 K=32896 on MI300X ran in 1,848.09 us = 709,258 GFLOP/s. The
    shape fills the machine exactly (256 x 128 tiles: 16 x 38 = 608 = 2 waves of 304 CUs), so the
    model gives the ceiling (MAF 708 / 1,307.4 = 0.542, the top of the profile's range) less the 5 us overhead:
    t = 2 x 4096 x 4864 x 32896 / (1307.4e12 x 0.542) + 5e-6 s."""
    flops = 2 * 4096 * 4864 * 32896
    assert (4096 // 256) * (4864 // 128) == 2 * 304
    t_hand = flops / (1307.4e12 * 0.542) + 5e-6
    t = float(gemm.gemm_time(4096, 4864, 32896, sku()))
    assert t == pytest.approx(t_hand, rel=1e-12)
    assert t == pytest.approx(1848.09e-6, rel=0.01)  # the published run, within 1 %


def test_wave_quantization_by_hand() -> None:
    """A100 (108 SMs): M 2560 x N 1408. 256 x 128 tiles: 10 x 11 = 110 tiles = 2 waves, 110/216 of the
    slots useful; 128 x 128 tiles: 20 x 11 = 220 tiles = 3 waves, 220/324 = 0.679 (the library's
    better choice, ``gemm.TILES``, at the fitted small-tile efficiency)."""
    fill = float(gemm.wave_fill(2560, 1408, 1, 108))
    assert fill == pytest.approx(max(110 / 216, gemm.SMALL_TILE_EFF * 220 / 324), rel=1e-12)


def test_memory_bound_gemm_by_hand() -> None:
    """A matrix-vector product (M = 1) is bound by HBM: bytes = (1 x K + K x N) x 2 + 2 x N."""
    m, n, k = 1, 8192, 8192
    by = (m * k + k * n) * 2 + 2 * m * n
    s = sku()
    assert float(gemm.gemm_seconds(m, n, k, s)) == pytest.approx(by / s.hbm_bytes_per_s, rel=1e-12)


def test_units_unknown_means_no_quantization() -> None:
    """Parts with fewer than ``MIN_UNITS_FOR_WAVES`` compute units (TPU TensorCores) or none known run
    every GEMM at the ceiling (less the HBM bound and overhead)."""
    assert float(gemm.wave_fill(100, 100, 1, 0)) == 1.0
    assert float(gemm.wave_fill(100, 100, 1, 2)) == 1.0


def test_backward_is_two_gemms_of_the_forward_flops() -> None:
    """dgrad (M x K, inner N) and wgrad (K x N, inner M) each do 2 M N K FLOPs: on a shape that fills
    the machine in every orientation the backward takes twice the forward."""
    f, b = gemm.train_gemm_seconds(4096 * 4, 4864 * 4, 4096 * 4, sku(overhead=0.0))
    assert float(b) == pytest.approx(2 * float(f), rel=0.02)


def test_flash_attention_by_hand() -> None:
    """Causal flash attention, one sequence of 8,192 tokens, 64 heads of 128, on one GPU: forward
    FLOPs actually done = 2 x 8192^2 x 64 x (128 + 128) / 2; at efficiency e of the BF16 peak, and
    64 x 64 query blocks = 4,096 work items on 304 CUs (14 waves, 4096 / 4256 useful)."""
    sh = gemm.LayerShapes(hidden=8192, attn_in=10240, attn_out_k=8192, ffn_in=57344, ffn_out_k=28672,
                          shared_in=0, shared_out_k=0, expert_in=0, expert_out_k=0, experts=0, top_k=0,
                          vocab=128256, heads=64, qk_dim=128, v_dim=128)
    a = gemm.AttnSku(MI300X_BF16_PEAK, 0.3, 304)
    f, b = gemm.attention_seconds(sh, 1, 8192.0, 1, 1, True, sku(), a)
    flops = 2 * 8192**2 * 64 * 256 / 2
    fill = 4096 / (math.ceil(4096 / 304) * 304)
    assert float(f) == pytest.approx(flops / (MI300X_BF16_PEAK * 0.3 * fill), rel=1e-12)
    assert float(b) == pytest.approx(2.5 * float(f), rel=1e-12)


dims = st.integers(min_value=1, max_value=1 << 17)


@settings(max_examples=300, deadline=None)
@given(m=dims, n=dims, k=dims, batch=st.integers(1, 64), units=st.sampled_from([0, 8, 108, 132, 256, 304]),
       ceiling=st.floats(0.2, 1.0), overhead=st.floats(0.0, 2e-5), operand=st.sampled_from([1.0, 2.0]))
def test_efficiency_never_above_the_ceiling(m, n, k, batch, units, ceiling, overhead, operand) -> None:
    s = sku(units=units, ceiling=ceiling, overhead=overhead, operand=operand)
    eff = float(gemm.gemm_efficiency(m, n, k, s, batch))
    assert 0.0 < eff <= ceiling * (1 + 1e-12)
    assert np.isfinite(eff)


@settings(max_examples=200, deadline=None)
@given(items=st.integers(1, 1 << 20), units=st.sampled_from([0, 108, 132, 304]))
def test_attention_fill_is_a_fraction(items, units) -> None:
    f = float(gemm.attention_fill(items, units))
    assert 0.0 < f <= 1.0


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["llama3.1-8b", "llama3.1-70b", "mixtral-8x7b", "qwen3-235b-a22b"]),
       sku_name=st.sampled_from(["a100", "h100", "mi300x", "mi355x", "mi455x", "b200"]),
       gpus_log2=st.integers(3, 10), seq_log2=st.integers(11, 17), precision=st.sampled_from(["bf16", "fp8"]))
def test_step_properties_over_random_workloads(catalog, model, sku_name, gpus_log2, seq_log2, precision) -> None:
    """Over random bundled models, SKUs, sizes and sequence lengths: MFU <= HFU <= 1, the step is at
    least its compute-only time (GEMMs + attention), and the breakdown adds up to the step."""
    from mi400plan.hardware import build_sku
    from mi400plan.errors import MissingValueError
    from mi400plan.params import count_params
    from mi400plan.search import BREAKDOWN, Workload, iter_rows, metrics, model_terms, search
    from mi400plan.specs.layout import train_recipe

    if precision == "fp8" and sku_name == "a100":
        precision = "bf16"  # no FP8 on Ampere
    spec = catalog.get("models", model).spec
    seq, gpus = 2**seq_log2, 2**gpus_log2
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision=precision), seq, max(gpus, 2**23 // seq))
    try:
        hw = build_sku(catalog, sku_name, precision).hw
    except MissingValueError:
        return
    res = search(wl, hw, gpus, top_k=5)
    terms = model_terms(spec, wl.counts, seq, wl.recipe)
    for r in iter_rows(res.top):
        assert r["step"] >= r["compute_only"] > 0
        assert sum(r[f"t_{k}"] for k in BREAKDOWN) == pytest.approx(r["step"], rel=1e-9)
        met = metrics(r["step"], wl, hw, gpus, terms, r["flops_hw_per_token"])
        assert 0 < met["mfu"] <= met["hfu"] <= 1.0
