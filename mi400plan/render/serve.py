"""Table rendering for ``serve``: Pareto (or SLA-ranked) points per SKU, the SKU comparison at equal
interactivity, rejection counts and what each SKU's figures rest on."""

from __future__ import annotations

from typing import Any

from mi400plan.render import table_renderer
from mi400plan.render.table import KEEP, print_table
from mi400plan.results.serve import ServeResult, ServeRow
from mi400plan.units import fmt_bytes, fmt_count


def _layout(r: ServeRow) -> str:
    lay = r.layout
    t = lay.text()
    if lay.disaggregated:
        t += f" +{lay.prefill_gpus_per_decode_replica:.1f} prefill GPUs"
    elif lay.replicas > 1:
        t += f" x{lay.replicas}"
    return t


def _ms(x: float) -> str:
    if x >= 10:
        return f"{x:,.1f} s"
    return f"{x * 1e3:,.1f} ms" if x < 0.1 else f"{x * 1e3:,.0f} ms"


def _tps(r: ServeRow) -> str:
    """Output tokens/s per GPU and the half-width of its range (pessimistic..optimistic corners)."""
    sp = r.ranges.get("tokens_per_s_per_gpu")
    text = f"{r.tokens_per_s_per_gpu:,.0f}"
    if sp is not None and r.tokens_per_s_per_gpu > 0:
        text += f" ±{(sp.high - sp.low) / 2 / r.tokens_per_s_per_gpu:.0%}"
    return text


NARROW = 100  # columns below which the table drops its bound column
_BOUND = {"memory": "HBM", "compute": "FLOPs", "communication": "comm", "overhead": "kernels"}


def _money(x: float | None) -> str:
    return "-" if x is None else f"${x:,.2f}"


def _kv_room(res: ServeResult, rows: list[ServeRow]) -> str:
    """The KV-limited maximum concurrency of each listed layout (as vLLM reports it at start-up)."""
    seen: dict[str, str] = {}
    for r in rows:
        text = _layout(r).split(" +")[0]
        n = r.memory_bytes.max_concurrency
        seen.setdefault(text, f"{n:,}+" if any("KV room for at least" in x for x in r.notes) else f"{n:,}")
    items = "; ".join(f"{k} {v}" for k, v in seen.items())
    per = (f"{res.kv_tokens_per_sequence:,.0f} tokens per sequence (length-biased: E[I] + E[O^2] / E[O])"
           if res.kv_tokens_per_sequence > res.input_len + res.output_len else
           f"{res.input_len + res.output_len:,} tokens per sequence")
    return f"KV-limited concurrency per replica at {per} (the fit model): {items}"


