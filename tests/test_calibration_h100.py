"""H100 efficiency calibration: the sweep model reproduces Llama 3 405B pre-training (Meta 2024, Table 4).

Reference: Llama Team, AI @ Meta, "The Llama 3 Herd of Models", arXiv 2407.21783 (2024), Table 4
(scaling configurations and MFU of Llama 3 405B pre-training) and section 3.3. Hardware: H100 SXM5
80 GB at 700 W, 8 per server on NVLink, 400 Gb/s RoCE per GPU between servers (the h100 profile:
nvlink4-hgx8 + 400 Gb/s per GPU scale-out). BF16. Model: 126 layers, hidden 16,384, FFN 53,248,
128 heads, 8 KV heads, vocabulary 128,256 (the bundled ``llama3.1-405b``). Every row runs 16M
tokens per step (2,048 x 8,192 or 128 x 131,072 = 16,777,216).

Columns: GPUs, TP, CP, PP, DP, sequence length, sequences per DP rank, published TFLOP/s per GPU,
published BF16 MFU. The same three rows (GPUs, TP, CP, PP, tokens per batch, TFLOP/s) appear on the
slide of P. Balaji, "Herding Llamas", SC'24, as tabulated at glennklockwood.com/garden/llama-3.1.

What the paper states about the runs, and how the search is pinned to it:

* order [TP, CP, PP, DP], DP = FSDP that shards optimizer states and gradients but keeps the
  parameters unsharded after the forward pass: the tool's ZeRO-1/2 (searched between the two);
* no activation recomputation at 8K ("without activation checkpointing", thanks to freeing each
  pipeline stage's inputs and outputs early); the 128K row with CP 16 holds the same 8,192 tokens
  per GPU, so recompute is pinned to none everywhere. The three layouts fit the H100's HBM as the
  memory model counts them (``tests/test_memory_published.py``, 1F1B), and the search runs on the
  real capacity. One exception, pinned by ``test_interleaved_8k_row_is_over_capacity``: the 8,192-GPU
  row's 32 micro-batches per DP rank need the interleaved schedule for its step time, and
  Megatron-Core's interleaved warm-up keeps ``2 (P - 1 - i) + (V - 1) P + 1`` chunk-micro-batches in
  flight on stage ``i`` (141 one-layer chunks on stage 1 at VPP 8): 79.7 GiB allocated by Korthikanti's
  accounting, more than the 79.6 GiB an H100 reports before any runtime reserve. Llama 3 runs its own
  schedule (sec. 3.3.2, Figure 6); PyTorch's flexible interleaved 1F1B (pytorch/pytorch PR 129597,
  2024-06-26) holds the same 141 chunks at 32 micro-batches, and the stage inputs and outputs the paper
  frees early are not in that count (``tests/test_memory_published.py``). The row is searched at the real
  capacity like every other (no capacity check is lifted), so it falls back to VPP 1 and fails its
  tolerance: an expected failure until a source states what else that run kept out of HBM;
* one transformer layer fewer on the first and the last pipeline stage (126 + 2 = 128 = 16 x 8):
  ``split_embedding_loss``;
* interleaved schedule (virtual stages searched) with asynchronous point-to-point: ``overlap_pp``;
* all-gather-based CP whose exchange is exposed on the critical path: ``overlap_cp=False``;
* micro-batch size and sequence parallelism are searched.

FLOP convention: "ours" counts the tool's model FLOPs (``params.model_flops_per_token``: 6N plus
12 x layers x seq x heads x head_dim, causal mask not halved, as Megatron-LM and PaLM count them).
The step time prices each GEMM at its shape (``mi400plan/gemm.py``) and flash attention at its own
efficiency on the causal half it computes. ``benchmarks/fit_gemm.py`` fits the H100 large-GEMM
ceiling (0.545) on the two 8K rows and the attention efficiency (0.27) on the 128K row, where
attention is 57 % of the model FLOPs.

Tolerance (issue 9's calibration targets): every row within 7 %, mean absolute error within 3 %.
"""

from __future__ import annotations


import pytest

