"""The versioned JSON envelope and the base class of every command's result.

Envelope (``schema_version`` 1)::

    {"schema_version": 1, "command": "fit", "status": "ok" | "error",
     "data": {...command-specific...} | null,
     "errors": [{"code": "...", "message": "...", "hint": "..." | null}]}

Changing a field of any result model is a CHANGELOG entry and, if it breaks readers, a bump of
``SCHEMA_VERSION``. Results hold plain ints/floats/strings only (no numpy types).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class OutModel(BaseModel):
    """Base for result rows: plain data, no unknown keys."""

    model_config = ConfigDict(extra="forbid")


class ErrorItem(OutModel):
    code: str
    message: str
    hint: str | None = None


class Result(OutModel):
    """Base class of a command result (the envelope's ``data``).

    ``command`` names the command; ``check_failed()`` says whether ``--check`` should exit 4;
    ``warnings`` are shown on stderr in table mode and kept in ``data.warnings`` in JSON.
    """

    command: ClassVar[str] = ""
    warnings: list[str] = Field(default_factory=list)

    def check_failed(self) -> bool:
        return False

    def csv_rows(self) -> list[dict[str, Any]]:
        """Rows for ``--format csv``: the same fields as ``data.rows`` in JSON, flattened."""
        rows = getattr(self, "rows", None)
        if rows is None:
            return []
        return [flatten(r.model_dump(mode="json")) for r in rows]


class Envelope(OutModel):
    schema_version: int = SCHEMA_VERSION
    command: str
    status: Literal["ok", "error"]
    data: dict[str, Any] | None = None
    errors: list[ErrorItem] = Field(default_factory=list)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}} -> {"a.b": 1}``; lists become ``;``-joined strings."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list):
            out[key] = ";".join(str(x) for x in v)
        else:
            out[key] = v
    return out
