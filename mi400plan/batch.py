"""The planned global batch: a convergence bound from a published batch-size scaling law, and the
pipeline-fill test that decides where inside the bound a cluster runs.

The law. DeepSeek LLM (Bi et al., "DeepSeek LLM: Scaling Open-Source Language Models with
Longtermism", arXiv 2401.02954, 2024-01, section 3.1, eq. 1) fits the optimal batch size, in
tokens, to the training compute ``C = M x D`` (``M`` non-embedding FLOPs per token, forward and
backward, attention included; ``D`` training tokens)::

    B_opt = 0.2920 x C ** 0.3271          (tokens; C in FLOPs)

The paper reports near-optimal loss over a band of batch sizes around the fitted optimum but gives
the band no closed form, so the planner's convergence bound is the fitted optimum itself
(``BOUND_FACTOR = 1``): the planned batch is never above ``B_opt``. It is the largest batch a
cluster splits evenly at or below the bound (printed, overridable with ``--global-batch``).

Fine-tuning (``--finetune lora``) is not sized by a pre-training law: the planned batch is the
fine-tuning reference recipes' ``FINETUNE_BATCH_SEQS`` sequences (NVIDIA Megatron-Bridge performance
summary, 26.06 container, Llama 3 70B LoRA and SFT tables: global batch 32 at sequence 4,096 on 8 to 32
GPUs; ``docs/performance-summary.md`` at commit 63b08b3, 2026-06-15), printed and overridable.

Without a token count the run is assumed compute-optimal: ``D = 20 x N`` tokens for ``N`` active
parameters (Hoffmann et al., "Training Compute-Optimal Large Language Models", arXiv 2203.15556,
2022-03: about 20 tokens per parameter).

The pipeline. A data-parallel pipeline of ``p`` stages and ``v`` virtual chunks per stage running
``m`` micro-batches per step idles for ``(p - 1) / (v x m)`` of its compute time (Narayanan et al.,
arXiv 2104.04473, 2021-04, section 2.2: 1F1B and the interleaved schedule). GPipe (Huang et al.,
arXiv 1811.06965, 2018-11, section 2.3) finds the bubble "negligible when M >= 4 x K" micro-batches
per K partitions, i.e. a bubble of at most ``(K - 1) / (4 K) < 1/4`` of the compute time:
``BUBBLE_LIMIT``. Fewer micro-batches than stages leaves every stage idle most of the step.
"""

from __future__ import annotations

import math
from dataclasses import replace

from mi400plan.errors import UsageError
from mi400plan.records import record

DEEPSEEK_COEF = 0.2920  # arXiv 2401.02954 eq. 1: B_opt = 0.2920 C^0.3271 tokens
DEEPSEEK_EXP = 0.3271
BOUND_FACTOR = 1.0  # the bound is B_opt itself: the paper gives its near-optimal band no closed form
CHINCHILLA_TOKENS_PER_PARAM = 20.0  # arXiv 2203.15556: compute-optimal tokens per parameter
BUBBLE_LIMIT = 0.25  # GPipe: bubble negligible when micro-batches >= 4 x stages -> (K-1)/(4K) < 1/4
LAW = "DeepSeek LLM (arXiv 2401.02954, 2024-01) eq. 1: B_opt = 0.2920 x C^0.3271 tokens, C = M x D FLOPs"
# Fine-tuning: the global batch of Megatron-Bridge 26.06's Llama 3 70B LoRA and SFT performance recipes.
FINETUNE_BATCH_SEQS = 32
FINETUNE_RULE = ("fine-tuning: the reference recipes' global batch (NVIDIA Megatron-Bridge performance summary, "
                 "26.06, Llama 3 70B LoRA and SFT: 32 sequences of 4,096 tokens), not a pre-training law")


def optimal_batch_tokens(compute_flops: float) -> float:
    """``B_opt`` in tokens for training compute ``compute_flops`` (FLOPs): DeepSeek LLM eq. 1."""
    if not (math.isfinite(compute_flops) and compute_flops > 0):
        raise ValueError(f"training compute must be a positive number of FLOPs, got {compute_flops!r}")
    return DEEPSEEK_COEF * compute_flops ** DEEPSEEK_EXP


def batch_candidates(lo: int, hi: int) -> list[int]:
    """Batches (sequences) a cluster splits evenly, ascending in ``[lo, hi]``: ``2^k`` and ``3 x 2^k``
    (power-of-two data-parallel groups, and the factor of 3 of 3 x 2^k clusters such as 12,288 GPUs)."""
    out = set()
    k = 0
    while 2 ** k <= hi:
        for v in (2 ** k, 3 * 2 ** k):
            if lo <= v <= hi:
                out.add(v)
        k += 1
    return sorted(out)


@record
class BatchLaw:
    """The convergence bound of one run. Tokens per optimizer step; sequences of ``seq_len`` tokens."""

    flops_per_token: float  # M: non-embedding training FLOPs per token
    train_tokens: float  # D
    tokens_assumed: bool  # D from the compute-optimal rule (no --tokens)
    compute_flops: float  # C = M x D
    b_opt_tokens: float
    bound_tokens: float  # BOUND_FACTOR x B_opt
    seq_len: int
    candidates: tuple[int, ...]  # sequences, ascending; the first is the starting batch
    rule: str | None = None  # a rule other than the law (fine-tuning: ``FINETUNE_RULE``)

    @property
    def start_seqs(self) -> int:
        return self.candidates[0]


