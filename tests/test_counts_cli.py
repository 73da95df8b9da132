"""One reading of counts and SKU lists for every command (``units.COUNT_RULE``, ``cli/counts.py``).

The walk goes over every option of every command: an integer option reads suffixes through the one
parser, a text option with a count domain is a list read by ``units.parse_count_list``; ``1,024`` is
refused naming the flag everywhere; ``--sku`` takes comma lists (and ``all``) where a command compares
SKUs and refuses them, naming the flag, where it prices one."""

from __future__ import annotations

import functools
import json

import pytest
import typer

from mi400plan.cli import app, main
from mi400plan.cli.counts import count
from mi400plan.cli.flags import FLAG_DOMAINS
from mi400plan.units import UnitError, parse_count_list, parse_int_count

BASE = {
    "fit": ["fit", "llama3.1-8b", "--sku", "mi300x"],
    "sweep": ["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "8"],
    "serve": ["serve", "llama3.1-8b", "--sku", "mi300x"],
    "comm": ["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x"],
    "rack": ["rack", "helios"],
    "budget": ["budget", "--sku", "mi300x", "--gpus", "64", "--days", "30d"],
    "calibrate": ["calibrate", "runs.toml"],
    "cost": ["cost", "mi300x-server"],
}
# fit's --global-batch counts sequences, and sweep's reads a suffixed number as tokens (4Mi): a suffix there
# belongs to the batch reading, not to counts.
NOT_COUNTS = {("fit", "--global-batch")}
# budget takes the LoRA flags only to refuse them with the reason (its scaling law sizes a pre-training run)
REFUSED_WITH_REASON = {("budget", "--lora-rank")}
MULTI_SKU = ("fit", "sweep", "serve", "comm")
ONE_SKU = ("budget", "rack", "calibrate")


@functools.cache  # built once: the walk and each parametrised check read the same tree
def _commands():
    cmd = typer.main.get_command(app)
    return {name: c for name, c in cmd.commands.items() if name in BASE}


def _count_flags():
    """(command, flag, kind): kind 'one' for an integer option, 'list' for a text option with a count domain,
    'length' for a token length."""
    out = []
    for name, c in _commands().items():
        for p in c.params:
            flag = next((o for o in p.opts if o.startswith("--")), None)
            desc = getattr(p, "type_descriptor", None)
            # --width is a terminal width in columns (20 to 1,000), read by the width rule, not a count
            if flag is None or desc is None or (name, flag) in NOT_COUNTS or flag == "--width":
                continue
            domain = FLAG_DOMAINS.get(flag)
            if "int" in repr(desc.annotation) and "Choice" not in repr(desc.annotation):
                out.append((name, flag, "one"))
            elif domain is not None and domain.kind in ("int", "length"):
                out.append((name, flag, "list" if domain.kind == "int" else "length"))
    return out


COUNT_FLAGS = _count_flags()
ONE_FLAGS = [(c, f) for c, f, kind in COUNT_FLAGS if kind == "one"]


def test_the_walk_covers_every_command_with_counts():
    seen = {c for c, _, _ in COUNT_FLAGS}
    assert seen == {"fit", "sweep", "serve", "comm", "rack", "budget"}
    assert ("sweep", "--gpus", "list") in COUNT_FLAGS and ("fit", "--gpus", "one") in COUNT_FLAGS
    assert ("budget", "--gpus", "one") in COUNT_FLAGS and ("serve", "--concurrency", "list") in COUNT_FLAGS


@pytest.mark.parametrize(("command", "flag"), ONE_FLAGS, ids=[f"{c} {f}" for c, f in ONE_FLAGS])
def test_every_integer_option_uses_the_one_parser(command, flag):
    param = next(p for p in _commands()[command].params if flag in p.opts)
    assert param.type_descriptor.parameter_info.parser is count


@pytest.mark.parametrize(("command", "flag", "kind"), COUNT_FLAGS, ids=[f"{c} {f}" for c, f, _ in COUNT_FLAGS])
def test_thousands_separator_refused_naming_the_flag(command, flag, kind, capsys):
    """The reproducer `sweep --gpus 1,024` ran 1 and 24 GPUs; every count flag now refuses it (exit 2)."""
    with pytest.raises(SystemExit) as exc:
        main([*BASE[command], flag, "1,024", "--json"])
    env = json.loads(capsys.readouterr().out)
    message = env["errors"][0]["message"]
    assert exc.value.code == 2 and env["status"] == "error"
    assert flag in message and "1024" in message and "thousands separator" in message


def _value_for(flag: str) -> tuple[str, int]:
    """A suffixed value inside the flag's domain, and what it stands for."""
    hi = FLAG_DOMAINS[flag].hi if flag in FLAG_DOMAINS else 2**16
    return ("2Ki", 2048) if hi >= 2048 else ("0.002k", 2)


@pytest.mark.parametrize(("command", "flag", "kind"), COUNT_FLAGS, ids=[f"{c} {f}" for c, f, _ in COUNT_FLAGS])
def test_suffixes_accepted_everywhere(command, flag, kind, monkeypatch, capsys):
    """`fit --gpus 1k` and `budget --gpus 10k` were refused with a raw parser message. Each command runs up to
    its flag checks (``cli.flags.check_flags``) and the values it would compute with are captured."""
    import importlib

    from typer._click.globals import get_current_context

    from mi400plan.cli.common import _check_flags

    seen = {}

    def fake_run(*args, **kwargs):
        _check_flags()
        seen.update(get_current_context().params)
        raise typer.Exit(0)

    monkeypatch.setattr(importlib.import_module(f"mi400plan.cli.{command}"), "run", fake_run)
    text, value = _value_for(flag) if kind != "length" else ("2Ki", 2048)
    extra = ["--mode", "infer"] if (command, flag) == ("fit", "--batch") else []
    base = BASE[command]
    if (command, flag) == ("sweep", "--max-gpus"):  # bounds the --deadline search only
        base = ["sweep", "llama3.1-8b", "--sku", "mi300x", "--tokens", "1T", "--deadline", "30d"]
    with pytest.raises(SystemExit) as exc:
        main([*base, *extra, flag, text, *(["--json"] if (command, flag) in REFUSED_WITH_REASON else [])])
    if (command, flag) in REFUSED_WITH_REASON:  # the suffix parsed; the refusal names the flag and the reason
        message = json.loads(capsys.readouterr().out)["errors"][0]["message"]
        assert exc.value.code == 2 and "pre-training" in message and "suffix" not in message
        return
    assert exc.value.code == 0
    name = next(p.name for p in _commands()[command].params if flag in p.opts)
    got = seen[name]
    if kind == "one":
        assert got == value
    elif kind == "list":
        assert parse_count_list(got, flag) == [value]


def test_count_reading_by_hand():
    assert parse_int_count("1k") == 1_000 and parse_int_count("10k") == 10_000
    assert parse_int_count("16Ki") == 16_384 and parse_int_count("1.5Ki") == 1_536
    assert parse_int_count("1_024") == 1_024 and parse_int_count("2M") == 2_000_000
    for bad in ("1,024", "1.5", "08", "-8", "8 GPUs", "1e999", "\u0663"):  # the last: an Arabic-Indic digit
        with pytest.raises(UnitError):
            parse_int_count(bad, "--gpus")


def test_list_reading_by_hand():
    assert parse_count_list("512,1024") == [512, 1024]
    assert parse_count_list("64, 128") == [64, 128]  # a space after the comma: a list
    assert parse_count_list("1k,2Ki") == [1000, 2048]
    assert parse_count_list("512..4Ki") == [512, 1024, 2048, 4096]
    assert parse_count_list("1..4", ranges="each") == [1, 2, 3, 4]
    assert parse_count_list("8,16,32") == [8, 16, 32]  # not all three-digit groups: a list
    for bad in ("1,024", "64,128", "16,384,000", "8,,16", "1, 024"):
        with pytest.raises(UnitError):
            parse_count_list(bad, "--gpus")


def test_api_list_readers_share_the_rule():
    from mi400plan.api.serve import parse_concurrency, parse_length
    from mi400plan.api.sweep import parse_gpus
    from mi400plan.errors import UsageError

    assert parse_gpus("1k") == [1000] and parse_gpus("8Ki..16Ki") == [8192, 16384]
    assert list(parse_concurrency("1k")) == [1000.0] and list(parse_concurrency("1, 4,16")) == [1.0, 4.0, 16.0]
    assert parse_length("8k", "--input-len") == 8192  # token lengths: k = 1,024, as --seq
    for call in (lambda: parse_gpus("1,024"), lambda: parse_concurrency("1,024"),
                 lambda: parse_length("1,024", "--input-len")):
        with pytest.raises(UsageError, match="thousands separator"):
            call()


def test_sweep_thousands_separator_reproducer(cli):
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "1,024", "--no-ranges", "--json"])
    assert r.exit_code == 2
    assert "--gpus" in json.loads(r.stdout)["errors"][0]["message"]


