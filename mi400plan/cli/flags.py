"""The one place a command-line number is checked: type, finiteness, domain and a plausible bound.

Every numeric flag of every command has a domain here, keyed by its spelling. ``check_flags`` runs
on the values click parsed (before any computation), so ``--tp 0``, ``--gpus 8.5``, ``--tokens
1e999`` or ``--group 9223372036854775808`` are usage errors (exit 2) naming the flag, and the core
may assume its inputs are finite, in range and integer where they count things.
"""

from __future__ import annotations

import math

from mi400plan.errors import UsageError
from mi400plan.pipeline import MAX_OFFLOAD_LAYERS
from mi400plan.records import record

_GPUS_MAX = 2**24  # 16.7 M GPUs: well past any announced cluster
_DIM_MAX = 2**16  # one parallel dimension
_BIG = 1e12  # money and other open-ended positive quantities


@record
class Domain:
    """``kind``: int (a count, or a string of counts: ``units.parse_count_list``), length (tokens, k = 1024:
    ``units.parse_seq_len``), float, count (``15T``), size (``32MiB`` or a range), rate (``400Gb/s``), time (``2us``), or
    text (a name that must not be empty). ``lo``/``hi`` bound the value; ``lo_open`` excludes ``lo``."""

    kind: str
    lo: float = 0.0
    hi: float = _BIG
    lo_open: bool = False

    def describe(self) -> str:
        left = "(" if self.lo_open else "["
        what = "an integer" if self.kind == "int" else "a number"
        return f"{what} in {left}{_num(self.lo)}, {_num(self.hi)}]"


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def _pos_int(hi: float = _DIM_MAX) -> Domain:
    return Domain("int", 1, hi)


def _fraction(lo_open: bool = True) -> Domain:
    """A fraction that multiplies a rate, [0.001, 1]: below 0.1 % nothing runs (and a tiny positive
    value would overflow the times it divides)."""
    return Domain("float", 1e-3, 1.0)


_NONNEG = Domain("float", 0.0, _BIG)
_NAME = Domain("text")

FLAG_DOMAINS: dict[str, Domain] = {
    # parallel layout and batch (integers)
    "--tp": _pos_int(), "--pp": _pos_int(), "--vpp": _pos_int(), "--cp": _pos_int(), "--ep": _pos_int(),
    "--etp": _pos_int(), "--dp": _pos_int(_GPUS_MAX), "--zero": Domain("int", 0, 3),
    "--micro-batch": _pos_int(), "--batch": _pos_int(2**20), "--gpus": _pos_int(_GPUS_MAX),
    "--max-gpus": _pos_int(_GPUS_MAX), "--racks": _pos_int(2**20), "--top": _pos_int(10**7),
    "--concurrency": _pos_int(2**20), "--max-batched-tokens": _pos_int(2**24), "--max-seqs": _pos_int(2**14),
    "--candidates": _pos_int(8),
    "--spec-tokens": Domain("int", 0, 64), "--fp8-weight-copies": Domain("int", 0, 2),
    "--vocab-divisible-by": _pos_int(2**20), "--offload-layers": Domain("int", 0, MAX_OFFLOAD_LAYERS),
    "--recompute-layers": Domain("int", 0, MAX_OFFLOAD_LAYERS),
    "--experts": Domain("int", 0, _DIM_MAX), "--top-k": Domain("int", 0, 1024),
    "--width": Domain("int", 20, 1_000),  # columns; the range render.table's width rule accepts
    # fractions, factors and overrides (floats)
    "--capacity-factor": Domain("float", 1e-3, 1e3), "--moe-capacity-factor": Domain("float", 1e-3, 64.0),
    "--matmul-efficiency": _fraction(),
    "--hbm-efficiency": _fraction(), "--gemm-overhead-us": Domain("float", 0.0, 1e6),
    "--spec-acceptance": Domain("float", 0.0, 1.0), "--gpu-load": _fraction(), "--derate": _fraction(),
    "--pue": Domain("float", 1.0, 10.0), "--gpu-power-cap": Domain("float", 1.0, 1e5),
    "--air-limit-kw": Domain("float", 0.1, 1e4), "--cost-of-capital": Domain("float", 0.0, 1.0),
    "--depreciation-years": Domain("float", 0.1, 100.0), "--grid-intensity": Domain("float", 0.0, 10.0),
    "--mfu": Domain("float", 1e-3, 1.0),
    # money (a price of zero is allowed where it means "free"; a GPU-hour must cost something)
    # Lower bounds are plausible, not just positive: these divide, and 5e-324 would overflow a quotient.
    "--gpu-hour-cost": Domain("float", 1e-4, 1e6), "--price-per-kwh": Domain("float", 1e-6, 1e3),
    "--electricity-price": Domain("float", 1e-6, 1e3), "--colocation-per-kw-month": _NONNEG,
    "--facility-capex-per-mw": _NONNEG, "--network-capex-per-gpu": _NONNEG, "--capex-per-gpu": Domain("float", 1.0, 1e9),
    "--tokens-per-s": Domain("float", 1e-3, 1e9), "--flops": Domain("count", 1e15, 1e32),
    # quantities with units, given as text
    "--tokens": Domain("count", 1.0, 1e18), "--group": Domain("int", 1, _GPUS_MAX),
    "--stride": Domain("int", 1, _GPUS_MAX), "--size": Domain("size", 0.0, 2.0**50),
    "--bw": Domain("rate", 1e3, 1e15), "--latency": Domain("time", 0.0, 1.0),
    "--ttft-p99": Domain("time", 0.0, 86400.0, True), "--tpot-p99": Domain("time", 0.0, 3600.0, True),
    # --input-len / --output-len are lengths or distributions (uniform:A-B, a histogram file), checked by
    # serve_sim.parse_length_dist
    # names: an empty one is a mistake, not "use the default"
    "--sku": _NAME, "--fabric": _NAME, "--scale-out": _NAME, "--site": _NAME, "--facility": _NAME,
    "--plan": _NAME, "--save": _NAME, "--stack": _NAME, "--plot": _NAME, "--profiles": _NAME, "--recompute-modules": _NAME,
}

