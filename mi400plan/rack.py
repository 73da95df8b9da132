"""Rack power, feeds and cooling: pure functions in SI units (W, V, A, K, kg/m^3, J/(kg K)).

The chain is: component power (DC, at the parts) -> divided by the DC distribution efficiency
(busbar, intermediate bus converters) -> divided by the PSU efficiency -> wall power (AC at the rack
input, what the feeds carry and what a facility meter calls IT power). All wall power ends up as
heat in the room: the part captured by cold plates goes to the coolant, the rest to air.

``evaluate`` runs the whole chain for one rack profile and one accelerator profile and returns a
``RackRow`` with low / nominal / high values and the feed and cooling verdicts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from mi400plan.errors import MissingValueError, ProfileError, UsageError
from mi400plan.specs.rack import FEED_COUNT_MAX, FEED_VALUE_MAX
from mi400plan.results.rack import (
    ComponentLine,
    CoolingOut,
    FacilityOut,
    FeedLoading,
    FeedVerdict,
    PsuVerdict,
    RackRow,
    Range,
    ReferenceCheck,
)
from mi400plan.units import DAY, HOUR, KW, MW, PFLOPS

SQRT3 = math.sqrt(3.0)

# --- electrical --------------------------------------------------------------------------------

DEFAULT_DERATE = 0.8
"""Continuous-load factor. NFPA 70 (NEC) 210.19(A)(1) and 215.2(A)(1): branch-circuit and feeder
conductors (and 210.20(A) overcurrent devices) are sized at 125% of the continuous load, so a
continuous load may use at most 1/1.25 = 80% of the circuit rating. IEC 60364-4-43 / -5-52 have no
blanket 80% rule (conductors are sized to the design current with correction factors), hence
configurable; 1.0 is a 100%-rated breaker assembly."""


def feed_apparent_power_va(voltage_v: float, current_a: float, phases: int) -> float:
    """Apparent power of one feed at its current rating, VA.

    Three-phase, balanced: S = sqrt(3) x V_LL x I (V_LL line-to-line); single-phase: S = V x I.
    (IEC 60050-131 / any power-engineering text, e.g. Grainger & Stevenson, "Power System Analysis".)
    """
    if phases == 3:
        return SQRT3 * voltage_v * current_a
    if phases == 1:
        return voltage_v * current_a
    raise UsageError(f"a feed has 1 or 3 phases, not {phases}")


def feed_real_power_w(voltage_v: float, current_a: float, phases: int, power_factor: float) -> float:
    """Real power one feed carries at its rating: P = S x PF, W."""
    return feed_apparent_power_va(voltage_v, current_a, phases) * power_factor


def usable_feed_capacity_w(
    count: int,
    voltage_v: float,
    current_a: float,
    phases: int,
    power_factor: float,
    derate: float = DEFAULT_DERATE,
    redundancy: str = "2N",
) -> float:
    """Power the rack may draw continuously from ``count`` identical feeds, W.

    per feed = S x PF x derate (NEC 210.19/215.2 80% continuous rule by default).
    ``N``: all feeds share the load: count x per feed.
    ``2N`` (A/B): either side alone must carry the whole rack (Uptime Institute Tier IV / TIA-942
    dual-path), so only floor(count / 2) feeds count.
    """
    per = feed_real_power_w(voltage_v, current_a, phases, power_factor) * derate
    if redundancy == "2N":
        return (count // 2) * per
    if redundancy == "N":
        return count * per
    raise UsageError(f"feed redundancy must be N or 2N, not {redundancy!r}")


STANDARD_OCPD_A: tuple[int, ...] = (
    15, 20, 25, 30, 35, 40, 45, 50, 60, 70, 80, 90, 100, 110, 125, 150, 175, 200, 225, 250, 300, 350,
    400, 450, 500, 600, 700, 800, 1000, 1200, 1600, 2000, 2500, 3000, 4000, 5000, 6000,
)
"""Standard ampere ratings of fuses and inverse-time circuit breakers, NFPA 70 (NEC) 240.6(A)."""


def line_current_a(power_w: float, voltage_v: float, phases: int, power_factor: float) -> float:
    """Current in each line conductor for a balanced load of real power ``power_w``, A.

    Three-phase: I = P / (sqrt(3) x V_LL x PF); single-phase: I = P / (V x PF) (the inverse of
    ``feed_real_power_w``).
    """
    return power_w / feed_real_power_w(voltage_v, 1.0, phases, power_factor)


def carrying_feeds(count: int, redundancy: str) -> int:
    """Feeds that share the load in the worst case: all of them under N, one side under 2N (A/B),
    since after a side fails the other carries the whole rack."""
    return count // 2 if redundancy == "2N" else count


def overcurrent_device_a(load_current_a: float, derate: float = DEFAULT_DERATE) -> int | None:
    """The smallest standard overcurrent device (NEC 240.6(A)) for a continuous load current.

    NEC 210.20(A) / 215.3: the device is rated at least 125 % of the continuous load (the inverse of
    the 80 % continuous factor; ``derate`` = 1.0 is a 100 %-rated assembly). None above 6,000 A.
    """
    need = load_current_a / derate
    return next((r for r in STANDARD_OCPD_A if r >= need - 1e-9), None)


def wall_power_w(component_w: float, psu_efficiency: float, dc_distribution_efficiency: float = 1.0) -> float:
    """AC input power = DC component power / (eta_PSU x eta_distribution), W.

    Efficiency is output / input (IEC 62040 / 80 PLUS definitions); losses become heat in the rack.
    """
    return component_w / (psu_efficiency * dc_distribution_efficiency)


def psu_usable_w(psus: int, spares: int, rating_w: float) -> float:
    """DC output the power shelves guarantee with ``spares`` PSUs failed: (psus - spares) x rating, W."""
    return max(psus - spares, 0) * rating_w


def gpu_power_w(tdp_w: float, cap_w: float | None = None, load: float = 1.0) -> float:
    """Per-GPU power: min(TDP, cap) x load, W. A power cap (``rocm-smi --setpoweroverdrive`` /
    ``nvidia-smi -pl``) bounds board power; ``load`` is the average fraction of that bound drawn."""
    p = tdp_w if cap_w is None else min(tdp_w, cap_w)
    return p * load


# --- heat --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Coolant:
    name: str
    rho_kg_per_m3: float
    cp_j_per_kg_k: float
    source: str


WATER = Coolant(
    "water",
    997.0,
    4181.0,
    "liquid water at 25 degC, 0.1 MPa: rho 997.0 kg/m^3, c_p 4.181 kJ/(kg K) (IAPWS-95 via NIST Chemistry WebBook)",
)
GLYCOL25 = Coolant(
    "glycol25",
    1020.0,
    3900.0,
    "25% (by mass) propylene glycol in water at ~20-40 degC: rho ~1020 kg/m^3, c_p ~3.90 kJ/(kg K) "
    "(ASHRAE Handbook - Fundamentals, ch. 31 'Secondary coolants'; Dow propylene glycol tables)",
)
COOLANTS: dict[str, Coolant] = {"water": WATER, "glycol25": GLYCOL25}

AIR_RHO_KG_PER_M3 = 1.2  # dry air near 20 degC, sea level (ISO 2533 standard atmosphere: 1.225 at 15 degC)
AIR_CP_J_PER_KG_K = 1005.0  # dry air, constant pressure, ~20 degC
M3_PER_S_PER_CFM = 0.028316846592 / 60.0  # 1 ft^3 = 0.028316846592 m^3 (exact, from 1 ft = 0.3048 m)
DEFAULT_AIR_LIMIT_W = 40e3  # per rack, what an air-cooled row typically removes (configurable)


def coolant_flow_l_per_min(heat_w: float, delta_t_k: float, rho: float, cp: float) -> float:
    """Volume flow that removes ``heat_w`` at a temperature rise ``delta_t_k``, L/min.

    Steady-flow energy balance: Q = m_dot x c_p x dT, m_dot = rho x V_dot, so
    V_dot [m^3/s] = Q / (rho x c_p x dT); x 60,000 for L/min. Water, dT 10 K:
    1 kW -> 1000 / (997 x 4181 x 10) x 60,000 = 1.439 L/min.
    """
    if delta_t_k <= 0:
        raise UsageError("coolant delta-T must be above 0 K")
    return heat_w / (rho * cp * delta_t_k) * 60_000.0


def airflow_m3_per_h(
    heat_w: float, delta_t_k: float, rho: float = AIR_RHO_KG_PER_M3, cp: float = AIR_CP_J_PER_KG_K
) -> float:
    """Air volume flow removing ``heat_w`` at an air temperature rise ``delta_t_k``, m^3/h.

    Same energy balance as ``coolant_flow_l_per_min``: V_dot = Q / (rho x c_p x dT) m^3/s, x 3600.
    (ASHRAE TC 9.9, "Thermal Guidelines for Data Processing Environments".)
    """
    if delta_t_k <= 0:
        raise UsageError("air delta-T must be above 0 K")
    return heat_w / (rho * cp * delta_t_k) * HOUR


def m3_per_h_to_cfm(m3_per_h: float) -> float:
    """m^3/h -> cubic feet per minute (1 CFM = 0.028316846592 m^3 / 60 s)."""
    return m3_per_h / HOUR / M3_PER_S_PER_CFM


# --- feeds: parsing, formatting, standard sets --------------------------------------------------


@dataclass(frozen=True)
class FeedSpec:
    count: int
    voltage_v: float
    phases: int
    current_a: float
    power_factor: float = 1.0

    def label(self) -> str:
        pf = "" if self.power_factor == 1.0 else f"pf{self.power_factor:g}"
        return f"{self.count}x{self.voltage_v:g}V{self.phases}ph{self.current_a:g}A{pf}"

    def per_feed_usable_w(self, derate: float) -> float:
        return feed_real_power_w(self.voltage_v, self.current_a, self.phases, self.power_factor) * derate

    def usable_w(self, derate: float, redundancy: str) -> float:
        return usable_feed_capacity_w(
            self.count, self.voltage_v, self.current_a, self.phases, self.power_factor, derate, redundancy
        )


_FEED_RE = re.compile(
    r"(?:(\d+)\s*[x×*]\s*)?"  # count
    r"(\d+(?:\.\d+)?)\s*v\s*"  # volts
    r"([13])\s*(?:ph|phase|p)\s*"  # phases
    r"(\d+(?:\.\d+)?)\s*a"  # amps
    r"(?:\s*[@/,]?\s*pf\s*=?\s*(\d*\.?\d+))?",  # optional power factor
    re.IGNORECASE,
)

FEED_SPEC_HELP = (
    "a feed set is COUNTxVOLTSVPHASESphAMPSA with an optional power factor, e.g. 4x415V3ph60A, "
    "2x480V3ph100A, 2x230V1ph32A or 4x415V3ph60Apf0.95 (volts line-to-line for three-phase)"
)


def parse_feed_spec(text: str) -> FeedSpec:
    """Parse ``4x415V3ph60A`` (count x volts, phases, amps, optional ``pf0.95``) or raise UsageError."""
    if len(text) > 100:
        raise UsageError(f"feed set {text[:37]!r}... is {len(text):,} characters long", hint=FEED_SPEC_HELP)
    m = _FEED_RE.fullmatch(text.strip())
    if not m:
        raise UsageError(f"cannot read feed set {text!r}", hint=FEED_SPEC_HELP)
    count = int(m.group(1)) if m.group(1) else 1
    volts, phases, amps = float(m.group(2)), int(m.group(3)), float(m.group(4))
    pf = float(m.group(5)) if m.group(5) else 1.0
    if count < 1 or volts <= 0 or amps <= 0:
        raise UsageError(f"feed set {text!r}: count, volts and amps must be positive", hint=FEED_SPEC_HELP)
    if count > FEED_COUNT_MAX or volts > FEED_VALUE_MAX or amps > FEED_VALUE_MAX:
        raise UsageError(
            f"feed set {text!r}: at most {FEED_COUNT_MAX:,} feeds of at most {FEED_VALUE_MAX:,.0f} V and "
            f"{FEED_VALUE_MAX:,.0f} A (the bounds a rack profile's [feeds] has)",
            hint=FEED_SPEC_HELP,
        )
    if not 0 < pf <= 1:
        raise UsageError(f"feed set {text!r}: power factor must be in (0, 1], got {pf:g}", hint=FEED_SPEC_HELP)
    return FeedSpec(count, volts, phases, amps, pf)


# (volts line-to-line, phases, amps): common rack feed ratings. 415 V / 400 V three-phase in
# IEC 60309 sizes (32 / 63 / 125 A) and the 60 / 100 A North-American-style ratings used for 415 V
# rack PDUs; 480 V and 208 V three-phase and 230 V single-phase circuits in common breaker sizes.
STANDARD_FEEDS: tuple[tuple[float, int, float], ...] = (
    (230.0, 1, 16.0),
    (230.0, 1, 32.0),
    (208.0, 3, 30.0),
    (208.0, 3, 60.0),
    (400.0, 3, 32.0),
    (400.0, 3, 63.0),
    (400.0, 3, 125.0),
    (415.0, 3, 32.0),
    (415.0, 3, 60.0),
    (415.0, 3, 63.0),
    (415.0, 3, 100.0),
    (415.0, 3, 125.0),
    (480.0, 3, 30.0),
    (480.0, 3, 60.0),
    (480.0, 3, 100.0),
)
MAX_FEEDS = 16


def smallest_feed_set(
    load_w: float,
    derate: float,
    redundancy: str,
    power_factor: float = 1.0,
    standard: tuple[tuple[float, int, float], ...] = STANDARD_FEEDS,
    max_feeds: int = MAX_FEEDS,
) -> FeedSpec | None:
    """The standard feed set with the fewest feeds (then the least spare capacity) carrying ``load_w``.

    N: n = ceil(load / per-feed usable); 2N: n = 2 x ceil(load / per-feed usable) (each side alone
    carries the load). None when no set of at most ``max_feeds`` feeds does.
    """
    best: tuple[int, float, FeedSpec] | None = None
    for volts, phases, amps in standard:
        per = feed_real_power_w(volts, amps, phases, power_factor) * derate
        side = max(1, math.ceil(load_w / per - 1e-12))
        n = 2 * side if redundancy == "2N" else side
        if n > max_feeds:
            continue
        spec = FeedSpec(n, volts, phases, amps, power_factor)
        key = (n, spec.usable_w(derate, redundancy))
        if best is None or key < best[:2]:
            best = (key[0], key[1], spec)
    return None if best is None else best[2]


def feed_fixes(spec: FeedSpec, load_w: float, derate: float, redundancy: str,
               max_feeds: int = MAX_FEEDS) -> list[tuple[str, FeedSpec]]:
    """Feed sets that carry ``load_w``, what the user gave kept as far as possible, best kept first:

    1. the same count, voltage, phases and power factor with the smallest standard rating
       (NEC 240.6(A)) that carries the load: line current per carrying feed
       ``I = P / (n_carrying x sqrt(3) x V x PF)`` (``line_current_a``), device ``>= I / derate``
       (``overcurrent_device_a``; usable = n_carrying x sqrt(3) x V x rating x PF x derate >= P);
    2. the same voltage, phases and rating with more feeds: N ``ceil(P / per-feed usable)``, 2N twice that;
    3. the standard rack feed set with the fewest feeds (``smallest_feed_set``).

    Each as (what it keeps, feed set); a set already listed, or one of more than ``max_feeds`` feeds, is left out.
    """
    out: list[tuple[str, FeedSpec]] = []
    n = carrying_feeds(spec.count, redundancy)
    amps = overcurrent_device_a(line_current_a(load_w / n, spec.voltage_v, spec.phases, spec.power_factor), derate)
    if amps is not None:
        out.append(("same feeds, larger rating", replace(spec, current_a=float(amps))))
    side = max(1, math.ceil(load_w / spec.per_feed_usable_w(derate) - 1e-12))
    count = 2 * side if redundancy == "2N" else side
    if count <= max_feeds:
        out.append(("same rating, more feeds", replace(spec, count=count)))
    std = smallest_feed_set(load_w, derate, redundancy, spec.power_factor, max_feeds=max_feeds)
    if std is not None:
        out.append(("fewest standard rack feeds", std))
    unique: list[tuple[str, FeedSpec]] = []
    for why, f in out:
        if all(f != g for _, g in unique):
            unique.append((why, f))
    return unique


def feed_arithmetic(spec: FeedSpec, derate: float, redundancy: str, load_w: float) -> str:
    """The feed verdict as one line of arithmetic, e.g.
    ``2 x sqrt(3) x 415 V x 60 A x PF 1.00 = 86.3 kW; x 0.80 = 69.0 kW usable; 2N -> 34.5 kW < 197.0 kW: deficit 162.5 kW``.
    """
    phase_txt = "sqrt(3) x " if spec.phases == 3 else ""
    total = spec.count * feed_real_power_w(spec.voltage_v, spec.current_a, spec.phases, spec.power_factor)
    derated = total * derate
    usable = spec.usable_w(derate, redundancy)
    s = (
        f"{spec.count} x {phase_txt}{spec.voltage_v:g} V x {spec.current_a:g} A x PF {spec.power_factor:.2f} "
        f"= {total / KW:.1f} kW; x {derate:.2f} = {derated / KW:.1f} kW usable"
    )
    if redundancy == "2N":
        s += f"; 2N (one side carries all) -> {usable / KW:.1f} kW"
    cmp = ">=" if usable >= load_w else "<"
    s += f"; {usable / KW:.1f} kW {cmp} {load_w / KW:.1f} kW load"
    diff = usable - load_w
    s += f": headroom {diff / KW:.1f} kW" if diff >= 0 else f": deficit {-diff / KW:.1f} kW"
    return s


def feed_loading(spec: FeedSpec, derate: float, redundancy: str, wall_w: tuple[float, float, float]) -> FeedLoading:
    """What the rack's wall power means on its feeds: apparent power, line current per phase on each
    carrying feed (worst case: one side of 2N), and the overcurrent device the high load needs."""
    n = carrying_feeds(spec.count, redundancy)
    amps = [line_current_a(w / n, spec.voltage_v, spec.phases, spec.power_factor) for w in wall_w]
    ocpd = overcurrent_device_a(amps[2], derate)
    phase_txt = "sqrt(3) x " if spec.phases == 3 else ""
    share = f"{wall_w[1] / KW:.1f} kW / {n} feed{'s' if n > 1 else ''}"
    text = (
        f"{share} / ({phase_txt}{spec.voltage_v:g} V x PF {spec.power_factor:.2f}) = {amps[1]:.0f} A per phase"
        f" ({amps[0]:.0f}-{amps[2]:.0f} A); device >= {amps[2]:.0f} A / {derate:.2f} = {amps[2] / derate:.0f} A"
        + (f" -> {ocpd} A (NEC 240.6(A))" if ocpd is not None else ": above 6,000 A, no standard device")
    )
    return FeedLoading(
        load_va=_rng(*(w / spec.power_factor for w in wall_w)),
        carrying_feeds=n,
        line_current_a=_rng(*amps),
        overcurrent_device_a=ocpd,
        arithmetic=text,
    )


# --- facility ----------------------------------------------------------------------------------


def racks_needed(gpus: int, gpus_per_rack: int) -> int:
    """ceil(gpus / gpus_per_rack)."""
    return math.ceil(gpus / gpus_per_rack)


def facility_power_w(it_w: float, pue: float) -> float:
    """Total facility power = IT power x PUE (The Green Grid, PUE = total facility / IT equipment
    energy; ISO/IEC 30134-2). IT power here is rack wall power."""
    return it_w * pue


def energy_cost_per_day(facility_w: float, price_per_kwh: float) -> float:
    """Cost of one day at constant power: facility kW x 24 h x price per kWh."""
    return facility_w / KW * (DAY / HOUR) * price_per_kwh


# --- the whole chain for one rack ---------------------------------------------------------------


@dataclass(frozen=True)
class RackOptions:
    feeds: FeedSpec | None = None  # None: the profile's feeds
    derate: float = DEFAULT_DERATE
    redundancy: str | None = None  # None: the profile's
    gpu_power_cap_w: float | None = None
    gpu_load: float = 1.0
    pue: float = 1.2
    price_per_kwh: float | None = None
    air_limit_w: float = DEFAULT_AIR_LIMIT_W
    coolant: str = "water"
    racks: int | None = None
    gpus: int | None = None


def _rng(lo: float, nom: float, hi: float) -> Range:
    return Range(low=lo, nominal=nom, high=hi)


def _triple(est, what: str) -> tuple[float, float, float]:  # noqa: ANN001 - Estimate
    return est.triple(what)


def _gpu_tdp(rname: str, accel, opts: RackOptions, warnings: list[str]) -> tuple[float, float, float] | None:  # noqa: ANN001
    """GPU power per GPU (low, nominal, high): the TDP, else the power cap, else None."""
    tdp = accel.power.tdp_w
    if tdp.known:
        gpu_tdp = _triple(tdp, f"{accel.name} power.tdp_w")
    elif opts.gpu_power_cap_w is not None:
        gpu_tdp = (opts.gpu_power_cap_w,) * 3
        warnings.append(
            f"{rname}: {accel.name} TDP is not disclosed; using the GPU power cap "
            f"{opts.gpu_power_cap_w:g} W as the GPU power"
        )
    else:
        gpu_tdp = None
    return gpu_tdp


@dataclass(frozen=True)
class _Heat:
    """Component power summed over the trays, and how it splits between liquid and air (W, low/nominal/high)."""

    lines: list[ComponentLine]
    it: list[float]
    liquid: list[float]
    air: list[float]
    gpu_each: tuple[float, float, float]


def _components(rack, accel, opts: RackOptions, gpu_tdp: tuple[float, float, float] | None, sku_overridden: bool) -> _Heat:  # noqa: ANN001
    """Each tray component's power, with the GPU's from its own ``power_w`` or the SKU's TDP."""
    rname = rack.name
    tdp = accel.power.tdp_w
    lines: list[ComponentLine] = []
    it = [0.0, 0.0, 0.0]
    liquid = [0.0, 0.0, 0.0]  # low: low power x low fraction; high: high power x high fraction
    air = [0.0, 0.0, 0.0]  # low: low power x (1 - high fraction); high: high power x (1 - low fraction)
    gpu_each_out: tuple[float, float, float] | None = None
    for tray in rack.trays:
        for c in tray.components:
            if c.kind == "gpu":
                if c.power_w is not None and not sku_overridden:
                    base = _triple(c.power_w, f"{rname} {tray.name}.{c.name}.power_w")
                    status, source = c.power_w.status, list(c.power_w.source)
                elif gpu_tdp is not None:
                    base = gpu_tdp
                    status, source = tdp.status if tdp.known else "assumed", list(tdp.source)
                else:
                    tdp.require(f"{accel.name} power.tdp_w")  # raises MissingValueError
                    raise MissingValueError(f"{accel.name} TDP is not disclosed")
                each = tuple(gpu_power_w(x, opts.gpu_power_cap_w, opts.gpu_load) for x in base)
                gpu_each_out = each  # type: ignore[assignment]
            else:
                each = _triple(c.power_w, f"{rname} {tray.name}.{c.name}.power_w")
                status, source = c.power_w.status, list(c.power_w.source)
            n = tray.count * c.count
            total = tuple(n * x for x in each)
            lf = c.liquid_fraction.triple(f"{rname} {c.name}.liquid_fraction")
            for i in range(3):
                it[i] += total[i]
                liquid[i] += total[i] * lf[i]
                air[i] += total[i] * (1.0 - lf[2 - i])
            lines.append(
                ComponentLine(
                    tray=tray.name,
                    component=c.name,
                    kind=c.kind,
                    count=n,
                    each_w=_rng(*each),
                    total_w=_rng(*total),
                    liquid_fraction=lf[1],
                    status=status,
                    source=source,
                )
            )
    if gpu_each_out is None:
        gpu_each_out = (0.0, 0.0, 0.0)
    return _Heat(lines, it, liquid, air, gpu_each_out)