# (gpus, tp, cp, pp, dp, seq_len, seqs_per_dp, published TFLOP/s per GPU, published BF16 MFU %)
TABLE_4 = [
    (8192, 8, 1, 16, 64, 8192, 32, 430, 43),
    (16384, 8, 1, 16, 128, 8192, 16, 400, 41),
    (16384, 8, 16, 16, 8, 131072, 16, 380, 38),
]
IDS = ["8K-8192gpus", "8K-16384gpus", "128K-cp16-16384gpus"]
ROW_TOL = {8192: 0.07, 131072: 0.07}
MEAN_TOL = 0.03
H100_BF16_PEAK_TFLOPS = 989.4  # dense BF16, H100 SXM5 (h100 profile, N1)


def achieved_tflops(catalog, row) -> tuple[float, dict]:
    from mi400plan.hardware import build_sku
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, iter_rows, model_terms, search
    from mi400plan.specs.layout import train_recipe

    gpus, tp, cp, pp, dp, seq, per_dp, _, _ = row
    model = catalog.get("models", "llama3.1-405b").spec
    counts = count_params(model)
    batch = dp * per_dp
    wl = Workload(model, counts, train_recipe("megatron"), seq, batch)
    hw = build_sku(catalog, "h100", "bf16").hw
    opts = SearchOptions(tp=(tp,), cp=(cp,), pp=(pp,), zero=(1, 2), recompute=(0,), split_embedding_loss=True,
                         overlap_pp=True, overlap_cp=False)
    res = search(wl, hw, gpus, opts, top_k=1)
    assert res.top["tp"].size, f"no valid layout for {row}: {res.rejected}"
    best = next(iter_rows(res.top))
    assert best["dp"] == dp
    # Model FLOPs per token written out from the architecture (not from the tool): 6 x matmul weights
    # (Q 16,384 x 16,384, K and V 16,384 x 1,024 each, O 16,384 x 16,384, SwiGLU 3 x 16,384 x 53,248,
    # per layer, x 126, plus the 128,256 x 16,384 LM head) + 12 x layers x seq x heads x head_dim.
    h, ffn, kv, vocab, layers = 16384, 53248, 8 * 128, 128256, 126
    n_matmul = layers * (2 * h * h + 2 * h * kv + 3 * h * ffn) + vocab * h
    flops_tok = 6 * n_matmul + 12 * layers * seq * 128 * 128
    assert model_terms(model, counts, seq, wl.recipe).flops_model == pytest.approx(flops_tok, rel=1e-12)
    return flops_tok * batch * seq / best["step"] / gpus / 1e12, best


def test_table4_rows_are_consistent() -> None:
    """Each row's world size and batch, from its own columns: GPUs = TP x CP x PP x DP, and
    16M tokens per step = DP x sequences per DP rank x sequence length (2^24 = 16,777,216)."""
    for gpus, tp, cp, pp, dp, seq, per_dp, tflops, mfu in TABLE_4:
        assert tp * cp * pp * dp == gpus
        assert dp * per_dp * seq == 2**24
        # MFU column = TFLOP/s / 989.4 within the table's rounding (TFLOP/s to 10, MFU to 1 %)
        lo, hi = (tflops - 5) / H100_BF16_PEAK_TFLOPS * 100, (tflops + 5) / H100_BF16_PEAK_TFLOPS * 100
        assert lo - 0.5 <= mfu <= hi + 0.5


def test_126_layers_split_over_16_stages_needs_the_embedding_loss_split(catalog) -> None:
    """126 % 16 = 14 (no even split); (126 + 2) / 16 = 8 layers per stage with one fewer on the
    first and last stages, which is how the paper runs PP 16."""
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, layout_violations
    from mi400plan.specs.layout import train_recipe

    model = catalog.get("models", "llama3.1-405b").spec
    wl = Workload(model, count_params(model), train_recipe("megatron"), 8192, 2048)
    lay = dict(tp=8, pp=16, vpp=1, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=1)
    assert 126 % 16 == 14 and 128 % 16 == 0
    even = SearchOptions(uneven_pp=False)
    assert layout_violations(lay, wl, 8192, even) == ["pp-layers"]
    assert layout_violations(lay, wl, 8192, SearchOptions(split_embedding_loss=True, uneven_pp=False)) == []
    # 128 / (16 x 8) = 1 layer per model chunk: VPP 8 is valid, VPP 3 is not (128 % 48 = 32)
    assert layout_violations(dict(lay, vpp=8), wl, 8192, SearchOptions(split_embedding_loss=True)) == []
    assert layout_violations(dict(lay, vpp=3), wl, 8192, SearchOptions(split_embedding_loss=True, uneven_pp=False)) \
        == ["pp-layers"]
    # A balanced custom layout holds it: 126 = 48 x 2 + 30 layers in 48 chunks, at most 8 per stage.
    assert layout_violations(dict(lay, vpp=3), wl, 8192, SearchOptions(split_embedding_loss=True)) == []


