"""``profiles list | show | validate``: read the catalog and describe or check its files.

Nothing here converts units: ``show`` reports each number in the unit its TOML key names
(:func:`unit_of_key`), as written in the file.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from mi400plan.errors import PlannerError, ProfileError, UnknownNameError, UsageError
from mi400plan.profiles import KIND_SINGULAR, KINDS, Catalog, kind_of_path, load_file, looks_like_path
from mi400plan.results.profiles import (
    FieldRow,
    ProfileRow,
    ProfileShow,
    ProfilesList,
    ProfilesValidate,
    SourceRow,
    SpecSheetRow,
    StatusCounts,
    ValidateRow,
    ValidationIssue,
)
from mi400plan.specs.common import Estimate

# Key suffix -> unit label, longest first (a key like ``hbm_bandwidth_tb_per_s`` must not match ``_s``).
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_tb_per_s", "TB/s"),
    ("_gb_per_s", "GB/s"),
    ("_mb_per_s", "MB/s"),
    ("_tbit_per_s", "Tb/s"),
    ("_gbit_per_s", "Gb/s"),
    ("_gt_per_s", "GT/s"),
    ("_tflops", "TFLOP/s"),
    ("_pflops", "PFLOP/s"),
    ("_tops", "TOPS"),
    ("_gib", "GiB"),
    ("_mib", "MiB"),
    ("_tib", "TiB"),
    ("_gb", "GB"),
    ("_mb", "MB"),
    ("_tb", "TB"),
    ("_kb", "KB"),
    ("_bytes", "B"),
    ("_kw", "kW"),
    ("_w", "W"),
    ("_v", "V"),
    ("_a", "A"),
    ("_kva", "kVA"),
    ("_mhz", "MHz"),
    ("_ghz", "GHz"),
    ("_ns", "ns"),
    ("_us", "us"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_m", "m"),
    ("_kg", "kg"),
    ("_c", "degC"),
    ("_lpm", "L/min"),
    ("_pct", "%"),
    ("_fraction", "fraction"),
    ("_billion", "1e9"),
    ("_u", "U"),
)

# Top-level fields shown in the header of ``show`` rather than as rows.
_HEADER_FIELDS = frozenset({"name", "aliases", "display_name", "description", "sources", "notes", "roadmap"})


def unit_of_key(key: str) -> str | None:
    """The unit a TOML key names by its suffix (``hbm_capacity_gib`` -> ``GiB``), or None."""
    k = key.lower()
    for suffix, unit in _UNIT_SUFFIXES:
        if k.endswith(suffix):
            return unit
    return None


def _kinds(kind: str | None) -> tuple[str, ...]:
    if kind is None:
        return KINDS
    k = kind.strip().lower()
    if k not in KINDS:
        singular = {v: key for key, v in KIND_SINGULAR.items()}
        if k in singular:
            return (singular[k],)
        raise UsageError(f"unknown profile kind {kind!r}", hint=f"kinds: {', '.join(KINDS)}")
    return (k,)


# --- walking a spec -------------------------------------------------------------------------------
def _walk(model: BaseModel, prefix: str, include_defaults: bool, top: bool) -> list[FieldRow]:
    rows: list[FieldRow] = []
    set_fields = model.model_fields_set
    for name in type(model).model_fields:
        if top and name in _HEADER_FIELDS:
            continue
        value = getattr(model, name)
        path = f"{prefix}{name}"
        explicit = name in set_fields
        if isinstance(value, Estimate):
            if explicit or include_defaults:
                rows.append(_estimate_row(path, value))
        elif isinstance(value, BaseModel):
            rows.extend(_walk(value, path + ".", include_defaults, False))
        elif isinstance(value, dict):
            for k, item in value.items():
                if isinstance(item, Estimate):
                    rows.append(_estimate_row(f"{path}.{k}", item, key=str(k)))
                elif isinstance(item, BaseModel):
                    rows.extend(_walk(item, f"{path}.{k}.", include_defaults, False))
                elif explicit or include_defaults:
                    rows.append(_plain_row(f"{path}.{k}", item, key=str(k)))
        elif isinstance(value, (list, tuple)) and any(isinstance(i, BaseModel) for i in value):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    rows.extend(_walk(item, f"{path}[{i}].", include_defaults, False))
        elif explicit or (include_defaults and value is not None):
            rows.append(_plain_row(path, value))
    return rows


def _estimate_row(path: str, est: Estimate, key: str | None = None) -> FieldRow:
    stated = getattr(est, "stated", None)  # a capacity's vendor wording, e.g. "80 GB HBM3"
    note = est.note if not stated else f"vendor: {stated!r}" + (f"; {est.note}" if est.note else "")
    return FieldRow(
        field=path,
        value=est.nominal,
        unit=getattr(est, "unit", None) or unit_of_key(key or path.rsplit(".", 1)[-1]),
        low=est.low,
        high=est.high,
        status=est.status,
        sources=list(est.source),
        note=note,
    )


def _plain_row(path: str, value: Any, key: str | None = None) -> FieldRow:
    unit = unit_of_key(key or path.rsplit(".", 1)[-1])
    if isinstance(value, bool) or value is None:
        return FieldRow(field=path, text="" if value is None else str(value).lower())
    if isinstance(value, (int, float)):
        return FieldRow(field=path, value=float(value), unit=unit)
    if isinstance(value, (list, tuple)):
        return FieldRow(field=path, text=", ".join(str(v) for v in value))
    return FieldRow(field=path, text=str(value))


def _explicit_estimates(model: BaseModel) -> list[Estimate]:
    """Estimates written in the file (defaults such as an omitted key's "n/d" are not counted)."""
    out: list[Estimate] = []
    set_fields = model.model_fields_set
    for name in type(model).model_fields:
        value = getattr(model, name)
        if isinstance(value, Estimate):
            if name in set_fields:
                out.append(value)
        elif isinstance(value, BaseModel):
            out.extend(_explicit_estimates(value))
        elif isinstance(value, dict):
            for item in value.values():
                if isinstance(item, Estimate):
                    out.append(item)
                elif isinstance(item, BaseModel):
                    out.extend(_explicit_estimates(item))
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, BaseModel):
                    out.extend(_explicit_estimates(item))
    return out


