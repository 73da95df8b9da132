"""Totals of one searched layout (``mi400plan.totals``) as a result block."""

from __future__ import annotations

from typing import Any

from mi400plan.results.totals import CollectiveBytes, FlopsSplit, PlanTotals


def plan_totals(row: dict[str, Any], wl: Any, terms: Any, sku: str, gpus: int, layout_text: str,
                train_tokens: float | None) -> PlanTotals:
    """FLOPs split, total training FLOPs and collective bytes per step for search row ``row``."""
    from mi400plan.totals import collective_bytes_per_step, flops_per_token

    f = flops_per_token(wl.model, wl.seq_len, int(row["recompute"]), wl.recipe, int(row["pp"]), int(row["vpp"]))
    b = collective_bytes_per_step(row, wl, terms)
    return PlanTotals(
        sku=sku, gpus=gpus, layout_text=layout_text,
        flops_per_token=FlopsSplit(dense_gemm=f.dense_gemm, attention=f.attention, recompute=f.recompute,
                                   model=f.model, hardware=f.hardware),
        train_tokens=train_tokens,
        total_model_flops=None if not train_tokens else train_tokens * f.model,
        total_hardware_flops=None if not train_tokens else train_tokens * f.hardware,
        step_tokens=int(wl.global_batch * wl.seq_len),
        collective_bytes_per_step=CollectiveBytes(**b),
    )
