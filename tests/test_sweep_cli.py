"""``mi400plan sweep`` from the command line: envelope, defaults, plan file, errors."""

from __future__ import annotations

import json
import tomllib

import pytest


def test_default_invocation_works(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x", "--gpus", "1024"])
    assert r.exit_code == 0, r.output
    assert "Best layouts: mi355x x 1,024 GPUs" in r.output
    assert "Evaluated" in r.output


def test_json_envelope(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x", "--gpus", "1024", "--json", "--tokens", "15T",
             "--gpu-hour-cost", "2.10", "--top", "3"])
    assert r.exit_code == 0, r.output
    env = json.loads(r.stdout)
    assert env["command"] == "sweep" and env["status"] == "ok"
    d = env["data"]
    assert len(d["rows"]) == 3
    row = d["rows"][0]
    for k in ("tp", "pp", "vpp", "dp", "ep", "cp", "zero", "micro_batch", "recompute"):
        assert k in row["layout"]
    assert row["sku"] == "mi355x"
    assert row["memory_bytes"]["total"] > 0
    assert abs(sum(row["time_s"].values()) - row["step_time_s"]) <= 1e-9 * row["step_time_s"]
    assert 0 < row["mfu"] <= 1
    # days = tokens / (tokens/s) / 86,400; cost = days x 24 h x GPUs x $/GPU-h
    days = 15e12 / row["tokens_per_s"] / 86400
    assert abs(row["days"] - days) <= 1e-9 * days
    assert abs(row["cost_usd"] - days * 24 * 1024 * 2.10) <= 1e-6 * row["cost_usd"]
    assert d["evaluated"] == d["valid"] + sum(d["rejected"].values())
    assert set(d["rejected"]) <= set(d["rejected_rules"])


def test_save_plan_round_trip(cli, tmp_path) -> None:
    from mi400plan.specs.layout import Layout

    plan = tmp_path / "plan.toml"
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x", "--gpus", "1024", "--json", "--save", str(plan)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    row = d["rows"][0]
    data = tomllib.loads(plan.read_text())
    assert set(data["layout"]) == set(Layout.model_fields)
    assert Layout(**data["layout"]).tp == row["layout"]["tp"]
    # the plan keeps the batch the saved row was priced at (the planned batch: see test_batch.py)
    assert row["global_batch_seqs"] == d["global_batch_seqs"] == d["batch"]["chosen"][0]["global_batch_seqs"]
    assert data["plan"] == {"model": "llama3.1-70b", "sku": "mi355x", "gpus": 1024, "seq_len": 8192,
                            "global_batch": row["global_batch_seqs"], "precision": "bf16"}


def test_sku_comparison_and_scaling(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--sku", "mi355x", "--gpus", "64..128", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert {s["sku"] for s in d["skus"]} == {"mi300x", "mi355x"}
    assert [p["gpus"] for p in d["scaling"] if p["sku"] == "mi300x"] == [64, 128]
    first = next(p for p in d["scaling"] if p["sku"] == "mi300x")
    assert first["scaling_efficiency"] == 1.0


def test_matmul_efficiency_override_scales_compute(cli) -> None:
    args = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--json", "--tp", "1", "--pp", "1",
            "--cp", "1", "--zero", "1", "--micro-batch", "1", "--recompute", "none"]
    a = json.loads(cli(args + ["--matmul-efficiency", "0.3"]).stdout)["data"]["rows"][0]
    b = json.loads(cli(args + ["--matmul-efficiency", "0.6"]).stdout)["data"]["rows"][0]
    assert abs(a["time_s"]["compute"] / b["time_s"]["compute"] - 2.0) < 1e-9


def test_errors_are_clean(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "mi999x", "--gpus", "64"])
    assert r.exit_code == 3
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x"])
    assert r.exit_code == 2 and "--gpus or --racks" in r.output
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x", "--gpus", "64", "--global-batch", "3M", "--json"])
    assert r.exit_code == 2
    assert json.loads(r.stdout)["status"] == "error"


