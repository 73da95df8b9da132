"""``mi400plan validate``: the step-time model against measured training runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.common import AsciiOpt, FormatOpt, JsonOpt, ProfilesOpt, WideOpt, app, catalog, pick_format, run


@app.command("validate")
def validate_cmd(
    runs: Annotated[
        Optional[Path],
        typer.Argument(help="Measured training runs in the calibrate format (.toml with \\[\\[run]] tables, or .csv "
                       "with the same keys); default: the bundled published runs.", metavar="[RUNS]",
                       show_default=False),
    ] = None,
    loso: Annotated[
        bool,
        typer.Option("--loso/--no-loso", help="Leave-one-source-out cross-validation: refit the calibrated "
                     "parameters without each source's runs and predict them (about 40 s on the bundled runs)."),
    ] = True,
    write_bands: Annotated[
        Optional[Path],
        typer.Option("--write-bands", help="Write the error-band table (error_bands.json) from the "
                     "leave-one-source-out errors to FILE or into DIR.", metavar="PATH"),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option("--serve", help="Validate the serving model instead: the bundled InferenceX calibration points "
                     "(in-sample and leave-one-InferenceX-run-out: 36 refits, about 30 s of CPU time; --no-loso "
                     "skips them) and the published results never fitted (MLPerf Inference, vendors' tables): "
                     "signed errors on output tokens/s per GPU, TTFT and TPOT by serving stack and SKU family; "
                     "and MLPerf Server's published p50/p90/p99 TTFT and p99 TPOT beside the request "
                     "simulation's at the published rate."),
    ] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
) -> None:
    """Price measured training runs with the step-time model and print each run's signed error
    (+ = the model is optimistic: it predicts a faster step than measured), the mean and max |error| by
    SKU family, dense vs MoE and software stack, and the leave-one-source-out cross-validation.
    With --serve, the same for the serving model on published inference results.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        if serve:
            from mi400plan.api.serve_validate import validate_serve
            from mi400plan.errors import UsageError

            if runs is not None or write_bands is not None:
                raise UsageError(f"--serve validates the bundled serving measurements: it takes no "
                                 f"{'RUNS file' if runs is not None else '--write-bands'} (those are training runs)",
                                 hint="mi400plan validate --serve [--no-loso] [--json]")
            return validate_serve(catalog(profiles), loso=loso)
        from mi400plan.api.validate import validate

        return validate(catalog(profiles), None if runs is None else str(runs), loso=loso,
                        write_bands=None if write_bands is None else str(write_bands))

    run("validate", f, compute, ascii=ascii_, wide=wide)
