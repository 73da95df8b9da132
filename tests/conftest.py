"""Shared fixtures. Tests import the *installed* package (see .ci/run), never the source tree."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from pathlib import Path

import mi400plan

if Path(mi400plan.__file__).resolve().parent == Path(__file__).resolve().parent.parent / "mi400plan":
    raise pytest.UsageError(
        "the tests must run against the installed package (its wheel ships profiles/), not the source "
        "tree: run `pip install '.[test]' && pytest` (plain `pytest`, not `python -m pytest`, from the "
        "repository root), or run pytest from another directory"
    )

# Property tests are derandomized (same examples every run) and never fail on wall-clock deadlines:
# the suite must be deterministic on a loaded 2-core CI machine.
from hypothesis import settings

settings.register_profile("mi400plan", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("mi400plan")

os.environ.setdefault("COLUMNS", "200")
os.environ.pop("MI400PLAN_PROFILES", None)
# The profile cache (mi400plan.cache) is exercised by every test, in a directory of the test run's own.
os.environ.pop("MI400PLAN_NO_CACHE", None)
os.environ["MI400PLAN_CACHE_DIR"] = tempfile.mkdtemp(prefix="mi400plan-cache-")
atexit.register(shutil.rmtree, os.environ["MI400PLAN_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def catalog():
    from mi400plan.profiles import Catalog

    return Catalog.default([])


@pytest.fixture(scope="session")
def cli_command():
    """The full app as one click command, built once for the session.

    typer's ``CliRunner.invoke`` rebuilds the click command tree of every command (reading each
    function's signature and evaluating its annotations, a tenth of a second or more) at each call;
    the tree holds no per-run state, so the in-process tests share one. ``main()`` and the
    subprocess tests still build it the way the program does.
    """
    import typer.main

    from mi400plan.cli import app

    return app, typer.main.get_command(app)


@pytest.fixture()
def cli(cli_command):
    """Invoke the CLI in-process: ``cli(["fit", "llama3.1-8b", "--json"])`` -> click Result."""
    import typer.testing
    from typer.testing import CliRunner

    app, command = cli_command
    runner = CliRunner()

    def invoke(args: list[str], **kw):
        build = getattr(typer.testing, "_get_command", None)  # what typer's invoke calls to build the tree
        if build is None:  # a typer whose runner builds differently: build at each call
            return runner.invoke(app, args, catch_exceptions=False, **kw)
        typer.testing._get_command = lambda given: command if given is app else build(given)
        try:
            return runner.invoke(app, args, catch_exceptions=False, **kw)
        finally:
            typer.testing._get_command = build

    return invoke


@pytest.fixture()
def csv_matches_json(cli):
    """``csv_matches_json(args)`` -> (CSV header, flattened JSON row keys, CSV rows) for one command line.

    The CSV of a command has the JSON rows' fields: nested models flattened as ``a.b``, lists of rows
    as JSON text.
    """
    import csv
    import io
    import json

    def keys(d, prefix=""):  # noqa: ANN001, ANN202
        out = []
        for k, v in d.items():
            out += keys(v, f"{prefix}{k}.") if isinstance(v, dict) else [f"{prefix}{k}"]
        return out

    def run(args: list[str]):  # noqa: ANN202
        rows = json.loads(cli([*args, "--json"]).stdout)["data"]["rows"]
        reader = csv.DictReader(io.StringIO(cli([*args, "--format", "csv"]).stdout))
        got = list(reader)
        assert len(got) == len(rows)
        json_keys: list[str] = []
        for r in rows:
            json_keys += [k for k in keys(r) if k not in json_keys]
        return reader.fieldnames, json_keys, got

    return run


@pytest.fixture()
def write_profile():
    """``write_profile(root, kind, stem, text)`` writes ``root/kind/stem.toml`` and returns its path."""

    def write(root: Path, kind: str, stem: str, text: str) -> Path:
        d = root / kind
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{stem}.toml"
        p.write_text(text, encoding="utf-8")
        return p

    return write

