"""Achievable-efficiency figures for an accelerator (used by ``sweep``).

Each figure is a fraction of the datasheet peak (or a time), calibrated from a published measured
run or a vendor "max achievable" figure, with its source and status. Where nothing is published the
status is ``assumed`` and the ``note`` states the basis. Users override them with their own
measurements (``mi400plan sweep --matmul-efficiency 0.45 --hbm-efficiency 0.8``).

How ``sweep`` uses them (``mi400plan/search.py``):

* ``matmul_<precision>``: the large-GEMM ceiling, the fraction of the dense peak of that precision
  that a large GEMM reaches. Each GEMM of a candidate layout is priced at its own shape by
  ``mi400plan/gemm.py`` (roofline on arithmetic intensity, tile and wave quantization over the
  SKU's ``silicon.compute_units``), which saturates to this ceiling and never exceeds it.
* ``gemm_overhead_us``: fixed time (microseconds) each GEMM kernel costs on top of its FLOPs
  (launch, prologue/epilogue).
* ``attention``: fraction of the dense BF16 peak that flash attention reaches on the causal work it
  does (masked blocks skipped) on long sequences; shorter ones run at ``keys / (keys + s_half)`` of it,
  ``s_half`` by the stack's kernel generation (``gemm.attention_length_factor``). Where it is not given, ``search.ATTN_OVER_MATMUL`` x the BF16
  ceiling is used (documented rule).
* ``expert_host_us``: host (CPU) time, microseconds, to issue one local expert's GEMM in MoE training
  (PyTorch eager frameworks prepare every expert on the host); a micro-batch whose experts take the
  host longer to issue than the GPU takes to run it runs at the host's pace
  (``search.expert_host_seconds``). Not given: no host term (compiled-graph stacks).
* ``hbm_bandwidth``: achieved fraction of the HBM peak for streaming (memory-bound) kernels: norms,
  residual adds, activation functions, optimizer step.
"""

from mi400plan.specs.common import ND, Estimate, Latency, PosFraction, StrictModel

# Precisions a training matmul can run at in ``sweep`` (dense peaks; 2:4 sparsity is not used).
TRAIN_PRECISIONS = ("bf16", "fp8")


class Efficiency(StrictModel):
    matmul_bf16: PosFraction = ND  # achievable fraction of dense BF16 peak on large GEMMs
    matmul_fp8: PosFraction = ND  # achievable fraction of dense FP8 peak on large GEMMs
    hbm_bandwidth: PosFraction = ND  # achievable fraction of HBM peak for streaming kernels
    gemm_overhead_us: Latency = ND  # fixed cost per GEMM kernel, microseconds (small-GEMM falloff)
    attention: PosFraction = ND  # flash-attention fraction of the dense BF16 peak (causal work actually done)
    expert_host_us: Latency = ND  # host time to issue one local-expert GEMM, microseconds (MoE training)

    def matmul(self, precision: str) -> Estimate:
        """The matmul efficiency estimate for ``precision`` (``bf16``/``fp16`` or ``fp8``)."""
        p = {"fp16": "bf16"}.get(precision, precision)
        if p not in TRAIN_PRECISIONS:
            return ND
        return getattr(self, f"matmul_{p}")
