"""Every recipe flag x every command that accepts it: it changes what is priced, or it is refused.

A flag that a command accepts and then drops (``sweep --deadline --recompute full`` once answered as
if it were not given) is the failure this guards against. For each (command, flag) the command runs
twice, with and without the flag, on a base chosen so the flag has something to act on (a pinned
layout with TP, PP x VPP and CP > 1; an MoE model for the MoE switches; ``--precision fp8`` for the
FP8 switches); the priced workload (memory per GPU, step time, days, the answer) must differ, or the
command must refuse the flag with exit 2 where that refusal is documented:

* ``fit`` prices memory only: the step-time switches (``--overlap-*``, the packed-sequence ``--doc-length`` and
  ``--pack-efficiency``) are refused;
* ``budget`` has no recipe flags but ``--precision``: click refuses the others (no such option), and the
  LoRA flags are refused with the reason (its scaling law sizes a pre-training run);
* ``--fp8-params`` without ``--precision fp8`` is refused by every command;
* ``--precision nvfp4`` (an NVIDIA format) is refused on the MI355X base by every command; ``mxfp8`` and
  ``mxfp4`` run there (CDNA 4 has OCP MX math) and ``--bf16-gemm-share`` moves an MXFP4 run.
"""

from __future__ import annotations

import json

import pytest

DENSE, MOE = "llama3.1-8b", "mixtral-8x7b"
PINS = ["--tp", "2", "--pp", "2", "--vpp", "2", "--cp", "2"]


def _base(command: str, model: str) -> list[str]:
    ep = ["--ep", "2"] if model == MOE else []
    if command == "fit":
        return ["fit", model, "--sku", "mi355x", *PINS, "--gpus", "64", *ep]
    if command == "sweep":
        return ["sweep", model, "--sku", "mi355x", "--gpus", "64", "--no-ranges", *PINS, *ep]
    if command == "sweep --deadline":
        return ["sweep", model, "--sku", "mi355x", "--tokens", "100B", "--deadline", "3d", "--max-gpus", "512",
                *PINS, *ep]
    if command == "sweep --budget":
        return ["sweep", model, "--sku", "mi355x", "--tokens", "100B", "--budget", "200k", "--gpu-hour-cost", "2",
                "--max-gpus", "256", *PINS, *ep]
    if command == "budget":
        return ["budget", "--sku", "mi355x", "--gpus", "64", "--days", "10d"]
    assert command == "fit --largest"
    moe = ["--family", "moe", "--experts", "8", "--top-k", "2", "--ep", "2"] if model == MOE else []
    return ["fit", "--largest", "--sku", "mi355x", "--gpus", "16", *PINS, *moe]


def _with(args: list[str], extra: list[str]) -> list[str]:
    """``args`` with ``extra`` (flag value pairs, or a lone switch) replacing or adding flags."""
    out = list(args)
    i = 0
    while i < len(extra):
        flag = extra[i]
        has_value = i + 1 < len(extra) and not extra[i + 1].startswith("--")
        if has_value and flag in out:
            out[out.index(flag) + 1] = extra[i + 1]
        else:
            out += extra[i:i + 1 + has_value]
        i += 1 + has_value
    return out


def _priced(command: str, data: dict) -> object:
    """What the command priced: memory, step time, days, the cluster or the model it answers."""
    if command == "fit":
        r = data["rows"][0]
        return r["memory_bytes"]["total"], r["verdict"]
    if command == "sweep":
        r = data["rows"][0] if data["rows"] else None
        return None if r is None else (r["step_time_s"], r["memory_bytes"]["total"])
    if command.startswith("sweep --"):
        p = data["answers"][0]["pick"]
        return None if p is None else (p["gpus"], p["days"], p["step_time_s"], p["memory"]["total"])
    if command == "budget":
        return data["model"]["name"], data["compute_flops"], (data.get("plan") or {}).get("step_time_s")
    top = data["rows"][0]["largest"]
    return None if top is None else (top["name"], top["step_time_s"], top["memory_bytes"])


