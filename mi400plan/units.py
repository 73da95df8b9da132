"""Unit constants, parsers and human formatting.

Inside the core every quantity is a float (or int) in base SI units: bytes, seconds, watts,
bytes per second, FLOP per second. Decimal prefixes are powers of 1000 (SI, IEC 80000-13),
binary prefixes are powers of 1024 (IEC 60027-2): ``GB = 1e9`` bytes, ``GiB = 2**30`` bytes.
A network rate in bits (``Gb/s``) is divided by 8 to get bytes per second.

This module is a leaf: it imports nothing from mi400plan.
"""

from __future__ import annotations

import math
import re

# --- sizes in bytes -------------------------------------------------------------------------
B = 1
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
PB = 10**15
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
PiB = 2**50

# --- rates -----------------------------------------------------------------------------------
BIT = 1 / 8  # bytes per bit
Gbit = 1e9 / 8  # bytes in a gigabit
GB_PER_S = 1e9  # bytes/s
TB_PER_S = 1e12  # bytes/s
GBIT_PER_S = 1e9 / 8  # bytes/s in one Gb/s

# --- compute ---------------------------------------------------------------------------------
TFLOPS = 1e12  # FLOP/s
PFLOPS = 1e15

# --- time ------------------------------------------------------------------------------------
NS = 1e-9
US = 1e-6
MS = 1e-3
S = 1.0
HOUR = 3600.0
DAY = 86400.0

# --- power -----------------------------------------------------------------------------------
W = 1.0
KW = 1e3
MW = 1e6

_SIZE_UNITS: dict[str, float] = {
    "b": B,
    "kb": KB,
    "mb": MB,
    "gb": GB,
    "tb": TB,
    "pb": PB,
    "kib": KiB,
    "mib": MiB,
    "gib": GiB,
    "tib": TiB,
    "pib": PiB,
}

# Rates: the case of the "b" matters (b = bit, B = byte), so these keys are case-sensitive.
_RATE_UNITS: dict[str, float] = {
    "B/s": 1.0,
    "KB/s": 1e3,
    "MB/s": 1e6,
    "GB/s": 1e9,
    "TB/s": 1e12,
    "KiB/s": 2.0**10,
    "MiB/s": 2.0**20,
    "GiB/s": 2.0**30,
    "TiB/s": 2.0**40,
    "b/s": 1 / 8,
    "Kb/s": 1e3 / 8,
    "Mb/s": 1e6 / 8,
    "Gb/s": 1e9 / 8,
    "Tb/s": 1e12 / 8,
    "bps": 1 / 8,
    "Kbps": 1e3 / 8,
    "Mbps": 1e6 / 8,
    "Gbps": 1e9 / 8,
    "Tbps": 1e12 / 8,
    "GBps": 1e9,
    "TBps": 1e12,
}

_TIME_UNITS: dict[str, float] = {"ns": NS, "us": US, "µs": US, "ms": MS, "s": S, "min": 60.0, "h": HOUR, "d": DAY}

# Counts such as "15T tokens" or "128M": decimal multipliers.
_COUNT_SUFFIX: dict[str, float] = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1e9, "T": 1e12}

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)"


class UnitError(ValueError):
    """A quantity string could not be parsed; the message says what was expected."""


_MAX_TEXT = 64  # a quantity longer than this is not a quantity (and int() of 5,000 digits raises)


def _finite(value: float, text: str, what: str) -> float:
    """``value`` if finite and not negative, else UnitError: ``1e999`` is not a {what}."""
    if not math.isfinite(value):
        raise UnitError(f"{what} {_clip(text)!r} is not a finite number")
    if value < 0:
        raise UnitError(f"{what} {_clip(text)!r} is negative")
    return value


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def _text(text: object, what: str) -> str:
    """The stripped text of a quantity, refused when absurdly long (before any regex or int())."""
    t = str(text).strip()
    if len(t) > _MAX_TEXT:
        raise UnitError(f"cannot read {what} {_clip(t)!r}: too long")
    return t


