"""The core never imports typer or rich; checked in a fresh interpreter per module."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
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


# One fresh interpreter loads the third-party libraries the core builds on (checking that they bring in
# none of the interface libraries), then forks once per module: each child imports its module into
# that clean state, as a fresh interpreter would, and reports which interface libraries came with it.
# Starting an interpreter (and numpy and pydantic) per module cost a third of a second each.
_FORK_CHECK = """
import importlib, json, os, sys
BAD = ('typer', 'rich', 'click')
import numpy, pydantic, pydantic_core, pydantic.main
out = {'preloaded': [m for m in BAD if m in sys.modules], 'modules': {}}
for module in sys.argv[1:]:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(module)
            msg = ','.join(m for m in BAD if m in sys.modules)
        except BaseException as exc:
            msg = 'import failed: ' + repr(exc)
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    out['modules'][module] = b''.join(chunks).decode()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def interface_imports() -> dict[str, str] | None:
    """Module -> the interface libraries importing it pulls in ('' for none); None without fork."""
    if not hasattr(os, "fork"):
        return None
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _FORK_CHECK, *core_modules()], capture_output=True, text=True,
                         check=True, env=env)
    got = json.loads(out.stdout)
    assert got["preloaded"] == [], f"numpy or pydantic alone pulls in {got['preloaded']}"
    return got["modules"]


@pytest.mark.parametrize("module", core_modules())
def test_core_module_does_not_import_interface(module: str, interface_imports: dict[str, str] | None) -> None:
    if interface_imports is not None:
        assert interface_imports[module] == "", f"{module} pulls in {interface_imports[module]}"
        return
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


# --- structure: imports, cycles, function size ---------------------------------------------------------

PKG = Path(mi400plan.__file__).parent
MAX_LINES = 120  # one screen (the project's style rule)
MAX_PARAMS = 15  # outside cli/, where typer builds one parameter per flag

# Functions allowed over a limit, each named with the limit it breaks (a stale entry fails a test).
OVER_LIMIT_ALLOWED: dict[str, str] = {}  # "path:function" -> "lines" / "params"; empty: no exceptions


@functools.cache  # the package does not change during a run; each structure test reads it
def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = ["mi400plan", *path.relative_to(PKG).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(module: str, tree: ast.Module, *, module_level_only: bool) -> set[str]:
    """Modules of the package that ``module`` imports (``from mi400plan import api`` counts as
    ``mi400plan.api``); with ``module_level_only``, imports inside functions are not counted."""
    is_pkg = _modules()[module].name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if module_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.Import):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = module.split(".")[: len(module.split(".")) - child.level + (1 if is_pkg else 0)]
                    base = ".".join(pkg + ([base] if base else []))
                found.add(base)
                found.update(f"{base}.{a.name}" for a in child.names)
            visit(child)

    visit(tree)
    mods = _modules()
    return {m for m in found if m in mods and m != module}


@functools.cache
def _trees() -> dict[str, ast.Module]:
    return {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in _modules().items()}


def test_only_the_interface_and_api_import_the_api() -> None:
    # The core (and render) must not reach up into the orchestration layer, not even inside a function.
    offenders = []
    for module, tree in _trees().items():
        if module.startswith(("mi400plan.api", "mi400plan.cli")) or module == "mi400plan.__main__":
            continue
        bad = sorted(m for m in _imports(module, tree, module_level_only=False)
                     if m == "mi400plan.api" or m.startswith("mi400plan.api."))
        if bad:
            offenders.append(f"{module} imports {', '.join(bad)}")
    assert offenders == []


def test_import_scanner_sees_function_local_and_package_imports() -> None:
    tree = ast.parse("def f():\n    from mi400plan.api.sweep import sweep\nfrom mi400plan import api\n")
    assert {"mi400plan.api.sweep", "mi400plan.api"} <= _imports("mi400plan.units", tree, module_level_only=False)
    level = _imports("mi400plan.units", tree, module_level_only=True)
    assert "mi400plan.api" in level and "mi400plan.api.sweep" not in level


def test_no_import_cycle_between_modules() -> None:
    """No cycle among module-level imports. Imports inside a function are left out on purpose: they run
    when the function is called, after every module has loaded, so they cannot leave a module half
    initialised; the package uses them to keep ``import mi400plan.api`` and the CLI start cheap.
    (The one pair that must not import each other at all, hfconfig and profiles, is checked below.)"""
    graph = {m: _imports(m, t, module_level_only=True) for m, t in _trees().items()}
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []
    cycles: list[str] = []

    def dfs(v: str) -> None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                cycles.append(" -> ".join(stack[stack.index(w):] + [w]))
            elif w not in state:
                dfs(w)
        stack.pop()
        state[v] = 2

    for v in sorted(graph):
        if v not in state:
            dfs(v)
    assert cycles == []


def test_hfconfig_and_profiles_do_not_import_each_other() -> None:
    trees = _trees()
    assert "mi400plan.profiles" not in _imports("mi400plan.hfconfig", trees["mi400plan.hfconfig"], module_level_only=False)


@functools.cache
def _functions() -> list[tuple[str, int, int]]:
    """(``path:Class.function``, lines, parameters) of every function; ``self``/``cls`` not counted."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = f"mi400plan/{path.relative_to(PKG).as_posix()}"

        def walk(node: ast.AST, prefix: str) -> None:
            for ch in ast.iter_child_nodes(node):
                if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = ch.args
                    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]
                    if a.args and a.args[0].arg in ("self", "cls"):
                        params = params[1:]
                    out.append((f"{rel}:{prefix}{ch.name}", ch.end_lineno - ch.lineno + 1, len(params)))
                    walk(ch, f"{prefix}{ch.name}.")
                elif isinstance(ch, ast.ClassDef):
                    walk(ch, f"{prefix}{ch.name}.")
                else:
                    walk(ch, prefix)

        walk(ast.parse(path.read_text(encoding="utf-8")), "")
    return out


def test_functions_fit_on_a_screen() -> None:
    long = [f"{name}: {n} lines" for name, n, _ in _functions()
            if n > MAX_LINES and "lines" not in OVER_LIMIT_ALLOWED.get(name, "")]
    assert long == []


def test_functions_outside_the_cli_take_at_most_15_parameters() -> None:
    many = [f"{name}: {p} parameters" for name, _, p in _functions()
            if p > MAX_PARAMS and not name.startswith("mi400plan/cli/") and "params" not in OVER_LIMIT_ALLOWED.get(name, "")]
    assert many == []


def test_the_allowlist_names_real_offenders() -> None:
    # An entry whose function is gone or back under the limit must be removed, so the list only shrinks.
    sizes = {name: (n, p) for name, n, p in _functions()}
    stale = [f"{name} ({what})" for name, what in OVER_LIMIT_ALLOWED.items()
             if name not in sizes or ("lines" in what and sizes[name][0] <= MAX_LINES)
             or ("params" in what and sizes[name][1] <= MAX_PARAMS)]
    assert stale == []
