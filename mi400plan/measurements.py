"""Reading a user's own measurements for ``mi400plan calibrate``: training runs and nccl-tests logs.

Training runs come as TOML (an array of ``[[run]]`` tables; keys outside any table are defaults for
every run) or CSV (one run per row, a header with the same keys). Keys (``MeasuredRun``): ``model``
(catalog name, model TOML or Hugging Face ``config.json`` path, relative to the runs file), ``sku``,
``precision`` (bf16/fp8), ``seq_len``, ``global_batch`` (sequences per optimizer step), the layout
``tp pp cp ep etp dp vpp micro_batch zero recompute sequence_parallel``, optional ``gpus`` (checked
against ``tp x pp x cp x dp``), and exactly one measurement: ``step_time_s`` or ``tflops_per_gpu``
(model FLOPs, as in MFU, unless ``tflops_basis = "hardware"``: recomputation counted too).

nccl-tests logs are the text that ``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
``alltoall_perf``, ``broadcast_perf``, ``reduce_perf`` or ``sendrecv_perf`` print
(NVIDIA/nccl-tests, ``src/common.cu``; RCCL's rccl-tests print the same): ``#  Rank N Group G Pid
P on HOST device D ...`` lines name every rank and its host, a ``# size count type redop root time
algbw busbw #wrong ...`` header names the columns, and each data line gives the out-of-place time
(microseconds) first. The collective comes from the ``Collective test starting: <op>_perf`` line
or, failing that, the file name. Only the out-of-place columns are read.

Every error names the file, the line and the field (``ProfileError``, exit 3).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from mi400plan.errors import ProfileError
from mi400plan.pipeline import MAX_OFFLOAD_LAYERS

if TYPE_CHECKING:
    from mi400plan.stacks import StackRequest
from mi400plan.specs.common import StrictModel


if TYPE_CHECKING:
    from mi400plan.specs.layout import TrainOptions


class MeasuredRun(StrictModel):
    """One measured training run on the user's cluster."""

    name: str | None = None
    model: str = Field(min_length=1)
    sku: str = Field(min_length=1)
    precision: Literal["bf16", "fp8", "mxfp8", "nvfp4", "mxfp4"] = "bf16"
    # What ``validate`` groups by: the software stack that ran it, and its source (a publication or a
    # campaign; leave-one-source-out holds each out in turn; default: the file). A ``stack`` that names a
    # ``profiles/stacks`` profile (name or alias) also prices the run on it (``mi400plan.stacks``);
    # another text is a label only, and the run is priced on calibrate's --stack, else the vendor default.
    stack: str | None = Field(default=None, min_length=1, max_length=200)
    source: str | None = Field(default=None, min_length=1, max_length=500)
    seq_len: int = Field(ge=1, le=2**24)
    global_batch: int = Field(ge=1, le=2**30)  # sequences per optimizer step
    gpus: int | None = Field(default=None, ge=1, le=2**24)
    tp: int = Field(default=1, ge=1, le=2**24)
    pp: int = Field(default=1, ge=1, le=2**24)
    cp: int = Field(default=1, ge=1, le=2**24)
    ep: int = Field(default=1, ge=1, le=2**24)
    etp: int = Field(default=1, ge=1, le=2**24)
    dp: int = Field(default=1, ge=1, le=2**24)
    vpp: int = Field(default=1, ge=1, le=2**24)
    micro_batch: int = Field(default=1, ge=1, le=2**24)
    zero: int = Field(default=1, ge=0, le=3)
    recompute: Literal["none", "selective", "full"] = "none"
    sequence_parallel: bool = True
    grad_dtype: Literal["fp32", "bf16", "fp16"] | None = None
    flash_attention: bool = True
    overlap_tp: bool = False
    overlap_ep: bool = False
    overlap_dp: bool = True
    overlap_pp: bool = True
    overlap_cp: bool = True
    split_embedding_loss: bool = False
    uneven_pp: bool = True  # uneven first/last stages where the layers need them, as fit and sweep
    pp_schedule: Literal["1f1b", "dualpipe"] = "1f1b"  # as fit's and sweep's --pp-schedule (``mi400plan.dualpipe``)
    # activation offloading (Megatron-Core --cpu-offloading-num-layers), as sweep's --offload-layers
    offload_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)
    # The recipe switches of fit and sweep (``specs.layout.TrainOptions``): memory preset, FP8
    # parameters, what selective recomputation covers ("mla_up_proj+moe_act" in a CSV cell), MoE
    # routed-buffer allowance, the fused cross entropy's 16-bit logits.
    recipe: Literal["megatron", "zero", "fsdp"] = "megatron"
    # LoRA fine-tuning (``mi400plan.finetune``), as fit's and sweep's --finetune / --lora-rank / --lora-targets
    # ("qkv+proj" in a CSV cell); a rank or targets without finetune = "lora" is refused when the run is priced.
    finetune: Literal["none", "lora"] = "none"
    lora_rank: int | None = Field(default=None, ge=1, le=2**20)
    lora_targets: tuple[str, ...] | None = None
    # Packed sequences (``mi400plan.packing``), as fit's and sweep's --doc-length / --pack-efficiency: the
    # document lengths packed into each row ("512", "uniform:A-B", or a length,count CSV; a relative path is
    # read from the runs file's folder) and the share of each row they fill (empty: the packer's).
    doc_length: str | None = None
    pack_efficiency: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    fp8_params: bool = False
    fused_cross_entropy: bool = False
    recompute_modules: tuple[str, ...] | None = None
    recompute_layers: int = Field(default=0, ge=0, le=MAX_OFFLOAD_LAYERS)  # with recompute = "full"
    capacity_factor: float | None = Field(default=None, gt=0, le=64, allow_inf_nan=False)
    # multi-token-prediction modules trained with the model (Megatron-Core --mtp-num-layers; DeepSeek-V3: 1)
    mtp_layers: int = Field(default=0, ge=0, le=8)
    # token-dropping expert capacity (sweep's --moe-capacity-factor); None: dropless
    moe_capacity_factor: float | None = Field(default=None, gt=0, le=64, allow_inf_nan=False)
    # Lower bounds a real measurement clears by orders of magnitude: 5e-324 s is positive, but the
    # model's step time over it overflows a float.
    step_time_s: float | None = Field(default=None, ge=1e-6, le=1e7, allow_inf_nan=False)
    tflops_per_gpu: float | None = Field(default=None, ge=1e-6, le=1e7, allow_inf_nan=False)
    tflops_basis: Literal["model", "hardware"] = "model"
    # Single stack settings of the run, overriding its stack's (as sweep's switches do).
    moe_dispatcher: Literal["alltoall", "allgather", "deepep", "hybridep", "none"] | None = None
    cuda_graphs: Literal["none", "partial", "full"] | None = None
    attention_kernel: Literal["fa2", "fa3", "cudnn", "ck", "triton"] | None = None

    def stack_request(self, profile: str | None = None) -> "StackRequest":
        """The stack this run is priced on: the stack profile ``profile`` (None: the vendor default) with
        the run's single settings on top."""
        from mi400plan.stacks import StackRequest

        return StackRequest(profile, {"moe_dispatcher": self.moe_dispatcher, "cuda_graphs": self.cuda_graphs,
                                      "attention_kernel": self.attention_kernel})

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _modules(cls, v: object) -> object:
        from mi400plan.specs.layout import recompute_modules_value

        return recompute_modules_value(v)

    @field_validator("lora_targets", mode="before")
    @classmethod
    def _targets(cls, v: object) -> object:
        from mi400plan.specs.layout import lora_targets_value

        return lora_targets_value(v)

    @field_validator("doc_length", mode="before")
    @classmethod
    def _doc_length(cls, v: object) -> object:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @model_validator(mode="after")
    def _one_measurement(self) -> "MeasuredRun":
        if (self.step_time_s is None) == (self.tflops_per_gpu is None):
            raise ValueError("give exactly one measurement: step_time_s or tflops_per_gpu")
        if self.vpp > 1 and self.pp < 2:
            raise ValueError("vpp > 1 (interleaved schedule) needs pp >= 2")
        if self.recompute_modules and self.recompute != "selective":
            raise ValueError("recompute_modules say what recompute = \"selective\" recomputes; "
                             f"this run has recompute = {self.recompute!r}")
        if self.recompute_layers and self.recompute != "full":
            raise ValueError("recompute_layers say how many layers of each chunk recompute = \"full\" "
                             f"recomputes; this run has recompute = {self.recompute!r}")
        if self.fp8_params and self.precision == "bf16":
            raise ValueError("fp8_params needs a low precision (\"fp8\", \"mxfp8\", \"nvfp4\", \"mxfp4\")")
        if self.gpus is not None and self.gpus != self.world:
            raise ValueError(f"gpus = {self.gpus} but tp x pp x cp x dp = {self.world}")
        return self

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    def train_options(self) -> "TrainOptions":
        """The run's recipe as the object fit and sweep take (``specs.layout.TrainOptions``)."""
        from mi400plan.specs.layout import TrainOptions

        keys = ("recipe", "precision", "grad_dtype", "flash_attention", "offload_layers", "fp8_params",
                "fused_cross_entropy", "recompute_modules", "recompute_layers", "capacity_factor",
                "moe_capacity_factor", "overlap_tp",
                "overlap_ep", "overlap_dp", "overlap_pp", "overlap_cp", "split_embedding_loss", "uneven_pp",
                "pp_schedule", "finetune", "lora_rank", "lora_targets", "doc_length", "pack_efficiency")
        return TrainOptions.given(**{k: getattr(self, k) for k in keys})

    def label(self) -> str:
        if self.name:
            return self.name
        lay = f"TP{self.tp} PP{self.pp}" + (f" VPP{self.vpp}" if self.vpp > 1 else "")
        lay += (f" CP{self.cp}" if self.cp > 1 else "") + (f" EP{self.ep}" if self.ep > 1 else "")
        return f"{self.model} {lay} DP{self.dp} mb{self.micro_batch}"


