"""Calibration of the serving model per SKU family and model class on published InferenceX (InferenceMAX)
points.

Only SemiAnalysis InferenceX results calibrate; every other published inference result is a
validation point (``tests/test_serve_calibration.py``) and never changes these numbers.

What is fitted, per family (the accelerator profile's ``architecture``: CDNA 3, CDNA 4, Hopper,
Blackwell) and per model class (``dense``, or ``moe`` with routed experts: :func:`model_class`), on
that class's points only. The classes run different kernels (MLA attention and grouped expert GEMMs
against dense GEMMs) and, in the published runs, often different serving software (SGLang against vLLM
on AMD); fitted on DeepSeek-R1 alone, the CDNA 3 figures made dense Llama-3.3-70B 27-42 % too slow. A
model is served with its own class's calibration, or the family's other one where only that exists
(:func:`calibration_for`):

* ``hbm_efficiency``: achieved fraction of HBM peak in decode (weights, experts and KV streaming);
* ``kernel_overhead_us``: fixed time per kernel (launch, synchronisation, the serving framework's
  per-layer work between kernels), with the kernels per layer counted from the architecture
  (``serve.KERNELS_*``: 9 for a dense GQA layer, 19 for an MLA + MoE layer);
* ``matmul_scale``: the serving software's compute rate as a multiple of the profile's figures: it scales
  the large-GEMM ceiling (``[efficiency] matmul_<precision>``) at which the shared shape-aware GEMM model
  (``mi400plan/gemm.py``) saturates, and the flash-attention efficiency, for every GEMM and attention
  kernel of the fitted compute precisions (1 = the profile's ceiling; the product is capped at the peak).
  The shape effects (tile and wave quantization of prefill GEMMs, bandwidth-bound decode) are the GEMM
  model's, not the fit's, so the scale is what is left: how far a serving framework's kernels on that
  model (DeepSeek-R1's small expert GEMMs, MLA attention, FP4 formats) fall short of, or beat, the
  large-GEMM ceiling measured for training. It stays a fitted figure because it is far from 1 for MoE
  models on the AMD families (CDNA 3 0.35, CDNA 4 0.30 at FP4; dense models on CDNA 3: 0.90) and above it
  on Hopper with TensorRT-LLM (dense: 1.35). It is
  fitted only when the family's points include 8k-token prompts (else 1, the prior), and applied only at
  the compute precisions of the points it was fitted on (other precisions keep the profile's ceiling);
* per compute precision: where a group's points hold two precisions with enough points each
  (:func:`precision_split`: the Llama points of CDNA 4 and Blackwell, FP8 and FP4), the HBM efficiency and
  the matmul scale are fitted once per precision (``precision_fits``), the overheads and host time shared:
  the FP4 formats run GEMM kernels of their own (block-scale dequantisation inside the GEMM), and pooled, the
  FP4 points came out optimistic and the FP8 ones pessimistic on every stack that ran both;
* ``request_overhead_ms``: per-request time before the first token outside the GPU model
  (HTTP, tokenisation, scheduling), added to TTFT only;
* ``host_per_seq_us``: the serving framework's CPU time per scheduled sequence per decode iteration that
  its overlap scheduler leaves on the critical path, added to the GPU step (``serve.host_bound_step``,
  ``INFERENCEX_HOST_OVERLAP``); fitted only where the group has ``MIN_POINTS_PER_PARAMETER`` points for each
  figure with it counted (:func:`host_fitted`), else none.

Method (:func:`fit_family`): a grid search minimising, over the group's points from the ``RECENT_DAYS``
before its newest run (less those that measured a queue, :func:`queued`), the sum of squared log errors of total tokens/s per GPU and of median TPOT
with the host time per sequence (directions the points leave flat keep the prior: HBM 0.80, 5 us, scale 1,
no host time); the request overhead
then minimises the squared log error of median TTFT. The points are ``tests/data/serve_inferencex.csv`` (each row names its run and
date); ``benchmarks/calibrate_serve.py`` re-runs the fit and prints these constants and the errors.
Ranges: the nominal values are the fit; the low/high ends move each efficiency by the family's mean
absolute TPOT error (a calibration cannot be trusted beyond the spread it leaves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

import numpy as np

from mi400plan.errors import PlannerError

HBM_GRID = np.round(np.arange(0.30, 0.951, 0.05), 2)
OVERHEAD_GRID_US = np.array([2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 24.0, 28.0, 32.0, 40.0, 50.0, 60.0, 70.0,
                             80.0, 100.0, 120.0])
SCALE_GRID = np.round(np.arange(0.10, 1.501, 0.05), 2)
REQUEST_GRID_MS = np.arange(0.0, 400.1, 5.0)
HOST_GRID_US = np.array([0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 80.0, 100.0, 120.0, 140.0, 160.0, 200.0])
# The profiles' assumed values; matmul: a scale, 1 = the ceiling; host: none, a tie among host times broken
# toward the smallest (``host_scale_us`` sets how that weighs against the other figures' log distances).
PRIOR = {"hbm": 0.80, "matmul": 1.0, "overhead_us": 5.0, "host_scale_us": 100.0}
# InferenceX runs nightly and serving software moves fast: a family is fitted on its runs from the
# RECENT_DAYS before its newest run (older runs describe superseded software; their error is reported).
RECENT_DAYS = 100
PREFILL_HEAVY_TOKENS = 8192  # the matmul efficiency is fitted only on families with prompts this long
# A point whose median TTFT exceeds this measured a server queueing requests it could not hold (a closed
# loop of more sequences than its KV cache keeps in flight): :func:`predict` runs it at the batch its stack's
# KV admission allows and adds the admission wait (``serve_admission``), but it is not fitted: its TTFT is the
# wait, which a finite run's start-up skews from the steady state (:func:`queued`).
QUEUED_TTFT_S = 2.5
# A serving stack is fitted on its own points of a family and class only with at least this many points
# per fitted figure (:func:`fitted_parameters`); else it is served with the family's fit and a wider range.
MIN_POINTS_PER_PARAMETER = 3

FAMILY_KEYS = (("CDNA 4", "amd-cdna4"), ("CDNA 3", "amd-cdna3"), ("Blackwell", "nvidia-blackwell"),
               ("Hopper", "nvidia-hopper"), ("Ampere", "nvidia-ampere"))


MODEL_CLASSES = ("dense", "moe")


def model_class(model: Any) -> str:
    """The calibration class of a model: ``moe`` (routed experts) or ``dense``."""
    return "moe" if model.is_moe else "dense"


@dataclass(frozen=True)
class FamilyCalibration:
    family: str
    model_class: str  # the class of the models it was fitted on (``MODEL_CLASSES``)
    hbm_efficiency: float
    kernel_overhead_us: float
    matmul_scale: float  # the serving software's compute rate relative to the profile's GEMM ceiling
    request_overhead_ms: float
    points: int
    tput_mean_err: float  # mean |relative error| of tokens/s per GPU on the calibration points
    tput_max_err: float
    tpot_mean_err: float
    tpot_max_err: float
    ttft_mean_err: float
    dates: str  # date range of the runs
    matmul_precisions: tuple[str, ...] = ()  # compute precisions the matmul scale was fitted at
    stack: str = ""  # the serving stack (profiles/serving) whose points it was fitted on; "": every stack's
    status: str = "family fit"  # "stack fit", "family fit", or the family fit standing in for a stack
    range_err: float | None = None  # the corners' spread (``apply``); None: the mean TPOT error
    host_per_seq_us: float = 0.0  # framework CPU time per scheduled sequence per iteration (``serve.host_bound_step``)
    # ``(compute precision, hbm_efficiency, matmul_scale)`` fitted apart where the points afford it
    # (:func:`precision_split`); at those precisions they replace the two fields above (:func:`at_precision`)
    precision_fits: tuple[tuple[str, float, float], ...] = ()


# Output of benchmarks/calibrate_serve.py on tests/data/serve_inferencex.csv (checked by
# tests/test_serve_calibration.py), keyed ``family/class``.
CALIBRATION: dict[str, FamilyCalibration] = {
    'amd-cdna4/moe': FamilyCalibration('amd-cdna4', 'moe', 0.95, 8.0, 0.25, 60.0, 14, 0.038, 0.0694, 0.0588, 0.1034,
                                       0.1072, '2026-02-27..2026-02-27', ('fp4',), host_per_seq_us=0.0),
    'nvidia-blackwell/moe': FamilyCalibration('nvidia-blackwell', 'moe', 0.6, 6.0, 1.0, 75.0, 12, 0.0826, 0.258,
                                              0.0934, 0.1841, 0.2055, '2025-11-02..2026-02-03', ('fp4', 'fp8'),
                                              host_per_seq_us=0.0),
    'nvidia-hopper/moe': FamilyCalibration('nvidia-hopper', 'moe', 0.8, 8.0, 0.75, 55.0, 39, 0.0471, 0.1098, 0.0402,
                                           0.1053, 0.1236, '2025-10-16..2025-11-02', ('fp8',), host_per_seq_us=0.0),
    'amd-cdna3/moe': FamilyCalibration('amd-cdna3', 'moe', 0.95, 20.0, 0.35, 35.0, 15, 0.0369, 0.1204, 0.0517, 0.1037,
                                       0.0726, '2026-02-27..2026-02-27', ('fp8',), host_per_seq_us=50.0),
    'amd-cdna3/dense': FamilyCalibration('amd-cdna3', 'dense', 0.75, 8.0, 0.9, 35.0, 119, 0.0629, 0.3131, 0.0595,
                                         0.1963, 0.1667, '2025-10-16..2025-10-16', ('fp8',), host_per_seq_us=60.0),
    'amd-cdna4/dense': FamilyCalibration('amd-cdna4', 'dense', 0.9, 10.0, 1.05, 55.0, 120, 0.0819, 0.3927, 0.0872,
                                         0.2751, 0.3276, '2025-10-16..2025-10-16', ('fp4', 'fp8'),
                                         host_per_seq_us=30.0,
                                         precision_fits=(('fp4', 0.55, 0.8), ('fp8', 0.9, 1.05))),
    'nvidia-blackwell/dense': FamilyCalibration('nvidia-blackwell', 'dense', 0.85, 6.0, 1.05, 35.0, 240, 0.0731,
                                                0.2983, 0.0644, 0.2808, 0.1524, '2025-10-16..2025-10-16',
                                                ('fp4', 'fp8'), host_per_seq_us=30.0,
                                                precision_fits=(('fp4', 0.7, 1.0), ('fp8', 0.85, 1.05))),
    'nvidia-hopper/dense': FamilyCalibration('nvidia-hopper', 'dense', 0.85, 6.0, 1.35, 15.0, 169, 0.0968, 0.2954,
                                             0.0978, 0.3097, 0.0957, '2025-10-16..2025-10-16', ('fp8',),
                                             host_per_seq_us=50.0),
}


# Output of benchmarks/calibrate_serve.py (its second part): the fit per family, class and serving stack
# (``profiles/serving``) where the stack has ``MIN_POINTS_PER_PARAMETER`` points per fitted figure, keyed
# ``family/class/stack``; checked by tests/test_serve_stacks.py.
STACK_CALIBRATION: dict[str, FamilyCalibration] = {
    'amd-cdna4/moe/sglang': FamilyCalibration('amd-cdna4', 'moe', 0.95, 8.0, 0.25, 60.0, 14, 0.038, 0.0694, 0.0588,
                                              0.1034, 0.1072, '2026-02-27..2026-02-27', ('fp4',), stack='sglang',
                                              status='stack fit', host_per_seq_us=0.0),
    'nvidia-blackwell/moe/trtllm': FamilyCalibration('nvidia-blackwell', 'moe', 0.6, 6.0, 1.0, 75.0, 12, 0.0826,
                                                     0.258, 0.0934, 0.1841, 0.2055, '2025-11-02..2026-02-03',
                                                     ('fp4', 'fp8'), stack='trtllm', status='stack fit',
                                                     host_per_seq_us=0.0),
    'nvidia-hopper/moe/trtllm': FamilyCalibration('nvidia-hopper', 'moe', 0.95, 10.0, 0.85, 45.0, 24, 0.0275, 0.0617,
                                                  0.038, 0.0718, 0.0834, '2025-10-16..2025-11-02', ('fp8',),
                                                  stack='trtllm', status='stack fit', host_per_seq_us=0.0),
    'amd-cdna3/moe/sglang': FamilyCalibration('amd-cdna3', 'moe', 0.95, 20.0, 0.35, 35.0, 15, 0.0369, 0.1204, 0.0517,
                                              0.1037, 0.0726, '2026-02-27..2026-02-27', ('fp8',), stack='sglang',
                                              status='stack fit', host_per_seq_us=50.0),
    'amd-cdna3/dense/rocm-vllm': FamilyCalibration('amd-cdna3', 'dense', 0.75, 8.0, 0.9, 35.0, 119, 0.0629, 0.3131,
                                                   0.0595, 0.1963, 0.1667, '2025-10-16..2025-10-16', ('fp8',),
                                                   stack='rocm-vllm', status='stack fit', host_per_seq_us=60.0),
    'amd-cdna4/dense/rocm-vllm': FamilyCalibration('amd-cdna4', 'dense', 0.9, 10.0, 1.05, 55.0, 120, 0.0819, 0.3927,
                                                   0.0872, 0.2751, 0.3276, '2025-10-16..2025-10-16', ('fp4', 'fp8'),
                                                   stack='rocm-vllm', status='stack fit', host_per_seq_us=30.0,
                                                   precision_fits=(('fp4', 0.55, 0.8), ('fp8', 0.9, 1.05))),
    'nvidia-blackwell/dense/trtllm': FamilyCalibration('nvidia-blackwell', 'dense', 0.95, 6.0, 1.0, 30.0, 121, 0.0479,
                                                       0.1927, 0.0509, 0.1864, 0.1073, '2025-10-16..2025-10-16',
                                                       ('fp4', 'fp8'), stack='trtllm', status='stack fit',
                                                       host_per_seq_us=20.0,
                                                       precision_fits=(('fp4', 0.7, 1.1), ('fp8', 0.95, 1.0))),
    'nvidia-blackwell/dense/vllm': FamilyCalibration('nvidia-blackwell', 'dense', 0.95, 8.0, 0.85, 35.0, 119, 0.0456,
                                                     0.2135, 0.0551, 0.1968, 0.1665, '2025-10-16..2025-10-16',
                                                     ('fp4', 'fp8'), stack='vllm', status='stack fit',
                                                     host_per_seq_us=20.0,
                                                     precision_fits=(('fp4', 0.85, 0.75), ('fp8', 0.95, 0.85))),
    'nvidia-hopper/dense/vllm': FamilyCalibration('nvidia-hopper', 'dense', 0.8, 6.0, 1.2, 15.0, 101, 0.0533, 0.196,
                                                  0.0567, 0.2624, 0.0977, '2025-10-16..2025-10-16', ('fp8',),
                                                  stack='vllm', status='stack fit', host_per_seq_us=80.0),
    'nvidia-hopper/dense/trtllm': FamilyCalibration('nvidia-hopper', 'dense', 0.95, 6.0, 1.5, 20.0, 68, 0.0462, 0.237,
                                                    0.0717, 0.1853, 0.0777, '2025-10-16..2025-10-16', ('fp8',),
                                                    stack='trtllm', status='stack fit', host_per_seq_us=40.0),
    'nvidia-hopper/moe/sglang': FamilyCalibration('nvidia-hopper', 'moe', 0.95, 8.0, 0.7, 75.0, 15, 0.0231, 0.053,
                                                  0.0263, 0.0657, 0.1425, '2025-10-16..2025-10-16', ('fp8',),
                                                  stack='sglang', status='stack fit', host_per_seq_us=30.0),
}


def family_of(architecture: str | None) -> str | None:
    """The calibration family of an accelerator profile's ``architecture`` text, or None."""
    text = architecture or ""
    return next((fam for key, fam in FAMILY_KEYS if key in text), None)


