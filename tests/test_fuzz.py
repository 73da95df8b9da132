"""Property-based fuzzing of the whole command line, in-process: generated flag values, mutated
profiles (accelerator, fabric, model, rack), mutated Hugging Face config.json files, plan files and
calibration inputs.

For every example: the exit code is one of the documented ones (0, 2, 3, 4; never 1), ``--json``
prints exactly one envelope whose ``status`` agrees with the exit code, no traceback is printed, every
number of a successful result is finite and quantities (bytes, seconds, watts, counts) are not
negative, and no example runs away (an explicit bound on CPU time; hypothesis' own deadline is off
in conftest so a loaded machine cannot make the suite flaky).

Examples are derandomized (the same every run) and few by default; ``MI400PLAN_FUZZ_EXAMPLES=N``
runs N per test for a long campaign.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
import tempfile
import time
import tomllib
import traceback
from contextlib import redirect_stderr, redirect_stdout
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from mi400plan.cli import main

# The whole command line under generated input: the longest campaign of the suite (CI runs it;
# `pytest -m "not slow"` leaves it out while iterating).
pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("MI400PLAN_FUZZ_EXAMPLES", "0") or 0)
SEED = os.environ.get("MI400PLAN_FUZZ_SEED")  # another campaign's examples: random, from this seed
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES or 12,
    derandomize=SEED is None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


def FUZZ(test):  # noqa: N802 - used as a decorator like hypothesis' own settings
    """The fuzz settings, and ``MI400PLAN_FUZZ_SEED``'s seed when one is given."""
    test = FUZZ_SETTINGS(test)
    return seed(int(SEED))(test) if SEED is not None else test


# One command line: a hang or a runaway search is a defect. The bound is on the CPU time this process
# spends (a loaded machine does not inflate it), with a far looser wall-clock backstop for a blocked one.
MAX_CPU_SECONDS = 20.0
MAX_WALL_SECONDS = 120.0
DATA = Path(__file__).parent / "data"
BUNDLED = resources.files("mi400plan") / "profiles"

# --- running one command line --------------------------------------------------------------------


def invoke(argv: list[str]) -> tuple[int, str, str, tuple[float, float]]:
    """Run ``mi400plan ARGV`` in this process: (exit code, stdout, stderr, (CPU s, wall s)). An
    exception escaping ``main`` counts as exit 1 with its traceback on stderr."""
    out, err = io.StringIO(), io.StringIO()
    start, cpu = time.monotonic(), time.process_time()
    code = 0
    with redirect_stdout(out), redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - any escape is the defect being looked for
            code = 1
            err.write(traceback.format_exc())
    return code, out.getvalue(), err.getvalue(), (time.process_time() - cpu, time.monotonic() - start)


NONNEG = re.compile(
    r"(_bytes$|^bytes|_s$|^time_s$|_w$|_kw$|_mw$|_mwh$|_va$|_a$|gpus|count|days|hours|tokens|_per_s|"
    r"_l_per_min|_m3_per_h|_cfm|size|params_|^flops|_flops$|latency|bandwidth)"
)
SIGNED = re.compile(r"(headroom|residual|delta|error|flip|margin|diff|change|saving|vs_|slack|_c$)")


def _walk(value: Any, path: tuple[str, ...]) -> list[str]:
    """Problems with the numbers under ``value``: not finite, or negative where a quantity is."""
    problems = []
    if isinstance(value, dict):
        for k, v in value.items():
            problems += _walk(v, (*path, str(k)))
    elif isinstance(value, list):
        for v in value:
            problems += _walk(v, path)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        where = ".".join(path)
        if not math.isfinite(value):
            problems.append(f"{where} = {value}")
        elif value < 0 and any(NONNEG.search(k) for k in path) and not any(SIGNED.search(k) for k in path):
            problems.append(f"{where} = {value} (a quantity, negative)")
    return problems


def check(argv: list[str]) -> tuple[int, dict | None]:
    """Run ``argv`` and assert the documented contract; return (exit code, envelope or None)."""
    code, out, err, seconds = invoke(argv)
    shown = f"mi400plan {' '.join(repr(a) if not a or ' ' in a else a for a in argv)}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}"
    assert code in (0, 2, 3, 4), f"exit {code}\n{shown}"
    assert "Traceback" not in out + err, shown
    assert seconds[0] < MAX_CPU_SECONDS and seconds[1] < MAX_WALL_SECONDS, f"{seconds} s (CPU, wall)\n{shown}"
    if code == 4:
        assert "--check" in argv, f"exit 4 without --check\n{shown}"
    if "--json" not in argv:
        return code, None
    try:
        env = json.loads(out)  # exactly one document: a second one would not parse
    except ValueError as exc:
        raise AssertionError(f"stdout is not one JSON document ({exc})\n{shown}") from None
    assert isinstance(env, dict) and env.get("schema_version") == 1, shown
    if code in (0, 4):
        assert env["status"] == "ok" and env["data"] is not None and env["errors"] == [], shown
        problems = _walk(env["data"], ())
        assert not problems, f"{problems[:5]}\n{shown}"
    else:
        assert env["status"] == "error" and env["errors"], shown
        assert all(e.get("message") for e in env["errors"]), shown
    return code, env


