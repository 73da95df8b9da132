"""DualPipe (``--pp-schedule dualpipe``), checked against DeepSeek-V3's Table 2 (arXiv 2412.19437, 2024-12) by hand.

Table 2: DualPipe keeps 2x the parameters of 1F1B and PP + 1 micro-batches of activations (1F1B: PP), and
its bubble is (PP/2 - 1)(F&B + B - 3W) against 1F1B's (PP - 1)(F + B). With F : B : W = 1 : 2 : 1 and F&B =
F + B (one micro-batch time t = 3F), DualPipe's is (PP/2 - 1) x 2F = (PP/2 - 1) x 2t/3.
"""

from __future__ import annotations

import json

import pytest

H, LAYERS, PP = 1024, 8, 4


def _small_gpt():
    """A stated small model: GPT shape, hidden 1,024, 16 heads, 8 layers, GELU FFN 4h, biases, LayerNorm:
    12h^2 + 13h parameters a layer (QKV 3h^2 + 3h, projection h^2 + h, FFN 8h^2 + 5h, two LayerNorms 4h)."""
    from mi400plan.specs.model import Attention, ModelSpec

    return ModelSpec(
        name="gpt-small", display_name="GPT small", hidden_size=H, num_layers=LAYERS, vocab_size=51200,
        ffn_dim=4 * H, ffn_kind="gelu", linear_bias=True, norm="layernorm", position_embedding="learned",
        max_seq_len=2048, tie_embeddings=True, attention=Attention(num_heads=16),
    )


def _slots(schedule: str, nmb: int = 16) -> dict[int, dict[str, float]]:
    """Every memory term per pipeline-stage slot (rank under DualPipe), keyed by its stage index."""
    from mi400plan.memory import _stage_terms
    from mi400plan.params import count_params
    from mi400plan.specs.layout import train_recipe

    model = _small_gpt()
    recipe = train_recipe("megatron").model_copy(update={"pp_schedule": schedule})
    st = _stage_terms(model, count_params(model), recipe,
                      dict(pp=PP, dp=1, zero=1, micro_batch=1, seq_len=2048, num_microbatches=nmb))
    out = {}
    for j, s in enumerate(st.stage.reshape(-1)):
        if st.total.reshape(-1)[j] > float("-inf"):
            out[int(s)] = {k: float(getattr(st, k).reshape(-1)[j]) for k in ("weights", "grads", "optim", "acts")}
    return out


def test_dualpipe_rank_holds_two_stages_of_parameters() -> None:
    """Rank 1 of PP 4 holds stages 1 and 2 (deepseek-ai/DualPipe's example: modules[rank], modules[PP-1-rank]):
    4 layers of 12h^2 + 13h parameters, at 2 B (bf16 weights), 4 B (fp32 gradients), 12 B (fp32 master +
    two fp32 moments; DP 1)."""
    per_layer = 12 * H * H + 13 * H
    rank1 = _slots("dualpipe")[1]
    assert rank1["weights"] == 2 * 4 * per_layer
    assert rank1["grads"] == 4 * 4 * per_layer
    assert rank1["optim"] == 12 * 4 * per_layer
    # 1F1B's stage 1 holds its own 2 layers: DualPipe's middle rank holds twice that (Table 2, "2x")
    assert _slots("1f1b")[1]["weights"] == 2 * 2 * per_layer
    assert set(_slots("dualpipe")) == {0, 1}  # PP / 2 distinct ranks (rank i mirrors rank PP - 1 - i)


def test_dualpipe_holds_pp_plus_one_microbatches_of_a_stage() -> None:
    """Stage 1 under 1F1B holds PP - 1 = 3 micro-batches of its 2 layers; DualPipe's rank 1 holds PP + 1 = 5
    micro-batches of one (2-layer) stage: the ratio is 5 / 3, whatever a layer's activations are."""
    one, dual = _slots("1f1b")[1]["acts"], _slots("dualpipe")[1]["acts"]
    assert dual / one == pytest.approx(5 / 3, rel=1e-12)
    # capped by the step's micro-batches, as 1F1B's in-flight count is: 4 micro-batches < PP + 1
    assert _slots("dualpipe", nmb=4)[1]["acts"] / one == pytest.approx(4 / 3, rel=1e-12)


