"""``rack``: power, feeds and cooling of one or more rack profiles (library entry point)."""

from __future__ import annotations

from mi400plan.errors import UsageError
from mi400plan.rack import COOLANTS, DEFAULT_DERATE, RackOptions, evaluate, parse_feed_spec
from mi400plan.results.rack import RackResult
from mi400plan.units import KW


def rack(
    catalog,  # noqa: ANN001 - mi400plan.profiles.Catalog
    names: list[str],
    *,
    sku: str | None = None,
    racks: int | None = None,
    gpus: int | None = None,
    feeds: str | None = None,
    derate: float = DEFAULT_DERATE,
    redundancy: str | None = None,
    gpu_power_cap_w: float | None = None,
    gpu_load: float = 1.0,
    pue: float = 1.2,
    price_per_kwh: float | None = None,
    air_limit_kw: float = 40.0,
    coolant: str = "water",
    site: str | None = None,
) -> RackResult:
    """Evaluate rack profiles ``names`` (names, aliases or TOML paths).

    ``feeds`` is a feed-set string such as ``4x415V3ph60A`` replacing each profile's feeds;
    ``air_limit_kw`` is in kW (converted to W here); ``gpu_power_cap_w`` in W. With ``racks`` or
    ``gpus`` the facility totals also carry the cost model's facility capex and all-in cost per day
    at site ``site`` (``cost.facility_cost``, default site ``us-2025``).
    """
    if not names:
        raise UsageError("give at least one rack name", hint="see `mi400plan profiles list racks`")
    if racks is not None and gpus is not None:
        raise UsageError("give --racks or --gpus, not both")
    if racks is not None and racks < 1:
        raise UsageError(f"--racks must be at least 1, got {racks}")
    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    import math

    for flag, value in (("--derate", derate), ("--gpu-power-cap", gpu_power_cap_w), ("--gpu-load", gpu_load),
                        ("--pue", pue), ("--price-per-kwh", price_per_kwh), ("--air-limit-kw", air_limit_kw)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number, got {value:g}")
    if not 0 < derate <= 1:
        raise UsageError(f"--derate must be in (0, 1], got {derate:g}", hint="0.8 is the NEC continuous-load rule")
    if redundancy is not None and redundancy not in ("N", "2N"):
        raise UsageError(f"--redundancy must be N or 2N, got {redundancy!r}")
    if gpu_power_cap_w is not None and gpu_power_cap_w <= 0:
        raise UsageError(f"--gpu-power-cap must be above 0 W, got {gpu_power_cap_w:g}")
    if not 0 < gpu_load <= 1:
        raise UsageError(f"--gpu-load must be in (0, 1], got {gpu_load:g}")
    if pue < 1:
        raise UsageError(f"--pue must be at least 1.0, got {pue:g}")
    if price_per_kwh is not None and price_per_kwh <= 0:
        raise UsageError(f"--price-per-kwh must be a price above 0, got {price_per_kwh:g}")
    if air_limit_kw <= 0:
        raise UsageError(f"--air-limit-kw must be above 0, got {air_limit_kw:g}")
    if coolant not in COOLANTS:
        raise UsageError(f"unknown coolant {coolant!r}; use one of: {', '.join(COOLANTS)}")
    feed_spec = parse_feed_spec(feeds) if feeds is not None else None

    opts = RackOptions(
        feeds=feed_spec,
        derate=derate,
        redundancy=redundancy,
        gpu_power_cap_w=gpu_power_cap_w,
        gpu_load=gpu_load,
        pue=pue,
        price_per_kwh=price_per_kwh,
        air_limit_w=air_limit_kw * KW,
        coolant=coolant,
        racks=racks,
        gpus=gpus,
    )
    rows = []
    warnings: list[str] = []
    for name in names:
        spec = catalog.get("racks", name).spec
        sku_name = sku or spec.sku
        accel = catalog.get("accelerators", sku_name).spec
        overridden = sku is not None and accel.name != spec.sku
        row, w = evaluate(spec, accel, opts, sku_overridden=overridden)
        if row.facility is not None and (racks is not None or gpus is not None):
            from mi400plan.cost import facility_cost

            it = row.facility.it_power_w
            fc, cw = facility_cost(catalog, spec.name, (it.low, it.nominal, it.high), row.facility.gpus,
                                   gpu_load=gpu_load, pue=pue, price_per_kwh=price_per_kwh, site_name=site)
            row = row.model_copy(update={"facility": row.facility.model_copy(update={"cost": fc})})
            w = w + cw
        if spec.consistency_errors():
            w = [f"{spec.name}: profile inconsistency: {e}" for e in spec.consistency_errors()] + w
        rows.append(row)
        warnings.extend(w)
    return RackResult(rows=rows, warnings=warnings)