@dataclass(frozen=True)
class RunEntry:
    """A validated run and where it was read (``file:line``)."""

    run: MeasuredRun
    path: str
    line: int | None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


RUN_KEYS = tuple(MeasuredRun.model_fields)


def read_runs(path: Path, text: str) -> list[RunEntry]:
    """Training runs from a ``.toml`` or ``.csv`` file's text; ProfileError on anything wrong."""
    if path.suffix.lower() == ".csv":
        return _runs_csv(str(path), text)
    return _runs_toml(str(path), text)


def _run_error(path: str, line: int | None, exc: ValidationError, text: str, start: int | None) -> ProfileError:
    first = exc.errors()[0]
    loc = [str(p) for p in first.get("loc", ())]
    field = ".".join(loc) or None
    msg = "unknown key (typo?)" if first.get("type") == "extra_forbidden" else first.get("msg", "invalid value")
    given = first.get("input")
    if first.get("type") != "missing" and not isinstance(given, (dict, list)) and loc:
        shown = repr(given)
        msg += f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"
    if loc and start is not None:
        line = _key_line(text, loc[-1], start) or line
    known = None
    if first.get("type") == "extra_forbidden":
        known = "run keys: " + ", ".join(RUN_KEYS)
    return ProfileError(msg, path=path, line=line, field=field, hint=known)


