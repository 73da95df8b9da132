"""Profile paths as every output shows them: bundled files as ``<bundled>/kind/name.toml`` (the same on
every machine, no install path), user files as given."""

from __future__ import annotations

from typing import Any

BUNDLED = "<bundled>"


def _root() -> str:
    from mi400plan.profiles import bundled_root

    return str(bundled_root())


def short_path(path: str) -> str:
    """``/.../site-packages/mi400plan/profiles/accelerators/mi300x.toml`` -> ``<bundled>/accelerators/mi300x.toml``."""
    root = _root()
    return BUNDLED + path[len(root):] if path.startswith(root) else path


def portable(value: Any, root: str | None = None) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings, numbers) with the bundled catalog's directory
    written as ``<bundled>`` in every string, inside messages too."""
    root = _root() if root is None else root
    if isinstance(value, str):
        return value.replace(root, BUNDLED) if root in value else value
    if isinstance(value, dict):
        return {k: portable(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, root) for v in value]
    return value
