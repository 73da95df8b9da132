"""``mi400plan profiles list | show | validate``."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Optional

import typer

from mi400plan.cli.helpfmt import PlannerTyper
from mi400plan.cli.common import AsciiOpt, WideOpt, WidthOpt, FormatOpt, JsonOpt, ProfilesOpt, app, catalog, pick_format, run
from mi400plan.errors import ExitCode


class Kind(str, Enum):
    accelerators = "accelerators"
    fabrics = "fabrics"
    racks = "racks"
    models = "models"
    costs = "costs"
    stacks = "stacks"
    serving = "serving"


KindOpt = Annotated[Optional[Kind], typer.Option("--kind", help="Profile kind.")]

profiles_app = PlannerTyper(
    name="profiles",
    help="List, show and validate the profile catalog (accelerators, fabrics, racks, models, costs, stacks, serving).",
    no_args_is_help=True,
)


def _kind(k: Kind | None) -> str | None:
    return None if k is None else k.value


@profiles_app.command("list")
def list_cmd(
    kind: KindOpt = None,
    specs: Annotated[
        bool,
        typer.Option(
            "--specs",
            help="Accelerator spec sheet: usable HBM, bandwidth, dense BF16/FP8/FP4, TDP, scale-up domain "
            "and per-direction bandwidth.",
        ),
    ] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """List profiles: name, kind, display name, aliases, origin (bundled/user), values by status, sources.

    With --specs: one line per accelerator with the figures users compare.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.profiles import list_profiles

        return list_profiles(catalog(profiles), _kind(kind), specs=specs)

    run("profiles", f, compute, ascii=ascii_, wide=wide)


@profiles_app.command("show")
def show_cmd(
    name: Annotated[str, typer.Argument(help="Profile name, alias, or path to a TOML file.")],
    kind: KindOpt = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Also list fields the file leaves at their default (mostly n/d).")
    ] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """Show every field of one profile: value, unit, low/high, status, sources, and the file used.

    Without --kind all kinds are searched; a name used by several kinds needs --kind.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.profiles import show_profile

        return show_profile(catalog(profiles), name, _kind(kind), include_defaults=all_)

    run("profiles", f, compute, ascii=ascii_, wide=wide)


@profiles_app.command("validate")
def validate_cmd(
    paths: Annotated[
        Optional[list[str]],
        typer.Argument(help="Files or directories to check (default: the whole catalog, bundled and user)."),
    ] = None,
    kind: KindOpt = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """Check profile files: TOML syntax, fields, name vs file name, and each kind's consistency rules.

    A file's kind comes from its directory name (accelerators/, fabrics/, racks/, models/, stacks/, serving/) or --kind.
    Exit code 3 if any file has a problem; with --json the envelope's status is then "error", its
    errors list the problems, and data.failed / data.rows[].issues say which files have them.
    """
    f = pick_format(json_, fmt)
    outcome: dict[str, bool] = {}
    if paths and "" in paths:  # Path("") would be the current directory
        raise typer.BadParameter("an empty path names no file or directory", param_hint="PATHS")

    def compute():  # noqa: ANN202
        from mi400plan.api.profiles import validate_profiles

        result = validate_profiles(catalog(profiles), list(paths or []), _kind(kind))
        outcome["failed"] = result.failed > 0
        return result

    try:
        run("profiles", f, compute, ascii=ascii_, wide=wide)
    except typer.Exit as exc:
        if exc.exit_code == ExitCode.OK and outcome.get("failed"):
            raise typer.Exit(ExitCode.PROFILE) from None
        raise


app.add_typer(profiles_app, name="profiles")