def _key_line(text: str, key: str, start: int) -> int | None:
    """Line of ``key = ...`` in the ``[[run]]`` block that starts at line ``start`` (1-based)."""
    pat = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=")
    lines = text.splitlines()
    for i in range(start - 1, len(lines)):
        if i > start - 1 and lines[i].lstrip().startswith("["):
            break
        if pat.match(lines[i]):
            return i + 1
    return None


def _runs_toml(path: str, text: str) -> list[RunEntry]:
    from mi400plan.profiles import parse_toml

    raw = parse_toml(path, text)
    runs = raw.pop("run", None)
    if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
        raise ProfileError("no [[run]] tables (a runs file is an array of [[run]] tables)", path=path, field="run")
    defaults = {k: v for k, v in raw.items() if not isinstance(v, dict)}
    tables = [k for k, v in raw.items() if isinstance(v, dict)]
    if tables:
        raise ProfileError(f"unknown table [{tables[0]}] (only [[run]] tables and top-level defaults)", path=path,
                           field=tables[0])
    starts = [i + 1 for i, line in enumerate(text.splitlines()) if re.match(r"^\s*\[\[\s*run\s*\]\]", line)]
    out = []
    for i, r in enumerate(runs):
        start = starts[i] if i < len(starts) else None
        try:
            run = MeasuredRun.model_validate({**defaults, **r})
        except ValidationError as exc:
            raise _run_error(path, start, exc, text, start) from None
        out.append(RunEntry(run, path, start))
    return out