def _sweep(cli, schedule: str, pp: int, extra: list[str] | None = None) -> dict:  # noqa: ANN001
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--pp", str(pp), "--tp", "1",
             "--vpp", "1", "--cp", "1", "--zero", "1", "--micro-batch", "1", "--recompute", "none",
             "--global-batch", "512", "--pp-schedule", schedule, *(extra or []), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["data"]


def test_dualpipe_bubble_is_table_2(cli) -> None:  # noqa: ANN001
    """PP 8, 64 micro-batches: 1F1B's bubble is 7 micro-batch times, DualPipe's (8/2 - 1) x 2/3 = 2, a
    micro-batch time being the step less the bubble, the DP exposure and the optimizer, over 64. DualPipe's
    micro-batch is also shorter: its slowest rank carries half the LM head (stages 0 and 7 on rank 0)."""
    one, dual = (_sweep(cli, s, 8)["rows"][0] for s in ("1f1b", "dualpipe"))
    assert one["layout"] == dual["layout"] and one["microbatches"] == dual["microbatches"] == 64
    for row, bubble in ((one, 7.0), (dual, 2.0)):
        t = row["time_s"]
        t_mb = (row["step_time_s"] - t["bubble"] - t["dp"] - t["optimizer"]) / 64
        assert t["bubble"] == pytest.approx(bubble * t_mb, rel=1e-9)
    assert 1.0 < dual["stage_imbalance"] < one["stage_imbalance"]
    assert dual["step_time_s"] < one["step_time_s"]


def test_sweep_keeps_only_layouts_dualpipe_runs(cli) -> None:  # noqa: ANN001
    """Odd PP and VPP > 1 are rejected under the ``dualpipe`` rule; so is a step with fewer than 2 x PP
    micro-batches (global batch 64 at DP 8 and micro-batch 1: 8 micro-batches < 16 at PP 8)."""
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--pp", "8", "--tp", "1",
             "--cp", "1", "--micro-batch", "1", "--global-batch", "64", "--pp-schedule", "dualpipe", "--json"])
    data = json.loads(r.stdout)["data"]
    assert not data["rows"] and data["rejected"]["dualpipe"] > 0, r.output
    ok = _sweep(cli, "dualpipe", 8)
    assert all(row["layout"]["pp"] % 2 == 0 and row["layout"]["vpp"] == 1 for row in ok["rows"])


@pytest.mark.parametrize("extra,why", [
    (["--pp", "4", "--vpp", "2"], "no virtual stages"),
    (["--pp", "1"], "an even PP"),
    (["--pp", "8", "--global-batch", "64"], "at least 2 x PP = 16 (got 8)"),
    (["--pp", "4", "--global-batch", "144"], "even number of micro-batches per replica, at least 2 x PP = 8 (got 9)"),
])
def test_fit_refuses_what_dualpipe_cannot_run(cli, extra: list[str], why: str) -> None:  # noqa: ANN001
    r = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tp", "1", "--micro-batch", "1",
             "--pp-schedule", "dualpipe", *extra])
    assert r.exit_code == 2 and "--pp-schedule dualpipe" in r.output and why in r.output, r.output


def test_fit_names_the_schedule(cli) -> None:  # noqa: ANN001
    r = cli(["fit", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tp", "1", "--pp", "4", "--micro-batch", "1",
             "--global-batch", "512", "--pp-schedule", "dualpipe", "--json"])
    assert r.exit_code in (0, 4), r.output
    assert json.loads(r.stdout)["data"]["rows"][0]["layout"]["schedule"] == "dualpipe"


