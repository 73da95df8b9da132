"""``mi400plan calibrate``: fitted efficiencies recovered from measurements made with known values.

Training runs are generated with the planner's own forward model at known efficiencies: a user
profile directory holds the SKU with the true ``[efficiency]`` values, and each run's step time is
``search.evaluate_one`` on the hardware ``hardware.build_sku`` builds from it (what ``sweep
--profiles DIR`` would do); the runs file is then calibrated back against the bundled profile. nccl-tests
logs are excerpts in the real output format with times worked out by hand from a known latency and
bandwidth (below).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

SKU = "mi355x"
TRUE_MATMUL = 0.34  # far below the bundled mi355x BF16 ceiling (0.464), so the residuals before fitting show it
TRUE_MATMUL_FP8 = 0.27
TRUE_OVERHEAD_US = 18.0
TRUE_ATTENTION = 0.30  # only where the installed profile schema has an attention efficiency
TRUE_HOST_US = 120.0  # host time per local-expert GEMM (the bundled mi355x value is 219 us)

RUNS = [  # layouts that vary the per-GPU GEMM sizes (hidden size, TP, micro-batch, sequence)
    dict(model="llama3.1-8b", tp=1, pp=1, dp=8, micro_batch=1, seq_len=8192, global_batch=64),
    dict(model="llama3.1-8b", tp=2, pp=1, dp=4, micro_batch=2, seq_len=4096, global_batch=64),
    dict(model="llama3.1-70b", tp=8, pp=4, dp=2, micro_batch=1, seq_len=8192, global_batch=64),
    dict(model="llama3.1-70b", tp=4, pp=8, vpp=2, dp=2, micro_batch=1, seq_len=2048, global_batch=128),
    dict(model="llama3.1-8b", tp=8, pp=1, dp=1, micro_batch=1, seq_len=2048, global_batch=16),
]


def _has_attention() -> bool:
    from mi400plan.specs.efficiency import Efficiency

    return "attention" in Efficiency.model_fields


@pytest.fixture(scope="module")
def truth(catalog, tmp_path_factory):
    """A catalog whose SKU profile carries the true efficiencies (a user profile directory)."""
    import tomli_w

    from mi400plan.profiles import Catalog

    path, _ = catalog.entry_path("accelerators", SKU)
    raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    values = {"matmul_bf16": TRUE_MATMUL, "matmul_fp8": TRUE_MATMUL_FP8, "gemm_overhead_us": TRUE_OVERHEAD_US,
              "expert_host_us": TRUE_HOST_US}
    if _has_attention():
        values["attention"] = TRUE_ATTENTION
    raw["efficiency"] = {**raw["efficiency"], **{k: {"nominal": v, "status": "measured"} for k, v in values.items()}}
    root = tmp_path_factory.mktemp("truth")
    (root / "accelerators").mkdir()
    (root / "accelerators" / f"{SKU}.toml").write_text(tomli_w.dumps(raw), encoding="utf-8")
    return Catalog.default([root])


def true_step(truth, run: dict, key: str = "step") -> float:
    """Step time (or another ``evaluate_one`` figure, ``key``) of ``run`` on SKU at the true efficiencies."""
    from mi400plan.hardware import build_sku
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, evaluate_one
    from mi400plan.specs.layout import train_recipe

    spec = truth.get("models", run["model"]).spec
    precision = run.get("precision", "bf16")
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision=precision), run["seq_len"],
                  run["global_batch"])
    hw = build_sku(truth, SKU, precision).hw
    layout = dict(tp=run["tp"], pp=run["pp"], vpp=run.get("vpp", 1), cp=1, ep=run.get("ep", 1), etp=1, zero=1,
                  micro_batch=run["micro_batch"], recompute=0, sp=int(run["tp"] > 1))
    world = run["tp"] * run["pp"] * run["dp"]
    return evaluate_one(layout, wl, hw, world, SearchOptions())[key]


def write_runs(path: Path, runs: list[dict], steps: list[float], header: str = f'sku = "{SKU}"\n') -> Path:
    text = header
    for run, step in zip(runs, steps):
        text += "\n[[run]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in run.items())
        text += f"step_time_s = {step!r}\n"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def runs_file(truth, tmp_path_factory) -> Path:
    steps = [true_step(truth, r) for r in RUNS]
    return write_runs(tmp_path_factory.mktemp("runs") / "runs.toml", RUNS, steps)


def _param(result, key):
    return next(p for p in result.params if p.key == key)


# --- round trip: training runs -----------------------------------------------------------------


def test_round_trip_recovers_known_efficiencies(catalog, runs_file) -> None:
    from mi400plan.api.calibrate import calibrate

    res = calibrate(catalog, [str(runs_file)])
    assert _param(res, "matmul_bf16").value == pytest.approx(TRUE_MATMUL, rel=1e-4)
    assert _param(res, "gemm_overhead_us").value == pytest.approx(TRUE_OVERHEAD_US, rel=1e-3)
    if _has_attention():
        assert _param(res, "attention").value == pytest.approx(TRUE_ATTENTION, rel=1e-3)
    assert len(res.rows) == len(RUNS)
    assert all(abs(r.residual) < 1e-5 for r in res.rows)
    # the bundled profile's values are far off, and the residuals say so before fitting
    assert _param(res, "matmul_bf16").before == catalog.get("accelerators", SKU).spec.efficiency.matmul_bf16.nominal
    assert all(r.residual_before < -0.1 for r in res.rows)


@pytest.mark.slow  # a calibration fit per precision: 5-15 s
def test_round_trip_two_precisions(catalog, truth, tmp_path) -> None:
    """BF16 and FP8 runs of one SKU: one matmul efficiency per precision, one GEMM overhead shared."""
    from mi400plan.api.calibrate import calibrate

    fp8 = [dict(r, precision="fp8") for r in RUNS[:3]]
    steps = [true_step(truth, r) for r in RUNS + fp8]
    res = calibrate(catalog, [str(write_runs(tmp_path / "both.toml", RUNS + fp8, steps))])
    assert _param(res, "matmul_bf16").value == pytest.approx(TRUE_MATMUL, rel=1e-3)
    assert _param(res, "matmul_fp8").value == pytest.approx(TRUE_MATMUL_FP8, rel=1e-3)
    assert _param(res, "gemm_overhead_us").value == pytest.approx(TRUE_OVERHEAD_US, rel=1e-2)
    assert {r.precision for r in res.rows} == {"bf16", "fp8"}


@pytest.mark.slow  # a calibration fit: about 5 s
def test_round_trip_with_measurement_noise(catalog, truth, tmp_path) -> None:
    """+-2 % deterministic noise on the step times: the fit stays within a few % of the truth and
    the residuals report the noise."""
    from mi400plan.api.calibrate import calibrate

    noise = [0.02, -0.02, 0.01, -0.01, 0.0]
    steps = [true_step(truth, r) * (1 + e) for r, e in zip(RUNS, noise)]
    res = calibrate(catalog, [str(write_runs(tmp_path / "noisy.toml", RUNS, steps))])
    assert _param(res, "matmul_bf16").value == pytest.approx(TRUE_MATMUL, rel=0.03)
    assert _param(res, "gemm_overhead_us").value == pytest.approx(TRUE_OVERHEAD_US, rel=0.25)
    assert max(abs(r.residual) for r in res.rows) < 0.03
    assert _param(res, "matmul_bf16").std_error > 0


# Mixtral 8x7B on 8 GPUs at EP 8 (one local expert): the GPU is the slower side at any host time. Qwen3-235B
# on 32 GPUs at PP 4 and EP 8 (16 of its 128 experts a GPU, 1,024 routed tokens an expert at micro-batch 1
# of 2,048 tokens): issuing the experts' GEMMs holds the micro-batch at micro-batch 1, and no longer at 4.
MOE_RUNS = [
    dict(model="mixtral-8x7b", tp=1, pp=1, ep=8, dp=8, micro_batch=1, seq_len=4096, global_batch=64),
    dict(model="qwen3-235b-a22b", tp=1, pp=4, ep=8, dp=8, micro_batch=1, seq_len=2048, global_batch=64),
    dict(model="qwen3-235b-a22b", tp=1, pp=4, ep=8, dp=8, micro_batch=4, seq_len=2048, global_batch=64),
]


@pytest.mark.slow  # a calibration fit: about 10 s
def test_round_trip_recovers_the_expert_host_time(catalog, truth, tmp_path) -> None:
    """Dense runs fix the GEMM efficiencies; the host-bound MoE run fixes ``expert_host_us``. Hand count of
    that run's micro-batch: 94 layers on PP 4 = 23 + 24 + 24 + 23 (uneven first and last stages), so the
    busiest stage issues 24 MoE layers x 2 GEMMs x 128 / 8 local experts x 3 passes x 120 us = 0.27648 s,
    longer than its GPU time; the 1F1B bubble is (PP - 1) = 3 such micro-batch slots."""
    from mi400plan.api.calibrate import calibrate

    issue = 24 * 2 * 128 / 8 * 3 * TRUE_HOST_US * 1e-6
    assert issue == pytest.approx(0.27648, rel=1e-12)
    assert true_step(truth, MOE_RUNS[1], "t_bubble") == pytest.approx(3 * issue, rel=1e-9)
    assert true_step(truth, MOE_RUNS[1], "t_host") > 0
    assert true_step(truth, MOE_RUNS[0], "t_host") == 0.0 == true_step(truth, MOE_RUNS[2], "t_host")
    runs = RUNS + MOE_RUNS
    res = calibrate(catalog, [str(write_runs(tmp_path / "moe.toml", runs, [true_step(truth, r) for r in runs]))])
    assert _param(res, "expert_host_us").value == pytest.approx(TRUE_HOST_US, rel=1e-3)
    assert _param(res, "matmul_bf16").value == pytest.approx(TRUE_MATMUL, rel=1e-3)
    assert max(abs(r.residual) for r in res.rows) < 1e-5


def test_one_host_bound_run_fits_the_host_time_alone(catalog, truth, tmp_path) -> None:
    """A single host-bound MoE run measures the host time and nothing else: its micro-batches run at the
    host's pace, so the GEMM efficiencies and overheads do not move its step (they are reported as such,
    not as crowded out by the number of runs), and the one parameter it does move is fitted exactly."""
    from mi400plan.api.calibrate import calibrate

    run = MOE_RUNS[1]
    res = calibrate(catalog, [str(write_runs(tmp_path / "one_moe.toml", [run], [true_step(truth, run)]))])
    assert _param(res, "expert_host_us").value == pytest.approx(TRUE_HOST_US, rel=1e-4)
    for key in ("matmul_bf16", "gemm_overhead_us"):
        p = _param(res, key)
        assert p.value is None and "move by less than" in p.note, key
    assert abs(res.rows[0].residual) < 1e-6


def test_tflops_per_gpu_is_the_same_measurement(catalog, truth, tmp_path) -> None:
    """A run given as TFLOP/s per GPU (model FLOPs, the MFU convention) calibrates like its step time.
    Llama-3.1 8B model FLOPs per token at sequence s (PaLM appendix B's 6 N + 12 L H Q T, causal
    mask not halved): N = matmul weights = 8,030,261,248 parameters - 128,256 x 4,096 embedding rows
    (a lookup, no FLOPs) - 65 x 4,096 norm weights (2 per layer + the final norm, elementwise)."""
    from mi400plan.api.calibrate import calibrate

    run = RUNS[0]
    n_params, layers, hidden, s = 8_030_261_248 - 128_256 * 4096 - 65 * 4096, 32, 4096, run["seq_len"]
    flops_per_token = 6 * n_params + 12 * layers * hidden * s
    step = true_step(truth, run)
    tflops = flops_per_token * run["global_batch"] * s / (8 * step) / 1e12
    csv = tmp_path / "runs.csv"
    csv.write_text("model,sku,tp,pp,dp,micro_batch,seq_len,global_batch,tflops_per_gpu\n"
                   f"llama3.1-8b,{SKU},1,1,8,1,8192,64,{tflops!r}\n", encoding="utf-8")
    res = calibrate(catalog, [str(csv)])
    assert res.rows[0].measured_s == pytest.approx(step, rel=1e-3)
    same = calibrate(catalog, [str(write_runs(tmp_path / "step.toml", [run], [step]))])
    assert _param(res, "matmul_bf16").value == pytest.approx(_param(same, "matmul_bf16").value, rel=1e-3)


def test_one_run_fits_the_first_parameter_and_says_the_rest_is_not_identified(catalog, truth, tmp_path) -> None:
    from mi400plan.api.calibrate import calibrate

    run = RUNS[2]
    res = calibrate(catalog, [str(write_runs(tmp_path / "one.toml", [run], [true_step(truth, run)]))])
    mm, ovh = _param(res, "matmul_bf16"), _param(res, "gemm_overhead_us")
    assert mm.value is not None and abs(res.rows[0].residual) < 1e-6
    assert ovh.value is None and "not identified" in ovh.note and "1 run" in ovh.note
    assert mm.std_error is None  # no more points than parameters


def test_parameter_list_covers_the_efficiency_profile() -> None:
    """Every ``[efficiency]`` key is fitted by calibrate or listed as not fitted, with a reason: a new
    efficiency parameter of the step-time model has to be classified in one place."""
    from mi400plan.calibrate import ACCELERATOR_PARAMS, NOT_FITTED
    from mi400plan.specs.efficiency import TRAIN_PRECISIONS, Efficiency

    fitted = {p.for_precision(x).key for p in ACCELERATOR_PARAMS for x in TRAIN_PRECISIONS}
    assert fitted | set(NOT_FITTED) == set(Efficiency.model_fields)
    assert not fitted & set(NOT_FITTED)


# --- nccl-tests ----------------------------------------------------------------------------------

# 8 x H100 on one HGX board (nvlink4-hgx8: switched, 450 GB/s per GPU per direction). Times made by
# hand from alpha = 10 us per step and an effective 360 GB/s (efficiency 0.8), for the algorithm the
# model prices on a switch (direct, two steps: all-reduce 2 alpha + 2 (n-1)/n S / B):
#   8 B:  2 x 10 us = 20.00 us;  1 GiB: 20 us + 1.75 x 1,073,741,824 / 360e9 s = 5,239.58 us.
# In-place columns differ on purpose (only out-of-place is read).
ALL_REDUCE_LOG = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 16(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41230 on gpu-node-07 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41231 on gpu-node-07 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41232 on gpu-node-07 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41233 on gpu-node-07 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  41234 on gpu-node-07 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  41235 on gpu-node-07 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  41236 on gpu-node-07 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  41237 on gpu-node-07 device  7 [0xdb] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    20.00    0.00    0.00      0    21.13    0.00    0.00      0
        1024           256     float     sum      -1    20.00    0.05    0.09      0    21.40    0.05    0.08      0
       65536         16384     float     sum      -1    20.32    3.23    5.64      0    22.01    2.98    5.21      0
     1048576        262144     float     sum      -1    25.10   41.78   73.12      0    26.77   39.17   68.55      0
    16777216       4194304     float     sum      -1   101.56  165.20  289.10      0   104.90  159.94  279.89      0
gpu-node-07:41233:41233 [3] NCCL INFO comm 0x55d1 rank 3 nranks 8 - Destroy COMPLETE
    67108864      16777216     float     sum      -1   346.22  193.83  339.20      0   351.00  191.19  334.59      0
   268435456      67108864     float     sum      -1  1324.89  202.61  354.57      0  1330.12  201.81  353.17      0
  1073741824     268435456     float     sum      -1  5239.58  204.93  358.63      0  5250.00  204.52  357.92      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 170.79
#
"""

