"""Wall time of ``mi400plan fit llama3-70b --sku all`` end to end (table at 100 columns, and --json),
the import time, and the in-process time of the ``fit`` call itself.

Runs the installed console script in a subprocess several times and prints the median, so the
end-to-end figures include interpreter start-up, imports, profile loading (accelerators and the
scale-up fabrics whose domain sizes bound TP in the fewest-GPUs search), the memory model and output.
Target: under 0.5 s end to end. Usage: ``python benchmarks/bench_fit.py [RUNS]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

TARGET_S = 0.5


def _time(cmd: list[str], runs: int, env: dict[str, str] | None = None) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return out


def _in_process(runs: int) -> list[float]:
    """The ``fit`` call alone on a fresh catalog (profiles parsed each time), imports excluded."""
    from mi400plan.api.fit import fit
    from mi400plan.profiles import Catalog

    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fit(Catalog.default([]), "llama3-70b", ["all"])
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    exe = shutil.which("mi400plan")
    base = ([exe] if exe else [sys.executable, "-m", "mi400plan"]) + ["fit", "llama3-70b", "--sku", "all"]
    env = {**os.environ, "COLUMNS": "100"}
    bare = _time([sys.executable, "-c", "pass"], runs)
    imp = _time([sys.executable, "-c", "import mi400plan.cli, mi400plan.api.fit, mi400plan.memory"], runs)
    table = _time(base, runs, env)
    js = _time(base + ["--json"], runs, env)
    call = _in_process(runs)
    print(f"runs: {runs} (median wall time, seconds; target end to end < {TARGET_S} s)")
    print(f"python start-up               : {statistics.median(bare):.3f} s")
    print(f"import cli + api.fit + memory : {statistics.median(imp):.3f} s")
    print(f"fit() call, fresh catalog     : {statistics.median(call):.3f} s")
    for label, t in (("table, 100 columns", table), ("--json", js)):
        print(f"fit llama3-70b --sku all ({label}): {statistics.median(t):.3f} s  (min {min(t):.3f}, max {max(t):.3f})")


if __name__ == "__main__":
    main()
