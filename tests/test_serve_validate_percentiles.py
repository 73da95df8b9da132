"""MLPerf Server latency percentiles at the published rate (``serve_percentiles``, ``validate --serve``).

The published figures below are copied by hand from each run's ``mlperf_log_summary.txt`` in
github.com/mlcommons/inference_results_v5.1 (2025-09-09): "Completed samples per second", "Completed tokens per
second", "Mean First Token latency (ns)", "50.00 / 90.00 / 99.00 percentile first token latency (ns)", "99.00
percentile time to output token (ns)"; the system's GPUs from its name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mi400plan.errors import PlannerError
from mi400plan.serve_percentiles import at_rate, capacity_rate, published_from_row
from mi400plan.serve_sim import Limits, LengthDist, MlperfSetup, StepModel
from mi400plan.serve_validate import measured_from_row, read_rows

DATA = Path(__file__).resolve().parent / "data"

# (source, sku): samples/s, tokens/s, system GPUs, mean TTFT ns, p50 / p90 / p99 TTFT ns, p99 TPOT ns
LOGS = {
    ("M1", "mi300x"): (81.68, 24593.77, 8, 918456323, 875073063, 1449459253, 1914647645, 193380124),
    ("M1", "mi325x"): (106.28, 32027.57, 8, 883894465, 825225700, 1441952852, 1755256090, 198309854),
    ("M1", "h100"): (208.63, 61101.32, 16, 425756794, 353683170, 621393828, 1896042016, 145201152),
    ("M1", "h200"): (113.35, 33244.25, 8, 394677348, 356984101, 573316708, 922077067, 180762135),
    ("M1", "b200"): (361.30, 99123.04, 8, 245904862, 244183931, 303431614, 436315697, 132366416),
    ("M1", "gb200"): (178.48, 49359.61, 4, 217699203, 219714879, 282342045, 405591662, 129867240),
    ("M2", "b200"): (4.96, 18592.24, 8, 726163084, 685863288, 1100989452, 1695862246, 72180235),
    ("M2", "gb200"): (44.76, 167578.06, 72, 658701273, 641437563, 964598112, 1245960713, 64452775),
    ("M2", "gb300"): (56.95, 209327.68, 72, 780209668, 746324709, 1135188511, 1939676236, 70849584),
}


def _server_rows() -> dict[tuple[str, str], dict[str, str]]:
    rows = read_rows((DATA / "serve_validation.csv").read_text(encoding="utf-8"))
    return {(r["source"], r["sku"]): r for _, r in rows if r["kind"] == "slo_throughput"}


def test_percentile_columns_are_the_logs() -> None:
    """Every MLPerf Server row carries its log's figures (seconds = ns / 1e9), and the log is the row's: its
    mean TTFT is the row's ``ttft_s`` and its tokens/s over its replicas (system GPUs / tp) the row's
    ``output_tps`` (M1 H100: 61,101.32 / (16 / 2) = 7,637.7)."""
    rows = _server_rows()
    assert set(rows) == set(LOGS)
    for key, (sps, tps, gpus, mean, p50, p90, p99, tpot) in LOGS.items():
        r = rows[key]
        pub = published_from_row(r, key[0])
        assert pub is not None
        assert (pub.samples_per_s, pub.system_gpus) == (sps, gpus)
        assert (pub.ttft_p50_s, pub.ttft_p90_s, pub.ttft_p99_s, pub.tpot_p99_s) == pytest.approx(
            (p50 / 1e9, p90 / 1e9, p99 / 1e9, tpot / 1e9), abs=1e-9)
        assert float(r["ttft_s"]) == pytest.approx(mean / 1e9, abs=1e-6)
        assert float(r["output_tps"]) == pytest.approx(tps / (gpus / int(r["tp"])), abs=0.06)


def test_rate_per_replica_by_hand() -> None:
    """M1 H100: 208.63 samples/s over 16 GPUs in TP2 replicas: 208.63 / 8 = 26.079 per replica; M2 GB200:
    44.76 over 72 GPUs in TP8 replicas: 44.76 / 9 = 4.973; M2 B200: one replica, 4.96."""
    rows = _server_rows()
    got = {k: published_from_row(rows[k], "x").rate_per_replica(int(rows[k]["tp"]))  # type: ignore[union-attr]
           for k in (("M1", "h100"), ("M2", "gb200"), ("M2", "b200"))}
    assert got == pytest.approx({("M1", "h100"): 26.07875, ("M2", "gb200"): 4.97333, ("M2", "b200"): 4.96},
                                abs=1e-4)


def test_loader_keeps_rows_without_the_columns() -> None:
    """A row of the file's older layout (no percentile columns) or with them empty reads as before, with no
    percentiles; a partial set is an error naming the line."""
    old = ("source,sku,model,precision,kv,tp,kind,isl,osl,conc,output_tps,latency_s,tpot_s,ttft_s,dpa\n"
           "O1,mi300x,llama3.1-405b,fp8,bf16,8,static_batch,128,128,1,36,3.530,,,0\n")
    (_, r), = read_rows(old)
    assert published_from_row(r, "f:2") is None
    assert measured_from_row(r).output_tps == 36
    empty = dict(_server_rows()[("M1", "b200")], samples_per_s="", system_gpus="", ttft_p50_s="", ttft_p90_s="",
                 ttft_p99_s="", tpot_p99_s="")
    assert published_from_row(empty, "f:3") is None
    with pytest.raises(PlannerError, match="f:4"):
        published_from_row(dict(empty, ttft_p99_s="1.9"), "f:4")


def _toy(max_seqs: int = 64) -> MlperfSetup:
    """decode 10 ms a step at any batch, prefill 1 ms a token; prompts of 100 tokens, 3 output tokens."""
    sm = StepModel(decode_s=(0.0, *([0.010] * max_seqs)), prefill_tokens=(0.0, 100_000.0), prefill_s=(0.0, 100.0))
    lim = Limits(max_batched_tokens=8192, max_seqs=max_seqs)
    return MlperfSetup(None, None, sm, lim, LengthDist("fixed", (100,)), LengthDist("fixed", (3,)))  # type: ignore[arg-type]


def test_light_load_percentiles_by_hand() -> None:
    """At 0.001 requests/s (a request every 1,000 s on average, each served in 0.12 s) every request finds the
    replica idle: its prompt alone, 100 x 1 ms = 0.100 s to the first token, then two decode steps of 10 ms:
    p50 = p90 = p99 TTFT = 0.100 s, p99 TPOT = 0.010 s."""
    run = at_rate(_toy(), 0.001, warm_s=1.0)
    assert run.over_capacity is None
    assert run.ttft == pytest.approx({"p50": 0.100, "p90": 0.100, "p99": 0.100})
    assert run.tpot_p99 == pytest.approx(0.010)


def test_beyond_capacity_is_reported_not_a_number() -> None:
    """Every prompt costs 100 x 1 ms = 0.1 s of iteration time (P is linear, so batching prompts saves
    nothing): no schedule completes 10 requests/s. At 10 and 20 requests/s the run reports the queue growing
    without bound and gives no percentiles."""
    st = _toy()
    cap = capacity_rate(st)
    assert 0 < cap < 10.0
    for rate in (10.0, 20.0):
        run = at_rate(st, rate, warm_s=1.0)
        assert run.ttft is None and run.tpot_p99 is None
        assert run.over_capacity is not None and "grows without bound" in run.over_capacity
    assert at_rate(st, 0.5 * cap, warm_s=1.0).ttft is not None


@pytest.fixture(scope="module")
def no_loso(catalog):
    from mi400plan.api.serve_validate import validate_serve

    return validate_serve(catalog, loso=False)


def test_section_in_json_and_table(cli, no_loso) -> None:
    """Each of the 9 MLPerf Server rows is simulated at its published per-replica rate (M1 B200: 361.30 / 8 =
    45.16 requests/s); a row has a prediction and its signed errors, or says it is beyond the capacity."""
    rs = [r for r in no_loso.rows if r.published_rate is not None]
    assert sorted((r.source, r.sku) for r in rs) == sorted(LOGS)
    b200 = next(r.published_rate for r in rs if (r.source, r.sku) == ("M1", "b200"))
    assert b200.rate_per_replica == pytest.approx(361.30 / 8)
    assert b200.measured_ttft_p99_s == pytest.approx(0.436315697)
    for r in rs:
        p = r.published_rate
        if p.over_capacity is None:
            assert p.ttft_p99_error == pytest.approx(1 - p.predicted_ttft_p99_s / p.measured_ttft_p99_s)
            assert p.rate_per_replica < p.capacity_per_replica
        else:
            assert p.predicted_ttft_p99_s is None and p.rate_per_replica >= p.capacity_per_replica
    s = no_loso.published_rate_summary
    assert s.rows == 9 and s.points + s.over_capacity == 9
    errs = [r.published_rate.ttft_p99_error for r in rs if r.published_rate.ttft_p99_error is not None]
    assert s.points == len(errs) and s.mean == pytest.approx(float(np.mean(errs)))
    r = cli(["validate", "--serve", "--no-loso"])
    assert r.exit_code == 0 and "MLPerf Server latency percentiles at the published rate" in r.output
    assert "p99 TTFT at the published rate:" in r.output
    d = json.loads(cli(["validate", "--serve", "--no-loso", "--json"]).stdout)["data"]
    assert d["published_rate_summary"]["rows"] == 9
    csv = cli(["validate", "--serve", "--no-loso", "--format", "csv"]).stdout
    assert "published_rate.ttft_p99_error" in csv.splitlines()[0]


# --- InferenceX closed loops: the published p99 TTFT --------------------------------------------------------


@pytest.mark.parametrize("text,ok", [("", None), ("1.028405", 1.028405), ("abc", "not a number"),
                                     ("0", "> 0"), ("-1", "> 0"), ("nan", "> 0"), ("inf", "> 0")])
def test_p99_column_is_read_or_refused(text: str, ok) -> None:
    from mi400plan.serve_percentiles import published_p99_ttft

    if isinstance(ok, str):
        with pytest.raises(PlannerError, match=ok) as e:
            published_p99_ttft({"p99_ttft_s": text}, "serve_inferencex.csv:9")
        assert "serve_inferencex.csv:9" in str(e.value)
    else:
        assert published_p99_ttft({"p99_ttft_s": text}, "x") == ok
    assert published_p99_ttft({}, "x") is None


def test_closed_loop_section(cli, no_loso) -> None:
    """Every fitted InferenceX point with a published p99 TTFT (the 2025-10-16 nightly's, 677 of them) has its
    closed loop simulated, the error ``1 - predicted / measured``; the group statistics are those rows'. The B200
    vLLM FP8 TP1 1k/8k point at 16 sequences published 1.028 s (result file field p99_ttft), its median 0.126 s.
    The figures the README reports: all points +0.7 % signed, 22.7 % mean |error|, 101.6 % max."""
    rs = [r for r in no_loso.rows if r.closed_loop is not None]
    assert len(rs) == 677 and all(r.role == "fitted" and r.dataset == "inferencex" for r in rs)
    b = next(r for r in rs if (r.sku, r.stack, r.precision, r.tp, r.input_len, r.output_len, r.concurrency)
             == ("b200", "vllm", "fp8", 1, 1024, 8192, 16))
    assert b.closed_loop.measured_ttft_p99_s == pytest.approx(1.028405)
    for r in rs:
        c = r.closed_loop
        assert c.ttft_p99_error == pytest.approx(1 - c.predicted_ttft_p99_s / c.measured_ttft_p99_s)
    allg = next(g for g in no_loso.groups if g.scope == "closed-loop" and g.by == "all")
    errs = [r.closed_loop.ttft_p99_error for r in rs]
    assert allg.metric == "ttft_p99" and allg.points == 677 and allg.mean == pytest.approx(float(np.mean(errs)))
    assert (round(allg.mean * 100, 1), round(allg.mean_abs * 100, 1), round(allg.max_abs * 100, 1)) == (0.7, 22.7, 101.6)
    r = cli(["validate", "--serve", "--no-loso"])
    assert "InferenceX p99 TTFT, never fitted" in r.output
    csv = cli(["validate", "--serve", "--no-loso", "--format", "csv"]).stdout
    assert "closed_loop.ttft_p99_error" in csv.splitlines()[0]
