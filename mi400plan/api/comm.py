"""``comm``: collective wire times on one or several systems (fabric pairs), nccl-tests style.

A *system* is a scale-up tier plus an optional scale-out tier, taken from an accelerator profile
(``--sku``: its ``interconnect.scale_up_fabric`` / ``scale_out_fabric``), from a fabric profile
(``--fabric``, optionally paired with ``--scale-out``), or from a plain bandwidth (``--bw``, a
switched tier giving each GPU that many bytes/s per direction, efficiency 1). The cost model is
``mi400plan.comms``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mi400plan import comms
from mi400plan.errors import MissingValueError, PlannerError, ProfileError, UsageError
from mi400plan.results.comm import CommResult, CommRow, SystemOut, TierOut
from mi400plan.units import UnitError, fmt_bytes, parse_count, parse_duration, parse_rate, parse_size_range

MAX_SIZES = 64


@dataclass(frozen=True)
class _System:
    label: str
    up: dict[str, comms.TierParams]  # case -> params
    out: dict[str, comms.TierParams] | None
    up_spec: Any
    out_spec: Any
    out_missing: MissingValueError | None = None
    sku: str | None = None  # accelerator the tiers came from (--sku), else None


def _assumed(fabric: Any) -> list[str]:
    out = []
    for key in ("bw_per_gpu_per_dir_gb_per_s", "hop_latency_us", "efficiency"):
        est = getattr(fabric, key)
        if est.known and est.uncertain:
            out.append(f"{key} ({est.status})")
    return out


def _tier_out(p: comms.TierParams, spec: Any) -> TierOut:
    return TierOut(
        fabric=p.name,
        kind=p.kind,  # type: ignore[arg-type]
        topology=p.topology,
        domain_size=int(p.domain_size) if p.domain_size < 2**31 - 1 else None,
        bw_per_dir_bytes_per_s=float(p.bw_per_dir),
        efficiency=float(p.efficiency),
        latency_s=float(p.latency),
        assumed=_assumed(spec) if spec is not None else [],
    )


def _cases(spec: Any) -> dict[str, comms.TierParams]:
    return {c: comms.TierParams.from_fabric(spec, c) for c in ("nominal", "fast", "slow")}


def _fabric_system(catalog: Any, name: str, scale_out: str | None) -> _System:
    up_spec = catalog.get("fabrics", name).spec
    out_spec = None
    if scale_out is not None:
        out_spec = catalog.get("fabrics", scale_out).spec
        if out_spec.tier != "scale_out":
            raise UsageError(f"--scale-out {scale_out!r} is a {out_spec.tier} fabric; give a scale-out fabric")
    return _System(up_spec.name, _cases(up_spec), _cases(out_spec) if out_spec else None, up_spec, out_spec)


def _sku_system(catalog: Any, name: str) -> _System:
    loaded = catalog.get("accelerators", name)
    acc = loaded.spec
    ic = acc.interconnect
    if not ic.scale_up_fabric:
        raise ProfileError(
            f"accelerator {acc.name!r} names no scale-up fabric", path=loaded.path, field="interconnect.scale_up_fabric"
        )
    up_spec = catalog.get("fabrics", ic.scale_up_fabric).spec
    out_spec = catalog.get("fabrics", ic.scale_out_fabric).spec if ic.scale_out_fabric else None
    out = None
    missing = None
    if out_spec is not None:
        try:
            out = _cases(out_spec)
        except MissingValueError as exc:  # only fatal if the group actually leaves the domain
            out, missing = None, exc
    return _System(acc.name, _cases(up_spec), out, up_spec, out_spec if out else None, missing, sku=acc.name)


def _no_time(sysm: _System, res: dict[str, Any], op_key: str, algo_key: str | None, n: int,
             stride: int) -> PlannerError | None:
    """Why ``sysm`` has no finite time for the collective (the group leaves its domain with no scale-out
    tier, or no valid algorithm), as the error to raise; None when every size has a time."""
    up = sysm.up["nominal"]
    if np.all(np.isfinite(res["nominal"].time)):
        return None
    span = (n - 1) * stride + 1  # GPUs from the first member to the last
    if sysm.out is None and span > up.domain_size and sysm.out_missing is not None:
        return sysm.out_missing
    if sysm.out is None and span > up.domain_size:
        return UsageError(
            f"{sysm.label}: a group of {n} with stride {stride} spans {span} GPUs, more than the "
            f"{up.domain_size}-GPU domain of {up.name}, and no scale-out fabric is given",
            hint="pair it with --scale-out NAME, or use --sku to take both tiers from an accelerator",
        )
    if algo_key is None:  # auto found nothing: the op itself is not modelled on this tier
        return UsageError(
            f"{sysm.label}: {op_key} is not modelled on a {up.topology} tier"
            + (" (all-to-all on a torus is bisection-bound; no per-dimension ring carries it)"
               if up.topology == "torus" and op_key == "all_to_all" else ""),
            hint="give a measured bandwidth with --bw (and --latency) instead",
        )
    return UsageError(
        f"{sysm.label}: algorithm {algo_key!r} is not valid for {op_key} on a {up.topology} tier"
        + (" (recursive halving/doubling needs a power-of-two group)" if algo_key == "rhd" else ""),
        hint="leave --algo at auto to pick the fastest valid algorithm",
    )


def _sku_systems(catalog: Any, skus: list[str]) -> tuple[list[_System], list[str]]:
    """Each SKU's system; ``all`` (alone or among others) is every accelerator of the catalog, and then one
    whose fabrics lack a value is left out with a warning instead of stopping the comparison."""
    if not any(s.strip().lower() == "all" for s in skus):
        return [_sku_system(catalog, s) for s in skus], []
    out: list[_System] = []
    skipped: list[str] = []
    for name in catalog.names("accelerators"):
        try:
            out.append(_sku_system(catalog, name))
        except (MissingValueError, ProfileError) as exc:
            skipped.append(f"{name}: left out: {exc.message}")
    if not out:
        raise MissingValueError("no SKU has the fabric values a collective needs: " + "; ".join(skipped))
    return out, skipped


def _slice_label(p: comms.TierParams, group_in: int) -> str | None:
    """Torus tiers: the slice the group's in-domain part occupies, e.g. ``4x4x4 (wraparound: all)``."""
    if p.topology != "torus" or group_in < 2:
        return None
    along, wrap, parent = comms.torus_slice(p, group_in)
    dims = [i + 1 for i, w in enumerate(wrap) if w]
    wr = "all" if len(dims) == len(along) else ("none" if not dims else "dim " + ", ".join(map(str, dims)))
    text = "x".join(map(str, along)) + f" (wraparound: {wr})"
    if parent is not None and tuple(along) != tuple(parent):
        text += " in a " + "x".join(map(str, parent)) + " slice"
    elif parent is None:
        text += " of the " + "x".join(map(str, p.torus_dims)) + " torus"
    return text


