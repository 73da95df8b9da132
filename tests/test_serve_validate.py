"""``mi400plan validate --serve``: signed errors of the serving model on the bundled InferenceX points
(in-sample and leave-one-source-out) and on the published results it is never fitted to.

Sign convention (hand-checked below): + = the model is optimistic, tokens/s ``predicted / measured - 1``,
latencies ``1 - predicted / measured``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from mi400plan.serve_calibration import CALIBRATION, STACK_CALIBRATION
from mi400plan.serve_validate import (Pricer, case_results, inferencex_cases, loso_predictions,
                                      loso_sources, read_rows, run_id, signed_error, summarize, validation_case)

DATA = Path(__file__).resolve().parent / "data"
HEAD = ("family,sku,framework,model,precision,tp,ep,dpa,isl,osl,conc,tput_per_gpu,median_tpot_s,median_ttft_s,date,"
        "run_url")
RUNS = "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/"
# Two rows written by hand: Llama-3.3-70B on one MI300X (vLLM), 1,024 in / 2,048 out, 300 total tokens/s
# per GPU = 300 x 2048 / 3072 = 200 output tokens/s; DeepSeek-R1 on 8 H200 (TensorRT-LLM), 1,024 / 1,024,
# 400 total = 200 output tokens/s per GPU, run 222's second attempt.
TWO_ROWS = f"""# a comment line
{HEAD}
amd-cdna3,mi300x,vllm,llama3-70b,fp8,1,1,0,1024,2048,4,300.0,0.020,0.200,2025-10-16,{RUNS}111
nvidia-hopper,h200,trt,deepseek-r1,fp8,8,1,0,1024,1024,8,400.0,0.050,0.300,2025-10-16,{RUNS}222/attempts/2
"""


def _bundled(name: str, keep=lambda r: True) -> list[tuple[int, dict[str, str]]]:  # noqa: ANN001
    return [(n, r) for n, r in read_rows((DATA / name).read_text(encoding="utf-8")) if keep(r)]


def test_signed_error_convention_by_hand() -> None:
    assert signed_error("tput", 100.0, 120.0) == pytest.approx(0.20)  # more tokens/s than measured: optimistic
    assert signed_error("ttft", 1.0, 0.8) == pytest.approx(0.20)  # a shorter first token than measured: optimistic
    assert signed_error("tpot", 0.050, 0.060) == pytest.approx(-0.20)  # a longer TPOT than measured: pessimistic
    assert signed_error("ttft", None, 0.8) is None


def test_two_row_file_cases_errors_and_statistics(catalog) -> None:
    rows = read_rows(TWO_ROWS)
    assert [n for n, _ in rows] == [3, 4]  # file lines, the comment and header counted
    a, b = inferencex_cases(catalog, rows)
    # InferenceX's framework labels name the serving stack profiles: vllm on AMD is ROCm vLLM, trt TensorRT-LLM
    assert (a.stack, a.family, a.model_class, a.source, a.role) == ("rocm-vllm", "amd-cdna3", "dense", "111", "fitted")
    assert (b.stack, b.family, b.model_class, b.source, b.role) == ("trtllm", "nvidia-hopper", "moe", "222", "fitted")
    assert a.measured == {"tput": pytest.approx(200.0), "ttft": 0.2, "tpot": 0.02}
    assert b.measured["tput"] == pytest.approx(200.0)
    # Predictions given by hand: (a) 240 tok/s, 150 ms, 25 ms: +20 %, +25 %, -25 %;
    # (b) 180 tok/s, 330 ms, 40 ms: -10 %, -10 %, +20 %.
    pa, pb = {"tput": 240.0, "ttft": 0.15, "tpot": 0.025}, {"tput": 180.0, "ttft": 0.33, "tpot": 0.04}
    ra, rb = case_results([a, b], [pa, pb], None)
    assert ra.error == pytest.approx({"tput": 0.20, "ttft": 0.25, "tpot": -0.25})
    assert rb.error == pytest.approx({"tput": -0.10, "ttft": -0.10, "tpot": 0.20})
    stats = {(s.scope, s.by, s.name, s.metric): s for s in summarize([ra, rb])}
    both = stats[("in-sample", "all", "all", "tput")]
    assert (both.points, both.mean, both.mean_abs, both.max_abs) == (2, pytest.approx(0.05), pytest.approx(0.15),
                                                                     pytest.approx(0.20))
    assert stats[("in-sample", "stack", "rocm-vllm", "tpot")].mean == pytest.approx(-0.25)
    assert stats[("in-sample", "stack/family", "trtllm nvidia-hopper", "ttft")].mean == pytest.approx(-0.10)
    assert not any(s.scope in ("loso", "validation") for s in stats.values())  # no LOSO run, no validation row


def test_queued_and_older_points_are_roles_not_fitted(catalog) -> None:
    """Median TTFT above 2.5 s: queued (never fitted, in its own statistic only); a run more than 100 days before the group's newest:
    older (never fitted, its own scope)."""
    text = TWO_ROWS.replace("0.020,0.200", "0.020,3.000") + \
        f"amd-cdna3,mi300x,vllm,llama3-70b,fp8,1,1,0,1024,2048,8,500.0,0.025,0.250,2025-06-01,{RUNS}333\n"
    q, b, old = inferencex_cases(catalog, read_rows(text))
    assert (q.role, b.role, old.role) == ("queued", "fitted", "older")
    assert loso_sources([q, b, old]) == ["111", "222"]  # the older run is never held out: it was never fitted
    p = {"tput": 100.0, "ttft": 0.1, "tpot": 0.01}
    stats = summarize(case_results([q, b, old], [p, p, p], None))
    assert {(s.scope, s.points) for s in stats if s.by == "all"} == {("in-sample", 1), ("older", 1), ("queued", 1)}


def test_run_id_is_the_actions_run() -> None:
    assert run_id(f"{RUNS}22469096331/attempts/1") == run_id(f"{RUNS}22469096331") == "22469096331"


def test_loso_holds_out_exactly_one_run(catalog) -> None:
    """B200/B300 DeepSeek-R1 (TensorRT-LLM): 12 steady-state points from 7 runs; holding out run 20216641521
    (its 3 points, lines 28, 29 and 31) leaves 9, fewer than TensorRT-LLM's own fit needs (3 per fitted
    figure, 4 figures with 8k-token prompts: 12), so, as ``serve`` would, the family's MoE fit refitted on
    those 9 stands in for it, and predicts those 3 only."""
    ix = _bundled("serve_inferencex.csv", lambda r: r["family"] == "nvidia-blackwell" and r["model"] == "deepseek-r1")
    cases = inferencex_cases(catalog, ix)
    assert sum(c.role == "fitted" for c in cases) == CALIBRATION["nvidia-blackwell/moe"].points == 12
    assert STACK_CALIBRATION["nvidia-blackwell/moe/trtllm"].points == 12
    cv = loso_predictions(catalog, [r for _, r in ix], cases, Pricer(catalog), sources=["20216641521"])
    held = sorted(int(i.split(":")[1]) for i in cv.predicted)
    assert held == [28, 29, 31]
    assert {cv.basis[i] for i in cv.predicted} == {
        "nvidia-blackwell/moe refit on 9 points, 2025-11-02..2026-02-03, standing in for nvidia-blackwell/moe/trtllm "
        "(too few of its points left to refit it)"}
    assert cv.refits == 1
    # the held-out run (2025-12-15) and the refit's newest (2026-02-03): 50 days apart, one generation (<= 100);
    # the family refit's 9 points are all TensorRT-LLM's: the same software
    assert set(cv.same_generation.values()) == {True}


def test_loso_moves_the_window_or_falls_back_like_serve(catalog) -> None:
    """MI355X DeepSeek-R1 (SGLang): holding out the one run in the window (2026-02-27) brings the 8 points of
    the 2025-10-06 runs into it, fewer than SGLang's own fit needs (12: 8k-token prompts), so the family's
    MoE refit on them stands in. MI300X: DeepSeek-R1's only run held out leaves no MoE point, so the family's
    dense calibration prices it (as ``serve`` prices an uncalibrated class), and the reverse (three dense
    ROCm vLLM points of run 18577107964, lines 74-76)."""
    ix = _bundled("serve_inferencex.csv", lambda r: r["family"] == "amd-cdna4" and r["model"] == "deepseek-r1")
    cases = inferencex_cases(catalog, ix)
    assert loso_sources(cases) == ["22469096331"]
    cv = loso_predictions(catalog, [r for _, r in ix], cases, Pricer(catalog))
    assert len(cv.predicted) == 14 == CALIBRATION["amd-cdna4/moe"].points
    assert set(cv.basis.values()) == {"amd-cdna4/moe refit on 8 points, 2025-10-06..2025-10-06, standing in for "
                                      "amd-cdna4/moe/sglang (too few of its points left to refit it)"}
    assert set(cv.same_generation.values()) == {False}  # 2025-10-06 to 2026-02-27: 144 days, older software
    ix = [(n, r) for n, r in _bundled("serve_inferencex.csv")
          if r["family"] == "amd-cdna3" and r["model"] == "deepseek-r1" or n in (74, 75, 76)]
    cases = inferencex_cases(catalog, ix)
    assert sorted(c.model_class for c in cases).count("dense") == 3
    cv = loso_predictions(catalog, [r for _, r in ix], cases, Pricer(catalog))
    tail = "(too few of its points left to refit it)"
    assert set(cv.basis.values()) == {
        f"amd-cdna3/dense refit on 3 points, 2025-10-16..2025-10-16, standing in for amd-cdna3/moe/sglang {tail}",
        f"amd-cdna3/moe refit on 15 points, 2026-02-27..2026-02-27, standing in for amd-cdna3/dense/rocm-vllm {tail}"}
    assert set(cv.same_generation.values()) == {False}  # another class's calibration: not the same software


def test_validation_rows_stack_family_and_per_gpu(catalog) -> None:
    rows = {(r["source"], r["sku"], r["model"], r["isl"], r["kind"]): (n, r)
            for n, r in _bundled("serve_validation.csv")}
    t1 = validation_case(catalog, *rows[("T1", "h200", "llama3.1-70b", "1000", "max_throughput")])
    assert (t1.stack, t1.family, t1.role) == ("trtllm", "nvidia-hopper", "validation")
    assert t1.measured["tput"] == pytest.approx(5174 / 2)  # the TP2 server's 5,174 output tokens/s, per GPU
    d1 = validation_case(catalog, *next(v for k, v in rows.items() if k[:2] == ("D1", "mi300x")))
    assert (d1.stack, d1.date) == ("sglang", "2025-03-18")
    m1 = validation_case(catalog, *rows[("M1", "mi355x", "llama2-70b", "222", "max_throughput")])
    assert (m1.stack, m1.family, m1.measured["tput"]) == ("rocm-vllm", "amd-cdna4", 11630.7)


def test_m2_rows_carry_nvidias_configuration(catalog) -> None:
    """MLPerf v5.1 DeepSeek-R1 rows, from closed/NVIDIA/configs/<system>/<scenario>/deepseek-r1.py: sequences
    in flight per 8-GPU replica = min(max_concurrency, 8 x the per-attention-rank batch): 4,096 =
    min(5,120, 8 x 512) everywhere but GB300 Offline, 10,240 = min(10,240, 8 x 1,536); Offline token budget
    per rank 4,608 (B200, GB200) and 6,656 (GB300); no speculative decoding."""
    rows = {(r["sku"], r["kind"]): (n, r) for n, r in _bundled("serve_validation.csv") if r["source"] == "M2"}
    cap = min(5120, 8 * 512)
    want = {("b200", "max_throughput"): (cap, 4608), ("gb200", "max_throughput"): (cap, 4608),
            ("gb300", "max_throughput"): (min(10240, 8 * 1536), 6656), ("b200", "slo_throughput"): (cap, None),
            ("gb200", "slo_throughput"): (cap, None), ("gb300", "slo_throughput"): (cap, None)}
    assert set(rows) == set(want)
    for key, (seqs, budget) in want.items():
        m = validation_case(catalog, *rows[key]).spec
        assert (m.max_seqs, m.prefill_tokens, m.dpa, m.tp) == (seqs, budget, True, 8)


def test_priced_concurrency_keeps_the_submissions_cap(catalog) -> None:
    """GB300 Server: uncapped, the best rate within the limits runs more than 1,024 sequences (with DeepSeek-R1's
    length-biased outputs the KV cache binds near 4,000, below NVIDIA's 4,096 cap); priced with a cap of 1,024
    it runs 1,024 (the grid's top), at no more output tokens/s."""
    from dataclasses import replace

    from mi400plan.serve_calibration import predict_measured

    n, r = next((n, r) for n, r in _bundled("serve_validation.csv")
                if (r["source"], r["sku"], r["kind"]) == ("M2", "gb300", "slo_throughput"))
    case = validation_case(catalog, n, r)
    hw = Pricer(catalog).hardware(case.spec.sku, case.spec.precision)
    capped = predict_measured(catalog, replace(case.spec, max_seqs=1024), hw)
    free = predict_measured(catalog, replace(case.spec, max_seqs=None), hw)
    assert free["concurrency"] > 1024 and capped["concurrency"] == 1024
    assert capped["output_tps"] <= free["output_tps"]


@pytest.fixture(scope="module")
def no_loso(catalog):
    from mi400plan.api.serve_validate import validate_serve

    return validate_serve(catalog, loso=False)


@pytest.mark.parametrize("group,key", [("sglang amd-cdna3", "amd-cdna3/moe/sglang"),
                                       ("vllm nvidia-blackwell", "nvidia-blackwell/dense/vllm"),
                                       ("vllm nvidia-hopper", "nvidia-hopper/dense/vllm")])
def test_in_sample_statistics_are_the_stored_stack_calibration_errors(no_loso, group: str, key: str) -> None:
    """Each stack/family group of one class is priced with the stack's own fit, as ``serve --stack`` prices
    it: its in-sample mean and max |error| are the ones ``STACK_CALIBRATION`` stores (vLLM on Blackwell:
    6.9 % / 39.9 %, where the family fit over TensorRT-LLM and vLLM leaves it 8.5 % / 41.2 %)."""
    g = {(s.scope, s.by, s.name, s.metric): s for s in no_loso.groups}
    c = STACK_CALIBRATION[key]
    tput, tpot = g[("in-sample", "stack/family", group, "tput")], g[("in-sample", "stack/family", group, "tpot")]
    assert tput.points == c.points
    assert (tput.mean_abs, tput.max_abs, tpot.mean_abs) == pytest.approx((c.tput_mean_err, c.tput_max_err,
                                                                           c.tpot_mean_err), abs=1e-3)


def test_cases_are_priced_as_serve_prices_them(catalog) -> None:
    """An H100 Llama-3.3-70B point measured on vLLM (InferenceX line 558) is priced on vLLM's Hopper fit
    (HBM efficiency 0.80), not the family's (0.90): the same hardware ``serve --stack vllm`` builds."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import predict

    case = inferencex_cases(catalog, [(n, r) for n, r in _bundled("serve_inferencex.csv") if n == 558])[0]
    assert (case.spec.sku, case.spec.model, case.spec.conc) == ("h100", "llama3-70b", 4)
    assert case.stack == "vllm" and STACK_CALIBRATION["nvidia-hopper/dense/vllm"].hbm_efficiency == 0.8
    hw, _ = serve_hardware(catalog, "h100", case.spec.precision, "nominal", matmul=None, hbm=None,
                           model_class="dense", stack="vllm")
    assert hw.hbm_eff == 0.8
    got = Pricer(catalog).stored(case)
    assert got["tpot"] == pytest.approx(float(predict(catalog, case.spec, hw)["tpot"]), rel=1e-12)
    family = Pricer(catalog).price(case, CALIBRATION["nvidia-hopper/dense"])
    assert family["tpot"] != pytest.approx(got["tpot"], rel=1e-3)


def test_validation_figures_are_the_readmes(no_loso) -> None:
    """The README's validation table: A1 (AMD's vLLM latency table) 5 % mean, 8 % max, signed mean 0 % (12 % mean,
    20 % max, every point too slow before the CPU time per scheduled sequence was fitted); O1 (OCI) 26 % mean,
    33 % max, every point predicted too fast (+26 %)."""
    g = {(s.scope, s.by, s.name, s.metric): s for s in no_loso.groups}
    a1, o1 = g[("validation", "source", "A1", "tput")], g[("validation", "source", "O1", "tput")]
    assert a1.points == 3 and o1.points == 5
    assert (a1.mean, a1.mean_abs, a1.max_abs) == pytest.approx((-0.00, 0.05, 0.08), abs=0.01)
    assert (o1.mean, o1.mean_abs, o1.max_abs) == pytest.approx((0.26, 0.26, 0.33), abs=0.01)


def test_every_bundled_row_is_reported_once(no_loso) -> None:
    def data_lines(name: str) -> int:
        text = (DATA / name).read_text(encoding="utf-8").splitlines()
        return len(list(csv.DictReader(s for s in text if not s.startswith("#"))))

    assert sum(r.dataset == "inferencex" for r in no_loso.rows) == data_lines("serve_inferencex.csv")
    assert sum(r.dataset == "validation" for r in no_loso.rows) == data_lines("serve_validation.csv")
    assert no_loso.loso_sources == 0 and all(r.loso_tput_error is None for r in no_loso.rows)
    assert not any(g.scope == "loso" for g in no_loso.groups)


def test_cli_serve_refuses_a_runs_file_and_bands(cli, tmp_path) -> None:
    r = cli(["validate", str(tmp_path / "runs.csv"), "--serve"])
    assert r.exit_code == 2 and "RUNS" in r.output
    r = cli(["validate", "--serve", "--write-bands", str(tmp_path), "--json"])
    assert r.exit_code == 2 and json.loads(r.stdout)["errors"][0]["code"] == "usage"


def test_cli_serve_table_shows_the_published_results(cli) -> None:
    r = cli(["validate", "--serve", "--no-loso"])
    assert r.exit_code == 0, r.output
    assert "Published results never fitted" in r.output and "leave-one-source-out: not run" in r.output
    assert "M1: MLCommons MLPerf Inference v5.1" in r.output


def test_cli_serve_table_fits_80_columns_as_tables(cli, monkeypatch) -> None:
    """At 80 columns every table prints as a table (no one-record-per-row fallback, whose rows are
    '<header>  <value>' lines under a rule): one per source, its stacks in the title."""
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(["validate", "--serve", "--no-loso"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert not any(line.startswith("source ") or line.startswith("group ") and "points" not in line for line in lines)
    assert "D1 (2025-03-18), stacks sglang (mi300x), trtllm (h200)" in r.stdout
    assert any(line.split()[:2] == ["trtllm", "nvidia-hopper"] for line in lines)


@pytest.mark.slow  # every refit: about 20-40 s
def test_loso_covers_every_fitted_point(catalog) -> None:
    """11 runs have points inside their group's window: the three 2025-10-16 nightly runs (Llama-3.3-70B and
    the Hopper DeepSeek-R1 points), 22469096331 (MI300X/MI355X, 2026-02-27) and the seven Blackwell/Hopper
    DeepSeek-R1 runs of 2025-11-02..2026-02-03; the two MI355X runs of 2025-10-06 are older than the window."""
    from mi400plan.api.serve_validate import validate_serve

    res = validate_serve(catalog, loso=True)
    assert res.loso_sources == 11
    for r in res.rows:
        assert (r.loso_tput_error is not None) == (r.role in ("fitted", "queued")), r.id
    loso = {(g.by, g.name, g.metric): g for g in res.groups if g.scope == "loso"}
    assert loso[("all", "all", "tput")].points == sum(r.role == "fitted" for r in res.rows)
    # same generation: all but MI300X's and MI355X's SGLang DeepSeek-R1 (15 + 14 points of run 22469096331) and
    # the 10 Hopper SGLang DeepSeek-R1 points whose held-out run leaves SGLang too few points for its own fit
    # (the family's MoE refit over TensorRT-LLM and SGLang stands in: other software)
    same = {(g.by, g.name, g.metric): g for g in res.groups if g.scope == "loso-same-generation"}
    assert same[("all", "all", "tput")].points == loso[("all", "all", "tput")].points - 29 - 10
    assert same[("stack/family", "sglang nvidia-hopper", "tput")].points == 5