def parse_size(text: str) -> int:
    """Parse a byte size such as ``32MB`` (32e6 B), ``32MiB`` (32 * 2**20 B) or ``4096`` (bytes).

    Decimal prefixes are powers of 1000, binary prefixes (KiB, MiB, ...) powers of 1024. A decimal
    prefix followed by a lowercase ``b`` (``32Mb``, ``4gb``) is refused as ambiguous: in networking
    it means bits, and a size here is always bytes.
    """
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]*)", _text(text, "size"))
    if not m:
        raise UnitError(f"cannot read size {text!r}: expected a number and a unit such as 32MB, 32MiB or 1GiB")
    value, unit = float(m.group(1)), m.group(2).lower() or "b"
    if m.group(2).endswith("b") and unit in _SIZE_UNITS and unit != "b" and not unit.endswith("ib"):
        # "32Mb" is megabits in networking and megabytes to some users: refuse rather than guess.
        raise UnitError(
            f"size {text!r} is ambiguous: a lowercase b means bits (32Mb = 4MB); sizes are bytes, "
            f"so write {m.group(1)}{m.group(2)[:-1].upper()}B for bytes, or divide a bit count by 8"
        )
    if unit not in _SIZE_UNITS:
        raise UnitError(
            f"unknown size unit {m.group(2)!r} in {text!r}: use B, KB/MB/GB/TB (powers of 1000) "
            "or KiB/MiB/GiB/TiB (powers of 1024)"
        )
    size = _finite(value * _SIZE_UNITS[unit], text, "size")
    return int(round(size))


def parse_size_range(text: str) -> list[int]:
    """Parse ``1KiB..8GiB`` into sizes doubling from the first to the last (nccl-tests ``-f 2``).

    A single size returns a one-element list.
    """
    if ".." not in text:
        return [parse_size(text)]
    lo_text, hi_text = text.split("..", 1)
    lo, hi = parse_size(lo_text), parse_size(hi_text)
    if lo <= 0 or hi < lo:
        raise UnitError(f"size range {text!r} must go from a positive size up to a larger one")
    sizes = []
    s = lo
    while s <= hi:
        sizes.append(s)
        s *= 2
    return sizes


def parse_rate(text: str) -> float:
    """Parse a bandwidth into bytes/s. ``400Gb/s`` is 50e9 B/s; ``50GB/s`` is 50e9 B/s.

    The case of ``b`` decides bits vs bytes. The rate is whatever direction the caller means;
    the planner's flags document it as per direction.
    """
    m = re.fullmatch(_NUM + r"\s*([A-Za-zµ/]+)", _text(text, "bandwidth"))
    if not m or m.group(2) not in _RATE_UNITS:
        raise UnitError(
            f"cannot read bandwidth {text!r}: expected e.g. 400Gb/s (bits) or 50GB/s (bytes), "
            "per direction"
        )
    return _finite(float(m.group(1)) * _RATE_UNITS[m.group(2)], text, "bandwidth")


def parse_duration(text: str) -> float:
    """Parse a time such as ``2us``, ``1.5ms`` or ``3s`` into seconds."""
    m = re.fullmatch(_NUM + r"\s*([a-zµ]+)", _text(text, "time"))
    if not m or m.group(2) not in _TIME_UNITS:
        raise UnitError(f"cannot read time {_clip(text)!r}: expected a number with ns, us, ms or s")
    return _finite(float(m.group(1)) * _TIME_UNITS[m.group(2)], text, "time")


def parse_count(text: str) -> float:
    """Parse a count with a decimal suffix: ``15T`` = 1.5e13, ``128M`` = 1.28e8, ``4096``."""
    m = re.fullmatch(_NUM + r"\s*([kKMGBT]?)", _text(text, "count"))
    if not m:
        raise UnitError(f"cannot read count {_clip(text)!r}: expected a number with an optional k/M/B/T suffix")
    return _finite(float(m.group(1)) * _COUNT_SUFFIX[m.group(2)], text, "count")


# --- integer counts and lists of them (every count flag: --gpus, --tp, --racks, --concurrency, ...) ---

_INT_SUFFIX: dict[str, int] = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "B": 10**9, "T": 10**12,
                               "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}

COUNT_RULE = (
    "a count is an integer with an optional suffix: k/K, M, G/B, T (powers of 1000) or Ki, Mi, Gi, Ti (powers "
    "of 1024), e.g. 1k = 1,000 and 16Ki = 16,384; '_' may group digits (1_024). A comma separates list items, "
    "so a thousands separator is refused: text whose items after the first comma are all three-digit groups "
    "('1,024', '64,128') reads both ways. Write one count as 1024 or 1k; a list with a space after each comma "
    "('64, 128') or as a range (64..128)"
)