# --- generated values ----------------------------------------------------------------------------

HOSTILE_TEXT = [
    "0", "-0", "-1", "1", "2", "8", "0.5", "1.5", "-0.5", "1e999", "-1e999", "1e-300", "nan", "NaN", "inf",
    "-inf", "Infinity", "4096", "65536", "1000000", "10000000", "16777216", "16777217", "9223372036854775808",
    "99999999999999999999", "18446744073709551617", "1e18",
    "32Mb", "32MiB", "1GB", "1TB/s", "400Gb/s", "2us", "1ms", "90d", "12w", "128k", "1k", "2M", "15T", "4Mi",
    "", " ", "abc", "0x10", "1_000", "1,2", "1..8", "8..1", "0..4", "1,,2", ",", "..", "1e3", "-1e3", "+5",
    "\x1b[31m", "8 ", "½", "٣", "NONE", "none", "true", "1/2", "10%", "3.0", "1e308", "5e-324",
]


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(HOSTILE_TEXT),
        st.integers(-(2**70), 2**70).map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(repr),
        st.text(max_size=12),
    )


def hostile_value() -> st.SearchStrategy[Any]:
    """A TOML value of any type, biased to the ones validation must refuse."""
    scalar = st.one_of(
        st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63), 10**18, 0.0, -0.0, 0.5, 1.5, -1e9, 1e308, 5e-324,
                         math.nan, math.inf, -math.inf, True, False, "", "n/d", "D", "estimate", "x" * 300]),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(),
        st.booleans(),
        st.text(max_size=10),
    )
    return st.one_of(
        scalar,
        st.lists(scalar, max_size=3),
        st.dictionaries(st.sampled_from(["nominal", "low", "high", "status", "source", "unit", "x"]), scalar,
                        max_size=4),
    )


# --- mutating documents --------------------------------------------------------------------------