def calibration_keys(family: str, cls: str, stack: str | None) -> tuple[str, ...]:
    """The calibrations a model of class ``cls`` on serving stack ``stack`` (None: no stack named) may be
    served with on ``family``, in ``serve``'s order of preference: the stack's own fit for the class
    (``family/class/stack``), the family's fit for the class over every stack (``family/class``), the
    family's other class."""
    own = (f"{family}/{cls}/{stack}",) if stack else ()
    return own + tuple(f"{family}/{c}" for c in (cls, *(o for o in MODEL_CLASSES if o != cls)))


def choose_calibration(family: str, cls: str, stack: str | None,
                       lookup: Callable[[str], FamilyCalibration | None]) -> FamilyCalibration | None:
    """The first of :func:`calibration_keys` that ``lookup`` has (a stored table, or a refit without a held-out
    run: ``serve_validate``); a family fit chosen for a named stack stands in for it, its corners moved by its
    largest TPOT error instead of its mean (the stack's own kernels are not in the fit: the spread of the
    family's worst point is the bound), its status saying so. None: no calibration (the profile's values)."""
    for key in calibration_keys(family, cls, stack):
        cal = lookup(key)
        if cal is None:
            continue
        if stack is None or key.count("/") == 2:
            return cal
        return replace(cal, stack=stack, range_err=max(cal.tpot_max_err, cal.tpot_mean_err),
                       status=f"family fit standing in for {stack}, which has no {cls} points on {family}; range: "
                              "the family's max TPOT error")
    return None


