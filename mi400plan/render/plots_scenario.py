"""``serve --scenario ... --plot PATH``: what the scenario's simulation computed (see ``mi400plan.render.plot``).

* server / interactive: p99 and p50 TTFT (s) and TPOT (ms) of every run of the rate search against the Poisson
  arrival rate (requests/s per replica), one colour per SKU's best simulated layout, the p99 limits as
  horizontal lines and the answer (the largest rate meeting both) marked with a star and a dotted line;
* offline: output tokens/s per GPU against the scheduler's ``max_num_seqs`` tried, the kept one starred,
  the steady-state figure of the layout dotted;
* single-stream: p50 / p90 / p99 request latency (s) of each SKU's best layout.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mi400plan.render.plot import footer

Head = tuple[str, str]  # the title's first line (model, scenario) and its second (the lengths)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from mi400plan.results.serve import ScenarioRow, ServeResult

LOG_SPAN = 30.0  # a y-range wider than this ratio is drawn on a log scale (p99 grows without bound past the knee)


def _layout(r: ScenarioRow) -> str:
    lay = r.layout
    return f"{r.sku} {lay.text()} ({lay.gpus_per_replica} GPU{'s' if lay.gpus_per_replica > 1 else ''})"


def best_rows(result: ServeResult) -> list[ScenarioRow]:
    """Each SKU's first-ranked simulated layout, in the order of the SKUs."""
    out = []
    for s in result.skus:
        rows = sorted((r for r in result.scenario_rows if r.sku == s.sku), key=lambda r: r.rank)
        if rows:
            out.append(rows[0])
    return out


def draw_scenario(result: ServeResult, fig: Figure) -> None:
    sc = result.scenario
    assert sc is not None
    rows = best_rows(result)
    head = f"{result.model}, {sc.name} scenario"
    lengths = f"input {sc.input_lengths.split(';')[0]}, output {sc.output_lengths.split(';')[0]} tokens"
    if not rows:
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no layout fits: nothing was simulated", ha="center", va="center")
        ax.set_title(f"{head}\n{lengths}")
        footer(fig, f"mi400plan serve {result.model} --scenario {sc.name}")
        return
    {"offline": _offline, "single-stream": _single_stream}.get(sc.name, _server)(result, rows, fig, (head, lengths))


def _title(head: Head, what: str) -> str:
    return f"{head[0]}: {what}\n{head[1]}"


def _log_if_wide(ax: Axes, values: list[float]) -> None:
    vals = [v for v in values if v > 0 and math.isfinite(v)]
    if vals and max(vals) / min(vals) > LOG_SPAN:
        ax.set_yscale("log")


