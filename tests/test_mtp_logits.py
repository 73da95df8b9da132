"""Multi-token prediction keeps its own vocabulary logits (memory): each MTP module runs the shared output
layer on its hidden states and computes its own cross entropy (Megatron-Core ``process_mtp_loss``:
``mtp_logits = output_layer(...)``, ``compute_language_model_loss(mtp_labels, mtp_logits)``), so the last stage
holds ``1 + mtp_layers`` copies of the logits and of the output layer's input. Checked by hand."""

from __future__ import annotations

from mi400plan.memory import train_memory
from mi400plan.params import count_params
from mi400plan.specs.layout import train_recipe


def test_one_mtp_module_adds_one_micro_batch_of_logits(catalog) -> None:  # noqa: ANN001
    """Llama 3.1 8B, TP 1, PP 1, micro-batch 2 of 4,096 tokens: one MTP module adds 8,192 tokens x
    (128,256 padded vocabulary rows x 4 B of fp32 logits + 2 x 2 B x 4,096 of final-norm and head input)
    = 8,192 x (513,024 + 16,384) = 4,336,910,336 B of activations; nothing else moves."""
    assert 128_256 % 128 == 0
    per_token = 128_256 * 4 + 2 * 2 * 4096
    assert 8192 * per_token == 4_336_910_336
    model = catalog.get("models", "llama3.1-8b").spec
    counts = count_params(model)
    kw = dict(tp=1, pp=1, dp=8, micro_batch=2, seq_len=4096, zero=1)
    base = train_memory(model, counts, train_recipe("megatron"), **kw)
    mtp = train_memory(model, counts, train_recipe("megatron").model_copy(update={"mtp_layers": 1}), **kw)
    assert float(mtp.activations - base.activations) == 4_336_910_336
    assert (float(mtp.weights), float(mtp.gradients)) == (float(base.weights), float(base.gradients))
    two = train_memory(model, counts, train_recipe("megatron").model_copy(update={"mtp_layers": 2}), **kw)
    assert float(two.activations - base.activations) == 2 * 4_336_910_336


def test_fused_cross_entropy_keeps_each_mtp_logits_at_16_bits(catalog) -> None:  # noqa: ANN001
    model = catalog.get("models", "llama3.1-8b").spec
    counts = count_params(model)
    kw = dict(tp=2, pp=1, dp=4, micro_batch=1, seq_len=4096, zero=1, sequence_parallel=True)
    rec = train_recipe("megatron", fused_cross_entropy=True)
    base = train_memory(model, counts, rec, **kw)
    mtp = train_memory(model, counts, rec.model_copy(update={"mtp_layers": 1}), **kw)
    # 4,096 tokens x (128,256 / 2 rows x 2 B + 2 x 2 B x 4,096 / 2 (sequence parallel)) = 4,096 x 136,448
    assert float(mtp.activations - base.activations) == 4096 * (128_256 // 2 * 2 + 2 * 2 * 4096 // 2)
