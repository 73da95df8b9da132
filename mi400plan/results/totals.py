"""The totals behind a plan (``data.totals`` of ``sweep``, ``pick.totals`` of ``sweep --deadline``).

``flops_per_token``: training FLOPs per token (forward + backward), FLOP; ``total_*_flops``: FLOP
over ``train_tokens``; ``collective_bytes_per_step``: bytes one GPU sends per optimizer step in
each group's collectives (nccl-tests volume factors, named in ``volume_factors``).
"""

from pydantic import Field

from mi400plan.results.common import OutModel


class FlopsSplit(OutModel):
    dense_gemm: float  # 6 x matmul weights (incl. the LM head)
    attention: float  # 3 x forward score + context FLOPs
    recompute: float  # FLOPs recomputed under the layout's recompute mode
    model: float  # dense_gemm + attention (what MFU counts)
    hardware: float  # model + recompute (what HFU counts)


class CollectiveBytes(OutModel):
    tp: float  # TP / SP collectives, expert-TP included
    cp: float
    ep: float
    pp: float
    dp: float  # gradient reduction and ZeRO parameter gathers (DP x CP group; experts over expert-DP)


VOLUME_FACTORS = {
    "all_reduce": "2(n-1)/n x buffer",
    "all_gather": "(n-1)/n x gathered buffer",
    "reduce_scatter": "(n-1)/n x input buffer",
    "all_to_all": "(n-1)/n x rank buffer",
    "send_recv": "1 x message",
}


class PlanTotals(OutModel):
    sku: str
    gpus: int
    layout_text: str
    flops_per_token: FlopsSplit
    train_tokens: float | None = None
    total_model_flops: float | None = None  # train_tokens x flops_per_token.model
    total_hardware_flops: float | None = None  # train_tokens x flops_per_token.hardware
    step_tokens: int  # tokens per optimizer step (global batch x sequence)
    collective_bytes_per_step: CollectiveBytes  # per GPU
    volume_factors: dict[str, str] = Field(default_factory=lambda: dict(VOLUME_FACTORS))