# rccl-tests style alltoall on the same 8 GPUs (same alpha and bandwidth; direct all-to-all is one
# step: alpha + (n-1)/n S / B): 1 GiB: 10 us + 0.875 x 1,073,741,824 / 360e9 s = 2,619.79 us.
ALLTOALL_LOG = """\
Collective test starting: alltoall_perf
nThread 1 nGpus 1 minBytes 1024 maxBytes 1073741824 step: 64(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  7001 on gpu-node-07 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  7002 on gpu-node-07 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  7003 on gpu-node-07 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  7004 on gpu-node-07 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  7005 on gpu-node-07 device  4 [0000:9a:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  7006 on gpu-node-07 device  5 [0000:ab:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  7007 on gpu-node-07 device  6 [0000:ba:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  7008 on gpu-node-07 device  7 [0000:db:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float    none      -1    10.00    0.10    0.09      0      N/A     N/A     N/A    N/A
     1048576        262144     float    none      -1    12.55   83.56   73.12      0      N/A     N/A     N/A    N/A
    67108864      16777216     float    none      -1   173.11  387.66  339.20      0      N/A     N/A     N/A    N/A
  1073741824     268435456     float    none      -1  2619.79  409.86  358.63      0      N/A     N/A     N/A    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 192.76
"""

ALPHA_US, EFF = 10.0, 360.0 / 450.0  # the values the logs above were made from


