"""Flash attention's rate by sequence length, per kernel generation (``gemm.attention_length_factor``).

Expected numbers come from the published kernel benchmark: Shah et al., "FlashAttention-3", arXiv
2407.08608 (2024-07-11), Figure 5, forward pass with causal mask, head dim 128, BF16, H100 80GB SXM5,
TFLOP/s at sequence 512 / 1k / 2k / 4k / 8k / 16k:

    FlashAttention-2  191  260  298  319  333  335
    cuDNN             315  410  484  518  529  539
    FlashAttention-3  292  423  521  579  602  616

A rate ``r_inf s / (s + s_half)`` through the two end points gives, by hand,
``s_half = (r16k / r512 - 1) / (1 / 512 - (r16k / r512) / 16384)``:
FA2 335 / 191 = 1.7539: 0.7539 / (0.0019531 - 0.0001071) = 408; cuDNN 539 / 315 = 1.7111:
0.7111 / (0.0019531 - 0.0001044) = 385; FA3 616 / 292 = 2.1096: 1.1096 / (0.0019531 - 0.0001288) = 608.
"""

from __future__ import annotations

import numpy as np
import pytest

from mi400plan import gemm
from mi400plan.stacks import StackRequest

SEQ = (512, 1024, 2048, 4096, 8192, 16384)
PUBLISHED = {
    "fa2": (191, 260, 298, 319, 333, 335),
    "cudnn": (315, 410, 484, 518, 529, 539),
    "fa3": (292, 423, 521, 579, 602, 616),
}
TWO_POINT = {"fa2": 408.0, "cudnn": 385.0, "fa3": 608.0}


@pytest.mark.parametrize("kernel", sorted(PUBLISHED))
def test_half_keys_agree_with_the_two_point_hand_solution(kernel: str) -> None:
    assert gemm.ATTN_HALF_KEYS[kernel] == pytest.approx(TWO_POINT[kernel], rel=0.05)


@pytest.mark.parametrize("kernel", sorted(PUBLISHED))
def test_the_factor_reproduces_the_published_rates_relative_to_16k(kernel: str) -> None:
    """Each published rate over the 16k rate, against the model's factor ratio: within 6 %."""
    pub = np.array(PUBLISHED[kernel], dtype=float)
    f = gemm.attention_length_factor(np.array(SEQ, dtype=float), gemm.ATTN_HALF_KEYS[kernel])
    np.testing.assert_allclose(f / f[-1], pub / pub[-1], rtol=0.06)


def test_the_catalog_carries_the_published_figure() -> None:
    assert gemm.ATTN_BENCH_SEQ == SEQ
    assert {k: tuple(int(x) for x in v) for k, v in gemm.ATTN_BENCH_TFLOPS.items()} == PUBLISHED


def test_factor_values_by_hand() -> None:
    # FA2: 2,048 / (2,048 + 402) = 0.83592; 131,072 / 131,474 = 0.99694; no s_half: 1
    assert gemm.attention_length_factor(2048, 402.0) == pytest.approx(2048 / 2450)
    assert gemm.attention_length_factor(131072, 402.0) == pytest.approx(131072 / 131474)
    assert gemm.attention_length_factor(2048, 0.0) == pytest.approx(1.0)


def test_kernels_without_a_fit_take_the_fa2_rule() -> None:
    for k in ("triton", "ck", "", None):
        assert gemm.attention_half_keys(k) == gemm.ATTN_HALF_KEYS["fa2"]


def test_training_attention_time_is_divided_by_the_factor() -> None:
    """One sequence of 2,048 tokens, 32 heads of 128, 132 units, FA2: the time is the long-sequence time
    x (2,048 + 402) / 2,048 = 1.19629; a packed span of 512 keys: x (512 + 402) / 512 = 1.78516."""
    sh = gemm.LayerShapes(hidden=4096, attn_in=6144, attn_out_k=4096, ffn_in=28672, ffn_out_k=14336,
                          shared_in=0, shared_out_k=0, expert_in=0, expert_out_k=0, experts=0, top_k=0,
                          vocab=128256, heads=32, qk_dim=128, v_dim=128)
    g = gemm.GemmSku(989.4e12, 0.545, 2.68e12, 132, 5e-6)
    flat = gemm.AttnSku(989.4e12, 0.27, 132)
    fa2 = gemm.AttnSku(989.4e12, 0.27, 132, 402.0)
    f0, b0 = gemm.attention_seconds(sh, 1, 2048.0, 1, 1, True, g, flat)
    f1, b1 = gemm.attention_seconds(sh, 1, 2048.0, 1, 1, True, g, fa2)
    assert float(f1) == pytest.approx(float(f0) * 2450 / 2048)
    assert float(b1) == pytest.approx(float(b0) * 2450 / 2048)
    p0, _ = gemm.attention_seconds(sh, 1, 2048.0, 1, 1, True, g, flat, span=512.0)
    p1, _ = gemm.attention_seconds(sh, 1, 2048.0, 1, 1, True, g, fa2, span=512.0)
    assert float(p1) == pytest.approx(float(p0) * 914 / 512)


def test_the_stack_kernel_sets_the_half_keys(catalog) -> None:
    """H100 on its default stack (Megatron-Bridge 25.11: cuDNN) 387; torchtitan (FA2) 402; --attention-kernel
    fa3 602; a vendor with no stack (Google's TPU) the FA2 rule, 402."""
    from mi400plan.hardware import build_sku

    def half(sku: str, name: str | None = None, **kw: str) -> float:
        return build_sku(catalog, sku, "bf16", stack=StackRequest(name, kw)).hw.attn_sku().half_keys

    assert half("h100") == 387.0
    assert half("h100", "torchtitan") == 402.0
    assert half("h100", attention_kernel="fa3") == 602.0
    assert half("tpu-v5p") == 402.0