def status_counts(spec: BaseModel) -> StatusCounts:
    """How many values of each status a profile states."""
    counts: dict[str, int] = {}
    for est in _explicit_estimates(spec):
        counts[est.status] = counts.get(est.status, 0) + 1
    return StatusCounts(**counts)


def _natural(key: str) -> tuple[str, int, str]:
    """Sort source keys as A2 < A10 (letters, then number)."""
    import re

    m = re.match(r"^([A-Za-z]*)(\d*)(.*)$", key)
    assert m is not None
    return (m.group(1), int(m.group(2) or -1), m.group(3))


def _catalog_specs(catalog: Catalog, kind: str) -> Iterator[tuple[str, str, str, Any, PlannerError | ImportError | None]]:
    """(name, path, origin, spec or None, error or None) for every profile of ``kind``, sorted by name."""
    for name in catalog.names(kind):
        path, origin = catalog.entry_path(kind, name)
        try:
            yield name, path, origin, catalog.get(kind, name).spec, None
        except (ProfileError, ImportError) as exc:
            yield name, path, origin, None, exc


# --- list -----------------------------------------------------------------------------------------
def list_profiles(catalog: Catalog, kind: str | None = None, specs: bool = False) -> ProfilesList:
    """Every profile of ``kind`` (or of all kinds), sorted by kind then name; bad files get an error.

    ``specs``: the accelerator spec sheet instead (``kind`` must be None or accelerators)."""
    if specs:
        if kind is not None and _kinds(kind) != ("accelerators",):
            raise UsageError("--specs lists accelerators only", hint="drop --kind or use --kind accelerators")
        return ProfilesList(kind="accelerators", specs=spec_sheet(catalog))
    rows: list[ProfileRow] = []
    for k in _kinds(kind):
        for name, path, origin, spec, exc in _catalog_specs(catalog, k):
            if exc is not None:
                rows.append(
                    ProfileRow(name=name, kind=k, origin=origin, path=path, error=_message(exc, path))
                )
                continue
            rows.append(
                ProfileRow(
                    name=name,
                    kind=k,
                    display_name=getattr(spec, "display_name", None),
                    aliases=list(getattr(spec, "aliases", [])),
                    roadmap=getattr(spec, "roadmap", None),
                    origin=origin,
                    path=path,
                    status=status_counts(spec),
                    sources=sorted(getattr(spec, "sources", {}) or {}, key=_natural),
                    notes=list(getattr(spec, "notes", []) or []),
                    **_summary(k, spec),
                )
            )
    return ProfilesList(kind=None if kind is None else _kinds(kind)[0], rows=rows)