def test_nccl_log_parsing(tmp_path) -> None:
    from mi400plan.measurements import read_nccl_log

    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    log = read_nccl_log(p, ALL_REDUCE_LOG)
    assert (log.op, log.ranks, log.hosts) == ("all_reduce", 8, 1)
    assert [r.size_bytes for r in log.rows][:2] == [8, 1024] and len(log.rows) == 8
    assert log.rows[-1].time_s == pytest.approx(5239.58e-6)  # out-of-place, not in-place (5250.00)
    assert log.rows[-1].busbw_bytes_per_s == pytest.approx(358.63e9)
    assert log.rows[0].line == 16
    q = tmp_path / "mystery.log"  # the op from the "Collective test starting" line, not the file name
    assert read_nccl_log(q, ALLTOALL_LOG).op == "all_to_all"


def test_nccl_fit_recovers_hand_derived_alpha_and_bandwidth(catalog, tmp_path) -> None:
    from mi400plan.api.calibrate import calibrate

    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    res = calibrate(catalog, [str(p)], sku="h100")
    eff, lat = _param(res, "efficiency"), _param(res, "hop_latency_us")
    assert eff.profile == "nvlink4-hgx8"
    # two rows by hand: 2 alpha = 20.00 us; B = 1.75 x 2^30 B / (5239.58 - 20.00) us = 360.0 GB/s = 0.80 x 450
    assert lat.value == pytest.approx(20.00 / 2, rel=2e-3)
    assert eff.value == pytest.approx(1.75 * 2**30 / ((5239.58 - 20.00) * 1e-6) / 450e9, rel=1e-4)
    assert eff.value == pytest.approx(EFF, rel=1e-4)
    assert all(abs(r.residual) < 1e-3 for r in res.rows) and len(res.rows) == 8
    assert {r.algorithm for r in res.rows} == {"direct"}


