"""mi400plan: capacity planner for AI accelerator clusters.

The core (everything outside ``cli`` and ``render``) takes validated specs and returns result
objects; it never prints and never imports typer or rich.
"""

__version__ = "0.1.0"
