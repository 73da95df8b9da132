"""Empty-collection factories for model fields (``Field(default_factory=new_list)``).

pydantic reads the signature of every ``default_factory`` when it builds a model class, to learn
whether the factory takes the validated data. For a builtin such as ``list`` or ``dict`` the
signature comes from its text form, which the standard library parses with ``tokenize`` (compiling
its regular expressions on first use): about 5 ms once plus 0.2 ms a field at each start-up, for the
seventy-odd list and dict fields of the spec and result models. A plain function's signature is read
directly. The values are the same: a new empty list or dict per instance.
"""

from __future__ import annotations

from typing import Any


def new_list() -> list[Any]:
    """A new empty list (``list()``)."""
    return []


def new_dict() -> dict[Any, Any]:
    """A new empty dict (``dict()``)."""
    return {}
