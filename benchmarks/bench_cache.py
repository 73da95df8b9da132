"""The profile cache after a huge user profile: does one 30 MB profile, read once, slow later commands?

Steps, each in its own subprocess of the installed package (run from the file-system root):
1. ``fit llama3-70b --sku mi300x --json`` on bundled profiles with a fresh cache directory: the first
   run fills the cache, then RUNS runs are timed ("warm, small cache").
2. One ``fit llama3-70b --sku BIG.toml --json`` with the same cache directory, where BIG.toml is a copy of
   the bundled mi300x profile with a 30 MB ``description``.
3. RUNS more runs of step 1's command ("after the 30 MB profile").
4. RUNS runs of step 1's command each against an empty cache directory ("empty cache").

Prints the minimum wall time of each, the cache directory's size after step 2, and the difference
step 3 - step 1 against the target (0.02 s). Usage: ``python benchmarks/bench_cache.py [RUNS]``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.02
FIT = ["fit", "llama3-70b", "--sku", "mi300x", "--json"]


def _base() -> list[str]:
    exe = shutil.which("mi400plan", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "mi400plan"]


def _run(args: list[str], cache: Path) -> float:
    env = dict(os.environ, MI400PLAN_CACHE_DIR=str(cache))
    env.pop("MI400PLAN_NO_CACHE", None)
    t0 = time.perf_counter()
    proc = subprocess.run([*_base(), *args], capture_output=True, text=True, env=env, cwd=os.sep)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:4])} failed ({proc.returncode}): {proc.stderr.strip()[:400]}")
    return wall


def _size(d: Path) -> int:
    return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())


def _big_profile(where: Path) -> Path:
    from mi400plan.cache import package_dir

    text = (package_dir("profiles") / "accelerators" / "mi300x.toml").read_text(encoding="utf-8")
    big = text.replace('name = "mi300x"', 'name = "mi300x-big"', 1)
    big = re.sub(r'(?m)^description = ".*"$', f'description = "{"x" * (30 << 20)}"', big, count=1)
    path = where / "mi300x-big.toml"
    path.write_text(big, encoding="utf-8")
    return path


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory(prefix="mi400plan-bench-cache-") as tmp:
        root = Path(tmp)
        cache = root / "cache"
        big = _big_profile(root)
        _run(FIT, cache)
        warm = min(_run(FIT, cache) for _ in range(runs))
        t_big = _run(["fit", "llama3-70b", "--sku", str(big), "--json"], cache)
        size = _size(cache)
        after = min(_run(FIT, cache) for _ in range(runs))
        empty = []
        for i in range(runs):
            fresh = root / f"empty{i}"
            empty.append(_run(FIT, fresh))
            shutil.rmtree(fresh, ignore_errors=True)
    print(f"fit llama3-70b --sku mi300x --json, minimum of {runs} runs:")
    print(f"  empty cache                     {min(empty):.3f} s")
    print(f"  warm cache (bundled only)       {warm:.3f} s")
    print(f"  reading the 30 MB profile once  {t_big:.3f} s; cache then {size / 1e6:.2f} MB")
    print(f"  warm cache after that profile   {after:.3f} s")
    delta = after - warm
    print(f"after - warm: {delta * 1000:+.1f} ms (target within {TARGET_S * 1000:.0f} ms): "
          f"{'OK' if abs(delta) <= TARGET_S else 'OVER'}")
    print(f"after - empty: {(after - min(empty)) * 1000:+.1f} ms")


if __name__ == "__main__":
    main()
