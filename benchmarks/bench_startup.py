"""Start-up cost of the command line: wall time per command and where it goes.

For each command below, the installed package runs in a subprocess (from the file-system root, so a
source checkout in the working directory is not what is imported) several times and the
minimum wall time and minimum CPU time (user + system; steadier than wall time when other work
shares the CPU) are printed next to its target, with the physical floor: the interpreter, and the
interpreter importing numpy, pydantic and typer, which every computing command needs. Then, per
command, the same run split in one interpreter: the third-party floor (with a pydantic model in use),
the package's imports, the first run and a second, warm run. Then the parts: bare interpreter start-up, each
heavy third-party import on its own, the package modules a command imports once the third-party floor
is loaded (``python -X importtime``, top entries by cumulative time), and catalog loading in process.
The in-process split calls ``main()``, not the program (``console()``): what the program adds (glibc tuned and
the heap advised huge pages, no interpreter teardown at the end) shows in the wall, CPU and paired figures only.

Each command is also run alternately with the third-party floor, and the median of (command - floor)
is printed: the package's own share, which does not move with the machine's speed drifting between
runs the way the minimum wall time does, in wall and CPU seconds and in minor page faults (a count that
does not depend on the machine's load at all).

Targets (2-core machine, quiet): ``--help`` <= 0.12 s, ``fit ... --json`` <= 0.2 s,
``sweep ... --no-ranges --json`` <= 0.25 s, ``fit llama3-70b --sku all`` <= 0.3 s.
Usage: ``python benchmarks/bench_startup.py [RUNS]``.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

from _timing import timed_runs  # benchmarks/_timing.py, beside this script

COMMANDS: tuple[tuple[str, list[str], float], ...] = (
    ("--help", ["--help"], 0.12),
    ("fit mi300x --json", ["fit", "llama3-70b", "--sku", "mi300x", "--json"], 0.20),
    ("sweep a100 x 1024 --json", ["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--json", "--no-ranges"], 0.25),
    ("fit --sku all (table)", ["fit", "llama3-70b", "--sku", "all"], 0.30),
)

IMPORTS = ("numpy", "pydantic", "typer", "rich.console", "tomllib")


def _times(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float]:
    """(minimum wall time, minimum CPU time) of ``runs`` runs, seconds."""
    wall, cpu = timed_runs(cmd, runs, env)
    return min(wall), min(cpu)


def _wall(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    return _times(cmd, runs, env)[0]


def _importtime(args: list[str], env: dict[str, str], top: int = 8) -> list[tuple[int, str]]:
    """Cumulative import time (microseconds) of the slowest top-level imports of one command, after the
    third-party floor (``_FLOOR``) is loaded: otherwise the first package module to import numpy or
    pydantic (or typer's pydantic adapter, ``typer._adapters``, that typer >= 0.29 builds its parameter
    coercion on) is charged the floor's time."""
    code = (_FLOOR + "import sys; sys.stderr.write('\\n--- floor loaded ---\\n')\n"
            "from mi400plan.cli import main; sys.argv[0]='mi400plan'; main(sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args],
                          capture_output=True, text=True, env=env, cwd=os.sep)
    rows = []
    for line in proc.stderr.split("--- floor loaded ---", 1)[-1].splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)", line)
        if m and len(m.group(2)) <= 2:  # top-level and first-level imports only
            rows.append((int(m.group(1)), m.group(2) + m.group(3)))
    return sorted(rows, reverse=True)[:top]


def _catalog_in_process(runs: int) -> float:
    from mi400plan.profiles import Catalog

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        cat = Catalog.default([])
        cat.get("accelerators", "mi300x")
        cat.get("models", "llama3-70b")
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


# The third-party floor: numpy, typer, and pydantic with a model that has a constrained field built and
# dumped, which pulls in the pydantic modules every result model needs.
_FLOOR = """import numpy, typer
from pydantic import BaseModel, ConfigDict, Field
class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")
    x: float = Field(default=1.0, gt=0)
_M(x=2.0).model_dump_json()
"""

