"""Shared rich-table helpers. The only code that builds a rich ``Table`` or ``Console``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


# Right-aligned values up to this many characters are never wrapped.
NUMBER_MAX_WIDTH = 24

# Plain-ASCII twin of rich's SIMPLE box: no vertical rules (two spaces between columns instead of
# " | "), a dashed rule under the header. Narrow terminals get the columns, not the borders.
ASCII_SIMPLE = box.Box(
    "    \n"
    "    \n"
    " -- \n"
    "    \n"
    "    \n"
    " -- \n"
    "    \n"
    "    \n",
    ascii=True,
)


# --format md: text lines are not wrapped (a Markdown reader reflows them).
MARKDOWN_WIDTH = 10_000
# The width rule. A width (``--width`` or $COLUMNS) is used when it is 20 to 1,000 columns; anything
# else (COLUMNS=0, negative, not a number, 10**9) says nothing and is ignored. Without one, a
# terminal's own width is used, and output that is not a terminal (a pipe, a file) is printed at each
# table's natural width: nothing there wraps lines, so no table turns into records.
WIDTH_MIN, WIDTH_MAX = 20, 1_000
NATURAL_WIDTH = 10_000
TERMINAL_FALLBACK = 80  # a terminal that will not say its size (the width rich and shutil assume)

# Glue for a label and its value inside a cell ("mem\u00a04%"): a cell is only ever wrapped at
# ordinary spaces, so the pair stays on one line at any width; it prints as a plain space.
KEEP = "\u00a0"


def columns_from_env() -> int | None:
    """$COLUMNS when it is a usable width (20 to 1,000), else None (unknown)."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and WIDTH_MIN <= int(text) <= WIDTH_MAX:
        return int(text)
    return None


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def output_width(stream: IO[str], width: int | None = None) -> int:
    """Columns to lay ``stream``'s tables out in: ``width`` (``--width``), else $COLUMNS, else the
    terminal's width, else (not a terminal) the natural width."""
    if width is not None and WIDTH_MIN <= width <= WIDTH_MAX:
        return width
    env = columns_from_env()
    if env is not None:
        return env
    if not _is_terminal(stream):
        return NATURAL_WIDTH
    try:
        cols = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return TERMINAL_FALLBACK
    return cols if WIDTH_MIN <= cols <= WIDTH_MAX else TERMINAL_FALLBACK


def make_console(
    stream: IO[str] | None = None, *, ascii: bool = False, stderr: bool = False, wide: bool = False,
    markdown: bool = False, width: int | None = None,
) -> Console:
    import sys

    target = stream if stream is not None else (sys.stderr if stderr else sys.stdout)
    cols = MARKDOWN_WIDTH if markdown else output_width(target, width)
    c = Console(file=stream, stderr=stderr, width=cols, highlight=False, soft_wrap=False,
                **({"color_system": None, "force_terminal": False} if markdown else {}))
    c._mi400plan_markdown = markdown  # type: ignore[attr-defined]
    c._mi400plan_ascii = ascii  # type: ignore[attr-defined]
    c._mi400plan_wide = wide or os.environ.get("MI400PLAN_WIDE") == "1"  # type: ignore[attr-defined]
    return c


def _words(text: str) -> list[str]:
    """The pieces a cell may be wrapped between: split at ordinary spaces and line breaks, never at KEEP."""
    import re

    return [w for w in re.split(r"[ \t\n]+", text) if w]


def _longest_word(text: str) -> int:
    return max((len(w) for w in _words(text)), default=0)