def test_nccl_fit_over_two_collectives(catalog, tmp_path) -> None:
    """all-reduce and all-to-all logs of the same fabric fit one latency and one efficiency."""
    from mi400plan.api.calibrate import calibrate

    a, b = tmp_path / "all_reduce_perf.txt", tmp_path / "a2a.txt"
    a.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    b.write_text(ALLTOALL_LOG, encoding="utf-8")
    res = calibrate(catalog, [str(a), str(b)], fabric="nvlink4-hgx8")
    assert _param(res, "efficiency").value == pytest.approx(EFF, rel=1e-3)
    assert _param(res, "hop_latency_us").value == pytest.approx(ALPHA_US, rel=5e-3)
    assert {r.op for r in res.rows} == {"all_reduce", "all_to_all"} and len(res.rows) == 12


def _rows_only(sizes: tuple[int, ...]) -> str:
    """ALL_REDUCE_LOG keeping only the result lines of the given sizes."""
    keep = []
    for line in ALL_REDUCE_LOG.splitlines():
        toks = line.split()
        if toks and toks[0].isdigit() and int(toks[0]) not in sizes:
            continue
        keep.append(line)
    return "\n".join(keep) + "\n"


def test_nccl_rows_that_do_not_measure_a_term_leave_it_unidentified(catalog, tmp_path) -> None:
    """Only 256 MiB and 1 GiB rows: the 20 us of latency is under 5 % of both (20 / 1,324.89 = 1.5 %),
    so alpha keeps the profile's 1 us; the efficiency is still fitted. Only 8 B and 1 KiB rows: the
    bandwidth term is nil, so the efficiency is kept and alpha is fitted alone."""
    from mi400plan.api.calibrate import calibrate

    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(_rows_only((268435456, 1073741824)), encoding="utf-8")
    res = calibrate(catalog, [str(p)], sku="h100")
    lat, eff = _param(res, "hop_latency_us"), _param(res, "efficiency")
    assert lat.value is None and "under 5%" in lat.note
    assert eff.value == pytest.approx(EFF, rel=0.01)
    p.write_text(_rows_only((8, 1024)), encoding="utf-8")
    res = calibrate(catalog, [str(p)], sku="h100")
    lat, eff = _param(res, "hop_latency_us"), _param(res, "efficiency")
    assert eff.value is None and "large messages" in eff.note
    assert lat.value == pytest.approx(ALPHA_US, rel=1e-3)


