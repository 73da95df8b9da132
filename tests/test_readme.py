"""The README's examples are real: each ```console block is run and its output compared.

A block looks like::

    ```console
    $ mi400plan fit llama3.1-70b --sku mi355x
    <exact output>
    ```

Run ``python tests/test_readme.py --update`` to regenerate the outputs after a deliberate change.
Commands run in-process with COLUMNS=100 and ASCII tables, so the output is stable.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"```console\n\$ (?P<cmd>[^\n]+)\n(?P<out>.*?)```", re.S)
WIDTH = "100"


@functools.cache
def _built():  # noqa: ANN202
    """The app and its click command, built once (typer's runner rebuilds every command at each call)."""
    import typer.main

    from mi400plan.cli import app

    return app, typer.main.get_command(app)


def _invoke(args: list[str]):  # noqa: ANN202
    import typer.testing

    app, command = _built()
    build = getattr(typer.testing, "_get_command", None)
    if build is None:  # a typer whose runner builds differently: build at each call
        return typer.testing.CliRunner().invoke(app, args, catch_exceptions=False)
    typer.testing._get_command = lambda given: command if given is app else build(given)
    try:
        return typer.testing.CliRunner().invoke(app, args, catch_exceptions=False)
    finally:
        typer.testing._get_command = build


def run_example(cmd: str, width: str = WIDTH) -> tuple[int, str]:
    args = shlex.split(cmd)
    assert args[0] == "mi400plan", cmd
    env = {"COLUMNS": width, "MI400PLAN_ASCII": "1", "NO_COLOR": "1", "TERM": "dumb"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    cwd = os.getcwd()
    os.chdir(README.parent)  # the README's paths are relative to the repository root
    try:
        result = _invoke(args[1:])
    finally:
        os.chdir(cwd)
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return result.exit_code, result.stdout


def examples() -> list[tuple[str, str]]:
    return [(m.group("cmd"), m.group("out")) for m in BLOCK.finditer(README.read_text(encoding="utf-8"))]


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


@pytest.mark.skipif(not README.exists(), reason="README.md not next to the tests (sdist without it)")
def test_readme_has_examples() -> None:
    assert len(examples()) >= 3


@pytest.mark.parametrize("cmd,expected", examples(), ids=[c for c, _ in examples()])
def test_readme_example_output_is_current(cmd: str, expected: str) -> None:
    code, out = run_example(cmd)
    assert code in (0, 4), f"{cmd} exited {code}:\n{out}"
    assert _normalise(out) == _normalise(expected), (
        f"README example is stale: {cmd}\nrun `python tests/test_readme.py --update`"
    )


@pytest.mark.slow  # every example twice more (about a minute); the output check above stays quick
@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("cmd", [c for c, _ in examples()], ids=[c for c, _ in examples()])
def test_readme_example_fits_the_terminal(cmd: str, width: int) -> None:
    """Every example's default output fits COLUMNS=80 and COLUMNS=100 (trailing blanks aside)."""
    _, out = run_example(cmd, str(width))
    over = [line for line in out.splitlines() if len(line.rstrip()) > width]
    assert not over, f"{len(over)} lines over {width} columns:\n" + "\n".join(over[:5])


def test_readme_examples_have_no_trailing_blanks() -> None:
    for _, out in examples():
        assert all(line == line.rstrip() for line in out.splitlines())


def update() -> None:
    text = README.read_text(encoding="utf-8")

    def repl(m: re.Match[str]) -> str:
        _, out = run_example(m.group("cmd"))
        return f"```console\n$ {m.group('cmd')}\n{_normalise(out)}\n```"

    README.write_text(BLOCK.sub(repl, text), encoding="utf-8")


if __name__ == "__main__":
    if "--update" in sys.argv:
        update()