@table_renderer("serve")
def render(res: ServeResult, console: Any) -> None:
    sla = ", ".join(
        ([f"TPOT <= {res.sla['tpot_s'] * 1e3:g} ms"] if "tpot_s" in res.sla else [])
        + ([f"TTFT <= {res.sla['ttft_s'] * 1e3:g} ms"] if "ttft_s" in res.sla else [])
        + ([f">= {res.sla['interactivity']:g} tok/s/user"] if "interactivity" in res.sla else []))
    head = (f"{res.model}, {res.precision} weights, {res.kv_dtype} KV, {res.input_len:,} in / {res.output_len:,} out"
            + (f" (varied: decode context {res.decode_context_tokens:,.0f} tokens, length-biased)"
               if res.decode_context_tokens > res.input_len + res.output_len / 2.0 else "")
            + (", disaggregated" if res.disaggregated else ""))
    cost = any(r.cost_per_mtok_output is not None for r in res.rows)
    for s in res.skus:
        rows = [r for r in res.rows if r.sku == s.sku]
        # Under 100 columns the bound column (in JSON as ``bound``) gives way, and an SLA verdict that
        # flips inside the ranges is marked on the TPOT instead.
        narrow = console.width < NARROW
        cols = ["#", "layout", ("conc", "right"), ("tok/s/GPU", "right"), ("tok/s/user", "right"),
                ("TTFT", "right"), ("TPOT", "right"), ("mem/GPU", "right")]
        if not narrow:
            cols.append("bound")
        if cost:
            cols.append(("$/Mtok out", "right"))
        out = []
        for r in rows:
            flip = "*" if r.sla_flips else ""
            line = [r.rank, _layout(r), r.concurrency, _tps(r), f"{r.tokens_per_s_per_user:,.1f}", _ms(r.ttft_s),
                    _ms(r.tpot_s) + (flip if narrow else ""), fmt_bytes(r.memory_bytes.total, binary=False)]
            if not narrow:
                line.append(_BOUND.get(r.bound, r.bound) + flip)
            if cost:
                line.append(_money(r.cost_per_mtok_output))
            out.append(line)
        what = f"Best layouts for {sla}" if sla else "Pareto curve"
        title = f"{what}: {s.sku}, {s.gpus} GPUs - {head}"
        if not out:
            why = f"no layout meets the SLA: {s.sla_binding} binds" if s.sla_binding else "nothing fits"
            near = f"; nearest: {s.nearest}" if s.nearest else ""
            console.print(f"{title}\n  {why}{near}", markup=False, highlight=False)
            continue
        print_table(console, cols, out, title=title,
                    caption="conc = sequences in flight per replica; tok/s = output tokens, +- half the pessimistic-"
                    "optimistic range (JSON ranges)" + ("" if narrow else "; bound = what dominates the decode step")
                    + "; * = the SLA verdict flips inside the ranges")
        console.print(_kv_room(res, rows), markup=False, highlight=False)
    if res.comparison:
        _comparison(res, console)
    _fleet(res, console)
    _scenario(res, console)
    console.print(f"Order: {res.order}.", markup=False, highlight=False)
    if res.sla or res.comparison:
        console.print(f"Ranked by {res.rank_rule}.", markup=False, highlight=False)
    rej = ", ".join(f"{k} {v:,}" for k, v in res.rejected.items() if v)
    console.print(f"Evaluated {res.evaluated:,} layout x concurrency points: {res.valid:,} fit"
                  + (" and meet the SLA" if res.sla else "") + f"; rejected: {rej or 'none'}.",
                  markup=False, highlight=False)
    for s in res.skus:
        extra = f", ${s.gpu_hour_cost:,.2f}/GPU-hour ({s.cost_source})" if s.gpu_hour_cost is not None else ""
        extra += f", {s.gpus_per_mw:,.0f} GPUs per MW of rack wall power" if s.gpus_per_mw else ""
        console.print(
            f"{s.sku}: {s.compute_precision} peak {s.peak_flops / 1e12:,.0f} TFLOP/s x GEMM ceiling {s.matmul:.2f}, HBM "
            f"{s.hbm_bandwidth / 1e12:.1f} TB/s x {s.hbm:.2f}, {s.hbm_capacity / 1e9:,.0f} GB, kernel overhead "
            f"{s.kernel_overhead_s * 1e6:.0f} us{_host_text(s)} ({s.calibration}){extra}",
            markup=False, highlight=False)
        if s.serving_stack:
            why = ("given by --stack" if s.serving_stack_basis == "--stack"
                   else f"{s.serving_stack_basis}; --stack overrides")
            console.print(f"  serving stack: {s.serving_stack}; {why}", markup=False, highlight=False)
        if s.ttft_rule:
            console.print(f"  {s.ttft_rule}", markup=False, highlight=False)
    n = len(res.flips)
    if not res.ranges:
        console.print("Estimate ranges not evaluated (--no-ranges).", markup=False, highlight=False)
        return
    console.print(f"{n} conclusion{'s' if n != 1 else ''} flip inside the estimate ranges (see warnings)." if n
                  else "No ranking or SLA verdict flips inside the estimate ranges.", markup=False, highlight=False)


def _scheduler_whose(res: ServeResult) -> str:
    """Whose scheduler defaults the scenario ran: each SKU's serving stack (vLLM's where it has none)."""
    names = sorted({(s.serving_stack or "vLLM's").split(" ")[0] for s in res.skus})
    return f"the serving stack's defaults: {', '.join(names)}" if names != ["vLLM's"] else "vLLM's defaults"


def _no_rate(sc: Any) -> str:
    """What a req/s cell reading ``no: ...`` means, where the scenario has latency limits to miss."""
    if sc.ttft_p99_s is None and sc.tpot_p99_s is None:
        return ""
    return " ('no: X' where no rate meets the limits; X fails first)"


