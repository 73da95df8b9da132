"""``mi400plan profiles list | show | validate`` through the CLI: exit codes, JSON envelope, messages."""

from __future__ import annotations

import json
import re

ENVELOPE_KEYS = {"schema_version", "command", "status", "data", "errors"}

GOOD = """\
name = "{name}"
display_name = "{display}"
vendor = "Test"

[memory]
hbm_capacity_gb = {capacity}
hbm_bandwidth_tb_per_s = 1.0
"""


def _json(result) -> dict:
    env = json.loads(result.stdout)
    assert set(env) == ENVELOPE_KEYS
    assert env["command"] == "profiles"
    assert env["schema_version"] == 1
    return env


# --- list -------------------------------------------------------------------------------------------
def test_list_json(cli):
    r = cli(["profiles", "list", "--json"])
    assert r.exit_code == 0, r.output
    env = _json(r)
    assert env["status"] == "ok" and env["errors"] == []
    data = env["data"]
    assert data["action"] == "list"
    rows = {(row["kind"], row["name"]): row for row in data["rows"]}
    helios = rows[("accelerators", "mi455x")]
    assert helios["aliases"] == ["mi400x", "mi450x"]
    assert helios["origin"] == "bundled"
    assert helios["status"]["conflict"] == 0  # capacity, bandwidth and FP4 basis settled by AMD in 2026
    assert helios["status"]["estimate"] == 4  # TDP, the BF16 / FP8 ceilings and the expert host time from MI355X
    assert "R1" in helios["sources"] and "R10" in helios["sources"] and "S003" in helios["sources"]
    assert helios["error"] is None


def test_list_kind_table(cli):
    r = cli(["profiles", "list", "--kind", "accelerators"])
    assert r.exit_code == 0, r.output
    assert "mi455x" in r.stdout and "tpu7x" in r.stdout
    assert "bundled" not in r.stdout  # origin, aliases, sources and notes: --wide
    assert "bundled" in cli(["profiles", "list", "--kind", "accelerators", "--wide"]).stdout


def test_list_bad_kind_is_usage_error(cli):
    r = cli(["profiles", "list", "--kind", "gpus"])
    assert r.exit_code == 2


