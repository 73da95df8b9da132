"""JSON Schema (draft 2020-12) of each command's envelope, generated from the result models.

Field descriptions come from the models: a class docstring describes the object, and the comment
on a field's line (or the comment lines just above it) describes the field, so the schema says what
the source says. ``mi400plan schema [COMMAND]`` prints it.
"""

import importlib
import inspect
import re
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from mi400plan.results.common import SCHEMA_VERSION, ErrorItem

# command -> the result models its envelope's ``data`` can hold ("module:Class").
RESULTS: dict[str, tuple[str, ...]] = {
    "fit": ("fit:FitResult", "largest:LargestResult"),
    "sweep": ("sweep:SweepResult", "deadline:DeadlineResult"),
    "serve": ("serve:ServeResult",),
    "comm": ("comm:CommResult",),
    "rack": ("rack:RackResult",),
    "cost": ("cost:CostResult",),
    "profiles": ("profiles:ProfilesList", "profiles:ProfileShow", "profiles:ProfilesValidate"),
    "calibrate": ("calibrate:CalibrateResult",),
    "validate": ("validate:ValidateResult", "serve_validate:ServeValidateResult"),
    "budget": ("budget:BudgetResult",),
}

_FIELD = re.compile(r"^\s+(\w+)\s*:[^#]*?(?:#\s*(.*))?$")
_COMMENT = re.compile(r"^\s+#\s?(.*)$")


def _model(ref: str) -> type[BaseModel]:
    module, name = ref.split(":")
    return getattr(importlib.import_module(f"mi400plan.results.{module}"), name)


def field_comments(cls: type) -> dict[str, str]:
    """``{field: comment}`` from the class body: the comment on the field's line, else the comment
    lines directly above it."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    above: list[str] = []
    for line in lines[1:]:
        c = _COMMENT.match(line)
        if c:
            above.append(c.group(1).strip())
            continue
        m = _FIELD.match(line)
        if m and not line.lstrip().startswith(("def ", "return", "class ")):
            text = (m.group(2) or "").strip() or " ".join(above)
            if text and not text.startswith(("noqa", "type:")):
                out.setdefault(m.group(1), re.sub(r"\s+#\s*(noqa|type:).*$", "", text))
        above = []
    return out


def _classes(roots: list[type[BaseModel]]) -> list[type[BaseModel]]:
    """Every model reachable from ``roots`` through field annotations."""
    seen: list[type[BaseModel]] = []
    todo = list(roots)
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.append(cls)
        for info in cls.model_fields.values():
            todo.extend(_nested(info.annotation))
    return seen


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in getattr(annotation, "__args__", ()) for m in _nested(a)]


def _describe(defs: dict[str, Any], classes: list[type[BaseModel]]) -> None:
    for schema in defs.values():
        props = schema.get("properties", {})
        cls = next((c for c in classes if c.__name__ == schema.get("title") and set(c.model_fields) == set(props)),
                   None)
        if cls is None:
            continue
        for name, text in field_comments(cls).items():
            if name in props and "description" not in props[name]:
                props[name]["description"] = text


def envelope_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of ``command``'s ``--json`` envelope (``status`` ok with ``data`` one of its
    result models, or error with ``data`` null)."""
    roots = [_model(r) for r in RESULTS[command]]
    _, top = models_json_schema([(m, "serialization") for m in [*roots, ErrorItem]],
                                ref_template="#/$defs/{model}")
    defs = top.get("$defs", {})
    _describe(defs, _classes([*roots, ErrorItem]))
    data = [{"$ref": f"#/$defs/{m.__name__}"} for m in roots]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://mi400plan.invalid/schema/v{SCHEMA_VERSION}/{command}.json",
        "title": f"mi400plan {command} --json envelope (schema_version {SCHEMA_VERSION})",
        "type": "object",
        "properties": {
            "schema_version": {"const": SCHEMA_VERSION, "description": "raised when a change breaks readers"},
            "command": {"const": command},
            "status": {"enum": ["ok", "error"]},
            "data": {"anyOf": [*data, {"type": "null"}],
                     "description": "the result (status ok); null when status is error"},
            "errors": {"type": "array", "items": {"$ref": "#/$defs/ErrorItem"},
                       "description": "empty when status is ok"},
        },
        "required": ["schema_version", "command", "status", "data", "errors"],
        "additionalProperties": False,
        "$defs": defs,
    }
