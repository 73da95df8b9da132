"""Table rendering of ``mi400plan validate --serve``: the never-fitted published results side by side with
the model, then the signed-error statistics per scope (in-sample, leave-one-source-out, older runs, queued points,
validation) by stack and SKU family."""

from __future__ import annotations

from typing import Any

from mi400plan.render.table import print_lines, print_table

SCOPE_TITLES = {
    "in-sample": "InferenceX calibration points at the stored calibration (in-sample)",
    "loso": "InferenceX calibration points, leave-one-source-out (each run held out of the fit)",
    "loso-same-generation": ("The same, where the refit is of the held-out run's software generation (on its own "
                             "stack's and class's points only, newest run within 100 days)"),
    "older": "InferenceX runs before the calibration window (older software, never fitted)",
    "queued": ("InferenceX points that measured a queue (more clients than the KV cache admits; never fitted): "
               "the running batch at the stack's KV admission and the admission wait in TTFT"),
    "validation": "Published results never fitted (MLPerf Inference, vendors' tables)",
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{round(x * 100):+d}%"


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.0f} ms" if x < 10 else f"{x:.1f} s"


KIND = {"static_batch": "static", "lockstep": "lockstep", "serving": "serving", "max_throughput": "offline",
        "slo_throughput": "server"}


def _stacks(rows: list[Any]) -> str:
    """The serving stacks of one source's rows, by SKU: "stack trtllm", or "stacks: sglang (mi300x), ..."."""
    by: dict[str, list[str]] = {}
    for r in rows:
        skus = by.setdefault(r.stack or "not named", [])
        if r.sku not in skus:
            skus.append(r.sku)
    if len(by) == 1:
        return f"stack {next(iter(by))}"
    return "stacks " + ", ".join(f"{k} ({', '.join(v)})" for k, v in by.items())


def _validation_rows(console: Any, rows: list[Any], dates: dict[str, str]) -> None:
    """The never-fitted published results, one table per source (its date and serving stacks in the title)
    so the rows fit 80 columns: output tokens/s per GPU, then mean TTFT and TPOT where published."""
    print_lines(console, ["Published results never fitted, by source: output tokens/s per GPU, published and "
                          "predicted (model), signed error"])
    by_source: dict[str, list[Any]] = {}
    for r in rows:
        by_source.setdefault(r.source, []).append(r)
    for src, rs in by_source.items():
        title = f"{src} ({dates.get(src, '')}), {_stacks(rs)}"
        body = [[r.sku, r.model, KIND.get(r.kind, r.kind), f"{r.input_len}/{r.output_len}", r.concurrency or "-",
                 _num(r.measured_tokens_per_s_per_gpu), _num(r.predicted_tokens_per_s_per_gpu), _pct(r.tput_error)]
                for r in rs]
        print_table(console, ["sku", "model", "kind", "in/out", ("conc", "right"), ("published", "right"),
                              ("model", "right"), ("error", "right")], body, title=title)
        lat = [r for r in rs if r.measured_ttft_s is not None or r.measured_tpot_s is not None]
        body = [[r.sku, r.model, KIND.get(r.kind, r.kind), r.concurrency or "-", _ms(r.measured_ttft_s),
                 _ms(r.predicted_ttft_s), _pct(r.ttft_error), _ms(r.measured_tpot_s), _ms(r.predicted_tpot_s),
                 _pct(r.tpot_error)] for r in lat]
        if body:
            print_table(console, ["sku", "model", ("kind", "left", "secondary"), ("conc", "right"),
                                  ("TTFT pub.", "right"), ("TTFT model", "right"), ("error", "right"),
                                  ("TPOT pub.", "right"), ("TPOT model", "right"), ("error", "right")], body,
                        title=f"{src}: mean TTFT and TPOT, published (pub.) and predicted (model), signed error")


RATE_TITLE = "MLPerf Server latency percentiles at the published rate"