COMMANDS = ["fit", "sweep", "sweep --deadline", "sweep --budget", "budget", "fit --largest"]
# (flag and value, extra base flags that give it something to act on, model); per-command variants below
FLAGS: list[tuple[list[str], list[str], str]] = [
    (["--recipe", "fp32"], [], DENSE),
    (["--precision", "fp8"], [], DENSE),
    (["--precision", "mxfp8"], [], DENSE),
    (["--precision", "mxfp4"], [], DENSE),
    (["--precision", "nvfp4"], [], DENSE),  # an NVIDIA format: refused on the MI355X base everywhere
    (["--bf16-gemm-share", "0.5"], ["--precision", "mxfp4"], DENSE),
    (["--optimizer", "sgd"], [], DENSE),
    (["--grad-dtype", "bf16"], [], DENSE),
    (["--no-flash"], [], DENSE),
    (["--dropout"], [], DENSE),
    (["--reserve", "8GiB"], [], DENSE),
    (["--capacity-factor", "2"], [], MOE),
    (["--moe-capacity-factor", "1.5"], [], MOE),  # buffers (fit) and padded expert GEMMs / dispatch (step)
    (["--fp8-weight-copies", "1"], ["--precision", "fp8"], DENSE),
    (["--fp8-params"], ["--precision", "fp8"], DENSE),
    (["--fused-cross-entropy"], ["--pp", "1", "--vpp", "1"], DENSE),  # the loss sits on the last stage
    (["--recompute-modules", "core_attn,mlp"], ["--recompute", "selective"], DENSE),
    (["--recompute-layers", "1"], ["--recompute", "full"], DENSE),
    (["--vocab-divisible-by", "1000"], [], DENSE),
    (["--offload-layers", "2"], ["--pp", "1", "--vpp", "1", "--recompute", "none"], DENSE),  # Megatron-Core: no PP, no recompute
    (["--no-uneven-pp"], ["--pp", "2", "--vpp", "3"], DENSE),  # 32 layers in 6 chunks: uneven only
    (["--split-embedding-loss"], ["--pp", "2", "--vpp", "17"], DENSE),  # 32 + 2 = 34 = 2 x 17
    (["--pp-schedule", "dualpipe"], ["--vpp", "1"], DENSE),  # two stages a rank, PP + 1 micro-batches, less bubble
    (["--no-overlap-dp"], [], DENSE),
    (["--overlap-tp"], [], DENSE),
    (["--overlap-ep"], [], MOE),
    (["--no-overlap-pp"], [], DENSE),
    (["--no-overlap-cp"], [], DENSE),
    (["--recompute", "full"], [], DENSE),
    (["--finetune", "lora"], [], DENSE),
    (["--lora-rank", "64"], ["--finetune", "lora"], DENSE),
    (["--lora-targets", "qkv,proj,fc1,fc2"], ["--finetune", "lora"], DENSE),
    (["--doc-length", "512"], [], DENSE),  # packed sequences: per-document attention (step time only)
    (["--pack-efficiency", "0.5"], ["--doc-length", "512"], DENSE),  # half as many documents a row
]
# fit --largest answers a ladder model (layer counts multiples of 8), whose best layout recomputes fully
VARIANTS: dict[tuple[str, str], tuple[list[str], list[str]]] = {
    ("fit --largest", "--split-embedding-loss"): (["--split-embedding-loss"],
                                                 ["--pp", "2", "--vpp", "5", "--no-uneven-pp"]),
    ("fit --largest", "--recompute"): (["--recompute", "none"], []),
}
REFUSED: dict[tuple[str, str], str] = {
    **{("fit", f): "a step-time switch" for f in ("--no-overlap-dp", "--overlap-tp", "--overlap-ep",
                                                   "--no-overlap-pp", "--no-overlap-cp", "--doc-length",
                                                   "--pack-efficiency")},
    **{("budget", flag[0]): "No such option" for flag, _, _ in FLAGS if flag[0] != "--precision"},
    # budget's scaling law sizes a pre-training run: it takes the LoRA flags only to say so
    **{("budget", f): "budget sizes a pre-training run by a scaling law" for f in
       ("--finetune", "--lora-rank", "--lora-targets")},
}
# --precision values a command refuses on the base SKU (MI355X), keyed by value: every command
REFUSED_VALUES = {"nvfp4": "does not run NVFP4"}


# fit checks the layout it is given: a flag that makes it invalid is an error naming the broken rule
RULES_OUT = {("fit", "--no-uneven-pp"): "[rule: pp-layers]"}


def _run(cli, args: list[str]) -> tuple[int, dict | None, str]:  # noqa: ANN001
    r = cli([*args, "--json"])
    try:
        return r.exit_code, json.loads(r.stdout)["data"], r.output
    except (ValueError, KeyError):
        return r.exit_code, None, r.output


_defaults: dict[tuple[str, ...], tuple[int, dict | None, str]] = {}


def _flag_ids() -> list[str]:
    """The flags' ids as pytest names them: a flag listed more than once gets its index among its namesakes."""
    names = [f[0][0] for f in FLAGS]
    seen: dict[str, int] = {}
    ids = []
    for name in names:
        ids.append(f"{name}{seen.get(name, 0)}" if names.count(name) > 1 else name)
        seen[name] = seen.get(name, 0) + 1
    return ids


def _matrix() -> list:
    """Every (flag, command) case; the quick loop (``-m "not slow"``) keeps, for each flag, one command that
    prices it (``fit``, or ``sweep`` for the step-time switches fit refuses) and every documented refusal (a
    refusal is its own behaviour and costs no pricing). The other commands run the same flag through the same
    recipe code behind a costlier search (``--deadline``/``--budget`` sweep sizes, ``--largest``'s ladder), so
    they are marked slow: the full suite (CI) runs every case."""
    cases = []
    for command in COMMANDS:
        for (flag, extra, model), ident in zip(FLAGS, _flag_ids()):
            refused = (command, flag[0]) in REFUSED or (flag[0] == "--precision" and flag[1] in REFUSED_VALUES)
            quick = "sweep" if ("fit", flag[0]) in REFUSED else "fit"
            slow = () if refused or command == quick else (pytest.mark.slow,)
            cases.append(pytest.param(command, flag, extra, model, marks=slow, id=f"{ident}-{command}"))
    return cases