def _label(up_algo: int, out_algo: int, tier: int) -> str:
    if tier == 0:
        return comms.algo_label(up_algo)
    if tier == 1:
        return comms.algo_label(out_algo)
    if up_algo < 0:  # the flat collective over scale-out beat the two-level scheme
        return f"hierarchical(flat {comms.algo_label(out_algo)} over scale-out)"
    return f"hierarchical({comms.algo_label(up_algo)}+{comms.algo_label(out_algo)})"


@dataclass(frozen=True)
class _Ask:
    """The command's numbers, parsed and checked: collective, algorithm, sizes (bytes), group and stride."""

    op: str
    algo: str | None
    sizes: list[float]
    group: int
    stride: int
    bw: float | None
    latency: float | None


def _parse(op: str, size: str, group: str | int, stride: str | int, algo: str | None, bw: str | None,
           latency: str | None) -> _Ask:
    """Parse and check the collective, the algorithm and the numbers (``UsageError`` naming the flag)."""
    op_key = comms.normalize_op(op)
    if op_key is None:
        spellings = ", ".join(
            o.replace("_", "") + "/" + o.replace("_", "-") if "_" in o else o for o in comms.OPS
        )
        raise UsageError(f"unknown collective {op!r}", hint=f"use one of {spellings}")
    algo_key = None
    if algo is not None and algo.strip().lower() not in ("auto", ""):
        algo_key = comms.normalize_algo(algo)
        if algo_key is None:
            raise UsageError(f"unknown algorithm {algo!r}", hint="use auto, ring, tree, rhd or direct")
    try:
        sizes = parse_size_range(size)
        n = parse_count(str(group))
        st = parse_count(str(stride))
        bw_val = parse_rate(bw) if bw is not None else None
        lat_val = parse_duration(latency) if latency is not None else None
    except UnitError as exc:
        raise UsageError(str(exc)) from None
    if len(sizes) > MAX_SIZES:
        raise UsageError(f"size range {size!r} has {len(sizes)} sizes; at most {MAX_SIZES}")
    if any(s <= 0 for s in sizes):
        raise UsageError("sizes must be positive")
    if n != int(n) or n < 2:
        raise UsageError(f"--group must be a whole number of GPUs >= 2, got {group!r}")
    if st != int(st) or st < 1:
        raise UsageError(f"--stride must be a whole number >= 1, got {stride!r}")
    return _Ask(op_key, algo_key, sizes, int(n), int(st), bw_val, lat_val)