def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    """Every path into ``doc`` (dict keys and list indexes), leaves and containers alike."""
    paths = [path] if path else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            paths += _leaves(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            paths += _leaves(v, (*path, i))
    return paths


@st.composite
def mutated(draw: st.DrawFn, doc: dict) -> dict:
    """``doc`` with one to three places replaced by a hostile value, deleted, or scaled."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = _leaves(doc)
        numbers = [p for p in paths if _is_number(_at(doc, p))]
        action = draw(st.sampled_from(["replace", "delete", "scale", "scale", "scale", "swap"]))
        if not paths:  # everything deleted already
            break
        if action == "scale" and not numbers:
            action = "replace"
        path = draw(st.sampled_from(numbers if action == "scale" else paths))
        parent, key = _at(doc, path[:-1]), path[-1]
        if action == "delete":
            del parent[key]
        elif action == "swap" and isinstance(parent, dict) and len(parent) > 1:
            other = draw(st.sampled_from(sorted(k for k in parent if k != key)))
            parent[key], parent[other] = parent[other], parent[key]
        elif action == "scale":
            factor = draw(st.sampled_from([0, -1, 1e-9, 1e-3, 0.1, 0.5, 0.9, 1.1, 2, 3, 10, 1e3, 1e9, 2**40]))
            # an estimate's low and high move with its nominal, so the range stays ordered
            together = [k for k in ("low", "nominal", "high") if k in parent] if key in ("low", "nominal", "high") else [key]
            for k in together:
                if _is_number(parent[k]):
                    scaled = parent[k] * factor
                    parent[k] = int(scaled) if isinstance(parent[k], int) and abs(scaled) < 2**63 else scaled
        else:
            parent[key] = draw(hostile_value())
    return doc


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _at(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v) if -(2**63) <= v < 2**63 else json.dumps(str(v))
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(type(v))


def _is_section(v: Any, top: bool) -> bool:
    """Written as a [section]: a top-level table, or a nested one holding tables or lists."""
    return isinstance(v, dict) and bool(v) and (top or (len(v) > 3 and any(isinstance(x, (dict, list)) for x in v.values())))


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def to_toml(doc: dict, prefix: str = "") -> str:
    """TOML text for ``doc``: sections and arrays of tables as a profile writes them, small tables inline."""
    top = not prefix
    inline = {k: v for k, v in doc.items() if not (_is_section(v, top) or _is_table_array(v))}
    lines = [f"{_key(k)} = {_value(v)}" for k, v in inline.items()]
    for k, v in doc.items():
        name = f"{prefix}{_key(k)}"
        if k in inline:
            continue
        if _is_section(v, top):
            lines += ["", f"[{name}]", to_toml(v, f"{name}.")]
        else:
            for item in v:
                lines += ["", f"[[{name}]]", to_toml(item, f"{name}.")]
    return "\n".join(lines)


def _bundled(kind: str, name: str) -> dict:
    return tomllib.loads((BUNDLED / kind / f"{name}.toml").read_text())


def test_toml_writer_round_trips_every_bundled_profile():
    """The fuzzer's own writer: a bundled profile written out reads back as the same document."""
    for kind in ("accelerators", "fabrics", "models", "racks"):
        for f in (BUNDLED / kind).iterdir():
            if f.name.endswith(".toml"):
                doc = tomllib.loads(f.read_text())
                assert tomllib.loads(to_toml(doc)) == doc, f.name


# --- 1. command-line flags -----------------------------------------------------------------------

# (base command line that succeeds, flags to fuzz). Booleans are drawn as present or absent.
COMMANDS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "fit": (
        ["fit", "llama3.1-8b", "--sku", "mi300x"],
        ["--sku", "--gpus", "--tp", "--pp", "--vpp", "--dp", "--ep", "--etp", "--cp", "--zero", "--micro-batch",
         "--recompute", "--mode", "--seq", "--global-batch", "--recipe", "--precision", "--optimizer",
         "--grad-dtype", "--kv-dtype", "--batch", "--reserve", "--capacity-factor", "--fp8-weight-copies",
         "--vocab-divisible-by", "--family", "--experts", "--top-k", "--offload-layers",
         "--pp-schedule", "--moe-capacity-factor", "--bf16-gemm-share", "--finetune", "--lora-rank",
         "--lora-targets", "--stack", "--moe-dispatcher", "--cuda-graphs", "--attention-kernel"],
        ["--largest", "--check", "--sp", "--no-flash", "--dropout", "--uneven-pp"],
    ),
    "sweep": (
        ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--no-ranges"],
        ["--sku", "--gpus", "--racks", "--tp", "--pp", "--vpp", "--cp", "--ep", "--zero", "--micro-batch",
         "--recompute", "--global-batch", "--seq", "--precision", "--tokens", "--grad-dtype", "--recipe",
         "--optimizer", "--reserve", "--capacity-factor", "--matmul-efficiency", "--hbm-efficiency",
         "--gemm-overhead-us", "--deadline", "--budget", "--max-gpus", "--gpu-hour-cost", "--site",
         "--electricity-price", "--pue", "--gpu-load", "--grid-intensity", "--top", "--offload-layers",
         "--pp-schedule", "--moe-capacity-factor", "--bf16-gemm-share", "--finetune", "--lora-rank",
         "--lora-targets", "--stack", "--moe-dispatcher", "--cuda-graphs", "--attention-kernel", "--doc-length",
         "--pack-efficiency"],
        ["--check", "--pareto", "--overlap-tp", "--no-overlap-pp"],
    ),
    "serve": (
        ["serve", "llama3.1-8b", "--sku", "mi300x", "--no-ranges"],
        ["--sku", "--gpus", "--racks", "--tp", "--pp", "--ep", "--input-len", "--output-len", "--precision",
         "--kv-dtype", "--concurrency", "--tpot", "--ttft", "--interactivity", "--spec-tokens",
         "--spec-acceptance", "--reserve", "--matmul-efficiency", "--hbm-efficiency", "--gpu-hour-cost",
         "--site", "--electricity-price", "--pue", "--gpu-load", "--top", "--rank-by", "--demand"],
        ["--check", "--disagg", "--dp-attention"],
    ),
    "comm": (
        ["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x"],
        ["--size", "--group", "--fabric", "--sku", "--bw", "--latency", "--scale-out", "--stride", "--algo"],
        [],
    ),
    "rack": (
        ["rack", "helios"],
        ["--sku", "--racks", "--gpus", "--feeds", "--derate", "--redundancy", "--gpu-power-cap",
         "--air-limit-kw", "--coolant", "--gpu-load", "--pue", "--price-per-kwh", "--site"],
        ["--check"],
    ),
    "cost": (
        ["cost", "mi300x-server"],
        ["--site", "--electricity-price", "--pue", "--cost-of-capital", "--depreciation-years", "--gpu-load",
         "--grid-intensity", "--facility", "--colocation-per-kw-month", "--facility-capex-per-mw",
         "--network-capex-per-gpu", "--capex-per-gpu", "--tokens-per-s"],
        [],
    ),
    "budget": (
        ["budget", "--sku", "mi300x", "--gpus", "64", "--days", "30d"],
        ["--sku", "--gpus", "--days", "--flops", "--law", "--family", "--experts", "--top-k", "--mfu", "--seq",
         "--global-batch", "--precision", "--finetune", "--lora-rank", "--lora-targets"],
        ["--check"],
    ),
    "calibrate": (
        ["calibrate", str(DATA / "calibrate" / "runs.toml")],
        ["--sku", "--fabric", "--algo", "--op"],
        ["--explain"],
    ),
    "profiles": (
        ["profiles", "list"],
        ["--kind"],
        ["--specs"],
    ),
}

