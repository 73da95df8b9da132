"""Rendering: the one place an output format is chosen (table, json, csv).

Command modules register a table renderer for their result type with ``@table_renderer``; JSON
and CSV are generic over ``Result``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from enum import Enum
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # results pull in pydantic: not needed to parse flags or print --help
    from mi400plan.results.common import Result

_TABLE_RENDERERS: dict[str, Callable[[Any, Any], None]] = {}

# Modules that register table renderers, imported on first use.
_RENDER_MODULES = (
    "mi400plan.render.fit",
    "mi400plan.render.comm",
    "mi400plan.render.rack",
    "mi400plan.render.sweep",
    "mi400plan.render.serve",
    "mi400plan.render.profiles",
    "mi400plan.render.cost",
    "mi400plan.render.calibrate",
    "mi400plan.render.validate",
    "mi400plan.render.budget",
)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"
    md = "md"  # tables as Markdown pipe tables, for pasting into documents


def table_renderer(command: str) -> Callable[[Callable[[Any, Any], None]], Callable[[Any, Any], None]]:
    def deco(fn: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
        _TABLE_RENDERERS[command] = fn
        return fn

    return deco


def _load_renderer(command: str) -> Callable[[Any, Any], None]:
    if command not in _TABLE_RENDERERS:
        mod = f"mi400plan.render.{command}"
        if mod in _RENDER_MODULES:
            importlib.import_module(mod)
    return _TABLE_RENDERERS[command]


def emit(
    result: Result, fmt: OutputFormat, stream: IO[str], *, ascii: bool = False, wide: bool = False,
    width: int | None = None,
) -> None:
    """Write ``result`` to ``stream`` in ``fmt``; tables are laid out for ``width`` columns when given
    (see ``render.table.output_width`` for the rule otherwise)."""
    if fmt is OutputFormat.json:
        from mi400plan.render.jsonout import write_envelope

        write_envelope(result.command, result, stream)
    elif fmt is OutputFormat.csv:
        from mi400plan.render.csvout import write_csv

        write_csv(result.csv_rows(), stream)
    else:
        from mi400plan.render.table import make_console

        console = make_console(stream, ascii=ascii, wide=wide, markdown=fmt is OutputFormat.md, width=width)
        _load_renderer(result.command)(result, console)
