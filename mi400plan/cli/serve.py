"""``mi400plan serve``: inference throughput, latency, concurrency and cost per token over layouts."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mi400plan.cli.cost import LoadOpt, PriceOpt, PueOpt, SiteOpt
from mi400plan.cli.common import WidthOpt
from mi400plan.cli.common import (
    AsciiOpt, CheckOpt, ForceOpt, FormatOpt, JsonOpt, PlotOpt, ProfilesOpt, WideOpt, app, catalog, pick_format, run,
)
from mi400plan.cli.counts import count, sku_list
from mi400plan.cli.sweep import _ints


@app.command("serve")
def cmd(
    model: Annotated[str, typer.Argument(help="Model profile name or alias (llama3-70b, deepseek-r1), or a TOML path.")],
    sku: Annotated[list[str], typer.Option("--sku", callback=sku_list, help="Accelerator profile; repeat or comma-separate (mi355x,b200) to compare SKUs; 'all' compares every SKU (one lacking a value is left out, with a warning).")],
    gpus: Annotated[Optional[int], typer.Option("--gpus", parser=count, metavar="N", help="GPUs available (default 8: one node); a replica's TP x PP divides it.")] = None,
    racks: Annotated[Optional[int], typer.Option("--racks", parser=count, metavar="N", help="Fleet of this many racks of each SKU's rack profile: its tokens/s and users at the SLA, or with --scenario at the scenario's answer (replicas from --gpus).")] = None,
    demand: Annotated[Optional[str], typer.Option("--demand", metavar="RATE", help="Size a fleet of each SKU to carry this rate: 2000req/s or 1.5Mtok/s (output tokens/s): ceil(demand / per-replica rate) replicas, their GPUs and racks. With --scenario the per-replica rate is the scenario's answer.")] = None,
    input_len: Annotated[Optional[str], typer.Option("--input-len", help="Prompt tokens: 1024 (1k = 1,024), uniform:A-B, or a CSV histogram file of length,count rows (default 1k).")] = None,
    output_len: Annotated[Optional[str], typer.Option("--output-len", help="Output tokens per request, as --input-len (default 1k; with --scenario on an MLPerf benchmark model, the benchmark's published lengths).")] = None,
    precision: Annotated[Optional[str], typer.Option("--precision", help="Weights: bf16|fp8|mxfp8|mxfp6|mxfp4|nvfp4|int4 (default fp8).")] = None,
    kv_dtype: Annotated[Optional[str], typer.Option("--kv-dtype", help="KV cache: bf16|fp8 (default fp8 with 8-bit or smaller weights).")] = None,
    concurrency: Annotated[Optional[str], typer.Option("--concurrency", help="Sequences in flight per replica: 64, 1,4,16 or 1..1024 (default).")] = None,
    tpot: Annotated[Optional[str], typer.Option("--tpot", help="SLA: time per output token at most this (50ms).")] = None,
    ttft: Annotated[Optional[str], typer.Option("--ttft", help="SLA: time to first token at most this (2s).")] = None,
    interactivity: Annotated[Optional[str], typer.Option("--interactivity", help="SLA: tokens/s per user at least this (30tok/s).")] = None,
    disagg: Annotated[bool, typer.Option("--disagg", help="Disaggregated prefill and decode pools (KV over scale-out).")] = False,
    gpu_hour_cost: Annotated[Optional[float], typer.Option("--gpu-hour-cost", help="US dollars per GPU-hour, for $ per million tokens (default: the cost model's all-in figure).")] = None,
    site: SiteOpt = None,
    electricity_price: PriceOpt = None,
    pue: PueOpt = None,
    gpu_load: LoadOpt = None,
    rank_by: Annotated[Optional[str], typer.Option(
        "--rank-by", metavar="tok-per-gpu|cost|ttft",
        help="Order of the layouts under an SLA and the leader of the SKU comparison: output tokens/s/GPU, $ per "
        "million output tokens, or time to first token. Default: cost when every SKU has a price per GPU-hour "
        "(the cost model's or --gpu-hour-cost), else tok-per-gpu.")] = None,
    top: Annotated[int, typer.Option("--top", parser=count, metavar="N", help="Points to list per SKU.")] = 8,
    tp: Annotated[Optional[str], typer.Option("--tp", help="Only these TP sizes (comma-separated).")] = None,
    pp: Annotated[Optional[str], typer.Option("--pp", help="Only these PP sizes.")] = None,
    ep: Annotated[Optional[str], typer.Option("--ep", help="Only these EP sizes (MoE).")] = None,
    dp_attention: Annotated[Optional[bool], typer.Option("--dp-attention/--no-dp-attention", help="Only layouts with (or without) attention data parallelism (MoE).")] = None,
    spec_tokens: Annotated[int, typer.Option("--spec-tokens", parser=count, metavar="N", help="Speculative decoding / MTP: draft tokens verified per step.")] = 0,
    spec_acceptance: Annotated[float, typer.Option("--spec-acceptance", help="Probability that a draft token is accepted.")] = 0.0,
    reserve: Annotated[Optional[str], typer.Option("--reserve", help="Runtime reserve, e.g. '2GiB+5%' (default); vLLM's gpu-memory-utilization 0.9 is '10%'.")] = None,
    matmul_efficiency: Annotated[Optional[float], typer.Option("--matmul-efficiency", help="Override the achievable matmul fraction of peak.")] = None,
    hbm_efficiency: Annotated[Optional[float], typer.Option("--hbm-efficiency", help="Override the achievable HBM bandwidth fraction.")] = None,
    scenario: Annotated[Optional[str], typer.Option("--scenario", help="MLPerf Inference scenario, simulated per request: offline | server | interactive | single-stream.")] = None,
    ttft_p99: Annotated[Optional[str], typer.Option("--ttft-p99", help="server/interactive: 99th-percentile TTFT limit (2s; default the MLPerf benchmark's).")] = None,
    tpot_p99: Annotated[Optional[str], typer.Option("--tpot-p99", help="server/interactive: 99th-percentile TPOT limit (50ms).")] = None,
    max_batched_tokens: Annotated[Optional[int], typer.Option("--max-batched-tokens", parser=count, metavar="N", help="--scenario: tokens per scheduler iteration (default vLLM's for the GPU: 8192, or 2048 under 70 GiB and on A100).")] = None,
    max_seqs: Annotated[Optional[int], typer.Option("--max-seqs", parser=count, metavar="N", help="--scenario: sequences in flight per replica (default vLLM's for the GPU: 1024, or 256 under 70 GiB and on A100).")] = None,
    stack: Annotated[Optional[str], typer.Option("--stack", help="Serving stack profile (profiles/serving: trtllm, vllm, rocm-vllm, sglang, atom): its InferenceX calibration and, with --scenario, its scheduler defaults. Default: each SKU's vendor's reference stack (trtllm on NVIDIA, rocm-vllm on AMD), printed.")] = None,
    candidates: Annotated[Optional[int], typer.Option("--candidates", parser=count, metavar="N", help="--scenario: layouts simulated per SKU (default 2, at most 8).")] = None,
    no_ranges: Annotated[bool, typer.Option("--no-ranges", help="Skip the pessimistic/optimistic corners.")] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
    plot: PlotOpt = None,
    force: ForceOpt = False,
) -> None:
    """Tokens/s per GPU against tokens/s per user (the Pareto curve), TTFT, TPOT, KV-limited concurrency
    and $/Mtok for every serving layout (TP, EP, DP-attention, PP) and concurrency. With an SLA, the
    best layouts that meet it; with --check, exit 4 when no layout meets it."""
    f = pick_format(json_, fmt)
    tps, pps, eps = (_ints(v, flag) or None for v, flag in ((tp, "--tp"), (pp, "--pp"), (ep, "--ep")))

    def compute():  # noqa: ANN202
        from mi400plan.api.fleet import serve_fleet
        from mi400plan.api.serve import ServeRequest
        from mi400plan.api.serve_scenario import ScenarioRequest
        from mi400plan.cli.cost import site_overrides

        return serve_fleet(catalog(profiles), model, sku, ServeRequest(
            gpus=gpus, input_len=input_len, output_len=output_len, precision=precision,
            kv_dtype=kv_dtype, concurrency=concurrency, tpot=tpot, ttft=ttft, interactivity=interactivity,
            disagg=disagg, gpu_hour_cost=gpu_hour_cost, top=top, tp=tps, pp=pps, ep=eps, dp_attention=dp_attention,
            spec_tokens=spec_tokens, spec_acceptance=spec_acceptance, reserve=reserve,
            matmul_efficiency=matmul_efficiency, hbm_efficiency=hbm_efficiency, ranges=not no_ranges, site=site,
            cost_overrides=site_overrides(electricity_price, pue, None, None, gpu_load, None, None), rank_by=rank_by,
            scenario=ScenarioRequest(scenario, ttft_p99, tpot_p99, max_batched_tokens, max_seqs, candidates, stack),
            stack=stack,
        ), racks=racks, demand=demand)

    run("serve", f, compute, check=check, ascii=ascii_, wide=wide, plot=plot, force=force)