# Values each flag takes in ordinary use, so that a hostile value in one flag meets valid ones in
# the others and the command gets past the parser into the model.
_COUNT = ["1", "2", "4", "8"]
PLAUSIBLE: dict[str, list[str]] = {
    "--sku": ["mi300x", "mi355x", "mi455x", "b200", "h100", "gb200", "tpu7x", "gaudi3", "trainium2"],
    "--gpus": ["1", "8", "16", "64", "72", "1024", "8,16", "8..64"], "--tp": _COUNT, "--pp": _COUNT,
    "--vpp": ["1", "2"], "--dp": _COUNT, "--ep": _COUNT, "--etp": ["1", "2"], "--cp": ["1", "2"],
    "--zero": ["0", "1", "2", "3"], "--micro-batch": _COUNT, "--recompute": ["none", "selective", "full"],
    "--mode": ["train", "infer"], "--seq": ["2048", "8k", "128k", "1M"], "--global-batch": ["1", "64", "512", "4Mi"],
    "--recipe": ["megatron", "zero", "fp32"], "--precision": ["bf16", "fp8", "fp4", "fp32", "mxfp8", "nvfp4", "mxfp4"],
    "--optimizer": ["adamw", "sgd", "adafactor"], "--grad-dtype": ["fp32", "bf16"], "--kv-dtype": ["bf16", "fp8"],
    "--batch": ["1", "8", "256"], "--reserve": ["0", "2GiB", "10GB"], "--capacity-factor": ["1", "1.25", "2"],
    "--fp8-weight-copies": ["0", "1", "2"], "--vocab-divisible-by": ["1", "128"], "--family": ["dense", "moe"],
    "--experts": ["0", "8", "64"], "--top-k": ["0", "1", "2", "8"], "--racks": ["1", "2", "10"],
    "--tokens": ["1T", "15T", "1e9"], "--matmul-efficiency": ["0.5", "0.9"], "--hbm-efficiency": ["0.5", "0.9"],
    "--gemm-overhead-us": ["0", "5", "100"], "--deadline": ["1d", "30d", "90d"], "--budget": ["1e6", "1M", "1e8"],
    "--max-gpus": ["64", "1024"], "--gpu-hour-cost": ["0.5", "2"], "--site": ["us-2025"],
    "--electricity-price": ["0.08", "0.3"], "--pue": ["1.1", "1.5"], "--gpu-load": ["0.5", "1"],
    "--grid-intensity": ["0", "0.4"], "--top": ["1", "5"], "--input-len": ["128", "8192"],
    "--output-len": ["128", "1024"], "--concurrency": ["1", "64"], "--tpot": ["20ms", "50ms"],
    "--ttft": ["200ms", "1s"], "--interactivity": ["20", "50"], "--spec-tokens": ["0", "3"],
    "--spec-acceptance": ["0", "0.7", "1"], "--size": ["1KiB", "1MB", "1GiB", "1KiB..1GiB"],
    "--group": ["2", "8", "64", "72", "1024"],
    "--fabric": ["xgmi-mi300", "ib-ndr-400", "helios-ualoe72", "nvlink5-nvl72", "ici-tpu7x", "pollara-400"],
    "--bw": ["400Gb/s", "50GB/s"], "--latency": ["2us", "10us"], "--scale-out": ["ib-ndr-400", "pollara-400"],
    "--stride": ["1", "8"], "--algo": ["auto", "ring", "tree", "rhd", "direct"],
    "--feeds": ["4x415V3ph60A", "2x480V3ph100A", "2x230V1ph32A", "4x415V3ph60Apf0.95"],
    "--derate": ["0.8", "1"], "--redundancy": ["N", "2N"], "--gpu-power-cap": ["1", "700", "1000"],
    "--air-limit-kw": ["1", "40"], "--coolant": ["water", "glycol25"], "--price-per-kwh": ["0.1"],
    "--facility": ["owned", "colocation"], "--cost-of-capital": ["0", "0.08", "1"],
    "--depreciation-years": ["0.1", "4"], "--colocation-per-kw-month": ["0", "150"],
    "--facility-capex-per-mw": ["0", "1e7"], "--network-capex-per-gpu": ["0", "3000"],
    "--capex-per-gpu": ["1", "30000"], "--tokens-per-s": ["1e-6", "1000"], "--days": ["1d", "30d", "365d", "12w"],
    "--flops": ["1e20", "3.8e25", "1e30"], "--law": ["chinchilla", "chinchilla-refit", "chinchilla-20"],
    "--mfu": ["0.01", "0.4", "1"], "--op": ["allreduce", "allgather", "alltoall"],
    "--offload-layers": ["0", "1", "8", "40"], "--rank-by": ["tok-per-gpu", "cost", "ttft"],
    "--demand": ["100req/s", "2.5Mtok/s", "1e12req/s"],
    "--kind": ["accelerators", "fabrics", "racks", "models", "costs"],
    "--pp-schedule": ["1f1b", "dualpipe"], "--moe-capacity-factor": ["0.5", "1", "1.25", "4"],
    "--bf16-gemm-share": ["0", "0.15", "1"], "--finetune": ["none", "lora", "lora"],
    "--lora-rank": ["1", "8", "16", "64"], "--lora-targets": ["qkv", "qkv,proj", "qkv,proj,fc1,fc2", "linear_fc1"],
    "--stack": ["megatron-bridge-25.11", "megatron-bridge-25.09", "primus-megatron-1.0", "torchtitan", "deepspeed",
                "llm-foundry"],
    "--moe-dispatcher": ["alltoall", "allgather", "deepep", "hybridep", "none"],
    "--cuda-graphs": ["none", "partial", "full"], "--attention-kernel": ["fa2", "fa3", "cudnn", "ck", "triton"],
    "--doc-length": ["128", "512", "uniform:64-2048", "8k"], "--pack-efficiency": ["0.5", "0.95", "1"],
}

