"""The drawings behind ``--plot`` for fit, sweep, serve, comm and rack (see ``mi400plan.render.plot``).

Units on every axis: memory in GB (10^9 bytes, the tables' unit) with GiB (2^30 bytes) on a second
axis, bus bandwidth in GB/s (1e9 bytes/s, one
direction, nccl-tests' busbw), power in kW (1e3 W), step time in seconds. Each series has a legend
label; a footer names the inputs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mi400plan.render.plot import GIB, footer, plotter

GB = 1e9

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from mi400plan.results.comm import CommResult
    from mi400plan.results.fit import FitResult
    from mi400plan.results.rack import RackResult
    from mi400plan.results.serve import ServeResult
    from mi400plan.results.sweep import SweepResult

# Memory parts in the order they stack, with the legend label each series carries.
_FIT_PARTS = (
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer states"),
    ("activations", "activations"),
    ("kv_cache", "KV cache"),
    ("reserve", "runtime reserve"),
)


@plotter("fit")
def draw_fit(result: FitResult, fig: Figure) -> None:
    """One SKU, or a layout that fits somewhere: per-GPU memory by part, stacked, capacity marked. Several
    SKUs none of which fits as given (``--sku all`` on one GPU): each SKU at its own fitting layout (the
    table's "fewest GPUs that fit"), sorted by GPUs then memory. Memory in GB (10^9 B) as in the table,
    GiB on the top axis."""
    several = len(result.rows) > 1 and not any(r.fits for r in result.rows) and any(r.min_layout for r in result.rows)
    if several:
        _fit_fewest(result, fig)
    else:
        _fit_parts(result, fig)
    footer(fig, f"mi400plan fit {result.model.name} --mode {result.mode}; reserve {result.reserve}; "
           "capacity = usable HBM from each accelerator profile")


def _fit_parts(result: FitResult, fig: Figure) -> None:
    ax = fig.add_subplot()
    rows = list(reversed(result.rows))  # first SKU on top
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for key, label in _FIT_PARTS:
        vals = [getattr(r.memory_bytes, key) / GB for r in rows]
        if not any(vals):
            continue
        ax.barh(y, vals, left=left, label=label, height=0.7)
        left = [a + b for a, b in zip(left, vals)]
    caps = [(i, r.capacity_bytes / GB) for i, r in enumerate(rows) if r.capacity_bytes is not None]
    if caps:
        ax.vlines([c for _, c in caps], [i - 0.45 for i, _ in caps], [i + 0.45 for i, _ in caps], linewidths=2.5,
                  color="black", zorder=3, label="usable HBM capacity")
    for i, r in enumerate(rows):
        if r.min_layout and not r.fits:
            ax.annotate(f"fits from {r.min_gpus:,} GPUs: {r.min_layout}", (left[i], i), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=7, color="0.25")
    ax.set_yticks(y, [f"{r.sku} ({_fit_word(r.verdict)})" for r in rows])
    layout = _layout_text(result.rows[0].layout) if result.rows else ""
    ax.set_title(f"{result.model.display_name}: {result.mode} memory per GPU{layout}")
    ax.set_xlim(0, max([*left, *(c for _, c in caps)], default=1) * (1.45 if any(r.min_layout for r in rows) else 1.05))
    _memory_axes(fig, ax, len(rows))


def _fit_fewest(result: FitResult, fig: Figure) -> None:
    """Each SKU's memory per GPU at its fewest-GPU fitting layout against its capacity, sorted by GPUs
    then memory; SKUs with no fitting layout (capacity not disclosed) listed last, without a bar."""
    from matplotlib.patches import Patch

    ax = fig.add_subplot()
    fitting = sorted((r for r in result.rows if r.min_memory_bytes is not None and r.min_gpus),
                     key=lambda r: (r.min_gpus, r.min_memory_bytes, r.sku))
    other = [r for r in result.rows if r not in fitting]
    rows = list(reversed(fitting + other))  # fewest GPUs on top
    y = list(range(len(rows)))
    need = [r.min_memory_bytes / GB if r in fitting else 0.0 for r in rows]
    ax.barh(y, need, height=0.7, color="tab:green")
    caps = [(i, r.capacity_bytes / GB) for i, r in enumerate(rows) if r.capacity_bytes is not None]
    ax.vlines([c for _, c in caps], [i - 0.45 for i, _ in caps], [i + 0.45 for i, _ in caps], linewidths=2.5,
              color="black", zorder=3)
    for i, r in enumerate(rows):
        if r not in fitting:
            why = "HBM capacity not disclosed" if r.capacity_bytes is None else "no fitting layout found"
            ax.annotate(why, (0, i), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7, color="0.3")
    labels = [f"{r.sku}: {r.min_gpus:,} GPUs ({_flags(r.min_layout)})" if r in fitting else r.sku for r in rows]
    ax.set_yticks(y, labels, fontsize=7 if len(rows) > 16 else 9)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, max([*need, *(c for _, c in caps)], default=1.0) * 1.05)
    given = _layout_text(result.rows[0].layout).strip(" ()")
    ax.set_title(f"{result.model.display_name}, {result.mode}: each SKU at its fewest GPUs that fit\n"
                 f"(none fits as given: {given})", fontsize=10)
    handles = [Patch(color="tab:green", label="memory per GPU at the fewest GPUs that fit"),
               Patch(color="black", label="usable HBM capacity")]
    _memory_axes(fig, ax, len(rows), handles=handles)


def _flags(min_layout: str | None) -> str:
    """``--tp 8 --pp 4`` -> ``TP8 PP4``."""
    import re

    return re.sub(r"--([a-z]+) (\S+)", lambda m: f"{m.group(1).upper()}{m.group(2)}", min_layout or "")


def _memory_axes(fig: Figure, ax: object, nrows: int, handles: list | None = None) -> None:  # noqa: ANN001
    """GB on the bottom axis (the table's unit), GiB on the top one, legend outside, figure tall enough
    for ``nrows`` labelled bars."""
    ax.set_xlabel("memory per GPU on the most loaded rank (GB, 10^9 bytes)")  # type: ignore[attr-defined]
    top = ax.secondary_xaxis("top", functions=(lambda v: v * GB / GIB, lambda v: v * GIB / GB))  # type: ignore[attr-defined]
    top.set_xlabel("same, in GiB (2^30 bytes)", fontsize=8)
    if handles is None:
        _legend_outside(fig, ax)
    else:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    ax.grid(axis="x", alpha=0.3)  # type: ignore[attr-defined]
    fig.set_size_inches(9, max(5.5, 1.6 + 0.28 * nrows))


def _legend_outside(fig: Figure, ax: object) -> None:
    handles, labels = ax.get_legend_handles_labels()  # type: ignore[attr-defined]
    fig.legend(handles, labels, loc="outside right upper", fontsize=8)


def _fit_word(verdict: str) -> str:
    return {"fits": "fits", "tight": "tight", "does_not_fit": "does not fit"}.get(verdict, "n/d")


def _layout_text(layout: dict[str, int | str | bool]) -> str:
    parts = [f"{k.upper()} {v}" for k, v in layout.items() if k in ("tp", "pp", "dp", "ep", "cp") and v not in (1, None)]
    return f" ({', '.join(parts)})" if parts else " (one GPU)"


@plotter("sweep")
def draw_sweep(result: SweepResult, fig: Figure) -> None:
    """Several GPU counts: the scaling curve. One count: step time against memory per GPU."""
    sizes = {p.gpus for p in result.scaling}
    if len(sizes) > 1:
        _sweep_scaling(result, fig)
    else:
        _sweep_tradeoff(result, fig)
    batches = sorted({c.global_batch_tokens for c in result.batch.chosen}) if result.batch else []
    batch = (f"global batch {result.global_batch_tokens:,} tokens" if len(batches) <= 1 else
             f"global batch {batches[0]:,}..{batches[-1]:,} tokens, planned per size")
    footer(fig, f"mi400plan sweep {result.model} --precision {result.precision}; seq {result.seq_len}, "
           f"{batch}; calibrated efficiencies per SKU")


def _sweep_scaling(result: SweepResult, fig: Figure) -> None:
    ax_tp, ax_eff = fig.subplots(1, 2)
    sizes = sorted({p.gpus for p in result.scaling})
    spans = {(r.sku, r.gpus): r.tokens_per_s_per_gpu for r in result.ranges}
    for sku in dict.fromkeys(p.sku for p in result.scaling):
        pts = [p for p in result.scaling if p.sku == sku and p.tokens_per_s_per_gpu is not None]
        xs = [p.gpus for p in pts]
        (line,) = ax_tp.plot(xs, [p.tokens_per_s_per_gpu for p in pts], marker="o", label=sku)
        band = [spans.get((sku, p.gpus)) for p in pts]
        if band and all(s is not None and s.low is not None and s.high is not None for s in band):
            ax_tp.fill_between(xs, [s.low for s in band], [s.high for s in band], color=line.get_color(), alpha=0.15,
                               label=f"{sku} estimate range")
        ax_eff.plot(xs, [100 * (p.scaling_efficiency or 0) for p in pts], marker="o", label=sku)
    for ax in (ax_tp, ax_eff):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{g:,}" for g in sizes])
        ax.minorticks_off()
        ax.set_xlabel("GPUs")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax_tp.set_ylabel("tokens/s per GPU (best layout)")
    ax_tp.set_ylim(0, ax_tp.get_ylim()[1] * 1.05)
    ax_eff.axhline(90, color="0.4", linestyle="--", linewidth=1)
    ax_eff.set_ylabel("scaling efficiency vs smallest size (%)")
    fig.suptitle(f"{result.model}: scaling of the best layout per GPU count")


# Step-time parts as the sweep table's breakdown names them, in stacking order.
_STEP_PARTS = (
    ("compute", "GEMMs"), ("attention", "attention"), ("memory_bound", "memory-bound ops"),
    ("gemm_overhead", "kernel overhead"), ("tp", "TP exposed"), ("cp", "CP exposed"), ("ep", "EP exposed"),
    ("pp", "PP exposed"), ("bubble", "pipeline bubble"), ("dp", "DP exposed"), ("optimizer", "optimizer"),
    ("offload", "offload"), ("host", "host-bound"),
)


def _sweep_tradeoff(result: SweepResult, fig: Figure) -> None:
    """One GPU count: step time against memory per GPU, both axes from zero (listed layouts often differ
    by well under 1 %: the title states the spread), and each listed layout's step split into its parts."""
    ax, ax_parts = fig.subplots(1, 2, width_ratios=(1, 1.25))
    for sku in dict.fromkeys(r.sku for r in result.rows):
        rows = [r for r in result.rows if r.sku == sku]
        pts = ax.scatter([r.memory_bytes.total / GB for r in rows], [r.step_time_s for r in rows], label=sku, zorder=3)
        searched = [r for r in result.pareto if r.sku == sku and r.step_time_s <= 1.5 * best_step(rows)]
        front = ([(r.memory_bytes.total / GB, r.step_time_s) for r in searched] if searched
                 else _non_dominated([(r.memory_bytes.total / GB, r.step_time_s) for r in rows]))
        if len(front) > 1:
            front.sort()
            ax.step([x for x, _ in front], [y for _, y in front], where="post", color=pts.get_facecolor()[0],
                    marker="." if searched else None, linewidth=1, alpha=0.7,
                    label=f"{sku} trade-off front ({'all layouts' if searched else 'listed layouts'})")
        best = min(rows, key=lambda r: r.rank)
        ax.annotate(f"#1 TP{best.layout.tp} PP{best.layout.pp}", (best.memory_bytes.total / GB, best.step_time_s),
                    textcoords="offset points", xytext=(-6, -12), ha="right", fontsize=8)
        ax.axvline(rows[0].memory_bytes.capacity / GB, color=pts.get_facecolor()[0], linestyle=":", linewidth=1,
                   label=f"{sku} HBM capacity")
    gpus = sorted({r.gpus for r in result.rows})
    ax.set_xlabel("memory per GPU (GB, 10^9 B)")
    top = ax.secondary_xaxis("top", functions=(lambda v: v * GB / GIB, lambda v: v * GIB / GB))
    top.set_xlabel("GiB (2^30 B)", fontsize=8)
    ax.set_ylabel("step time (s)")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0, top=max((r.step_time_s for r in result.rows), default=1.0) * 1.15)
    ax.grid(alpha=0.3)
    if result.rows:
        ax.legend(fontsize=7, loc="lower left")
        steps = [r.step_time_s for r in result.rows]
        spread = (max(steps) - min(steps)) / min(steps)
        ax.text(0.02, 0.98, f"listed layouts: {min(steps):.4g} to {max(steps):.4g} s\n(spread {spread:.2%})",
                transform=ax.transAxes, va="top", fontsize=8)
    _step_parts(result, ax_parts)
    where = f" at {gpus[0]:,} GPUs" if len(gpus) == 1 else ""
    fig.suptitle(f"{result.model}: step time vs memory per GPU{where}, and where the step goes")


def _step_parts(result: SweepResult, ax: object) -> None:
    """Each listed layout's step time split into its parts (seconds), best on top."""
    rows = list(reversed(result.rows[:10]))
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for key, label in _STEP_PARTS:
        vals = [getattr(r.time_s, key) for r in rows]
        if sum(vals) <= 0.005 * sum(r.step_time_s for r in rows):
            continue  # under 0.5 % of every step: the table leaves it out too
        ax.barh(y, vals, left=left, height=0.7, label=label)  # type: ignore[attr-defined]
        left = [a + b for a, b in zip(left, vals)]
    from mi400plan.results.sweep import layout_text

    ax.set_yticks(y, [f"{r.sku} #{r.rank} {layout_text(r.layout)}" for r in rows], fontsize=7)  # type: ignore[attr-defined]
    ax.set_xlabel("step time by part (s)")  # type: ignore[attr-defined]
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=3)  # type: ignore[attr-defined]
    ax.grid(axis="x", alpha=0.3)  # type: ignore[attr-defined]