@dataclass(frozen=True)
class _Wall:
    """Wall power, conversion losses, heat to liquid and air, and the PSU DC load (W, low/nominal/high)."""

    wall: tuple[float, float, float]
    losses: tuple[float, float, float]
    liquid: tuple[float, float, float]
    air: tuple[float, float, float]
    dc_load: tuple[float, float, float]


def _conversion(rack, heat: _Heat) -> _Wall:  # noqa: ANN001
    """Conversion chain: low wall = low load at best efficiency, high wall = high load at worst."""
    rname, it, liquid, air = rack.name, heat.it, heat.liquid, heat.air
    p = rack.power
    eff_lo, eff_nom, eff_hi = p.psu_efficiency.triple(f"{rname} power.psu_efficiency")
    dist_lo, dist_nom, dist_hi = p.dc_distribution_efficiency.triple(f"{rname} power.dc_distribution_efficiency")
    wall = (
        wall_power_w(it[0], eff_hi, dist_hi),
        wall_power_w(it[1], eff_nom, dist_nom),
        wall_power_w(it[2], eff_lo, dist_lo),
    )
    if wall[1] <= 0:
        raise ProfileError(
            f"the components add up to {it[1]:g} W; power, feed and cooling budgets need a rack that draws power",
            path=f"rack {rname}",
            hint="check the trays' power_w values (and the GPU's)",
        )
    losses = tuple(wall[i] - it[i] for i in range(3))
    lf_loss = rack.cooling.conversion_loss_liquid_fraction.triple(f"{rname} cooling.conversion_loss_liquid_fraction")
    # Every watt drawn at the wall ends as heat in the rack: liquid + air = wall at nominal.
    liquid_total = tuple(liquid[i] + losses[i] * lf_loss[i] for i in range(3))
    air_total = tuple(air[i] + losses[i] * (1.0 - lf_loss[2 - i]) for i in range(3))
    dc_load = (it[0] / dist_hi, it[1] / dist_nom, it[2] / dist_lo)  # DC output needed = component power / distribution efficiency
    return _Wall(wall, losses, liquid_total, air_total, dc_load)  # type: ignore[arg-type]


