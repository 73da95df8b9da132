"""The planned global batch (``mi400plan.batch``, ``api.sweep.planned_search``)."""

from __future__ import annotations

import pytest

from mi400plan.batch import (
    batch_candidates,
    batch_law,
    bubble_fraction,
    idle_warning,
    optimal_batch_tokens,
    pipeline_starved,
)


def test_law_by_hand_at_two_compute_points() -> None:
    # DeepSeek LLM eq. 1, B_opt = 0.2920 x C^0.3271 tokens:
    # C = 1e20: 20 x 0.3271 = 6.542; 10^0.542 = 3.4834 -> 0.2920 x 3.4834e6 = 1.0172e6 tokens
    assert optimal_batch_tokens(1e20) == pytest.approx(1.0172e6, rel=1e-3)
    # C = 1e24: 24 x 0.3271 = 7.8504; 10^0.8504 = 7.0859 -> 0.2920 x 7.0859e7 = 2.0691e7 tokens
    assert optimal_batch_tokens(1e24) == pytest.approx(2.0691e7, rel=1e-3)
    with pytest.raises(ValueError):
        optimal_batch_tokens(0.0)


def test_candidates_and_bound_by_hand() -> None:
    # 2^k and 3 x 2^k between 5 and 40
    assert batch_candidates(5, 40) == [6, 8, 12, 16, 24, 32]
    # M = 1e12 FLOPs/token, D = 1e12 tokens: C = 1e24, B_opt = 2.0691e7 tokens = 2,525.8 sequences of 8,192;
    # the bound is B_opt itself: the largest 2^k or 3 x 2^k at or below 2,525.8 sequences is 2,048
    law = batch_law(1e12, 8192, 1e12, active_params=5e10)
    assert not law.tokens_assumed and law.compute_flops == 1e24
    assert law.b_opt_tokens == pytest.approx(2.0691e7, rel=1e-3)
    assert law.candidates == (2048,) and law.bound_tokens == pytest.approx(law.b_opt_tokens)
    # no --tokens: D = 20 x active parameters (Chinchilla) = 20 x 5e10 = 1e12, the same run
    assumed = batch_law(1e12, 8192, None, active_params=5e10)
    assert assumed.tokens_assumed and assumed.train_tokens == 1e12 and assumed.candidates == law.candidates


def test_bubble_and_starvation_by_hand() -> None:
    # (p - 1) / (v x m): 6 stages, 1 chunk, 16 micro-batches -> 5/16 = 0.3125 > 1/4: starved
    assert bubble_fraction(6, 1, 16) == pytest.approx(0.3125)
    assert pipeline_starved(6, 1, 16)
    # 16 stages x 7 chunks, 128 micro-batches -> 15/896 = 1.7 %: filled
    assert bubble_fraction(16, 7, 128) == pytest.approx(15 / 896)
    assert not pipeline_starved(16, 7, 128)
    # fewer micro-batches than stages is starved even with many chunks: 8 stages x 12 chunks, 4 micro-batches
    assert bubble_fraction(8, 12, 4) == pytest.approx(7 / 48) and pipeline_starved(8, 12, 4)
    assert not pipeline_starved(1, 1, 1)  # no pipeline, no bubble
    assert "mostly idle" in idle_warning("x", 32, 8, 12, 4, pinned=True)
    assert idle_warning("x", 32, 16, 7, 128, pinned=True) is None


@pytest.mark.slow  # two searches at 65,536 GPUs: about 4 s (the batch rule's hand checks above stay quick)
def test_moe_2t_at_65536_gpus_default_batch_matches_16mi_within_the_bound(catalog) -> None:
    from mi400plan.api.sweep import SweepReport, sweep

    kw = dict(gpus="65536", tokens="15T", report=SweepReport(top=1, ranges=False))
    planned = sweep(catalog, "moe-2t", ["mi355x"], **kw)
    fixed = sweep(catalog, "moe-2t", ["mi355x"], global_batch="16Mi", **kw)
    b = planned.batch
    assert b is not None and not b.pinned and fixed.batch.pinned
    tokens = planned.rows[0].global_batch_seqs * planned.seq_len
    assert tokens <= b.bound_tokens and tokens <= 80e6  # the ceiling for this run
    assert planned.rows[0].mfu >= fixed.rows[0].mfu - 0.01