def _server(result: ServeResult, rows: list[ScenarioRow], fig: Figure, head: Head) -> None:
    from matplotlib.lines import Line2D

    sc = result.scenario
    assert sc is not None and sc.ttft_p99_s is not None and sc.tpot_p99_s is not None
    fig.set_size_inches(11, 7.5)
    ttft_ax, tpot_ax = fig.subplots(2, 1, sharex=True)
    panels = ((ttft_ax, "ttft_s", 1.0, "TTFT (s)", sc.ttft_p99_s, f"p99 TTFT limit {sc.ttft_p99_s:g} s"),
              (tpot_ax, "tpot_s", 1e3, "TPOT (ms)", sc.tpot_p99_s * 1e3,
               f"p99 TPOT limit {sc.tpot_p99_s * 1e3:g} ms"))
    rates = [p.requests_per_s for r in rows for p in r.search if p.requests_per_s > 0]
    for ax, key, scale, label, limit, limit_label in panels:
        seen: list[float] = [limit]
        for i, r in enumerate(rows):
            c = f"C{i}"
            pts = sorted((p for p in r.search if getattr(p, key) is not None), key=lambda p: p.requests_per_s)
            x = [p.requests_per_s for p in pts]
            p99 = [getattr(p, key).p99 * scale for p in pts]
            p50 = [getattr(p, key).p50 * scale for p in pts]
            seen += p99 + p50
            what = _layout(r) + ("" if r.meets else f": no rate meets ({r.binding} fails)")
            ax.plot(x, p99, color=c, marker="o", markersize=4, linewidth=1.6, label=what)
            ax.plot(x, p50, color=c, marker=".", markersize=4, linewidth=1.0, linestyle="--", label="_p50")
            if r.meets:
                ax.axvline(r.requests_per_s, color=c, linestyle=":", linewidth=1, label="_answer rate")
                ax.plot([r.requests_per_s], [getattr(r, key).p99 * scale], marker="*", markersize=13, color=c,
                        markeredgecolor="black", linestyle="none", zorder=4,
                        label=f"{r.sku} answer: {r.requests_per_s:,.3g} req/s per replica")
        ax.axhline(limit, color="black", linestyle="-.", linewidth=1.2, label=limit_label)
        ax.set_ylabel(label)
        _log_if_wide(ax, seen)
        ax.grid(alpha=0.3)
    if rates and max(rates) / min(rates) > LOG_SPAN:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        tpot_ax.set_xscale("log")
        tpot_ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))  # 0.1 0.2 0.5 1 2 5 ...
        tpot_ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))  # plain numbers, not 10^-1
        tpot_ax.xaxis.set_minor_formatter(NullFormatter())  # unlabelled minor ticks: labels would collide
    else:
        tpot_ax.set_xlim(left=0)
    named = [h for h in ttft_ax.get_lines() if not str(h.get_label()).startswith("_")]
    limits = [h for ax in (ttft_ax, tpot_ax) for h in ax.get_lines() if str(h.get_label()).startswith("p99 ")]
    handles = [h for h in named if h not in limits] + limits
    handles += [Line2D([], [], color="0.3", linewidth=1.6, marker="o", markersize=4, label="solid: p99"),
                Line2D([], [], color="0.3", linewidth=1.0, linestyle="--", marker=".", label="dashed: p50")]
    # under the x-axis label, outside both panels (the layout makes room for it above the footer)
    tpot_ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=4, fontsize=8)
    tpot_ax.set_xlabel("Poisson arrival rate (requests/s per replica)")
    fig.suptitle(_title(head, "p50 and p99 against arrival rate"))  # above the legend, not under it
    footer(fig, f"mi400plan serve {result.model} --scenario {sc.name}; each point one simulated run of the rate "
                f"search ({sc.limits_source.split(':')[0]}); star: the answer, the largest rate meeting both p99 limits")


def _offline(result: ServeResult, rows: list[ScenarioRow], fig: Figure, head: Head) -> None:
    from matplotlib.ticker import StrMethodFormatter

    ax = fig.add_subplot()
    for i, r in enumerate(rows):
        c = f"C{i}"
        pts = sorted(r.search, key=lambda p: p.max_num_seqs)
        ax.plot([p.max_num_seqs for p in pts], [p.tokens_per_s_per_gpu for p in pts], color=c, marker="o",
                linewidth=1.6, label=_layout(r))
        bad = [p for p in pts if not p.meets]
        if bad:
            ax.plot([p.max_num_seqs for p in bad], [p.tokens_per_s_per_gpu for p in bad], color=c, marker="x",
                    markersize=9, linestyle="none", label=f"{r.sku}: KV thrash")
        ax.plot([r.max_num_seqs], [r.tokens_per_s_per_gpu], marker="*", markersize=14, color=c,
                markeredgecolor="black", linestyle="none", zorder=4,
                label=f"{r.sku} answer: {r.tokens_per_s_per_gpu:,.0f} tok/s/GPU at {r.max_num_seqs:,} sequences")
        ax.axhline(r.steady_state_tokens_per_s_per_gpu, color=c, linestyle=":", linewidth=1,
                   label=f"{r.sku} steady-state model: {r.steady_state_tokens_per_s_per_gpu:,.0f} tok/s/GPU")
    ax.set_xlabel("scheduler limit: sequences in flight per replica (max_num_seqs)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_title(head, "throughput against the sequence limit"))
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    footer(fig, f"mi400plan serve {result.model} --scenario offline; every request queued at the start; each point "
                "one simulated run; star: the answer, the highest throughput")


def _single_stream(result: ServeResult, rows: list[ScenarioRow], fig: Figure, head: Head) -> None:
    ax = fig.add_subplot()
    width = 0.25
    for k, (name, style) in enumerate((("p50", "C0"), ("p90", "C1"), ("p99", "C2"))):
        xs = [i + (k - 1) * width for i in range(len(rows))]
        ax.bar(xs, [getattr(r.latency_s, name) for r in rows], width=width, color=style, label=f"{name} latency")
    ax.set_xticks(range(len(rows)), [_layout(r) for r in rows], fontsize=8)
    ax.set_ylabel("request latency (s)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_title(head, "one request at a time"))
    footer(fig, f"mi400plan serve {result.model} --scenario single-stream; ranked by p90 latency (MLPerf)")
