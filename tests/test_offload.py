"""Activation offloading to host memory (``--offload-layers N``, Megatron-Core ``--cpu-offloading``).

What the planner models (``specs.layout.OFFLOAD_IN_FLIGHT``, from Transformer Engine's
``cpu_offload.py`` and Megatron-Core's defaults): the saved activations of the first ``N`` layers of
each model chunk leave HBM for pinned host memory, at most ``layers per chunk - 1`` of them, and one
offloaded layer (the one being copied) stays in HBM per stage. Each copy goes over the host link
behind one layer's forward (device-to-host) or backward (host-to-device); only the excess is exposed.

Every expected number below is written out by hand from the model's shape, not read from the tool.
"""

from __future__ import annotations

import json

import pytest

GiB = 2**30
MiB = 2**20


def _memory(catalog, name: str, **kw):
    from mi400plan.memory import train_memory
    from mi400plan.params import count_params
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", name).spec
    n = kw.pop("offload_layers", 0)
    return train_memory(spec, count_params(spec), train_recipe(offload_layers=n), **kw)


def test_bytes_offloaded_for_llama_8b_under_full_recompute(catalog) -> None:
    """Llama 3.1 8B (hidden 4,096, 32 layers), TP 1, one 4,096-token sequence, full recompute.

    Under full recompute a layer saves only its input: 2 B x 4,096 = 8,192 B per token, so one layer
    of the micro-batch is 8,192 x 4,096 = 33,554,432 B = 32 MiB.
    PP 1, one micro-batch in flight, N = 8: host = 8 x 32 MiB = 256 MiB; HBM keeps one of them, so the
    activations fall by (8 - 1) x 32 MiB = 224 MiB.
    """
    kw = dict(tp=1, pp=1, dp=1, micro_batch=1, seq_len=4096, recompute="full", num_microbatches=8)
    base = _memory(catalog, "llama3.1-8b", **kw)
    off = _memory(catalog, "llama3.1-8b", offload_layers=8, **kw)
    assert float(off.offloaded) == 256 * MiB
    assert float(base.activations - off.activations) == 224 * MiB
    assert float(base.need - off.need) == 224 * MiB  # the total moves by 224 MiB x 1.03 with fragmentation
    assert float(base.offloaded) == 0.0


def test_bytes_offloaded_per_stage_and_the_clamp(catalog) -> None:
    """PP 4 (8 layers a stage), 1F1B with 8 micro-batches, full recompute.

    The most loaded stage is the last: its fp32 logits, 4 B x 128,256 = 513,024 B per token, outweigh
    stage 0's 4 micro-batches x 8 layers x 8,192 B = 262,144 B per token. It holds one micro-batch:
    N = 3: host = 1 x 3 x 32 MiB = 96 MiB, HBM saving = (3 - 1) x 32 MiB = 64 MiB.
    N = 20 is clamped to a chunk's 8 layers - 1 = 7: host = 7 x 32 MiB = 224 MiB.
    """
    kw = dict(tp=1, pp=4, dp=1, micro_batch=1, seq_len=4096, recompute="full", num_microbatches=8)
    base = _memory(catalog, "llama3.1-8b", **kw)
    three = _memory(catalog, "llama3.1-8b", offload_layers=3, **kw)
    many = _memory(catalog, "llama3.1-8b", offload_layers=20, **kw)
    assert int(base.stage) == int(three.stage) == int(many.stage) == 3
    assert float(three.offloaded) == 96 * MiB
    assert float(base.activations - three.activations) == 64 * MiB
    assert float(many.offloaded) == 224 * MiB


