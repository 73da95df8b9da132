"""Start-up cost of the command line: wall time per command and where it goes.

For each command below, the installed console script runs in a subprocess several times and the
fastest wall time is printed next to its target. Then the parts: bare interpreter start-up, each
heavy third-party import on its own, the package modules a command imports (``python -X
importtime``, top entries by cumulative time), and catalog loading in process.

Targets (2-core machine, quiet): ``--help`` <= 0.12 s, ``fit ... --json`` <= 0.2 s,
``sweep ... --no-ranges --json`` <= 0.25 s, ``fit llama3-70b --sku all`` <= 0.3 s.
Usage: ``python benchmarks/bench_startup.py [RUNS]``.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time

COMMANDS: tuple[tuple[str, list[str], float], ...] = (
    ("--help", ["--help"], 0.12),
    ("fit mi300x --json", ["fit", "llama3-70b", "--sku", "mi300x", "--json"], 0.20),
    ("sweep a100 x 1024 --json", ["sweep", "gpt3-175b", "--sku", "a100", "--gpus", "1024", "--json", "--no-ranges"], 0.25),
    ("fit --sku all (table)", ["fit", "llama3-70b", "--sku", "all"], 0.30),
)

IMPORTS = ("numpy", "pydantic", "typer", "rich.console", "tomllib")


def _wall(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    """Fastest of ``runs`` wall times: on a shared machine the minimum is the least noisy figure."""
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        out.append(time.perf_counter() - t0)
        if proc.returncode not in (0, 4):
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[:400]}")
    return min(out)


def _importtime(args: list[str], env: dict[str, str], top: int = 8) -> list[tuple[int, str]]:
    """Cumulative import time (microseconds) of the slowest top-level imports of one command."""
    code = "import sys; from mi400plan.cli import main; sys.argv[0]='mi400plan'; main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args],
                          capture_output=True, text=True, env=env, cwd=os.sep)
    rows = []
    for line in proc.stderr.splitlines():
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


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    exe = shutil.which("mi400plan")
    base = [exe] if exe else [sys.executable, "-m", "mi400plan"]
    env = {**os.environ, "COLUMNS": "100"}
    print(f"runs: {runs} (fastest wall time, seconds; others sharing the CPU only add time)")
    print(f"{'python start-up':34s}: {_wall([sys.executable, '-c', 'pass'], runs, env):.3f} s")
    for mod in IMPORTS:
        t = _wall([sys.executable, "-c", f"import {mod}"], runs, env)
        print(f"{'python + import ' + mod:34s}: {t:.3f} s")
    floor = _wall([sys.executable, "-c", "import numpy"], runs, env)
    print(f"{'floor (python + numpy)':34s}: {floor:.3f} s")
    print(f"{'catalog: mi300x + llama3-70b':34s}: {_catalog_in_process(runs):.3f} s (in process)")
    print()
    for label, args, target in COMMANDS:
        t = _wall(base + args, runs, env)
        verdict = "ok" if t <= target else "over"
        print(f"mi400plan {label:34s}: {t:.3f} s (target {target:.2f} s: {verdict})")
        for us, name in _importtime(args, env):
            print(f"    import {name:40s} {us / 1e6:.3f} s")


if __name__ == "__main__":
    main()