def calibration_for(architecture: str | None, cls: str) -> FamilyCalibration | None:
    """The family's calibration for models of class ``cls``; the family's other class when it has
    points of that one only (the returned ``model_class`` says which); None for an uncalibrated family."""
    fam = family_of(architecture)
    return None if fam is None else choose_calibration(fam, cls, None, CALIBRATION.get)


def stack_calibration_for(architecture: str | None, cls: str, stack: str | None) -> FamilyCalibration | None:
    """The calibration a model of class ``cls`` is served with on serving stack ``stack`` (None: the
    family's, :func:`calibration_for`): the stack's own fit on the family for that class where
    ``STACK_CALIBRATION`` has one (enough points: :func:`stack_fit_allowed`); else the family's fit over
    every stack standing in for it (:func:`choose_calibration`)."""
    fam = family_of(architecture)
    if fam is None:
        return None
    return choose_calibration(fam, cls, stack, lambda k: STACK_CALIBRATION.get(k) or CALIBRATION.get(k))


def scaled(hw: Any, scale: Any) -> Any:
    """``hw`` with its GEMM ceiling and flash-attention efficiency multiplied by ``scale`` (at most 1 of
    the peak); arrays allowed (the fit's grid)."""
    return replace(hw, matmul_eff=np.minimum(1.0, hw.matmul_eff * scale),
                   attn_eff=np.minimum(1.0, hw.attn_eff * scale))


def at_precision(cal: FamilyCalibration, precision: str | None) -> tuple[float, float]:
    """``(HBM efficiency, matmul scale)`` calibration ``cal`` gives at compute ``precision``: its own fit where
    the precision was fitted apart (``cal.precision_fits``); else the fields, the matmul scale only at a
    precision it was fitted at (None: the fitted one) and 1 (the profile's ceiling) at any other."""
    own = [(h, m) for prec, h, m in cal.precision_fits if prec == precision]
    if own:
        return own[0]
    fitted = precision is None or precision in cal.matmul_precisions
    return cal.hbm_efficiency, (cal.matmul_scale if fitted else 1.0)


def apply(hw: Any, cal: FamilyCalibration, case: str = "nominal", precision: str | None = None) -> Any:
    """``hw`` (``serve.ServeHardware``) with the family's fitted figures at compute ``precision``
    (:func:`at_precision`); at a corner each efficiency moves by the mean TPOT error (pessimistic: lower
    efficiencies, higher overheads). A family fit standing in for an uncalibrated stack moves by
    ``cal.range_err`` instead (:func:`stack_calibration_for`). At a fitted precision ``hw`` carries the
    profile's nominal ceiling at every corner (``hardware.serve_hardware``): the scale was fitted on it."""
    spread = cal.tpot_mean_err if cal.range_err is None else cal.range_err
    f = {"nominal": 0.0, "pessimistic": -1.0, "optimistic": 1.0}[case] * spread
    hbm, mm = at_precision(cal, precision)
    hw = scaled(hw, mm * (1.0 + f))
    hw = replace(hw, matmul_eff=float(hw.matmul_eff), attn_eff=float(hw.attn_eff))
    return replace(hw, hbm_eff=min(1.0, hbm * (1.0 + f)),
                   kernel_overhead_s=cal.kernel_overhead_us * 1e-6 * (1.0 - f),
                   request_overhead_s=cal.request_overhead_ms * 1e-3,
                   host_per_seq_s=cal.host_per_seq_us * 1e-6 * (1.0 - f))


