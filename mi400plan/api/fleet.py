"""``serve --racks N`` / ``--gpus N``: fleet tokens/s and users of the best serving point per SKU."""

from __future__ import annotations

from typing import Any

from mi400plan.errors import UsageError
from mi400plan.results.fleet import FleetRow


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


def fleet_rows(cat: Any, result: Any, *, racks: int | None, gpus: int | None) -> list[FleetRow]:
    """One row per SKU of ``result`` (a ``ServeResult``): its best point meeting the SLA (or, without
    an SLA, its highest output tokens/s per GPU) repeated over the fleet's GPUs."""
    if racks is not None and racks < 1:
        raise UsageError("--racks must be at least 1")
    out = []
    for info in result.skus:
        per_rack = gpus_per_rack(cat, info.sku) if racks is not None else None
        fleet = racks * per_rack if racks is not None and per_rack else int(gpus or info.gpus)
        rows = [r for r in result.rows if r.sku == info.sku]
        if result.sla:
            rows = [r for r in rows if r.meets_sla]
            basis = "the highest output tokens/s per GPU that meets the SLA"
        else:
            basis = "no SLA given: the highest output tokens/s per GPU listed"
        if not rows:
            continue
        r = max(rows, key=lambda x: x.tokens_per_s_per_gpu)
        n = int(fleet // r.gpus)
        used = n * r.gpus
        lay = r.layout
        point = (f"TP{lay.tp}" + (f" PP{lay.pp}" if lay.pp > 1 else "") + (f" EP{lay.ep}" if lay.ep > 1 else "")
                 + (" DPA" if lay.dp_attention else "") + f" x {r.concurrency} in flight")  # as the layout column reads
        out.append(FleetRow(
            sku=info.sku, fleet_gpus=fleet, racks=racks, gpus_per_rack=per_rack, point=point, basis=basis,
            meets_sla=r.meets_sla, gpus_per_replica=r.gpus, replicas=n, gpus_in_replicas=used,
            users=n * r.concurrency, tokens_per_s_per_user=r.tokens_per_s_per_user,
            output_tokens_per_s=r.tokens_per_s_per_gpu * used, total_tokens_per_s=r.total_tokens_per_s_per_gpu * used,
            requests_per_s=r.requests_per_s * n,
        ))
    return out


def serve_fleet(cat: Any, model: str, skus: list[str], request: Any = None, *, racks: int | None = None) -> Any:
    """``api.serve.serve`` (``request`` an ``api.serve.ServeRequest``) plus ``fleet`` rows for ``racks``
    racks of each SKU, or for the request's ``gpus`` GPUs."""
    from mi400plan.api.serve import ServeRequest, serve

    req = request or ServeRequest()
    res = serve(cat, model, skus, req)
    if racks is None and req.gpus is None:
        return res
    return res.model_copy(update={"fleet": fleet_rows(cat, res, racks=racks, gpus=req.gpus)})
