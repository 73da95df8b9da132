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
        w.writerow(r)