def batch_law(flops_per_token: float, seq_len: int, train_tokens: float | None, active_params: float) -> BatchLaw:
    """The bound for a run of ``train_tokens`` (or ``CHINCHILLA_TOKENS_PER_PARAM x active_params``).

    Candidates: the batches of ``batch_candidates`` from the one nearest ``B_opt`` (in ratio, ties
    to the smaller) up to ``BOUND_FACTOR x B_opt`` (with the factor 1, the largest batch at or below
    ``B_opt``); one sequence when even that exceeds the bound."""
    assumed = not train_tokens
    d = float(train_tokens) if train_tokens else CHINCHILLA_TOKENS_PER_PARAM * float(active_params)
    c = flops_per_token * d
    if not (math.isfinite(c) and c > 0):
        raise UsageError(f"the training compute {flops_per_token:.3g} FLOPs/token x {d:.3g} tokens is not a "
                         "positive finite number of FLOPs, so no global batch can be planned",
                         hint="give --tokens a plausible count (15T), or pin --global-batch")
    b_opt = optimal_batch_tokens(c)
    bound = BOUND_FACTOR * b_opt
    hi = max(1, math.floor(bound / seq_len))
    target = b_opt / seq_len
    all_c = batch_candidates(1, hi)
    start = min(all_c, key=lambda v: (abs(math.log(v / target)), v))
    return BatchLaw(flops_per_token, d, assumed, c, b_opt, bound, seq_len,
                    tuple(v for v in all_c if v >= start))


def finetune_law(flops_per_token: float, seq_len: int, train_tokens: float | None, active_params: float) -> BatchLaw:
    """The fine-tuning batch: ``FINETUNE_BATCH_SEQS`` sequences, the only candidate (module docstring);
    the law's compute figures are kept for the record, its bound is that batch."""
    law = batch_law(flops_per_token, seq_len, train_tokens, active_params)
    tokens = float(FINETUNE_BATCH_SEQS * seq_len)
    return replace(law, b_opt_tokens=tokens, bound_tokens=tokens, candidates=(FINETUNE_BATCH_SEQS,),
                   rule=FINETUNE_RULE)


def law_for(flops_per_token: float, seq_len: int, train_tokens: float | None, active_params: float,
            recipe: object) -> BatchLaw:
    """The batch rule of a recipe: :func:`finetune_law` for LoRA fine-tuning (``lora_rank`` > 0), else
    :func:`batch_law`."""
    if int(getattr(recipe, "lora_rank", 0) or 0) > 0:
        return finetune_law(flops_per_token, seq_len, train_tokens, active_params)
    return batch_law(flops_per_token, seq_len, train_tokens, active_params)


def bubble_fraction(pp: int, vpp: int, microbatches: int) -> float:
    """Pipeline idle time over compute time, ``(p - 1) / (v x m)`` (Narayanan et al. 2021, section 2.2)."""
    if pp <= 1:
        return 0.0
    return (pp - 1) / (max(vpp, 1) * max(microbatches, 1))


def pipeline_starved(pp: int, vpp: int, microbatches: int) -> bool:
    """Fewer micro-batches than stages, or a bubble above ``BUBBLE_LIMIT`` of the compute time."""
    return pp > 1 and (microbatches < pp or bubble_fraction(pp, vpp, microbatches) > BUBBLE_LIMIT)


def idle_warning(where: str, batch_seqs: int, pp: int, vpp: int, microbatches: int, pinned: bool) -> str | None:
    """A warning when the best layout's pipeline is starved at this batch, else None."""
    if not pipeline_starved(pp, vpp, microbatches):
        return None
    bubble = bubble_fraction(pp, vpp, microbatches)
    what = "the --global-batch given" if pinned else "the planned batch (none larger within the bound fills it)"
    lead = f"{where}: {what} ({batch_seqs:,} sequences)"
    mb = f"{microbatches:,} micro-batch{'es' if microbatches != 1 else ''} per pipeline"
    gpipe = f"above {BUBBLE_LIMIT:.0%}: GPipe, arXiv 1811.06965, finds it negligible from 4 micro-batches per stage"
    if microbatches < pp:
        return (f"{lead} leaves the cluster mostly idle: {mb} for {pp} pipeline stages, a bubble of "
                f"{bubble:.0%} of compute time ({gpipe})")
    return (f"{lead} leaves the pipeline idle {bubble:.0%} of compute time ({mb}, {pp} stages x {vpp} "
            f"chunk{'s' if vpp != 1 else ''}; {gpipe})")


def planned_law(spec: object, counts: object, recipe: object, seq_len: int, train_tokens: float | None) -> BatchLaw:
    """``batch_law`` for a model and recipe: ``M`` is the model's non-embedding training FLOPs per
    token at ``seq_len`` (``search.model_terms``), ``D`` the tokens (or 20 per active parameter)."""
    from mi400plan.search import model_terms

    terms = model_terms(spec, counts, seq_len, recipe)
    return law_for(terms.flops_layers, seq_len, train_tokens, counts.active, recipe)  # type: ignore[attr-defined]


def law_text(law: BatchLaw) -> str:
    """The planned batch's rule in one line, for commands that print it beside their answer."""
    if law.rule:
        return f"planned: {law.rule}; --global-batch overrides"
    d = f"{law.train_tokens:.3g} tokens" + (" (assumed: 20 per active parameter)" if law.tokens_assumed else "")
    return (f"planned: the largest 2^k or 3 x 2^k sequences at or below B_opt = {law.b_opt_tokens / 1e6:,.2f}M "
            f"tokens ({LAW}; C = {law.compute_flops:.3g} FLOPs for {d}); --global-batch overrides")