_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")


def parse_int_count(text: object, what: str = "count") -> int:
    """One whole count: ``8``, ``1k`` = 1,000, ``16Ki`` = 16,384, ``1.5k`` = 1,500, ``1_024`` (see ``COUNT_RULE``).

    A comma is refused (``1,024``: write ``1024`` or ``1k``), as are leading zeros (``08``), a fraction
    (``1.5``, ``1.0001k``), a sign and anything that is not finite. UnitError names ``what``.
    """
    t = _text(text, what)
    if "," in t:
        raise UnitError(_comma_message(t, what, one=True))
    m = re.fullmatch(r"([0-9][0-9_]*(?:\.[0-9]+)?(?:[eE]\+?[0-9]+)?)\s*(Ki|Mi|Gi|Ti|[kKMGBT])?", t)
    if not m or "__" in m.group(1) or m.group(1).endswith("_"):
        raise UnitError(f"cannot read {what} {_clip(t)!r}: expected a whole count such as 8, 1k (1,000) or 16Ki "
                        "(16,384)")
    digits = m.group(1).replace("_", "")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        raise UnitError(f"{what} {t!r} has a leading zero; write {digits.lstrip('0') or '0'}")
    scale = _INT_SUFFIX[m.group(2) or ""]
    if "." in digits or "e" in digits.lower():
        value = _finite(float(digits) * scale, t, what)
        if not value.is_integer():
            raise UnitError(f"{what} must be a whole number, got {t!r} = {value:,g}")
        return int(value)
    return int(digits) * scale


