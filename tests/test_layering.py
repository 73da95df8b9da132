"""The core never imports typer or rich; checked in a fresh interpreter per module."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import mi400plan

INTERFACE = ("mi400plan.cli", "mi400plan.render", "mi400plan.__main__")


def core_modules() -> list[str]:
    mods = []
    for info in pkgutil.walk_packages(mi400plan.__path__, "mi400plan."):
        if not info.name.startswith(INTERFACE) and ".profiles." not in info.name + ".":
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


def test_installed_package_ships_profiles() -> None:
    from mi400plan.profiles import bundled_root

    root = bundled_root()
    for kind in ("accelerators", "fabrics", "racks", "models"):
        assert (root / kind).is_dir(), f"bundled profiles/{kind} missing from the installed package"
