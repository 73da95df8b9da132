"""Where a measured training step goes: the MFU "waterfall" of one run.

MFU is the model FLOPs a GPU completes per second over its dense peak (PaLM, Chowdhery et al. 2022,
appendix B): ``MFU = F_model x T / (t_step x peak)``, with ``T`` the tokens each GPU processes per
optimizer step (global batch x sequence / GPUs). Written as time, ``F_model x T / peak`` is the
step's *ideal* time, and the measured step splits exactly into

    ideal (model FLOPs at peak)                          share = MFU
  + recompute FLOPs at peak                              share = HFU - MFU
  + GEMM and attention kernels below peak (FP8 input casts included), and the slowest stage's extra
    work over the mean stage (uneven layers, the LM head)
  + memory-bound kernels, per-kernel overhead
  + exposed TP, CP, EP collectives, pipeline sends, pipeline bubble, DP collectives, optimizer step
  + not in the model = measured - modelled step

where every term after the first two is the step-time model's own term (``search.step_time``, the
times of the critical pipeline stage). Each term's *share* is its time over the measured step, so the
shares add up to 1 and read as points of MFU lost to that cause.
"""

from __future__ import annotations

from dataclasses import dataclass

# step-time model terms (``search.step_time`` keys) in the order they are shown; with the compute
# terms they add up to the model's ``step``
LOSS_TERMS: tuple[tuple[str, str], ...] = (
    ("t_memory_bound", "memory-bound kernels"),
    ("t_gemm_overhead", "per-kernel overhead"),
    ("t_tp", "TP collectives, exposed"),
    ("t_cp", "CP collectives, exposed"),
    ("t_ep", "EP all-to-all, exposed"),
    ("t_pp", "pipeline sends, exposed"),
    ("t_host", "host-bound expert GEMMs"),
    ("t_bubble", "pipeline bubble"),
    ("t_dp", "DP collectives, exposed"),
    ("t_optimizer", "optimizer step"),
    ("t_offload", "activation offloading, exposed"),
)
COMPUTE_TERMS = ("t_compute", "t_attention")
STEP_SUM_RTOL = 1e-9


@dataclass(frozen=True)
class Term:
    key: str
    label: str
    seconds: float  # on the critical GPU, per optimizer step
    share: float  # seconds / measured step


@dataclass(frozen=True)
class StepExplain:
    measured_s: float
    model_s: float
    tokens_per_gpu: float  # per optimizer step
    mfu: float
    hfu: float
    terms: tuple[Term, ...]  # shares add up to 1

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_gpu / self.measured_s


def explain_step(model_terms: dict[str, float], measured_s: float, *, model_flops_per_token: float,
                 recompute_flops_per_token: float, tokens_per_gpu: float, peak_flops: float) -> StepExplain:
    """Split a measured step (s) into the terms of the module docstring.

    ``model_terms``: ``search.evaluate_one``'s output for the run's layout (its ``step`` must be the
    sum of ``COMPUTE_TERMS`` and ``LOSS_TERMS``); FLOPs per token as ``totals.flops_per_token``
    counts them; ``peak_flops``: dense FLOP/s at the run's precision.
    """
    if not (measured_s > 0 and tokens_per_gpu > 0 and peak_flops > 0):
        raise ValueError("measured step, tokens per GPU and peak must be positive")
    parts = [model_terms[k] for k in COMPUTE_TERMS] + [model_terms[k] for k, _ in LOSS_TERMS]
    model_s = model_terms["step"]
    if abs(sum(parts) - model_s) > STEP_SUM_RTOL * model_s:
        raise ValueError(f"step-time terms add up to {sum(parts)!r}, not the step {model_s!r}")
    ideal = model_flops_per_token * tokens_per_gpu / peak_flops
    recompute = recompute_flops_per_token * tokens_per_gpu / peak_flops
    below_peak = model_terms["t_compute"] + model_terms["t_attention"] - ideal - recompute
    rows = [("ideal", "model FLOPs at peak (MFU)", ideal), ("recompute", "recompute FLOPs at peak", recompute),
            ("below_peak", "kernels below peak, stage imbalance", below_peak)]
    rows += [(k, label, model_terms[k]) for k, label in LOSS_TERMS]
    rows.append(("not_modelled", "not in the model (measured - model)", measured_s - model_s))
    terms = tuple(Term(k, label, s, s / measured_s) for k, label, s in rows)
    return StepExplain(measured_s, model_s, tokens_per_gpu, ideal / measured_s, (ideal + recompute) / measured_s,
                       terms)
