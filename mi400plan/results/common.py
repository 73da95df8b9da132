"""The versioned JSON envelope and the base class of every command's result.

Envelope (``schema_version`` 1)::

    {"schema_version": 1, "command": "fit", "status": "ok" | "error",
     "data": {...command-specific...} | null,
     "errors": [{"code": "...", "message": "...", "hint": "..." | null}]}

Changing a field of any result model is a CHANGELOG entry and, if it breaks readers, a bump of
``SCHEMA_VERSION``. Results hold plain ints/floats/strings only (no numpy types).
"""

import json
import types
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from mi400plan.factories import new_list

SCHEMA_VERSION = 1


def _whole(value: float) -> int | float:
    """A count that is a whole number as an integer (``8``, not ``8.0``); a fractional one as it is."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


# GPUs (or replicas) that are whole in an aggregated deployment but may be fractional where a pool is
# sized to a rate (a disaggregated deployment's prefill GPUs per decode replica): JSON and CSV write
# the whole ones as integers.
Count = Annotated[float, PlainSerializer(_whole, return_type=Union[int, float])]


class OutModel(BaseModel):
    """Base for result rows: plain data, no unknown keys."""

    # defer_build: the serializer of a result model is built when a command first emits one.
    # protected_namespaces=(): fields such as ``model_before_s`` are part of the JSON contract
    # (pydantic < 2.10 would warn about every "model_" field).
    model_config = ConfigDict(extra="forbid", defer_build=True, protected_namespaces=())


class Range(OutModel):
    """A figure at its low, nominal and high estimate (the unit is the field's)."""

    low: float
    nominal: float
    high: float


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
    warnings: list[str] = Field(default_factory=new_list)

    def check_failed(self) -> bool:
        return False

    def request_errors(self) -> list[tuple[str, str]]:
        """(code, message) of each failure that makes the request itself fail (exit 3): the JSON
        envelope then has ``"status": "error"`` with these in ``errors`` and the result in ``data``."""
        return []

    def csv_rows(self) -> list[dict[str, Any]]:
        """Rows for ``--format csv``: the same fields as ``data.rows`` in JSON, flattened."""
        rows = getattr(self, "rows", None)
        if rows is None:
            return []
        return [flatten_model(type(r), r.model_dump(mode="json")) for r in rows]


class Envelope(OutModel):
    schema_version: int = SCHEMA_VERSION
    command: str
    status: Literal["ok", "error"]
    data: dict[str, Any] | None = None
    errors: list[ErrorItem] = Field(default_factory=new_list)


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


def _model_type(annotation: Any) -> type[BaseModel] | None:
    """The model class of a field typed ``SomeModel`` or ``SomeModel | None``, else None."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        annotation = args[0] if len(args) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def flatten_model(cls: type[BaseModel], data: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """Like ``flatten`` but driven by the row model, so a nested model that is ``None`` in one row
    still gives its ``a.b`` columns (empty): every row of a command has the same CSV columns."""
    out: dict[str, Any] = {}
    for name, info in cls.model_fields.items():
        key = f"{prefix}{name}"
        value = None if data is None else data.get(name)
        sub = _model_type(info.annotation)
        if sub is not None and (value is None or isinstance(value, dict)):
            out.update(flatten_model(sub, value, key + "."))
        elif isinstance(value, dict):
            out.update(flatten(value, key + "."))
        elif isinstance(value, list) and any(isinstance(x, (dict, list)) for x in value):
            out[key] = json.dumps(value, sort_keys=True, separators=(",", ":"))  # nested rows: JSON text
        elif isinstance(value, list):
            out[key] = ";".join(str(x) for x in value)
        else:
            out[key] = value
    return out