def test_exposed_copy_time_by_hand() -> None:
    """10 offloaded layers of 1.28 GB each over PCIe 5.0 x16 (64 GB/s a direction): x = 20 ms a copy.

    Layer forward 15 ms (backward 30 ms): device-to-host exposed 20 - 15 = 5 ms, host-to-device
    hidden (20 < 30): 10 x 5 ms = 50 ms. Forward 8 ms: (20 - 8) + (20 - 16) = 16 ms a layer, 160 ms.
    Over NVLink-C2C's 225 GB/s share: x = 1.28 / 225 s = 5.7 ms < 15 ms, nothing exposed.
    """
    from mi400plan.search import offload_seconds

    assert offload_seconds(10, 1.28e9, 15e-3, 64e9) == pytest.approx(50e-3, rel=1e-12)
    assert offload_seconds(10, 1.28e9, 8e-3, 64e9) == pytest.approx(160e-3, rel=1e-12)
    assert offload_seconds(10, 1.28e9, 15e-3, 225e9) == 0.0
    assert offload_seconds(0, 1.28e9, 1e-3, 64e9) == 0.0


def _fit(cli, *extra: str) -> dict:
    args = ["fit", "llama3.1-70b", "--sku", "gb200", "--gpus", "64", "--zero", "3", "--micro-batch", "2",
            "--seq", "8192", "--global-batch", "128", "--precision", "fp8", "--grad-dtype", "bf16", "--json", *extra]
    result = cli(args)
    assert result.exit_code in (0, 4), result.output
    return json.loads(result.stdout)["data"]["rows"][0]


PER_LAYER = 221_440 * 16_384  # bytes of one layer's saved activations for one micro-batch (see below)


