"""LoRA fine-tuning: frozen base weights, trainable low-rank adapters (parameters, FLOPs, memory, step time).

Mechanism (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models", arXiv 2106.09685, sec. 4.1):
a target linear layer ``W`` (``d_in x d_out``, frozen) gets ``y = x W + (x A) B`` with ``A`` ``d_in x r`` and
``B`` ``r x d_out`` trainable. What that changes in a training step:

* Base weights are frozen: no weight-gradient GEMM for any base matrix (attention, FFN, experts, LM head,
  router), so their backward is the data gradient alone (``dX = dY W^T``, still needed for the layers below):
  4 FLOPs per weight per token (forward 2 + data gradient 2) instead of 6. No gradient buffer and no
  optimizer state (fp32 master, Adam moments) for them: the base weights cost their working copy only
  (BF16, plus Transformer Engine's cached FP8 casts under FP8 training). Megatron-Bridge's PEFT sets
  ``requires_grad = False`` on every base parameter and builds its gradient buffers and distributed
  optimizer over the trainable parameters only (``megatron/bridge/peft/base.py``, ``freeze_model``;
  NVIDIA-NeMo/Megatron-Bridge, 2026-06).
* Adapters train in full: gradients, fp32 master and optimizer moments (``TrainRecipe`` bytes per
  parameter), and forward ``2 r (d_in + d_out)`` FLOPs per token per adapter, x3 with their backward (data
  and weight gradients). Both adapter GEMMs are priced at their own shapes (``gemm.train_gemm_seconds``):
  ``x A`` reads the layer input again, so a skinny adapter GEMM is bound by HBM, not by math.
* Data parallelism reduces (and ZeRO-1 gathers) the adapter parameters only; ZeRO-3 still gathers the
  frozen base weights for each layer (they are sharded) but reduce-scatters only adapter gradients.
* Activations: a frozen linear layer without an adapter saves no input (Transformer Engine keeps a GEMM's
  input only for its weight gradient: ``backward_needs_input = is_grad_enabled and weight.requires_grad``,
  ``transformer_engine/pytorch/module/linear.py``; ``memory._frozen_inputs``; an MoE layer's expert inputs are
  kept, an upper bound); a target's input stays saved (its adapter's ``A`` reads it for ``dA``), and each
  adapter adds its intermediate ``x A`` (``r`` elements per token, for ``dB``). Adapter dropout (the MLPerf
  reference's 0.1) is not counted.

Model FLOPs (the MFU convention): ``4 N + 6 N_adapter + 3 attention``, ``N`` the base matmul weights one
token meets (``params.matmul_params_per_token``), ``N_adapter`` the adapter weights one token meets, and
attention's score/context FLOPs forward and backward in full (the data gradient needs them). NVIDIA's
Megatron-Bridge performance summary (26.06, 2026-06-15) reports LoRA "Model TFLOP/sec/GPU" at about 2/3 of
its full fine-tuning count per token, the same 4N-for-6N convention.

Targets: Megatron-Core's module names ``linear_qkv`` (fused Q, K, V), ``linear_proj`` (attention output),
``linear_fc1`` (FFN input, the fused gate and up projections under SwiGLU), ``linear_fc2`` (FFN output).
In an MoE layer ``fc1``/``fc2`` adapt the shared experts and every routed expert, one adapter per expert
(Megatron-Bridge ``share_expert_adapters=False``, as Hugging Face PEFT wraps each expert module; Megatron-Bridge's
default shares one adapter among an EP rank's local experts: fewer adapter parameters, the same FLOPs).
MLA's projection chain has no fused QKV: ``qkv`` is refused on MLA models.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mi400plan import gemm
from mi400plan.errors import UsageError
from mi400plan.params import matmul_params_per_token, model_flops_per_token
from mi400plan.records import record

# The targets, by short name, and the spellings accepted for each (Megatron-Core module names, the Hugging
# Face PEFT names of the MLPerf reference's fused-QKV Llama 2).
LORA_TARGETS = ("qkv", "proj", "fc1", "fc2")
TARGET_ALIASES = {
    "qkv": "qkv", "linear_qkv": "qkv", "qkv_proj": "qkv",
    "proj": "proj", "linear_proj": "proj", "o_proj": "proj",
    "fc1": "fc1", "linear_fc1": "fc1",
    "fc2": "fc2", "linear_fc2": "fc2",
}
# Default rank and targets: the MLPerf Training Llama 2 70B LoRA reference (mlcommons/training,
# ``llama2_70b_lora/run_llama_70B_scrolls_r16.sh``, commit 7d3dee3, 2024-04-18: ``--lora_r 16 --lora_alpha 32
# --lora_target_modules "qkv_proj,o_proj"``), the public benchmark of LoRA training throughput.
DEFAULT_LORA_RANK = 16
DEFAULT_LORA_TARGETS = ("qkv", "proj")
DEFAULT_RULE = "MLPerf Training Llama 2 70B LoRA reference, 2024-04-18"
FINETUNE_MODES = ("none", "lora")


@record
class LoraSpec:
    """LoRA rank and target layers (short names of ``LORA_TARGETS``, in that order)."""

    rank: int
    targets: tuple[str, ...]

    def text(self, rank_default: bool = False, targets_default: bool = False) -> str:
        """One line for the output, naming the rule behind each default used (``DEFAULT_RULE``)."""
        which = [w for w, d in (("rank", rank_default), ("targets", targets_default)) if d]
        rule = f" ({' and '.join(which)}: the {DEFAULT_RULE}; --lora-rank / --lora-targets)" if which else ""
        return (f"LoRA rank {self.rank} on {','.join(self.targets)}{rule}; base weights frozen (no weight "
                "gradients, gradients or optimizer states for them), adapters trained in full; model FLOPs per "
                "token 4 x base + 6 x adapter matmul weights + attention")


def finetune_text(options: Any) -> str | None:
    """The fine-tuning line of a ``TrainOptions`` (None: pre-training, every weight trains)."""
    if getattr(options, "finetune", "none") != "lora":
        return None
    rank = options.lora_rank or DEFAULT_LORA_RANK
    targets = tuple(options.lora_targets) if options.lora_targets else DEFAULT_LORA_TARGETS
    return LoraSpec(rank, targets).text(options.lora_rank is None, not options.lora_targets)


def parse_targets(given: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Target names (a list, or one string separated by commas or ``+``) as short names in
    ``LORA_TARGETS`` order; an unknown name is a usage error naming the known ones."""
    items = given.replace("+", ",").split(",") if isinstance(given, str) else list(given)
    names = [str(x).strip().lower() for x in items if str(x).strip()]
    unknown = [n for n in names if n not in TARGET_ALIASES]
    if unknown or not names:
        raise UsageError(f"unknown LoRA target(s) {', '.join(unknown) or '(none given)'}; known: "
                         f"{', '.join(LORA_TARGETS)} (or linear_qkv, linear_proj, linear_fc1, linear_fc2, "
                         "qkv_proj, o_proj)")
    short = {TARGET_ALIASES[n] for n in names}
    return tuple(t for t in LORA_TARGETS if t in short)


