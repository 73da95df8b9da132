"""Pipeline splits (uneven first/last stages, embedding and loss as layers), every VPP that divides a
stage's layers, and the ZeRO-3 / FSDP step-time terms, against hand arithmetic."""

from __future__ import annotations

import pytest


def test_uneven_stage_layers_by_hand() -> None:
    from mi400plan.pipeline import stage_layers, uneven_stage_layers

    # DeepSeek-V3, 61 layers. PP 16: middle stages ceil(61/16) = 4, first + last = 61 - 14 x 4 = 5 -> 2 and 3.
    assert uneven_stage_layers(61, 16) == (2, 4, 3)
    # PP 8: middle ceil(61/8) = 8, first + last = 61 - 6 x 8 = 13 -> 6 and 7.
    assert uneven_stage_layers(61, 8) == (6, 8, 7)
    assert sum(stage_layers(61, 16, 1, 2)) == 61 and sum(stage_layers(61, 8, 1, 2)) == 61
    # With VPP 2 every stage's layers must split in 2: middle 8 (PP 8), 13 left is odd -> no split.
    assert uneven_stage_layers(61, 8, 2) is None
    # Llama 3 405B: 126 layers at PP 16 -> 7 + 14 x 8 + 7, the same stages as the embedding/loss split.
    assert stage_layers(126, 16, 1, 2) == stage_layers(126, 16, 1, 1) == [7] + [8] * 14 + [7]


def test_custom_layout_chunks_by_hand() -> None:
    """Balanced custom layout (Megatron-Core --pipeline-model-parallel-layout) for DeepSeek-V3's 61
    layers with VPP 4, as NVIDIA's Megatron-Bridge DeepSeek-V3 runs use it (PP 2, 4 and 8)."""
    from mi400plan.pipeline import SPLIT_LAYOUT, layout_chunk_layers, pipeline_split, stage_layers

    # PP 4 x VPP 4 = 16 chunks: 61 = 16 x 3 + 13 -> 13 chunks of 4, three of 3 (chunks 0, 15, 1).
    chunks = layout_chunk_layers(61, 4, 4)
    assert chunks == (3, 3) + (4,) * 13 + (3,)
    # Stage s holds chunks s, s + 4, s + 8, s + 12: 3+4+4+4, 3+4+4+4, 4 x 4, 4+4+4+3.
    assert stage_layers(61, 4, 4, SPLIT_LAYOUT) == [15, 15, 16, 15]
    # The uneven first/last rule cannot hold VPP 4 (every stage a multiple of 4), so the layout is used.
    assert pipeline_split(61, 4, 4, uneven=True) == SPLIT_LAYOUT
    assert pipeline_split(61, 4, 4, uneven=False) == -1
    # PP 8 x VPP 4 = 32 chunks: 61 = 32 x 1 + 29 -> 29 chunks of 2, chunks 0, 31 and 1 of 1.
    assert stage_layers(61, 8, 4, SPLIT_LAYOUT) == [7, 7, 8, 8, 8, 8, 8, 7]
    # PP 2 x VPP 4 = 8 chunks: 61 = 8 x 7 + 5 -> chunks 0, 7, 1 of 7, the rest 8: stages 31 and 30.
    assert stage_layers(61, 2, 4, SPLIT_LAYOUT) == [31, 30]
    # Fewer layers than chunks: no layout.
    assert layout_chunk_layers(10, 4, 4) is None
    from mi400plan.pipeline import split_text

    assert split_text(61, 4, 4, SPLIT_LAYOUT) == "layout: 16 chunks of 3-4 layers, stages 15 + 15 + 16 + 15 layers"