def test_nccl_log_with_uneven_hosts_is_refused(catalog, tmp_path) -> None:
    from mi400plan.api.calibrate import calibrate
    from mi400plan.errors import ProfileError

    text = ALL_REDUCE_LOG.replace("on gpu-node-07 device  4", "on gpu-node-08 device  4")  # 7 + 1 ranks
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(ProfileError, match="8 ranks on 2 hosts do not fill"):
        calibrate(catalog, [str(p)], sku="h100")


def test_two_node_log_fits_the_scale_out_fabric(catalog, tmp_path) -> None:
    """16 ranks on 2 hosts of 8 H100: rows made with the two-tier model (``comms.placed_collective``)
    at a known scale-out efficiency and latency, the NVLink tier at its profile values; the fit over
    the two-tier model recovers them."""
    from dataclasses import replace

    import numpy as np

    from mi400plan import comms
    from mi400plan.api.calibrate import calibrate

    up = comms.TierParams.from_fabric(catalog.get("fabrics", "nvlink4-hgx8").spec)
    out = replace(comms.TierParams.from_fabric(catalog.get("fabrics", "ib-ndr-400").spec), efficiency=0.6,
                  latency=5e-6)
    ranks = "".join(f"#  Rank {r:2d} Group  0 Pid  {500 + r} on node-{r // 8:02d} device  {r % 8} [0x{r:02x}] "
                    "NVIDIA H100 80GB HBM3\n" for r in range(16))
    rows = ""
    for size in (8, 4096, 262144, 16777216, 1073741824):
        t = float(comms.placed_collective("all_reduce", np.array([float(size)]), 16, 1, up, out).time[0])
        rows += f"{size:>12} {size // 4:>13}  float  sum  -1  {t * 1e6:9.2f}  0.00  0.00  0  {t * 1e6:9.2f}  0.00  0.00  0\n"
    head = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(f"# nThread 1 nGpus 8\n#\n# Using devices\n{ranks}#\n{head}{rows}", encoding="utf-8")
    res = calibrate(catalog, [str(p)], sku="h100")
    eff, lat = _param(res, "efficiency"), _param(res, "hop_latency_us")
    assert eff.profile == "ib-ndr-400"
    assert eff.value == pytest.approx(0.6, rel=2e-3) and lat.value == pytest.approx(5.0, rel=2e-2)
    assert all("+" in r.algorithm for r in res.rows)  # in-host + cross-host algorithms
    with pytest.raises(Exception, match="give --sku"):
        calibrate(catalog, [str(p)], fabric="ib-ndr-400")


