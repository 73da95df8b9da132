"""The totals behind a training plan: FLOPs per token split by kind, total training FLOPs, and the
bytes each GPU moves per optimizer step in each parallel group's collectives.

FLOPs per token (``params``): dense GEMMs ``6 x N_matmul`` (Kaplan et al. 2020, sec. 2.1: 2 FLOP
per weight forward, twice that backward), attention ``3 x`` the forward score/context FLOPs (PaLM
appendix B), recompute what ``search.step_time`` charges (selective: the attention core forward
again, Korthikanti et al. 2022; full: the layers' forward again, a third of their FLOPs). Total
training FLOPs = tokens x FLOPs per token.

Bytes per GPU per collective follow nccl-tests' bus-bandwidth factors (``doc/PERFORMANCE.md``):
for a buffer of ``S`` bytes over ``n`` ranks each rank sends all-reduce ``2 (n-1)/n S``,
all-gather and reduce-scatter ``(n-1)/n S`` (``S`` the whole gathered buffer), all-to-all
``(n-1)/n S`` (``S`` the rank's buffer), send/recv ``S``. A two-level (hierarchical) collective over
``g_in x g_out`` ranks moves the same bytes per rank as a flat one over ``n = g_in g_out``
(``2(g_in-1)/g_in S + 2(g_out-1)/g_out S/g_in = 2(n-1)/n S``). Sizes and counts per micro-batch are
those ``search.step_time`` prices; ``pp`` counts every chunk's forward send and backward send, as
the step time does for the critical stage.
"""

from __future__ import annotations

from typing import Any

from mi400plan.finetune import adapter_flop_params_per_token, lora_of
from mi400plan.params import attention_flops_per_token, matmul_params_per_token, selective_recompute_flops_per_token
from mi400plan.records import record


@record
class FlopsPerToken:
    """Training FLOPs per token (forward + backward), FLOP."""

    dense_gemm: float
    attention: float
    recompute: float

    @property
    def model(self) -> float:
        return self.dense_gemm + self.attention

    @property
    def hardware(self) -> float:
        return self.model + self.recompute


RECOMPUTE = {"none": 0, "selective": 1, "full": 2}


def flops_per_token(model: Any, seq_len: int, recompute: str | int = "none", recipe: Any = None,
                    pp: int = 1, vpp: int = 1) -> FlopsPerToken:
    """The split of one token's training FLOPs (see the module doc). The recompute term is the forward
    run again: under selective recomputation that of the ``recipe``'s modules
    (``params.selective_recompute_flops_per_token``; core attention without a recipe), under full
    recomputation a third of the layers' FLOPs times the share of layers recomputed
    (``memory.recompute_share`` of ``recipe.recompute_layers`` over the layers of a ``pp x vpp`` chunk;
    all without a recipe). With packed sequences (``recipe.packed_docs``) attention is each document's: the
    context is ``packing.attention_span``, not the row."""
    from mi400plan.packing import attention_span

    rc = RECOMPUTE[recompute] if isinstance(recompute, str) else int(recompute)
    dense = 6.0 * matmul_params_per_token(model)
    # packed sequences: attention over each document, the mean key span a query sees (``packing``)
    seq_len = attention_span(getattr(recipe, "packed_docs", None), seq_len)  # type: ignore[assignment]
    attn_fwd = attention_flops_per_token(model, seq_len)
    head = 6.0 * model.vocab_size * model.hidden_size
    layers = dense + 3.0 * attn_fwd - head
    lora = lora_of(recipe) if recipe is not None else None
    if lora is not None:  # frozen base: forward and data gradient (4N); adapters forward and backward (6 N_adapter)
        from mi400plan.params import count_params

        dense = 4.0 * matmul_params_per_token(model) + 6.0 * adapter_flop_params_per_token(model, count_params(model), lora)
    if rc == 1:
        mods = tuple(recipe.recompute_modules) if recipe is not None else ("core_attn",)
        extra = selective_recompute_flops_per_token(model, seq_len, mods)
    else:
        extra = layers / 3.0 * _full_share(rc, recipe, model.num_layers / (pp * vpp))
    return FlopsPerToken(dense, 3.0 * attn_fwd, extra)


def _full_share(rc: int, recipe: Any, layers_per_chunk: float) -> float:
    """``memory.recompute_share`` for one layout (1 under full recomputation without a recipe)."""
    from mi400plan.memory import recompute_share

    n = int(getattr(recipe, "recompute_layers", 0) or 0)
    return float(recompute_share(rc, n, layers_per_chunk))