def test_pinned_batch_wins_and_a_starving_batch_warns(catalog) -> None:
    from mi400plan.api.sweep import SweepReport, sweep

    res = sweep(catalog, "llama3.1-405b", ["mi355x"], gpus="12288", global_batch="512",
                report=SweepReport(top=1, ranges=False))
    c = res.batch.chosen[0]
    assert res.batch.pinned and c.tried_seqs == [512] and c.global_batch_seqs == 512
    assert res.rows[0].global_batch_seqs == 512 and res.global_batch_seqs == 512
    m, pp, vpp = res.rows[0].microbatches, res.rows[0].layout.pp, res.rows[0].layout.vpp
    assert c.starved == pipeline_starved(pp, vpp, m) is True
    assert any("--global-batch given (512 sequences)" in w for w in res.warnings)
    # the planned default on the same cluster fills the pipeline, within the bound, and does not warn
    planned = sweep(catalog, "llama3.1-405b", ["mi355x"], gpus="12288", tokens="15T",
                    report=SweepReport(top=1, ranges=False))
    p = planned.batch.chosen[0]
    assert not p.starved and p.global_batch_tokens <= planned.batch.bound_tokens
    assert not any("idle" in w for w in planned.warnings)
    assert planned.rows[0].mfu > res.rows[0].mfu


def test_batch_in_json_and_table(cli) -> None:
    import json

    args = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64", "--no-ranges", "--top", "1"]
    r = cli(args + ["--json"])
    assert r.exit_code == 0, r.output
    b = json.loads(r.stdout)["data"]["batch"]
    assert b["law"].startswith("DeepSeek LLM (arXiv 2401.02954") and b["tokens_assumed"]
    t = cli(args)
    assert "Global batch" in t.output and "2401.02954" in t.output


def test_planner_raises_a_starving_batch_to_the_first_that_fills_the_pipeline(catalog) -> None:
    from mi400plan.api.sweep import planned_search
    from mi400plan.hardware import build_sku
    from mi400plan.batch import BatchLaw
    from mi400plan.params import count_params
    from mi400plan.search import SearchOptions, Workload, iter_rows, search
    from mi400plan.specs.layout import TrainOptions

    spec = catalog.get("models", "llama3.1-405b").spec
    wl0 = Workload(spec, count_params(spec), TrainOptions().train_recipe(), 8192, 512)
    hw = build_sku(catalog, "mi355x", "bf16").hw
    # a bound whose candidates start at 512 sequences, which starves 12,288 GPUs (see the pinned test)
    law = BatchLaw(1.0, 1.0, False, 1.0, 1.0, 1.0, 8192, (512, 1024, 2048, 4096))
    _, wl, choice = planned_search(wl0, law, False, hw, 12288, SearchOptions(), 1, None, False)
    assert choice.tried_seqs[0] == 512 and not choice.starved
    assert wl.global_batch == choice.global_batch_seqs == choice.tried_seqs[-1]
    for gb in choice.tried_seqs[:-1]:  # every smaller batch tried starves its best layout
        from dataclasses import replace

        r = next(iter_rows(search(replace(wl0, global_batch=gb), hw, 12288, SearchOptions(), top_k=1).top))
        assert pipeline_starved(r["pp"], r["vpp"], int(round(r["m"])))


def test_finetuning_plans_the_reference_recipes_batch_not_the_pretraining_law() -> None:
    """LoRA fine-tuning: 32 sequences (Megatron-Bridge 26.06 Llama 3 70B LoRA / SFT tables: GBS 32 at 4,096),
    the only candidate; the bound is that batch, 32 x 4,096 = 131,072 tokens. Pre-training keeps the law."""
    from types import SimpleNamespace

    from mi400plan.batch import FINETUNE_BATCH_SEQS, law_for, law_text

    lora, full = SimpleNamespace(lora_rank=16), SimpleNamespace(lora_rank=0)
    law = law_for(1e12, 4096, None, 7e10, lora)
    assert FINETUNE_BATCH_SEQS == 32 and law.candidates == (32,) and law.start_seqs == 32
    assert law.bound_tokens == law.b_opt_tokens == 131_072
    assert "fine-tuning" in law_text(law) and "B_opt" not in law_text(law)
    # the pre-training law at the same compute: C = 1e12 x 20 x 7e10 = 1.4e24 -> B_opt 0.2920 x C^0.3271
    pre = law_for(1e12, 4096, None, 7e10, full)
    assert pre.rule is None and pre == batch_law(1e12, 4096, None, 7e10)
    assert pre.b_opt_tokens == pytest.approx(0.2920 * 1.4e24 ** 0.3271, rel=1e-9)


def test_sweep_lora_prints_and_reports_the_finetuning_batch(cli) -> None:
    import json

    r = cli(["sweep", "llama3.1-70b", "--sku", "h100", "--gpus", "8", "--finetune", "lora", "--seq", "4096",
             "--top", "1", "--json"])
    d = json.loads(r.stdout)["data"]
    assert d["global_batch_seqs"] == 32 and d["batch"]["law"] == ""
    assert d["batch"]["rule"].startswith("planned: fine-tuning")
    pinned = json.loads(cli(["sweep", "llama3.1-70b", "--sku", "h100", "--gpus", "8", "--finetune", "lora",
                             "--seq", "4096", "--top", "1", "--global-batch", "64", "--json"]).stdout)["data"]
    assert pinned["global_batch_seqs"] == 64 and pinned["batch"]["rule"] == "pinned by --global-batch"