NAMES = ["mi300x", "mi455x", "b200", "tpu7x", "helios", "llama3.1-8b", "xgmi-mi300", "us-2025", "nope",
         "../../etc/passwd", "MI300X"]


@st.composite
def command_line(draw: st.DrawFn, command: str) -> list[str]:
    base, flags, switches = COMMANDS[command]
    argv = list(base)
    for flag in draw(st.lists(st.sampled_from(flags), min_size=1, max_size=4, unique=True)):
        plausible = st.sampled_from(PLAUSIBLE[flag])
        hostile = st.one_of(hostile_text(), st.sampled_from(NAMES))
        argv += [flag, draw(st.one_of(plausible, plausible, hostile))]
    argv += draw(st.lists(st.sampled_from(switches), max_size=2, unique=True)) if switches else []
    return [*argv, "--json"]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_fuzz_flags(command):
    @FUZZ
    @given(argv=command_line(command))
    def run(argv):
        check(argv)

    run()


OTHER_FORMATS = [[], ["--format", "csv"], ["--format", "md"], ["--ascii"], ["--wide"]]


def test_fuzz_flags_table_output():
    """The same contract without --json: exit code and no traceback (tables, CSV, Markdown and
    warnings render)."""

    @FUZZ
    @given(command=st.sampled_from(list(COMMANDS)), data=st.data())
    def run(command, data):
        argv = data.draw(command_line(command))[:-1]
        check([*argv, *data.draw(st.sampled_from(OTHER_FORMATS))])

    run()


# --- 2. profile files ----------------------------------------------------------------------------

PROFILE_BASES = {
    "accelerators": ["mi300x", "mi455x", "b200", "tpu7x", "gaudi3"],
    "fabrics": ["xgmi-mi300", "ib-ndr-400", "helios-ualoe72", "ici-tpu7x", "nvlink5-nvl72"],
    "models": ["llama3.1-8b", "mixtral-8x7b", "deepseek-v3"],
    "racks": ["helios", "hgx-h100", "mi300x-server", "gb200-nvl72"],
}
# Fabrics: an accelerator whose scale-up (first) or scale-out (second) fabric each base is.
FABRIC_SKU = {"xgmi-mi300": "mi300x", "ib-ndr-400": "mi300x", "helios-ualoe72": "mi455x", "ici-tpu7x": "tpu7x",
              "nvlink5-nvl72": "gb200"}


def _commands_for(kind: str, name: str, doc: dict) -> list[list[str]]:
    if kind == "accelerators":
        return [["fit", "llama3.1-8b", "--sku", name, "--check"],
                ["sweep", "llama3.1-8b", "--sku", name, "--gpus", "16", "--no-ranges", "--top", "2"],
                ["serve", "llama3.1-8b", "--sku", name, "--no-ranges", "--top", "2"],
                ["comm", "all-gather", "--size", "64MiB", "--group", "16", "--sku", name],
                ["rack", "mi300x-server", "--sku", name, "--check"],
                ["profiles", "show", name]]
    if kind == "fabrics":
        sku = FABRIC_SKU[name]
        return [["comm", "all-reduce", "--size", "256MiB", "--group", "8", "--fabric", name],
                ["comm", "all-to-all", "--size", "1MiB", "--group", "64", "--sku", sku],
                ["sweep", "llama3.1-8b", "--sku", sku, "--gpus", "16", "--no-ranges", "--top", "2"],
                ["profiles", "show", name, "--kind", "fabrics"]]
    if kind == "models":
        return [["fit", name, "--sku", "mi355x", "--check"],
                ["fit", name, "--sku", "mi355x", "--mode", "infer"],
                ["sweep", name, "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--top", "2"],
                ["serve", name, "--sku", "mi355x", "--no-ranges", "--top", "2"],
                ["profiles", "show", name, "--kind", "models"]]
    return [["rack", name, "--check"], ["rack", name, "--racks", "4", "--gpu-power-cap", "700"],
            ["profiles", "show", name, "--kind", "racks"]]


