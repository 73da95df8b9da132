"""``mi400plan schema``: the JSON Schema of each command's --json envelope."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mi400plan.cli.common import app


@app.command("schema")
def schema_cmd(
    command: Annotated[Optional[str], typer.Argument(
        help="fit, sweep, serve, comm, rack, cost, profiles, calibrate or validate (default: every command, keyed by name).",
        show_default=False)] = None,
) -> None:
    """Print the JSON Schema (draft 2020-12) of a command's --json envelope, generated from its result
    models with each field described.

    Example: mi400plan schema fit > fit.schema.json
    """
    import json

    from mi400plan.results.schema import RESULTS, envelope_schema

    if command is not None and command not in RESULTS:
        raise typer.BadParameter(f"{command!r} is not one of {', '.join(RESULTS)}", param_hint="COMMAND")
    out = envelope_schema(command) if command else {c: envelope_schema(c) for c in RESULTS}
    typer.echo(json.dumps(out, indent=2, sort_keys=True))
