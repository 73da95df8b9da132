"""Bad input on the command line, through the real entry point (``mi400plan.cli.main``).

Every case ends with a clear message and the documented exit code (2 usage, 3 bad profile or
unknown name), never a traceback; with --json the only output is a JSON error envelope on stdout.
"""

from __future__ import annotations

import json

import pytest

from mi400plan.cli import main

# (argv, exit code). Click-level errors (bad integer, missing option, unknown choice, unknown flag,
# contradictory --json/--format) used to bypass the JSON envelope entirely.
CASES = [
    (["fit", "llama3-70b", "--tp", "abc"], 2),
    (["fit", "llama3-70b", "--format", "csv"], 2),  # contradicts --json (added below)
    (["fit", "llama3-70b", "--mode", "bogus"], 2),
    (["fit", "llama3-70b", "--nosuchflag"], 2),
    (["fit", "llama3-70b", "--tp", "0"], 2),
    (["fit", "llama3-70b", "--tp", "3"], 2),
    (["fit", "llama3-70b", "--reserve", "2XB"], 2),
    (["fit", "nosuch"], 3),
    (["fit", "llama3-70b", "--sku", "mi355"], 3),
    (["fit", "llama3-70b", "--profiles", "/nonexistent-dir"], 3),
    (["comm", "allreduce", "--group", "8", "--sku", "mi355x"], 2),  # missing --size
    (["comm", "allreduce", "--size", "8GiB..1KiB", "--group", "8", "--bw", "300GB/s"], 2),
    (["comm", "allreduce", "--size", "32MB", "--group", "0", "--bw", "300GB/s"], 2),
    (["comm", "allreduce", "--size", "32MB", "--group", "8", "--bw", "300"], 2),
    (["comm", "allreduce", "--size", "32MB", "--group", "8", "--sku", "mi440x"], 3),  # bandwidth n/d
    (["rack", "helios", "--redundancy", "3N"], 2),
    (["rack", "nosuch"], 3),
    (["rack", "helios", "--racks", "2", "--pue", "inf"], 2),  # used to print "x PUE inf = inf MW"
    (["rack", "helios", "--gpu-power-cap", "nan"], 2),
    (["profiles", "list", "--kind", "bogus"], 2),
    (["profiles", "show", "nosuch"], 3),
]


def _run(argv: list[str], capsys) -> tuple[int, str, str]:  # noqa: ANN001
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return int(exc.value.code or 0), out.out, out.err


@pytest.mark.parametrize(("argv", "code"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_json_error_envelope_only(argv: list[str], code: int, capsys) -> None:  # noqa: ANN001
    rc, out, err = _run([*argv, "--json"], capsys)
    assert rc == code, out + err
    env = json.loads(out)  # stdout is exactly one JSON document
    assert env["status"] == "error" and env["data"] is None and env["command"] == argv[0]
    assert env["errors"] and env["errors"][0]["message"]
    assert err == ""


@pytest.mark.parametrize(("argv", "code"), [c for c in CASES if "--format" not in c[0]],
                         ids=[" ".join(a) for a, _ in CASES if "--format" not in a])
def test_table_mode_message_and_code(argv: list[str], code: int, capsys) -> None:  # noqa: ANN001
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert int(exc.value.code) == code
    assert "Traceback" not in out.err + out.out
    assert "error" in out.err.lower()


def test_format_equals_json_is_json(capsys) -> None:  # noqa: ANN001
    rc, out, _ = _run(["fit", "llama3-70b", "--tp", "abc", "--format=json"], capsys)
    assert rc == 2 and json.loads(out)["errors"][0]["code"] == "usage"


def test_json_success_and_check_codes_unchanged(capsys) -> None:  # noqa: ANN001
    # 70.55B params x 18 B/param = 1,270 GB on one 288 GB MI355X: does not fit -> --check exits 4
    rc, out, _ = _run(["fit", "llama3-70b", "--sku", "mi355x", "--json", "--check"], capsys)
    assert rc == 4 and json.loads(out)["status"] == "ok"
    rc, out, _ = _run(["fit", "llama3-70b", "--sku", "mi355x", "--json"], capsys)
    assert rc == 0 and json.loads(out)["data"]["rows"][0]["fits"] is False