def test_json_estimate_range_fields(cli) -> None:
    r = cli(["sweep", "llama3-70b", "--sku", "mi355x", "--sku", "mi455x", "--gpus", "1024", "--precision", "fp8",
             "--tokens", "15T", "--gpu-hour-cost", "2.10", "--top", "2", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["ranges_checked"] is True
    for row in d["rows"]:
        rg = row["range"]
        for k in ("step_time_s", "tokens_per_s", "mfu", "days", "cost_usd"):
            assert set(rg[k]) == {"nominal", "low", "high"}
        assert rg["step_time_s"]["nominal"] == row["step_time_s"]
        assert isinstance(rg["fits_low_capacity"], bool) and isinstance(rg["fits_high_capacity"], bool)
    assert [(x["sku"], x["gpus"]) for x in d["ranges"]] == [("mi355x", 1024), ("mi455x", 1024)]
    m455 = d["ranges"][1]
    # profile ranges (shared spec catalog section 3.7 and the [efficiency] planner defaults):
    # HBM 432 GiB and 23.3 TB/s (AMD, no range since 2026), FP8 matmul 0.33..0.48, Helios UALoE latency 0.5..2 us and
    # efficiency 0.70..0.93, Vulcano 800G x3 latency 2..10 us, efficiency 0.80..0.95, GEMM 2..10 us.
    p, o = m455["pessimistic"]["inputs"], m455["optimistic"]["inputs"]
    assert p["hbm_bytes"] == o["hbm_bytes"] == 432 * 2**30  # 463.9 GB
    assert p["hbm_bw_bytes_per_s"] == o["hbm_bw_bytes_per_s"] == 23.3e12
    assert (p["matmul"], o["matmul"]) == (0.33, 0.48)  # MI4xx rule: MI355X's fitted FP8 ceiling 0.468, range widened
    assert (p["scale_up_latency_s"], o["scale_up_latency_s"]) == pytest.approx((2e-6, 0.5e-6))
    assert (p["scale_up_efficiency"], o["scale_up_efficiency"]) == (0.70, 0.93)
    assert (p["scale_out_latency_s"], o["scale_out_latency_s"]) == pytest.approx((10e-6, 2e-6))
    assert (p["gemm_overhead_s"], o["gemm_overhead_s"]) == pytest.approx((10e-6, 2e-6))
    assert p["peak_flops"] == o["peak_flops"] == 20132.7e12  # FP8 20.1 PF carries no range in the profile
    assert "HBM capacity" not in m455["varied"] and "HBM bandwidth" not in m455["varied"]
    for f in d["flips"]:
        assert f["kind"] in ("best_layout", "fit", "ranking", "scaling")
        assert f["corner"] in ("pessimistic", "optimistic", "mixed")
        assert f["detail"] in d["warnings"]


def test_no_ranges_flag(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--json", "--no-ranges"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["data"]
    assert d["ranges_checked"] is False and d["ranges"] == [] and d["flips"] == []
    assert all(row["range"] is None for row in d["rows"])


def test_table_shows_ranges_and_flip_warnings(cli) -> None:
    # llama3.1-8b on 4 TPU7x (FP8): the nominal best uses more than the low end of Google's 192 GiB / 192 GB
    # conflict allows.
    r = cli(["sweep", "llama3.1-8b", "--sku", "tpu7x", "--gpus", "4", "--precision", "fp8"])
    assert r.exit_code == 0, r.output
    assert "Estimate ranges" in r.output
    flat = " ".join(r.output.split())
    assert "HBM capacity 192..206 GB (conflict)" in flat
    # 192 GiB = 206.2 GB at nominal, 192.0 GB at the low end; the training reserve has no capacity share
    assert 192 * 2**30 / 1e9 == pytest.approx(206.2, abs=0.05)
    assert "the nominal 206.2 GB HBM but not the low-end 192.0 GB (192.0 GB after" in flat
    assert "flip inside the estimate ranges" in flat


def test_per_replica_batch_counts_replicas_not_dp_ranks(catalog) -> None:
    """With EP folded over DP x CP, DP counts data-parallel ranks, not replicas.

    Replicas = GPUs / replica_gpus; per-replica batch = global tokens / replicas. For a folded MoE
    layout (fold > 1) dividing by DP would undercount it by the fold factor.
    """
    from mi400plan.api.sweep import SweepReport, sweep

    res = sweep(catalog, "mixtral-8x7b", ["mi300x"], gpus="64..128", global_batch="1024",
                seq_len=4096, report=SweepReport(top=1, ranges=False), pins={"ep": [8], "tp": [1], "cp": [1]})
    for point in res.scaling:
        row = next(r for r in res.rows if r.gpus == point.gpus)
        replicas = point.gpus / row.replica_gpus
        assert point.per_replica_batch_tokens == pytest.approx(1024 * 4096 / replicas)


def test_undisclosed_precision_points_to_the_disclosed_one(cli) -> None:
    """A100 discloses BF16 (312 TF) but has no FP8: the error says so and suggests --precision bf16."""
    result = cli(["sweep", "llama3-70b", "--sku", "a100", "--gpus", "64", "--precision", "fp8", "--no-ranges"])
    assert result.exit_code == 3, result.output
    assert "fp8 peak is not disclosed" in result.output
    assert "--precision bf16" in result.output


def test_save_never_replaces_an_existing_file_unasked(cli, tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text("# my notes\n")
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--no-ranges", "--save", str(plan)])
    assert r.exit_code == 2, r.output
    assert "already exists" in r.output
    assert plan.read_text() == "# my notes\n"
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--no-ranges", "--save", str(plan), "--force"])
    assert r.exit_code == 0, r.output
    assert "[layout]" in plan.read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["plan.toml"]  # no temporary file left behind


def _best(cli, args: list[str]) -> dict:
    r = cli(args + ["--json", "--no-ranges", "--top", "1"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["data"]


def test_overlap_pp_is_on_by_default_and_can_be_turned_off(cli) -> None:
    """Megatron-LM's default ``overlap_p2p_comm``: with virtual stages only the 2 (PP - 1) fill/drain
    transfers are exposed; ``--no-overlap-pp`` exposes all m x 2 x VPP of them (Megatron-LM 2021).
    Llama-3.1-70B, 256 sequences of 4,096 on 512 MI300X, TP 8 x PP 8 x VPP 5, DP 8, micro-batch 1:
    m = 256 / 8 = 32, so the exposed pipeline time grows by 32 x 2 x 5 / (2 x 7) = 160 / 7."""
    args = ["sweep", "llama3.1-70b", "--sku", "mi300x", "--gpus", "512", "--global-batch", "256", "--seq", "4096",
            "--tp", "8", "--pp", "8", "--vpp", "5", "--cp", "1", "--zero", "1", "--micro-batch", "1",
            "--recompute", "none"]
    on = _best(cli, args)
    off = _best(cli, args + ["--no-overlap-pp"])
    assert on["overlap"]["pp"] is True and off["overlap"]["pp"] is False
    assert _best(cli, args + ["--overlap-pp"])["rows"][0]["time_s"] == on["rows"][0]["time_s"]
    a, b = on["rows"][0], off["rows"][0]
    assert a["microbatches"] == b["microbatches"] == 32
    assert b["time_s"]["pp"] / a["time_s"]["pp"] == pytest.approx(32 * 2 * 5 / (2 * 7), rel=1e-9)
    assert a["step_time_s"] < b["step_time_s"]


def test_no_overlap_cp_exposes_the_kv_exchange(cli) -> None:
    """``--no-overlap-cp`` (Llama 3's all-gather CP) charges the whole key/value exchange that ring
    attention hides behind attention compute by default; nothing else in the step changes."""
    args = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--global-batch", "64", "--seq", "32768",
            "--tp", "2", "--pp", "1", "--cp", "4", "--zero", "1", "--micro-batch", "1", "--recompute", "none"]
    on = _best(cli, args)
    off = _best(cli, args + ["--no-overlap-cp"])
    assert on["overlap"]["cp"] is True and off["overlap"]["cp"] is False
    a, b = on["rows"][0], off["rows"][0]
    assert a["layout"] == b["layout"]
    assert b["time_s"]["cp"] > a["time_s"]["cp"]
    assert b["step_time_s"] - a["step_time_s"] == pytest.approx(b["time_s"]["cp"] - a["time_s"]["cp"], rel=1e-9)


def test_split_embedding_loss_admits_pp_that_divides_layers_plus_two(cli, tmp_path) -> None:
    """Llama-3.1-405B has 126 layers: 126 % 16 = 14, so with an even split only (``--no-uneven-pp``)
    PP 16 is rejected (``pp-layers``) unless the embedding and the loss count as one layer each:
    128 = 16 x 8. The saved plan keeps the switch, so ``fit --plan`` takes the layout as the sweep did."""
    args = ["sweep", "llama3.1-405b", "--sku", "mi355x", "--gpus", "1024", "--global-batch", "512", "--seq", "8192",
            "--tp", "8", "--pp", "16", "--vpp", "1", "--cp", "1", "--zero", "1", "--micro-batch", "1",
            "--recompute", "full", "--no-uneven-pp"]
    plain = _best(cli, args)
    assert plain["rows"] == [] and plain["split_embedding_loss"] is False
    assert plain["rejected"]["pp-layers"] == plain["evaluated"]
    plan = tmp_path / "plan.toml"
    split = _best(cli, args + ["--split-embedding-loss", "--save", str(plan)])
    assert split["split_embedding_loss"] is True
    assert split["rows"][0]["layout"]["pp"] == 16 and split["rows"][0]["layout"]["dp"] == 8
    assert "split_embedding_loss = true" in plan.read_text() and "uneven_pp = false" in plan.read_text()
    refit = json.loads(cli(["fit", "--plan", str(plan), "--json"]).stdout)["data"]
    assert refit["rows"][0]["memory_bytes"]["total"] == pytest.approx(split["rows"][0]["memory_bytes"]["total"], abs=1)
    # The default uneven split admits PP 16 too: 7 + 14 x 8 + 7 layers, the same stages.
    uneven = _best(cli, args[:-1])
    assert uneven["rows"][0]["memory_bytes"]["total"] == pytest.approx(split["rows"][0]["memory_bytes"]["total"])


def test_table_states_the_overlap_settings(cli) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--no-ranges", "--no-overlap-pp",
             "--overlap-ep", "--split-embedding-loss"])
    assert r.exit_code == 0, r.output
    flat = " ".join(r.output.split())
    assert "Overlap with compute: TP off, EP on, CP on, PP off, DP on." in flat
    assert "Pipeline split counts the embedding and the loss as one layer each." in flat


def test_api_keywords_match_the_flags(catalog) -> None:
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.specs.layout import TrainOptions

    kw = dict(gpus="64", global_batch="64", seq_len=4096, report=SweepReport(top=1, ranges=False),
              pins={"tp": [8], "pp": [4], "vpp": [2], "cp": [1], "zero": [1], "micro_batch": [1]})
    on = sweep(catalog, "llama3.1-8b", ["mi300x"], **kw)
    off = sweep(catalog, "llama3.1-8b", ["mi300x"],
                options=TrainOptions(overlap_pp=False, overlap_cp=False, split_embedding_loss=True), **kw)
    assert on.overlap == {"tp": False, "ep": False, "pp": True, "cp": True, "dp": True}
    assert off.overlap == {"tp": False, "ep": False, "pp": False, "cp": False, "dp": True}
    assert (on.split_embedding_loss, off.split_embedding_loss) == (False, True)
    assert off.rows[0].time_s.pp > on.rows[0].time_s.pp


def test_row_metrics_by_hand(catalog) -> None:
    """Tokens/s, MFU, HFU, per-GPU and per-rack throughput and scaling efficiency of the rows, from
    the step time and FLOPs written out by hand. Llama-3.1-8B (32 layers, hidden 4,096, 32 heads of
    128, 8 KV heads, SwiGLU 14,336, vocabulary 128,256), 4,096-token sequences, full recompute:
    model FLOPs/token = 6 x matmul weights + 12 x layers x seq x heads x head_dim (PaLM appendix B);
    HFU adds one forward of the layers (2 x layer weights + 4 x layers x seq x heads x head_dim).
    MI300X dense BF16 peak 1,307.4 TFLOP/s; an MI300X rack (mi300x-server) holds 32 GPUs."""
    from mi400plan.api.sweep import SweepReport, sweep

    layer_w = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    attn = 32 * 4096 * 32 * 128  # layers x seq x heads x head_dim
    model_tok = 6 * (layer_w + 128256 * 4096) + 12 * attn
    hw_tok = model_tok + 2 * layer_w + 4 * attn
    peak = 1307.4e12
    res = sweep(catalog, "llama3.1-8b", ["mi300x", "mi355x"], gpus="64..128", global_batch="256", seq_len=4096,
                report=SweepReport(top=1, ranges=False), pins={"tp": [1], "pp": [1], "cp": [1], "recompute": [2]})
    assert res.efficiencies[0].peak_flops == pytest.approx(peak)
    per_gpu = {}
    for row in res.rows:
        if row.sku != "mi300x":
            continue
        tps = 256 * 4096 / row.step_time_s
        assert row.tokens_per_s == pytest.approx(tps, rel=1e-12)
        assert row.mfu == pytest.approx(model_tok * tps / (row.gpus * peak), rel=1e-12)
        assert row.hfu == pytest.approx(hw_tok * tps / (row.gpus * peak), rel=1e-12)
        per_gpu[row.gpus] = tps / row.gpus
    summ = {s.gpus: s for s in res.skus if s.sku == "mi300x"}
    for g, s in summ.items():
        assert s.tokens_per_s_per_gpu == pytest.approx(per_gpu[g], rel=1e-12)
        assert s.gpus_per_rack == 32 and s.tokens_per_s_per_rack == pytest.approx(32 * per_gpu[g], rel=1e-12)
    eff = {p.gpus: p.scaling_efficiency for p in res.scaling if p.sku == "mi300x"}
    assert eff[64] == 1.0 and eff[128] == pytest.approx(per_gpu[128] / per_gpu[64], rel=1e-12)


def test_grad_dtype_sets_gradient_bytes(catalog) -> None:
    """``grad_dtype="bf16"`` (Megatron-LM ``--grad-reduce-in-bf16``) halves the gradient buffer of the
    default fp32 main grads (4 -> 2 bytes per parameter) and the bytes of the DP reduction, so
    the exposed DP time cannot grow."""
    from mi400plan.api.sweep import SweepReport, sweep
    from mi400plan.specs.layout import TrainOptions

    kw = dict(gpus="64", global_batch="64", seq_len=4096, report=SweepReport(top=1, ranges=False),
              pins={"tp": [8], "pp": [1], "cp": [1], "zero": [0], "micro_batch": [1], "recompute": [0]})
    fp32 = sweep(catalog, "llama3.1-8b", ["mi300x"], **kw).rows[0]
    bf16 = sweep(catalog, "llama3.1-8b", ["mi300x"], options=TrainOptions(grad_dtype="bf16"), **kw).rows[0]
    assert fp32.layout == bf16.layout
    assert bf16.memory_bytes.gradients == pytest.approx(fp32.memory_bytes.gradients / 2, rel=1e-12)
    assert bf16.time_s.dp <= fp32.time_s.dp


def test_grad_dtype_flag_halves_gradient_memory(cli) -> None:
    """--grad-dtype bf16 keeps 2 B per gradient instead of fp32's 4 B: half the gradient memory, never slower."""
    base = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--tp", "1", "--pp", "1", "--cp", "1",
            "--zero", "1", "--micro-batch", "1", "--recompute", "full", "--top", "1", "--no-ranges", "--json"]
    fp32 = json.loads(cli(base).stdout)["data"]["rows"][0]
    bf16 = json.loads(cli([*base, "--grad-dtype", "bf16"]).stdout)["data"]["rows"][0]
    assert fp32["memory_bytes"]["gradients"] == 2 * bf16["memory_bytes"]["gradients"]
    assert bf16["time_s"]["dp"] <= fp32["time_s"]["dp"] and bf16["step_time_s"] <= fp32["step_time_s"]
    r = cli([*base, "--grad-dtype", "int3"])
    assert r.exit_code == 2 and "--grad-dtype" in r.output and "'fp32', 'bf16'" in r.output  # a choice, as in fit


def test_domain_comparison_is_shown_whichever_side_wins(cli) -> None:
    """GPT-3 175B on 64 Helios racks: with overlapped pipeline sends the best in-rack layout (TP8 x PP8,
    interleaved) and the best rack-crossing one (TP8 x PP8 x CP2: a deeper pipeline loads its LM-head stage
    more) are within 3 % of each other, whichever
    wins, and the output sets them side by side; with every send exposed the crossing layout is more
    than 3 % slower (each of its sends pays the scale-out price)."""
    base = ["sweep", "gpt3-175b", "--sku", "mi455x", "--racks", "64", "--precision", "fp8", "--tp", "8,16",
            "--pp", "8,16", "--vpp", "1,2,3,4,5,6,8", "--global-batch", "4608", "--top", "1", "--no-ranges"]
    data = json.loads(cli([*base, "--json"]).stdout)["data"]
    best, inside, cross = data["rows"][0], data["domain_inside"][0], data["rack_crossing"][0]
    assert best["step_time_s"] == min(inside["step_time_s"], cross["step_time_s"])
    lay = cross["layout"]
    assert lay["tp"] * lay["pp"] * lay["cp"] > 72  # spans two racks
    assert abs(cross["step_time_s"] - inside["step_time_s"]) <= 0.03 * best["step_time_s"]  # a near-tie
    assert cross["time_s"]["pp"] > inside["time_s"]["pp"]  # crossing the rack makes each send dearer
    table = cli(base).stdout
    assert "scale-up domain" in table and ("best inside" in table or "crossing" in table)
    exposed = json.loads(cli([*base, "--no-overlap-pp", "--json"]).stdout)["data"]
    assert exposed["rack_crossing"][0]["step_time_s"] > 1.03 * exposed["rows"][0]["step_time_s"]
    assert "Why the best layout stays inside the scale-up domain" in cli([*base, "--no-overlap-pp"]).stdout


def test_a_sku_lacking_a_value_is_an_nd_row_and_the_sweep_goes_on(cli) -> None:
    """A100 discloses no FP8 peak: alongside H100 it becomes an n/d row naming the gap, not a stop."""
    base = ["sweep", "llama3.1-8b", "--sku", "a100", "--sku", "h100", "--gpus", "64", "--precision", "fp8",
            "--top", "1", "--no-ranges"]
    r = cli([*base, "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)["data"]
    by = {s["sku"]: s for s in data["skus"]}
    assert by["a100"]["missing"] and "fp8" in by["a100"]["missing"] and by["a100"]["step_time_s"] is None
    assert by["h100"]["missing"] is None and by["h100"]["step_time_s"] > 0
    assert {row["sku"] for row in data["rows"]} == {"h100"}
    table = cli(base).stdout
    assert "n/d" in table


def test_sku_all_in_sweep_compares_every_sku(cli, catalog) -> None:
    r = cli(["sweep", "llama3.1-8b", "--sku", "all", "--gpus", "64", "--top", "1", "--no-ranges", "--json"])
    assert r.exit_code == 0, r.output
    skus = json.loads(r.stdout)["data"]["skus"]
    assert len(skus) == len(catalog.names("accelerators"))


def test_domain_comparison_of_several_skus_has_a_sku_column(cli) -> None:
    base = ["sweep", "gpt3-175b", "--sku", "mi455x", "--sku", "mi355x", "--racks", "8", "--precision", "fp8",
            "--global-batch", "4608", "--top", "1", "--no-ranges", "--no-overlap-pp", "--wide"]
    data = json.loads(cli([*base, "--json"]).stdout)["data"]
    shown = {r["sku"] for r in data["rack_crossing"] + data["domain_inside"]}
    assert len(shown) == 2
    lines = cli(base).stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if "scale-up domain" in line and "tiers" not in line)
    header = lines[i + 1]
    assert header.split()[0] == "SKU"


def test_rows_name_their_pipeline_split(cli) -> None:
    """Llama 3.1 70B has 80 layers: PP 2 x VPP 40 splits evenly (40 per stage, 1 per chunk); PP 2 x VPP 28
    is 56 chunks, which 80 layers fill only as a custom layout: 80 = 56 + 24, so 24 chunks of 2 layers
    and 32 of 1, 40 layers per stage. The table says so under the rows."""
    base = ["sweep", "llama3.1-70b", "--sku", "mi355x", "--gpus", "1024", "--tp", "1", "--pp", "2", "--cp", "8",
            "--zero", "2", "--micro-batch", "4", "--top", "1", "--no-ranges"]
    even = json.loads(cli([*base, "--vpp", "40", "--json"]).stdout)["data"]["rows"][0]
    assert even["pipeline_split"] == "even: 40 layers per stage"
    odd = json.loads(cli([*base, "--vpp", "28", "--json"]).stdout)["data"]["rows"][0]
    assert odd["pipeline_split"] == "layout: 56 chunks of 1-2 layers, stages 40 + 40 layers"
    table = cli([*base, "--vpp", "28"]).stdout
    assert "Pipeline splits other than even: #1 layout: 56 chunks" in " ".join(table.split())