def lora_of(recipe: Any) -> LoraSpec | None:
    """The LoRA adapters of a ``TrainRecipe`` (None: every weight trains)."""
    rank = int(getattr(recipe, "lora_rank", 0) or 0)
    return LoraSpec(rank, tuple(recipe.lora_targets)) if rank > 0 else None


def check_lora(model: Any, spec: LoraSpec | None) -> None:
    """Refuse adapters the model cannot have: a rank above the hidden size (the adapter would not be low
    rank: ``r <= min(d_in, d_out)``, and every target has the hidden size on one side) and ``qkv`` on MLA."""
    if spec is None:
        return
    if spec.rank > model.hidden_size:
        raise UsageError(f"--lora-rank {spec.rank} exceeds {model.name}'s hidden size {model.hidden_size}: "
                         "a LoRA adapter's rank is at most min(d_in, d_out)")
    if "qkv" in spec.targets and model.attention.kind == "mla":
        raise UsageError(f"{model.name} uses multi-head latent attention, which has no fused QKV projection "
                         "for a 'qkv' LoRA target; use --lora-targets proj,fc1,fc2")


@record
class Adapters:
    """(d_in, d_out) of each adapter of one layer: TP-split ones (attention, dense FFN, shared experts)
    and routed-expert ones (one per expert, ``per_token`` of them used by each token)."""

    tp: tuple[tuple[float, float], ...]
    expert: tuple[tuple[float, float], ...]
    experts: int  # routed experts holding one adapter each per expert target
    per_token: int  # routed experts one token passes (top_k)


