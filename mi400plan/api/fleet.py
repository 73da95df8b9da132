"""``serve --racks N`` / ``--gpus N`` / ``--demand RATE``: the fleet of each SKU's best serving point.

Without ``--scenario`` the point is the steady-state search's (``rows``); with one, the scenario's answer
(``scenario_rows``, simulated per request): every fleet figure (requests/s and tokens/s per replica, the
sequences in flight, $/Mtok) then comes from that answer, and the row names the scenario.

Sizing: a fleet of ``F`` GPUs holds ``floor(F / g)`` whole replicas of ``g`` GPUs. A demand of ``D``
requests/s (or output tokens/s) needs ``ceil(D / r)`` replicas of ``r`` requests/s (output tokens/s) each,
``replicas x g`` GPUs (rounded up when disaggregated pools make ``g`` fractional) and ``ceil(GPUs / per
rack)`` racks; a ratio within 1e-9 of a whole number counts as that number (no replica from rounding).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.fleet import FleetRow
from mi400plan.results.serve import ScenarioRow, ServeResult, ServeRow

_DEMAND = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmg]?)\s*(req/s|tok/s)\s*$", re.IGNORECASE)
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}
MAX_FLEET_GPUS = 10**8  # a demand needing more is refused (exit 2), not printed as a confident figure
ROUND_TOL = 1e-9


@dataclass(frozen=True)
class Demand:
    """``--demand``: a rate the fleet must carry, in requests/s or output tokens/s."""

    value: float
    unit: str  # "req/s" or "tok/s" (output tokens)

    def text(self) -> str:
        v = f"{int(self.value):,}" if self.value == int(self.value) else f"{self.value:,.6g}"
        return f"{v} {self.unit}" + (" (output tokens)" if self.unit == "tok/s" else "")


def parse_demand(text: str | None) -> Demand | None:
    """``--demand 2000req/s`` or ``--demand 1.5Mtok/s`` (output tokens/s; k = 1e3, M = 1e6, G = 1e9)."""
    if text is None:
        return None
    m = _DEMAND.match(text)
    if m is None:
        raise UsageError(f"--demand {text!r}: give a rate with its unit, e.g. 2000req/s or 1.5Mtok/s "
                         "(output tokens/s; k, M, G = 1e3, 1e6, 1e9)")
    value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--demand {text!r}: the rate must be positive")
    return Demand(value, m.group(3).lower())


def gpus_per_rack(cat: Any, sku: str) -> int:
    """GPUs in the SKU's rack profile (else its scale-up domain), as ``sweep --racks`` counts them."""
    from mi400plan.hardware import gpus_per_rack as rack_gpus

    acc = cat.get("accelerators", sku).spec
    domain = 8
    fab = acc.interconnect.scale_up_fabric
    if fab:
        est = cat.get("fabrics", fab).spec.domain_size
        domain = int(est.nominal) if est.known else domain
    return rack_gpus(cat, acc.name, domain)[0]


def ceil_count(x: float) -> int:
    """The smallest whole number at least ``x``, ``x`` within ``ROUND_TOL`` (relative) of an integer counting
    as it."""
    n = round(x)
    return int(n) if abs(x - n) <= ROUND_TOL * max(1.0, abs(x)) else math.ceil(x)


@dataclass(frozen=True)
class _Point:
    """One SKU's chosen serving point, as the fleet uses it (per replica)."""

    text: str
    basis: str
    meets: bool | None
    gpus: float  # per replica
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    in_flight: float  # sequences per replica
    tokens_per_s_per_user: float
    cost_per_mtok_output: float | None
    scenario: str | None = None


def _steady_point(result: ServeResult, sku: str) -> _Point | None:
    """The steady-state search's point: the highest output tokens/s per GPU that meets the SLA (or, without
    one, listed)."""
    rows: list[ServeRow] = [r for r in result.rows if r.sku == sku]
    if result.sla:
        rows = [r for r in rows if r.meets_sla]
        basis = "the highest output tokens/s per GPU that meets the SLA"
    else:
        basis = "no SLA given: the highest output tokens/s per GPU listed"
    if not rows:
        return None
    r = max(rows, key=lambda x: x.tokens_per_s_per_gpu)
    return _Point(f"{r.layout.text()} x {r.concurrency} in flight", basis, r.meets_sla, float(r.gpus),
                  r.requests_per_s, r.tokens_per_s_per_gpu * r.gpus, r.total_tokens_per_s_per_gpu * r.gpus,
                  float(r.concurrency), r.tokens_per_s_per_user, r.cost_per_mtok_output)


def scenario_basis(result: ServeResult) -> str:
    """Why the scenario's answer is the fleet's point, in words."""
    sc = result.scenario
    assert sc is not None
    what = {"offline": "the throughput with every request queued at the start",
            "single-stream": "one request at a time per replica (its rate: 1 / mean latency)"}.get(sc.name)
    if what is None:
        what = (f"the highest Poisson rate per replica whose p99 TTFT <= {sc.ttft_p99_s:g} s and p99 TPOT <= "
                f"{sc.tpot_p99_s * 1e3:g} ms")
    return f"the {sc.name} scenario's answer (simulated per request): {what}"


