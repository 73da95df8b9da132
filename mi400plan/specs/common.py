"""Shared pieces of the input specs: the strict base model and ``Estimate``.

``Estimate`` is how a profile states any number: a nominal value, an optional low/high range, a
status saying where it comes from, and the source keys that back it. A plain number in TOML is a
disclosed exact value; ``"n/d"`` (or ``{status = "not_disclosed"}``) is a value nobody has
published, and any computation that needs it raises ``MissingValueError`` instead of guessing.

Status vocabulary (the codes of shared/SPECS.md are accepted as aliases):

=================  ====  ===========================================================
status             code  meaning
=================  ====  ===========================================================
disclosed          D     vendor document (``D†``: vendor figure quoted by press)
derived            X     arithmetic on disclosed figures (the formula is in ``note``)
estimate           E     analyst or author estimate
conflict           C     sources disagree; ``low``/``high`` span them
unverified         U     one weak source
measured                 measured by a published run or by the user
assumed                  a planner default (documented), not a hardware figure
not_disclosed      n/d   nobody has published it
=================  ====  ===========================================================
"""

import datetime
import math
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, model_validator

from mi400plan.factories import new_list, new_dict
from mi400plan.errors import MissingValueError

Status = Literal[
    "disclosed", "derived", "estimate", "conflict", "unverified", "measured", "assumed", "not_disclosed"
]

STATUS_ALIASES: dict[str, str] = {
    "d": "disclosed",
    "d†": "disclosed",
    "d+": "disclosed",
    "x": "derived",
    "e": "estimate",
    "c": "conflict",
    "u": "unverified",
    "n/d": "not_disclosed",
    "nd": "not_disclosed",
}

# Statuses whose value is not a firm vendor or derived figure: results flag conclusions resting on them.
UNCERTAIN_STATUSES = frozenset({"estimate", "conflict", "unverified", "assumed"})


class StrictModel(BaseModel):
    """Frozen, no unknown keys: a typo in a profile is an error, not a silently ignored key."""

    # defer_build: a model's validator is built on first use, so a command pays only for the specs it reads.
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, defer_build=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        """TOML ``true`` is not the number 1: a boolean in a numeric field is an error naming the field."""
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, bool) and isinstance(key, str) and not _admits_bool(cls, key):
                    raise ValueError(f"{key} must be a number, got the boolean {str(value).lower()}")
        return data


def _admits_bool(cls: type[BaseModel], key: str) -> bool:
    """Whether field ``key`` of ``cls`` is typed to hold a bool (unknown keys are left to extra=forbid)."""
    info = cls.model_fields.get(key)
    if info is None:
        info = next((f for f in cls.model_fields.values() if f.alias == key), None)
    return info is None or _has_bool(info.annotation)


def _has_bool(annotation: Any) -> bool:
    from typing import get_args

    return annotation is bool or annotation is Any or any(_has_bool(a) for a in get_args(annotation))


def _norm_status(v: Any) -> Any:
    if isinstance(v, str):
        return STATUS_ALIASES.get(v.strip().lower(), v.strip().lower())
    return v


CITED_STATUSES = ("disclosed", "derived", "measured")  # statuses that claim a source


def require_source(status: str, source: list[str], what: str) -> None:
    """``ValueError`` when a setting whose ``status`` claims a source cites none (``what`` names it)."""
    if status in CITED_STATUSES and not source:
        raise ValueError(f"{what} needs 'source' (keys of [sources]); without one write status = \"unverified\"")


