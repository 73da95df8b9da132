"""Wall time of ``mi400plan fit llama3.1-70b --sku all --json`` end to end, and the import time.

Runs the installed console script in a subprocess several times and prints the median, so the
figure includes interpreter start-up, imports, profile loading, the memory model and JSON output.
Target: well under one second. Usage: ``python benchmarks/bench_fit.py [RUNS]``.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time


def _time(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        out.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return out


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    exe = shutil.which("mi400plan")
    fit_cmd = ([exe] if exe else [sys.executable, "-m", "mi400plan"]) + ["fit", "llama3.1-70b", "--sku", "all", "--json"]
    bare = _time([sys.executable, "-c", "pass"], runs)
    imp = _time([sys.executable, "-c", "import mi400plan.cli, mi400plan.api.fit, mi400plan.memory"], runs)
    fit = _time(fit_cmd, runs)
    print(f"runs: {runs} (median wall time, seconds)")
    print(f"python start-up             : {statistics.median(bare):.3f} s")
    print(f"import cli + api.fit + memory: {statistics.median(imp):.3f} s")
    print(f"{' '.join(fit_cmd[-5:])}: {statistics.median(fit):.3f} s  (min {min(fit):.3f}, max {max(fit):.3f})")


if __name__ == "__main__":
    main()
