"""Tables for ``mi400plan profiles list | show | validate``."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from mi400plan.render import table_renderer
from mi400plan.render.table import print_table, print_warnings, print_wide, short_path, table
from mi400plan.results.profiles import ProfileShow, ProfilesList, ProfilesValidate


def _num(v: float | None) -> str:
    """A profile number as written: thousands separators, up to 6 significant digits."""
    if v is None:
        return ""
    if abs(v) >= 1e6:
        return f"{v:,.0f}"
    return f"{v:,.6g}"


def _status(s: str | None) -> str:
    return {"not_disclosed": "n/d"}.get(s or "", s or "")


def _cell(value: float | None, scale: float, fmt: str, key: str, uncertain: list[str]) -> str:
    if value is None:
        return "n/d"
    return f"{value / scale:{fmt}}" + (" ~" if key in uncertain else "")


_SPEC_COLS: tuple[tuple[str, str, float, str], ...] = (
    # (field, header, divisor to the header's unit, format)
    ("hbm_bytes", "HBM\nGB", 1e9, ",.1f"),
    ("hbm_bw_bytes_per_s", "HBM\nTB/s", 1e12, ",.2f"),
    ("bf16_dense_flops", "BF16\nPF", 1e15, ",.2f"),
    ("fp8_dense_flops", "FP8\nPF", 1e15, ",.2f"),
    ("fp4_dense_flops", "FP4\nPF", 1e15, ",.2f"),
    ("tdp_w", "TDP\nW", 1.0, ",.0f"),
)


def _specs(result: ProfilesList, console: Console) -> None:
    rows = []
    for r in result.specs or []:
        if r.error:
            rows.append((r.name, "INVALID", *[""] * 7))
            continue
        cells = [_cell(getattr(r, f), d, fmt, f, r.uncertain) for f, _h, d, fmt in _SPEC_COLS]
        hbm = cells[0] + ("" if r.hbm_basis == "stated" else " u")
        domain = "n/d" if r.scale_up_domain is None else f"{r.scale_up_domain:,}"
        up = _cell(r.scale_up_bw_bytes_per_s, 1e9, ",.0f", "scale_up_bw_bytes_per_s", r.uncertain)
        rows.append((r.name, hbm, *cells[1:], domain, up))
    cols = ["sku", *[(h, "right") for _f, h, _d, _fmt in _SPEC_COLS], ("scale-up\nGPUs", "right"),
            ("up GB/s\nper dir", "right")]
    print_table(
        console,
        cols,
        rows,
        title=f"Accelerator spec sheet ({len(rows)} SKUs, per GPU, dense peaks)",
        caption="HBM GB = usable capacity in 10^9 B (u = driver-reported or vendor usable figure, else the "
        "stated capacity; vendors' HBM GB are GiB-sized); PF = 10^15 FLOP/s dense; scale-up GPUs = one "
        "domain; up GB/s = scale-up per GPU per direction; ~ = estimate, conflict or range; "
        "n/d = not disclosed. Details: mi400plan profiles show NAME",
    )
    for r in result.specs or []:
        if r.error:
            console.print(f"[red]invalid:[/red] {escape(r.error)}", markup=True)
    print_warnings(console, result.warnings)


def _list(result: ProfilesList, console: Console) -> None:
    if result.specs is not None:
        _specs(result, console)
        return
    rows = [
        (
            r.name,
            r.kind,
            (r.display_name or ("INVALID" if r.error else "")) + (" [ROADMAP]" if r.roadmap else ""),
            ", ".join(r.aliases),
            r.origin,
            r.status.summary() if not r.error else "-",
            ", ".join(r.sources),
        )
        for r in result.rows
    ]
    title = f"Profiles ({result.kind})" if result.kind else "Profiles"
    print_table(
        console,
        ["Name", "Kind", "Display name", "Aliases", "Origin", "Values by status", "Sources"],
        rows,
        title=title,
        caption="Status: D disclosed, X derived, E estimate, C conflict, U unverified, n/d not disclosed. "
        "Details: mi400plan profiles show NAME",
    )
    for r in result.rows:
        if r.error:
            console.print(f"[red]invalid:[/red] {escape(r.error)}", markup=True)
    print_warnings(console, result.warnings)


def _show(result: ProfileShow, console: Console) -> None:
    head = f"[bold]{escape(result.name)}[/bold] ({result.kind[:-1]})"
    if result.display_name:
        head += f": {escape(result.display_name)}"
    console.print(head, markup=True)
    console.print(f"file: {escape(short_path(result.path))} ({result.origin})", markup=True)
    if result.aliases:
        console.print(f"aliases: {escape(', '.join(result.aliases))}", markup=True)
    if result.description:
        console.print(escape(result.description), markup=True)
    if result.roadmap:
        console.print(f"[bold]ROADMAP[/bold] (announced, not shipping): {escape(result.roadmap)}", markup=True)
    rows: list[tuple[Any, ...]] = []
    for f in result.rows:
        if f.value is not None:  # plain integers (year, counts) without thousands separators
            value = _num(f.value) if f.status is not None else f"{f.value:g}"
        else:
            value = f.text or ("n/d" if f.status == "not_disclosed" else "")
        note = f.note or ""
        if f.value is None and f.text and len(f.text) > 40:  # long prose goes to the Note column
            value, note = "(see note)", f.text
        rows.append(
            (
                f.field,
                value,
                f.unit or "",
                _num(f.low),
                _num(f.high),
                _status(f.status),
                ", ".join(f.sources),
                note,
            )
        )
    t = table(
        console,
        ["Field", ("Value", "right"), "Unit", ("Low", "right"), ("High", "right"), "Status", "Sources", "Note"],
        rows,
        caption=f"Values by status: {result.status.summary()}",
    )
    # Field paths are single words, so table() never splits them; the Note column wraps instead.
    print_wide(console, t)
    if result.notes:
        console.print("[bold]Notes[/bold]", markup=True)
        for n in result.notes:
            console.print(f"  - {escape(n)}", markup=True)
    if result.sources:
        console.print("[bold]Sources[/bold]", markup=True)
        for k, v in result.sources.items():
            url = f" <{v.url}>" if v.url else ""
            console.print(f"  {escape(k)} ({escape(v.date or 'undated')}): {escape(v.title)}{escape(url)}", markup=True)
    print_warnings(console, result.warnings)


def _validate(result: ProfilesValidate, console: Console) -> None:
    rows = [(r.kind or "?", r.name or "", r.origin, "OK" if r.ok else "FAIL", short_path(r.path)) for r in result.rows]
    print_table(console, ["Kind", "Name", "Origin", "Result", "Path"], rows, title="Profile validation")
    for r in result.rows:
        for issue in r.issues:
            console.print(f"[red]error:[/red] {escape(issue.message)}", markup=True)
    verdict = "[green]all valid[/green]" if not result.failed else f"[red]{result.failed} with problems[/red]"
    console.print(f"{result.checked} checked, {verdict}", markup=True)
    print_warnings(console, result.warnings)


@table_renderer("profiles")
def render(result: Any, console: Console) -> None:
    if isinstance(result, ProfilesList):
        _list(result, console)
    elif isinstance(result, ProfileShow):
        _show(result, console)
    else:
        _validate(result, console)