def _longest_line(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _fit_widths(mins: list[int], maxs: list[int], avail: int) -> list[int] | None:
    """Content widths for columns given their (min, max): None when every column fits at its max;
    otherwise start from the minimums and share what is left in proportion to each column's slack."""
    if sum(maxs) <= avail:
        return None
    widths = list(mins)
    left = avail - sum(widths)
    slack = [mx - mn for mn, mx in zip(mins, maxs)]
    total = sum(slack)
    if left > 0 and total > 0:
        for i, sl in enumerate(slack):
            widths[i] += min(sl, left * sl // total)
        left = avail - sum(widths)
        for i in sorted(range(len(widths)), key=lambda k: -(maxs[k] - widths[k])):
            if left <= 0:
                break
            add = min(left, maxs[i] - widths[i])
            widths[i] += add
            left -= add
    return widths


def table(
    console: Console,
    columns: Sequence[str | tuple[str, str] | tuple[str, str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    caption: str | None = None,
) -> Table:
    """Build a table; a column given as ``(header, "right")`` is right-aligned (numbers), and one
    given as ``(header, justify, "secondary")`` is left out when the table would not fit the console
    otherwise (rightmost secondary column first; the caption names what was left out and ``--wide``
    keeps it).

    Cells are plain text (no markup). No value is ever cut: text wraps at spaces, a right-aligned
    value is never split, and when even that is wider than the console the rows print as records
    (see ``print_wide``) instead of printing "...".
    """
    specs = [(c, "left", "") if isinstance(c, str) else (c[0], c[1], c[2] if len(c) > 2 else "") for c in columns]
    cells = [[str(x) for x in r] for r in rows]
    t = _build(console, [(h, j) for h, j, _ in specs], cells, title, caption)
    hidden: list[str] = []
    while t._mi400plan_need > console.width and not getattr(console, "_mi400plan_wide", False):  # type: ignore[attr-defined]
        drop = [i for i, (_, _, role) in enumerate(specs) if role == "secondary"]
        if not drop:
            break
        i = drop[-1]
        hidden.insert(0, " ".join(specs[i][0].split()))
        specs = specs[:i] + specs[i + 1:]
        cells = [r[:i] + r[i + 1:] for r in cells]
        note = f"not shown at this width: {', '.join(hidden)} (--wide, --json or --format csv show them)"
        t = _build(console, [(h, j) for h, j, _ in specs], cells, title, f"{caption}\n{note}" if caption else note)
    return t


def _build(
    console: Console, specs: list[tuple[str, str]], cells: list[list[str]], title: str | None, caption: str | None
) -> Table:
    ascii = getattr(console, "_mi400plan_ascii", False) or os.environ.get("MI400PLAN_ASCII") == "1"
    t = Table(
        title=title,
        caption=caption,
        box=ASCII_SIMPLE if ascii else box.SIMPLE_HEAVY,
        pad_edge=False,
        show_edge=False,
        padding=(0, 1, 0, 0),  # with the box's blank divider: two spaces between columns
        title_justify="left",
        caption_justify="left",
    )
    mins, maxs = [], []
    for i, (header, justify) in enumerate(specs):
        col = [r[i] for r in cells if i < len(r)]
        longest = max((_longest_line(c) for c in col), default=0)
        words = max((_longest_word(c) for c in col), default=0)
        # A right-aligned value (a number with its unit, a range) stays on one line if reasonably short.
        unbreakable = max(words, min(longest, NUMBER_MAX_WIDTH)) if justify == "right" else words
        mins.append(max(unbreakable, _longest_word(header), 1))
        maxs.append(max(longest, _longest_line(header), mins[-1]))
    for header, justify in specs:
        t.add_column(header, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for r in cells:
        t.add_row(*[Text(_glued(c, None)) for c in r])
    from rich.measure import Measurement

    overhead = Measurement.get(console, console.options.update_width(10**6), t).maximum - sum(maxs)
    widths = _fit_widths(mins, maxs, console.width - overhead)
    if widths is not None:
        for column, w in zip(t.columns, widths):
            column.width = w
        for i, column in enumerate(t.columns):  # pre-wrap glued cells to the width just chosen
            column._cells = [Text(_glued(r[i], widths[i])) if KEEP in r[i] else column._cells[k]
                             for k, r in enumerate(cells)]
    t._mi400plan_need = sum(widths or maxs) + overhead  # type: ignore[attr-defined]
    t._mi400plan_cells = [[_glued(c, None) for c in r] for r in cells]  # type: ignore[attr-defined]
    return t


def _glued(cell: str, width: int | None) -> str:
    """A cell with KEEP-glued pairs: wrapped here at ordinary spaces to ``width`` (None = no wrapping),
    then printed with plain spaces. textwrap breaks only at ASCII whitespace, so a pair never splits."""
    if KEEP not in cell:
        return cell
    if width is not None:
        import textwrap

        cell = "\n".join(textwrap.fill(line, width, break_long_words=False, break_on_hyphens=False)
                         for line in cell.splitlines())
    return cell.replace(KEEP, " ")


def print_table(console: Console, *args: Any, **kwargs: Any) -> None:
    print_wide(console, table(console, *args, **kwargs))


def print_wide(console: Console, t: Table) -> None:
    """Print ``t``. When even its minimum width exceeds the console, print one record per row
    (``print_records``); with ``--wide`` the lines run past the edge instead (a terminal wraps them,
    a file keeps them whole). No value is cut."""
    if getattr(console, "_mi400plan_markdown", False):
        print_markdown(console, t)
        return
    need = getattr(t, "_mi400plan_need", 0)
    if need <= console.width:
        console.print(t)
        return
    if not getattr(console, "_mi400plan_wide", False):
        print_records(console, t)
        return
    saved = console.width
    console.width = need
    try:
        console.print(t)
    finally:
        console.width = saved


def _md_cell(text: str) -> str:
    """One Markdown table cell: lines joined by spaces, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def print_markdown(console: Console, t: Table) -> None:
    """``--format md``: a GitHub-flavoured Markdown pipe table (right-aligned columns as ``---:``),
    the title in bold above it and the caption below, each set off by blank lines."""
    columns = t.columns
    nrows = max((len(c._cells) for c in columns), default=0)
    out = [""]
    if t.title:
        out += [f"**{_md_cell(str(t.title))}**", ""]
    out.append("| " + " | ".join(_md_cell(str(c.header)) or " " for c in columns) + " |")
    out.append("|" + "|".join("---:" if c.justify == "right" else "---" for c in columns) + "|")
    for i in range(nrows):
        out.append("| " + " | ".join(_md_cell(str(c._cells[i])) if i < len(c._cells) else "" for c in columns) + " |")
    out.append("")
    if t.caption:
        out += [line for line in str(t.caption).splitlines()] + [""]
    for line in out:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _label(header: str) -> str:
    """A column header as one label: the unit line of a two-line header goes in parentheses."""
    lines = [x.strip() for x in header.splitlines() if x.strip()]
    if len(lines) > 1:
        return f"{' '.join(lines[1:])} ({lines[0]})"
    return lines[0] if lines else ""


def print_records(console: Console, t: Table) -> None:
    """The record view of a table too wide for the console: each row as ``label  value`` lines,
    rows separated by a rule, values wrapping under themselves."""
    from rich.rule import Rule

    columns = t.columns
    labels = [_label(str(c.header)) for c in columns]
    nrows = max((len(c._cells) for c in columns), default=0)
    whole = getattr(t, "_mi400plan_cells", None)  # cells as given, not as wrapped for the table
    if t.title:
        console.print(t.title, markup=False)
    ascii = getattr(console, "_mi400plan_ascii", False) or os.environ.get("MI400PLAN_ASCII") == "1"
    for i in range(nrows):
        cells = whole[i] if whole else [str(c._cells[i]) if i < len(c._cells) else "" for c in columns]
        heading = " ".join(cells[0].split()) if not labels[0] else ""  # an unlabelled first column names the row
        console.print(Rule(heading, characters="-" if ascii else "─", style="dim", align="left"))
        grid = Table.grid(padding=(0, 2))
        grid.add_column(no_wrap=True)
        grid.add_column(overflow="fold")
        for label, cell in zip(labels, cells):
            if cell.strip() and label:
                grid.add_row(Text(label), Text(cell))
        console.print(grid)
    if t.caption:
        console.print(t.caption, markup=False)


def print_lines(console: Console, lines: Sequence[str]) -> None:
    """Plain text lines wrapped at the console width with a two-space hanging indent; words (paths,
    flags) are never split."""
    import textwrap

    for line in lines:
        text = textwrap.fill(line, width=max(console.width, 20), subsequent_indent="  ",
                             break_long_words=False, break_on_hyphens=False)
        console.print(text, highlight=False, markup=False, soft_wrap=True)


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", markup=True)


def short_path(path: str) -> str:
    """A profile path for display: bundled files as ``<bundled>/kind/name.toml``, others as given."""
    from mi400plan.render.paths import short_path as short

    return short(path)