@pytest.mark.parametrize("kind", list(PROFILE_BASES))
def test_fuzz_profiles(kind):
    @FUZZ
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(PROFILE_BASES[kind]), label="base")
        doc = data.draw(mutated(_bundled(kind, name)), label="profile")
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp:
            d = Path(tmp) / kind
            d.mkdir()
            path = d / f"{name}.toml"
            path.write_text(to_toml(doc))
            commands = _commands_for(kind, name, doc)
            argv = data.draw(st.sampled_from(commands), label="command")
            fmt = data.draw(st.sampled_from([["--json"]] * 3 + OTHER_FORMATS[:3]), label="format")
            check([*argv, "--profiles", tmp, *fmt])
            code, env = check(["profiles", "validate", str(path), "--kind", kind, "--json"])
            assert code in (0, 3), code

    run()


# --- 3. Hugging Face config.json -----------------------------------------------------------------

HF = sorted(p for p in (DATA / "hf").glob("*.json") if p.name not in ("malformed.json",))


def test_fuzz_hf_config():
    @FUZZ
    @given(data=st.data())
    def run(data):
        src = data.draw(st.sampled_from(HF), label="config")
        doc = data.draw(mutated(json.loads(src.read_text())), label="mutated")
        argv = data.draw(st.sampled_from([
            ["fit", "{}", "--sku", "mi300x", "--check"],
            ["fit", "{}", "--sku", "mi300x", "--mode", "infer"],
            ["sweep", "{}", "--sku", "mi355x", "--gpus", "16", "--no-ranges", "--top", "2"],
            ["serve", "{}", "--sku", "mi355x", "--no-ranges", "--top", "2"],
        ]), label="command")
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp:
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps(doc, allow_nan=True))
            check([str(path) if a == "{}" else a for a in argv] + ["--json"])

    run()


# --- 4. plan files -------------------------------------------------------------------------------

PLAN = {
    "plan": {"model": "llama3.1-8b", "sku": "mi300x", "gpus": 8, "seq_len": 8192, "global_batch": 512,
             "precision": "bf16"},
    "layout": {"tp": 1, "pp": 1, "vpp": 1, "dp": 8, "ep": 1, "etp": 1, "cp": 1, "zero": 3, "micro_batch": 4,
               "recompute": "none", "sequence_parallel": False},
}


