"""Wall and CPU seconds of a command run in a subprocess, shared by the benchmark scripts."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time


def timed_runs(cmd: list[str], runs: int, env: dict[str, str]) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system of the child) seconds of each of ``runs`` runs of ``cmd``, run from the
    file-system root; exits naming the command when it fails (exit codes 0 and 4, 'nothing fits', pass)."""
    wall, cpu = [], []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=os.sep)
        wall.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
        if proc.returncode not in (0, 4):
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[:400]}")
    return wall, cpu