_RUN = """sku = "mi355x"
precision = "bf16"

[[run]]
name = "70b-tp8-pp4"
model = "llama3.1-70b"
tp = 8
pp = 4
dp = 8
micro_batch = 1
seq_len = 8192
global_batch = 256
step_time_s = 6.0
"""


@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_a_runs_file_carries_the_schedule(cli, tmp_path, command: str) -> None:  # noqa: ANN001
    """A runs file's ``pp_schedule`` reaches the priced step (validate: 32 micro-batches at PP 4, bubble 3 -> 2/3
    micro-batch times, so DualPipe predicts a shorter step), and a layout DualPipe cannot run is refused with
    the field named."""
    def run(text: str) -> object:
        f = tmp_path / "runs.toml"
        f.write_text(text)
        return cli([command, str(f), "--json"])

    dual = _RUN + 'pp_schedule = "dualpipe"\n'
    bad = run(dual.replace("pp = 4\n", "pp = 4\nvpp = 5\n"))
    # validate refuses a layout rule as a usage error (2); calibrate as a file error naming the line (3)
    assert bad.exit_code == (2 if command == "validate" else 3), bad.output
    assert "pp_schedule" in bad.output and "no virtual stages" in bad.output, bad.output
    if command == "calibrate":
        return
    one, two = (json.loads(run(t).stdout)["data"]["rows"][0]["predicted_s"] for t in (_RUN, dual))
    assert two < one


def test_fit_prints_the_schedule(cli) -> None:  # noqa: ANN001
    args = ["fit", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--tp", "1", "--pp", "4", "--micro-batch", "1",
            "--global-batch", "512"]
    r = cli([*args, "--pp-schedule", "dualpipe"], env={"COLUMNS": "200"})
    assert "pipeline schedule: DualPipe" in " ".join(r.output.split()), r.output
    assert "pipeline schedule" not in cli(args, env={"COLUMNS": "200"}).output


def test_a_saved_plan_keeps_the_schedule(cli, tmp_path) -> None:  # noqa: ANN001
    """``sweep --save`` writes ``pp_schedule`` into the plan's [recipe] table and ``fit --plan`` prices the same
    bytes with it."""
    plan = tmp_path / "plan.toml"
    s = cli(["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--pp", "4", "--tp", "1",
             "--vpp", "1", "--global-batch", "512", "--pp-schedule", "dualpipe", "--save", str(plan), "--json"])
    assert s.exit_code == 0, s.output
    assert 'pp_schedule = "dualpipe"' in plan.read_text()
    f = cli(["fit", "--plan", str(plan), "--json"])
    assert f.exit_code in (0, 4), f.output
    row = json.loads(f.stdout)["data"]["rows"][0]
    assert row["layout"]["schedule"] == "dualpipe"
    assert row["memory_bytes"]["total"] == pytest.approx(json.loads(s.stdout)["data"]["rows"][0]["memory_bytes"]["total"],
                                                         abs=1)


def test_dualpipe_shares_the_head_between_two_ranks() -> None:
    """The small model at PP 4, two layers a stage, a layer's work 1 and the LM head's 4 (units). 1F1B runs at
    its last stage's pace, 2 + 4 = 6 against the mean stage's (8 + 4) / 4 = 3: ratio 2. Under DualPipe rank 0
    holds stages 0 and 3 and runs half the micro-batches through each: (2 + 6) / 2 = 4 per micro-batch, over
    the same mean 3: ratio 4/3; rank 1 (stages 1 and 2) does 2."""
    from mi400plan.memory import stage_slot_table, stage_work_ratio
    from mi400plan.params import count_params

    counts = count_params(_small_gpt())

    def ratio(mirror: bool) -> float:
        sl = stage_slot_table(counts, [PP], [1], [0], mirror=mirror)
        return float(stage_work_ratio(counts, [PP], sl, dense=1.0, moe=1.0, head=4.0)[0])

    assert ratio(False) == pytest.approx(2.0, rel=1e-12)
    assert ratio(True) == pytest.approx(4 / 3, rel=1e-12)