def layer_adapters(model: Any, spec: LoraSpec, moe: bool) -> Adapters:
    """The adapters of one dense (``moe`` False) or MoE layer of ``model`` (module docstring's targets)."""
    h, a, m = model.hidden_size, model.attention, model.moe
    gated = 2 if model.ffn_kind == "swiglu" else 1
    out_k = a.num_heads * (a.v_head_dim or 0) if a.kind == "mla" else a.num_heads * a.head_size(h)
    tp: list[tuple[float, float]] = []
    if "qkv" in spec.targets:
        d = a.head_size(h)
        tp.append((h, a.num_heads * d + 2 * a.kv_heads * d))
    if "proj" in spec.targets:
        tp.append((out_k, h))
    ffn = [] if moe else [model.ffn_dim]
    expert: list[tuple[float, float]] = []
    if moe and m is not None:
        shared = m.num_shared_experts * (m.shared_expert_ffn_dim or m.expert_ffn_dim)
        ffn = [shared] if shared else []
        if "fc1" in spec.targets:
            expert.append((h, gated * m.expert_ffn_dim))
        if "fc2" in spec.targets:
            expert.append((m.expert_ffn_dim, h))
    for f in ffn:
        if "fc1" in spec.targets:
            tp.append((h, gated * f))
        if "fc2" in spec.targets:
            tp.append((f, h))
    return Adapters(tuple(tp), tuple(expert), m.num_experts if (moe and m) else 0, m.top_k if (moe and m) else 0)


def _width(pairs: tuple[tuple[float, float], ...]) -> float:
    return float(sum(i + o for i, o in pairs))


def adapter_params(model: Any, counts: Any, spec: LoraSpec) -> tuple[float, float]:
    """Adapter parameters of the whole model: (TP-split, routed-expert), ``r (d_in + d_out)`` per adapter."""
    n_moe = counts.num_moe_layers
    dense, moe = layer_adapters(model, spec, False), layer_adapters(model, spec, True)
    tp = spec.rank * ((model.num_layers - n_moe) * _width(dense.tp) + n_moe * _width(moe.tp))
    return float(tp), float(spec.rank * n_moe * moe.experts * _width(moe.expert))


def adapter_flop_params_per_token(model: Any, counts: Any, spec: LoraSpec) -> float:
    """Adapter weights one token is multiplied by (routed experts: ``top_k`` of them per MoE layer)."""
    n_moe = counts.num_moe_layers
    dense, moe = layer_adapters(model, spec, False), layer_adapters(model, spec, True)
    per_moe = _width(moe.tp) + moe.per_token * _width(moe.expert)
    return float(spec.rank * ((model.num_layers - n_moe) * _width(dense.tp) + n_moe * per_moe))


def lora_model_flops_per_token(model: Any, counts: Any, seq_len: int, spec: LoraSpec) -> float:
    """Model FLOPs per token of LoRA training (module docstring): the full-training count
    (``params.model_flops_per_token``) less the base weights' weight gradient (2 N), plus the adapters'
    forward and backward (6 N_adapter)."""
    return (model_flops_per_token(model, seq_len) - 2.0 * matmul_params_per_token(model)
            + 6.0 * adapter_flop_params_per_token(model, counts, spec))


def stage_adapter_params(model: Any, spec: LoraSpec, layers: Any, moe_layers: Any, tp: Any, ep_etp: Any) -> Any:
    """Adapter parameters on one rank of a pipeline stage holding ``layers`` layers (``moe_layers`` of them
    MoE): split over TP like their base layers (Megatron-Bridge's ``ParallelLinearAdapter`` follows the base
    layer's column/row split) and, on the routed experts, over EP x ETP. Arrays broadcast."""
    dense, moe = layer_adapters(model, spec, False), layer_adapters(model, spec, True)
    per_tp = (np.asarray(layers) - moe_layers) * _width(dense.tp) + np.asarray(moe_layers) * _width(moe.tp)
    per_exp = np.asarray(moe_layers) * moe.experts * _width(moe.expert)
    return spec.rank * (per_tp / tp + per_exp / ep_etp)