def best_step(rows: list) -> float:  # noqa: ANN001 - SweepRow
    return min(r.step_time_s for r in rows)


def _non_dominated(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both axes (less memory and less time), by increasing memory."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not front or y < front[-1][1]:
            front.append((x, y))
    return front


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_DASHES = ("-", "--", "-.", ":")


@plotter("comm")
def draw_comm(result: CommResult, fig: Figure) -> None:
    """Bus bandwidth against message size per system, with the estimate range as a band."""
    ax = fig.add_subplot()
    systems = list(dict.fromkeys(r.system for r in result.rows))
    curves = {s: tuple(round(r.busbw_bytes_per_s) for r in sorted((r for r in result.rows if r.system == s),
                                                                    key=lambda r: r.size_bytes)) for s in systems}
    for i, system in enumerate(systems):
        rows = sorted((r for r in result.rows if r.system == system), key=lambda r: r.size_bytes)
        xs = [r.size_bytes for r in rows]
        same = [o for o in systems[:i] if curves[o] == curves[system]]  # drawn over an identical curve
        label = f"{system} (same as {same[0]})" if same else system
        # Each series its own marker and dash pattern, so a curve drawn over another stays visible.
        (line,) = ax.plot(xs, [r.busbw_bytes_per_s / 1e9 for r in rows], marker=_MARKERS[i % len(_MARKERS)],
                          markersize=4 + 2 * len(same), linestyle=_DASHES[i % len(_DASHES)], fillstyle="none" if same else "full",
                          label=label)
        if not same and any(r.time_fast_s != r.time_slow_s for r in rows):  # an identical curve's band is drawn
            ax.fill_between(xs, [r.busbw_bytes_per_s * r.time_s / r.time_slow_s / 1e9 for r in rows],
                            [r.busbw_bytes_per_s * r.time_s / r.time_fast_s / 1e9 for r in rows],
                            color=line.get_color(), alpha=0.15, label=f"{system} estimate range")
    ax.set_xscale("log", base=2)
    sizes = sorted({r.size_bytes for r in result.rows})
    ticks = sizes[:: max(1, len(sizes) // 8)]
    ax.set_xticks(ticks, [_size_label(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("message size S (bytes, log scale)")
    ax.set_ylabel("bus bandwidth (GB/s, 1e9 B/s per direction)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{result.op}: bus bandwidth, group {result.group}, stride {result.stride}")
    footer(fig, f"mi400plan comm {result.op} --group {result.group}; busbw as nccl-tests defines it; "
           "fabric profiles' bandwidth, efficiency and latency")


def _size_label(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


# Component kinds grouped as they stack in the rack power bar.
_RACK_GROUPS = (
    ("GPUs", ("gpu",)),
    ("CPUs and memory", ("cpu", "dimm", "memory")),
    ("NICs and DPUs", ("nic", "dpu")),
    ("switch ASICs", ("switch_asic",)),
    ("boards, fans, drives, other", None),
)


@plotter("rack")
def draw_rack(result: RackResult, fig: Figure) -> None:
    """Rack wall power stacked by component group plus conversion loss, with the feeds' usable power."""
    ax = fig.add_subplot()
    rows = list(reversed(result.rows))
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    named = {k for _, kinds in _RACK_GROUPS if kinds for k in kinds}
    for label, kinds in _RACK_GROUPS:
        vals = [sum(c.total_w.nominal for c in r.components if (c.kind in kinds if kinds else c.kind not in named)) / 1e3
                for r in rows]
        if any(vals):
            ax.barh(y, vals, left=left, label=label, height=0.7)
            left = [a + b for a, b in zip(left, vals)]
    ax.barh(y, [r.conversion_loss_w / 1e3 for r in rows], left=left, label="power conversion loss", height=0.7,
            color="0.7")
    ax.vlines([r.feed_capacity_w / 1e3 for r in rows], [i - 0.4 for i in y], [i + 0.4 for i in y], linewidths=2.5,
              color="black", zorder=3, label="feeds' usable power (derated, redundancy)")
    for i, r in enumerate(rows):
        ax.annotate(f"{r.wall_power_w / 1e3:,.1f} kW", (left[i] + r.conversion_loss_w / 1e3, i), xytext=(4, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, [f"{r.rack} ({r.gpus} x {r.sku})" for r in rows])
    ax.set_xlabel("rack wall power, nominal (kW, 1e3 W)")
    ax.set_title("Rack power by component")
    _legend_outside(fig, ax)
    ax.grid(axis="x", alpha=0.3)
    footer(fig, "mi400plan rack; component powers from the rack and accelerator profiles (nominal of each range)")


@plotter("serve")
def draw_serve(result: ServeResult, fig: Figure) -> None:
    """Output tokens/s per GPU against tokens/s per user: each SKU's whole Pareto front (``curves``), the
    listed points marked, the SLA's interactivity floor as a vertical line. With ``--scenario``: what the
    scenario's simulation computed (``plots_scenario``)."""
    if result.scenario is not None:
        from mi400plan.render.plots_scenario import draw_scenario

        draw_scenario(result, fig)
        return
    ax = fig.add_subplot()
    for c in result.curves:
        if not c.tokens_per_s_per_user:
            continue
        line = ax.plot(c.tokens_per_s_per_user, c.tokens_per_s_per_gpu, label=c.sku, linewidth=1.6)[0]
        rows = [r for r in result.rows if r.sku == c.sku]
        ax.scatter([r.tokens_per_s_per_user for r in rows], [r.tokens_per_s_per_gpu for r in rows],
                   color=line.get_color(), s=14, zorder=3)
    floor = result.sla.get("interactivity")
    if floor is None and "tpot_s" in result.sla:
        floor = 1.0 / result.sla["tpot_s"]
    if floor is not None:
        ax.axvline(floor, color="0.3", linestyle="--", linewidth=1, label=f"SLA: {floor:g} tok/s/user")
    ax.set_xlabel("interactivity (output tokens/s per user = 1 / TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if result.curves:
        ax.legend(fontsize=8)
    disagg = ", disaggregated" if result.disaggregated else ""
    ax.set_title(f"{result.model}: throughput vs interactivity, {result.precision} weights, {result.kv_dtype} KV, "
                 f"{result.input_len:,} in / {result.output_len:,} out{disagg}")
    gpus = sorted({s.gpus for s in result.skus})
    footer(fig, f"mi400plan serve {result.model}, {'/'.join(map(str, gpus))} GPUs per SKU; lines: Pareto fronts over "
                "every layout and concurrency; dots: the listed points")