@dataclass(frozen=True)
class Point:
    """One published measurement: the workload as served and what was measured."""

    sku: str
    model: str
    precision: str
    tp: int
    ep: int
    dpa: bool
    isl: int
    osl: int
    conc: int
    tput_per_gpu: float  # input + output tokens/s per GPU
    tpot_s: float
    ttft_s: float
    stack: str = ""  # the serving stack profile it was measured on (``row_stack``); "": none known
    # TensorRT-LLM holds its launch script set (``tests/data/serve_inferencex.csv``; 0: off, the default):
    batch_wait_iters: int = 0  # ``batch_wait_timeout_iters``
    batch_wait_tokens: float = 0.0  # ``batch_wait_max_tokens_ratio`` x ``max_num_tokens``
    adp_balance_iters: int = 0  # ``attention_dp_config`` ``timeout_iters`` with ``enable_balance``


def queued(p: Point) -> bool:
    """Whether point ``p`` measured requests waiting for room in the KV cache rather than the steady state.

    In the InferenceX Llama-3.3-70B runs every point with a median TTFT above ``QUEUED_TTFT_S`` (4.2 s to
    390 s) keeps 32-128 sequences in flight on one or two GPUs, 0.8 to 2.9 times what the planner's
    memory model says their KV cache holds at the full context (and one H200 DeepSeek-R1 point, 64
    sequences of 8k-token prompts: 3.4 s); the slowest prefill kept is 2.3 s (an 8k-token prompt on
    one MI300X). No fitted point has more clients than its stack's KV admission runs (``serve_admission``),
    so the admission limit changes only these points' predictions."""
    return p.ttft_s > QUEUED_TTFT_S


def point_from_row(r: dict[str, str], stack: str = "") -> Point:
    """One row of ``tests/data/serve_inferencex.csv`` (strings, as ``csv.DictReader`` gives them), measured on
    serving stack ``stack`` (:func:`row_stack`), with the TensorRT-LLM holds its launch sets (:func:`launch_holds`)."""
    return Point(r["sku"], r["model"], r["precision"], int(r["tp"]), int(r["ep"]), bool(int(r["dpa"])),
                 int(r["isl"]), int(r["osl"]), int(r["conc"]), float(r["tput_per_gpu"]), float(r["median_tpot_s"]),
                 float(r["median_ttft_s"]), stack, *launch_holds(r))


LAUNCH_COLUMNS = ("batch_wait_timeout_iters", "batch_wait_max_tokens_ratio", "max_num_tokens",
                  "adp_balance_timeout_iters")


def launch_holds(r: dict[str, str]) -> tuple[int, float, int]:
    """``(batch_wait_iters, batch_wait_tokens, adp_balance_iters)`` of :class:`Point` from a row's launch
    columns (``LAUNCH_COLUMNS``, as the file's header describes them; empty or absent: off): the batch
    waiting's token threshold is its ratio of ``max_num_tokens``, and attention-DP balancing needs attention
    data parallel (``dpa``) and leaves no room for batch waiting in the hold it prices."""
    v = {}
    for k in LAUNCH_COLUMNS:
        text = (r.get(k) or "").strip()
        try:
            v[k] = float(text) if text else 0.0
        except ValueError:
            raise PlannerError(f"serve_inferencex.csv: {k} = {text!r} is not a number") from None
        whole = k != "batch_wait_max_tokens_ratio"  # iteration and token counts
        if not 0 <= v[k] < float("inf") or (whole and v[k] != int(v[k])):
            raise PlannerError(f"serve_inferencex.csv: {k} = {text!r} must be a {'whole' if whole else 'finite'} "
                               "number >= 0")
    iters, ratio, max_tokens, adp = v.values()
    if (iters > 0) != (ratio > 0) or (ratio > 0) != (max_tokens > 0):
        raise PlannerError("serve_inferencex.csv: batch_wait_timeout_iters, batch_wait_max_tokens_ratio and "
                           "max_num_tokens are set together or not at all")
    if adp > 0 and (r.get("dpa") != "1" or iters > 0):
        raise PlannerError("serve_inferencex.csv: adp_balance_timeout_iters needs dpa = 1 and no batch waiting")
    return int(iters), ratio * max_tokens, int(adp)


@dataclass(frozen=True)
class PointGroup:
    """The points of one ``family/class`` split the way :func:`fit_family` takes them."""

    family: str
    model_class: str
    fitted: list[Point]  # inside the window, steady state
    older: list[Point]  # before the window (superseded software; their error is reported)
    waiting: list[Point]  # inside the window, but measured a queue (:func:`queued`)
    cut: date  # the window's first day: ``RECENT_DAYS`` before the group's newest run
    dates: tuple[str, str]  # first and last run date inside the window


def row_stack(cat: Any, r: dict[str, str]) -> str:
    """The serving stack profile of an InferenceX row: the one whose ``[inferencex] framework`` is the row's
    ``framework`` on the family's vendor (``serving_stacks.stack_of_inferencex``); else the label itself."""
    from mi400plan.serving_stacks import stack_of_inferencex

    return stack_of_inferencex(cat, r["family"], r["framework"]) or r["framework"]


def calibration_groups(cat: Any, rows: list[dict[str, str]], *, by_stack: bool = False) -> dict[str, PointGroup]:
    """The InferenceX rows grouped by ``family/class`` (the model's :func:`model_class`), or with
    ``by_stack`` by ``family/class/stack`` (:func:`row_stack`), each group's points split into fitted,
    older and waiting (the module docstring's method; a stack's window is counted from its own newest run)."""
    grouped: dict[str, list[tuple[Point, date]]] = {}
    for r in rows:
        key = f"{r['family']}/{model_class(cat.get('models', r['model']).spec)}"
        if by_stack:
            key += f"/{row_stack(cat, r)}"
        grouped.setdefault(key, []).append((point_from_row(r, row_stack(cat, r)), date.fromisoformat(r["date"])))
    out: dict[str, PointGroup] = {}
    for key, items in grouped.items():
        family, cls = key.split("/")[:2]
        cut = max(d for _, d in items) - timedelta(days=RECENT_DAYS)
        fresh = [(p, d) for p, d in items if d >= cut]
        days = sorted(d for _, d in fresh)
        out[key] = PointGroup(family, cls, [p for p, _ in fresh if not queued(p)],
                              [p for p, d in items if d < cut], [p for p, _ in fresh if queued(p)], cut,
                              (days[0].isoformat(), days[-1].isoformat()))
    return out


