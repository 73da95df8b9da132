"""Speed of ``serve --scenario`` (the request-level simulation on the best layouts of each SKU).

Target (issue "serve that matches how inference is measured"): a 4-SKU DeepSeek-V3 server-scenario search
under 2 s end to end; every scenario keeps the search's speed (all SKUs, all layouts, in a few seconds).

For each case below: the installed command line in a subprocess (from the file-system root, so a source
checkout is not what is imported), ``RUNS`` times, median and minimum wall time and median CPU time (user +
system: steadier than wall time when other work shares the CPU); then the same search in process
(``api.serve`` after a warm-up call, median of ``RUNS``) and, of that, the simulation alone (the
``serve_sim.simulate`` runs: their count and summed time). The load average is printed before and after:
on a shared machine, compare figures taken at similar load.

    python benchmarks/bench_serve_scenarios.py [RUNS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time

from _timing import timed_runs  # benchmarks/_timing.py, beside this script

SKUS4 = "mi355x,b200,h200,mi325x"
CASES: tuple[tuple[str, list[str]], ...] = (
    ("deepseek-v3 server, 4 SKUs", ["deepseek-v3", "--sku", SKUS4, "--scenario", "server"]),
    ("deepseek-r1 server, 4 SKUs", ["deepseek-r1", "--sku", SKUS4, "--scenario", "server"]),
    ("deepseek-v3 interactive, 4 SKUs", ["deepseek-v3", "--sku", SKUS4, "--scenario", "interactive"]),
    ("deepseek-v3 offline, 4 SKUs", ["deepseek-v3", "--sku", SKUS4, "--scenario", "offline"]),
    ("deepseek-v3 single-stream, 4 SKUs", ["deepseek-v3", "--sku", SKUS4, "--scenario", "single-stream"]),
    ("llama2-70b server, 4 SKUs", ["llama2-70b", "--sku", SKUS4, "--scenario", "server"]),
    ("deepseek-v3 server, 4 SKUs, sglang", ["deepseek-v3", "--sku", SKUS4, "--scenario", "server",
                                             "--stack", "sglang"]),
)
TARGET_S = {"deepseek-v3 server, 4 SKUs": 2.0}


def _exe() -> list[str]:
    here = shutil.which("mi400plan", path=os.path.dirname(sys.executable))
    return [here] if here else [sys.executable, "-m", "mi400plan"]


def _subprocess(args: list[str], runs: int) -> tuple[float, float, float]:
    """(median wall, minimum wall, median CPU) seconds of ``runs`` runs of ``serve args --json``."""
    cmd = [*_exe(), "serve", *args, "--json"]
    env = {**os.environ, "COLUMNS": "80"}
    wall, cpu = timed_runs(cmd, runs, env)
    return statistics.median(wall), min(wall), statistics.median(cpu)


def _request(args: list[str]) -> tuple[str, list[str], object]:
    from mi400plan.api.serve import ServeRequest
    from mi400plan.api.serve_scenario import ScenarioRequest

    model, skus = args[0], args[2].split(",")
    opts = dict(zip(args[3::2], args[4::2], strict=True))
    sreq = ScenarioRequest(opts["--scenario"], stack=opts.get("--stack"))
    return model, skus, ServeRequest(scenario=sreq, stack=opts.get("--stack"))


def _in_process(args: list[str], runs: int) -> tuple[float, float, int]:
    """(median seconds of ``api.serve``, median seconds inside ``serve_sim.simulate``, simulate calls)."""
    from mi400plan import serve_sim
    from mi400plan.api.serve import serve
    from mi400plan.profiles import Catalog

    cat = Catalog.default([])
    model, skus, req = _request(args)
    orig = serve_sim.simulate
    spent = [0.0, 0]

    def timed(*a: object, **k: object) -> object:
        t0 = time.perf_counter()
        try:
            return orig(*a, **k)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += 1

    serve(cat, model, skus, req)  # warm-up: profile parsing, imports
    whole, sim, calls = [], [], 0
    serve_sim.simulate = timed  # type: ignore[assignment]
    try:
        for _ in range(runs):
            spent[:] = [0.0, 0]
            t0 = time.perf_counter()
            serve(cat, model, skus, req)
            whole.append(time.perf_counter() - t0)
            sim.append(spent[0])
            calls = int(spent[1])
    finally:
        serve_sim.simulate = orig  # type: ignore[assignment]
    return statistics.median(whole), statistics.median(sim), calls


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"serve --scenario speed, {runs} runs each; load average before: {os.getloadavg()[0]:.2f}, "
          f"CPUs: {os.cpu_count()}")
    print(f"{'case':38s} {'CLI median':>10s} {'min':>6s} {'CPU':>6s} {'api.serve':>9s} {'simulate':>9s} "
          f"{'runs':>4s}  target")
    for label, args in CASES:
        med, lo, cpu = _subprocess(args, runs)
        api, sim, calls = _in_process(args, runs)
        tgt = TARGET_S.get(label)
        verdict = "" if tgt is None else f"< {tgt:.1f} s: {'met' if med < tgt else 'MISSED'}"
        print(f"{label:38s} {med:9.2f}s {lo:5.2f}s {cpu:5.2f}s {api:8.2f}s {sim:8.2f}s {calls:4d}  {verdict}")
    print(f"load average after: {os.getloadavg()[0]:.2f} (CLI: --json, end to end, from / ; api.serve and "
          "simulate: in process, warm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
