"""A100 efficiency calibration: the sweep model reproduces Narayanan et al. 2021, Table 1.

Reference: D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21 (arXiv 2104.04473), Table 1 (weak scaling, GPT, vocabulary 51,200, sequence
2,048, A100 80GB on Selene: 8 GPUs per node on NVLink/NVSwitch, 8 x 200 Gb/s HDR InfiniBand per
node). Columns: parameters (billions), heads, hidden, layers, TP, PP, GPUs, batch (sequences),
achieved TFLOP/s per GPU. Their TFLOP/s count recomputation (their eq. 3: 96 B s l h^2 (1 + s/6h +
V/16lh) per iteration = full activation recomputation), so the test divides eq. 3's FLOPs, written
out here, by the tool's step time (and checks the tool charges exactly that work).
The runs used the software of the time: full recomputation, no sequence parallelism, no flash
attention (softmax and dropout through HBM), dropout on, gradient all-reduce after the backward pass
(no overlap), pipeline sends and receives exposed (no ``overlap_p2p_comm`` yet: the search's
default now follows current Megatron-LM and overlaps them, so these runs pin ``overlap_pp=False``),
no distributed optimizer (ZeRO 0). The layout search picks the micro-batch size and
virtual stages (the paper tuned them per run; they are not in Table 1).

Tolerance (issue 9's calibration targets): every row within 7 %, mean absolute error within 3 %. The
efficiencies are fitted by ``benchmarks/fit_gemm.py`` (A100: large-GEMM ceiling 0.685 and HBM
efficiency 0.90 of the shape-aware GEMM model, ``mi400plan/gemm.py``).
"""

from __future__ import annotations

import pytest

# (params_B, heads, hidden, layers, tp, pp, gpus, batch_seqs, published TFLOP/s per GPU)
TABLE_1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163),
]
ROW_TOL = 0.07
MEAN_TOL = 0.03
ERRORS: dict[float, tuple[float, float, float]] = {}  # params_B -> (published, ours, relative error)


def _gpt(heads: int, hidden: int, layers: int):
    from mi400plan.specs.model import Attention, ModelSpec

    return ModelSpec(
        name="gpt-table1", display_name="GPT (Narayanan et al. 2021)", hidden_size=hidden, num_layers=layers,
        vocab_size=51200, ffn_dim=4 * hidden, ffn_kind="gelu", linear_bias=True, norm="layernorm",
        position_embedding="learned", max_seq_len=2048, tie_embeddings=True, attention=Attention(num_heads=heads),
    )


def achieved_tflops(catalog, row, overlap_pp: bool = False) -> float:
    from mi400plan.hardware import build_sku
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, iter_rows, search
    from mi400plan.specs.layout import train_recipe

    _, heads, hidden, layers, tp, pp, gpus, batch, _ = row
    model = _gpt(heads, hidden, layers)
    # fp16 mixed precision (Megatron-LM's GPT scripts of the time use --fp16): gradients accumulate and
    # are all-reduced in fp16 (``accumulate_allreduce_grads_in_fp32`` is off unless BF16 forces it).
    recipe = train_recipe("megatron", grad_dtype="fp16").model_copy(update={"flash_attention": False, "dropout": True})
    wl = Workload(model, count_params(model), recipe, 2048, batch)
    hw = build_sku(catalog, "a100", "bf16").hw
    opts = SearchOptions(tp=(tp,), pp=(pp,), cp=(1,), zero=(0,), recompute=(2,), sequence_parallel=(0,),
                         overlap_dp=False, overlap_pp=overlap_pp)
    res = search(wl, hw, gpus, opts, top_k=1)
    assert res.top["tp"].size, f"no valid layout for the {row[0]}B row: {res.rejected}"
    best = next(iter_rows(res.top))
    assert best["dp"] == gpus // (tp * pp)
    # FLOP per iteration from the paper's own formula (eq. 3, full recomputation), not from the tool:
    # F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)). The tool's step time must reproduce the
    # published rate with the paper's FLOP count, so an error in the tool's FLOP count shows up here.
    s, v = 2048, 51200
    flops = 96 * batch * s * layers * hidden**2 * (1 + s / (6 * hidden) + v / (16 * layers * hidden))
    # ... and the tool charges exactly that work (6N + attention + one extra forward, per token)
    assert best["flops_hw_per_token"] * batch * s == pytest.approx(flops, rel=1e-12)
    return flops / best["step"] / gpus / 1e12


@pytest.mark.parametrize("row", TABLE_1, ids=[f"{r[0]}B" for r in TABLE_1])
def test_table1_row(catalog, row) -> None:
    ours = achieved_tflops(catalog, row)
    pub = row[-1]
    err = (ours - pub) / pub
    ERRORS[row[0]] = (pub, ours, err)
    print(f"\n{row[0]:>7}B  published {pub} TFLOP/s  ours {ours:.1f}  error {err * 100:+.1f}%")
    assert abs(err) <= ROW_TOL, f"{row[0]}B: {ours:.1f} vs published {pub} TFLOP/s ({err * 100:+.1f}%)"


def test_table1_mean_error(catalog) -> None:
    errs = [abs((achieved_tflops(catalog, r) - r[-1]) / r[-1]) for r in TABLE_1]
    mean = sum(errs) / len(errs)
    print(f"\nmean absolute error {mean * 100:.1f}% over {len(errs)} rows")
    assert mean <= MEAN_TOL


def test_2021_runs_pin_exposed_pipeline_sends(catalog) -> None:
    """The search's default overlaps interleaved-pipeline sends (Megatron-LM's ``overlap_p2p_comm``,
    added after 2021); the calibration pins it off. The pin is not a no-op: every pipelined row
    (PP 2-64) runs virtual stages in the search, so overlapping would raise its achieved rate (by
    about 1-2 %), while the rows without PP do not change."""
    from mi400plan.search import SearchOptions

    assert SearchOptions().overlap_pp is True
    for row in TABLE_1:
        pinned, overlapped = achieved_tflops(catalog, row), achieved_tflops(catalog, row, overlap_pp=True)
        if row[5] == 1:
            assert overlapped == pinned
        else:
            assert pinned < overlapped < 1.03 * pinned


def test_published_percent_of_peak_is_consistent() -> None:
    """Table 1's % of peak column is TFLOP/s / 312 (A100 dense BF16): 137/312 = 44 %, 163/312 = 52 %."""
    assert round(137 / 312 * 100) == 44
    assert round(163 / 312 * 100) == 52