def admission_policy(cat: Any, stack: str) -> str | None:
    """The KV admission policy (``serve_admission``) of serving stack profile ``stack``; None for a point
    with no stack profile (it is evaluated at its concurrency, no admission limit)."""
    if not stack or stack not in cat.names("serving"):
        return None
    return str(cat.get("serving", stack).spec.kv_admission.policy)


def stack_iterations(cat: Any, stack: str | None, sku: str, hbm_bytes: float) -> Any:
    """The iteration rule (``serve.Iterations``) of serving stack profile ``stack`` on this GPU
    (``serving_stacks.scheduler_iterations``); None (prefill iterations apart) for a point with no stack
    profile."""
    from mi400plan.serving_stacks import scheduler_iterations

    if not stack or stack not in cat.names("serving"):
        return None
    return scheduler_iterations(cat.get("serving", stack).spec.scheduler, sku, hbm_bytes)


# Every InferenceX launch script of the calibration rows turns its stack's overlap of CPU and GPU work on: the
# vLLM Llama scripts on H100, H200, B200 and MI300X / MI325X / MI355X pass ``--async-scheduling`` (or
# ``async-scheduling: true``; ``benchmarks/70b_*`` at commit b13bcafec, 2025-10-15); the TensorRT-LLM scripts leave
# the PyTorch backend's overlap scheduler on (none sets ``disable_overlap_scheduler``), the SGLang scripts its
# overlap schedule (none passes ``--disable-overlap-schedule``, through commit f267602 of 2026-02-27). The fitted
# CPU time per sequence is what that overlap leaves on the critical path, so it adds to the GPU step
# (``serve.host_bound_step``): the runs' median TPOT grows by a constant time per sequence from 4 sequences up
# (B200 TensorRT-LLM NVFP4 TP8 1k/8k: 6.2, 6.4, 6.8, 7.7, 9.6, 13.5 ms at 4 to 128 sequences, 50-60 us more per
# sequence at every step of the sweep), not by a floor that appears once the CPU work outgrows the GPU step;
# fitted as a floor (the larger of the two) the same points gave 100-200 us per sequence, at the grid's edge on
# four of the eight dense groups, against about 20 us measured for vLLM's V1 engine (``serve.host_bound_step``),
# and a worse leave-one-run-out error (same software generation, tokens/s per GPU: 9.1 % mean against 8.3 %).
INFERENCEX_HOST_OVERLAP = False


def adp_balance_prompts(ranks: int) -> float:
    """Prompts that arrive, on average, before each of ``ranks`` attention-DP ranks holds one: TensorRT-LLM
    gives a new request to a rank below the expected count per rank (``executor_request_queue.py``
    ``_balance_requests_across_ranks``, 1.1, 2025), which in a full closed loop is the rank the finishing
    request left, a uniformly random one; so the coupon collector's ``R H_R = R (1 + 1/2 + ... + 1/R)``."""
    return float(ranks) * sum(1.0 / i for i in range(1, int(ranks) + 1))


def launch_batch_wait(p: Point) -> Any:
    """The TensorRT-LLM hold (``serve.BatchWait``) the InferenceX launch script of point ``p`` sets, from the
    point's launch settings (``tests/data/serve_inferencex.csv``): batch waiting (``p.batch_wait_iters``
    iterations or ``p.batch_wait_tokens`` scheduled tokens), or attention-DP balancing (``p.adp_balance_iters``
    iterations or :func:`adp_balance_prompts` over the point's TP ranks); else None."""
    from mi400plan.serve import BatchWait

    if p.batch_wait_iters > 0:
        return BatchWait(p.batch_wait_iters, p.batch_wait_tokens)
    if p.adp_balance_iters > 0:
        return BatchWait(p.adp_balance_iters, np.inf, adp_balance_prompts(p.tp))
    return None


# InferenceX's client draws every prompt and output length uniformly on ``[int(0.8 L), L]`` for the nominal
# length ``L`` (``--random-range-ratio 0.8`` in every workflow, ``.github/workflows/full-sweep-tmpl.yml`` at commit
# b13bcafec and ``RANDOM_RANGE_RATIO: 0.8`` in ``benchmark-tmpl.yml`` through f267602, 2026-02-26; the client,
# ``kimbochen/bench_serving`` ``benchmark_serving.py`` ``sample_random_requests``, later InferenceX's
# ``utils/bench_serving``: ``np.random.randint(int(L * range_ratio), L + 1)``): the mean is 0.9 L, not L.
INFERENCEX_RANGE_RATIO = 0.8


def inferencex_lengths(nominal: int) -> Any:
    """The lengths InferenceX's client sends for nominal length ``nominal`` (``serve_sim.LengthDist``, uniform on
    ``int(0.8 nominal)..nominal``: ``INFERENCEX_RANGE_RATIO``)."""
    from mi400plan.serve_sim import LengthDist

    return LengthDist("uniform", (int(nominal * INFERENCEX_RANGE_RATIO), int(nominal)),
                      source="InferenceX random dataset, range ratio 0.8")


def inferencex_workload(cat: Any, p: Point) -> tuple[Any, Any, Any]:
    """``(serve.Workload, prompt lengths, output lengths)`` of InferenceX point ``p``: the lengths its client sends
    (:func:`inferencex_lengths`), the workload at their means with the outputs' spread (the length-biased context),
    KV cache in FP8 as every launch script sets it."""
    from mi400plan import serve as core
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = cat.get("models", p.model).spec
    inp, out = inferencex_lengths(p.isl), inferencex_lengths(p.osl)
    wl = core.Workload(m, count_params(m), infer_recipe(p.precision, kv_dtype="fp8"), round(inp.mean), round(out.mean),
                       output_cv2=out.cv2)
    return wl, inp, out


def predict(cat: Any, p: Point, hw: Any) -> dict[str, np.ndarray]:
    """The model's total tokens/s per GPU, median TPOT and median TTFT (InferenceX publishes medians) for point
    ``p`` on hardware ``hw`` (whose efficiency fields may be arrays: one prediction per element): a closed loop
    of ``p.conc`` clients sending the lengths InferenceX's client draws (:func:`inferencex_lengths`: their means,
    and the outputs' spread for the length-biased context) on a server that runs as many as its KV cache admits
    under its stack's policy
    (``serve_admission.closed_loop``; the weights' room is the nominal HBM's), with the batch waiting its
    launch script sets (:func:`launch_batch_wait`) and its stack's iteration rule (:func:`stack_iterations`)."""
    from mi400plan.serve_admission import admission_context, closed_loop, kv_capacity

    wl, _, out = inferencex_workload(cat, p)
    policy = admission_policy(cat, p.stack)
    cap = np.inf if policy is None else kv_capacity(
        wl, hw, tp=p.tp, pp=1, dpa=p.dpa, batch=float(p.conc),
        context=admission_context(policy, wl.input_len, wl.output_len, out.cv2))
    ev = closed_loop(wl, replace(hw, host_overlap=INFERENCEX_HOST_OVERLAP), tp=p.tp, pp=1, ep=p.ep, dpa=p.dpa,
                     clients=float(p.conc), capacity=cap, batch_waiting=launch_batch_wait(p),
                     iterations=stack_iterations(cat, p.stack, p.sku, hw.hbm_bytes))
    return {"tput": ev["total_tps_gpu"], "tpot": ev["tpot"], "ttft": ev["ttft_median"]}