def _psu(rack, dc_load: tuple[float, float, float], warnings: list[str]) -> PsuVerdict:  # noqa: ANN001
    """PSU shelves against the DC load."""
    rname, p = rack.name, rack.power
    rating = p.psu_rating_w.require(f"{rname} power.psu_rating_w")
    psu_usable = psu_usable_w(p.psu_count, p.spare_psus, rating)
    psu = PsuVerdict(
        psus=p.psu_count,
        spare_psus=p.spare_psus,
        redundancy=p.redundancy,
        psu_rating_w=rating,
        usable_w=psu_usable,
        dc_load_w=_rng(*dc_load),
        ok=dc_load[1] <= psu_usable,
        ok_high=dc_load[2] <= psu_usable,
    )
    if not psu.ok:
        warnings.append(
            f"{rname}: power shelves short: {p.psu_count - p.spare_psus} x {rating / KW:.2f} kW "
            f"({p.redundancy}) = {psu_usable / KW:.1f} kW < {dc_load[1] / KW:.1f} kW DC load"
        )
    elif not psu.ok_high:
        warnings.append(
            f"{rname}: power shelves ({psu_usable / KW:.1f} kW with {p.redundancy}) carry the nominal DC load "
            f"{dc_load[1] / KW:.1f} kW but not the high estimate {dc_load[2] / KW:.1f} kW"
        )
    return psu