def _scenario_point(result: ServeResult, sku: str) -> _Point | None:
    """The scenario's answer for the SKU: its first-ranked simulated layout that meets the limits. Per replica:
    requests/s = the answer's rate ``r``; output tokens/s = ``r`` x mean output (tokens/s per GPU x GPUs);
    total tokens/s adds ``r`` x the mean input; in flight = the row's Little's-law figure; tokens/s per user =
    1 / the median request's TPOT."""
    rows: list[ScenarioRow] = sorted((r for r in result.scenario_rows if r.sku == sku and r.meets),
                                     key=lambda x: x.rank)
    if not rows:
        return None
    r = rows[0]
    g = r.layout.gpus_per_replica
    out = r.tokens_per_s_per_gpu * g
    per_user = 1.0 / r.tpot_s.p50 if r.tpot_s.p50 > 0 else 0.0
    return _Point(f"{r.layout.text()} at {r.requests_per_s:,.2f} req/s", scenario_basis(result), True,
                  float(g), r.requests_per_s, out, out + r.requests_per_s * result.input_len, r.in_flight, per_user,
                  r.cost_per_mtok_output, scenario=r.scenario)


def _size(p: _Point, demand: Demand | None, fleet: int | None, per_rack: int | None) -> tuple[int, int, int | None]:
    """Replicas, fleet GPUs and racks: a given fleet holds whole replicas; a demand needs ``ceil(D / r)`` of
    them, their GPUs and ``ceil(GPUs / per rack)`` racks."""
    if demand is None:
        assert fleet is not None
        return int(fleet // p.gpus), fleet, None
    per = p.requests_per_s if demand.unit == "req/s" else p.output_tokens_per_s
    if per <= 0:
        raise UsageError(f"--demand {demand.text()}: the chosen point serves nothing per replica")
    n = max(1, ceil_count(demand.value / per))  # any positive demand needs a replica
    gpus = ceil_count(n * p.gpus)
    if gpus > MAX_FLEET_GPUS:
        raise UsageError(f"--demand {demand.text()} needs {gpus:,.0f} GPUs, more than {MAX_FLEET_GPUS:,}; "
                         "give a smaller demand")
    racks = ceil_count(gpus / per_rack) if per_rack else None
    return n, gpus, racks


def fleet_rows(cat: Any, result: ServeResult, *, racks: int | None, gpus: int | None,
               demand: Demand | None = None) -> list[FleetRow]:
    """One row per SKU of ``result``: its point (with a scenario, the scenario's answer; else the steady
    state's best meeting the SLA, or without an SLA its highest output tokens/s per GPU) over the fleet: the
    ``racks`` racks, the ``gpus`` GPUs, or the GPUs ``demand`` needs."""
    if racks is not None and racks < 1:
        raise UsageError("--racks must be at least 1")
    if demand is not None and racks is not None:
        raise UsageError("--demand sizes the fleet; --racks gives one: use one of them")
    out = []
    for info in result.skus:
        p = _scenario_point(result, info.sku) if result.scenario is not None else _steady_point(result, info.sku)
        if p is None:
            continue
        per_rack = gpus_per_rack(cat, info.sku) if racks is not None or demand is not None else None
        fleet = racks * per_rack if racks is not None and per_rack else int(gpus or info.gpus)
        n, fleet, need_racks = _size(p, demand, fleet, per_rack)
        out.append(FleetRow(
            sku=info.sku, fleet_gpus=fleet, racks=racks if demand is None else need_racks, gpus_per_rack=per_rack,
            point=p.text, basis=p.basis, meets_sla=p.meets, gpus_per_replica=p.gpus, replicas=n,
            gpus_in_replicas=n * p.gpus, users=int(round(n * p.in_flight)), tokens_per_s_per_user=p.tokens_per_s_per_user,
            output_tokens_per_s=p.output_tokens_per_s * n, total_tokens_per_s=p.total_tokens_per_s * n,
            requests_per_s=p.requests_per_s * n, scenario=p.scenario, cost_per_mtok_output=p.cost_per_mtok_output,
            demand=demand.text() if demand is not None else None,
        ))
    return out


def serve_fleet(cat: Any, model: str, skus: list[str], request: Any = None, *, racks: int | None = None,
                demand: str | None = None) -> Any:
    """``api.serve.serve`` (``request`` an ``api.serve.ServeRequest``) plus ``fleet`` rows for ``racks``
    racks of each SKU, for the request's ``gpus`` GPUs, or for the GPUs ``demand`` (``--demand``) needs."""
    from mi400plan.api.serve import ServeRequest, serve

    req = request or ServeRequest()
    want = parse_demand(demand)
    if want is not None and racks is not None:
        raise UsageError("--demand sizes the fleet; --racks gives one: use one of them")
    res = serve(cat, model, skus, req)
    if racks is None and req.gpus is None and want is None:
        return res
    return res.model_copy(update={"fleet": fleet_rows(cat, res, racks=racks, gpus=req.gpus, demand=want)})
