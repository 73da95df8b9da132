"""The one reading of counts and SKU lists on the command line, used by every command.

Counts (``--gpus``, ``--tp``, ``--racks``, ``--group``, ...): ``units.parse_int_count`` and
``units.parse_count_list`` (``units.COUNT_RULE``): ``1k`` = 1,000, ``16Ki`` = 16,384, ``1_024``; a comma
separates list items and a thousands separator (``1,024``) is refused naming the flag. A flag that takes
one count uses :data:`COUNT` as its typer ``parser``; a list flag is text that ``cli.flags.check_flags``
and the command read with ``units.parse_count_list``.

SKU lists (``--sku``): repeat the flag or separate names with commas (``--sku mi355x,b200``); ``all``
is every accelerator in the catalog. Commands that price one SKU (budget, rack, calibrate) refuse a list
or ``all`` naming the flag.
"""

from __future__ import annotations

from typing import Any

import typer

COUNTS_HELP = (
    "Counts (--gpus, --tp, --racks, --group, ...): an integer with an optional suffix, k/M/G/T = powers of "
    "1000 and Ki/Mi/Gi/Ti = powers of 1024 (1k = 1,000, 16Ki = 16,384). A comma separates list items, so "
    "thousands separators are refused: '1,024' reads as 1024 or as the list 1 and 24, and text whose items "
    "after the first are all three-digit groups ('64,128') is ambiguous; write 1024 or 1k for one count, and a "
    "list with a space after each comma ('64, 128') or as a range (64..128, doubling). --sku takes a "
    "comma list (mi355x,b200) or 'all' where the command compares SKUs."
)


def count(text: Any) -> int:
    """One count (typer ``parser`` of every single-count flag); a usage error names the flag."""
    from mi400plan.units import UnitError, parse_int_count

    if isinstance(text, int) and not isinstance(text, bool):
        return text
    try:
        return parse_int_count(text, "count")
    except UnitError as exc:
        raise typer.BadParameter(str(exc)) from None


def count_list(text: str, flag: str, ranges: str = "double") -> list[int]:
    """A list of counts (``4,8``, ``1k..8k``) or a usage error naming ``flag``."""
    from mi400plan.units import UnitError, parse_count_list

    try:
        return parse_count_list(text, flag, ranges=ranges)
    except UnitError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from None


def sku_list(values: list[str] | None) -> list[str] | None:
    """``--sku`` values split at commas, stripped, repeats dropped (typer ``callback``); ``all`` is kept for
    the command to expand with its catalog. An empty name is a usage error."""
    return _split(values, "--sku")


def name_list(values: list[str] | None) -> list[str] | None:
    """Profile names given as arguments (``rack helios,gb200-nvl72``, ``cost mi355x,b200``), split as ``--sku``;
    a file path (``.toml``, or with a ``/``) is kept whole, commas and all."""
    return _split(values, "NAMES", keep_paths=True)


def _split(values: list[str] | None, hint: str, keep_paths: bool = False) -> list[str] | None:
    if values is None:
        return None
    out: list[str] = []
    for value in values:
        text = str(value)
        is_path = keep_paths and ("/" in text or "\\" in text or text.lower().endswith(".toml"))
        for name in [text] if is_path else text.split(","):
            name = name.strip()
            if not name:
                raise typer.BadParameter(f"empty name in {value!r}; separate names with single commas",
                                         param_hint=hint)
            if name not in out:
                out.append(name)
    return out


def one_sku(value: str | None) -> str | None:
    """``--sku`` of a command that prices one SKU: a list or ``all`` is refused (typer ``callback``)."""
    if value is None:
        return None
    names = sku_list([value]) or []
    if len(names) > 1 or (names and names[0].lower() == "all"):
        raise typer.BadParameter(f"this command prices one SKU, got {value!r}; run it once per SKU "
                                 "(fit, sweep, serve and comm compare several)", param_hint="--sku")
    return names[0] if names else value

