"""Result models of ``mi400plan profiles list | show | validate`` (the JSON contract under ``data``).

Every result carries ``action`` so a reader of the envelope (``command = "profiles"``) knows which
of the three shapes it holds. Values in ``show`` rows are in the unit named by the TOML key
(``unit``), exactly as written in the profile; nothing is converted.
"""

from typing import Literal

from pydantic import Field

from mi400plan.factories import new_list, new_dict
from mi400plan.results.common import OutModel, Result


class StatusCounts(OutModel):
    """How many numbers a profile states with each status (only values written in the file)."""

    disclosed: int = 0
    derived: int = 0
    estimate: int = 0
    conflict: int = 0
    unverified: int = 0
    measured: int = 0
    assumed: int = 0
    not_disclosed: int = 0

    def summary(self) -> str:
        """Compact text such as ``12 D, 2 X, 1 C, 3 n/d`` (zero counts left out)."""
        short = {
            "disclosed": "D",
            "derived": "X",
            "estimate": "E",
            "conflict": "C",
            "unverified": "U",
            "measured": "M",
            "assumed": "A",
            "not_disclosed": "n/d",
        }
        parts = [f"{getattr(self, k)} {v}" for k, v in short.items() if getattr(self, k)]
        return ", ".join(parts) or "-"


class ProfileRow(OutModel):
    """One profile in ``profiles list``. ``error`` is set (and other fields may be empty) when the
    file does not validate."""

    name: str
    kind: str
    display_name: str | None = None
    aliases: list[str] = Field(default_factory=new_list)
    roadmap: str | None = None  # set for roadmap entries (announced, not shipping)
    origin: str  # "bundled" | "user"
    path: str
    status: StatusCounts = Field(default_factory=StatusCounts)
    sources: list[str] = Field(default_factory=new_list)  # keys defined in [sources]
    notes: list[str] = Field(default_factory=new_list)
    error: str | None = None
    # The one-line summary ``profiles list`` prints (None = not disclosed, or not this kind's).
    vendor: str | None = None  # accelerators
    year: int | None = None  # accelerators: first shipping (or announced) year
    hbm_bytes: float | None = Field(default=None, description="accelerators: usable HBM per GPU, bytes")
    bf16_dense_flops: float | None = Field(default=None, description="accelerators: dense BF16 peak, FLOP/s")
    fp8_dense_flops: float | None = Field(default=None, description="accelerators: dense FP8 peak, FLOP/s")
    fp4_dense_flops: float | None = Field(default=None, description="accelerators: dense FP4 peak, FLOP/s")
    tdp_w: float | None = Field(default=None, description="accelerators: board power, W")
    params_total: int | None = Field(default=None, description="models: parameters, counted from the architecture")
    params_active: int | None = Field(default=None, description="models: parameters active per token (MoE)")
    num_layers: int | None = None  # models
    max_seq_len: int | None = Field(default=None, description="models: longest context, tokens")


class SpecSheetRow(OutModel):
    """One accelerator in ``profiles list --specs``: the figures users compare, in base units.

    ``hbm_bytes`` is the usable capacity every computation uses (``hbm_basis``: ``usable`` =
    driver-reported or vendor usable figure, ``stated`` = the vendor's capacity in its real unit).
    Peak rates are dense FLOP/s; ``scale_up_bw_bytes_per_s`` is per GPU per direction. None = not
    disclosed; a field's name in ``uncertain`` means it is an estimate, a conflict or a range.
    """

    name: str
    display_name: str | None = None
    hbm_bytes: float | None = None
    hbm_basis: str | None = None
    hbm_bw_bytes_per_s: float | None = None
    bf16_dense_flops: float | None = None
    fp8_dense_flops: float | None = None
    fp4_dense_flops: float | None = None
    tdp_w: float | None = None
    scale_up_fabric: str | None = None
    scale_up_domain: int | None = None
    scale_up_bw_bytes_per_s: float | None = None
    uncertain: list[str] = Field(default_factory=new_list)
    error: str | None = None


class ProfilesList(Result):
    command = "profiles"
    action: Literal["list"] = "list"
    kind: str | None = None  # the --kind filter, if any
    rows: list[ProfileRow] = Field(default_factory=new_list)
    specs: list[SpecSheetRow] | None = None  # --specs: the accelerator spec sheet instead of rows


class FieldRow(OutModel):
    """One field of a profile in ``profiles show``.

    Numbers (``value``, ``low``, ``high``) are in ``unit``: a capacity's own ``unit`` (``hbm_capacity =
    { nominal = 80, unit = "GiB" }``), else read from the key's suffix (``_gb`` -> GB = 1e9 B,
    ``_gib`` -> GiB = 2**30 B, ``_tflops`` -> TFLOP/s, ...). ``status`` and
    ``sources`` are set for sourced numbers; text fields use ``text`` instead of ``value``.
    """

    field: str  # dotted path, e.g. "memory.hbm_capacity"
    value: float | None = None
    text: str | None = None
    unit: str | None = None
    low: float | None = None
    high: float | None = None
    status: str | None = None
    sources: list[str] = Field(default_factory=new_list)
    note: str | None = None


class SourceRow(OutModel):
    """One ``[sources]`` entry: title, publication date (``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``;
    None when the profile gives none) and URL."""

    title: str
    date: str | None = None
    url: str | None = None


class ProfileShow(Result):
    command = "profiles"
    action: Literal["show"] = "show"
    kind: str
    name: str
    display_name: str | None = None
    aliases: list[str] = Field(default_factory=new_list)
    description: str | None = None
    roadmap: str | None = None  # set for roadmap entries (announced, not shipping)
    origin: str
    path: str
    status: StatusCounts = Field(default_factory=StatusCounts)
    sources: dict[str, SourceRow] = Field(default_factory=new_dict)  # key -> dated citation
    notes: list[str] = Field(default_factory=new_list)
    rows: list[FieldRow] = Field(default_factory=new_list)


class ValidationIssue(OutModel):
    """One problem in one file: where it is and what is wrong."""

    path: str
    line: int | None = None
    field: str | None = None
    message: str  # full message, starting with "path:line [field]:"


class ValidateRow(OutModel):
    kind: str | None = None
    name: str | None = None
    path: str
    origin: str  # "bundled" | "user" | "file"
    ok: bool
    issues: list[ValidationIssue] = Field(default_factory=new_list)


class ProfilesValidate(Result):
    """``failed > 0`` makes the command exit 3 and the envelope's ``status`` "error", with one
    ``errors`` item per problem; ``data`` still lists every file checked."""

    command = "profiles"
    action: Literal["validate"] = "validate"
    checked: int = 0
    failed: int = 0
    rows: list[ValidateRow] = Field(default_factory=new_list)

    def check_failed(self) -> bool:
        return self.failed > 0

    def request_errors(self) -> list[tuple[str, str]]:
        return [("bad_profile", issue.message) for row in self.rows for issue in row.issues]