# --- CLI -----------------------------------------------------------------------------------------


def test_cli_json_envelope(cli, runs_file) -> None:
    r = cli(["calibrate", str(runs_file), "--json"])
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["command"] == "calibrate" and env["status"] == "ok" and env["schema_version"] == 1
    data = env["data"]
    assert {"inputs", "params", "rows", "summaries", "saved", "warnings"} <= set(data)
    row = data["rows"][0]
    assert {"source", "kind", "measured_s", "model_s", "model_before_s", "residual", "residual_before"} <= set(row)
    assert row["source"] == f"{runs_file}:3" and row["kind"] == "training"


def test_cli_table_fits_80_columns(cli, runs_file, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    r = cli(["calibrate", str(runs_file), str(p), "--sku", "h100"])
    assert r.exit_code == 0, r.output
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    for text in ("matmul_bf16", "gemm_overhead_us", "nvlink4-hgx8", "hop_latency_us", "residual"):
        assert text in r.stdout


def test_cli_save_then_other_commands_read_it(cli, runs_file, tmp_path) -> None:
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    out = tmp_path / "prof"
    r = cli(["calibrate", str(runs_file), "--save", str(out), "--json"])
    assert r.exit_code == 0, r.output
    saved = json.loads(r.stdout)["data"]["saved"]
    assert saved == [str(out / "accelerators" / f"{SKU}.toml")]
    import tomllib

    doc = tomllib.loads(Path(saved[0]).read_text(encoding="utf-8"))
    mm = doc["efficiency"]["matmul_bf16"]
    assert mm["status"] == "measured" and mm["nominal"] == pytest.approx(TRUE_MATMUL, rel=1e-4)
    src = doc["sources"][mm["source"][0]]
    assert src["title"] == "calibrate from runs.toml" and src["url"] == str(runs_file.resolve())
    assert doc["efficiency"]["hbm_bandwidth"]["status"] == "assumed"  # not fitted: kept as it was
    sw = cli(["sweep", "llama3.1-8b", "--sku", SKU, "--gpus", "8", "--top", "1", "--no-ranges",
              "--profiles", str(out), "--json"])
    assert sw.exit_code == 0, sw.output
    eff = json.loads(sw.stdout)["data"]["efficiencies"][0]
    assert eff["matmul"] == pytest.approx(TRUE_MATMUL, rel=1e-4) and eff["matmul_status"] == "measured"
    # a fabric overlay, read by comm
    r = cli(["calibrate", str(p), "--sku", "h100", "--save", str(out), "--json"])
    assert r.exit_code == 0, r.output
    cm = cli(["comm", "all-reduce", "--size", "1GiB", "--group", "8", "--fabric", "nvlink4-hgx8",
              "--profiles", str(out), "--json"])
    tier = json.loads(cm.stdout)["data"]["systems"][0]["scale_up"]
    assert tier["efficiency"] == pytest.approx(EFF, rel=1e-4)
    assert tier["latency_s"] == pytest.approx(ALPHA_US * 1e-6, rel=2e-3)


@pytest.mark.slow  # three calibration fits: 3-6 s (saving once stays quick below)
def test_cli_save_never_overwrites_without_force(cli, runs_file, tmp_path) -> None:
    out = tmp_path / "prof"
    assert cli(["calibrate", str(runs_file), "--save", str(out)]).exit_code == 0
    target = out / "accelerators" / f"{SKU}.toml"
    before = target.read_text(encoding="utf-8")
    r = cli(["calibrate", str(runs_file), "--save", str(out)])
    assert r.exit_code == 2 and "already exists" in r.output and "--force" in r.output
    assert target.read_text(encoding="utf-8") == before
    r = cli(["calibrate", str(runs_file), "--save", str(out), "--force"])
    assert r.exit_code == 0, r.output
    # the re-calibration reads the saved profile (none given with --profiles: the bundled one) and
    # adds its own source entry
    assert "CAL1" in target.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "name, text, where",
    [
        ("bad.toml", "[[run]]\nmodel = \"llama3.1-8b\"\nsku = \n", "bad.toml:3"),
        ("typo.toml", f'[[run]]\nmodel = "llama3.1-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n'
                      "step_time_s = 1.0\nmicrobatch = 2\n", "typo.toml:7 [microbatch]"),
        ("none.toml", f'[[run]]\nmodel = "llama3.1-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n',
         "none.toml:1"),
        ("neg.csv", f"model,sku,seq_len,global_batch,step_time_s\nllama3.1-8b,{SKU},4096,8,-1\n",
         "neg.csv:2 [step_time_s]"),
        ("fp8.csv", "model,sku,seq_len,global_batch,precision,step_time_s\nllama3.1-8b,a100,4096,8,fp8,1.0\n",
         "fp8.csv:2"),
        ("huge.csv", f"model,sku,seq_len,global_batch,dp,step_time_s\nllama3.1-8b,{SKU},4096,8,{'9' * 400},1.0\n",
         "huge.csv:2 [dp]"),
        ("short.csv", f"model,sku,seq_len,global_batch,step_time_s\nllama3.1-8b,{SKU},4096\n", "short.csv:2"),
        ("layout.toml", f'[[run]]\nmodel = "llama3.1-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n'
                        "tp = 3\nstep_time_s = 1.0\n", "layout.toml:1"),
        ("empty.log", "nothing here\n", "empty.log"),
        ("one.log", "#  Rank  0 Group  0 Pid  1 on h device  0 [0x1] GPU\n", "one.log"),
        ("model.toml", f'[[run]]\nmodel = "llama9-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n'
                       "step_time_s = 1.0\n", "model.toml:1"),
        ("ep.toml", f'[[run]]\nmodel = "llama3.1-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n'
                    "dp = 2\nep = 2\nstep_time_s = 1.0\n", "ep.toml:1"),
        ("gpus.csv", f"model,sku,seq_len,global_batch,tp,dp,gpus,step_time_s\nllama3.1-8b,{SKU},4096,8,2,2,8,1.0\n",
         "gpus.csv:2"),
        ("mods.csv", f"model,sku,seq_len,global_batch,recompute_modules,step_time_s\n"
                     f"llama3.1-8b,{SKU},4096,8,mlp,1.0\n", "mods.csv:2"),
        ("modname.csv", f"model,sku,seq_len,global_batch,recompute,recompute_modules,step_time_s\n"
                        f"llama3.1-8b,{SKU},4096,8,selective,mlp+attn,1.0\n", "modname.csv:2 [recompute_modules]"),
        ("modnum.toml", f'[[run]]\nmodel = "llama3.1-8b"\nsku = "{SKU}"\nseq_len = 4096\nglobal_batch = 8\n'
                        'recompute = "selective"\nrecompute_modules = 3\nstep_time_s = 1.0\n',
         "modnum.toml:7 [recompute_modules]"),
        ("rclayers.csv", f"model,sku,seq_len,global_batch,recompute_layers,step_time_s\n"
                         f"llama3.1-8b,{SKU},4096,8,4,1.0\n", "rclayers.csv:2"),
        ("all_reduce_perf.txt", ALL_REDUCE_LOG.replace("  5239.58", "  -5239.58"), "all_reduce_perf.txt:24 [time]"),
        ("all_gather_perf.txt", ALL_REDUCE_LOG.replace("  1073741824", "9" * 400), "all_gather_perf.txt:24 [size]"),
    ],
)
def test_cli_bad_files_exit_3_naming_file_line_field(cli, tmp_path, name, text, where) -> None:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    r = cli(["calibrate", str(p), "--sku", "h100"])
    assert r.exit_code == 3, r.output
    assert where in r.output.replace(str(tmp_path) + "/", "")
    assert "Traceback" not in r.output
    j = cli(["calibrate", str(p), "--sku", "h100", "--json"])
    env = json.loads(j.stdout)
    assert j.exit_code == 3 and env["status"] == "error" and env["errors"][0]["code"] == "bad_profile"