def adapter_saved_elems_per_token(model: Any, spec: LoraSpec, moe: bool) -> float:
    """Elements per token per layer each adapter's intermediate ``x A`` keeps for ``dB`` (``r`` per adapter;
    routed experts: ``top_k`` of them)."""
    ad = layer_adapters(model, spec, moe)
    return float(spec.rank * (len(ad.tp) + ad.per_token * len(ad.expert)))


# --- step time ---------------------------------------------------------------------------------------------


@record
class LoraGemm:
    """Seconds LoRA adds to (negative: removes from) one dense and one MoE layer's forward and backward
    GEMMs, and removes from the LM head's backward (its weight gradient), for one micro-batch."""

    dense_fwd: Any
    dense_bwd: Any
    moe_fwd: Any
    moe_bwd: Any
    head_wgrad: Any


def _wgrad(m: Any, n: Any, k: Any, sku: gemm.GemmSku, batch: Any = 1.0) -> Any:
    """The weight-gradient GEMM of a linear layer ``[M,K] x [K,N]``: ``dW[K,N] = X^T dY`` (inner M)."""
    return gemm.gemm_seconds(k, n, m, sku, batch)


def _adapter_seconds(tok: Any, pairs: tuple[tuple[float, float], ...], rank: int, split: Any,
                     sku: gemm.GemmSku, batch: Any = 1.0) -> tuple[Any, Any]:
    """Forward and backward seconds of adapters ``(d_in, d_out)``: ``x A`` then ``(x A) B``, each width
    split over ``split`` ranks as its base layer."""
    f = b = 0.0
    for d_in, d_out in pairs:
        fa, ba = gemm.train_gemm_seconds(tok, rank, d_in / split, sku, batch)
        fb, bb = gemm.train_gemm_seconds(tok, d_out / split, rank, sku, batch)
        f, b = f + fa + fb, b + ba + bb
    return f, b


def lora_gemm_seconds(model: Any, spec: LoraSpec, sh: gemm.LayerShapes, tok: Any, tp: Any, ep: Any, etp: Any,
                      sp: Any, sku: gemm.GemmSku, head_sku: gemm.GemmSku) -> LoraGemm:
    """What LoRA changes in ``gemm.layer_gemm_seconds`` and ``gemm.head_gemm_seconds`` for ``tok`` tokens per
    TP group: every base weight-gradient GEMM removed (the same shapes those functions price), the adapters'
    forward and backward added."""
    h = sh.hidden
    attn_w = _wgrad(tok, sh.attn_in / tp, h, sku) + _wgrad(tok, h, sh.attn_out_k / tp, sku)
    ffn_w = _wgrad(tok, sh.ffn_in / tp, h, sku) + _wgrad(tok, h, sh.ffn_out_k / tp, sku)
    dense, moe = layer_adapters(model, spec, False), layer_adapters(model, spec, True)
    df, db = _adapter_seconds(tok, dense.tp, spec.rank, tp, sku)
    head = _wgrad(tok, sh.vocab / tp, h, head_sku)
    if sh.experts == 0:
        return LoraGemm(df, db - attn_w - ffn_w, df, db - attn_w - ffn_w, head)
    tok_e = gemm._expert_tokens(sh, tok, tp, ep, etp, sp)
    batch = sh.experts / ep
    exp_w = _wgrad(tok_e, sh.expert_in / etp, h, sku, batch) + _wgrad(tok_e, h, sh.expert_out_k / etp, sku, batch)
    shared_w = (_wgrad(tok, sh.shared_in / tp, h, sku) + _wgrad(tok, h, sh.shared_out_k / tp, sku)
                if sh.shared_in else 0.0)
    mf, mb = _adapter_seconds(tok, moe.tp, spec.rank, tp, sku)
    ef, eb = _adapter_seconds(tok_e, moe.expert, spec.rank, etp, sku, batch)
    return LoraGemm(df, db - attn_w - ffn_w, mf + ef, mb + eb - attn_w - exp_w - shared_w, head)


def adapter_kernels_fwd_per_layer(model: Any, spec: LoraSpec, moe: bool) -> int:
    """Forward GEMM kernels the adapters add to one layer: two per adapter (routed experts: one grouped GEMM
    per projection for all local experts)."""
    ad = layer_adapters(model, spec, moe)
    return 2 * (len(ad.tp) + len(ad.expert))