def all_reduce_bytes(size: float, n: int) -> float:
    """Bytes each rank sends in an all-reduce of ``size`` bytes over ``n`` ranks: 2 (n-1)/n S."""
    return 2.0 * (n - 1) / n * size if n > 1 else 0.0


def gather_bytes(size: float, n: int) -> float:
    """All-gather / reduce-scatter of a ``size``-byte buffer, or all-to-all of a rank's ``size``
    bytes, over ``n`` ranks: (n-1)/n S per rank."""
    return (n - 1) / n * size if n > 1 else 0.0


def collective_bytes_per_step(lay: dict[str, Any], wl: Any, terms: Any) -> dict[str, float]:
    """Bytes one GPU sends per optimizer step in TP (with expert TP), CP, EP, PP and DP collectives.

    ``lay``: tp, pp, vpp, cp, ep, etp, dp, zero, micro_batch, recompute (0/1/2), sp (0/1);
    ``wl``: ``search.Workload``; ``terms``: ``search.ModelTerms``.
    """
    tp, pp, vpp, cp, ep, etp, dp = (int(lay[k]) for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "dp"))
    zero, mb, rc = int(lay["zero"]), int(lay["micro_batch"]), int(lay["recompute"])
    sp = bool(lay["sp"])
    a_bytes, g_bytes, w_bytes = (float(x) for x in (wl.recipe.activation_bytes, wl.recipe.grad_bytes,
                                                     wl.param_wire_bytes))
    m = wl.global_batch / (dp * mb)
    tok_mb = mb * wl.seq_len / cp
    layers, moe_layers = terms.n_layers / pp, terms.n_moe_layers / pp
    from mi400plan.memory import forward_again

    full = _full_share(rc, wl.recipe, layers / vpp)
    mods = tuple(getattr(wl.recipe, "recompute_modules", ("core_attn",)))
    k_full = 1.0 + 0.5 * full
    s_act = tok_mb * terms.hidden * a_bytes
    pairs = k_full * (4.0 * (layers - moe_layers) + 2.0 * (1.0 + terms.shared_tp) * moe_layers)
    tp_b = pairs * all_reduce_bytes(s_act, tp)  # all-reduce, or reduce-scatter + all-gather: the same bytes
    s_disp = tok_mb / (tp if sp else 1) * terms.top_k * terms.hidden * a_bytes * terms.shapes.expert_pad
    tp_b += k_full * 2.0 * moe_layers * all_reduce_bytes(s_disp * etp, etp)
    again = float(forward_again(rc, full, mods, "moe"))
    ep_b = (4.0 + 2.0 * again) * moe_layers * gather_bytes(s_disp, ep)
    kv_chunk = tok_mb * terms.kv_width / tp * a_bytes
    cp_again = float(forward_again(rc, full, mods, "core_attn"))
    cp_b = layers * (2.0 + cp_again + 1.0) * gather_bytes(kv_chunk * cp, cp)
    pp_b = 2.0 * vpp * s_act / tp if pp > 1 else 0.0
    dense = terms.dense_params / (tp * pp) + terms.replicated_params / pp
    expert = terms.expert_params / (ep * etp * pp)
    n_dp = (cp * dp, tp * cp * dp // (ep * etp))
    groups = ((dense, n_dp[0]), (expert, n_dp[1]))
    # With LoRA only the adapters are reduced and updated; ZeRO-3 still gathers the frozen base
    trained = groups if terms.lora is None else (
        (terms.adapter_params / (tp * pp), n_dp[0]), (terms.adapter_expert_params / (ep * etp * pp), n_dp[1]))

    def dp_op(kind: str, width: float, base: bool = False) -> float:
        f = all_reduce_bytes if kind == "ar" else gather_bytes
        return sum(f(p * width, n) for p, n in (groups if base else trained) if p > 0)

    per_step = {0: dp_op("ar", g_bytes), 1: dp_op("rs", g_bytes) + dp_op("ag", w_bytes),
                2: dp_op("ag", w_bytes), 3: 0.0}[zero]
    per_mb = {2: dp_op("rs", g_bytes), 3: 2.0 * dp_op("ag", w_bytes, base=True) + dp_op("rs", g_bytes)}.get(zero, 0.0)
    return {"tp": m * tp_b, "cp": m * cp_b, "ep": m * ep_b, "pp": m * pp_b, "dp": per_step + m * per_mb}
