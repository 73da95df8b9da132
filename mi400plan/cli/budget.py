"""``mi400plan budget``: compute-optimal model size and tokens for GPUs x days or a FLOP budget."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from mi400plan.cli.counts import count, one_sku
from mi400plan.cli.common import WidthOpt
from mi400plan.cli.common import (
    TRAIN_PRECISION_ALIASES, TRAIN_PRECISION_CHOICES, AsciiOpt, CheckOpt, FormatOpt, JsonOpt, ProfilesOpt, WideOpt, alias, app, catalog,
    pick_format, run, seq_tokens,
)
from mi400plan.cli.recipe import FinetuneOpt, LoraRankOpt, LoraTargetsOpt, train_options


@app.command("budget")
def cmd(
    sku: Annotated[str, typer.Option("--sku", callback=one_sku, help="Accelerator profile (one).")],
    gpus: Annotated[int, typer.Option("--gpus", parser=count, metavar="N", help="GPUs in the cluster (4096, 4Ki, 10k).")],
    days: Annotated[Optional[str], typer.Option("--days", help="Time budget (90d, 12w); the FLOPs follow from the cluster.")] = None,
    flops: Annotated[Optional[str], typer.Option("--flops", help="A FLOP budget instead of --days (3.8e25), in the law's 6ND convention.")] = None,
    law: Annotated[str, typer.Option("--law", help="Scaling law: chinchilla (Hoffmann et al. 2022 Approach 3), chinchilla-refit (Besiroglu et al. 2024), chinchilla-20 (20 tokens per parameter).")] = "chinchilla",
    family: Annotated[str, typer.Option("--family", help="Model family template: dense (Llama-3 shape) or moe.")] = "dense",
    experts: Annotated[int, typer.Option("--experts", parser=count, metavar="N", help="Routed experts per MoE layer (--family moe).")] = 0,
    top_k: Annotated[int, typer.Option("--top-k", parser=count, metavar="N", help="Experts each token runs (--family moe).")] = 0,
    mfu: Annotated[Optional[float], typer.Option("--mfu", help="Use this MFU for the budget instead of the planner's best layout.")] = None,
    seq: Annotated[Optional[str], typer.Option("--seq", metavar="TOKENS", help="Sequence length (default 8192).")] = None,
    global_batch: Annotated[Optional[str], typer.Option("--global-batch", help="Sequences or tokens (4Mi); default 4Mi tokens.")] = None,
    precision: Annotated[str, typer.Option("--precision", metavar="bf16|fp8|mxfp8|nvfp4|mxfp4", help="Training precision, as sweep takes it (the block GEMMs at that format's dense peak).")] = "bf16",
    finetune: FinetuneOpt = None,
    lora_rank: LoraRankOpt = None,
    lora_targets: LoraTargetsOpt = None,
    json_: JsonOpt = False,
    fmt: FormatOpt = None,
    profiles: ProfilesOpt = None,
    check: CheckOpt = False,
    ascii_: AsciiOpt = False,
    wide: WideOpt = False,
    width: WidthOpt = None,
) -> None:
    """Compute-optimal parameters and tokens for a budget under a scaling law (constants and source
    printed), the family model nearest that size, and its layout and days on the cluster.

    With --days the budget is the 6ND FLOPs the cluster delivers on the chosen model's best layout
    (repeated until the model stops changing); --check exits 4 when the model misses the time or fits
    no layout.
    """
    f = pick_format(json_, fmt)
    seq_n = seq_tokens(seq)
    precision = alias(precision, TRAIN_PRECISION_ALIASES, "--precision", TRAIN_PRECISION_CHOICES)
    fam = family.strip().lower()
    for flag, value in (("--finetune", finetune), ("--lora-rank", lora_rank), ("--lora-targets", lora_targets)):
        if value is not None and (flag != "--finetune" or value.value != "none"):
            raise typer.BadParameter("budget sizes a pre-training run by a scaling law (parameters and tokens "
                                     "from the FLOPs); a LoRA fine-tune adapts a given model: price it with "
                                     "'sweep MODEL --finetune lora --tokens N'", param_hint=flag)
    if fam not in ("dense", "moe"):
        raise typer.BadParameter(f"{family!r} is not one of dense|moe", param_hint="--family")

    def compute():  # noqa: ANN202
        from mi400plan.api.budget import budget

        return budget(catalog(profiles), sku, gpus=gpus, days=days, flops=flops, law=law, family=fam,
                      experts=experts, top_k=top_k, mfu=mfu, seq_len=seq_n, global_batch=global_batch,
                      options=train_options(precision=precision))

    run("budget", f, compute, check=check, ascii=ascii_, wide=wide)