def fitted_parameters(points: list[Point]) -> int:
    """How many figures :func:`fit_family` fits on ``points``: HBM efficiency, kernel overhead and request
    overhead, the matmul scale when a prompt is ``PREFILL_HEAVY_TOKENS`` long (HBM efficiency and matmul scale
    once per compute precision where :func:`precision_split` parts them), and the host time per sequence
    where the points afford it (:func:`host_fitted`)."""
    return _base_parameters(points) + (1 if host_fitted(points) else 0)


def _prefill_heavy(points: list[Point]) -> bool:
    """Whether a prompt among ``points`` is ``PREFILL_HEAVY_TOKENS`` long: only then is the matmul scale fitted."""
    return any(p.isl >= PREFILL_HEAVY_TOKENS for p in points)


def _own_parameters(points: list[Point]) -> int:
    """The figures fitted per compute precision: HBM efficiency, and the matmul scale given an 8k prompt."""
    return 2 if _prefill_heavy(points) else 1


def _base_parameters(points: list[Point]) -> int:
    split = precision_split(points)
    parts = [points] if split is None else list(split.values())
    return 2 + sum(_own_parameters(v) for v in parts)


def precision_split(points: list[Point]) -> dict[str, list[Point]] | None:
    """``points`` by compute precision (``serve.COMPUTE_PRECISION``) where they hold more than one and each
    precision has ``MIN_POINTS_PER_PARAMETER`` points per figure of its own (:func:`_own_parameters`); else
    None (one HBM efficiency and matmul scale for all). The 4-bit formats run GEMM kernels of their own,
    which dequantise block scales inside the GEMM (MXFP4 on CDNA 4: AITER's Triton ``gemm_afp4wfp4`` or
    assembly ``gemm_a4w4``, chosen per concurrency by the InferenceX launch scripts ``benchmarks/70b_fp4_mi355x_*``
    at commit b13bcafec, 2025-10-15; vLLM PR #53141, 2026-08-20: Llama-3.3-70B MXFP4 on MI355X, TP8, 128
    sequences, 1k/1k, TPOT 45.07 ms on the Triton kernel and 39.25 ms on the assembly one); the FP8 GEMMs are the
    vendor BLAS's. Pooled, the fit left the formats apart by the same sign on every stack that ran both: tokens/s
    per GPU FP8 -6 % / MXFP4 +13 % (CDNA 4 ROCm vLLM), FP8 -4 % / NVFP4 +8 % (Blackwell TensorRT-LLM), FP8
    -2 % / NVFP4 +6 % (Blackwell vLLM), mean signed error on the calibration points."""
    from mi400plan.serve import COMPUTE_PRECISION

    by: dict[str, list[Point]] = {}
    for p in points:
        by.setdefault(COMPUTE_PRECISION[p.precision], []).append(p)
    if len(by) < 2 or any(len(v) < MIN_POINTS_PER_PARAMETER * _own_parameters(v) for v in by.values()):
        return None
    return dict(sorted(by.items()))


def host_fitted(points: list[Point]) -> bool:
    """Whether :func:`fit_family` fits the host time per sequence (``serve.host_bound_step``) on ``points``:
    only with ``MIN_POINTS_PER_PARAMETER`` points for each of its figures, that one included; else it keeps
    the prior, none."""
    return len(points) >= MIN_POINTS_PER_PARAMETER * (_base_parameters(points) + 1)


def stack_fit_allowed(points: list[Point]) -> bool:
    """Whether a stack's own points may be fitted: ``MIN_POINTS_PER_PARAMETER`` per fitted figure."""
    return len(points) >= MIN_POINTS_PER_PARAMETER * fitted_parameters(points)


def calibrated_bases(base: dict[tuple[str, str], Any], cal: FamilyCalibration) -> dict[tuple[str, str], Any]:
    """``fit_family``'s ``base`` ((SKU, weight format) -> nominal hardware) with calibration ``cal`` applied at
    each weight format's compute precision."""
    from mi400plan.serve import COMPUTE_PRECISION

    return {k: apply(v, cal, precision=COMPUTE_PRECISION[k[1]]) for k, v in base.items()}


def _grid_loss(cat: Any, points: list[Point], base: dict[str, Any], host_grid: np.ndarray) -> tuple[np.ndarray, ...]:
    """``(H, K, M, S, loss)``: the grid of HBM efficiency, kernel overhead (s), matmul scale and host time per
    sequence (s), and the sum of squared log errors of tokens/s per GPU and median TPOT of ``points`` on it;
    the matmul scale is searched only with an 8k prompt among them (else the prior, 1)."""
    mm_grid = SCALE_GRID if _prefill_heavy(points) else np.array([PRIOR["matmul"]])
    H, K, M, S = np.meshgrid(HBM_GRID, OVERHEAD_GRID_US * 1e-6, mm_grid, host_grid * 1e-6, indexing="ij")
    loss = np.zeros(H.shape)
    for p in points:
        hw = replace(scaled(base[(p.sku, p.precision)], M), hbm_eff=H, kernel_overhead_s=K, request_overhead_s=0.0,
                     host_per_seq_s=S)
        pr = predict(cat, p, hw)
        loss += np.log(pr["tput"] / p.tput_per_gpu) ** 2 + np.log(pr["tpot"] / p.tpot_s) ** 2
    return H, K, M, S, loss


def _near_prior(loss: np.ndarray, prior: np.ndarray) -> tuple[int, ...]:
    """The grid index, among those within 1 % of the best ``loss``, closest to the ``prior`` (a flat direction
    keeps the planner's prior)."""
    near = loss <= loss.min() * 1.01 + 1e-12
    return tuple(int(i) for i in np.unravel_index(int(np.argmin(np.where(near, prior, np.inf))), loss.shape))


def _prior(H: Any, K: Any, M: Any, S: Any) -> Any:
    return (np.log(H / PRIOR["hbm"]) ** 2 + np.log(K * 1e6 / PRIOR["overhead_us"]) ** 2
            + np.log(M / PRIOR["matmul"]) ** 2 + (S * 1e6 / PRIOR["host_scale_us"]) ** 2)