# The 8,192-GPU row ran interleaved; the memory model counts that layout over the H100's capacity
# (``test_interleaved_8k_row_is_over_capacity``), so the search at the real capacity falls back to VPP 1
# and the row comes out about 29 % slow. It stays a failing calibration point until a source states what
# else Llama 3's run kept out of HBM (sec. 3.3.2 names nothing the count holds); the capacity check is not
# lifted for it.
OVER_CAPACITY = pytest.mark.xfail(strict=True, reason="interleaved 8K row over capacity in the memory model")
ROWS = [pytest.param(r, marks=OVER_CAPACITY) if r[6] > r[3] else r for r in TABLE_4]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_table4_row(catalog, row) -> None:
    ours, best = achieved_tflops(catalog, row)
    pub = row[7]
    err = (ours - pub) / pub
    layout = {k: best[k] for k in ("vpp", "zero", "micro_batch", "sp")}
    print(f"\n{row[0]:>6} GPUs seq {row[5]:>6}  published {pub} TFLOP/s  ours {ours:.1f}  error {err * 100:+.1f}%  {layout}")
    tol = ROW_TOL[row[5]]
    assert abs(err) <= tol, f"{row}: {ours:.1f} vs published {pub} TFLOP/s ({err * 100:+.1f}%)"


@OVER_CAPACITY
def test_table4_mean_error(catalog) -> None:
    errs = [abs((achieved_tflops(catalog, r)[0] - r[7]) / r[7]) for r in TABLE_4]
    mean = sum(errs) / len(errs)
    print(f"\nmean absolute error {mean * 100:.1f}% over {len(errs)} rows")
    assert mean <= MEAN_TOL


def test_h100_profile_carries_the_fitted_value(catalog) -> None:
    """The profile's nominals are the values fitted on this table (ceiling 0.545, attention 0.27),
    marked measured and citing the paper."""
    for sku in ("h100", "h200"):
        eff = catalog.get("accelerators", sku).spec.efficiency
        assert eff.matmul_bf16.nominal == pytest.approx(0.545)
        assert eff.attention.nominal == pytest.approx(0.27)
        for est in (eff.matmul_bf16, eff.attention):
            assert est.status == "measured"
            assert "LL3" in est.source


def test_interleaved_8k_row_is_over_capacity(catalog) -> None:
    """Stage 1 of TP8 PP16 VPP8 DP64 (one layer per chunk, 32 micro-batches): 2 x 14 + 7 x 16 + 1 = 141
    layer-micro-batches of 8,192 tokens x 65,088 B (``tests/test_memory_published.py``) = 75.2 GB of
    activations; with 8 layers' whole BF16 weights (6.4 GB), ZeRO-2 gradients and optimizer states the
    allocated bytes alone exceed the 79.6 GiB an H100 reports, before any runtime reserve: "does not
    fit" under every reserve. At 16 micro-batches (the 16,384-GPU rows) the warm-up is capped at all
    16 x 8 chunks = 128 and it fits."""
    from mi400plan.api.fit import LayoutPins, fit
    from mi400plan.specs.layout import TrainOptions

    kw = dict(layout=LayoutPins(tp=8, cp=1, pp=16, vpp=8, zero=2, micro_batch=1, recompute="none"), seq=8192,
              options=TrainOptions(split_embedding_loss=True))
    row = fit(catalog, "llama3.1-405b", ["h100"], "train", gpus=8192, global_batch=2048, **kw).rows[0]
    assert row.memory_bytes.activations == 141 * 8192 * 65088
    mb = row.memory_bytes
    allocated = mb.weights + mb.gradients + mb.optimizer + mb.activations
    assert row.verdict == "does_not_fit" and allocated > row.capacity_bytes == 81_559 * 2**20
    row = fit(catalog, "llama3.1-405b", ["h100"], "train", gpus=16384, global_batch=2048, **kw).rows[0]
    assert row.memory_bytes.activations == 128 * 8192 * 65088 and row.verdict == "fits"