_BOOL = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


def _csv_value(key: str, cell: str) -> Any:
    info = MeasuredRun.model_fields.get(key)
    text = cell.strip()
    if info is None:
        return text
    ann = str(info.annotation)
    if "bool" in ann:
        return _BOOL.get(text.lower(), text)
    if "int" in ann and re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if "float" in ann:
        try:
            return float(text)
        except ValueError:
            return text
    return text


def _runs_csv(path: str, text: str) -> list[RunEntry]:
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, row) for row in reader]
    rows = [(n, r) for n, r in rows if any(c.strip() for c in r) and not r[0].lstrip().startswith("#")]
    if len(rows) < 2:
        raise ProfileError("a runs CSV needs a header line and at least one run", path=path)
    header = [h.strip() for h in rows[0][1]]
    out = []
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise ProfileError(f"{len(row)} cells but the header has {len(header)} columns", path=path, line=line)
        data = {k: _csv_value(k, v) for k, v in zip(header, row) if v.strip() != ""}
        try:
            run = MeasuredRun.model_validate(data)
        except ValidationError as exc:
            raise _run_error(path, line, exc, text, None) from None
        out.append(RunEntry(run, path, line))
    return out


# --- nccl-tests ---------------------------------------------------------------------------------

NCCL_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "all_to_all": "all_to_all",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
}


@dataclass(frozen=True)
class NcclRow:
    """One data line: S (bytes, nccl-tests' definition for the op) and the out-of-place time."""

    size_bytes: int
    time_s: float
    busbw_bytes_per_s: float
    line: int


@dataclass(frozen=True)
class NcclLog:
    path: str
    op: str  # comms.OPS name
    ranks: int
    hosts: int
    rows: tuple[NcclRow, ...]
    even: bool = True  # every host runs the same number of ranks

    @property
    def ranks_per_host(self) -> int:
        return self.ranks // max(self.hosts, 1)


_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device", re.I)
_START = re.compile(r"Collective test starting:\s*(\w+?)_perf", re.I)


def _op_from(path: str, text: str) -> str | None:
    m = _START.search(text)
    name = m.group(1).lower() if m else None
    if name is None:
        stem = Path(path).name.lower()
        hits = [k for k in sorted(NCCL_OPS, key=len, reverse=True) if k in stem.replace("-", "_")]
        name = hits[0] if hits else None
    return NCCL_OPS.get(name) if name else None


def looks_like_nccl(text: str) -> bool:
    return bool(re.search(r"^#\s*Rank\s+\d+\s+Group", text, re.M)) or "nccl-tests" in text or bool(_START.search(text))


def _columns(path: str, lines: list[str]) -> tuple[int, dict[str, int]]:
    """(line index of the column header, column name -> index of the first such column)."""
    for i, line in enumerate(lines):
        toks = line.lstrip("#").split()
        if toks[:2] == ["size", "count"] and "time" in toks and "busbw" in toks:
            cols: dict[str, int] = {}
            for j, t in enumerate(toks):
                cols.setdefault(t, j)
            return i, cols
    raise ProfileError("no column header ('#  size  count  type ... time  algbw  busbw ...'): not nccl-tests output?",
                       path=path, hint="keep the whole nccl-tests output, header included")


