"""MoE dispatch terms by mechanism (``mi400plan.moe_dispatch``), against hand arithmetic.

The DeepSeek-V3 layer of DeepEP's benchmark (README, V1 tables, 2025-02: 4,096 tokens per batch, hidden
7,168, top-8 experts, FP8 dispatching and BF16 combining) is the worked case."""

from __future__ import annotations

import dataclasses

import pytest

from mi400plan.moe_dispatch import (
    DISPATCHERS, dispatch_requests, dispatch_seconds, expert_padding, moe_host_seconds, moe_layer_captured,
    permute_elems_per_token,
)

TOK, H, K = 4096, 7168, 8


def test_deepep_dispatch_bytes_of_a_deepseek_v3_layer_by_hand() -> None:
    """Each rank sends every routed copy once: 4,096 x 8 = 32,768 copies of 7,168 elements. DeepEP in
    blockwise FP8 training dispatches 1 byte an element plus a 4-byte scale per 128 channels:
    32,768 x 7,168 x 1.03125 = 242,221,056 B; the BF16 combine 32,768 x 7,168 x 2 = 469,762,048 B. The
    all-to-all dispatcher sends 16-bit tokens both ways."""
    req = dispatch_requests(TOK, H, K, 2.0, 8, 1, DISPATCHERS["deepep"], True, None)
    assert req["ep_disp"] == ("all_to_all", 242_221_056.0, 8, 1)
    assert req["ep_comb"] == ("all_to_all", 469_762_048.0, 8, 1)
    a2a = dispatch_requests(TOK, H, K, 2.0, 8, 1, DISPATCHERS["alltoall"], True, None)
    assert a2a["ep_disp"][1] == a2a["ep_comb"][1] == 469_762_048.0
    bf16 = dispatch_requests(TOK, H, K, 2.0, 8, 1, DISPATCHERS["deepep"], False, None)  # not blockwise FP8
    assert bf16["ep_disp"][1] == 469_762_048.0


def test_capacity_factor_pads_the_dispatched_tokens() -> None:
    """Capacity factor 1.25: 32,768 x 1.25 = 40,960 padded copies x 7,168 x 2 B = 587,202,560 B (16-bit)."""
    req = dispatch_requests(TOK, H, K, 2.0, 8, 1, DISPATCHERS["alltoall"], False, 1.25)
    assert req["ep_disp"][1] == req["ep_comb"][1] == 587_202_560.0
    assert expert_padding(None) == 1.0 and expert_padding(1.25) == 1.25


def test_allgather_dispatcher_gathers_every_ranks_tokens() -> None:
    """EP 8: the gathered buffer is 8 ranks x 4,096 tokens x 7,168 x 2 B = 469,762,048 B, all-gathered in the
    dispatch and reduce-scattered in the combine, whatever top-k is."""
    req = dispatch_requests(TOK, H, K, 2.0, 8, 1, DISPATCHERS["allgather"], True, None)
    assert req["ep_disp"] == ("all_gather", 469_762_048.0, 8, 1)
    assert req["ep_comb"] == ("reduce_scatter", 469_762_048.0, 8, 1)
    assert dispatch_requests(TOK, H, 2, 2.0, 8, 1, DISPATCHERS["allgather"], True, None)["ep_disp"][1] == 469_762_048.0


def test_dispatch_and_combine_count_per_pass() -> None:
    """Forward: one dispatch, one combine; backward: two at the activation width (the combine's gradient
    is dispatched, the dispatch's combined); recomputation: one more dispatch and combine.
    1 s dispatch, 10 s combine: 1 + 3 x 10 = 31 s; recomputed: 2 + 4 x 10 = 42 s."""
    price = {"ep_disp": 1.0, "ep_comb": 10.0}
    assert dispatch_seconds(price, 0.0) == 31.0 and dispatch_seconds(price, 1.0) == 42.0