def _fleet(res: ServeResult, console: Any) -> None:
    """``--racks`` / ``--gpus`` / ``--demand``: whole replicas of each SKU's chosen point over the fleet (with
    ``--scenario``, the scenario's answer, named in the title)."""
    if not res.fleet:
        return
    sc = res.fleet[0].scenario
    # The scenario's $/Mtok is the answer's (the steady state's is in its table above); tok/s/user gives way
    # first at a narrow width (in JSON as tokens_per_s_per_user).
    priced = sc is not None and any(f.cost_per_mtok_output is not None for f in res.fleet)
    cols = ["SKU", ("GPUs", "right"), ("racks", "right"), "point", ("replicas", "right"), ("users", "right"),
            ("tok/s/user", "right", "secondary"), ("output tok/s", "right"), ("requests/s", "right")]
    if priced:
        cols.append(("$/Mtok out", "right"))
    out = []
    for f in res.fleet:
        point = f.point.replace(" req/s", KEEP + "req/s")  # a rate wraps whole, with its unit
        line = [f.sku, f"{f.fleet_gpus:,}", "-" if f.racks is None else f"{f.racks:,}", point, f"{f.replicas:,}",
                f"{f.users:,}", f"{f.tokens_per_s_per_user:,.1f}", fmt_count(f.output_tokens_per_s),
                f"{f.requests_per_s:,.1f}"]
        if priced:
            line.append(_money(f.cost_per_mtok_output))
        out.append(line)
    what = f"{sc} scenario answer" if sc else "point"
    title = (f"Fleet for --demand {res.fleet[0].demand}: replicas of each SKU's {what}" if res.fleet[0].demand
             else f"Fleet: whole replicas of each SKU's {what}")
    if sc:
        how = ("users = replicas x sequences in flight (Little's law: rate x mean latency"
               + ("; offline: --max-seqs" if sc == "offline" else "") + "); tok/s/user = 1 / median TPOT; "
               "output tok/s = replicas x rate x mean output; $/Mtok out = the decode share of GPU time at that rate.")
    else:
        how = "users = replicas x sequences in flight; output tok/s = tok/s/GPU x GPUs in replicas."
    size = (" replicas = ceil(demand / one replica's rate); racks = ceil(GPUs / GPUs per rack)."
            if res.fleet[0].demand else "")
    print_table(console, cols, out, title=title, caption=f"Point: {res.fleet[0].basis}. {how}{size}")
    missing = [s.sku for s in res.skus if s.sku not in {f.sku for f in res.fleet}]
    if sc and missing:
        console.print(f"No fleet for {', '.join(missing)}: no simulated layout meets the {sc} limits.",
                      markup=False, highlight=False)


def _comparison(res: ServeResult, console: Any) -> None:
    """Each SKU's best tok/s/GPU (and lowest $/Mtok when priced) at each interactivity level; the leader
    under ``res.rank_by`` with its margin over the runner-up."""
    names = [s.sku for s in res.skus]
    priced = any(v is not None for c in res.comparison for v in c.cost_per_mtok_output.values())
    cols: list[Any] = [("tok/s/user >=", "right")] + [(f"{n} tok/s/GPU", "right") for n in names]
    if priced:
        cols += [(f"{n} $/Mtok", "right") for n in names]
    cols.append(f"leader ({res.rank_by})")
    floor = res.sla.get("interactivity")
    out = []
    for c in res.comparison:
        line: list[Any] = [f"{c.interactivity:g}" + ("*" if c.below_sla else "")]
        line += ["-" if c.best.get(n) is None else f"{c.best[n]:,.0f}" for n in names]
        if priced:
            line += [_money3(c.cost_per_mtok_output.get(n)) for n in names]
        line.append(f"{c.leader}{_margin(c, res.rank_by)}" + (" (flips)" if c.flips else "") if c.leader else "-")
        out.append(line)
    bounds = "/".join(t for k, t in (("tpot_s", "TPOT"), ("ttft_s", "TTFT")) if k in res.sla)
    caption = ("each cell is the SKU's own best point at that level"
               + (f"; the SLA's {bounds} bound applies" if bounds else "")
               + (f"; * = below --interactivity {floor:g}: searched without that floor" if floor else ""))
    print_table(console, cols, out, title="SKU comparison at equal interactivity (best layout of each SKU)",
                caption=caption)


def _money3(x: float | None) -> str:
    """Dollars to three significant figures below $10 (cents alone hide the margin the leader column states)."""
    return "-" if x is None else f"${x:,.3g}" if x < 10 else f"${x:,.2f}"


def _margin(c: Any, rank_by: str) -> str:
    """How far the leader is ahead of the runner-up: x tok/s/GPU, or x cheaper / faster (a ratio >= 1)."""
    vals = {"tok-per-gpu": c.best, "cost": c.cost_per_mtok_output}.get(rank_by)
    if vals is None:
        return ""
    got = sorted((v for v in vals.values() if v), reverse=rank_by == "tok-per-gpu")
    if len(got) < 2:
        return ""
    ratio = got[0] / got[1] if rank_by == "tok-per-gpu" else got[1] / got[0]
    return f" {ratio:.2f}x" + (" cheaper" if rank_by == "cost" else "")


