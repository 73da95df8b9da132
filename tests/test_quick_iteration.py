"""The test set-up people iterate with: the schema tests' jsonschema comes with the test extra (so they
run, not skip), the ``slow`` marker is registered and on the long campaigns (``pytest -m "not slow"``),
and CI prints which installed package it tests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    path = ROOT / "pyproject.toml"
    if not path.exists():
        pytest.skip("pyproject.toml not next to the tests")
    return tomllib.loads(path.read_text())


def test_jsonschema_is_in_the_test_extra_and_importable():
    extra = _pyproject()["project"]["optional-dependencies"]["test"]
    assert any(re.fullmatch(r"jsonschema>=4\.0\.0", spec) for spec in extra)
    import jsonschema  # the 7 schema tests import it; installed with the extra, they run

    assert hasattr(jsonschema, "Draft202012Validator")


def test_slow_marker_is_registered_and_used(pytestconfig):
    markers = _pyproject()["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)
    fuzz = (ROOT / "tests" / "test_fuzz.py").read_text()
    assert "pytestmark = pytest.mark.slow" in fuzz
    search = (ROOT / "tests" / "test_search.py").read_text()
    assert re.search(r"@pytest.mark.slow.*\n(@.*\n)*def test_whitepaper_setting_scales_near_linearly", search)


def test_ci_prints_the_installed_package_path():
    ci = ROOT / ".ci" / "run"
    if not ci.exists():
        pytest.skip(".ci/run not next to the tests")
    text = ci.read_text()
    assert "print('installed:', mi400plan.__file__)" in text
    assert 'project["optional-dependencies"]["test"]' in text  # job 2 pins jsonschema's floor too


def test_the_cli_fixture_builds_the_command_tree_once(cli, monkeypatch):
    """typer's runner would rebuild every command's options at each call (0.1-0.3 s); the fixture hands it
    the tree built once for the session, and the commands still run."""
    import typer.testing

    if not hasattr(typer.testing, "_get_command"):
        pytest.skip("this typer's runner builds the command another way")
    builds = []
    real = typer.testing._get_command
    monkeypatch.setattr(typer.testing, "_get_command", lambda app: builds.append(app) or real(app))
    first = cli(["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x", "--json"])
    second = cli(["profiles", "list", "--kind", "models"])
    assert first.exit_code == 0 and second.exit_code == 0 and "llama3.1-8b" in second.stdout
    assert builds == []


def test_the_quick_loop_leaves_out_the_long_reproducers():
    marked = {
        "test_deadline_exact.py": ("test_deepseek_31_days_is_the_smallest_size", "test_405b_in_60_days_is_at_most_8192_gpus"),
        "test_batch.py": ("test_moe_2t_at_65536_gpus_default_batch_matches_16mi_within_the_bound",),
        "test_catalog_view.py": ("test_no_bundled_profile_shows_as_records_at_80_columns",),
    }
    for name, tests in marked.items():
        text = (ROOT / "tests" / name).read_text()
        for test in tests:
            assert re.search(rf"@pytest.mark.slow.*\n(@.*\n)*def {test}\(", text), (name, test)


def test_xdist_is_in_the_test_extra_and_ci_stays_serial():
    """The quick loop runs on every core (``-n auto``); CI runs the README's serial command, unchanged."""
    extra = _pyproject()["project"]["optional-dependencies"]["test"]
    assert "pytest-xdist>=3.0.2" in extra
    readme = (ROOT / "README.md").read_text()
    assert 'pytest -m "not slow" -n auto' in readme
    ci = ROOT / ".ci" / "run"
    if ci.exists():
        run = re.search(r"run_suite\(\) \{.*?\n\}", ci.read_text(), re.S).group(0)
        assert "pytest --rootdir" in run and " -n " not in run and "xdist" not in run


def test_each_recipe_flag_keeps_one_priced_case_and_every_refusal_in_the_quick_loop():
    """The recipe flag x command matrix: the quick loop keeps, for each flag, exactly one command that prices it
    (fit, or sweep for the step-time switches fit refuses) and every documented refusal; the rest are slow."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("recipe_flags", ROOT / "tests" / "test_recipe_flags.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cases = mod._matrix()
    assert len(cases) == len(mod.FLAGS) * len(mod.COMMANDS) == 34 * 6  # nothing leaves the full suite
    assert len({c.id for c in cases}) == len(cases)
    quick = [c for c in cases if not any(m.name == "slow" for m in c.marks)]
    for flag, _, _ in mod.FLAGS:
        priced = [c.values[0] for c in quick if c.values[1] == flag and (c.values[0], flag[0]) not in mod.REFUSED
                  and mod.REFUSED_VALUES.get(flag[1] if len(flag) > 1 else "") is None]
        if flag == ["--precision", "nvfp4"]:  # refused on the base SKU by every command
            assert priced == [], priced
        else:
            step_only = flag[0].startswith(("--overlap", "--no-overlap")) or flag[0] in ("--doc-length",
                                                                                         "--pack-efficiency")
            assert priced == (["sweep"] if step_only else ["fit"]), flag
    refusals = [c for c in cases if (c.values[0], c.values[1][0]) in mod.REFUSED]
    assert refusals and all(c in quick for c in refusals)
    # 33 flags priced once + 7 fit refusals of the step-time switches (the overlap flags and packing's two) + 30
    # budget refusals of the flags other than --precision + nvfp4 refused by all 6 commands
    assert len(quick) == 33 + 7 + 30 + 6
