"""Hostile files and terminals (issue #12, classes 1-3 and 7): special files in a profile directory,
one bad user profile, validator shapes and nesting, ASCII terminals, closed pipes, control text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

BUNDLED_MI300X = resources.files("mi400plan") / "profiles" / "accelerators" / "mi300x.toml"


def _bad_dir(tmp_path: Path) -> Path:
    d = tmp_path / "p" / "accelerators"
    d.mkdir(parents=True)
    (d / "x.toml").write_text('name="x"\naliases=7\n')
    (d / "bad.toml").write_bytes(b'name="bad"\n\xff\xfe\n')
    (d / "dir.toml").mkdir()
    (d / "dangling.toml").symlink_to(d / "nowhere")
    (d / "loop.toml").symlink_to(d / "loop.toml")
    if hasattr(os, "mkfifo"):
        os.mkfifo(d / "fifo.toml")
    return tmp_path / "p"


def test_bad_profile_not_needed_is_a_warning(cli, tmp_path):
    """Class 2 reproducer: aliases=7 in an unrelated profile; plus a FIFO (class 1), a directory,
    dangling and looping links and invalid UTF-8, none of which the command needs."""
    p = _bad_dir(tmp_path)
    r = cli(["fit", "llama3-8b", "--sku", "mi300x", "--profiles", str(p), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "ok"
    for name in ("dir.toml", "dangling.toml", "loop.toml") + (("fifo.toml",) if hasattr(os, "mkfifo") else ()):
        assert name in r.stderr


@pytest.mark.parametrize(("sku", "field"), [("x", "aliases"), ("bad", "utf-8")])
def test_bad_profile_needed_is_exit_3_naming_file(cli, tmp_path, sku, field):
    p = _bad_dir(tmp_path)
    r = cli(["fit", "llama3-8b", "--sku", sku, "--profiles", str(p)])
    assert r.exit_code == 3
    assert f"{sku}.toml" in r.stderr and field in r.stderr.lower()
    assert "x.toml:2" in r.stderr if sku == "x" else True  # file and line


def _mi300x_with(tmp_path: Path, key: str, value: str) -> Path:
    d = tmp_path / "accelerators"
    d.mkdir(exist_ok=True)
    lines = [f"{key} = {value}" if line.startswith(f"{key} =") else line
             for line in BUNDLED_MI300X.read_text().splitlines()]
    f = d / "mi300x.toml"
    f.write_text("\n".join(lines) + "\n")
    return f


def test_validator_wrong_shape_is_exit_3(cli, tmp_path):
    """Class 3 reproducer: a list where a number belongs, inside an inline table."""
    f = _mi300x_with(tmp_path, "hbm_capacity", '{ nominal = [1], high = 2, status = "estimate" }')
    r = cli(["profiles", "validate", str(f), "--json"])
    assert r.exit_code == 3
    issue = json.loads(r.stdout)["data"]["rows"][0]["issues"][0]
    assert issue["field"].startswith("memory.hbm_capacity") and issue["line"]


@pytest.mark.parametrize("nest", ["[" * 1000 + "]" * 1000, "{a=" * 1000 + "1" + "}" * 1000])
def test_deep_nesting_is_exit_3(cli, tmp_path, nest):
    d = tmp_path / "accelerators"
    d.mkdir()
    (d / "deep.toml").write_text(f'name = "deep"\nvalue = {nest}\n')
    r = cli(["profiles", "validate", str(d / "deep.toml")])
    assert r.exit_code == 3
    assert "nested" in r.output and "Traceback" not in r.output


def test_control_characters_in_profile_text_are_escaped(cli, tmp_path):
    """Class 7: an ANSI escape in display_name is shown as visible text, never sent raw."""
    _mi300x_with(tmp_path, "display_name", '"Evil \\u001b[31mRED\\u0007"')
    r = cli(["profiles", "show", "mi300x", "--profiles", str(tmp_path)])
    assert r.exit_code == 0
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "Evil" in r.stdout and "RED" in r.stdout


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mi400plan", *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=60, errors="replace", cwd=Path(__file__).parent)


def test_ascii_terminal_degrades_instead_of_crashing():
    """Class 7 reproducer: PYTHONIOENCODING=ascii."""
    r = _run(["profiles", "show", "mi300x", "--all"], PYTHONIOENCODING="ascii")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "UnicodeEncodeError" not in r.stderr
    assert r.stdout.isascii()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX pipes and signals")
def test_closed_pipe_ends_quietly():
    """Class 7 reproducer: ``fit llama3-70b --sku all | head -1``: no error text, SIGPIPE status."""
    with subprocess.Popen([sys.executable, "-m", "mi400plan", "fit", "llama3-70b", "--sku", "all"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=Path(__file__).parent) as p:
        assert p.stdout is not None and p.stderr is not None
        p.stdout.readline()
        p.stdout.close()
        err = p.stderr.read().decode()
        code = p.wait(timeout=60)
    assert code in (0, -13), err  # killed by SIGPIPE (the shell shows 141), or done before the close
    assert "error" not in err.lower() and "Traceback" not in err


def _hf(tmp_path: Path, **over: int) -> Path:
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, **over}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    return f


@pytest.mark.parametrize(("key", "value"), [("num_attention_heads", 1000000000039), ("num_key_value_heads", 10**12),
                                            ("num_hidden_layers", 2147483648), ("hidden_size", 2**40),
                                            ("vocab_size", 2**62), ("intermediate_size", 10**15)])
def test_absurd_hf_sizes_are_refused_quickly(cli, tmp_path, key, value):
    """Class 1 reproducers: a prime head count of 10^12 with --tp 2 (divisor hint), 2^31 layers."""
    f = _hf(tmp_path, **{key: value})
    r = cli(["fit", str(f), "--sku", "mi300x", "--tp", "2"])
    assert r.exit_code == 3
    assert key in r.stderr and "plausible" in r.stderr


def test_divisors_are_sublinear():
    """The divisor list behind layout hints: trial division to sqrt(n) (10^12 + 39 is prime)."""
    from mi400plan.intmath import divisors

    assert divisors(1000000000039) == [1, 1000000000039]
    assert divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert divisors(36, 5) == [1, 2, 3, 4]
    assert divisors(10**12, 8) == [1, 2, 4, 5, 8]