class Estimate(StrictModel):
    """A number with its range, status and sources. Units are those of the field holding it."""

    nominal: float | None = None
    low: float | None = None
    high: float | None = None
    status: Status = "disclosed"
    source: list[str] = Field(default_factory=new_list)
    note: str | None = None
    # Peak rates only: the math the figure assumes. Checked against the key (specs/accelerator.py).
    basis: Literal["dense", "sparse", "compressed"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if not data:  # `x = { }`: a value left out by mistake, not a statement that it is undisclosed
                raise ValueError('an empty table; give a number, a table with "nominal", or "n/d"')
            data = dict(data)
            for key in ("nominal", "low", "high"):
                value = data.get(key)
                if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                    raise ValueError(f"{key} must be a number, got {type(value).__name__} {_short(value)}")
            if "status" in data:
                data["status"] = _norm_status(data["status"])
            if isinstance(data.get("source"), str):
                data["source"] = [data["source"]]
            if data.get("nominal") is None and data.get("status") not in (None, "not_disclosed"):
                lo, hi = data.get("low"), data.get("high")
                if lo is not None and hi is not None:
                    # A bare range: the midpoint is the nominal value, and we say so.
                    data["nominal"] = (float(lo) + float(hi)) / 2.0
                    data.setdefault("note", "nominal is the midpoint of the range")
            if data.get("nominal") is None and "status" not in data:
                data["status"] = "not_disclosed"
        return data

    @model_validator(mode="after")
    def _check(self) -> "Estimate":
        if self.status == "not_disclosed":
            if self.nominal is not None:
                raise ValueError("a not_disclosed value cannot have a nominal value")
            return self
        if self.nominal is None:
            raise ValueError("a value needs 'nominal' unless its status is 'not_disclosed'")
        for x in (self.nominal, self.low, self.high):
            if x is not None and not math.isfinite(x):
                raise ValueError("values must be finite numbers")
        lo = self.low if self.low is not None else self.nominal
        hi = self.high if self.high is not None else self.nominal
        if not lo <= self.nominal <= hi:
            raise ValueError(f"need low <= nominal <= high, got {lo} <= {self.nominal} <= {hi}")
        return self

    # --- construction ---------------------------------------------------------------------
    @classmethod
    def exact(cls, value: float, status: Status = "disclosed", source: list[str] | None = None) -> "Estimate":
        return cls(nominal=float(value), status=status, source=source or [])

    @classmethod
    def not_disclosed(cls, source: list[str] | None = None) -> "Estimate":
        return cls(status="not_disclosed", source=source or [])

    # --- reading --------------------------------------------------------------------------
    @property
    def known(self) -> bool:
        return self.nominal is not None

    @property
    def lo(self) -> float | None:
        return self.low if self.low is not None else self.nominal

    @property
    def hi(self) -> float | None:
        return self.high if self.high is not None else self.nominal

    @property
    def is_range(self) -> bool:
        return self.known and (self.lo != self.hi)

    @property
    def uncertain(self) -> bool:
        return self.status in UNCERTAIN_STATUSES or self.is_range

    def require(self, what: str) -> float:
        """The nominal value, or ``MissingValueError`` naming ``what`` if it is not disclosed."""
        if self.nominal is None:
            src = f" (sources: {', '.join(self.source)})" if self.source else ""
            raise MissingValueError(
                f"{what} is not disclosed{src}; the planner will not invent it",
                hint="give the value in a user profile (--profiles DIR) or on the command line",
            )
        return self.nominal

    def triple(self, what: str) -> tuple[float, float, float]:
        """(low, nominal, high), each falling back to nominal."""
        nom = self.require(what)
        return (self.lo if self.lo is not None else nom, nom, self.hi if self.hi is not None else nom)

    def scaled(self, factor: float) -> "Estimate":
        """The same estimate in other units (e.g. GB -> bytes). Ranges scale with it."""
        if self.nominal is None:
            return self
        return self.model_copy(
            update={
                "nominal": self.nominal * factor,
                "low": None if self.low is None else self.low * factor,
                "high": None if self.high is None else self.high * factor,
            }
        )


def _coerce_estimate(v: Any) -> Any:
    if isinstance(v, bool):
        raise ValueError("expected a number or an estimate table, got a boolean")
    if isinstance(v, (int, float)):
        return {"nominal": float(v), "status": "disclosed"}
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("n/d", "nd", "not_disclosed", "not disclosed"):
            return {"status": "not_disclosed"}
        raise ValueError(f"expected a number, an estimate table or 'n/d', got {v!r}")
    return v


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# A number no hardware, model or price figure reaches: past it a value is a typo or an attack.
PLAUSIBLE_MAX = 1e12


def _domain_check(lo: float, hi: float, lo_open: bool) -> Any:
    def check(est: Estimate, info: ValidationInfo) -> Estimate:
        for x in (est.nominal, est.low, est.high):
            if x is None:
                continue
            if (x <= lo if lo_open else x < lo) or x > hi:
                name = info.field_name or "value"
                raise ValueError(f"{name} must be in {domain_text(lo, hi, lo_open)}")
        return est

    return check


def domain_text(lo: float, hi: float, lo_open: bool) -> str:
    """``(0, 1e+12]``: the interval a profile number must lie in, as the README lists it."""
    return f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"


def est_in(lo: float = 0.0, hi: float = PLAUSIBLE_MAX, lo_open: bool = True) -> Any:
    """Field type of a profile number whose nominal, low and high lie in ``lo..hi`` (finite always)."""
    return Annotated[Estimate, BeforeValidator(_coerce_estimate), AfterValidator(_domain_check(lo, hi, lo_open))]


Est = est_in()
"""Field type for a number in a profile: plain number, estimate table, or "n/d"; positive, finite,
at most PLAUSIBLE_MAX (the default domain of a profile number)."""
Fraction = est_in(0.0, 1.0, lo_open=False)
"""A fraction in [0, 1] (liquid fraction, cost of capital)."""
PosFraction = est_in(0.0, 1.0)
"""A fraction in (0, 1] that multiplies a rate (efficiencies, power factor, GPU load)."""
NonNeg = est_in(0.0, PLAUSIBLE_MAX, lo_open=False)
"""A quantity that may be zero (a price, an overhead, an intensity)."""
Latency = est_in(0.0, 1e6, lo_open=False)
"""A per-step or per-kernel latency in microseconds, [0, 1e6] (one second)."""

# Plausible bounds of the physical figures the planner divides by or multiplies into a price: past
# them a value is a typo or an attack, and a tiny positive one (5e-324) would overflow a quotient.
Tflops = est_in(1e-3, 1e7, lo_open=False)
"""A peak rate in TFLOP/s (or TOPS) per package, [0.001, 1e7]: 1 GFLOP/s to 10 EFLOP/s."""
TBps = est_in(1e-3, 1e3, lo_open=False)
"""A memory bandwidth in TB/s per package, [0.001, 1000]."""
GBytes = est_in(1e-3, 1e6, lo_open=False)
"""A memory capacity in GB (or GiB) per package, [0.001, 1e6]."""
Watts = est_in(1.0, 1e5, lo_open=False)
"""A power per package in W, [1, 1e5]."""
GBps = est_in(1e-3, 1e6, lo_open=False)
"""A link bandwidth in GB/s, [0.001, 1e6]."""
Years = est_in(0.1, 100.0, lo_open=False)
"""A service or depreciation life in years, [0.1, 100]."""

# Built without running the validator (a known-valid constant): building the Estimate validator at
# import would cost every command about 5 ms, and most read their profiles from the cache unvalidated.
ND = Estimate.model_construct(status="not_disclosed")


def iter_estimates(model: BaseModel, prefix: str = "") -> list[tuple[str, Estimate]]:
    """All ``Estimate`` values inside a spec, with dotted field paths (for listings and checks)."""
    out: list[tuple[str, Estimate]] = []
    for name in type(model).model_fields:
        value = getattr(model, name)
        path = f"{prefix}{name}"
        if isinstance(value, Estimate):
            out.append((path, value))
        elif isinstance(value, BaseModel):
            out.extend(iter_estimates(value, path + "."))
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    out.extend(iter_estimates(item, f"{path}[{i}]."))
        elif isinstance(value, dict):
            for k, item in value.items():
                if isinstance(item, Estimate):
                    out.append((f"{path}.{k}", item))
                elif isinstance(item, BaseModel):
                    out.extend(iter_estimates(item, f"{path}.{k}."))
    return out


NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"

_DATE_PATTERN = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


class Source(StrictModel):
    """One ``[sources]`` entry: what the document is, when it was published, where to find it.

    ``date`` is the publication date as ``YYYY-MM-DD``, ``YYYY-MM`` when only the month is known,
    or ``YYYY`` when only the year is. In TOML: ``A9 = { title = "...", date = "2025-10-14",
    url = "..." }``. A bare string is read as an undated title: it loads, and ``profiles validate``
    and ``profiles show`` warn about it (every bundled source is dated; a test checks).
    """

    title: str = Field(min_length=1)
    date: str | None = None
    url: str | None = None
    # The project's own note (a spec audit, a working summary), not a document that was read:
    # it may be listed for background, but no value may cite it (specs/provenance.py).
    internal: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"title": data}
        return data

    @model_validator(mode="after")
    def _check_date(self) -> "Source":
        if self.date is None:
            return self
        m = _DATE_PATTERN.match(self.date)
        if m is None:
            raise ValueError(f"date {self.date!r} must be YYYY-MM-DD, YYYY-MM or YYYY")
        year, month, day = int(m.group(1)), int(m.group(2) or 1), int(m.group(3) or 1)
        try:
            datetime.date(year, month, day)
        except ValueError as exc:
            raise ValueError(f"date {self.date!r} is not a calendar date ({exc})") from None
        return self

    def cite(self) -> str:
        """One-line citation: ``title (date)``, ``(undated)`` when no date is given."""
        return f"{self.title} ({self.date or 'undated'})" + (f" <{self.url}>" if self.url else "")


