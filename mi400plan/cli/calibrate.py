"""``mi400plan calibrate``: fitted efficiencies from your own training runs and nccl-tests logs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mi400plan.cli.counts import one_sku
from mi400plan.cli.recipe import StackOpt
from mi400plan.cli.common import AsciiOpt, FormatOpt, JsonOpt, ProfilesOpt, WideOpt, WidthOpt, app, catalog, pick_format, run


@app.command("calibrate")
def calibrate_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Measurements: training runs (.toml with \\[\\[run]] tables, or .csv with the same keys) and/or "
            "nccl-tests / rccl-tests output logs (any other extension).",
            metavar="FILE...",
        ),
    ],
    sku: Annotated[
        Optional[str],
        typer.Option("--sku", callback=one_sku, help="Accelerator whose fabrics the nccl-tests logs ran on (scale-up within one host, "
                     "scale-out with one GPU per host)."),
    ] = None,
    fabric: Annotated[Optional[str], typer.Option("--fabric", help="Fabric profile every nccl-tests log ran on.")] = None,
    algo: Annotated[
        Optional[str],
        typer.Option("--algo", help="Algorithm the logs are priced with: auto (fastest the model finds), ring, tree, rhd, "
                     "direct."),
    ] = None,
    op: Annotated[
        Optional[str], typer.Option("--op", help="Collective of logs that do not name it (allreduce, allgather, alltoall, ...).")
    ] = None,
    save: Annotated[
        Optional[Path],
        typer.Option("--save", help="Write the fitted values as user profiles (accelerators/, fabrics/) under DIR, for "
                     "--profiles DIR.", metavar="DIR"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing profile files under --save DIR.")] = False,
    stack: StackOpt = None,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Also print where each run's measured step goes: MFU, recompute, kernels "
                     "below peak, exposed collectives, bubble, and what the model misses; FLOPs per token and "
                     "bytes per step (always in JSON)."),
    ] = False,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """Fit a SKU's matmul efficiency and GEMM overhead to measured step times, and a fabric's efficiency
    and latency to nccl-tests output, through the planner's own models; print the residual of every
    run and row.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.calibrate import calibrate

        result = calibrate(catalog(profiles), [str(p) for p in files], sku=sku, fabric=fabric, algo=algo, op=op,
                           save=None if save is None else str(save), force=force, stack=stack)
        return result.with_explain_table(explain)

    run("calibrate", f, compute, ascii=ascii_, wide=wide)