def test_deepseek_v3_runs_at_pp_16_and_8_as_published(catalog) -> None:
    """DeepSeek-V3 technical report (arXiv 2412.19437, sec. 3.2): 16-way PP, 64-way EP, ZeRO-1 DP on
    2,048 H800s. 61 layers have no even split over 16 or 8 stages; the uneven split admits both."""
    from mi400plan.api.fit import LayoutPins, fit
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, layout_violations
    from mi400plan.specs.layout import train_recipe

    model = catalog.get("models", "deepseek-v3").spec
    assert model.num_layers == 61
    wl = Workload(model, count_params(model), train_recipe("megatron"), 4096, 16384)
    lay = dict(tp=1, pp=16, vpp=1, cp=1, ep=64, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    assert layout_violations(lay, wl, 2048) == []
    assert layout_violations(lay, wl, 2048, SearchOptions(uneven_pp=False)) == ["pp-layers"]
    assert layout_violations(dict(lay, pp=8), wl, 2048) == []
    r = fit(catalog, "deepseek-v3", ["h100"], "train", layout=LayoutPins(tp=1, pp=16, ep=64, zero=1),
            gpus=2048, seq=4096)
    assert r.recipe["pipeline_split"] == "uneven: 2 + 14 x 4 + 3 layers"


def test_112_layers_at_pp_16_try_vpp_7(catalog) -> None:
    """112 / 16 = 7 layers per stage: VPP 7 (one layer per chunk) is searched and valid."""
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, dimension_values, iter_rows, layout_violations, search
    from mi400plan.hardware import build_sku
    from mi400plan.specs.layout import train_recipe

    base = catalog.get("models", "llama3.1-8b").spec
    model = base.model_copy(update={"num_layers": 112, "name": "deep-8b"})
    assert 7 in dimension_values(model, 4096, 512, SearchOptions(pp=(16,)))["vpp"]
    wl = Workload(model, count_params(model), train_recipe("megatron"), 4096, 512)
    lay = dict(tp=1, pp=16, vpp=7, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    assert layout_violations(lay, wl, 512) == []
    hw = build_sku(catalog, "mi300x", "bf16").hw
    res = search(wl, hw, 512, SearchOptions(tp=(1,), pp=(16,), vpp=(7,), cp=(1,), zero=(1,)), top_k=1)
    assert next(iter_rows(res.top))["vpp"] == 7


def test_stage_memory_counts_its_own_layers() -> None:
    """A 10-layer GPT at PP 4: no even split; uneven 2 + 3 + 3 + 2. 1F1B keeps 4, 3, 2, 1 micro-batches
    in flight on stages 0-3: 8, 9, 6, 2 layer-micro-batches, so stage 1 is the heaviest, with
    3 x 3 layer activations (Korthikanti: s*b*h*(34 + 5*a*s/h) per layer with dropout, no flash)."""
    from mi400plan.memory import train_memory
    from mi400plan.params import count_params
    from mi400plan.specs.layout import RuntimeReserve, TrainRecipe
    from mi400plan.specs.model import ModelSpec

    model = ModelSpec(name="toy10", display_name="toy", hidden_size=64, num_layers=10, vocab_size=1000, ffn_dim=256,
                      ffn_kind="gelu", norm="layernorm", attention={"num_heads": 4}, max_seq_len=4096)
    rec = TrainRecipe(flash_attention=False, dropout=True, reserve=RuntimeReserve(fixed_bytes=0, fraction=0))
    s, b, h, a = 512, 1, 64, 4  # long enough for activations to outweigh the embedding's parameters
    per_layer = s * b * h * (34 + 5 * a * s / h)
    m = train_memory(model, count_params(model), rec, pp=4, seq_len=s, micro_batch=b, pipeline_split=2)
    assert int(m.stage) == 1
    assert float(m.activations) == pytest.approx(3 * 3 * per_layer, rel=1e-12)


def test_fsdp_microbatch_by_hand() -> None:
    from mi400plan.fsdp import fsdp_microbatch

    # 4 layers, gather 1 s, reduce-scatter 1 s, forward 0.5 s, backward 3 s per layer:
    # forward 1 + 3 x (1 - 0.5) = 2.5; backward 1 + max(0, 1 - 3) + 2 x max(0, 2 - 3) + max(0, 1 - 3) + 1 = 2
    t = fsdp_microbatch(1.0, 1.0, 0.5, 3.0, 4)
    assert float(t.exposed) == pytest.approx(4.5) and float(t.raw) == pytest.approx(12.0)
    # no prefetch: all 12 s exposed
    assert float(fsdp_microbatch(1.0, 1.0, 0.5, 3.0, 4, prefetch=False).exposed) == pytest.approx(12.0)
    # slow link: per layer 2 + 1 s against 0.5 / 1 s of compute
    t = fsdp_microbatch(2.0, 1.0, 0.5, 1.0, 3)
    assert float(t.exposed) == pytest.approx((2 + 2 * 1.5) + (2 + 1 + 1 * 2 + 0 + 1))