def _summary(kind: str, spec: Any) -> dict[str, Any]:
    """The figures ``profiles list`` puts on a profile's one line: an accelerator's vendor, year, usable
    HBM, dense peaks and TDP; a model's parameter counts (``params.count_params``), layers and context."""
    if kind == "accelerators":
        picks = {
            "hbm_bytes": spec.hbm_bytes, "bf16_dense_flops": spec.compute.peak_flops("bf16"),
            "fp8_dense_flops": spec.compute.peak_flops("fp8"), "fp4_dense_flops": spec.compute.peak_flops("fp4"),
            "tdp_w": spec.power.tdp_w,
        }
        return {"vendor": spec.vendor, "year": spec.year, **{k: est.nominal for k, est in picks.items()}}
    if kind == "models":
        from mi400plan.params import count_params

        counts = count_params(spec)
        return {"params_total": counts.total, "params_active": counts.active, "num_layers": spec.num_layers,
                "max_seq_len": spec.max_seq_len}
    return {}


def _spec_row(catalog: Catalog, name: str, acc: Any) -> SpecSheetRow:
    """One accelerator's spec-sheet row; the scale-up domain and bandwidth come from its fabric."""
    picks: dict[str, Estimate] = {
        "hbm_bytes": acc.hbm_bytes,
        "hbm_bw_bytes_per_s": acc.memory.bandwidth_bytes_per_s,
        "bf16_dense_flops": acc.compute.peak_flops("bf16"),
        "fp8_dense_flops": acc.compute.peak_flops("fp8"),
        "fp4_dense_flops": acc.compute.peak_flops("fp4"),
        "tdp_w": acc.power.tdp_w,
    }
    fabric_name = acc.interconnect.scale_up_fabric
    domain = None
    if fabric_name:
        try:
            fab = catalog.get("fabrics", fabric_name).spec
        except (ProfileError, UnknownNameError):
            fab = None
        if fab is not None:
            picks["scale_up_bw_bytes_per_s"] = fab.bw_per_gpu_per_dir_gb_per_s.scaled(1e9)
            domain = fab.domain_size.nominal
    return SpecSheetRow(
        name=name,
        display_name=acc.display_name,
        hbm_basis=acc.memory.capacity_basis,
        scale_up_fabric=fabric_name,
        scale_up_domain=None if domain is None else int(domain),
        uncertain=[k for k, est in picks.items() if est.known and est.uncertain],
        **{k: est.nominal for k, est in picks.items()},
    )


def spec_sheet(catalog: Catalog) -> list[SpecSheetRow]:
    """Every accelerator's spec sheet (``profiles list --specs``), sorted by name."""
    out: list[SpecSheetRow] = []
    for name, path, _origin, spec, exc in _catalog_specs(catalog, "accelerators"):
        if exc is not None:
            out.append(SpecSheetRow(name=name, error=_message(exc, path)))
        else:
            out.append(_spec_row(catalog, name, spec))
    return out


# --- show -----------------------------------------------------------------------------------------
def _find_kind(catalog: Catalog, name: str) -> str:
    hits: list[str] = []
    for k in KINDS:
        try:
            catalog.resolve(k, name)
            hits.append(k)
        except UnknownNameError:
            pass
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise UsageError(
            f"{name!r} names profiles of several kinds: {', '.join(hits)}",
            hint=f"add --kind {hits[0]} (or another of: {', '.join(hits)})",
        )
    keys: dict[str, str] = {}
    for k in KINDS:
        for n in catalog.names(k):
            keys.setdefault(n, k)
    matches = difflib.get_close_matches(name.strip().lower(), list(keys), n=3, cutoff=0.5)
    if not matches:
        matches = [n for n in keys if name.strip().lower() in n][:3]
    exc = UnknownNameError("profile", name, matches, [])
    exc.hint = "'mi400plan profiles list' shows every name and alias"
    raise exc