@pytest.mark.parametrize("command", MULTI_SKU)
def test_sku_comma_list_and_all(command, monkeypatch):
    import importlib

    from typer._click.globals import get_current_context

    seen = {}

    def fake_run(*args, **kwargs):
        seen.update(get_current_context().params)
        raise typer.Exit(0)

    monkeypatch.setattr(importlib.import_module(f"mi400plan.cli.{command}"), "run", fake_run)
    base = [a for a in BASE[command] if a not in ("--sku", "mi300x")]
    for given, want in (("mi355x,b200", ["mi355x", "b200"]), (" mi355x , b200,mi355x", ["mi355x", "b200"]),
                        ("all", ["all"])):
        with pytest.raises(SystemExit):
            main([*base, "--sku", given])
        assert seen["sku"] == want


@pytest.mark.parametrize("command", ONE_SKU)
@pytest.mark.parametrize("given", ["mi355x,b200", "all", "mi355x,"])
def test_one_sku_commands_refuse_lists_naming_the_flag(command, given, capsys):
    base = [a for a in BASE[command] if a not in ("--sku", "mi300x")]
    with pytest.raises(SystemExit) as exc:
        main([*base, "--sku", given, "--json"])
    assert exc.value.code == 2
    assert "--sku" in json.loads(capsys.readouterr().out)["errors"][0]["message"]