def fit_family(cat: Any, family: str, cls: str, points: list[Point], base: dict[str, Any], *,
               stack: str = "") -> FamilyCalibration:
    """Grid-search fit of one family on its points of one model class (see the module docstring); with
    ``stack``, the points are that serving stack's only (the result says so). ``base`` maps each (SKU,
    weight format) to its nominal ``serve.ServeHardware`` (peaks, bandwidths, fabrics from the profile).
    Where :func:`precision_split` parts the points, each precision has its own HBM efficiency and matmul
    scale at the kernel overhead and host time shared by all: for each of those two, each precision's best."""
    from mi400plan.serve import COMPUTE_PRECISION

    host_grid = HOST_GRID_US if host_fitted(points) else np.array([0.0])
    split = precision_split(points)
    parts = split or {"": points}
    grids = {prec: _grid_loss(cat, part, base, host_grid) for prec, part in parts.items()}
    if split is None:
        H, K, M, S, loss = grids[""]
        i = _near_prior(loss, _prior(H, K, M, S))
        own = {"": (float(H[i]), float(M[i]))}
        ki, si = i[1], i[3]
    else:
        H, K, M, S, _ = next(iter(grids.values()))
        shared = sum(g[4].min(axis=(0, 2)) for g in grids.values())
        ki, si = _near_prior(shared, _prior(PRIOR["hbm"], K[0, :, 0, :], PRIOR["matmul"], S[0, :, 0, :]))
        own = {}
        for prec, (Hp, _, Mp, _, loss) in grids.items():
            a, b = _near_prior(loss[:, ki, :, si], _prior(Hp[:, ki, :, si], K[0, ki, 0, si], Mp[:, ki, :, si],
                                                           S[0, ki, 0, si]))
            own[prec] = (float(Hp[a, ki, b, si]), float(Mp[a, ki, b, si]))
    k, hs = round(float(K[0, ki, 0, si]) * 1e6, 3), round(float(S[0, ki, 0, si]) * 1e6, 3)
    ref = "" if split is None else ("fp8" if "fp8" in own else max(split, key=lambda q: len(split[q])))
    h, mm = own[ref]
    fits = () if split is None else tuple((prec, hp, mp) for prec, (hp, mp) in own.items())
    # the matmul scale was fitted at the compute precisions of the parts with an 8k prompt
    precs = tuple(sorted({COMPUTE_PRECISION[p.precision] for part in parts.values() if _prefill_heavy(part)
                          for p in part}))
    cal = FamilyCalibration(family, cls, h, k, mm, 0.0, len(points), 0, 0, 0, 0, 0, "", precs, stack=stack,
                            status="stack fit" if stack else "family fit", host_per_seq_us=hs, precision_fits=fits)
    hw0 = calibrated_bases(base, cal)  # no request overhead yet: the TTFT fit below adds it
    ttft0 = [float(predict(cat, p, hw0[(p.sku, p.precision)])["ttft"]) for p in points]
    obs = np.array([p.ttft_s for p in points])
    r_loss = [(np.log((np.array(ttft0) + r * 1e-3) / obs) ** 2).sum() for r in REQUEST_GRID_MS]
    cal = replace(cal, request_overhead_ms=float(REQUEST_GRID_MS[int(np.argmin(r_loss))]))
    errs = errors(cat, points, calibrated_bases(base, cal))
    return replace(cal, tput_mean_err=round(float(np.mean(errs["tput"])), 4),
                   tput_max_err=round(float(np.max(errs["tput"])), 4),
                   tpot_mean_err=round(float(np.mean(errs["tpot"])), 4),
                   tpot_max_err=round(float(np.max(errs["tpot"])), 4),
                   ttft_mean_err=round(float(np.mean(errs["ttft"])), 4))


def errors(cat: Any, points: list[Point], hw: dict[str, Any], *, signed: bool = False) -> dict[str, np.ndarray]:
    """|relative error| of tokens/s per GPU, TPOT and TTFT for each point (``hw``: (SKU, weight format) ->
    hardware). ``signed``: + = optimistic, the prediction's throughput too high (predicted / measured - 1)
    and its latencies too low (1 - predicted / measured)."""
    out: dict[str, list[float]] = {"tput": [], "tpot": [], "ttft": []}
    for p in points:
        pr = predict(cat, p, hw[(p.sku, p.precision)])
        rel = {"tput": float(pr["tput"]) / p.tput_per_gpu - 1.0, "tpot": float(pr["tpot"]) / p.tpot_s - 1.0,
               "ttft": float(pr["ttft"]) / p.ttft_s - 1.0}
        for k, e in rel.items():
            out[k].append((e if k == "tput" else -e) if signed else abs(e))
    return {k: np.array(v) for k, v in out.items()}


# --- validation (published measurements that are not InferenceX; never fitted) -----------------------

# How a validation measurement was taken (``tests/data/serve_validation.csv``, column ``kind``):
# static_batch: a fixed batch of ``conc`` prompts, all generating ``osl`` tokens (vLLM benchmark_latency);
# serving: a closed loop of ``conc`` requests with varied lengths (the continuous-batching steady state);
# lockstep: a closed loop of ``conc`` requests of one fixed length (synchronised rounds, serve.lockstep_rounds);
# max_throughput: every request queued at once (trtllm-bench throughput, vLLM benchmark_throughput, MLPerf
# Offline): the server runs as many sequences as its KV cache holds;
# slo_throughput: the highest request rate that keeps latency limits (MLPerf Server: Poisson arrivals, p99 TTFT
# and TPOT limits): the best steady state whose KV cache fits and whose mean TPOT and TTFT are within the limits.
MEASUREMENT_KINDS = ("static_batch", "serving", "lockstep", "max_throughput", "slo_throughput")
# The serving stack (profiles/serving) each validation source measured with, by accelerator vendor, as the
# header of ``tests/data/serve_validation.csv`` describes the sources (vLLM on AMD is its ROCm build).
VALIDATION_STACKS = {("O1", "AMD"): "rocm-vllm", ("A1", "AMD"): "rocm-vllm", ("M1", "AMD"): "rocm-vllm",
                     ("D1", "AMD"): "sglang", ("D1", "NVIDIA"): "trtllm", ("T1", "NVIDIA"): "trtllm",
                     ("M1", "NVIDIA"): "trtllm", ("M2", "NVIDIA"): "trtllm"}
# Concurrencies tried for a max_throughput measurement (the best one whose KV cache fits is the prediction).
MAX_THROUGHPUT_GRID = np.unique(np.round(np.geomspace(1.0, 16384.0, 256)))


