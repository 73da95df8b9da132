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


def _list(result: ProfilesList, console: Console) -> None:
    rows = [
        (
            r.name,
            r.kind,
            r.display_name or ("INVALID" if r.error else ""),
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
