"""The Typer command-line interface. Parses flags, calls ``mi400plan.api``, hands results to
``mi400plan.render``. No arithmetic, no unit conversion and no TOML reading happen here."""

from __future__ import annotations

import importlib

from mi400plan.cli.common import app

# Each module adds its command(s) to ``app`` when imported.
_COMMAND_MODULES = ("fit", "sweep", "comm", "rack", "profiles")


def _register() -> None:
    for name in _COMMAND_MODULES:
        try:
            importlib.import_module(f"mi400plan.cli.{name}")
        except ModuleNotFoundError as exc:  # a command still being built is simply absent
            if exc.name != f"mi400plan.cli.{name}":
                raise


_register()


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