def test_runs_carry_the_recipe_switches_of_fit_and_sweep(catalog, tmp_path) -> None:
    """A run with selective recomputation of named modules, the fsdp recipe and a capacity factor is read
    as ``fit`` would read those flags; the recomputed forward makes the same measured step time imply a
    faster GEMM (a higher fitted ceiling) than the same run without the modules."""
    from mi400plan.api.calibrate import calibrate
    from mi400plan.measurements import read_runs

    head = "model,sku,seq_len,global_batch,dp,micro_batch,zero,recompute,recompute_modules,recipe,step_time_s\n"
    row = "llama3.1-8b,h100,4096,64,8,1,3,selective,{mods},fsdp,8.0\n"
    (tmp_path / "a.csv").write_text(head + row.format(mods="core_attn"), encoding="utf-8")
    (tmp_path / "b.csv").write_text(head + row.format(mods="core_attn+mlp+layernorm"), encoding="utf-8")
    run = read_runs(tmp_path / "b.csv", (tmp_path / "b.csv").read_text())[0].run
    assert run.recompute_modules == ("core_attn", "mlp", "layernorm") and run.recipe == "fsdp"
    a = _param(calibrate(catalog, [str(tmp_path / "a.csv")]), "matmul_bf16").value
    b = _param(calibrate(catalog, [str(tmp_path / "b.csv")]), "matmul_bf16").value
    assert b > a