def test_host_bound_part_by_graph_scope_and_capacity() -> None:
    """DeepSeek-V3 at EP 8: 256 / 8 = 32 local experts, 2 GEMMs each, 219 us a GEMM = 14.016 ms a pass.
    Full graphs capture the layer only with a capacity factor (static shapes): 0 then; dropless layers
    stay eager under any scope."""
    assert float(moe_host_seconds(32, 219e-6, "none", None)) == pytest.approx(14.016e-3)
    assert float(moe_host_seconds(32, 219e-6, "partial", 1.25)) == pytest.approx(14.016e-3)
    assert float(moe_host_seconds(32, 219e-6, "full", None)) == pytest.approx(14.016e-3)
    assert float(moe_host_seconds(32, 219e-6, "full", 1.25)) == 0.0
    assert moe_layer_captured("full", 1.0) and not moe_layer_captured("full", None)
    assert all(rule.host_sync for name, rule in DISPATCHERS.items() if name != "none")


def test_permutation_traffic_by_hand() -> None:
    """4 passes x 8 copies x 7,168 = 229,376 elements a token; padded to 1.25: 286,720."""
    assert permute_elems_per_token(K, H, None) == 229_376
    assert permute_elems_per_token(K, H, 1.25) == 286_720


def test_capacity_factor_pads_the_expert_gemms(catalog) -> None:
    """Qwen3-235B-A22B (128 experts, top-8) at EP 8, 4,096 tokens a rank: each expert runs on
    8 x 4,096 x 8 / 128 = 2,048 tokens; padded to capacity 1.25, 2,560."""
    from mi400plan import gemm
    from mi400plan.params import count_params
    from mi400plan.search import model_terms
    from mi400plan.specs.layout import train_recipe, with_expert_capacity

    spec = catalog.get("models", "qwen3-235b-a22b").spec
    sh = model_terms(spec, count_params(spec), 4096).shapes
    assert float(gemm._expert_tokens(sh, 4096.0, 1.0, 8.0, 1.0, False)) == 2048.0
    recipe = with_expert_capacity(train_recipe("megatron"), 1.25)
    assert recipe.moe_capacity_factor == 1.25  # the routed-token buffers are the capacity
    padded = model_terms(spec, count_params(spec), 4096, recipe).shapes
    assert float(gemm._expert_tokens(padded, 4096.0, 1.0, 8.0, 1.0, False)) == 2560.0


def test_full_graphs_drop_the_host_term_only_for_padded_layers(catalog) -> None:
    """Mixtral 8x7B on 8 MI355X at EP 1 (8 local experts, host-bound at micro-batch 1): with full graphs a
    dropless layer keeps its host term; padded to capacity 1.0 (the same GEMM tokens as dropless under
    balanced routing) the layer is captured and the host term is 0."""
    from mi400plan.hardware import build_sku
    from mi400plan.params import count_params
    from mi400plan.search import Workload, evaluate_one
    from mi400plan.specs.layout import train_recipe, with_expert_capacity

    spec = catalog.get("models", "mixtral-8x7b").spec
    hw = build_sku(catalog, "mi355x", "bf16").hw
    hw = dataclasses.replace(hw, hbm_bytes=8 * hw.hbm_bytes, cuda_graphs="full")  # only the time is checked
    layout = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, zero=1, micro_batch=1, recompute=0, sp=0)
    base = train_recipe("megatron")
    eager = evaluate_one(layout, Workload(spec, count_params(spec), base, 4096, 8), hw, 8)
    padded = evaluate_one(layout, Workload(spec, count_params(spec), with_expert_capacity(base, 1.0), 4096, 8), hw, 8)
    assert eager["t_host"] > 0.0 and padded["t_host"] == 0.0
    assert padded["t_compute"] == pytest.approx(eager["t_compute"])


