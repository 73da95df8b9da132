"""Shared rich-table helpers. The only code that builds a rich ``Table`` or ``Console``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import IO, Any

from rich import box
from rich.console import Console
from rich.table import Table


def make_console(stream: IO[str] | None = None, *, ascii: bool = False, stderr: bool = False) -> Console:
    width = None
    if os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    c = Console(file=stream, stderr=stderr, width=width, highlight=False, soft_wrap=False)
    c._mi400plan_ascii = ascii  # type: ignore[attr-defined]
    return c


def table(
    console: Console,
    columns: Sequence[str | tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    title: str | None = None,
    caption: str | None = None,
) -> Table:
    """Build a table; a column given as ``(header, "right")`` is right-aligned (numbers)."""
    ascii = getattr(console, "_mi400plan_ascii", False) or os.environ.get("MI400PLAN_ASCII") == "1"
    t = Table(
        title=title,
        caption=caption,
        box=box.ASCII if ascii else box.SIMPLE_HEAVY,
        title_justify="left",
        caption_justify="left",
    )
    for col in columns:
        if isinstance(col, tuple):
            t.add_column(col[0], justify=col[1])  # type: ignore[arg-type]
        else:
            t.add_column(col)
    for r in rows:
        t.add_row(*[str(x) for x in r])
    return t


def print_table(console: Console, *args: Any, **kwargs: Any) -> None:
    console.print(table(console, *args, **kwargs))


def print_warnings(console: Console, warnings: Sequence[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", markup=True)
