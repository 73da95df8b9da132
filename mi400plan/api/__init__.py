"""One function per command: names or specs in, result objects out. Notebooks call these too.

    from mi400plan.api import fit, open_catalog
    result = fit(open_catalog(), "llama3.1-70b", ["mi355x"], mode="infer", precision="fp8", gpus=8)
    row = result.rows[0]   # row.fits, row.memory_bytes.total, row.headroom_bytes, ...

Functions are imported on first use so that ``import mi400plan.api`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "calibrate": "mi400plan.api.calibrate",
    "validate": "mi400plan.api.validate",
    "validate_serve": "mi400plan.api.serve_validate",
    "fit": "mi400plan.api.fit",
    "read_plan": "mi400plan.api.fit",
    "sweep": "mi400plan.api.sweep",
    "sweep_deadline": "mi400plan.api.deadline",
    "budget": "mi400plan.api.budget",
    "serve": "mi400plan.api.serve",
    "comm": "mi400plan.api.comm",
    "rack": "mi400plan.api.rack",
    "list_profiles": "mi400plan.api.profiles",
    "show_profile": "mi400plan.api.profiles",
    "validate_profiles": "mi400plan.api.profiles",
}

__all__ = [*sorted(_EXPORTS), "open_catalog"]


def open_catalog(*profile_dirs: str) -> Any:
    """The profile catalog: bundled profiles plus ``profile_dirs`` and ``$MI400PLAN_PROFILES``."""
    from mi400plan.profiles import Catalog

    return Catalog.default(list(profile_dirs))


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        func = getattr(importlib.import_module(_EXPORTS[name]), name)
        # Importing submodule ``fit`` binds the module to this package's ``fit``; the function wins.
        globals()[name] = func
        return func
    raise AttributeError(f"module 'mi400plan.api' has no attribute {name!r}")