def test_runs_files_carry_the_capacity_and_the_flag_is_refused_by_run_commands(cli) -> None:  # noqa: ANN001
    """calibrate and validate price each run as its file states it (a ``moe_capacity_factor`` field or
    column); the command-wide flag is not theirs: exit 2, naming it."""
    from mi400plan.measurements import MeasuredRun

    for command in (["validate"], ["calibrate", "runs.csv"]):
        r = cli([*command, "--moe-capacity-factor", "1.5"])
        assert r.exit_code == 2 and "--moe-capacity-factor" in r.output, r.output
    run = MeasuredRun(model="mixtral-8x7b", sku="mi355x", seq_len=4096, global_batch=8, dp=8, ep=8, step_time_s=1.0,
                      moe_capacity_factor=1.5)
    assert run.train_options().train_recipe().expert_capacity_factor == 1.5


def test_mtp_module_flops_by_hand(catalog) -> None:
    """DeepSeek-V3's MTP module beyond its transformer layer: projection 6 x 2 x 7,168^2 = 616,562,688 FLOP
    and the shared head's second pass 6 x 129,280 x 7,168 = 5,560,074,240 FLOP a token. With its layer
    (the model's 62nd minus its 61st) the module adds about 10.7 GFLOP a token, near the 10 GFLOP between
    NVIDIA's published 260 and 250 GFLOP a token with and without MTP (Megatron-Bridge 25.11 table); the
    layer alone (about 4.5) was half of it."""
    from mi400plan.params import count_params, model_flops_per_token
    from mi400plan.search import model_terms, mtp_extra_flops_per_token
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", "deepseek-v3").spec
    assert mtp_extra_flops_per_token(7168, 129_280) == 616_562_688 + 5_560_074_240
    layer = model_flops_per_token(spec.model_copy(update={"num_layers": 62}), 4096) - model_flops_per_token(spec, 4096)
    assert 4.0e9 < layer < 5.0e9
    assert (layer + 6_176_636_928) / 10e9 == pytest.approx(1.0, abs=0.1)
    recipe = train_recipe("megatron").model_copy(update={"mtp_layers": 1})
    plain = model_terms(spec, count_params(spec), 4096)
    assert model_terms(spec, count_params(spec), 4096, recipe).flops_model - plain.flops_model == 6_176_636_928


def test_mtp_head_runs_the_output_head_again_on_the_last_stage(catalog) -> None:
    """One MTP module: the last stage runs the LM head twice and the 2h -> h projection once per micro-batch
    (each priced by the GEMM model at its own shape)."""
    from mi400plan import gemm
    from mi400plan.hardware import build_sku
    from mi400plan.params import count_params
    from mi400plan.search import model_terms, mtp_head_seconds
    from mi400plan.specs.layout import train_recipe

    spec = catalog.get("models", "deepseek-v3").spec
    hw = build_sku(catalog, "b200", "bf16").hw
    T = model_terms(spec, count_params(spec), 4096, train_recipe("megatron").model_copy(update={"mtp_layers": 1}))
    hf, hb = gemm.head_gemm_seconds(T.shapes, 4096.0, 1.0, hw.head_gemm_sku())
    pf, pb = gemm.train_gemm_seconds(4096.0, 7168.0, 14336.0, hw.gemm_sku())
    f, b = mtp_head_seconds(T, 4096.0, 1.0, hw)
    assert (f, b) == (pytest.approx(2 * hf + pf), pytest.approx(2 * hb + pb))
    assert mtp_head_seconds(model_terms(spec, count_params(spec), 4096), 4096.0, 1.0, hw) == (hf, hb)


