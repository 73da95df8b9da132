"""CSV output: one row per result row, the same (flattened) field names as ``data.rows`` in JSON."""

from __future__ import annotations

import csv
from typing import IO, Any


def write_csv(rows: list[dict[str, Any]], stream: IO[str]) -> None:
    fields: list[str] = []
    for r in rows:
        for k in r:
            if k not in fields:
                fields.append(k)
    w = csv.DictWriter(stream, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _cell(k, v) for k, v in r.items()})


def _cell(key: str, value: Any) -> Any:
    """Booleans as ``true``/``false`` (as in the JSON), and byte counts that are whole numbers as
    integers (``195021630016``, not ``195021630016.0``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and "bytes" in key and "per_s" not in key and value.is_integer():
        return int(value)
    return value