def test_rate_above_peak_is_flagged(catalog, tmp_path) -> None:
    from mi400plan.api.calibrate import calibrate

    run = RUNS[0]
    res = calibrate(catalog, [str(write_runs(tmp_path / "fast.toml", [run], [0.2]))])
    assert any("above mi355x's dense bf16 peak" in w for w in res.warnings)


def test_cli_usage_errors_exit_2(cli, tmp_path, runs_file) -> None:
    p = tmp_path / "all_reduce_perf.txt"
    p.write_text(ALL_REDUCE_LOG, encoding="utf-8")
    r = cli(["calibrate", str(p)])  # which fabric?
    assert r.exit_code == 2 and "--sku" in r.output
    r = cli(["calibrate", str(p), "--sku", "h100", "--algo", "butterfly"])
    assert r.exit_code == 2 and "--algo" in r.output
    assert cli(["calibrate", str(tmp_path / "missing.toml")]).exit_code == 3


def test_published_uneven_pipeline_layouts_are_calibrated_as_sweep_prices_them(catalog, tmp_path) -> None:
    """Qwen3-235B-A22B's 94 layers on PP 8 (NVIDIA's B200 layout: 11 layers on the first and last stage, 12
    on the others) is accepted as fit and sweep accept it, and its model step before the fit is the one
    the search gives the same layout; with ``uneven_pp = false`` the run is refused naming the rule."""
    from mi400plan.api.calibrate import calibrate
    from mi400plan.hardware import build_sku
    from mi400plan.errors import PlannerError
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, evaluate_one
    from mi400plan.specs.layout import train_recipe

    head = ('sku = "b200"\nprecision = "fp8"\nseq_len = 4096\nfp8_params = true\ncapacity_factor = 1.0\n'
            'grad_dtype = "bf16"\n')
    run = ('[[run]]\nmodel = "qwen3-235b-a22b"\nglobal_batch = 8192\ntp = 1\npp = 8\ndp = 32\nep = 8\n'
           'micro_batch = 1\nstep_time_s = 34.44\n')
    good = tmp_path / "uneven.toml"
    good.write_text(head + run, encoding="utf-8")
    res = calibrate(catalog, [str(good)])
    spec = catalog.get("models", "qwen3-235b-a22b").spec
    wl = Workload(spec, count_params(spec), train_recipe("megatron", precision="fp8", fp8_params=True,
                                                         capacity_factor=1.0, grad_dtype="bf16"), 4096, 8192)
    layout = dict(tp=1, pp=8, vpp=1, cp=1, ep=8, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    want = evaluate_one(layout, wl, build_sku(catalog, "b200", "fp8").hw, 256, SearchOptions())["step"]
    assert 94 % 8 != 0
    (row,) = [r for r in res.rows if r.kind == "training"]
    assert row.model_before_s == pytest.approx(want, rel=1e-9)
    bad = tmp_path / "even.toml"
    bad.write_text(head + "uneven_pp = false\n" + run, encoding="utf-8")
    with pytest.raises(PlannerError, match="pp-layers"):
        calibrate(catalog, [str(bad)])