# How an ``a..b`` range of a count flag reads (default: doubling, as --gpus 512..65536).
LIST_RANGES: dict[str, str] = {"--concurrency": "each"}

# Choices that are plain strings at the parser (the Enum-typed ones are checked by click itself).
FLAG_CHOICES: dict[str, tuple[str, tuple[str, ...]]] = {
    # (what, choices): sweep takes the dtypes fit does (fit's --grad-dtype is an enum of these two).
    "--grad-dtype": ("gradient dtype", ("fp32", "bf16")),
    "--rank-by": ("serving order", ("tok-per-gpu", "cost", "ttft")),
}


# Flags a command accepts (they are shared options) but has no meaning for: refused, not ignored.
REFUSED: dict[tuple[str, str], str] = {
    ("comm", "--check"): "comm computes times and has no pass/fail verdict; gate on the JSON fields instead",
}


def check_flags(params: dict[str, object], opts: dict[str, str], command: str = "") -> None:
    """Raise UsageError naming the first flag whose value is outside its domain.

    ``params`` maps click parameter names to parsed values; ``opts`` maps them to flag spellings.
    """
    for name, value in params.items():
        why = REFUSED.get((command, opts.get(name, "")))
        if why and value:
            raise UsageError(f"{opts[name]} does not apply to {command}: {why}")
    for name, value in params.items():
        flag = opts.get(name)
        if flag is None or value is None:
            continue
        if flag in FLAG_CHOICES:
            _check_choice(flag, value, *FLAG_CHOICES[flag])
        domain = FLAG_DOMAINS.get(flag)
        if domain is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            check_value(flag, item, domain)


def _check_choice(flag: str, value: object, what: str, choices: tuple[str, ...]) -> None:
    text = str(getattr(value, "value", value)).strip().lower()
    if text not in choices:
        raise UsageError(f"{flag}: unknown {what} {str(value)!r}; known: {', '.join(choices)}")


def check_value(flag: str, value: object, domain: Domain) -> None:
    """Check one parsed value (or its text) against ``domain``; UsageError names ``flag``."""
    if domain.kind == "text":
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{flag} is empty; give a name or leave the flag out")
        return
    if isinstance(value, bool):
        raise UsageError(f"{flag} must be a number")
    if isinstance(value, str):
        for number in _numbers(flag, value, domain):
            _in_domain(flag, number, domain, value)
    elif isinstance(value, (int, float)):
        _in_domain(flag, value, domain, str(value))


def _numbers(flag: str, text: str, domain: Domain) -> list[float]:
    """The numbers a text flag stands for, parsed the way the command will parse it."""
    from mi400plan import units

    parsers = {
        "count": units.parse_count, "rate": units.parse_rate, "time": units.parse_duration,
        "size": units.parse_size_range,
    }
    try:
        if domain.kind == "int":
            # The one reading of counts (units.COUNT_RULE): suffixes, lists, ranges; '1,024' refused.
            return [float(n) for n in units.parse_count_list(text, flag, ranges=LIST_RANGES.get(flag, "double"))]
        if domain.kind == "length":
            return [float(units.parse_seq_len(text, flag))]
        if domain.kind == "float":
            return [float(text)]
        got = parsers[domain.kind](text)
    except units.UnitError as exc:
        raise UsageError(str(exc) if str(exc).startswith(flag) else f"{flag}: {exc}") from None
    except ValueError:
        raise UsageError(f"{flag}: cannot read {_short(text)!r} as {domain.describe()}") from None
    return list(got) if isinstance(got, list) else [got]


def _in_domain(flag: str, number: float, domain: Domain, text: str) -> None:
    if isinstance(number, float) and not math.isfinite(number):
        raise UsageError(f"{flag} must be a finite number, got {_short(text)}")
    if domain.kind == "int" and isinstance(number, float) and not number.is_integer():
        raise UsageError(f"{flag} must be a whole number, got {_short(text)}")
    low_bad = number <= domain.lo if domain.lo_open else number < domain.lo
    if low_bad or number > domain.hi:
        raise UsageError(f"{flag} must be {domain.describe()}, got {_short(text)}")


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
