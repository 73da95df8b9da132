"""Text rules of a profile: its description agrees with its fields, and no value cites an internal note.

Both are run by ``consistency_errors()`` (so by ``profiles validate``, which fails on them).

Description rule. Every number written directly before a unit in ``description`` is a claim about
the part, so it must equal a value of one of the profile's own fields of the same kind, within
the rounding of the digits written ("7.7 TB/s" matches 7.65-7.75 TB/s; "8.0 TB/s" does not match
7.7). The kinds and the field names they are checked against (the field's unit is its suffix):

===========  =======================================  ==============================================
kind         units in the description                 fields
===========  =======================================  ==============================================
bandwidth    GB/s, GBps, TB/s, TBps, Gb/s, Gbps,      ``*_gb_per_s``, ``*_tb_per_s``,
             Gbit/s, Tb/s, Tbps, Tbit/s               ``*_gbit_per_s``, ``*_tbit_per_s*``
capacity     MB, GB, GiB, TB, TiB                     ``hbm_capacity``, ``hbm_usable``
power        W, kW, MW                                ``*_w``
compute      TFLOPS, TFLOP/s, TF, PFLOPS, PFLOP/s,    ``*_tflops``, ``*_pflops``, ``*_tops``
             PF, EFLOPS, EF, TOPS, POPS
===========  =======================================  ==============================================

Any of a field's nominal, low or high counts. Capacities compare the number as written: vendors'
"GB" of HBM are binary-sized, so "288 GB" matches a field of 288 GiB (the field's ``stated`` text
says the same). A number with a unit that matches no field of its kind fails too: a description
that quotes another profile's figure (a fabric's bandwidth in an accelerator's description) names
that profile instead. Numbers without one of these units (counts, years, "8 per board") are not
checked.

Internal-note rule. A ``[sources]`` entry is an internal note when it says ``internal = true`` or
its title names the project's own spec notes (``SPECS*.md``, "spec audit", "spec catalog").
Such an entry may stay in ``[sources]`` as background, but no value may cite it: a value cites
the vendor or press document that was read, or says it is unverified.
"""

import math
import re
from typing import TYPE_CHECKING

from mi400plan.specs.common import Estimate, iter_estimates

if TYPE_CHECKING:
    from mi400plan.specs.common import ProfileBase, Source

# unit as written -> (kind, factor to the kind's base unit: GB/s, GB, W, TFLOP/s)
_UNITS: dict[str, tuple[str, float]] = {
    "GB/s": ("bandwidth", 1.0),
    "GBps": ("bandwidth", 1.0),
    "TB/s": ("bandwidth", 1000.0),
    "TBps": ("bandwidth", 1000.0),
    "Gb/s": ("bandwidth", 1 / 8),
    "Gbps": ("bandwidth", 1 / 8),
    "Gbit/s": ("bandwidth", 1 / 8),
    "Tb/s": ("bandwidth", 125.0),
    "Tbps": ("bandwidth", 125.0),
    "Tbit/s": ("bandwidth", 125.0),
    "MB": ("capacity", 1e-3),
    "GB": ("capacity", 1.0),
    "GiB": ("capacity", 1.0),
    "TB": ("capacity", 1000.0),
    "TiB": ("capacity", 1024.0),
    "W": ("power", 1.0),
    "kW": ("power", 1000.0),
    "MW": ("power", 1e6),
    "TFLOPS": ("compute", 1.0),
    "TFLOP/s": ("compute", 1.0),
    "TF": ("compute", 1.0),
    "TOPS": ("compute", 1.0),
    "PFLOPS": ("compute", 1000.0),
    "PFLOP/s": ("compute", 1000.0),
    "PF": ("compute", 1000.0),
    "POPS": ("compute", 1000.0),
    "EFLOPS": ("compute", 1e6),
    "EF": ("compute", 1e6),
}

# field-name suffix -> (kind, factor to the kind's base unit); the first match wins
_FIELD_UNITS: tuple[tuple[str, str, float], ...] = (
    (r"_gb_per_s$", "bandwidth", 1.0),
    (r"_tb_per_s$", "bandwidth", 1000.0),
    (r"_gbit_per_s$", "bandwidth", 1 / 8),
    (r"_tbit_per_s(_per_dir)?$", "bandwidth", 125.0),
    (r"(^|\.)hbm_(capacity|usable)(_gib?)?$", "capacity", 1.0),
    (r"_w$", "power", 1.0),
    (r"_tflops$", "compute", 1.0),
    (r"_tops$", "compute", 1.0),
    (r"_pflops$", "compute", 1000.0),
)

# A number (thousands commas allowed) written directly before a unit; the unit must end the word.
_NUMBER_UNIT = re.compile(
    r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?("
    + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    + r")(?![\w/])"
)

_INTERNAL_TITLE = re.compile(r"SPECS[\w.-]*\.md|\bspec (audit|catalog)\b", re.IGNORECASE)


def is_internal_note(source: "Source") -> bool:
    """True for a ``[sources]`` entry that is the project's own note, not a document that was read."""
    return bool(source.internal or _INTERNAL_TITLE.search(source.title))


def _field_kind(path: str, est: Estimate) -> tuple[str, float] | None:
    for pattern, kind, factor in _FIELD_UNITS:
        if re.search(pattern, path):
            return kind, factor
    return None


def _field_values(spec: "ProfileBase") -> dict[str, list[float]]:
    """Every known nominal/low/high of the spec's fields, in the base unit of their kind."""
    out: dict[str, list[float]] = {}
    for path, est in iter_estimates(spec):
        kind = _field_kind(path, est)
        if kind is None or not est.known:
            continue
        for x in (est.nominal, est.low, est.high):
            if x is not None:
                out.setdefault(kind[0], []).append(x * kind[1])
    return out


def description_errors(spec: "ProfileBase") -> list[str]:
    """Numbers with units in the description that no field of the same kind carries (rule above)."""
    text = spec.description or ""
    values = _field_values(spec)
    errs: list[str] = []
    for m in _NUMBER_UNIT.finditer(text):
        whole, frac, unit = m.group(1), m.group(2) or "", m.group(3)
        kind, factor = _UNITS[unit]
        written = float(whole.replace(",", "") + frac)
        # half a unit in the last digit written, in the description's unit
        tol = 0.5 * 10.0 ** -(len(frac) - 1 if frac else 0)
        fits = any(
            math.isclose(v / factor, written, rel_tol=1e-9) or abs(v / factor - written) <= tol + 1e-9 * written
            for v in values.get(kind, [])
        )
        if not fits:
            have = ", ".join(f"{v / factor:g}" for v in values.get(kind, [])) or f"no {kind} field"
            errs.append(
                f"description: '{m.group(0)}' matches no {kind} value of this profile in {unit} ({have}); "
                "state the fields' value, or name the profile that carries the figure"
            )
    return errs


def internal_citation_errors(spec: "ProfileBase") -> list[str]:
    """Values that cite a ``[sources]`` entry which is an internal note (rule above)."""
    internal = {k for k, src in spec.sources.items() if is_internal_note(src)}
    return [
        f"{path}: cites [sources] {key}, an internal note ({spec.sources[key].title[:60]!r}...); "
        "cite the document that was read, or mark the value unverified"
        for path, est in iter_estimates(spec)
        for key in est.source
        if key in internal
    ]


def provenance_errors(spec: "ProfileBase") -> list[str]:
    """Both text rules of this module."""
    return description_errors(spec) + internal_citation_errors(spec)