def _check_network(ask: _Ask, fabrics: list[str], skus: list[str], scale_out: str | None) -> None:
    """Exactly one way of naming the network, and the flags that pair with it."""
    bw_val, lat_val = ask.bw, ask.latency
    if bw_val is not None and (fabrics or skus):
        raise UsageError("--bw describes its own tier; do not combine it with --fabric or --sku")
    if bw_val is None and not (fabrics or skus):
        raise UsageError("say which network: --fabric NAME, --sku NAME or --bw BW (e.g. --bw 300GB/s)")
    if lat_val is not None and bw_val is None:
        raise UsageError("--latency applies to --bw; fabric profiles carry their own latency")
    if scale_out is not None and not fabrics:
        raise UsageError("--scale-out pairs with --fabric")
    if bw_val is not None and bw_val <= 0:
        raise UsageError("--bw must be positive")


def _price_systems(ask: _Ask, systems: list[_System], skus: list[str],
                   warnings: list[str]) -> list[tuple[_System, dict[str, comms.PlacedTime]]]:
    """Times of the collective on each system at the nominal, fast and slow cases; a SKU of ``--sku all``
    that cannot run it is left out with a warning."""
    op_key, algo_key, sizes, n_i, st_i = ask.op, ask.algo, ask.sizes, ask.group, ask.stride
    uncertain: list[str] = []
    S = np.asarray(sizes, dtype=float)
    per_system: list[tuple[_System, dict[str, comms.PlacedTime]]] = []
    from_all = any(x.strip().lower() == "all" for x in skus)
    for sysm in systems:
        up = sysm.up["nominal"]  # a scale-out fabric given alone is its own (large) domain
        res = {
            c: comms.placed_collective(op_key, S, n_i, st_i, sysm.up[c], sysm.out[c] if sysm.out else None, algo_key)
            for c in ("nominal", "fast", "slow")
        }
        err = _no_time(sysm, res, op_key, algo_key, n_i, st_i)
        if err is not None:
            if from_all and sysm.sku:  # --sku all: one SKU that cannot run it does not stop the others
                warnings.append(f"{sysm.label}: left out: {err.message}")
                continue
            raise err
        per_system.append((sysm, res))
        tier_code = int(res["nominal"].tier[0])
        if tier_code == 2:
            nom0 = res["nominal"]
            lo, hi = int(nom0.group_in_min[0]), int(nom0.group_in[0])
            warnings.append(
                f"{sysm.label}: the group spans {int(nom0.group_out[0])} scale-up domains of "
                f"{up.domain_size} GPUs; the cross-domain step runs over {sysm.out['nominal'].name if sysm.out else '-'} "
                "(hierarchical)"
            )
            if lo != hi:
                warnings.append(
                    f"{sysm.label}: the domains hold {lo} to {hi} members of the group; the least-filled domain's "
                    f"{lo} NICs carry its share of the cross-domain step and bound the time"
                )
        for spec in (sysm.up_spec, sysm.out_spec):
            if spec is not None and _assumed(spec) and (tier_code != 0 or spec is sysm.up_spec):
                uncertain.append(f"{spec.name} ({', '.join(a.split(' ')[0] for a in _assumed(spec))})")

    if not per_system:
        raise UsageError(f"no SKU can run this collective: {'; '.join(warnings)}")
    if uncertain:
        warnings.append(
            "assumed or estimated values: " + "; ".join(dict.fromkeys(uncertain)) + "; time_fast_s..time_slow_s spans them"
        )
    return per_system