def show_profile(
    catalog: Catalog, name: str, kind: str | None = None, include_defaults: bool = False
) -> ProfileShow:
    """Every field of one profile with value, unit, range, status and sources, and the file used.

    ``name`` may be a name, an alias or a path to a TOML file (its kind from the parent directory
    name or ``kind``). Without ``kind`` all kinds are searched; a name found in several is an error.
    """
    if looks_like_path(name) and Path(name).exists():
        k = _kinds(kind)[0] if kind else kind_of_path(Path(name))
        if k is None:
            raise UsageError(
                f"cannot tell the kind of {name}: its directory is not one of {', '.join(KINDS)}",
                hint="give --kind",
            )
        loaded = load_file(k, name)
    else:
        k = _kinds(kind)[0] if kind else _find_kind(catalog, name)
        loaded = catalog.get(k, name)
    spec = loaded.spec
    sources = getattr(spec, "sources", {}) or {}
    return ProfileShow(
        kind=k,
        name=getattr(spec, "name", name),
        display_name=getattr(spec, "display_name", None),
        aliases=list(getattr(spec, "aliases", [])),
        description=getattr(spec, "description", None),
        roadmap=getattr(spec, "roadmap", None),
        origin=loaded.origin,
        path=loaded.path,
        status=status_counts(spec),
        sources={k: SourceRow(title=v.title, date=v.date, url=v.url) for k, v in sources.items()},
        notes=list(getattr(spec, "notes", [])),
        rows=_walk(spec, "", include_defaults, True),
        warnings=_undated_warnings(spec, loaded.path),
    )


def _undated_warnings(spec: Any, path: str) -> list[str]:
    """A warning per profile whose ``[sources]`` entries lack a publication date."""
    undated = getattr(spec, "undated_sources", lambda: [])()
    if not undated:
        return []
    return [
        f"{path}: [sources] {', '.join(undated)} carry no publication date; write "
        "KEY = { title = \"...\", date = \"YYYY-MM-DD\" } (or YYYY-MM) so readers can tell how old a figure is"
    ]


# --- validate -------------------------------------------------------------------------------------
def _message(exc: BaseException, path: str) -> str:
    if isinstance(exc, PlannerError):
        return exc.message
    if isinstance(exc, ImportError):
        return f"{path}: this kind of profile cannot be read by this version (missing spec module {exc.name})"
    return f"{path}: {exc}"


def _issue(exc: BaseException, path: str) -> ValidationIssue:
    if isinstance(exc, ProfileError):
        return ValidationIssue(path=exc.path or path, line=exc.line, field=exc.field, message=exc.message)
    return ValidationIssue(path=path, message=_message(exc, path))


def _spec_issues(spec: Any, path: str, catalog: Catalog | None = None) -> list[ValidationIssue]:
    """Spec-specific consistency checks: a spec's ``consistency_errors()`` list, if it has one, and
    for a rack its published totals against its accelerator profile (when the catalog has it)."""
    check = getattr(spec, "consistency_errors", None)
    msgs = list(check()) if callable(check) else []
    if catalog is not None and getattr(spec, "published", None) is not None:
        from mi400plan.specs.rack import published_total_errors

        try:
            acc = catalog.get("accelerators", spec.sku).spec
        except (ProfileError, UnknownNameError) as exc:
            msgs.append(f"published totals not checked: accelerator {spec.sku!r}: {_message(exc, path)}")
        else:
            msgs += published_total_errors(spec, acc)
    return [ValidationIssue(path=path, message=f"{path}: {msg}") for msg in msgs]


def _check_file(kind: str, path: Path, origin: str, warnings: list[str], catalog: Catalog) -> ValidateRow:
    try:
        loaded = load_file(kind, path)
    except (ProfileError, ImportError) as exc:
        return ValidateRow(kind=kind, name=path.stem, path=str(path), origin=origin, ok=False, issues=[_issue(exc, str(path))])
    spec = loaded.spec
    issues: list[ValidationIssue] = []
    name = getattr(spec, "name", None)
    if path.suffix.lower() == ".toml" and name is not None and name != path.stem:
        issues.append(
            _issue(
                ProfileError(
                    f"profile name {name!r} does not match its file name {path.stem!r}", path=str(path), field="name"
                ),
                str(path),
            )
        )
    issues += _spec_issues(spec, str(path), catalog)
    warnings += _undated_warnings(spec, str(path))
    return ValidateRow(kind=kind, name=name, path=str(path), origin=origin, ok=not issues, issues=issues)


