"""Table rendering of ``mi400plan rack``: a breakdown for one rack, a comparison for several."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table
from mi400plan.units import fmt_power


def _say(console: Any, text: str) -> None:
    console.print(text, markup=False, highlight=False)


def _kw(w: float) -> str:
    return f"{w / 1e3:,.1f}"


def _rng_kw(r: Any) -> str:
    return f"{r.low / 1e3:,.1f}-{r.high / 1e3:,.1f}"


def _w(w: float) -> str:
    return f"{w:,.0f}"


def _breakdown(console: Any, row: Any) -> None:
    lines = []
    for c in row.components:
        if c.count == 0:
            continue
        lines.append(
            [
                c.tray,
                c.component,
                c.count,
                _w(c.each_w.nominal),
                _kw(c.total_w.nominal),
                _rng_kw(c.total_w),
                f"{c.liquid_fraction:.2f}",
                c.status,
            ]
        )
    it = row.it_power_w
    lines.append(["", "components (DC)", "", "", _kw(it.nominal), _rng_kw(it), "", ""])
    lines.append(["", "conversion losses (PSU, DC distribution)", "", "", _kw(row.conversion_loss_w), "", "", ""])
    wr = row.wall_power_range_w
    lines.append(["", "wall power (AC in)", "", "", _kw(wr.nominal), _rng_kw(wr), "", ""])
    cap = f", GPU cap {row.gpu_power_cap_w:g} W" if row.gpu_power_cap_w is not None else ""
    load = f", GPU load {row.gpu_load:g}" if row.gpu_load != 1.0 else ""
    print_table(
        console,
        [
            "tray",
            "component",
            ("count", "right"),
            ("W each", "right"),
            ("kW total", "right"),
            ("kW low-high", "right"),
            ("liquid", "right"),
            "status",
        ],
        lines,
        title=escape(f"{row.rack}: {row.display_name}, SKU {row.sku}, {row.gpus} GPUs{cap}{load}")
        + (escape(f" [ROADMAP: {row.roadmap}]") if row.roadmap else ""),
    )


def _verdicts(console: Any, row: Any) -> None:
    fd = row.feeds
    word = "OK" if fd.ok else "OVER BUDGET"
    _say(console, f"Feeds {fd.spec} ({fd.redundancy}, {fd.source_status}): {word}")
    _say(console, f"  {fd.arithmetic}")
    if fd.loading is not None:
        ld = fd.loading
        _say(console, f"  load {_kw(ld.load_va.nominal)} kVA apparent; {ld.arithmetic}")
    if fd.alternatives:
        _say(console, f"  would need (for the high estimate {_kw(fd.load_w.high)} kW): {fd.alternatives[0]}")
        for alt in fd.alternatives[1:]:
            _say(console, f"    or {alt}")
    elif fd.needed:
        _say(console,
            f"  would need (for the high estimate {_kw(fd.load_w.high)} kW): {fd.needed} "
            f"= {_kw(fd.needed_usable_w or 0)} kW usable"
        )
    p = row.psu
    _say(console, 
        f"Power shelves: {p.psus} PSUs x {p.psu_rating_w / 1e3:.2f} kW, {p.redundancy} ({p.spare_psus} spare) "
        f"= {_kw(p.usable_w)} kW DC vs {_kw(p.dc_load_w.nominal)} kW ({_rng_kw(p.dc_load_w)}) DC load "
        f"(components / DC distribution efficiency): "
        + ("OK" if p.ok and p.ok_high else ("OK at nominal, short at high" if p.ok else "SHORT"))
    )
    c = row.cooling
    supply = f", supply {c.coolant_supply_c:g} C -> return {c.coolant_return_c:g} C" if c.coolant_supply_c is not None else ""
    _say(console, 
        f"Cooling: liquid {_kw(c.liquid_heat_w.nominal)} kW ({_rng_kw(c.liquid_heat_w)}) -> "
        f"{c.coolant_l_per_min.nominal:,.0f} L/min {c.coolant} at dT {c.coolant_delta_t_k:g} K "
        f"({c.coolant_l_per_min.low:,.0f}-{c.coolant_l_per_min.high:,.0f}){supply}"
    )
    _say(console, 
        f"         air {_kw(c.air_heat_w.nominal)} kW ({_rng_kw(c.air_heat_w)}) -> "
        f"{c.airflow_m3_per_h.nominal:,.0f} m^3/h = {c.airflow_cfm.nominal:,.0f} CFM at dT {c.air_delta_t_k:g} K; "
        f"air limit {_kw(c.air_limit_w)} kW: " + ("OK" if c.air_ok else "OVER")
    )
    if row.reference is not None:
        _say(console, f"Reference: {row.reference.message}")
    extra = f", dense FP8 {row.fp8_pflops_per_kw:.3f} PFLOP/s per kW" if row.fp8_pflops_per_kw is not None else ""
    _say(console, f"Per GPU: {row.kw_per_gpu:.2f} kW at the wall; {row.gpus_per_mw:,.0f} GPUs per MW{extra}")
    fac = row.facility
    if fac is not None:
        req = f" for {fac.gpus_requested:,} GPUs" if fac.gpus_requested else ""
        cost = f"; {fac.cost_per_day_usd:,.0f} USD/day at {fac.price_per_kwh_usd:g} USD/kWh" if fac.cost_per_day_usd is not None else ""
        _say(console, 
            f"Facility{req}: {fac.racks:,} racks, {fac.gpus:,} GPUs; IT {fmt_power(fac.it_power_w.nominal, 2)} "
            f"({fmt_power(fac.it_power_w.low, 2)}-{fmt_power(fac.it_power_w.high, 2)}); x PUE {fac.pue:g} = "
            f"{fmt_power(fac.facility_power_w.nominal, 2)}; {fac.gpus_per_mw_facility:,.0f} GPUs per facility MW; "
            f"{fac.energy_kwh_per_day:,.0f} kWh/day{cost}"
        )
        if fac.cost is not None:
            _say(console, "  " + _facility_cost(fac.cost))


def _m(x: float) -> str:
    return f"{x / 1e6:,.1f}M" if x >= 1e6 else f"{x:,.0f}"


def _facility_cost(c: Any) -> str:
    """Cost-model line: facility capex, and the all-in cost per day when a cost profile prices the rack."""
    cur = f"{c.currency} {c.price_year}"
    fc = c.facility_capex
    text = f"facility capex {_m(fc.nominal)} ({_m(fc.low)}-{_m(fc.high)}) {cur} (site {c.site})"
    if c.cost_per_day is not None and c.cost_per_gpu_hour is not None:
        d = c.cost_per_day
        text += (f"; all-in {_m(d.nominal)} ({_m(d.low)}-{_m(d.high)}) {c.currency}/day "
                 f"= {c.cost_per_gpu_hour.nominal:.2f} per GPU-hour x 24 h x GPUs ({c.system})")
    return text


def _comparison(console: Any, rows: list[Any]) -> None:
    lines = []
    for r in rows:
        lines.append(
            [
                r.rack,
                r.sku,
                r.gpus,
                _kw(r.wall_power_w),
                _rng_kw(r.wall_power_range_w),
                f"{r.kw_per_gpu:.2f}",
                f"{r.gpus_per_mw:,.0f}",
                f"{r.coolant_l_per_min:,.0f}",
                _kw(r.air_heat_w),
                "-" if r.fp8_pflops_per_kw is None else f"{r.fp8_pflops_per_kw:.3f}",
                "ok" if r.feeds_ok else "OVER",
                "ok" if r.cooling_ok else "OVER",
            ]
        )
    print_table(
        console,
        [
            "rack",
            "sku",
            ("GPUs", "right"),
            ("kW/rack", "right"),
            ("kW low-high", "right"),
            ("kW/GPU", "right"),
            ("GPUs/MW", "right"),
            ("L/min", "right"),
            ("air kW", "right"),
            ("dense FP8 PF/kW", "right"),
            "feeds",
            "air",
        ],
        lines,
        title="Rack comparison (wall power; coolant at each profile's delta-T)",
    )
    for r in rows:
        _say(console, f"{r.rack}: feeds {r.feeds.spec} {r.feeds.redundancy}: {r.feeds.arithmetic}")
        if r.feeds.needed:
            _say(console, f"  would need: {r.feeds.needed}")
        if r.reference is not None:
            _say(console, f"  reference: {r.reference.message}")
        if r.facility is not None:
            f = r.facility
            _say(console, 
                f"  facility: {f.racks:,} racks, IT {fmt_power(f.it_power_w.nominal, 2)}, "
                f"facility {fmt_power(f.facility_power_w.nominal, 2)}"
                + (f", {f.cost_per_day_usd:,.0f} USD/day" if f.cost_per_day_usd is not None else "")
            )
            if f.cost is not None:
                _say(console, "  " + _facility_cost(f.cost))


@table_renderer("rack")
def render_rack(result: Any, console: Any) -> None:
    if len(result.rows) == 1:
        row = result.rows[0]
        _breakdown(console, row)
        _verdicts(console, row)
    else:
        _comparison(console, result.rows)