def _rows(ask: _Ask, per_system: list[tuple[_System, dict[str, comms.PlacedTime]]]) -> list[CommRow]:
    """One row per system and size."""
    op_key, sizes, n_i, st_i = ask.op, ask.sizes, ask.group, ask.stride
    S = np.asarray(sizes, dtype=float)
    fastest = np.min(np.stack([r["nominal"].time for _, r in per_system]), axis=0)
    rows: list[CommRow] = []
    for sysm, res in per_system:
        nom = res["nominal"]
        alg = comms.algbw(S, nom.time)
        bus = comms.busbw(op_key, S, n_i, nom.time)
        for i, s in enumerate(sizes):
            tier_code = int(nom.tier[i])
            tier = comms.TIER_NAMES[tier_code]
            if tier == "scale_up" and getattr(sysm.up_spec, "tier", None) == "scale_out":
                tier = "scale_out"  # --fabric NAME of a scale-out fabric: its own (only) tier
            rows.append(
                CommRow(
                    system=sysm.label,
                    sku=sysm.sku,
                    op=op_key,
                    algorithm=_label(int(nom.algo_up[i]), int(nom.algo_out[i]), tier_code),
                    size_bytes=int(s),
                    group=n_i,
                    stride=st_i,
                    tier=tier,  # type: ignore[arg-type]
                    time_s=float(nom.time[i]),
                    time_fast_s=float(res["fast"].time[i]),
                    time_slow_s=float(res["slow"].time[i]),
                    algbw_bytes_per_s=float(alg[i]),
                    busbw_bytes_per_s=float(bus[i]),
                    latency_term_s=float(nom.latency[i]),
                    bandwidth_term_s=float(nom.bandwidth[i]),
                    bound="latency" if nom.latency[i] >= nom.bandwidth[i] else "bandwidth",
                    scale_up_time_s=float(nom.scale_up_time[i]),
                    scale_out_time_s=float(nom.scale_out_time[i]),
                    group_in_domain=int(nom.group_in[i]),
                    group_in_domain_min=int(nom.group_in_min[i]),
                    domains=int(nom.group_out[i]),
                    relative_to_fastest=float(nom.time[i] / fastest[i]) if fastest[i] > 0 else 1.0,
                )
            )
    return rows


def _ranking_flip(sizes: list[float], per_system: list[tuple[_System, dict[str, comms.PlacedTime]]]) -> list[str]:
    """Does the ranking flip inside the ranges? A warning at the first size where it does."""
    if len(per_system) > 1:
        for i, s in enumerate(sizes):
            order = sorted(per_system, key=lambda sr: float(sr[1]["nominal"].time[i]))
            a, b = order[0], order[1]
            if float(a[1]["slow"].time[i]) > float(b[1]["fast"].time[i]):
                return [
                    f"at {fmt_bytes(s)}: {a[0].label} is fastest at nominal values, but {b[0].label} can beat it "
                    "within the profile ranges"
                ]
    return []


def comm(
    catalog: Any,
    op: str,
    size: str,
    group: str | int,
    *,
    fabrics: list[str] | None = None,
    skus: list[str] | None = None,
    bw: str | None = None,
    latency: str | None = None,
    scale_out: str | None = None,
    algo: str | None = None,
    stride: str | int = 1,
) -> CommResult:
    """Times of ``op`` for every size in ``size`` (``32MB`` or ``1KiB..8GiB``) on each system."""
    ask = _parse(op, size, group, stride, algo, bw, latency)
    fabrics, skus = list(fabrics or []), list(skus or [])
    _check_network(ask, fabrics, skus, scale_out)
    bw_val, lat_val = ask.bw, ask.latency

    systems: list[_System] = []
    if bw_val is not None:
        p = comms.TierParams.from_bandwidth(bw_val, lat_val or 0.0)
        systems.append(_System("custom", {"nominal": p, "fast": p, "slow": p}, None, None, None))
    systems += [_fabric_system(catalog, f, scale_out) for f in fabrics]
    sku_systems, warnings = _sku_systems(catalog, skus)
    systems += sku_systems

    from mi400plan.profiles import approximation_warnings

    warnings += approximation_warnings(catalog, [s.sku for s in sku_systems if s.sku],
                                       fabrics + ([scale_out] if scale_out else []))
    per_system = _price_systems(ask, systems, skus, warnings)
    rows = _rows(ask, per_system)
    warnings += _ranking_flip(ask.sizes, per_system)

    out_systems = [
        SystemOut(
            label=sysm.label,
            scale_up=_tier_out(sysm.up["nominal"], sysm.up_spec),
            scale_out=_tier_out(sysm.out["nominal"], sysm.out_spec) if sysm.out else None,
            torus_slice=_slice_label(sysm.up["nominal"], int(res["nominal"].group_in[0])),
        )
        for sysm, res in per_system
    ]
    return CommResult(
        op=ask.op,
        group=ask.group,
        stride=ask.stride,
        algo=ask.algo or "auto",
        systems=out_systems,
        rows=rows,
        warnings=list(dict.fromkeys(warnings)),
    )