def test_serve_sku_all_and_comma_list(cli):
    """`serve --sku all` was refused; a SKU lacking the precision's peak is left out with a warning."""
    r = cli(["serve", "llama3.1-8b", "--sku", "all", "--no-ranges", "--top", "1", "--json"])
    assert r.exit_code == 0, r.stdout
    env = json.loads(r.stdout)
    assert len(env["data"]["skus"]) > 5
    assert any("left out" in w for w in env["data"]["warnings"])
    r = cli(["serve", "llama3.1-8b", "--sku", "mi355x,b200", "--no-ranges", "--top", "1", "--json"])
    assert [s["sku"] for s in json.loads(r.stdout)["data"]["skus"]] == ["mi355x", "b200"]


def test_comm_sku_all(cli):
    r = cli(["comm", "all-reduce", "--size", "1GiB", "--group", "16", "--sku", "all", "--json"])
    assert r.exit_code == 0, r.stdout
    env = json.loads(r.stdout)
    assert len(env["data"]["systems"]) > 5 and any("left out" in w for w in env["data"]["warnings"])


def test_fit_and_budget_suffix_reproducers(cli):
    """`fit --gpus 1k` and `budget --gpus 10k` were refused; they run on 1,000 and 10,000 GPUs."""
    r = cli(["fit", "llama3-70b", "--sku", "mi355x", "--gpus", "1k", "--json"])
    assert r.exit_code in (0, 4), r.stdout
    assert json.loads(r.stdout)["data"]["rows"][0]["gpus"] == 1000
    r = cli(["budget", "--sku", "mi355x", "--gpus", "10k", "--days", "30d", "--json"])
    assert r.exit_code in (0, 4), r.stdout
    assert json.loads(r.stdout)["data"]["gpus"] == 10_000
    # A list of three-digit items: a space after the comma says it is a list.
    r = cli(["sweep", "llama3.1-8b", "--sku", "mi300x", "--gpus", "64, 128", "--no-ranges", "--top", "1", "--json"])
    assert [s["gpus"] for s in json.loads(r.stdout)["data"]["scaling"]] == [64, 128]


@pytest.mark.parametrize(("argv", "want"), [
    (["rack", "helios,gb200-nvl72"], ["helios", "gb200-nvl72"]),
    (["cost", "mi355x, b200", "mi355x"], ["mi355x", "b200"]),
])
def test_profile_name_arguments_take_comma_lists(argv, want, monkeypatch):
    import importlib

    from typer._click.globals import get_current_context

    seen = {}

    def fake_run(*args, **kwargs):
        seen.update(get_current_context().params)
        raise typer.Exit(0)

    monkeypatch.setattr(importlib.import_module(f"mi400plan.cli.{argv[0]}"), "run", fake_run)
    with pytest.raises(SystemExit):
        main(argv)
    assert seen["names"] == want
