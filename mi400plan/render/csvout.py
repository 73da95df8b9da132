"""CSV output: one row per result row, the same (flattened) field names as ``data.rows`` in JSON."""

from __future__ import annotations

import csv
import re
from typing import IO, Any


# A field whose last name part ends so counts things (GPUs, racks, sequences): a whole number prints
# as an integer even where the model keeps a float (a disaggregated deployment's GPUs can be fractional).
_COUNT = re.compile(r"(^|_)(gpus|racks|nodes|replicas|concurrency|count|layers|tokens_per_step|steps|experts)$")


def write_csv(rows: list[dict[str, Any]], stream: IO[str]) -> None:
    """Rows as CSV; bundled profile paths read ``<bundled>/...`` as in the tables and the JSON."""
    from mi400plan.render.paths import portable

    rows = portable(rows)
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
    """Booleans as ``true``/``false`` (as in the JSON), and byte counts and other counts that are
    whole numbers as integers (``195021630016``, ``8``, not ``195021630016.0``, ``8.0``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        if ("bytes" in key and "per_s" not in key) or _COUNT.search(key.rsplit(".", 1)[-1]):
            return int(value)
    return value
