"""Options shared by every command and the one place results and errors leave the process."""

from __future__ import annotations

import errno
import os
import sys
import traceback
from enum import Enum
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from mi400plan.cli.helpfmt import PlannerTyper
from mi400plan.errors import ExitCode, PlannerError
from mi400plan.render import OutputFormat, emit

if TYPE_CHECKING:  # pydantic is imported only when a command computes a result
    from mi400plan.results.common import Result

app = PlannerTyper(
    name="mi400plan",
    help="Capacity planner for AI accelerator clusters: memory fit, parallelism search, "
    "collective wire times, rack power and cooling.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

def _version(value: bool) -> None:
    if value:
        from mi400plan import __version__

        typer.echo(f"mi400plan {__version__}")
        raise typer.Exit(ExitCode.OK)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Capacity planner for AI accelerator clusters: memory fit, parallelism search, collective wire
    times, rack power and cooling. Every command has --json."""


JsonOpt = Annotated[bool, typer.Option("--json", help="Print only the versioned JSON envelope on stdout.")]
FormatOpt = Annotated[
    Optional[OutputFormat], typer.Option("--format", help="table, json, csv, or md (Markdown tables to paste into documents); --json is short for --format json.")
]
ProfilesOpt = Annotated[
    Optional[list[Path]],
    typer.Option(
        "--profiles",
        help="Extra profile directory (with accelerators/, fabrics/, racks/, models/); repeatable. "
        "Also read from $MI400PLAN_PROFILES. User profiles override bundled ones of the same name.",
    ),
]
CheckOpt = Annotated[bool, typer.Option("--check", help="Exit 4 when the answer is 'does not fit' / 'over budget'.")]
AsciiOpt = Annotated[bool, typer.Option("--ascii", help="Plain ASCII table borders.")]
WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Tables at their natural width even past the terminal's edge (default: a table too wide for "
        "the terminal prints one record per row). Also MI400PLAN_WIDE=1.",
    ),
]
WidthOpt = Annotated[
    Optional[int],
    typer.Option(
        "--width",
        metavar="N",
        help="Lay tables out for N columns (20 to 1,000). Default: $COLUMNS when it is 20 to 1,000, else "
        "the terminal's width; output that is not a terminal (a pipe, a file) prints at natural width.",
    ),
]
PlotOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--plot",
        help="Also draw the result to PATH (.png or .svg); needs the plot extra: pip install 'mi400plan[plot]'.",
        metavar="PATH",
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Replace an existing --plot file.")]


# Spellings users bring from PyTorch, Hugging Face and vLLM, mapped to the planner's names.
MODE_ALIASES = {"train": "train", "training": "train", "infer": "infer", "inference": "infer", "serve": "infer"}
PRECISION_ALIASES = {
    "bfloat16": "bf16", "float32": "fp32", "fp32": "fp32", "float8": "fp8", "fp8_e4m3": "fp8", "e4m3": "fp8",
    "float4": "fp4", "mxfp4": "fp4",
}


# Training --precision spellings (fit's training mode, sweep, budget): ``fp4``/``float4`` name OCP MXFP4.
TRAIN_PRECISION_ALIASES = {**PRECISION_ALIASES, "float4": "mxfp4", "fp4": "mxfp4", "mxfp4": "mxfp4"}
TRAIN_PRECISION_CHOICES = "bf16|fp8|mxfp8|nvfp4|mxfp4"


def alias(text: str | None, aliases: dict[str, str], flag: str, choices: str | None = None) -> str | None:
    """Normalise a choice typed the way another tool spells it (``bfloat16`` -> ``bf16``); with
    ``choices`` (the accepted names), anything else is a usage error naming the flag."""
    if text is None:
        return None
    key = text.strip().lower()
    value = aliases.get(key, key)
    if choices is not None and value not in choices.split("|"):
        raise typer.BadParameter(f"{text!r} is not one of {choices}", param_hint=flag)
    return value


def seq_tokens(text: str | None) -> int | None:
    """``--seq`` as tokens (``128k`` = 131,072); a usage error names the flag."""
    if text is None:
        return None
    from mi400plan.units import UnitError, parse_seq_len

    try:
        tokens = parse_seq_len(text)
    except UnitError as exc:
        raise typer.BadParameter(str(exc), param_hint="--seq") from None
    if not 1 <= tokens <= SEQ_MAX_TOKENS:
        raise typer.BadParameter(f"{text!r} must be 1 to {SEQ_MAX_TOKENS:,} tokens", param_hint="--seq")
    return tokens


SEQ_MAX_TOKENS = 2**27  # 128 Mi tokens: 10x the longest context any model card states


def refuse_inapplicable(mode: str, given: dict[str, object], applies: str) -> None:
    """A flag that does nothing in ``mode`` is a usage error naming it (``--zero`` with inference),
    rather than silently ignored. ``given`` maps each such flag to its value (None = not given)."""
    for flag, value in given.items():
        if value is not None:
            raise typer.BadParameter(f"applies to {applies} only, not --mode {mode}; drop it", param_hint=flag)


class RecomputeChoice(str, Enum):
    """Activation recomputation (Korthikanti et al. 2022): none, selective (attention core), full."""

    none = "none"
    selective = "selective"
    full = "full"


def pick_format(json_flag: bool, fmt: OutputFormat | None) -> OutputFormat:
    if json_flag and fmt not in (None, OutputFormat.json):
        raise typer.BadParameter("--json and --format are contradictory; give one", param_hint="--format")
    return OutputFormat.json if json_flag else (fmt or OutputFormat.table)


def catalog(profiles: list[Path] | None):  # noqa: ANN201 - returns mi400plan.profiles.Catalog
    from mi400plan.profiles import Catalog

    cat = Catalog.default(list(profiles or []))
    cat.on_warning = lambda message: stderr_console().print(f"warning: {message}", markup=False, highlight=False)
    return cat


def stderr_console():  # noqa: ANN201
    from mi400plan.render.table import make_console

    return make_console(sys.stderr, stderr=True)


def run(
    command: str,
    fmt: OutputFormat,
    compute: Callable[[], Result],
    *,
    check: bool = False,
    ascii: bool = False,
    wide: bool = False,
    plot: Path | None = None,
    force: bool = False,
) -> None:
    """Compute a result and emit it; map PlannerError to a message (or JSON envelope) and exit code.

    With ``plot``, the target is checked before computing (extension, --force, matplotlib present)
    and the picture is written before the result is printed (a failed plot prints no result).
    """
    from mi400plan.results.invariants import InvariantError

    try:
        _check_flags()
        if plot is not None:
            from mi400plan.render.plot import check_target

            check_target(plot, force)
        try:
            result = compute()
            _check_result(result)
        except (ArithmeticError, InvariantError) as exc:
            raise _unsizable(exc) from exc
        except OSError as exc:
            if exc.errno not in (errno.ENAMETOOLONG, errno.ELOOP):
                raise
            name = str(exc.filename or "")
            raise PlannerError(f"path {name[:60]}{'...' if len(name) > 60 else ''} cannot be used: "
                               f"{exc.strerror or exc}") from exc
    except PlannerError as exc:
        fail(command, fmt, exc)
        return  # unreachable; fail() exits
    except Exception as exc:  # noqa: BLE001 - the one place unexpected errors become exit 1
        _unexpected(command, fmt, exc)
    if plot is not None:
        _write_plot(command, fmt, result, plot, force)
    emit(result, fmt, sys.stdout, ascii=ascii, wide=wide, width=_width())
    if plot is not None and fmt is not OutputFormat.json:
        stderr_console().print(f"plot written to {plot}", markup=False, highlight=False)
    if fmt is not OutputFormat.json and result.warnings and command not in ("profiles",):
        from mi400plan.render.table import print_warnings

        print_warnings(stderr_console(), result.warnings)
    if check and result.check_failed():
        raise typer.Exit(ExitCode.CHECK_FAILED)
    raise typer.Exit(ExitCode.OK)


def _check_flags() -> None:
    """Every numeric flag of the running command against its domain (mi400plan.cli.flags)."""
    from typer._click.globals import get_current_context

    from mi400plan.cli.flags import check_flags

    ctx = get_current_context(silent=True)
    if ctx is None:
        return
    opts = {p.name: (p.opts[0] if p.opts else p.name) for p in ctx.command.params if p.name}
    check_flags(ctx.params, opts, ctx.info_name or "")


def _unsizable(exc: Exception) -> PlannerError:
    """A non-finite result (or an overflow, or a division by an underflowed zero) comes from inputs at
    the edge of their domains: a validation error naming the numbers given on the command line, or
    the profiles' figures when none was given."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    from mi400plan.errors import ProfileError, UsageError

    ctx = get_current_context(silent=True)
    given = []
    for p in ctx.command.params if ctx is not None else []:
        value = ctx.params.get(p.name or "")
        if (ctx.get_parameter_source(p.name or "") is ParameterSource.COMMANDLINE and p.opts
                and p.param_type_name == "option" and not isinstance(value, bool) and _numeric(value)):
            given.append(f"{p.opts[0]} {_as_typed(value)}")
    from mi400plan.results.invariants import InvariantError

    what = f"cannot be sized ({type(exc).__name__}: {exc})" if not isinstance(exc, InvariantError) else str(exc)
    if given:
        return UsageError(f"{what}; the numbers given ({', '.join(given)}) are outside what the model can size",
                          hint="use values within the documented ranges of these flags")
    return ProfileError(f"{what}; a figure of the profiles used is outside what the model can size",
                        hint="check the profiles' numbers (mi400plan profiles validate FILE)")


def _as_typed(value: object) -> str:
    """A flag's value as it is typed: a repeated or comma-separated flag reads ``mi300x,b200``, not a list."""
    if isinstance(value, (list, tuple)):
        return ",".join(_as_typed(v) for v in value)
    return str(value)


def _numeric(value: object) -> bool:
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_numeric(v) for v in value)
    return isinstance(value, str) and any(ch.isdigit() for ch in value)