def test_list_user_dir_override(cli, tmp_path, write_profile):
    write_profile(tmp_path, "accelerators", "mi300x", GOOD.format(name="mi300x", display="Lab MI300X", capacity=100))
    r = cli(["profiles", "list", "--kind", "accelerators", "--json", "--profiles", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = {row["name"]: row for row in _json(r)["data"]["rows"]}
    assert rows["mi300x"]["origin"] == "user"
    assert rows["mi300x"]["display_name"] == "Lab MI300X"
    assert rows["mi300x"]["path"] == str(tmp_path / "accelerators" / "mi300x.toml")
    assert rows["mi355x"]["origin"] == "bundled"


# --- show -------------------------------------------------------------------------------------------
def test_show_alias_json(cli):
    r = cli(["profiles", "show", "mi400x", "--json"])
    assert r.exit_code == 0, r.output
    data = _json(r)["data"]
    assert data["action"] == "show"
    assert (data["kind"], data["name"]) == ("accelerators", "mi455x")
    assert data["path"].endswith("accelerators/mi455x.toml")
    rows = {row["field"]: row for row in data["rows"]}
    bw = rows["memory.hbm_bandwidth_tb_per_s"]
    assert (bw["value"], bw["low"], bw["high"], bw["unit"], bw["status"]) == (23.3, None, None, "TB/s", "disclosed")
    assert bw["sources"] == ["R10", "R1"]
    assert rows["compute.fp4_dense_tflops"]["unit"] == "TFLOP/s"
    assert rows["power.tdp_w"]["unit"] == "W"
    assert rows["interconnect.scale_up_fabric"]["text"] == "helios-ualoe72"
    assert "S003" in data["sources"]


def test_show_gib_unit(cli):
    r = cli(["profiles", "show", "ironwood", "--kind", "accelerators", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["field"]: row for row in _json(r)["data"]["rows"]}
    assert rows["memory.hbm_capacity"]["unit"] == "GiB"
    assert rows["memory.hbm_capacity"]["value"] == 192


def test_show_table_has_path_and_fields(cli):
    r = cli(["profiles", "show", "mi355x", "--ascii"])
    assert r.exit_code == 0, r.output
    assert "mi355x.toml (bundled)" in r.stdout
    assert re.search(r"^compute\s*$", r.stdout, re.M)  # the section's table, its fields under it
    assert re.search(r"^bf16_dense_tflops +2,516.6 +TFLOP/s", r.stdout, re.M)
    assert "2,300" in r.stdout  # in a note under the compute table
    assert "2025" in r.stdout and "2,025" not in r.stdout  # a year, not a quantity


def test_show_all_includes_defaults(cli):
    plain = _json(cli(["profiles", "show", "a100", "--json"]))["data"]["rows"]
    full = _json(cli(["profiles", "show", "a100", "--all", "--json"]))["data"]["rows"]
    assert "compute.fp6_dense_tflops" not in {r["field"] for r in plain}
    assert "compute.fp6_dense_tflops" in {r["field"] for r in full}


def test_show_unknown_name_suggests(cli):
    r = cli(["profiles", "show", "mi355"])
    assert r.exit_code == 3
    assert "mi355x" in r.output
    rj = cli(["profiles", "show", "mi355", "--json"])
    assert rj.exit_code == 3
    env = _json(rj)
    assert env["status"] == "error" and env["data"] is None
    assert env["errors"][0]["code"] == "unknown_name"
    assert "mi355x" in env["errors"][0]["message"]


def test_show_ambiguous_name_lists_kinds(cli, tmp_path, write_profile):
    write_profile(tmp_path, "fabrics", "mi300x", 'name = "mi300x"\n')
    r = cli(["profiles", "show", "mi300x", "--profiles", str(tmp_path)])
    assert r.exit_code == 2
    assert "accelerators" in r.output and "fabrics" in r.output
    r2 = cli(["profiles", "show", "mi300x", "--kind", "accelerators", "--profiles", str(tmp_path), "--json"])
    assert r2.exit_code == 0, r2.output
    assert _json(r2)["data"]["origin"] == "bundled"


# --- validate ---------------------------------------------------------------------------------------
def test_validate_catalog_ok(cli):
    r = cli(["profiles", "validate", "--json"])
    assert r.exit_code == 0, r.output
    data = _json(r)["data"]
    assert data["action"] == "validate"
    assert data["failed"] == 0
    assert data["checked"] >= 17
    assert all(row["ok"] for row in data["rows"])


def test_validate_bad_file_reports_line(cli, tmp_path, write_profile):
    text = 'name = "bad"\ndisplay_name = "Bad"\nvendor = \n'  # line 3: missing value
    p = write_profile(tmp_path, "accelerators", "bad", text)
    r = cli(["profiles", "validate", str(p)])
    assert r.exit_code == 3
    assert f"{p}:3" in r.output
    rj = cli(["profiles", "validate", str(p), "--json"])
    assert rj.exit_code == 3
    env = _json(rj)
    assert env["status"] == "error"  # a failed validation is a failed request (README: envelope)
    assert env["errors"] and env["errors"][0]["code"] == "bad_profile"
    assert env["data"]["failed"] == 1
    issue = env["data"]["rows"][0]["issues"][0]
    assert issue["line"] == 3 and issue["path"] == str(p)


def test_validate_field_error_reports_field_and_line(cli, tmp_path, write_profile):
    text = GOOD.format(name="neg", display="Neg", capacity='"lots"')  # line 6
    p = write_profile(tmp_path, "accelerators", "neg", text)
    rj = cli(["profiles", "validate", str(tmp_path), "--json"])
    assert rj.exit_code == 3
    issue = _json(rj)["data"]["rows"][0]["issues"][0]
    assert issue["field"] == "memory.hbm_capacity_gb"
    assert issue["line"] == 6
    assert issue["path"] == str(p)


def test_validate_name_must_match_file(cli, tmp_path, write_profile):
    p = write_profile(tmp_path, "accelerators", "foo", GOOD.format(name="bar", display="Bar", capacity=1))
    r = cli(["profiles", "validate", str(p)])
    assert r.exit_code == 3
    assert "does not match its file name" in r.output


def test_validate_consistency_check(cli, tmp_path, write_profile):
    text = GOOD.format(name="odd", display="Odd", capacity=1) + "\n[compute]\nfp8_dense_tflops = 10\nfp8_sparse_tflops = 5\n"
    p = write_profile(tmp_path, "accelerators", "odd", text)
    r = cli(["profiles", "validate", str(p)])
    assert r.exit_code == 3
    assert "fp8_sparse_tflops" in r.output


def test_validate_kind_from_option(cli, tmp_path):
    p = tmp_path / "loose.toml"
    p.write_text(GOOD.format(name="loose", display="Loose", capacity=1), encoding="utf-8")
    r = cli(["profiles", "validate", str(p)])
    assert r.exit_code == 3
    assert "--kind" in r.output
    r2 = cli(["profiles", "validate", str(p), "--kind", "accelerators"])
    assert r2.exit_code == 0, r2.output
    assert "all valid" in r2.stdout


def test_validate_good_user_dir_and_missing_path(cli, tmp_path, write_profile):
    write_profile(tmp_path, "accelerators", "ok1", GOOD.format(name="ok1", display="Ok", capacity=1))
    r = cli(["profiles", "validate", str(tmp_path)])
    assert r.exit_code == 0, r.output
    r2 = cli(["profiles", "validate", str(tmp_path / "nope")])
    assert r2.exit_code == 3
    assert "no such file" in r2.output


def test_validate_catalog_with_bad_user_profile(cli, tmp_path, write_profile):
    write_profile(tmp_path, "accelerators", "mi300x", 'name = "mi300x"\n[memory\n')  # line 2: bad table header
    r = cli(["profiles", "validate", "--profiles", str(tmp_path), "--json"])
    assert r.exit_code == 3
    data = _json(r)["data"]
    bad = [row for row in data["rows"] if not row["ok"]]
    assert [(b["name"], b["origin"]) for b in bad] == [("mi300x", "user")]
    assert bad[0]["issues"][0]["line"] == 2


def test_validate_alias_clash(cli, tmp_path, write_profile):
    text = 'name = "myacc"\naliases = ["mi355x"]\n' + GOOD.format(name="x", display="X", capacity=1).split("\n", 1)[1]
    write_profile(tmp_path, "accelerators", "myacc", text)
    r = cli(["profiles", "validate", "--kind", "accelerators", "--profiles", str(tmp_path)])
    assert r.exit_code == 3
    assert "'mi355x' is claimed by several" in r.output


def test_show_at_80_columns_drops_no_column(cli, monkeypatch) -> None:  # noqa: ANN001
    # The field path column used to squeeze Status and Sources to one letter per line.
    monkeypatch.setenv("COLUMNS", "80")
    r = cli(["profiles", "show", "mi440x"])
    assert r.exit_code == 0, r.output
    assert "\u2026" not in r.stdout
    # one table per section, each with the columns its fields use; long notes under the table
    assert all(len(ln.rstrip()) <= 80 for ln in r.stdout.splitlines())
    for col in ("Value", "Unit", "Status", "Sources", "Note"):
        assert col in r.stdout.split()
    assert re.search(r"^memory\s*$", r.stdout, re.M) and re.search(r"^hbm_capacity\s", r.stdout, re.M)


def test_missing_file_path_says_no_such_file(cli) -> None:  # noqa: ANN001
    # A path that does not exist used to be reported as "unknown model '/x/config.json'" with the
    # catalog names, as if it were a misspelt profile name.
    r = cli(["fit", "/nonexistent/config.json", "--json"])
    assert r.exit_code == 3
    err = json.loads(r.stdout)["errors"][0]
    assert err["code"] == "bad_profile"
    assert err["message"].startswith("/nonexistent/config.json: no such file")
    r = cli(["rack", "./racks/nosuch.toml"])
    assert r.exit_code == 3 and "no such file" in r.output


def test_csv_columns_are_the_json_row_fields(cli, tmp_path, csv_matches_json) -> None:  # noqa: ANN001
    for args in (["profiles", "list"], ["profiles", "show", "mi300x"], ["profiles", "validate"]):
        header, json_keys, _ = csv_matches_json(args)
        assert sorted(header) == sorted(json_keys), args