def read_nccl_log(path: Path, text: str, op: str | None = None) -> NcclLog:
    """Parse an nccl-tests / rccl-tests output; ``op`` overrides the collective it names."""
    p = str(path)
    op = op or _op_from(p, text)
    if op is None:
        raise ProfileError("cannot tell which collective this log measured", path=p,
                           hint="keep the 'Collective test starting: <op>_perf' line or name the file after the "
                           "test (all_reduce_perf.txt)")
    lines = text.splitlines()
    hosts: dict[int, str] = {}
    for line in lines:
        m = _RANK.match(line.strip())
        if m:
            hosts[int(m.group(1))] = m.group(2)
    if not hosts:
        raise ProfileError("no '#  Rank N Group G Pid P on HOST device D' lines: cannot tell how many GPUs ran the "
                           "test", path=p, hint="keep the header nccl-tests prints before the results")
    if len(hosts) < 2:
        raise ProfileError("one rank: a collective over one GPU moves nothing over a fabric", path=p,
                           hint="run the test over 2 or more GPUs (-g 8, or mpirun -np N)")
    head, cols = _columns(p, lines)
    rows = _nccl_rows(p, lines, head, cols)
    if not rows:
        raise ProfileError("no result lines after the column header", path=p, line=head + 1)
    per_host = list(Counter(hosts.values()).values())  # ranks per host in one pass: linear in the log
    return NcclLog(p, op, len(hosts), len(per_host), tuple(rows), even=len(set(per_host)) == 1)


MAX_ROWS = 10_000  # result lines per log (nccl-tests prints a few dozen)
MAX_SIZE_BYTES = 2**50  # 1 PiB: far beyond any GPU's memory


def _nccl_rows(path: str, lines: list[str], head: int, cols: dict[str, int]) -> list[NcclRow]:
    ncols = max(cols.values()) + 1
    rows: list[NcclRow] = []
    for i in range(head + 1, len(lines)):
        if len(rows) >= MAX_ROWS:
            raise ProfileError(f"more than {MAX_ROWS:,} result lines", path=path, line=i + 1)
        toks = lines[i].split()
        if not toks or toks[0].startswith("#"):
            continue
        if not re.fullmatch(r"\d+", toks[0]):
            continue  # other text NCCL prints between the lines (warnings, INFO)
        if len(toks) < ncols:
            raise ProfileError(f"{len(toks)} columns, the header has at least {ncols}", path=path, line=i + 1)
        try:
            size = int(toks[cols["size"]])
            t_us = float(toks[cols["time"]])
            bus = float(toks[cols["busbw"]])
        except ValueError:
            raise ProfileError("size, time or busbw is not a number", path=path, line=i + 1, field="time") from None
        if not (1e-3 <= t_us < 1e12):  # 1 ns: below any collective; a denormal time overflows a ratio
            raise ProfileError(f"time {toks[cols['time']]} us is not a number from 0.001 to 1e12",
                               path=path, line=i + 1, field="time")
        if size > MAX_SIZE_BYTES:
            raise ProfileError(f"size is beyond {MAX_SIZE_BYTES:,} B (1 PiB)", path=path, line=i + 1, field="size")
        if not (0 <= bus < 1e9):  # GB/s; busbw is only shown, never fitted
            bus = 0.0
        if size > 0:
            rows.append(NcclRow(size, t_us * 1e-6, bus * 1e9, i + 1))
    return rows


def classify(path: Path, text: str) -> Literal["runs", "nccl"]:
    """Whether a file holds training runs (``.toml``/``.csv``) or an nccl-tests log (anything else)."""
    if path.suffix.lower() in (".toml", ".csv"):
        return "runs"
    return "nccl"
