"""``--help``: options grouped into sections, an example per command, every line within 80 columns,
no Python type names; shell completion offers profile names."""

from __future__ import annotations

import pytest

COMMANDS = [[], ["fit"], ["sweep"], ["serve"], ["comm"], ["rack"], ["cost"], ["calibrate"], ["schema"], ["budget"],
            ["profiles"], ["profiles", "list"], ["profiles", "show"], ["profiles", "validate"]]


@pytest.mark.parametrize("width", ["80", "100"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a) or "root")
def test_help_fits_80_columns_with_sections_and_an_example(cli, monkeypatch, args, width):
    monkeypatch.setenv("COLUMNS", width)
    r = cli([*args, "--help"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "Example:" in r.stdout or args == ["profiles"]
    for leak in ("<list[", "<str>", "<int>", "<float>", "<path>", "\u2026"):
        assert leak not in r.stdout


def test_fit_help_groups_options(cli):
    out = cli(["fit", "--help"]).stdout
    sections = [line.rstrip(":") for line in out.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert sections[:2] == ["Arguments", "Options"]
    assert {"Layout", "Workload and recipe", "Output", "Example"} <= set(sections)
    layout = out.split("\nLayout:\n", 1)[1].split("\n\n", 1)[0]
    assert "--tp N" in layout and "--zero" in layout and "--json" not in layout


def _complete(cli, words: str) -> list[str]:
    from typer.testing import CliRunner

    from mi400plan.cli import app

    parts = words.split(" ")
    env = {"_MI400PLAN_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    r = CliRunner().invoke(app, [], env=env, prog_name="mi400plan")
    return r.stdout.split()


def test_completion_offers_profile_names(cli):
    skus = _complete(cli, "mi400plan fit llama3-70b --sku mi3")
    assert "mi300x" in skus and "mi355x" in skus and all(s.startswith("mi3") for s in skus)
    assert "all" in _complete(cli, "mi400plan sweep llama3-70b --sku a")
    assert "llama3.1-70b" in _complete(cli, "mi400plan fit llama3")
    assert "helios" in _complete(cli, "mi400plan rack hel")
    fabrics = _complete(cli, "mi400plan comm all-reduce --fabric xgmi")
    assert fabrics and all(f.startswith("xgmi") for f in fabrics)


@pytest.mark.parametrize("args", [[], ["--help"], ["-h"]])
def test_root_help_from_the_light_app_is_the_full_help(args):
    """The root help is printed from stubs of the commands (fast start-up); it must read exactly as
    the help of the app with every command built."""
    from typer.testing import CliRunner

    from mi400plan.cli import app, help_app

    full = CliRunner().invoke(app, args, prog_name="mi400plan")
    light = CliRunner().invoke(help_app(app), args, prog_name="mi400plan")
    assert light.output == full.output and "Commands:" in full.output and "profiles" in full.output
    assert light.exit_code == full.exit_code


def test_completion_offers_aliases_and_fixed_choices(cli):
    assert "llama3-70b" in _complete(cli, "mi400plan fit llama3-7")  # the README's own alias
    assert "mi450x" in _complete(cli, "mi400plan sweep x --sku mi45")  # an accelerator alias
    assert _complete(cli, "mi400plan fit x --mode ") == ["train", "infer"]
    assert set(_complete(cli, "mi400plan fit x --precision ")) >= {"bf16", "fp8", "fp32", "fp4", "nvfp4"}
    assert _complete(cli, "mi400plan sweep x --precision ") == ["bf16", "fp8"]
    assert "bf16,fp8" in _complete(cli, "mi400plan fit x --precision bf16,f")
    assert _complete(cli, "mi400plan fit x --format ") == ["table", "json", "csv", "md"]
    assert _complete(cli, "mi400plan comm ") == [
        "all-reduce", "all-gather", "reduce-scatter", "all-to-all", "broadcast", "reduce", "send-recv"]
    assert _complete(cli, "mi400plan schema ") == sorted(
        ["fit", "sweep", "serve", "comm", "rack", "cost", "profiles", "calibrate", "budget", "validate"])


@pytest.mark.parametrize("args, usage", [
    (["comm", "--help"], "Usage: mi400plan comm [OPTIONS] OP\n"),
    (["profiles", "show", "--help"], "Usage: mi400plan profiles show [OPTIONS] NAME\n"),
    (["rack", "--help"], "Usage: mi400plan rack [OPTIONS] NAMES...\n"),
    (["fit", "--help"], "Usage: mi400plan fit [OPTIONS] [MODEL]\n"),
])
def test_usage_names_arguments_plainly(cli, args, usage):
    out = cli(args, prog_name="mi400plan").stdout
    assert out.startswith(usage) and "{" not in out.splitlines()[0]


def test_a_command_line_builds_only_its_own_command():
    """sweep imports cost's site options, which registers cost too; the app a sweep runs with carries
    sweep alone (typer would otherwise build cost's command, annotations and all, at every start)."""
    from mi400plan.cli import _only, _register

    app = _register("sweep")
    assert {c.name for c in app.registered_commands} >= {"sweep", "cost"}
    assert [c.name for c in _only(app, "sweep").registered_commands] == ["sweep"]
    assert [g.name for g in _only(_register("profiles"), "profiles").registered_groups] == ["profiles"]