class ProfileBase(StrictModel):
    """Fields every profile kind has. ``sources`` maps a key (``A2``, ``S004``) to a citation."""

    name: str = Field(pattern=NAME_PATTERN)
    aliases: list[str] = Field(default_factory=new_list)
    display_name: str
    description: str | None = None
    sources: dict[str, Source] = Field(default_factory=new_dict)
    notes: list[str] = Field(default_factory=new_list)
    # A roadmap entry: announced, not shipping. The text says what was announced, by whom and for
    # when ("NVIDIA roadmap (GTC 2025): H2 2027"); every output that names the profile shows it.
    roadmap: str | None = Field(default=None, min_length=1)

    def consistency_errors(self) -> list[str]:
        """Rules every profile kind follows (run by ``profiles validate``): numbers in the description
        agree with the fields, and no value cites an internal note (specs/provenance.py)."""
        from mi400plan.specs.provenance import provenance_errors

        return provenance_errors(self)

    def undated_sources(self) -> list[str]:
        """Keys of ``[sources]`` entries without a publication date (warned about, not rejected)."""
        return [k for k, src in self.sources.items() if src.date is None]

    def require_source_keys(self, used: list[tuple[str, str]]) -> None:
        """``ValueError`` naming each (where, key) of ``used`` whose key ``[sources]`` does not define."""
        missing = sorted({f"{k} (in {where})" for where, k in used if k not in self.sources})
        if missing:
            raise ValueError("source keys used but not defined in [sources]: " + ", ".join(missing))

    def undated_release_errors(self, release_source: list[str]) -> list[str]:
        """One error for each source dating a release that carries no date (a release is dated by it)."""
        return [f"release_source: [sources] {key} has no date; a release is dated by its source"
                for key in release_source if self.sources[key].date is None]

    @model_validator(mode="after")
    def _sources_resolve(self) -> "ProfileBase":
        for alias in self.aliases:
            if not re.match(NAME_PATTERN, alias):
                raise ValueError(f"alias {alias!r} must be lowercase letters, digits, '.', '_' or '-'")
        missing = sorted(
            {
                f"{key} (in {path})"
                for path, est in iter_estimates(self)
                for key in est.source
                if key not in self.sources
            }
        )
        if missing:
            raise ValueError(
                "source keys used but not defined in [sources]: " + ", ".join(missing)
            )
        return self