def test_plan_base_is_what_sweep_saves():
    """The fuzzed plan starts from the file ``sweep --save`` writes (same keys and types)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.toml"
        code, *_ = invoke(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8", "--top", "1", "--no-ranges",
                           "--save", str(path)])
        saved = tomllib.loads(path.read_text())
    assert code == 0
    assert {k: set(v) for k, v in saved.items()} == {k: set(v) for k, v in PLAN.items()}
    assert {k: {f: type(x) for f, x in v.items()} for k, v in saved.items()} == {
        k: {f: type(x) for f, x in v.items()} for k, v in PLAN.items()}


def test_fuzz_plan_files():
    @FUZZ
    @given(doc=mutated(PLAN), extra=st.sampled_from([[], ["--check"], ["--sku", "mi355x"], ["--gpus", "16"]]))
    def run(doc, extra):
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp:
            path = Path(tmp) / "plan.toml"
            path.write_text(to_toml(doc))
            check(["fit", "--plan", str(path), *extra, "--json"])

    run()


# --- 5. calibration inputs -----------------------------------------------------------------------

RUNS = tomllib.loads((DATA / "calibrate" / "runs.toml").read_text())
NCCL = (DATA / "calibrate" / "all_reduce_perf.txt").read_text().splitlines()


@st.composite
def nccl_log(draw: st.DrawFn) -> str:
    """The nccl-tests log with a few lines changed: a field replaced, a line dropped or repeated."""
    lines = list(NCCL)
    for _ in range(draw(st.integers(1, 3))):
        i = draw(st.integers(0, len(lines) - 1))
        fields = lines[i].split()
        action = draw(st.sampled_from(["field", "drop", "repeat"]))
        if action == "drop":
            del lines[i]
        elif action == "repeat":
            lines.insert(i, lines[i])
        elif fields:
            fields[draw(st.integers(0, len(fields) - 1))] = draw(hostile_text()).replace("\n", " ")
            lines[i] = "  ".join(fields)
    return "\n".join(lines) + "\n"


def test_fuzz_calibrate_inputs():
    @FUZZ
    @given(runs=mutated(RUNS), log=nccl_log(), which=st.sampled_from(["runs", "log", "both"]),
           explain=st.booleans())
    def run(runs, log, which, explain):
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp:
            files = []
            if which in ("runs", "both"):
                files.append(Path(tmp) / "runs.toml")
                files[-1].write_text(to_toml(runs))
            if which in ("log", "both"):
                files.append(Path(tmp) / "all_reduce_perf.txt")
                files[-1].write_text(log)
            check(["calibrate", *map(str, files), "--sku", "mi355x", *(["--explain"] if explain else []), "--json"])

    run()


# --- 6. the commands added since the first campaign: cost, budget, serve, calibrate, --largest, --save ----

# Values at the edges of every domain: denormal and tiny positives (a quotient over them overflows),
# huge finite numbers, signed zero. Each is drawn into a numeric flag of a command among plausible values.
EXTREME = ["5e-324", "1e-310", "1e-300", "1e-30", "1e-9", "-0", "0", "1e30", "1e300", "1.7976931348623157e308"]
NEW_COMMANDS: dict[str, tuple[list[str], list[str], list[str]]] = {
    "cost": COMMANDS["cost"],
    "cost-tokens": (["cost", "mi355x", "--tokens-per-s", "1000"], COMMANDS["cost"][1], []),
    "budget": COMMANDS["budget"],
    "budget-flops": (["budget", "--sku", "mi355x", "--gpus", "1024", "--flops", "3.8e25"],
                     ["--sku", "--gpus", "--flops", "--law", "--family", "--experts", "--top-k", "--seq",
                      "--global-batch"], ["--check"]),
    "serve": COMMANDS["serve"],
    "sweep-tokens": (["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "8", "--no-ranges", "--tokens", "1T"],
                     ["--tokens", "--gpu-hour-cost", "--electricity-price", "--pue", "--gpu-load",
                      "--matmul-efficiency", "--hbm-efficiency", "--site"], []),
    "largest": (["fit", "--largest", "--sku", "mi355x", "--gpus", "8"],
                ["--sku", "--gpus", "--mode", "--precision", "--seq", "--global-batch", "--batch", "--reserve",
                 "--family", "--experts", "--top-k", "--kv-dtype", "--zero", "--micro-batch", "--recompute"],
                ["--check"]),
    "calibrate": COMMANDS["calibrate"],
    # the training recipe and layout flags, one to three at a time on a MoE model under a low precision
    "recipe": (["fit", "mixtral-8x7b", "--sku", "b200", "--gpus", "16", "--ep", "8", "--precision", "nvfp4"],
               ["--pp-schedule", "--moe-capacity-factor", "--bf16-gemm-share", "--finetune", "--lora-rank",
                "--lora-targets", "--precision", "--stack", "--moe-dispatcher", "--cuda-graphs",
                "--attention-kernel"], ["--check"]),
    "recipe-sweep": (["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "8", "--no-ranges", "--top", "1",
                      "--finetune", "lora"],
                     ["--pp-schedule", "--bf16-gemm-share", "--lora-rank", "--lora-targets", "--precision",
                      "--stack", "--attention-kernel", "--doc-length", "--pack-efficiency"], []),
}


@st.composite
def edge_command_line(draw: st.DrawFn, command: str) -> list[str]:
    """A working command line with one to three flags set, each plausible, hostile or at a domain's edge."""
    base, flags, switches = NEW_COMMANDS[command]
    argv = list(base)
    for flag in draw(st.lists(st.sampled_from(flags), min_size=1, max_size=3, unique=True)):
        plausible = st.sampled_from(PLAUSIBLE[flag])
        argv += [flag, draw(st.one_of(plausible, st.sampled_from(EXTREME), st.sampled_from(EXTREME), hostile_text()))]
    argv += draw(st.lists(st.sampled_from(switches), max_size=2, unique=True)) if switches else []
    return [*argv, "--json"]


@pytest.mark.parametrize("command", list(NEW_COMMANDS))
def test_fuzz_new_commands_at_the_edges(command):
    """Exit 0/2/3/4 only, one envelope, finite non-negative results, bounded time: the same contract."""
    @FUZZ
    @given(argv=edge_command_line(command))
    def run(argv):
        check(argv)

    run()


COST_BASES = {"us-2025": ("site", ["cost", "mi355x", "--tokens-per-s", "1000"]),
              "b200-hgx": ("system", ["cost", "b200-hgx", "--tokens-per-s", "1000"])}