def test_dropped_share_under_balanced_routing(cli) -> None:  # noqa: ANN001
    """Each expert receives exactly its share and keeps F of it: F 0.75 drops 25 %, F >= 1 none; sweep says
    so, and both commands say the flag does nothing for a dense model."""
    import json

    from mi400plan.moe_dispatch import dropped_share

    assert dropped_share(0.75) == 0.25 and dropped_share(1.25) == 0.0 and dropped_share(None) == 0.0
    base = ["sweep", "mixtral-8x7b", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--tp", "2", "--pp", "2",
            "--ep", "2", "--json"]
    warns = json.loads(cli([*base, "--moe-capacity-factor", "0.75"]).stdout)["data"]["warnings"]
    assert any("drops 25% of the routed token copies" in w for w in warns), warns
    dense = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--gpus", "8", "--moe-capacity-factor", "1.5"])
    assert dense.exit_code == 0 and "--moe-capacity-factor applies to MoE models" in dense.output


@pytest.mark.parametrize("value", ["0", "-1", "100", "nan"])
def test_a_bad_capacity_factor_is_a_usage_error_naming_the_flag(cli, value: str) -> None:  # noqa: ANN001
    for command in (["fit", "mixtral-8x7b", "--sku", "mi355x", "--gpus", "8"],
                    ["sweep", "mixtral-8x7b", "--sku", "mi355x", "--gpus", "8", "--no-ranges"]):
        r = cli([*command, "--moe-capacity-factor", value])
        assert r.exit_code == 2 and "--moe-capacity-factor" in r.output, r.output


def test_link_pricing_matches_deepeps_published_bandwidths(catalog) -> None:
    """DeepEP's kernels are priced by the links as NCCL's are (module docstring), because its published
    bandwidths are the links': the combine of its DeepSeek-V3 benchmark (4,096 tokens x 8 copies x 7,168 x
    2 B = 469,762,048 B a rank) priced by ``comms`` comes within 10 % of them. H800, EP 8 in one node: the
    7/8 of the buffer that leaves the GPU, 411,041,792 B, at DeepEP's 153-158 GB/s NVLink (V1 tables,
    2025-02). B200, EP 8: at 726-740 GB/s (V2 table, SM100, 2026-04-30). H800, EP 16 over two nodes: half the
    buffer, 234,881,024 B, crosses RDMA at DeepEP's 43 GB/s."""
    from mi400plan.hardware import build_sku
    from mi400plan.search import make_coll

    buf = 4096 * 8 * 7168 * 2
    assert buf == 469_762_048
    for sku, ep, sent, lo, hi in (("h800", 8, 411_041_792, 153e9, 158e9), ("b200", 8, 411_041_792, 726e9, 740e9),
                                  ("h800", 16, 234_881_024, 43e9, 43e9)):
        t = float(make_coll(build_sku(catalog, sku, "bf16").hw)("all_to_all", float(buf), ep, 1))
        assert 0.9 * lo <= sent / t <= 1.1 * hi, (sku, ep, sent / t / 1e9)


def test_a_runs_file_prices_the_mtp_module(cli, tmp_path) -> None:  # noqa: ANN001
    """The same DeepSeek-V3 run on 256 GB200 (PP 4 x VP 4, EP 64, as NVIDIA's 25.11 BF16 row) with and
    without ``mtp_layers = 1``: with it the run trains one more MoE layer and the last stage runs the output
    head twice, so the predicted step is longer."""
    import json

    run = ('[[run]]\nname = "{n}"\nmodel = "deepseek-v3"\nsku = "gb200"\nprecision = "bf16"\npp = 4\nvpp = 4\n'
           'ep = 64\ndp = 64\nseq_len = 4096\nglobal_batch = 4096\nrecompute = "full"\nstep_time_s = 20.0\n'
           'uneven_pp = true\nsplit_embedding_loss = true\n')
    path = tmp_path / "runs.toml"
    path.write_text(run.format(n="plain") + run.format(n="mtp") + "mtp_layers = 1\n")
    r = cli(["validate", str(path), "--no-loso", "--json"])
    assert r.exit_code == 0, r.output
    pred = {row["id"]: row["predicted_s"] for row in json.loads(r.stdout)["data"]["rows"]}
    assert pred["mtp"] > pred["plain"], pred