def _width() -> int | None:
    """The running command's ``--width`` (None when not given or the command has none)."""
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    value = None if ctx is None else ctx.params.get("width")
    return value if isinstance(value, int) else None


def _check_result(result: Result) -> None:
    """The core's promise: no NaN or infinity in any number of a result (an internal error if broken)."""
    from mi400plan.results.invariants import check_finite

    check_finite(result)


def _unexpected(command: str, fmt: OutputFormat, exc: Exception) -> None:
    """An error that is a bug, not bad input: a one-line report and exit 1 (traceback on request)."""
    from rich.markup import escape

    text = f"[red]internal error:[/red] {escape(f'{type(exc).__name__}: {exc}')}\n  (set MI400PLAN_DEBUG=1 for a traceback)"
    _report(command, fmt, exc, text, ExitCode.UNEXPECTED)


def _write_plot(command: str, fmt: OutputFormat, result: Result, plot: Path, force: bool) -> None:
    from mi400plan.render.plot import write_plot

    try:
        write_plot(result, plot, force=force)
    except PlannerError as exc:
        fail(command, fmt, exc)
    except OSError as exc:
        fail(command, fmt, PlannerError(f"cannot write plot {str(plot)!r}: {exc.strerror or exc}"))
    except Exception as exc:  # noqa: BLE001 - a drawing bug is exit 1, not a traceback
        _unexpected(command, fmt, exc)


def fail(command: str, fmt: OutputFormat, exc: PlannerError) -> None:
    """Report a PlannerError and exit with its code (JSON envelope on stdout if --json)."""
    from rich.markup import escape

    text = f"[red]error:[/red] {escape(exc.message)}"
    if exc.hint:
        text += f"\n  [dim]hint:[/dim] {escape(exc.hint)}"
    _report(command, fmt, exc, text, exc.exit_code)


def _report(command: str, fmt: OutputFormat, exc: Exception, text: str, code: int) -> None:
    """Write ``exc`` as a JSON error envelope on stdout (--json) or ``text`` (rich markup) on stderr; exit."""
    if os.environ.get("MI400PLAN_DEBUG") == "1":
        traceback.print_exc()
    if fmt is OutputFormat.json:
        from mi400plan.render.jsonout import write_error

        write_error(command, exc, sys.stdout)
    else:
        stderr_console().print(text, markup=True, highlight=False)
    raise typer.Exit(code)