def _published_rate(console: Any, rows: list[Any], summary: Any) -> None:
    """Each MLPerf Server row simulated at its published per-replica Poisson rate: published (pub.) and
    predicted (model) p50 / p90 / p99 TTFT and p99 TPOT with signed errors; a row beyond the simulated
    capacity says so instead."""
    rs = [r for r in rows if r.published_rate is not None]
    if not rs:
        return
    def pair(pub: float, model: float | None, scale: float, fmt: str) -> str:
        return f"{pub * scale:{fmt}}/" + ("-" if model is None else f"{model * scale:{fmt}}")

    body = []
    for r in rs:
        p = r.published_rate
        over = p.over_capacity is not None
        body.append([f"{r.source} {r.sku}", f"{p.rate_per_replica:.3g}",
                     pair(p.measured_ttft_p50_s, p.predicted_ttft_p50_s, 1.0, ".2f"),
                     pair(p.measured_ttft_p90_s, p.predicted_ttft_p90_s, 1.0, ".2f"),
                     pair(p.measured_ttft_p99_s, p.predicted_ttft_p99_s, 1.0, ".2f"),
                     "over" if over else _pct(p.ttft_p99_error),
                     pair(p.measured_tpot_p99_s, p.predicted_tpot_p99_s, 1e3, ".0f"),
                     "over" if over else _pct(p.tpot_p99_error)])
    print_table(console, ["row", ("req/s", "right"), ("TTFT p50 s", "right"), ("p90 s", "right"),
                          ("p99 s", "right"), ("error", "right"), ("TPOT p99 ms", "right"), ("error", "right")],
                body, title=f"{RATE_TITLE}: published/model, signed error (+ = model too short)")
    lines = [f"{r.source} {r.sku}: {r.published_rate.over_capacity}" for r in rs if r.published_rate.over_capacity]
    s = summary
    if s is not None:
        stat = ("no row within the simulated capacity" if not s.points else
                f"signed mean {_pct(s.mean)}, mean |error| {s.mean_abs * 100:.0f}%, max {s.max_abs * 100:.0f}%")
        lines.append(f"p99 TTFT at the published rate: {stat} over {s.points} of {s.rows} rows "
                     f"({s.over_capacity} beyond the simulated capacity)")
    lines.append("req/s: the system's completed samples/s x tp / its GPUs, one replica's Poisson rate, simulated "
                 "(serve --scenario server's run: 500 requests measured); over: beyond the simulation's saturated "
                 "rate (every slot busy), where its queue grows without bound")
    print_lines(console, lines)


def _cell(stat: Any, n: int) -> str:
    if stat is None:
        return "-"
    text = f"{round(stat.mean * 100):+d}/{stat.mean_abs * 100:.0f}/{stat.max_abs * 100:.0f}"
    return text if stat.points == n else f"{text} ({stat.points})"


def _scope(console: Any, scope: str, groups: list[Any], title: str) -> None:
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for g in groups:
        if g.scope == scope:
            keyed.setdefault((g.by, g.name), {})[g.metric] = g
    if not keyed:
        return
    body = []
    for (_, name), m in keyed.items():  # all, then by stack, family, stack and family, source: the names tell
        n = m["tput"].points if "tput" in m else 0
        body.append([name, n, *(_cell(m.get(k), n) for k in ("tput", "ttft", "tpot"))])
    print_table(console, ["group", ("points", "right"), ("tok/s/GPU %", "right"), ("TTFT %", "right"),
                          ("TPOT %", "right")], body, title=title)


def _closed_loop(console: Any, groups: list[Any]) -> None:
    """The InferenceX points' published p99 TTFT against their simulated closed loops, by group."""
    body = [[g.name, g.points, _cell(g, g.points)] for g in groups if g.scope == "closed-loop"]
    if body:
        print_table(console, ["group", ("points", "right"), ("p99 TTFT %", "right")], body,
                    title="InferenceX p99 TTFT, never fitted")


def render_serve_validate(result: Any, console: Any) -> None:
    _validation_rows(console, [r for r in result.rows if r.dataset == "validation"],
                     {x.key: x.date for x in result.sources})
    _published_rate(console, result.rows, result.published_rate_summary)
    for scope, title in SCOPE_TITLES.items():
        if scope == "loso" and result.loso_sources:
            title = (f"{title}: {result.loso_sources} runs, {result.loso_refits} refits, "
                     f"{result.loso_seconds:.1f} s")
        _scope(console, scope, result.groups, title)
    _closed_loop(console, result.groups)
    lines = ["each cell: signed mean/mean |error|/max |error|, in % (points in brackets where a metric has "
             "fewer); groups: all, each serving stack, each SKU family, each stack on each family (validation: "
             "each source); error = predicted / measured - 1 for tokens/s, 1 - predicted / measured for TTFT and TPOT: "
             "+ = the model is optimistic (more tokens/s, shorter latency than measured)",
             "InferenceX TTFT and TPOT are medians, the published results' means; InferenceX tokens/s are its total "
             "tokens/s per GPU x output/(input + output)",
             f"leave-one-source-out source: {result.source_definition}",
             "InferenceX p99 TTFT: each fitted point's published 99th percentile against its closed loop simulated "
             "as its client ran it (conc clients, 10 prompts each, the start's burst of conc prompts included)"]
    if not result.loso_sources:
        lines.append("leave-one-source-out: not run (--no-loso)")
    lines += result.notes
    lines.append("every InferenceX point with its errors: --json or --format csv")
    lines.append("kind: static = a fixed batch; lockstep = a closed loop of one length; offline = every request "
                 "queued at once (MLPerf Offline); server = the highest rate within latency limits (MLPerf Server)")
    lines += [f"{s.key}: {s.title} ({s.date})" for s in result.sources]
    print_lines(console, lines)