# In one fresh interpreter: the floor, then the package's own imports, the first run of the command
# (first-use builds included), and the same command again in the same process (the work itself).
_PHASES = """
import io, contextlib, sys, time
t0 = time.perf_counter()
""" + _FLOOR + """t1 = time.perf_counter()
import mi400plan.cli as cli
cmd = sys.argv[1:]
cli._register(cli._command_of(cmd))
t2 = time.perf_counter()
def run():
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            cli.main(cmd)
        except SystemExit:
            pass
run()
t3 = time.perf_counter()
run()
t4 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)
"""


def _phases(args: list[str], runs: int, env: dict[str, str]) -> list[float]:
    """Minimum over ``runs`` of: third-party floor, own imports, first run, warm run (seconds)."""
    best: list[float] | None = None
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _PHASES, *args], capture_output=True, text=True,
                             env=env, cwd=os.sep).stdout.split()
        vals = [float(x) for x in out[-4:]]
        best = vals if best is None else [min(a, b) for a, b in zip(best, vals)]
    return best or [0.0] * 4


def _paired(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[float, float, float, float]:
    """(median wall of the command, then the medians of command minus the third-party floor run just before
    it: wall seconds, CPU seconds (user + system) and minor page faults): floor and command alternate, so a
    machine whose speed drifts during the measurement moves both and the difference is what the package
    itself costs. Page faults (memory the kernel maps and zeroes for the process) do not depend on the
    machine's load at all."""
    walls, own, cpu, faults = [], [], [], []

    def child(argv: list[str]) -> tuple[float, float, int]:
        r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, cwd=os.sep)
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        return (t1 - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt)

    for _ in range(runs):
        f_wall, f_cpu, f_faults = child([sys.executable, "-c", _FLOOR])
        c_wall, c_cpu, c_faults = child(cmd)
        walls.append(c_wall)
        own.append(c_wall - f_wall)
        cpu.append(c_cpu - f_cpu)
        faults.append(c_faults - f_faults)
    return statistics.median(walls), statistics.median(own), statistics.median(cpu), statistics.median(faults)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    exe = shutil.which("mi400plan")
    base = [exe] if exe else [sys.executable, "-m", "mi400plan"]
    # The program runs numpy's OpenBLAS on one thread (``cli.console``); the floors are measured the same way.
    env = {**os.environ, "COLUMNS": "100", "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    print(f"runs: {runs} (minimum wall time / minimum CPU time, seconds)")
    floor = [("python start-up", "pass"), ("floor: python + numpy", "import numpy"),
             ("floor: python + numpy + pydantic + typer",
                                            "import numpy, pydantic.main, typer")]
    for label, code in floor:
        w, c = _times([sys.executable, "-c", code], runs, env)
        print(f"{label:42s}: {w:.3f} s / cpu {c:.3f} s")
    for mod in IMPORTS:
        t = _wall([sys.executable, "-c", f"import {mod}"], runs, env)
        print(f"{'python + import ' + mod:42s}: {t:.3f} s")
    print(f"{'catalog: mi300x + llama3-70b':34s}: {_catalog_in_process(runs):.3f} s (in process)")
    print()
    for label, args, target in COMMANDS:
        t, c = _times(base + args, runs, env)
        verdict = "ok" if t <= target else "over"
        print(f"mi400plan {label:32s}: {t:.3f} s / cpu {c:.3f} s (target {target:.2f} s: {verdict})")
        if args != ["--help"]:  # --help needs neither numpy nor pydantic: no floor to pair it with
            med, own_share, own_cpu, own_faults = _paired(base + args, runs, env)
            print(f"    paired with the floor: median {med:.3f} s, of which the package {own_share:.3f} s (median;"
                  f" CPU {own_cpu:.3f} s, {own_faults:,.0f} more page faults)")
        floor, own, first, warm = _phases(args, runs, env)
        print(f"    in one process: third-party floor {floor:.3f} s + package imports {own:.3f} s + first run"
              f" {first:.3f} s; the same command again {warm:.3f} s")
        for us, name in _importtime(args, env):
            print(f"    import {name:40s} {us / 1e6:.3f} s")


if __name__ == "__main__":
    main()
