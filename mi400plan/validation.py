"""A pydantic validation error as a ``ProfileError`` naming the file, the line and the dotted field.

Shared by the profile catalog (``profiles``) and the Hugging Face config reader (``hfconfig``), so
neither imports the other for it.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from mi400plan.errors import ProfileError


def _find_line(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line of the field at ``loc`` in a TOML text (the deepest key we can find)."""
    lines = text.splitlines()
    keys = [str(k) for k in loc if isinstance(k, str)]
    # Look for the deepest key first; prefer an assignment ``key =`` after its table header.
    for key in reversed(keys):
        pat = re.compile(rf"^\s*(\"?{re.escape(key)}\"?)\s*=")
        header = re.compile(rf"^\s*\[+[^\]]*\b{re.escape(key)}\b[^\]]*\]+")
        for i, line in enumerate(lines, 1):
            if pat.match(line) or header.match(line):
                return i
    return None


def validation_error(path: str, text: str, exc: ValidationError) -> ProfileError:
    """Turn a pydantic error into a ProfileError naming file, line and dotted field."""
    errs = exc.errors()
    first = errs[0]
    loc = tuple(first.get("loc", ()))
    dotted = ".".join(str(p) for p in loc) or None
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        msg = "unknown key (typo?)"
    given = first.get("input")
    if first.get("type") not in ("missing",) and not isinstance(given, (dict, list)):
        msg += f" (got {given!r})"
    if len(errs) > 1:
        others = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg')}" for e in errs[1:4]
        )
        msg += f"; also: {others}" + (" ..." if len(errs) > 4 else "")
    return ProfileError(msg, path=path, line=_find_line(text, loc), field=dotted)
