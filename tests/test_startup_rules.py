"""Rules that keep start-up work off a command's path (benchmarks/bench_startup.py measures the time;
these check the causes, which do not depend on the machine's speed)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys


def _models() -> list[type]:
    """Every pydantic model class the spec and result modules define."""
    from pydantic import BaseModel

    out = []
    for pkg in ("mi400plan.specs", "mi400plan.results"):
        for info in pkgutil.walk_packages(importlib.import_module(pkg).__path__, f"{pkg}."):
            module = importlib.import_module(info.name)
            out += [v for v in vars(module).values()
                    if isinstance(v, type) and issubclass(v, BaseModel) and v.__module__ == info.name]
    return out


def test_no_model_field_takes_a_builtin_factory():
    """pydantic reads each default factory's signature when it builds a model class; a builtin's
    (``list``, ``dict``) is parsed from text with tokenize at every start, a plain function's is not."""
    models = _models()
    assert len(models) > 50  # the walk found the spec and result models
    builtin = [f"{m.__module__}.{m.__name__}.{name}" for m in models
               for name, info in m.model_fields.items() if info.default_factory in (list, dict, set, tuple)]
    assert builtin == []
    from mi400plan.factories import new_dict, new_list

    a, b = new_list(), new_list()
    assert a == [] and a is not b and new_dict() == {} and new_dict() is not new_dict()


def test_no_model_annotation_is_text():
    """pydantic turns an annotation written as text (``from __future__ import annotations``, or quoted)
    into a ``typing.ForwardRef``, compiling it with ``compile()``, every time the class is created; the
    spec and result modules therefore write their field annotations as expressions."""
    as_text = [f"{m.__module__}.{m.__name__}.{name}" for m in _models()
               for name, annotation in vars(m).get("__annotations__", {}).items() if isinstance(annotation, str)]
    assert as_text == []


