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


def make_console(stream: IO[str] | None = None, *, ascii: bool = False, stderr: bool = False) -> Console:
    width = None
    if os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    c = Console(file=stream, stderr=stderr, width=width, highlight=False, soft_wrap=False)
    c._mi400plan_ascii = ascii  # type: ignore[attr-defined]
    return c


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


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
    columns: Sequence[str | tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    caption: str | None = None,
) -> Table:
    """Build a table; a column given as ``(header, "right")`` is right-aligned (numbers).

    Cells are plain text (no markup). No value is ever cut: text wraps at spaces, a right-aligned
    value is never split, and when even that is wider than the console the table keeps its minimum
    width (see ``print_table``) instead of dropping columns or printing "...".
    """
    ascii = getattr(console, "_mi400plan_ascii", False) or os.environ.get("MI400PLAN_ASCII") == "1"
    t = Table(
        title=title,
        caption=caption,
        box=box.ASCII if ascii else box.SIMPLE_HEAVY,
        title_justify="left",
        caption_justify="left",
    )
    cells = [[str(x) for x in r] for r in rows]
    specs = [(c[0], c[1]) if isinstance(c, tuple) else (c, "left") for c in columns]
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
        t.add_row(*[Text(c) for c in r])
    from rich.measure import Measurement

    overhead = Measurement.get(console, console.options.update_width(10**6), t).maximum - sum(maxs)
    widths = _fit_widths(mins, maxs, console.width - overhead)
    if widths is not None:
        for column, w in zip(t.columns, widths):
            column.width = w
    t._mi400plan_need = sum(widths or maxs) + overhead  # type: ignore[attr-defined]
    return t


def print_table(console: Console, *args: Any, **kwargs: Any) -> None:
    print_wide(console, table(console, *args, **kwargs))


def print_wide(console: Console, t: Table) -> None:
    """Print ``t``; when its minimum width exceeds the console, the lines run past the edge (a
    terminal wraps them, a file keeps them whole) rather than losing columns."""
    need = getattr(t, "_mi400plan_need", 0)
    if need <= console.width:
        console.print(t)
        return
    saved = console.width
    console.width = need
    try:
        console.print(t)
    finally:
        console.width = saved


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", markup=True)


def short_path(path: str) -> str:
    """A profile path for display: bundled files as ``<bundled>/kind/name.toml``, others as given.

    JSON keeps the full path; tables stay the same on every machine for bundled profiles.
    """
    from mi400plan.profiles import bundled_root

    root = str(bundled_root())
    if path.startswith(root):
        return "<bundled>" + path[len(root):]
    return path