def test_published_gb200_fp8_llama3_70b_layout_fits_with_40_layers_offloaded(cli) -> None:
    """NVIDIA Megatron-Bridge ``LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS`` (scripts/performance/configs/
    llama/llama3_workload_base_configs.py, 2025): 64 GB200 GPUs, global batch 128, micro-batch 2,
    sequence 8,192, Megatron FSDP (ZeRO-3), TP = PP = CP = 1, FP8, ``cpu_offloading_num_layers`` 40,
    ``grad_reduce_in_fp32 = False`` (bf16 gradient buffer, as in every Megatron-Bridge performance recipe).

    One layer's saved activations per token (TP 1, flash attention, FP8 GEMM inputs at 1 B):
    norm inputs 2 x 2 B x 8,192 = 32,768; QKV and FFN inputs 2 x 1 B x 8,192 = 16,384;
    Q 2 B x 8,192 = 16,384; K, V 2 B x 8 heads x 256 = 4,096; output-projection input 1 B x 8,192 =
    8,192; SwiGLU gate and up 2 B x 2 x 28,672 = 114,688; down-projection input 1 B x 28,672 = 28,672;
    log-sum-exp 4 B x 64 heads = 256. Sum 221,440 B, x 16,384 tokens (2 x 8,192) = 3,628,072,960 B
    (3.38 GiB) a layer; one micro-batch in flight (PP 1).

    Without offloading the 80 layers hold 80 x 3.38 = 270.3 GiB of activations on a 186 GiB GPU:
    it cannot fit whatever the reserve. With 40 offloaded, 40 x 3,628,072,960 = 145,122,918,400 B
    (135.2 GiB) go to host memory and 39 of those layers leave HBM (one stays in flight): the
    activations fall by 39 x 3,628,072,960 = 141,494,845,440 B (131.8 GiB).

    Capacity: 186 GiB = 199,715,979,264 B. With the runtime reserve's fixed 2 GiB only (no
    fragmentation share) the layout fits with 40 layers offloaded and does not without. With the
    planner's default reserve (context + communicator buffers, 1.0 GiB, and 3 % of the allocated bytes
    for fragmentation) and the default FP8 weights (bf16 working copy + row-wise + transposed FP8
    casts, 4 B a GEMM weight) it fits too, with 2.6 % of HBM to spare.

    The recipe's weights, as its precision preset and FSDP overrides set them (Megatron-Bridge
    v0.2.0: ``get_precision_config("fp8_cs")`` = ``bf16_with_fp8_current_scaling_mixed``, which sets
    ``fp8_param_gather = True``; ``set_megatron_fsdp_overrides``: ``keep_fp8_transpose_cache =
    False``), are ``--fp8-params --fp8-weight-copies 1``: 1 B a block GEMM weight, 2 B the rest.
    Block GEMM weights a layer: QKV 8,192 x 10,240 + output 8,192^2 + SwiGLU 3 x 8,192 x 28,672 =
    855,638,016; 80 layers 68,451,041,280. The rest: embedding and head 2 x 128,256 x 8,192 =
    2,101,346,304, norms 80 x 2 x 8,192 + 8,192 = 1,318,912; 2,102,665,216.
    ZeRO-3 over 64: 68,451,041,280 x 1 / 64 + 2,102,665,216 x 2 / 64 = 1,069,547,520 + 65,708,288 =
    1,135,255,808 B, plus two gathered layers 2 x (855,638,016 x 1 + 16,384 x 2) = 1,711,341,568 B:
    weights 2,846,597,376 B (11,189,068,032 B with the default 4 B a GEMM weight). The layout fits at
    the default reserve by 8,186,479,821 B (4.1 % of HBM).
    """
    none = _fit(cli, "--reserve", "2GiB")
    off = _fit(cli, "--reserve", "2GiB", "--offload-layers", "40")
    assert not none["fits"] and off["fits"]
    assert off["host_offload_bytes"] == 40 * PER_LAYER == 145_122_918_400
    assert none["host_offload_bytes"] is None
    drop = none["memory_bytes"]["activations"] - off["memory_bytes"]["activations"]
    assert drop == 39 * PER_LAYER
    assert none["memory_bytes"]["activations"] > 80 * PER_LAYER > 186 * GiB
    default = _fit(cli, "--offload-layers", "40")
    assert default["verdict"] == "fits" and 0 < default["headroom_pct"] < 5
    published = _fit(cli, "--offload-layers", "40", "--fp8-params", "--fp8-weight-copies", "1")
    assert published["memory_bytes"]["weights"] == 1_135_255_808 + 1_711_341_568 == 2_846_597_376
    assert default["memory_bytes"]["weights"] == 68_451_041_280 * 4 // 64 + 65_708_288 + 2 * (
        855_638_016 * 4 + 16_384 * 2) == 11_189_068_032
    assert published["fits"]
    # the weights drop by 8,342,470,656 B, and the fragmentation share (3 % of allocated) with them
    saved = 11_189_068_032 - 2_846_597_376
    assert published["headroom_bytes"] == pytest.approx(default["headroom_bytes"] + saved * 1.03, abs=2)


def test_too_many_layers_and_a_sku_without_host_link_are_refused(cli) -> None:
    result = cli(["fit", "llama3.1-70b", "--sku", "gb200", "--gpus", "64", "--zero", "3", "--offload-layers", "80"])
    assert result.exit_code != 0
    assert "at most 79" in result.output
    result = cli(["fit", "llama3.1-70b", "--sku", "gb200", "--tp", "8", "--pp", "4", "--offload-layers", "20"])
    # Megatron-Core has no CPU offloading with pipeline parallelism (mi400plan.offload)
    assert result.exit_code == 2 and "pipeline parallelism" in result.output
    result = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--offload-layers", "-1"])
    assert result.exit_code != 0
    result = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--mode", "infer", "--offload-layers", "2"])
    assert result.exit_code != 0 and "--offload-layers" in result.output
    result = cli(["sweep", "llama3.1-8b", "--sku", "tpu-v6e", "--gpus", "8", "--offload-layers", "2", "--no-ranges"])
    assert result.exit_code != 0 and "host_link_gb_per_s" in result.output