def _loaded_after(args: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running the command line ``args``."""
    code = (
        "import io, sys, contextlib\n"
        "from mi400plan.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({args!r})\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        f"loaded = [m for m in {modules!r} if m in sys.modules]\n"
        "sys.stderr.write('\\nloaded:' + ','.join(loaded))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    tail = out.stderr.rsplit("\nloaded:", 1)[-1]
    return [m for m in tail.split(",") if m]


# Modules no training command needs unless a flag asks: the cost model, cost profiles and the ``cost``
# command's result models (--tokens, site flags; a sweep's energy model is ``results.energy``), the
# measured-run validation (``validate``; the error band is ``bands``), the FP8 recipe of the stacks
# (--precision fp8), rack results, serving, calibration, plotting and the table renderer (--json); and
# typer's pydantic adapters, which it builds only for a value it has to convert (``helpfmt._light_coercion``:
# here every value is text given as text, a default or left out).
_NOT_ON_THE_JSON_PATH = ("mi400plan.results.rack", "mi400plan.specs.cost", "mi400plan.cost", "mi400plan.results.cost",
                         "mi400plan.validate", "mi400plan.stack_precision", "mi400plan.serve", "mi400plan.serve_sim",
                         "mi400plan.calibrate",
                         "matplotlib", "rich", "typer._adapters")


def test_sweep_loads_neither_rack_results_nor_cost_profiles():
    """A sweep without --tokens or cost flags prices no cost profile and builds no rack result; with
    --json it reads the error band without the validation module and renders no table."""
    args = ["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--json", "--no-ranges"]
    assert _loaded_after(args, _NOT_ON_THE_JSON_PATH + ("mi400plan.api.sweep",)) == ["mi400plan.api.sweep"]


def test_fit_json_loads_no_search_cost_or_validation():
    """``fit --json`` (bf16) imports neither the layout search nor the modules a sweep leaves out."""
    args = ["fit", "llama3-70b", "--sku", "mi300x", "--json"]
    assert _loaded_after(args, _NOT_ON_THE_JSON_PATH + ("mi400plan.search", "mi400plan.api.sweep")) == []


def test_the_dataclasses_a_training_command_loads_are_records():
    """``dataclass`` compiles six methods per class from text at every start (Python < 3.13); the classes of
    the modules ``sweep`` and ``fit`` load are ``records.record`` classes, whose methods are written once."""
    code = (
        "import io, sys, contextlib, dataclasses\n"
        "from mi400plan.cli import main\n"
        "for args in (['sweep', 'gpt3-175b', '--sku', 'a100', '--gpus', '1024', '--no-ranges'],\n"
        "             ['fit', 'llama3-70b', '--sku', 'mi300x', '--json']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        "        try:\n"
        "            main(args)\n"
        "        except SystemExit as exc:\n"
        "            assert exc.code == 0, exc.code\n"
        "classes = [v for name, m in list(sys.modules.items()) if name.startswith('mi400plan.') for v in vars(m).values()\n"
        "           if isinstance(v, type) and v.__module__ == name and dataclasses.is_dataclass(v)]\n"
        "print(len(classes), [c.__qualname__ for c in classes if c.__init__.__module__ != 'mi400plan.records'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split(" ", 1)
    assert int(out[0]) > 40 and out[1].strip() == "[]"


def _program_loads(argv: list[str], modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` the program (``console()``, as the ``mi400plan`` script runs it) has imported
    by the time it exits, for the command line ``argv``."""
    code = (
        "import sys, atexit\n"
        f"atexit.register(lambda: sys.stderr.write('\\nloaded:' + ','.join(m for m in {modules!r} if m in sys.modules)))\n"
        f"sys.argv = ['mi400plan'] + {argv!r}\n"
        "from mi400plan.cli import console\n"
        "console()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-500:]
    return [m for m in out.stderr.rsplit("\nloaded:", 1)[-1].split(",") if m]


def test_help_loads_no_computing_module():
    """``--help`` (and the root help) imports neither numpy nor pydantic, nor ctypes, which the program
    loads only to tune the allocator for a command that computes (``cli._keep_freed_memory``)."""
    heavy = ("numpy", "pydantic", "ctypes", "mi400plan.search")
    assert _program_loads(["--help"], heavy) == []
    assert _program_loads(["sweep", "--help"], heavy) == []
    assert _program_loads(["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x", "--json"],
                          ("ctypes", "numpy")) == ["ctypes", "numpy"]


def test_values_typer_would_not_change_skip_its_coercion_but_keep_its_checks(cli):
    """A required argument left out is still a usage error naming it; a count flag's default reaches the
    command as the int it is and one given on the command line still goes through its parser."""
    missing = cli(["sweep", "--sku", "a100", "--json"])
    assert missing.exit_code == 2 and "Missing argument 'MODEL'" in missing.stderr
    bad = cli(["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--top", "x", "--json"])
    assert bad.exit_code == 2 and "Invalid value for '--top': cannot read count 'x'" in bad.stderr
    one = cli(["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--top", "1", "--no-ranges", "--json"])
    assert one.exit_code == 0 and len(json.loads(one.stdout)["data"]["rows"]) == 1
    default = cli(["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--no-ranges", "--json"])
    assert len(json.loads(default.stdout)["data"]["rows"]) == 5  # --top's default


def test_a_flag_left_out_reaches_its_callback_as_none(cli):
    """``--help`` left out: its callback sees None (as typer's coercion would hand it) and prints nothing;
    given, it prints the command's help."""
    quiet = cli(["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x", "--json"])
    assert quiet.exit_code == 0 and quiet.stdout.lstrip().startswith("{")
    shown = cli(["comm", "--help"])
    assert shown.exit_code == 0 and "Usage:" in shown.stdout



def _run_fit(env_value: str | None) -> str:
    import os

    code = (
        "import io, sys, contextlib\n"
        "from mi400plan.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['fit', 'llama3.1-8b', '--sku', 'mi300x', '--json'])\n"
        "    except SystemExit as exc:\n"
        "        assert exc.code == 0, exc.code\n"
        "from pydantic.plugin._loader import get_plugins\n"
        "sys.stderr.write(f\"{'importlib.metadata' in sys.modules} {tuple(get_plugins())}\")\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if env_value is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = env_value
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stderr


def test_with_plugins_disabled_the_plugin_loader_is_not_imported():
    """The planner disables pydantic's plugins (unless the user chose otherwise); pydantic's loader, which
    imports importlib.metadata only to find them disabled, is then stood in for by one that finds none."""
    assert _run_fit(None).endswith("False ()")
    assert _run_fit("1").endswith("False ()")
    # a user's own choice (disabling one plugin by name) keeps pydantic's real loader
    assert _run_fit("some-plugin").endswith("True ()")


def _huge_advised_heap_kib(env: dict[str, str]) -> int:
    """KiB of the heap advised MADV_HUGEPAGE (``hg`` in /proc/self/smaps) once the program has tuned the
    allocator (``cli._keep_freed_memory``), in a fresh interpreter that allocates nothing large itself."""
    code = (
        "import re\n"
        "import mi400plan.cli as cli\n"
        "cli._keep_freed_memory()\n"
        "total = 0\n"
        "for block in re.split(r'\\n(?=[0-9a-f]+-[0-9a-f]+ )', open('/proc/self/smaps').read()):\n"
        "    if '[heap]' in block.splitlines()[0] and re.search(r'VmFlags:.*\\bhg\\b', block):\n"
        "        total += int(re.search(r'^Size:\\s+(\\d+) kB', block, re.M).group(1))\n"
        "print(total)\n"
    )
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env=env).stdout)


def test_the_heap_is_advised_huge_pages_unless_the_user_tunes_the_allocator():
    """A computing command's heap is advised transparent huge pages (one fault per 2 MiB instead of per 4 KiB
    for the search's arrays): the whole huge pages of a 128 MiB block, 124-128 MiB; a user who sets a glibc
    malloc variable keeps the allocator as they set it, with no advice."""
    import os
    import pytest

    if not os.path.exists("/proc/self/smaps") or not os.path.exists("/sys/kernel/mm/transparent_hugepage"):
        pytest.skip("Linux with transparent huge pages only (glibc mallopt, madvise, /proc/self/smaps)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    kib = _huge_advised_heap_kib(env)
    assert 124 * 1024 <= kib <= 128 * 1024
    assert _huge_advised_heap_kib({**env, "MALLOC_MMAP_THRESHOLD_": "131072"}) == 0


def _program(argv: list[str]) -> subprocess.CompletedProcess:
    """The program (``console()``) on ``argv`` with an exit handler and an object whose finalizer reports
    whether the interpreter was torn down (module globals freed one by one) at the end."""
    code = (
        "import sys, atexit\n"
        "class Torn:\n"
        "    def __del__(self):\n"
        "        sys.__stderr__.write('\\ntorn down\\n')\n"
        "keep = Torn()\n"
        "atexit.register(lambda: sys.stderr.write('\\nexit handler ran\\n'))\n"
        f"sys.argv = ['mi400plan'] + {argv!r}\n"
        "from mi400plan.cli import console\n"
        "console()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_the_program_ends_without_tearing_the_interpreter_down():
    """After the command: its whole output, the exit handlers and the exit status as ``sys.exit`` gives
    them (0; a profile error's 3), but no module teardown (the finalizer of a module global never runs)."""
    ok = _program(["fit", "llama3-70b", "--sku", "mi300x", "--json"])
    assert ok.returncode == 0 and json.loads(ok.stdout)["data"]["model"]["name"] == "llama3.1-70b"
    assert "exit handler ran" in ok.stderr and "torn down" not in ok.stderr
    bad = _program(["fit", "llama3-70b", "--sku", "no-such-sku", "--json"])
    assert bad.returncode == 3 and json.loads(bad.stdout)["errors"][0]["code"] == "unknown_name"
    assert "exit handler ran" in bad.stderr and "torn down" not in bad.stderr