def _feeds(rack, opts: RackOptions, wall: tuple[float, float, float], dc_load: tuple[float, float, float], warnings: list[str]) -> FeedVerdict:  # noqa: ANN001
    """The feeds (the profile's or ``--feeds``) against the wall power, and the fixes when they fall short."""
    rname, p = rack.name, rack.power
    rating = p.psu_rating_w.require(f"{rname} power.psu_rating_w")
    f = rack.feeds
    if opts.feeds is not None:
        spec = opts.feeds
        feed_status = "given"
    else:
        spec = FeedSpec(f.count, f.voltage_v, f.phases, f.current_a, f.power_factor.require(f"{rname} feeds.power_factor"))
        feed_status = f.status
    redundancy = opts.redundancy or f.redundancy
    if redundancy == "2N" and spec.count % 2:
        raise UsageError(
            f"2N (A/B) redundancy needs an even number of feeds, got {spec.count}",
            hint="give an even count (e.g. 4x415V3ph60A) or --redundancy N",
        )
    usable = spec.usable_w(opts.derate, redundancy)
    ok = [wall[i] <= usable for i in range(3)]
    fixes = [] if ok[2] else feed_fixes(spec, wall[2], opts.derate, redundancy)
    needed = fixes[0][1] if fixes else None
    feeds = FeedVerdict(
        spec=spec.label(),
        count=spec.count,
        voltage_v=spec.voltage_v,
        phases=spec.phases,
        current_a=spec.current_a,
        power_factor=spec.power_factor,
        derate=opts.derate,
        redundancy=redundancy,
        per_feed_va=feed_apparent_power_va(spec.voltage_v, spec.current_a, spec.phases),
        per_feed_usable_w=spec.per_feed_usable_w(opts.derate),
        usable_w=usable,
        load_w=_rng(*wall),
        headroom_w=usable - wall[1],
        ok=ok[1],
        ok_low=ok[0],
        ok_high=ok[2],
        arithmetic=feed_arithmetic(spec, opts.derate, redundancy, wall[1]),
        needed=None if needed is None else f"{redundancy} {needed.label()}",
        needed_usable_w=None if needed is None else needed.usable_w(opts.derate, redundancy),
        alternatives=[f"{redundancy} {f.label()} = {f.usable_w(opts.derate, redundancy) / KW:.1f} kW usable ({why})"
                      for why, f in fixes],
        source_status=feed_status,
        loading=feed_loading(spec, opts.derate, redundancy, wall),
    )
    if ok[0] != ok[2]:
        warnings.append(
            f"{rname}: feed verdict flips inside the estimate range: {spec.label()} ({redundancy}) gives "
            f"{usable / KW:.1f} kW, enough for the low wall power {wall[0] / KW:.1f} kW but not the high "
            f"{wall[2] / KW:.1f} kW"
        )
    # 2N feeds only protect the rack if the PSUs left on one side can carry it. A power shelf takes
    # one AC input (OCP ORv3 / Oberon shelves), so with A/B feeds half the PSUs sit behind each side;
    # N+N shelves (half spare) are built for that, N or N+1 shelves are not.
    side_w = (p.psu_count // 2) * rating
    if redundancy == "2N" and p.redundancy != "N+N" and dc_load[1] > side_w:
        warnings.append(
            f"{rname}: feeds are 2N but the power shelves are {p.redundancy}: with the PSUs split across "
            f"the A and B feeds, one side's {p.psu_count // 2} x {rating / KW:.2f} kW = {side_w / KW:.1f} kW "
            f"cannot carry the {dc_load[1] / KW:.1f} kW DC load, so losing a feed drops the rack; "
            "A/B redundancy needs N+N shelves"
        )
    if needed is None and not ok[2]:
        warnings.append(
            f"{rname}: no standard set of at most {MAX_FEEDS} feeds carries {wall[2] / KW:.1f} kW with {redundancy}; "
            "plan busway or higher-current feeds"
        )
    return feeds


def _cooling(rack, opts: RackOptions, w: _Wall, warnings: list[str]) -> CoolingOut:  # noqa: ANN001
    """Coolant flow and airflow for the liquid and air heat, and the air-cooled row limit."""
    rname, liquid_total, air_total = rack.name, w.liquid, w.air
    try:
        coolant = COOLANTS[opts.coolant]
    except KeyError:
        raise UsageError(f"unknown coolant {opts.coolant!r}; use one of: {', '.join(COOLANTS)}") from None
    c = rack.cooling
    dt_lo, dt_nom, dt_hi = c.coolant_delta_t_k.triple(f"{rname} cooling.coolant_delta_t_k")
    adt_lo, adt_nom, adt_hi = c.air_delta_t_k.triple(f"{rname} cooling.air_delta_t_k")
    flow = (
        coolant_flow_l_per_min(liquid_total[0], dt_hi, coolant.rho_kg_per_m3, coolant.cp_j_per_kg_k),
        coolant_flow_l_per_min(liquid_total[1], dt_nom, coolant.rho_kg_per_m3, coolant.cp_j_per_kg_k),
        coolant_flow_l_per_min(liquid_total[2], dt_lo, coolant.rho_kg_per_m3, coolant.cp_j_per_kg_k),
    )
    air_flow = (
        airflow_m3_per_h(air_total[0], adt_hi),
        airflow_m3_per_h(air_total[1], adt_nom),
        airflow_m3_per_h(air_total[2], adt_lo),
    )
    supply = c.coolant_supply_c.nominal if c.coolant_supply_c is not None and c.coolant_supply_c.known else None
    air_ok = [air_total[i] <= opts.air_limit_w for i in range(3)]
    cooling = CoolingOut(
        coolant=coolant.name,
        rho_kg_per_m3=coolant.rho_kg_per_m3,
        cp_j_per_kg_k=coolant.cp_j_per_kg_k,
        coolant_supply_c=supply,
        coolant_delta_t_k=dt_nom,
        coolant_return_c=None if supply is None else supply + dt_nom,
        liquid_heat_w=_rng(*liquid_total),
        air_heat_w=_rng(*air_total),
        coolant_l_per_min=_rng(*flow),
        air_delta_t_k=adt_nom,
        airflow_m3_per_h=_rng(*air_flow),
        airflow_cfm=_rng(*(m3_per_h_to_cfm(x) for x in air_flow)),
        air_limit_w=opts.air_limit_w,
        air_ok=air_ok[1],
        air_ok_low=air_ok[0],
        air_ok_high=air_ok[2],
    )
    if air_ok[0] != air_ok[2]:
        warnings.append(
            f"{rname}: air-cooling verdict flips inside the estimate range: air heat "
            f"{air_total[0] / KW:.1f}-{air_total[2] / KW:.1f} kW against the {opts.air_limit_w / KW:.0f} kW limit"
        )
    if not air_ok[1]:
        warnings.append(
            f"{rname}: air part {air_total[1] / KW:.1f} kW exceeds the air-cooled row limit "
            f"{opts.air_limit_w / KW:.0f} kW per rack (--air-limit-kw)"
        )
    return cooling


def _reference(rack, wall: tuple[float, float, float]) -> ReferenceCheck | None:  # noqa: ANN001
    """The wall-power estimate against the published or claimed rack power, if the profile has one."""
    rname = rack.name
    reference = None
    if rack.reference_power_w is not None and rack.reference_power_w.known:
        r_lo, r_nom, r_hi = rack.reference_power_w.triple(f"{rname} reference_power_w")
        if r_lo <= wall[1] <= r_hi:
            verdict = "agrees"
        elif wall[2] >= r_lo and wall[0] <= r_hi:
            verdict = "overlaps"
        elif wall[2] < r_lo:
            verdict = "below"
        else:
            verdict = "above"
        src = ", ".join(rack.reference_power_w.source) or "profile"
        words = {
            "agrees": "agrees: the nominal estimate lies inside the reference range",
            "overlaps": (
                f"partly agrees: the nominal estimate is {'below' if wall[1] < r_lo else 'above'} the reference "
                "range, but the two ranges overlap"
            ),
            "below": "is below the reference range",
            "above": "is above the reference range",
        }[verdict]
        msg = (
            f"wall power {wall[0] / KW:.0f}-{wall[2] / KW:.0f} kW (nominal {wall[1] / KW:.0f} kW) vs "
            f"{src} {r_lo / KW:.0f}-{r_hi / KW:.0f} kW: {words}"
        )
        reference = ReferenceCheck(
            reference_w=_rng(r_lo, r_nom, r_hi), source=list(rack.reference_power_w.source), verdict=verdict, message=msg
        )
    return reference


def _facility(opts: RackOptions, wall: tuple[float, float, float], gpus: int) -> FacilityOut | None:
    """Facility power and energy of the racks asked for (``--racks``/``--gpus``/``--price-per-kwh``)."""
    facility = None
    if opts.racks is not None or opts.gpus is not None or opts.price_per_kwh is not None:
        nracks = opts.racks if opts.racks is not None else (racks_needed(opts.gpus, gpus) if opts.gpus else 1)
        it_fac = tuple(nracks * w for w in wall)
        fac = tuple(facility_power_w(w, opts.pue) for w in it_fac)
        kwh_day = fac[1] / KW * (DAY / HOUR)
        facility = FacilityOut(
            racks=nracks,
            gpus=nracks * gpus,
            gpus_requested=opts.gpus,
            it_power_w=_rng(*it_fac),
            pue=opts.pue,
            facility_power_w=_rng(*fac),
            gpus_per_mw_it=nracks * gpus / (it_fac[1] / MW),
            gpus_per_mw_facility=nracks * gpus / (fac[1] / MW),
            energy_kwh_per_day=kwh_day,
            price_per_kwh_usd=opts.price_per_kwh,
            cost_per_day_usd=None if opts.price_per_kwh is None else energy_cost_per_day(fac[1], opts.price_per_kwh),
        )
    return facility


def evaluate(rack, accel, opts: RackOptions, sku_overridden: bool = False) -> tuple[RackRow, list[str]]:  # noqa: ANN001
    """Power, feeds and cooling of one rack (``rack``: specs.rack.Rack, ``accel``: Accelerator).

    Returns the row and warnings (conclusions that flip inside the estimate range, missing data).
    A GPU component's own ``power_w`` is used only while the SKU is the rack's own; with ``--sku``
    the new SKU's TDP is used.
    """
    warnings: list[str] = []
    rname = rack.name

    gpu_tdp = _gpu_tdp(rname, accel, opts, warnings)
    heat = _components(rack, accel, opts, gpu_tdp, sku_overridden)
    w = _conversion(rack, heat)
    lines, it, gpu_each_out = heat.lines, heat.it, heat.gpu_each
    wall, losses, liquid_total, air_total = w.wall, w.losses, w.liquid, w.air
    psu = _psu(rack, w.dc_load, warnings)
    feeds = _feeds(rack, opts, wall, w.dc_load, warnings)
    usable = feeds.usable_w
    cooling = _cooling(rack, opts, w, warnings)
    reference = _reference(rack, wall)

    # per-rack figures
    gpus = rack.gpus_in_trays
    fp8 = accel.compute.peak_flops("fp8")
    fp8_pf = gpus * fp8.nominal / PFLOPS if fp8.known else None
    if fp8_pf is None:
        warnings.append(f"{rname}: {accel.name} dense FP8 peak is not disclosed; FP8 PFLOP/s per kW left empty")

    facility = _facility(opts, wall, gpus)

    over = (not feeds.ok) or (not cooling.air_ok)
    row = RackRow(
        rack=rack.name,
        display_name=rack.display_name,
        roadmap=rack.roadmap,
        variant_of=rack.variant_of,
        sku=accel.name,
        gpus=gpus,
        racks_per_domain=rack.racks_per_domain,
        scale_up_world=rack.scale_up_world,
        gpu_power_w=_rng(*gpu_each_out),
        gpu_power_cap_w=opts.gpu_power_cap_w,
        gpu_load=opts.gpu_load,
        it_power_w=_rng(*it),
        wall_power_w=wall[1],
        wall_power_range_w=_rng(*wall),
        conversion_loss_w=losses[1],
        feed_capacity_w=usable,
        feeds_ok=feeds.ok,
        liquid_heat_w=liquid_total[1],
        air_heat_w=air_total[1],
        coolant_l_per_min=cooling.coolant_l_per_min.nominal,
        airflow_m3_per_h=cooling.airflow_m3_per_h.nominal,
        airflow_cfm=m3_per_h_to_cfm(cooling.airflow_m3_per_h.nominal),
        cooling_ok=cooling.air_ok,
        over_budget=over,
        kw_per_gpu=wall[1] / KW / gpus,
        gpus_per_mw=gpus / (wall[1] / MW),
        fp8_pflops=fp8_pf,
        fp8_pflops_per_kw=None if fp8_pf is None else fp8_pf / (wall[1] / KW),
        components=lines,
        feeds=feeds,
        psu=psu,
        cooling=cooling,
        reference=reference,
        facility=facility,
    )
    return row, warnings