def _files_in(directory: Path, kind: str | None) -> list[tuple[str | None, Path]]:
    """(kind, file) for every TOML under a directory: a catalog root, a kind directory, or any
    directory when ``kind`` is given."""
    subdirs = [directory / k for k in KINDS if (directory / k).is_dir()]
    if subdirs and kind is None:
        return [(d.name, f) for d in subdirs for f in sorted(d.glob("*.toml"))]
    if kind is None and directory.name in KINDS:
        kind = directory.name
    return [(kind, f) for f in sorted(directory.glob("*.toml"))]


def _alias_clashes(catalog: Catalog, kind: str) -> list[ValidateRow]:
    """An alias that equals another profile's name (or another profile's alias) is ambiguous."""
    owners: dict[str, list[str]] = {}
    paths: dict[str, tuple[str, str]] = {}
    for n in catalog.names(kind):
        paths[n] = catalog.entry_path(kind, n)
        try:
            aliases = list(getattr(catalog.get(kind, n).spec, "aliases", []))
        except (ProfileError, ImportError):
            continue
        for key in [n, *aliases]:
            owners.setdefault(key, []).append(n)
    rows = []
    for key, who in sorted(owners.items()):
        if len(who) > 1:
            first = who[-1]
            path, origin = paths[first]
            rows.append(
                ValidateRow(
                    kind=kind,
                    name=first,
                    path=path,
                    origin=origin,
                    ok=False,
                    issues=[
                        ValidationIssue(
                            path=path,
                            field="aliases",
                            message=f"{path} [aliases]: {key!r} is claimed by several {kind}: {', '.join(who)}",
                        )
                    ],
                )
            )
    return rows


def validate_profiles(
    catalog: Catalog, paths: list[str] | None = None, kind: str | None = None
) -> ProfilesValidate:
    """Validate files, directories, or (no paths) the whole catalog: bundled plus user directories.

    Each file is parsed, checked against its spec, its name checked against its file name, and
    its spec's ``consistency_errors()`` run. Problems are collected, never raised.
    """
    rows: list[ValidateRow] = []
    clashes: list[ValidateRow] = []
    warnings: list[str] = []
    if not paths:
        for k in _kinds(kind):
            for name, path, origin, spec, exc in _catalog_specs(catalog, k):
                if exc is not None:
                    rows.append(ValidateRow(kind=k, name=name, path=path, origin=origin, ok=False, issues=[_issue(exc, path)]))
                    continue
                issues = _spec_issues(spec, path, catalog)
                warnings += _undated_warnings(spec, path)
                rows.append(ValidateRow(kind=k, name=name, path=path, origin=origin, ok=not issues, issues=issues))
            clashes.extend(_alias_clashes(catalog, k))
    else:
        forced = _kinds(kind)[0] if kind else None
        for raw in paths:
            p = Path(raw)
            if p.is_dir():
                targets = _files_in(p, forced)
                if not targets:
                    rows.append(
                        ValidateRow(
                            path=str(p),
                            origin="file",
                            ok=False,
                            issues=[ValidationIssue(path=str(p), message=f"{p}: no .toml profiles found")],
                        )
                    )
            elif p.is_file():
                targets = [(forced or kind_of_path(p), p)]
            else:
                rows.append(
                    ValidateRow(
                        path=str(p), origin="file", ok=False, issues=[ValidationIssue(path=str(p), message=f"{p}: no such file or directory")]
                    )
                )
                continue
            for k, f in targets:
                if k is None:
                    msg = f"{f}: cannot tell the profile kind (parent directory is not one of {', '.join(KINDS)}); give --kind"
                    rows.append(ValidateRow(path=str(f), origin="file", ok=False, issues=[ValidationIssue(path=str(f), message=msg)]))
                    continue
                rows.append(_check_file(k, f, "file", warnings, catalog))
    checked = len(rows)
    rows += clashes
    failed = sum(1 for r in rows if not r.ok)
    return ProfilesValidate(checked=checked, failed=failed, rows=rows, warnings=warnings)
