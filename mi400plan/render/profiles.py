"""Tables for ``mi400plan profiles list | show | validate``."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from mi400plan.render import table_renderer
from mi400plan.render.table import NUMBER_MAX_WIDTH, print_lines, print_table, print_warnings, print_wide, short_path, table
from mi400plan.results.profiles import ProfileRow, ProfileShow, ProfilesList, ProfilesValidate


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


def _pf(v: float | None) -> str:
    return "n/d" if v is None else f"{v / 1e15:,.2f}"


def _billions(v: int | None) -> str:
    return "" if v is None else f"{v / 1e9:,.1f}"


def _state(r: ProfileRow) -> str:
    return "INVALID" if r.error else ("roadmap" if r.roadmap else "")


# Each kind's one-line summary: (header, cell) pairs after the name.
_SUMMARY: dict[str, tuple[tuple[Any, Any], ...]] = {
    "accelerators": (
        ("vendor", lambda r: r.vendor or ""),
        (("year", "right"), lambda r: "" if r.year is None else str(r.year)),
        (("HBM\nGB", "right"), lambda r: "n/d" if r.hbm_bytes is None else f"{r.hbm_bytes / 1e9:,.1f}"),
        (("BF16\nPF", "right"), lambda r: _pf(r.bf16_dense_flops)),
        (("FP8\nPF", "right"), lambda r: _pf(r.fp8_dense_flops)),
        (("FP4\nPF", "right"), lambda r: _pf(r.fp4_dense_flops)),
        (("TDP\nW", "right"), lambda r: "n/d" if r.tdp_w is None else f"{r.tdp_w:,.0f}"),
        ("status", _state),
    ),
    "models": (
        (("params\nB", "right"), lambda r: _billions(r.params_total)),
        (("active\nB", "right"), lambda r: _billions(r.params_active)),
        (("layers", "right"), lambda r: "" if r.num_layers is None else str(r.num_layers)),
        (("context\ntokens", "right"), lambda r: "" if r.max_seq_len is None else f"{r.max_seq_len:,}"),
        ("display name", lambda r: (r.display_name or "") + (" (roadmap)" if r.roadmap else "")),
    ),
}
_OTHER = (("display name", lambda r: r.display_name or ""), ("status", _state))
_CAPTIONS = {
    "accelerators": "HBM GB = usable HBM per GPU in 10^9 B (vendors' HBM \"GB\" are GiB-sized: 288 GiB = "
    "309.2 GB); PF = 10^15 FLOP/s dense; TDP = board power; roadmap = announced, not shipping.",
    "models": "params and active (per token) in 10^9, counted from the architecture; context = longest "
    "sequence the model card states.",
}
_WIDE_COLS = (
    ("aliases", lambda r: ", ".join(r.aliases)),
    ("origin", lambda r: r.origin),
    ("values by status", lambda r: r.status.summary() if not r.error else "-"),
    ("sources", lambda r: ", ".join(r.sources)),
)


def _kind_table(kind: str, rows: list[ProfileRow], console: Console, wide: bool) -> None:
    """One line per profile of ``kind``; ``--wide`` adds aliases, origin, status counts, sources, notes."""
    cols = (("name", lambda r: r.name), *_SUMMARY.get(kind, _OTHER), *(_WIDE_COLS if wide else ()))
    caption = _CAPTIONS.get(kind, "")
    more = "Status: D disclosed, X derived, E estimate, C conflict, U unverified, M measured, A assumed, " \
        "n/d not disclosed. " if wide else "--wide adds aliases, sources and notes. "
    cells = [[f(r) for _h, f in cols] for r in rows]
    keep = [i for i in range(len(cols)) if i == 0 or any(c[i] for c in cells)]  # no column of blanks
    print_table(
        console,
        [cols[i][0] for i in keep],
        [[c[i] for i in keep] for c in cells],
        title=f"{kind} ({len(rows)})",
        caption=f"{caption} {more}Details: mi400plan profiles show NAME".strip(),
    )
    if wide and any(r.notes for r in rows):  # notes are prose: under the table, not in a cell
        console.print("notes:", markup=False)
        print_lines(console, [f"  {r.name}: " + " ".join(f"({i}) {n}" for i, n in enumerate(r.notes, 1))
                              for r in rows if r.notes])


def _list(result: ProfilesList, console: Console) -> None:
    if result.specs is not None:
        _specs(result, console)
        return
    wide = bool(getattr(console, "_mi400plan_wide", False))
    kinds = [k for k in dict.fromkeys(r.kind for r in result.rows)]
    for i, kind in enumerate(kinds):
        if i:
            console.print()
        _kind_table(kind, [r for r in result.rows if r.kind == kind], console, wide)
    for r in result.rows:
        if r.error:
            console.print(f"[red]invalid:[/red] {escape(r.error)}", markup=True)
    print_warnings(console, result.warnings)


def _show(result: ProfileShow, console: Console) -> None:
    head = f"[bold]{escape(result.name)}[/bold] ({'serving stack' if result.kind == 'serving' else result.kind[:-1]})"
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
    groups: dict[str, list[Any]] = {}
    for f in result.rows:  # one table per section: memory, compute, ..., trays[0].components[1]
        groups.setdefault(f.field.rpartition(".")[0], []).append(f)
    for section in sorted(groups, key=lambda g: (g != "", 0)):
        _show_group(console, section, groups[section])
    console.print(f"Values by status: {result.status.summary()}", markup=False)
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


# A note longer than this (any note under 100 columns) goes under its table as a numbered footnote;
# the Note column keeps "[n]".
SHORT_NOTE = 32


def _show_group(console: Console, section: str, fields: list[Any]) -> None:
    """One section of ``profiles show`` (the section prefix dropped from its fields): its text fields as
    ``name: value`` lines, its numbers as a table with the columns they use, then the long notes."""
    rows: list[tuple[Any, ...]] = []
    texts: list[str] = []
    footnotes: list[str] = []

    short = SHORT_NOTE if console.width >= 100 else 0  # under 100 columns every note goes under the table

    def ref(note: str) -> str:
        if len(note) <= short:
            return note
        footnotes.append(note)
        return f"[{len(footnotes)}]"

    for f in fields:
        name = f.field[len(section) + 1:] if section else f.field
        if f.value is None and f.status is None:  # a name, a switch, a list: text, not a figure
            texts.append(f"  {name}: {f.text or ''}" + (f" {ref(f.note)}" if f.note else ""))
            continue
        # plain integers (year, counts) without thousands separators
        value = "n/d" if f.value is None else _num(f.value) if f.status is not None else f"{f.value:g}"
        rows.append((name, value, f.unit or "", _num(f.low), _num(f.high), _status(f.status), ", ".join(f.sources),
                     ref(f.note or "")))
    console.print()
    if section:
        console.print(section, markup=False, highlight=False)
    print_lines(console, texts)
    if rows:
        # Sources give way first on a narrow terminal: the source list closes the output anyway.
        cols: list[Any] = ["Field", ("Value", "right"), "Unit", ("Low", "right"), ("High", "right"), "Status",
                           ("Sources", "left", "secondary"), "Note"]
        keep = [i for i in range(len(cols)) if i < 2 or any(r[i] for r in rows)]  # columns this section uses
        print_wide(console, table(console, [cols[i] for i in keep], [[r[i] for i in keep] for r in rows]))
    for i, text in enumerate(footnotes, 1):
        print_lines(console, [f"  [{i}] {text}"])


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
