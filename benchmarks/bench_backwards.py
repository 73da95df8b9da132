"""In-process time of the questions asked backwards: ``sweep --deadline`` (one and three SKUs, a
reachable and an impossible date), ``budget`` and ``fit --largest``, on a warm catalog.

Prints the median of several runs (process CPU time and wall time) and how many cluster sizes or
ladder steps each question priced. Target: the deadline question for three SKUs in about a second.
Usage: ``python benchmarks/bench_backwards.py [RUNS]``.
"""

from __future__ import annotations

import statistics
import sys
import time


def _median(fn, runs: int) -> tuple[float, float, object]:  # noqa: ANN001
    cpu, wall, out = [], [], None
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall), out


def main(runs: int = 3) -> None:
    from mi400plan.api import open_catalog
    from mi400plan.api.budget import budget
    from mi400plan.api.deadline import sweep_deadline
    from mi400plan.api.largest import largest

    cat = open_catalog()
    cases = {
        "sweep llama3.1-70b --tokens 15T --deadline 30d, 1 SKU":
            lambda: sweep_deadline(cat, "llama3.1-70b", ["mi355x"], tokens="15T", deadline="30d"),
        "sweep llama3.1-70b --tokens 15T --deadline 30d, 3 SKUs":
            lambda: sweep_deadline(cat, "llama3.1-70b", ["mi355x", "mi300x", "b200"], tokens="15T", deadline="30d"),
        "sweep llama3.1-70b --tokens 15T --deadline 2d (impossible)":
            lambda: sweep_deadline(cat, "llama3.1-70b", ["mi355x"], tokens="15T", deadline="2d"),
        "sweep llama3.1-405b --tokens 15T --deadline 60d":
            lambda: sweep_deadline(cat, "llama3.1-405b", ["mi355x"], tokens="15T", deadline="60d"),
        "budget --sku mi455x --gpus 10000 --days 90": lambda: budget(cat, "mi455x", gpus=10000, days="90d"),
        "fit --largest --sku mi355x --gpus 1024": lambda: largest(cat, ["mi355x"], gpus=1024),
    }
    print(f"{'question':62} {'CPU s':>7} {'wall s':>7}  priced")
    for name, fn in cases.items():
        cpu, wall, out = _median(fn, runs)
        if hasattr(out, "answers"):
            priced = ", ".join(str(len(a.priced)) for a in out.answers) + " sizes"
        elif hasattr(out, "iterations"):
            priced = f"{len(out.iterations)} fixed-point steps"
        else:
            priced = ", ".join(str(r.steps_checked) for r in out.rows) + " ladder steps"
        print(f"{name:62} {cpu:7.2f} {wall:7.2f}  {priced}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