@pytest.mark.parametrize("command,flag,extra,model", _matrix())
def test_flag_changes_the_priced_workload_or_is_refused(cli, command: str, flag: list[str], extra: list[str],  # noqa: ANN001
                                                       model: str) -> None:
    flag, extra = VARIANTS.get((command, flag[0]), (flag, extra))
    base = _with(_base(command, model), extra)
    code, data, out = _run(cli, _with(base, flag))
    why = REFUSED.get((command, flag[0])) or (REFUSED_VALUES.get(flag[1]) if flag[0] == "--precision" else None)
    if why is not None:
        assert code == 2 and why in out, out
        return
    if (command, flag[0]) in RULES_OUT:  # the pinned layout, valid without the flag, breaks a layout rule with it
        assert code == 2 and RULES_OUT[command, flag[0]] in out, out
        assert _run(cli, base)[0] == 0
        return
    assert code in (0, 4), out
    key = tuple(base)
    if key not in _defaults:
        _defaults[key] = _run(cli, base)
    code0, data0, out0 = _defaults[key]
    # a base the flag turns valid (--split-embedding-loss) may itself be refused as a layout (fit)
    before = _priced(command, data0) if data0 is not None and code0 in (0, 4) else ("exit", code0)
    assert _priced(command, data) != before, f"{' '.join(flag)} did not change {command}"


@pytest.mark.parametrize("command", ["fit", "sweep", "sweep --deadline", "sweep --budget", "fit --largest"])
def test_fp8_params_without_fp8_is_refused_everywhere(cli, command: str) -> None:  # noqa: ANN001
    code, _, out = _run(cli, [*_base(command, DENSE), "--fp8-params"])
    assert code == 2 and "add --precision fp8" in out, out


@pytest.mark.parametrize("command", ["fit", "sweep", "sweep --deadline", "sweep --budget", "fit --largest"])
@pytest.mark.parametrize("flag", [["--lora-rank", "8"], ["--lora-targets", "qkv"]])
def test_lora_sizes_without_lora_are_refused_everywhere(cli, command: str, flag: list[str]) -> None:  # noqa: ANN001
    code, _, out = _run(cli, [*_base(command, DENSE), *flag])
    assert code == 2 and "add --finetune lora" in out, out


@pytest.mark.parametrize("flag", ["--plot", "--save"])
@pytest.mark.parametrize("mode", [["--deadline", "30d"], ["--budget", "1M", "--gpu-hour-cost", "2"]])
def test_deadline_and_budget_refuse_a_plot_or_plan(cli, tmp_path, flag: str, mode: list[str]) -> None:  # noqa: ANN001
    target = tmp_path / ("d.png" if flag == "--plot" else "plan.toml")
    r = cli(["sweep", DENSE, "--sku", "mi355x", "--tokens", "1T", *mode, flag, str(target)])
    assert r.exit_code == 2 and flag in r.output, r.output
    assert not target.exists()


def test_each_switch_has_one_spelling(cli) -> None:  # noqa: ANN001
    """fit and sweep spell every shared recipe switch alike (both halves of each on/off pair)."""
    from mi400plan.cli import app  # noqa: F401 - registers the commands
    from typer.main import get_command

    group = get_command(app)
    spell = {}
    for name in ("fit", "sweep"):
        cmd = group.commands[name]
        spell[name] = {p.name: (tuple(p.opts), tuple(p.secondary_opts), p.type_descriptor.annotation)
                       for p in cmd.params if p.param_type_name == "option"}
    shared = {"recipe", "optimizer", "grad_dtype", "flash", "dropout", "reserve", "capacity_factor",
              "moe_capacity_factor",
              "fp8_weight_copies", "fp8_params", "bf16_gemm_share", "fused_cross_entropy", "recompute_modules",
              "recompute_layers",
              "vocab_divisible_by", "offload_layers", "uneven_pp", "pp_schedule", "split_embedding_loss", "overlap_tp",
              "overlap_ep", "overlap_pp", "overlap_cp", "overlap_dp", "finetune", "lora_rank", "lora_targets",
              "doc_length", "pack_efficiency"}
    for key in shared:
        assert spell["fit"][key] == spell["sweep"][key], key
    assert spell["sweep"]["overlap_tp"][1] == ("--no-overlap-tp",)  # the old sweep spelling still works
    assert [c.value for c in spell["sweep"]["grad_dtype"][2]] == ["fp32", "bf16"]  # a choice, not free text


@pytest.mark.parametrize("extra", [["--top", "3"], ["--pareto"]])
def test_deadline_refuses_what_only_a_fixed_size_lists(cli, extra: list[str]) -> None:  # noqa: ANN001
    r = cli(["sweep", DENSE, "--sku", "mi355x", "--tokens", "1T", "--deadline", "30d", *extra])
    assert r.exit_code == 2 and extra[0] in r.output, r.output
