"""The core never imports typer or rich; checked in a fresh interpreter per module."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import mi400plan

INTERFACE = ("mi400plan.cli", "mi400plan.render", "mi400plan.__main__")


def is_interface(name: str) -> bool:
    """Only the interface packages themselves (and their submodules) are exempt."""
    return any(name == pkg or name.startswith(pkg + ".") for pkg in INTERFACE)


def core_modules() -> list[str]:
    mods = []
    for info in pkgutil.walk_packages(mi400plan.__path__, "mi400plan."):
        if not is_interface(info.name):
            mods.append(info.name)
    return sorted(mods)


@pytest.mark.parametrize("module", core_modules())
def test_core_module_does_not_import_interface(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        "bad = [m for m in ('typer', 'rich', 'click') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"{module} pulls in {out.stdout.strip()}"


def test_core_never_prints() -> None:
    # Core modules return results; only cli/ and render/ write to the terminal.
    offenders = []
    for module in core_modules():
        path = importlib.util.find_spec(module).origin
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{module}:{node.lineno} print()")
            if isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr") and (
                isinstance(node.value, ast.Name) and node.value.id == "sys"
            ):
                offenders.append(f"{module}:{node.lineno} sys.{node.attr}")
    assert offenders == []


def test_profiles_modules_are_checked() -> None:
    # "profiles" in a module name is no exemption: the core catalog and the profiles api/results
    # must be checked like every other core module.
    mods = core_modules()
    for name in ("mi400plan.profiles", "mi400plan.api.profiles", "mi400plan.results.profiles"):
        assert name in mods
    for name in ("mi400plan.cli.profiles", "mi400plan.render.profiles", "mi400plan.__main__"):
        assert name not in mods
    assert is_interface("mi400plan.cli") and not is_interface("mi400plan.clients")


def test_installed_package_ships_profiles() -> None:
    from mi400plan.profiles import bundled_root

    root = bundled_root()
    for kind in ("accelerators", "fabrics", "racks", "models"):
        assert (root / kind).is_dir(), f"bundled profiles/{kind} missing from the installed package"