@pytest.mark.parametrize("name", list(COST_BASES))
def test_fuzz_cost_profiles(name):
    """A mutated site or system cost profile under costs/ of a --profiles directory: cost, serve and
    sweep --tokens keep the contract (a bad field is exit 3 naming it, never exit 1 or inf)."""
    @FUZZ
    @given(doc=mutated(tomllib.loads((BUNDLED / "costs" / f"{name}.toml").read_text())),
           which=st.integers(0, 2))
    def run(doc, which):
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp:
            (Path(tmp) / "costs").mkdir()
            (Path(tmp) / "costs" / f"{name}.toml").write_text(to_toml(doc))
            kind, cost_cmd = COST_BASES[name]
            site = ["--site", name] if kind == "site" else []
            argv = [cost_cmd + site,
                    ["serve", "llama3.1-8b", "--sku", "b200", "--no-ranges", "--top", "2", *site],
                    ["sweep", "llama3.1-8b", "--sku", "b200", "--gpus", "8", "--no-ranges", "--tokens", "1T", *site]][which]
            check([*argv, "--profiles", tmp, "--json"])

    run()


SAVE_TARGETS = ["new", "existing", "fifo", "directory", "dangling-link", "link-to-file", "same-as-plot",
                "missing-parent", "long-name"]


def _save_target(tmp: Path, kind: str) -> Path:
    target = tmp / "plan.toml"
    if kind == "existing" or kind == "link-to-file":
        (tmp / "old.toml").write_text("old = 1\n")
        if kind == "existing":
            (tmp / "old.toml").rename(target)
        else:
            target.symlink_to(tmp / "old.toml")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "directory":
        target.mkdir()
    elif kind == "dangling-link":
        target.symlink_to(tmp / "nowhere.toml")
    elif kind == "missing-parent":
        target = tmp / "no" / "such" / "plan.toml"
    elif kind == "long-name":
        target = tmp / ("p" * 300 + ".toml")
    return target


def test_fuzz_save():
    """sweep --save and calibrate --save over every kind of target, with and without --force: the
    contract holds, and a FIFO, a directory or a link is never replaced."""
    @FUZZ
    @given(kind=st.sampled_from(SAVE_TARGETS), force=st.booleans(), command=st.sampled_from(["sweep", "calibrate"]))
    def run(kind, force, command):
        with tempfile.TemporaryDirectory(prefix="mi400plan-fuzz-") as tmp_name:
            tmp = Path(tmp_name)
            target = _save_target(tmp, kind)
            before = os.lstat(target).st_mode if os.path.lexists(target) else None
            if command == "sweep":
                argv = ["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "8", "--no-ranges", "--top", "1",
                        "--save", str(target)]
                if kind == "same-as-plot":
                    argv += ["--plot", str(target)]
            else:
                argv = ["calibrate", str(DATA / "calibrate" / "runs.toml"), "--save", str(target)]
            check([*argv, *(["--force"] if force else []), "--json"])
            if kind in ("fifo", "directory", "dangling-link", "link-to-file") and command == "sweep":
                assert os.lstat(target).st_mode == before, f"{kind} at --save was replaced"

    run()


# A hostile value in one of the training recipe/layout flags: exit 2, and the message names that flag.
RECIPE_HOSTILE = {
    "--pp-schedule": ["zb-v", "", "1F1B"], "--moe-capacity-factor": ["0", "-1", "nan", "inf", "1e308", "x"],
    "--bf16-gemm-share": ["-0.1", "1.5", "nan", "inf", "x"], "--finetune": ["qlora", ""],
    "--lora-rank": ["-1", "1.5", "1e999", "x"], "--lora-targets": ["bogus", ",", "qkv,bogus"],
    "--precision": ["fp6", "mxfp16", "nvfp8", ""], "--stack": ["nope", "../../etc/passwd"],
    "--moe-dispatcher": ["nccl", ""], "--cuda-graphs": ["some"], "--attention-kernel": ["fa9"],
    "--doc-length": ["0", "-5", "x", "1e999", "uniform:9-3", "uniform:", "1,024", "/nonexistent/lengths.csv"],
    "--pack-efficiency": ["0", "-1", "nan", "inf", "2", "x"],
}


@pytest.mark.parametrize("flag", list(RECIPE_HOSTILE))
def test_recipe_flags_hostile_values_name_the_flag(flag):
    for value in RECIPE_HOSTILE[flag]:
        for base in (["fit", "mixtral-8x7b", "--sku", "b200", "--gpus", "16", "--ep", "8", "--finetune", "lora"],
                     ["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "8", "--no-ranges", "--top", "1"]):
            argv = [*base, flag, value, "--json"] if flag != "--finetune" else [*base[:-2], flag, value, "--json"]
            code, env = check(argv)
            assert code in (2, 3), (argv, code)
            message = " ".join(e["message"] + " " + (e.get("hint") or "") for e in env["errors"])
            assert flag in message or (flag == "--stack" and "stack" in message), (argv, message)