@dataclass(frozen=True)
class Measured:
    """One published inference measurement: the workload as served and what was measured (output tokens/s
    of the whole ``tp``-GPU server; TPOT and TTFT in seconds, means, where published)."""

    source: str
    sku: str
    model: str
    precision: str
    kv: str
    tp: int
    kind: str
    isl: int
    osl: int
    conc: int
    output_tps: float
    tpot_s: float | None = None
    ttft_s: float | None = None
    dpa: bool = False  # attention data parallel over the tp GPUs, experts spread over them (EP = tp)
    tpot_slo_s: float | None = None  # slo_throughput: the TPOT limit (seconds)
    ttft_slo_s: float | None = None  # slo_throughput: the TTFT limit (seconds)
    prefill_tokens: int | None = None  # the submission's token budget per iteration, every pass full (Offline)
    prefill_prompts: int | None = None  # the submission's minimum prompts per prefill pass (its scheduler's)
    max_seqs: int | None = None  # the submission's cap on sequences in flight per replica (its configuration's)
    output_cv2: float = 0.0  # Var / mean^2 of the outputs (0: every request ``osl`` tokens; ``serve.decode_context``)
    max_num_tokens: int | None = None  # the submission's token budget per iteration (per attention rank with dpa)
    adp_wait_iters: int | None = None  # attention-DP balance: iterations batching context after every rank has one
    adp_timeout_iters: int | None = None  # attention-DP balance: most iterations waiting for every rank to have one

    def prompts_per_pass(self) -> int:
        """Prompts per prefill pass the source's configuration gives (``serve.evaluate``'s
        ``prefill_prompts``): a full budget's (:func:`serve.prompts_per_prefill`), else its scheduler's
        minimum, else 1. With attention data parallel (``dpa``) the budget is each attention rank's own
        and the replica's pass holds ``tp`` ranks' prompts: TensorRT-LLM runs one scheduler per
        attention-DP rank and its ADP balance strategy starts the ranks' prompts in the same iteration
        (TensorRT-LLM tech blog 10, "ADP Balance Strategy", 2025); NVIDIA's MLPerf Inference v5.1 harness,
        closed/NVIDIA/code/llmlib/config.py (2025-09-09): "max-bs applies per attention-rank"."""
        from mi400plan.serve import prompts_per_prefill

        if self.prefill_tokens:
            return prompts_per_prefill(self.isl, self.prefill_tokens) * (self.tp if self.dpa else 1)
        return max(self.prefill_prompts or 1, 1)

    def concurrency_grid(self) -> np.ndarray:
        """The concurrencies a max_throughput / slo_throughput measurement is priced at:
        ``MAX_THROUGHPUT_GRID`` up to the submission's ``max_seqs`` (the cap itself included), all of it
        without a cap."""
        if not self.max_seqs:
            return MAX_THROUGHPUT_GRID
        cap = float(self.max_seqs)
        return np.unique(np.append(MAX_THROUGHPUT_GRID[MAX_THROUGHPUT_GRID <= cap], cap))


def best_within(out_tps: np.ndarray, fits: np.ndarray, tpot: np.ndarray, ttft: np.ndarray,
                tpot_max: float = np.inf, ttft_max: float = np.inf) -> int:
    """Index of the most output tokens/s among grid points whose KV cache fits and whose TPOT and TTFT are
    within the limits (MLPerf Offline: no limits; Server: its TTFT and TPOT limits); the first grid point
    when none qualifies."""
    ok = fits & (tpot <= tpot_max) & (ttft <= ttft_max)
    return int(np.argmax(np.where(ok, out_tps, -1.0)))


def predict_measured(cat: Any, m: Measured, hw: Any, stack: str | None = None) -> dict[str, float]:
    """The model's output tokens/s of the server, TPOT and TTFT (seconds) for measurement ``m`` taken the
    way ``m.kind`` says, on hardware ``hw`` (``serve.ServeHardware``, the planner's calibrated reading).

    static_batch: the batch's prefill, then ``osl`` decode steps at the mean context ``isl + osl / 2``;
    serving: :func:`serve.evaluate` at ``conc`` requests in flight; lockstep: :func:`serve.lockstep_rounds`
    with one prompt's prefill and the decode step at ``conc`` sequences (plus the per-request overhead on TTFT);
    max_throughput: :func:`serve.evaluate` at the concurrency of ``MAX_THROUGHPUT_GRID`` with the most output
    tokens/s among those whose KV cache fits (:func:`serve.memory`, the ``fit`` model) and that the
    source's configuration admits (``Measured.concurrency_grid``), with the prompts per prefill pass the
    source's configuration gives (``Measured.prompts_per_pass``); slo_throughput: the
    same among those whose mean TPOT and TTFT also keep ``m.tpot_slo_s`` and ``m.ttft_slo_s``
    (:func:`best_within`). ``stack``: the serving stack profile the source measured with; its iteration rule
    (:func:`stack_iterations`) sets the TTFT of the serving, max_throughput and slo_throughput kinds."""
    from mi400plan import serve as core
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    model = cat.get("models", m.model).spec
    wl = core.Workload(model, count_params(model), infer_recipe(m.precision, kv_dtype=m.kv), m.isl, m.osl,
                       output_cv2=m.output_cv2)
    b = float(m.conc)
    if m.kind == "static_batch":
        T = core.terms(wl.model, wl.counts, wl.recipe)
        pf = core.forward_stage(T, wl, hw, tp=m.tp, pp=1, ep=1, dpa=False, tokens=m.isl * b, seqs=b, context=0.0,
                                causal=True)
        st = core.forward_stage(T, wl, hw, tp=m.tp, pp=1, ep=1, dpa=False, tokens=b, seqs=b,
                                context=m.isl + m.osl / 2, causal=False)
        step = float(core.host_bound_step(st.total, b, hw))
        t = float(pf.total + m.osl * step)
        return {"output_tps": b * m.osl / t, "tpot": step, "ttft": float(pf.total)}
    ep = m.tp if m.dpa else 1
    its = stack_iterations(cat, stack, m.sku, hw.hbm_bytes)
    if m.kind in ("max_throughput", "slo_throughput"):
        grid = m.concurrency_grid()
        ev = core.evaluate(wl, hw, tp=m.tp, pp=1, ep=ep, dpa=m.dpa, batch=grid,
                            prefill_prompts=m.prompts_per_pass(), iterations=its)
        fits = core.memory(wl, hw, tp=m.tp, pp=1, dpa=m.dpa, batch=grid)["kv_fit"]
        slo = (m.tpot_slo_s or np.inf, m.ttft_slo_s or np.inf) if m.kind == "slo_throughput" else (np.inf, np.inf)
        i = best_within(ev["out_tps_gpu"], fits, ev["tpot"], ev["ttft"], *slo)
        return {"output_tps": float(ev["out_tps_gpu"][i]) * m.tp, "tpot": float(ev["tpot"][i]),
                "ttft": float(ev["ttft"][i]), "concurrency": float(grid[i])}
    ev = core.evaluate(wl, hw, tp=m.tp, pp=1, ep=ep, dpa=m.dpa, batch=b, iterations=its)
    if m.kind == "serving":
        return {"output_tps": float(ev["out_tps_gpu"]) * m.tp, "tpot": float(ev["tpot"]), "ttft": float(ev["ttft"])}
    r = core.lockstep_rounds(ev["t_prefill"], ev["t_step"], b, m.osl)
    return {"output_tps": float(r["out_tps"]), "tpot": float(r["tpot"]),
            "ttft": float(r["ttft"]) + hw.request_overhead_s}