def parse_count_list(text: object, what: str = "count", *, ranges: str | None = "double",
                     max_items: int = 1 << 20) -> list[int]:
    """Counts as a comma list (``512, 1024``, ``1k,2k``) or a range ``lo..hi``, sorted and without repeats.

    ``ranges``: ``"double"`` (``512..4096`` = 512, 1024, 2048, 4096), ``"each"`` (every integer, as
    ``--concurrency 1..1024``), or None (no ranges). Each item is read by ``parse_int_count``; text that
    could be one number with thousands separators (``1,024``, ``64,128,256``) is refused (``COUNT_RULE``).
    """
    t = _text(text, what) if len(str(text)) <= _MAX_TEXT else str(text).strip()
    if len(t) > 4096:
        raise UnitError(f"cannot read {what} {_clip(t)!r}: too long")
    if _GROUPED.fullmatch(t):
        raise UnitError(_comma_message(t, what, one=False))
    if ".." in t:
        if ranges is None:
            raise UnitError(f"{what} takes a list, not a range: {_clip(t)!r}")
        lo_t, hi_t = t.split("..", 1)
        lo, hi = parse_int_count(lo_t, what), parse_int_count(hi_t, what)
        if lo < 1 or hi < lo:
            raise UnitError(f"{what} range {t!r} must go from a positive count up to a larger one")
        if ranges == "each":
            if hi - lo >= max_items:
                raise UnitError(f"{what} range {t!r} has more than {max_items:,} values")
            return list(range(lo, hi + 1))
        return [lo << k for k in range((hi // lo).bit_length())]
    items = [x for x in t.split(",")]
    if any(not x.strip() for x in items):
        raise UnitError(f"{what} {_clip(t)!r} has an empty item; separate counts with single commas")
    if len(items) > max_items:
        raise UnitError(f"{what} lists more than {max_items:,} values")
    return sorted({parse_int_count(x, what) for x in items})


def _comma_message(t: str, what: str, one: bool) -> str:
    """Why a comma is refused, with the readings it allows spelled out."""
    number = t.replace(",", "")
    items = [x.strip() for x in t.split(",")]
    grouped = bool(_GROUPED.fullmatch(t))
    if one and not grouped:
        return f"{what} takes one count, not the list {_clip(t)!r}"
    fix = f"write {number} or use a suffix (1k = 1,000, 16Ki = 16,384); thousands separators are not read"
    if one or any(x.startswith("0") for x in items[1:]):
        return f"{what} {t!r} has a thousands separator: for {int(number):,} {fix}"
    listed = ", ".join(items)
    return (f"{what} {t!r} is ambiguous: the count {int(number):,} with thousands separators, or the list "
            f"{listed}? For the count {fix}; for the list put a space after each comma ('{listed}') or give "
            f"a range ({items[0]}..{items[-1]})")


def parse_seq_len(text: str, what: str = "sequence length") -> int:
    """Parse a sequence length in tokens: ``8192``, ``128k`` / ``128K`` / ``128Ki`` = 131,072.

    Context lengths are powers of two and model cards write 131,072 as "128K" (Llama 3.1's
    ``max_position_embeddings``), so k/K/Ki are 1024 here and M/Mi are 1024^2; a decimal count is
    given as a plain integer.
    """
    t = _text(text, what)
    if "," in t:
        raise UnitError(_comma_message(t, what, one=True))
    m = re.fullmatch(r"\s*([0-9]+)\s*(?:(k|K|Ki)|(M|Mi))?\s*", t)
    if not m:
        raise UnitError(f"cannot read {what} {text!r}: expected tokens as an integer or with k/K "
                        "(x 1024) or M (x 1024^2), e.g. 8192, 32k, 128K, 1M")
    scale = 1024 if m.group(2) else 1024**2 if m.group(3) else 1
    return int(m.group(1)) * scale


# --- formatting ------------------------------------------------------------------------------


def fmt_bytes(n: float, binary: bool = True, digits: int = 1) -> str:
    """Human size with an unambiguous unit: ``fmt_bytes(2**30) == '1.0 GiB'``; decimal: ``GB``."""
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(float(n))
    base, units = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]) if binary else (
        1000.0,
        ["B", "KB", "MB", "GB", "TB", "PB"],
    )
    i = 0
    while n >= base and i < len(units) - 1:
        n /= base
        i += 1
    if i == 0:
        return f"{sign}{n:.0f} B"
    return f"{sign}{n:.{digits}f} {units[i]}"


def fmt_time(t: float, digits: int = 1) -> str:
    """Human duration: ns, us, ms, s, min, h, d."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "n/a"
    if math.isinf(t):
        return "inf"
    a = abs(t)
    for limit, scale, unit in (
        (1e-6, 1e9, "ns"),
        (1e-3, 1e6, "us"),
        (1.0, 1e3, "ms"),
        (120.0, 1.0, "s"),
        (7200.0, 1 / 60, "min"),
        (2 * DAY, 1 / HOUR, "h"),
    ):
        if a < limit:
            return f"{t * scale:.{digits}f} {unit}"
    return f"{t / DAY:.{digits}f} d"


def fmt_rate(bytes_per_s: float, digits: int = 1) -> str:
    """Human byte rate in decimal units (GB/s = 1e9 B/s), as vendors and nccl-tests quote them."""
    if bytes_per_s is None:
        return "n/a"
    a = abs(bytes_per_s)
    for limit, scale, unit in ((1e6, 1e-3, "KB/s"), (1e9, 1e-6, "MB/s"), (1e12, 1e-9, "GB/s")):
        if a < limit:
            return f"{bytes_per_s * scale:.{digits}f} {unit}"
    return f"{bytes_per_s / 1e12:.{digits + 1}f} TB/s"


def fmt_power(watts: float, digits: int = 1) -> str:
    """Human power: W, kW, MW."""
    if watts is None:
        return "n/a"
    a = abs(watts)
    if a < 1e3:
        return f"{watts:.0f} W"
    if a < 1e6:
        return f"{watts / 1e3:.{digits}f} kW"
    return f"{watts / 1e6:.{digits + 1}f} MW"


def fmt_count(n: float, digits: int = 2) -> str:
    """Human count with decimal suffix: 1.23 B, 15.0 T."""
    if n is None:
        return "n/a"
    a = abs(n)
    for limit, scale, unit in ((1e3, 1, ""), (1e6, 1e-3, "K"), (1e9, 1e-6, "M"), (1e12, 1e-9, "B")):
        if a < limit:
            return f"{n * scale:.{digits}f}{unit}" if unit else f"{n:.0f}"
    return f"{n / 1e12:.{digits}f}T"


def fmt_pct(x: float, digits: int = 1) -> str:
    """Fraction as a percentage string: 0.123 -> '12.3%'."""
    if x is None:
        return "n/a"
    return f"{100.0 * x:.{digits}f}%"