def test_sweep_reports_offload_and_agrees_with_fit(cli) -> None:
    """sweep pinned to the published layout: the same host bytes as fit, and the exposed copy time in
    the step. PP 1: the step grows by exactly the offload term."""
    pins = ["--tp", "1", "--pp", "1", "--cp", "1", "--zero", "3", "--micro-batch", "2", "--recompute", "none",
            "--reserve", "2GiB", "--top", "1", "--no-ranges", "--json"]
    base = ["sweep", "llama3.1-70b", "--sku", "gb200", "--gpus", "64", "--seq", "8192", "--global-batch", "128",
            "--precision", "fp8", *pins]
    rows = json.loads(cli([*base, "--offload-layers", "40"]).stdout)["data"]["rows"]
    assert rows and rows[0]["memory_bytes"]["offloaded"] == 40 * PER_LAYER
    t = rows[0]["time_s"]
    assert t["offload"] >= 0.0
    assert rows[0]["step_time_s"] == pytest.approx(sum(t.values()), rel=1e-9)
    assert json.loads(cli(base).stdout)["data"]["rows"] == []  # does not fit without offloading


def test_a_saved_plan_keeps_the_offloaded_layers(cli, tmp_path) -> None:
    """sweep --save writes offload_layers into the plan's [recipe]; fit --plan reads it back."""
    plan = tmp_path / "plan.toml"
    args = ["sweep", "llama3.1-70b", "--sku", "gb200", "--gpus", "64", "--seq", "8192", "--global-batch", "128",
            "--precision", "fp8", "--tp", "1", "--pp", "1", "--cp", "1", "--zero", "3", "--micro-batch", "2",
            "--recompute", "none", "--reserve", "2GiB", "--offload-layers", "40", "--top", "1", "--no-ranges",
            "--save", str(plan)]
    assert cli(args).exit_code == 0
    assert "offload_layers = 40" in plan.read_text()
    row = json.loads(cli(["fit", "llama3.1-70b", "--sku", "gb200", "--plan", str(plan), "--json"]).stdout)
    assert row["data"]["rows"][0]["host_offload_bytes"] == 40 * PER_LAYER


def test_a_calibration_run_takes_offload_layers() -> None:
    from mi400plan.measurements import MeasuredRun

    run = MeasuredRun(model="llama3.1-70b", sku="gb200", seq_len=8192, global_batch=128, dp=64, zero=3,
                      micro_batch=2, offload_layers=40, step_time_s=3.5)
    assert run.offload_layers == 40
    with pytest.raises(ValueError):
        MeasuredRun(model="m", sku="s", seq_len=8, global_batch=8, offload_layers=-1, step_time_s=1.0)


@pytest.mark.parametrize(("sku", "precision", "micro_batch", "layers"), [
    ("gb300", "fp8", 2, 20), ("gb300", "bf16", 2, 30), ("gb200", "bf16", 1, 20), ("b200", "fp8", 1, 5),
])
def test_published_offloading_layouts_fit_with_their_layers(cli, sku, precision, micro_batch, layers) -> None:
    """Validation points, not calibrated on: the other Llama 3 70B layouts of NVIDIA's Megatron-Bridge
    ``llama3_workload_base_configs.py`` (2025) that offload (64 GPUs, global batch 128, sequence 8,192,
    Megatron FSDP, TP = PP = CP = 1, bf16 gradient buffer; ``cpu_offloading_num_layers`` as given) fit
    with the default runtime reserve once their layers are offloaded, and the GB200 and GB300 ones do
    not without. The B200 one (5 layers) fits without offloading too, by 0.45 % of HBM: its offloaded
    layers are margin the model does not need."""
    def fit(n: int) -> dict:
        args = ["fit", "llama3.1-70b", "--sku", sku, "--gpus", "64", "--zero", "3", "--micro-batch", str(micro_batch),
                "--seq", "8192", "--global-batch", "128", "--precision", precision, "--offload-layers", str(n),
                "--grad-dtype", "bf16", "--json"]
        return json.loads(cli(args).stdout)["data"]["rows"][0]

    assert fit(layers)["fits"]
    assert fit(0)["fits"] == (sku == "b200")
