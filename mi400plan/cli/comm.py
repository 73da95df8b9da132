"""``mi400plan comm``: collective wire times over scale-up and scale-out tiers."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mi400plan.cli.counts import count, sku_list
from mi400plan.cli.common import WidthOpt
from mi400plan.cli.common import (
    AsciiOpt, WideOpt, CheckOpt, ForceOpt, FormatOpt, JsonOpt, PlotOpt, ProfilesOpt, app, catalog, pick_format, run,
)


@app.command("comm")
def comm_cmd(
    op: Annotated[
        str,
        typer.Argument(
            help="Collective: allreduce/all-reduce, allgather/all-gather, reducescatter/reduce-scatter, "
            "alltoall/all-to-all, broadcast, reduce, sendrecv/send-recv."
        ),
    ],
    size: Annotated[
        str,
        typer.Option(
            "--size",
            help="S as nccl-tests defines it: 32MB (1e3 powers), 32MiB (2^10 powers), or a range 1KiB..8GiB (doubling).",
        ),
    ],
    group: Annotated[int, typer.Option("--group", parser=count, metavar="N", help="GPUs in the collective (8, 1k, 16Ki).")],
    fabric: Annotated[
        Optional[list[str]], typer.Option("--fabric", help="Fabric profile (repeatable: side-by-side comparison).")
    ] = None,
    sku: Annotated[
        Optional[list[str]],
        typer.Option("--sku", callback=sku_list, help="Accelerator profile; uses its scale-up and scale-out fabrics (repeatable or comma-separated; 'all' compares every SKU)."),
    ] = None,
    bw: Annotated[
        Optional[str], typer.Option("--bw", help="Per-GPU bandwidth per direction of a switched tier: 300GB/s, 400Gb/s.")
    ] = None,
    latency: Annotated[Optional[str], typer.Option("--latency", help="Per-step latency with --bw: 2us, 0.5ms (default 0).")] = None,
    scale_out: Annotated[
        Optional[str], typer.Option("--scale-out", help="Scale-out fabric to pair with --fabric for groups beyond its domain.")
    ] = None,
    stride: Annotated[
        int, typer.Option("--stride", parser=count, metavar="N",
                          help="Rank distance between group members (1 = TP-like; DP = product of inner dims).")
    ] = 1,
    algo: Annotated[
        Optional[str], typer.Option("--algo", help="auto (fastest valid), ring, tree, rhd (recursive halving/doubling), direct.")
    ] = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
    plot: PlotOpt = None,
    force: ForceOpt = False,
) -> None:
    """Collective time, algbw and busbw (nccl-tests conventions) on one or several systems.

    A group that fits one scale-up domain uses it; a strided or larger group goes hierarchical or
    fully over scale-out, and the table shows that cliff.
    """
    f = pick_format(json_, fmt)

    def compute():  # noqa: ANN202
        from mi400plan.api.comm import comm

        return comm(
            catalog(profiles),
            op,
            size,
            group,
            fabrics=fabric,
            skus=sku,
            bw=bw,
            latency=latency,
            scale_out=scale_out,
            algo=algo,
            stride=stride,
        )

    run("comm", f, compute, check=check, ascii=ascii_, wide=wide, plot=plot, force=force)