def _limit_s(x: float) -> str:
    """A latency limit as it would be typed: ``2 s``, ``450 ms``, ``40 ms`` (not ``2,000 ms``, ``40.0 ms``)."""
    return f"{x:.6g} s" if x >= 1 else f"{x * 1e3:.6g} ms"


def _pcts(p: Any, scale: float) -> str:
    """p50/p90/p99 in one cell, in the column's unit (``scale``: 1e3 for ms, 1 for s)."""
    vals = [p.p50 * scale, p.p90 * scale, p.p99 * scale]
    if any(v != v for v in vals):  # NaN: no samples (every request had one output token)
        return "-"
    digits = 1 if max(vals) < 100 else 0
    return "/".join(f"{v:,.{digits}f}" for v in vals)


def _limit(given: int | None, res: ServeResult, key: str) -> str:
    """The scheduler limit as given, or each SKU's default."""
    if given is not None:
        return f"{given:,}"
    per = {r.sku: getattr(r, key) for r in res.scenario_rows}
    vals = set(per.values())
    if len(vals) == 1:
        return f"{vals.pop():,}"
    return ", ".join(f"{v:,} ({k})" for k, v in per.items())


def _scenario(res: ServeResult, console: Any) -> None:
    """``--scenario``: each SKU's simulated candidate layouts with p50 / p90 / p99 TTFT, TPOT and latency."""
    sc = res.scenario
    if sc is None:
        return
    limits = (f"p99 TTFT <= {_limit_s(sc.ttft_p99_s)}, p99 TPOT <= {_limit_s(sc.tpot_p99_s)} ({sc.limits_source})"
              if sc.ttft_p99_s is not None and sc.tpot_p99_s is not None else "no latency limits")
    metric = {"offline": "requests/s with all requests queued at the start",
              "server": "the largest Poisson rate meeting the limits",
              "interactive": "the largest Poisson rate meeting the limits",
              "single-stream": "one request at a time; ranked by p90 latency"}[sc.name]
    ttft_s = sc.name == "offline"  # queued for minutes: seconds; otherwise milliseconds
    cols = ["SKU", "layout", ("req/s", "right"), ("tok/s/GPU", "right"),
            (f"TTFT {'s' if ttft_s else 'ms'} p50/90/99", "right"), ("TPOT ms p50/90/99", "right"),
            ("latency s p50/90/99", "right")]
    out = []
    for r in res.scenario_rows:
        t = r.layout.text()
        rate = f"{r.requests_per_s:,.2f}" if r.meets else f"no: {r.binding}"
        out.append([r.sku, t, rate, f"{r.tokens_per_s_per_gpu:,.0f}",
                    _pcts(r.ttft_s, 1.0 if ttft_s else 1e3), _pcts(r.tpot_s, 1e3), _pcts(r.latency_s, 1.0)])
    if not out:
        console.print(f"Scenario {sc.name} ({metric}): {limits}\n  no layout fits: nothing to simulate",
                      markup=False, highlight=False)
        return
    print_table(console, cols, out, title=f"Scenario {sc.name} ({metric}): {limits}",
                caption=f"Simulated per request: the {sc.candidates_per_sku} layouts per SKU the steady-state search "
                f"ranks best (--candidates), each SKU's best first; req/s per replica{_no_rate(sc)}; tok/s/GPU = output "
                f"tokens at that rate (JSON: the steady-state figure beside it); continuous batching, chunked "
                f"prefill of {_limit(sc.max_num_batched_tokens, res, 'max_num_batched_tokens')} tokens per "
                f"iteration, at most {_limit(sc.max_num_seqs, res, 'max_num_seqs')} sequences per replica "
                f"(given, or {_scheduler_whose(res)}).")
    console.print(f"Lengths: input {sc.input_lengths}; output {sc.output_lengths}.", markup=False, highlight=False)
    for n in sc.notes:
        console.print(f"Note: {n}.", markup=False, highlight=False)


def _host_text(s: Any) -> str:
    """The framework's CPU time per scheduled sequence per decode step and how it combines with the GPU step
    (``serve.host_bound_step``); empty when there is none."""
    if not s.host_per_seq_s:
        return ""
    how = "hidden behind the GPU step" if s.host_overlap else "added to the step"
    return f", CPU {s.host_per_seq_s * 1e6:.0f} us per sequence per step ({how})"
