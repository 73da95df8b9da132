"""Every command has help text and a section in the README; exit codes are documented."""

from __future__ import annotations

from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
COMMANDS = ["fit", "sweep", "serve", "comm", "rack", "profiles"]


@pytest.mark.parametrize("command", COMMANDS)
def test_command_has_help(cli, command: str) -> None:
    result = cli([command, "--help"])
    assert result.exit_code == 0, result.output
    assert "--json" in result.output or command == "profiles"


@pytest.mark.parametrize("command", COMMANDS)
def test_command_in_readme(command: str) -> None:
    assert f"mi400plan {command}" in README.read_text(encoding="utf-8")


def test_exit_codes_documented() -> None:
    from mi400plan.errors import ExitCode

    text = README.read_text(encoding="utf-8")
    for code in ExitCode:
        assert f"| {int(code)} |" in text, f"exit code {int(code)} ({code.name}) missing from README"


def test_version_flag(cli) -> None:
    from mi400plan import __version__

    result = cli(["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"mi400plan {__version__}"
