"""``--help`` layout and shell completion, shared by every command.

Help is click's plain formatter (fast to import: no rich, no markdown parser), with the options
grouped into sections by what they set and one example per command under "Example". Completion
offers profile names from the catalog's file names (no profile is parsed).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

# Section of each option, by its long name; anything not listed stays under "Options" (first).
_PANEL_OPTIONS = {
    "Layout": "--gpus --tp --pp --vpp --dp --ep --etp --cp --zero --micro-batch --recompute --sp --plan --dp-attention --uneven-pp",
    "Workload and recipe": "--mode --seq --global-batch --batch --precision --recipe --optimizer --grad-dtype "
    "--kv-dtype --flash --dropout --reserve --capacity-factor --moe-capacity-factor --fp8-weight-copies --fp8-params --fused-cross-entropy --recompute-modules --recompute-layers --vocab-divisible-by --offload-layers "
    "--input-len "
    "--output-len --concurrency --largest --family --experts --top-k --days --flops --law --mfu --tokens --spec-tokens --spec-acceptance --tpot --ttft --interactivity --disagg",
    "Model switches and measured values": "--matmul-efficiency --hbm-efficiency --gemm-overhead-us --overlap-tp "
    "--overlap-ep --overlap-pp --overlap-cp --overlap-dp --split-embedding-loss --no-ranges",
    "Cost, site and budget": "--site --electricity-price --pue --cost-of-capital --depreciation-years --gpu-load "
    "--grid-intensity --facility --colocation-per-kw-month --facility-capex-per-mw --network-capex-per-gpu "
    "--capex-per-gpu --tokens-per-s --gpu-hour-cost --deadline --budget --max-gpus --price-per-kwh",
    "Output": "--json --format --check --ascii --wide --width --plot --force --save --top --rank-by --pareto --profiles --help",
}
PANEL_OF = {opt: panel for panel, opts in _PANEL_OPTIONS.items() for opt in opts.split()}
PANEL_ORDER = ["Options", *_PANEL_OPTIONS]

# One example per command (shown under "Example" in its --help).
EXAMPLES = {
    "fit": "mi400plan fit llama3-70b --sku mi355x --tp 8 --pp 2 --dp 4",
    "sweep": "mi400plan sweep llama3-70b --sku mi355x --sku b200 --gpus 1024 --tokens 15T",
    "serve": "mi400plan serve llama3-70b --sku mi355x --gpus 8 --tpot 50ms",
    "comm": "mi400plan comm all-reduce --size 1KiB..8GiB --group 8 --sku mi355x",
    "rack": "mi400plan rack helios gb200-nvl72",
    "cost": "mi400plan cost mi355x b200 --site us-2025",
    "calibrate": "mi400plan calibrate runs.toml --save my-profiles",
    "schema": "mi400plan schema fit > fit.schema.json",
    "budget": "mi400plan budget --sku mi355x --gpus 4096 --days 90",
    "list": "mi400plan profiles list --kind accelerators",
    "show": "mi400plan profiles show mi355x",
    "profiles validate": "mi400plan profiles validate ./my-profiles",
    "validate": "mi400plan validate my-runs.toml",
}


# Commands with count or SKU-list flags: their --help ends with the one rule that reads them (cli/counts.py).
COUNT_COMMANDS = ("fit", "sweep", "serve", "comm", "rack", "budget", "calibrate")


def _long_name(param: Any) -> str:
    names = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return names[0] if names else ""


def _panel(param: Any) -> str:
    return getattr(param, "rich_help_panel", None) or PANEL_OF.get(_long_name(param), "Options")


class PlannerCommand(TyperCommand):
    """A command whose --help groups options into sections and ends with an example."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _plain_metavar(param)
            _light_once(param)
            completer = _completer_for(self.name or "", param)
            if completer is not None:
                param._custom_shell_complete = completer  # click's hook for a parameter's completions

    def get_help_option(self, ctx: Any) -> Any:
        return _light_help(super().get_help_option(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``mi400plan comm [OPTIONS] OP``: a required argument plainly, not typer's ``{OP}``."""
        return [re.sub(r"^\{(.+)\}(\.\.\.)?$", r"\1\2", piece) for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, sections = [], {}
        for param in self.get_params(ctx):
            rv = param.get_help_record(ctx)
            if rv is None:
                continue
            if param.param_type_name == "argument":
                args.append((re.sub(r"\s+<[^>]*>$", "", rv[0]), rv[1]))  # "MODEL", not "MODEL <str>"
            else:
                sections.setdefault(_panel(param), []).append(rv)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for name in sorted(sections, key=lambda s: PANEL_ORDER.index(s) if s in PANEL_ORDER else len(PANEL_ORDER)):
            with formatter.section(name):
                formatter.write_dl(sections[name])

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        if self.name in COUNT_COMMANDS:
            from mi400plan.cli.counts import COUNTS_HELP

            with formatter.section("Counts and lists"):
                formatter.write_text(COUNTS_HELP)
        parent = ctx.parent.info_name if ctx.parent is not None and ctx.parent.parent is not None else None
        example = EXAMPLES.get(f"{parent} {self.name}" if parent else "", EXAMPLES.get(self.name or ""))
        if example:
            with formatter.section("Example"):
                formatter.write_text(example)


def _simple_type(param: Any) -> Any:
    """``str``, ``int``, ``float``, ``bool`` or ``list`` (for ``list[str]``) when the option is typed
    so (optional or not) with no parser, choices or path handling of its own; None for anything else."""
    import types
    import typing

    desc = param.type_descriptor
    ann = desc.annotation
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        ann = args[0] if len(args) == 1 else ann
    info = desc.parameter_info
    if getattr(info, "parser", None) is not None:
        # ``counts.count`` (every single-count flag's parser) hands an int back as it is, so a default
        # int passes through like an int option's; text from the command line still goes to it
        from mi400plan.cli.counts import count

        return int if info.parser is count and ann is int else None
    if getattr(info, "click_type", None) is not None:
        return None
    if getattr(desc, "file_annotation", None) is not None or getattr(desc, "is_choice", False):
        return None
    if ann in (str, int, float, bool):
        return ann
    if typing.get_origin(ann) is list and typing.get_args(ann) == (str,):
        return list
    return None


def _passes_through(kind: Any, value: Any) -> bool:
    """True where typer's coercion would hand ``value`` back unchanged: text given as text, and a
    number or flag that is already of its type (a default, never a command-line string)."""
    if kind is str:
        return isinstance(value, str)
    if kind is list:
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    if kind is int:
        return type(value) is int
    if kind is float:
        return type(value) in (int, float)
    if kind is bool:
        return isinstance(value, bool)
    return False


def _light_once(param: Any) -> Any:
    """``param`` with :func:`_light_coercion` applied, once."""
    if param is not None and not getattr(param, "_planner_light", False):
        _light_coercion(param)
        param._planner_light = True
    return param


def _light_help(opt: Any) -> Any:
    """The --help option with :func:`_light_coercion` applied once."""
    return _light_once(opt)


def _light_coercion(param: Any) -> None:
    """Values typer would hand back unchanged skip its coercion (an option left out, text options'
    strings, a default already of its type): typer >= 0.29 builds a pydantic TypeAdapter for every
    parameter it coerces, at every start, even to turn None into None, and the first one imports its
    adapter module. What typer does after coercing still runs: a required parameter's missing check
    and the callback. Command-line numbers still go through typer's parsing and bounds, and every
    value is checked against its domain by the command (``cli/flags.py``). An empty path is refused:
    typer would read ``""`` as the current directory."""
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.29
    original = param.process_value
    light = desc is not None
    kind = _simple_type(param) if light else None
    is_path = ("Path" in repr(desc.annotation)) if desc is not None else getattr(param.type, "name", "") == "path"
    multi = bool(getattr(param, "multiple", False)) or getattr(param, "nargs", 1) == -1

    def process_value(ctx: Any, value: Any) -> Any:
        if is_path and (value == "" or (isinstance(value, (list, tuple)) and "" in value)):
            # typer would read "" as Path("") = the current directory
            raise typer.BadParameter("an empty path names no file or directory", ctx=ctx, param=param)
        if not light:
            return original(ctx, value)
        if value is None:
            value = () if multi else None  # what typer's coercion makes of a value left out
        elif _passes_through(kind, value):
            value = list(value) if kind is list else value
        else:
            return original(ctx, value)
        if param.required and param.value_is_missing(value):
            from typer._click.exceptions import MissingParameter

            raise MissingParameter(ctx=ctx, param=param)
        return value if param.callback is None else param.callback(ctx, param, value)

    param.process_value = process_value


# typer >= 0.29 names the kinds "integer" / "float"; older typer passes click's INT / FLOAT ("int" / "float").
_TYPE_METAVAR = {"integer": "N", "int": "N", "integer range": "N", "float": "NUM", "float range": "NUM", "path": "PATH"}


def _plain_metavar(param: Any) -> None:
    """``--gpus N``, ``--sku SKU``, ``MODEL`` instead of Python types (``<list[str]>``, ``<int>``)."""
    if param.metavar is not None or getattr(param, "is_flag", False) or getattr(param, "count", False):
        return
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.29 describes the type itself
    if desc is not None:
        if desc.is_choice:
            param.metavar = "|".join(str(getattr(c, "value", c)) for c in desc.choices or ())
            return
        text = repr(desc.annotation)
        kind = "integer" if "int" in text else "float" if "float" in text else "path" if "Path" in text else ""
    else:
        kind = getattr(getattr(param, "type", None), "name", "")
        if kind == "choice":
            param.metavar = "|".join(str(getattr(c, "value", c)) for c in param.type.choices)
            return
    name = (_long_name(param) or param.name or "").lstrip("-").replace("-", "_").upper()
    param.metavar = _TYPE_METAVAR.get(kind, name or "TEXT")


class PlannerGroup(TyperGroup):
    """The command group: plain help (click's formatter), commands listed, an example."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # --install-completion and --show-completion: typer adds them after building the group
        for param in self.params:
            _light_once(param)
        return super().parse_args(ctx, args)

    def get_help_option(self, ctx: Any) -> Any:
        return _light_help(super().get_help_option(ctx))

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        super().format_epilog(ctx, formatter)
        if ctx.parent is None:
            with formatter.section("Example"):
                formatter.write_text("mi400plan fit llama3-70b --sku all")


class PlannerTyper(typer.Typer):
    """``typer.Typer`` whose commands and groups use the plain, grouped help above."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlannerGroup)
        kwargs.setdefault("rich_markup_mode", None)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", PlannerCommand)
        return super().command(*args, **kwargs)


# --- completion ------------------------------------------------------------------------------

# (command, parameter name) -> profile kind whose names complete it; "*" = any command.
_COMPLETE = {
    ("*", "sku"): "accelerators",
    ("*", "model"): "models",
    ("*", "fabric"): "fabrics",
    ("*", "scale_out"): "fabrics",
    ("rack", "names"): "racks",
    ("cost", "names"): "costs",
    ("serve", "stack"): "serving",
    ("*", "stack"): "stacks",
    ("show", "name"): "*",
}


# Fixed choices of plain-text options and arguments, by (command, parameter name); "*" = any command.
# Enum-typed options (--format, --recompute, ...) complete from their enum without an entry here.
_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("*", "mode"): ("train", "infer"),
    ("fit", "precision"): ("bf16", "fp8", "fp32", "mxfp8", "fp6", "fp4", "nvfp4", "int4"),
    ("sweep", "precision"): ("bf16", "fp8"),
    ("budget", "precision"): ("bf16", "fp8"),
    ("serve", "precision"): ("bf16", "fp8", "mxfp8", "mxfp6", "mxfp4", "nvfp4", "int4"),
}


def _dynamic_choices(command: str, name: str) -> list[str] | None:
    """Choices read from the code that accepts them: comm's collectives, schema's commands."""
    if (command, name) == ("comm", "op"):
        from mi400plan.comms import OPS

        return [op.replace("_", "-") for op in OPS]
    if (command, name) == ("schema", "command"):
        from mi400plan.results.schema import RESULTS

        return sorted(RESULTS)
    return None


def _completer_for(command: str, param: Any) -> Any:
    kind = _COMPLETE.get((command, param.name)) or _COMPLETE.get(("*", param.name))
    fixed = _CHOICES.get((command, param.name)) or _CHOICES.get(("*", param.name))
    if kind is None and fixed is None and (command, param.name) not in (("comm", "op"), ("schema", "command")):
        return None

    def complete(ctx: Any, _param: Any, incomplete: str) -> list[str]:
        if kind is None:
            choices = list(fixed or _dynamic_choices(command, param.name) or [])
            last = incomplete.rsplit(",", 1)  # --precision bf16,f<TAB>: complete the last item
            head = last[0] + "," if len(last) > 1 else ""
            return [head + c for c in choices if c.startswith(last[-1])]
        extra = ["all"] if param.name == "sku" and command in ("fit", "sweep", "serve", "comm") else []
        kinds = ["accelerators", "fabrics", "racks", "models", "costs", "stacks", "serving"] if kind == "*" else [kind]
        names = sorted({n for k in kinds for n in profile_names(k, aliases=True)})
        return [n for n in extra + names if n.startswith(incomplete)]

    return complete


_ALIASES_LINE = re.compile(r"^aliases\s*=\s*\[([^\]]*)\]", re.M)


def profile_names(kind: str, aliases: bool = False) -> list[str]:
    """Profile names of a kind from file names (bundled and user directories), without parsing; with
    ``aliases``, also the names each file's top-level ``aliases = [...]`` line gives (read as text)."""
    from mi400plan.profiles import ENV_VAR, bundled_root

    roots = [Path(d) / kind for d in os.environ.get(ENV_VAR, "").split(os.pathsep) if d.strip()]
    out: list[str] = []
    for root in [*roots, bundled_root() / kind]:
        try:
            files = [f for f in root.iterdir() if f.name.endswith(".toml")]
        except OSError:
            continue
        out += [f.name[: -len(".toml")] for f in files]
        if aliases:
            out += [a for f in files for a in _aliases_in(f)]
    return out


def _aliases_in(path: Path) -> list[str]:
    """The names on a profile's ``aliases = ["a", "b"]`` line; none when it cannot be read."""
    try:
        m = _ALIASES_LINE.search(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return []
    return re.findall(r'"([^"\\]+)"', m.group(1)) if m else []
