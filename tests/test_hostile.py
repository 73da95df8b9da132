"""Hostile and malformed input (issue 12): one regression test per class of the reproducers.

Each bad input ends with a clear message naming the flag, file or field and the documented exit
code (2 usage, 3 profile or file), never exit 1, a traceback, a hang or a printed NaN/inf.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from mi400plan.cli import main

# Class 5: command-line numbers. (argv, the flag the message must name.)
FLAG_CASES = [
    (["comm", "all-reduce", "--size", "1e999", "--group", "8", "--sku", "mi300x"], "--size"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "1e999", "--sku", "mi300x"], "--group"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "8", "--stride", "1e999", "--sku", "mi300x"], "--stride"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "8", "--bw", "1e999GB/s"], "--bw"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "9223372036854775808", "--sku", "mi300x"], "--group"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "abc", "--sku", "mi300x"], "--group"),
    (["comm", "all-reduce", "--size", "1MB", "--group", "8", "--sku", "mi300x", "--check"], "--check"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--reserve", "1e999GiB"], "reserve"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--capacity-factor", "inf"], "--capacity-factor"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--capacity-factor", "nan"], "--capacity-factor"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--zero", "4"], "--zero"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--grad-dtype", "fp16"], "--grad-dtype"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--gpus", "8.5"], "--gpus"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--tp", "99999999999999999999"], "--tp"),
    (["fit", "llama3-8b", "--sku", "mi300x", "--seq", "0"], "--seq"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--pp", "0"], "--pp"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--micro-batch", "0"], "--micro-batch"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--tp", "0"], "--tp"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--cp", "0"], "--cp"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--ep", "0"], "--ep"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--seq", "0"], "--seq"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8.5"], "--gpus"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--tokens", "0"], "--tokens"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--tokens", "1e999"], "--tokens"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--gpu-hour-cost", "nan"], "--gpu-hour-cost"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--gemm-overhead-us", "-1"], "--gemm-overhead-us"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--grad-dtype", "fp16"], "--grad-dtype"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "8", "--zero", "4"], "--zero"),
    (["sweep", "llama3-8b", "--sku", "mi300x", "--gpus", "9223372036854775808"], "--gpus"),
    (["rack", "helios", "--sku", ""], "--sku"),
    (["rack", "helios", "--gpu-load", "1.5"], "--gpu-load"),
    (["serve", "llama3-8b", "--sku", "mi300x", "--spec-acceptance", "2"], "--spec-acceptance"),
]


@pytest.mark.parametrize(("argv", "flag"), FLAG_CASES, ids=[" ".join(a) for a, _ in FLAG_CASES])
def test_class5_cli_numbers_are_usage_errors_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--json"])
    out = capsys.readouterr().out
    assert exc.value.code == 2, out
    env = json.loads(out)
    assert env["status"] == "error"
    assert flag in env["errors"][0]["message"], env["errors"][0]["message"]


# Class 4: every profile number has a domain. A user profile file, then `profiles validate FILE`.
SKU = """\
name = "x"
display_name = "X"
vendor = "Test"

[memory]
hbm_capacity_gb = {capacity}
hbm_bandwidth_tb_per_s = {bandwidth}

[compute]
bf16_dense_tflops = {tflops}

[power]
tdp_w = {tdp}
"""
GOOD_SKU = {"capacity": "192", "bandwidth": "5.3", "tflops": "1307", "tdp": "750"}
BAD_SKU = [
    ("tflops", "-1"), ("tflops", "0"), ("bandwidth", "-1"), ("capacity", "0"), ("tdp", "-1e9"),
    ("tflops", "1e308"), ("tflops", "true"), ("capacity", "{ low = [1], high = 2, status = \"estimate\" }"),
    ("tflops", "{ nominal = 1, low = -5, high = 2 }"), ("tflops", "nan"), ("tflops", "inf"),
]


def _validate(cli, path) -> tuple[int, dict]:
    r = cli(["profiles", "validate", str(path), "--kind", "accelerators", "--json"])
    return r.exit_code, json.loads(r.stdout)


def test_class4_good_profile_validates(cli, tmp_path):
    f = tmp_path / "x.toml"
    f.write_text(SKU.format(**GOOD_SKU))
    code, env = _validate(cli, f)
    assert code == 0, env


@pytest.mark.parametrize(("key", "value"), BAD_SKU)
def test_class4_profile_numbers_outside_domain_are_refused(cli, tmp_path, key, value):
    f = tmp_path / "x.toml"
    f.write_text(SKU.format(**{**GOOD_SKU, key: value}))
    code, env = _validate(cli, f)
    assert code == 3, env
    assert env["status"] == "error"  # class 8: a failed validation is not "ok"
    assert "x.toml" in json.dumps(env)


@pytest.mark.parametrize(
    ("path_key", "toml"),
    [
        ("gemm_overhead_us", "[efficiency]\ngemm_overhead_us = -1e9\n"),
        ("matmul_bf16", "[efficiency]\nmatmul_bf16 = 1.5\n"),
    ],
)
def test_class4_efficiency_domains(cli, tmp_path, path_key, toml):
    f = tmp_path / "x.toml"
    f.write_text(SKU.format(**GOOD_SKU) + toml)
    code, env = _validate(cli, f)
    assert code == 3 and path_key in json.dumps(env), env


def test_class4_huge_torus_and_bool_voltage_refused(catalog):
    from pydantic import ValidationError

    from mi400plan.specs.fabric import Fabric
    from mi400plan.specs.rack import Feeds

    fabric = catalog.get("fabrics", "ici-v5p").spec.model_dump()
    with pytest.raises(ValidationError):
        Fabric.model_validate({**fabric, "torus_dims": [4096] * 8})
    with pytest.raises(ValidationError, match="boolean"):
        Feeds.model_validate({"count": 2, "voltage_v": True, "current_a": 100})


# Class 6: plan files are validated with field names.
PLAN = """\
[plan]
model = "llama3.1-8b"
sku = "mi300x"
gpus = {gpus}
seq_len = {seq}

[layout]
tp = 1
pp = 1
dp = 8
"""


@pytest.mark.parametrize(
    ("gpus", "seq", "field"),
    [('"eight"', "4096", "gpus"), ("8", "nan", "seq_len"), ("8", "4096.5", "seq_len"), ("16", "4096", "gpus"),
     ("8", "{a=1}", "seq_len"), ("true", "4096", "gpus")],
)
def test_class6_bad_plan_fields_are_exit_3_naming_the_field(cli, tmp_path, gpus, seq, field):
    f = tmp_path / "plan.toml"
    f.write_text(PLAN.format(gpus=gpus, seq=seq))
    r = cli(["fit", "--plan", str(f), "--json"])
    assert r.exit_code == 3, r.output
    assert f"plan.{field}" in json.loads(r.stdout)["errors"][0]["message"]


def test_class6_plan_model_table_is_refused(cli, tmp_path):
    f = tmp_path / "plan.toml"
    f.write_text(PLAN.format(gpus="8", seq="4096").replace('model = "llama3.1-8b"', "model = {a=1}"))
    r = cli(["fit", "--plan", str(f), "--json"])
    assert r.exit_code == 3 and "plan.model" in r.stdout, r.output


def test_class6_good_plan_fits(cli, tmp_path):
    f = tmp_path / "plan.toml"
    f.write_text(PLAN.format(gpus="8", seq="4096"))
    r = cli(["fit", "--plan", str(f), "--json"])
    assert r.exit_code == 0, r.output


# Found by tests/test_fuzz.py; each a plain example of its class.
BUNDLED_RACKS = resources.files("mi400plan") / "profiles" / "racks"


def _user_rack(tmp_path, name: str, edit) -> str:  # noqa: ANN001 - edit: str -> str
    d = tmp_path / "racks"
    d.mkdir(exist_ok=True)
    (d / f"{name}.toml").write_text(edit((BUNDLED_RACKS / f"{name}.toml").read_text()))
    return str(tmp_path)


def _rack_json(cli, argv):  # noqa: ANN001, ANN202
    r = cli([*argv, "--json"])
    return r.exit_code, json.loads(r.stdout)


def test_rack_whose_trays_hold_no_gpu_is_a_profile_error(cli, tmp_path):
    """Was ZeroDivisionError (exit 1): every per-GPU figure divides by the GPUs the trays hold."""

    def no_compute_components(text: str) -> str:
        head, _, rest = text.partition("[[trays]]")
        tray, _, others = rest.partition("[[trays]]")
        return head + "[[trays]]" + tray.split("[[trays.components]]")[0] + "[[trays]]" + others

    p = _user_rack(tmp_path, "hgx-h100", no_compute_components)
    code, env = _rack_json(cli, ["rack", "hgx-h100", "--profiles", p])
    assert code == 3, env
    assert "hgx-h100.toml" in env["errors"][0]["message"] and "no GPU" in env["errors"][0]["message"]


def test_rack_drawing_no_power_is_a_profile_error(cli, tmp_path):
    """Was ZeroDivisionError (exit 1): GPUs per MW divides by the wall power. Every component at 0 W,
    the GPUs too."""

    def zero_watts(text: str) -> str:
        text = re.sub(r"power_w = \{[^\n]*\}", "power_w = 0", text)
        return text.replace('kind = "gpu"\n', 'kind = "gpu"\n  power_w = 0\n')

    p = _user_rack(tmp_path, "hgx-h100", zero_watts)
    code, env = _rack_json(cli, ["rack", "hgx-h100", "--profiles", p])
    assert code == 3, env
    assert "draws power" in env["errors"][0]["message"] and "hgx-h100" in env["errors"][0]["message"]


@pytest.mark.parametrize(
    "feeds", ["2x" + "9" * 400 + "V3ph60A", "2x415V3ph" + "9" * 30 + "A", "9" * 30 + "x415V3ph60A", "2x" + "9" * 5000 + "V3ph60A"]
)
def test_rack_feeds_flag_is_bounded_like_a_profile(cli, feeds):
    """Was InvariantError 'feed_capacity_w is inf' (exit 1), or Python's int-digits limit."""
    code, env = _rack_json(cli, ["rack", "helios", "--feeds", feeds, "--check"])
    assert code == 2, env
    assert "feed set" in env["errors"][0]["message"]


# Racks: a --check against a feed value that is missing or not disclosed never passes.
@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda t: t.replace("current_a = 100\n", ""), "feeds.current_a"),
        (lambda t: t.replace("voltage_v = 415\n", ""), "feeds.voltage_v"),
        (lambda t: t.replace("current_a = 100\n", 'current_a = { status = "n/d" }\n'), "feeds.current_a"),
        (lambda t: re.sub(r"power_factor = \{[^\n]*\}", 'power_factor = { status = "n/d" }', t, count=1),
         "feeds.power_factor is not disclosed"),
        (lambda t: t[: t.index("[feeds]")] + t[t.index("[cooling]"):], "[feeds]"),
    ],
    ids=["no-current", "no-voltage", "current-nd", "power-factor-nd", "no-feeds-table"],
)
def test_rack_check_with_unknown_feed_value_fails_naming_it(cli, tmp_path, edit, field):
    p = _user_rack(tmp_path, "helios", edit)
    code, env = _rack_json(cli, ["rack", "helios", "--check", "--profiles", p])
    assert code == 3, env
    assert env["status"] == "error" and field in env["errors"][0]["message"], env["errors"][0]["message"]


def test_bundled_racks_check_verdict_follows_the_feed_numbers(cli):
    """Every bundled rack has every feed value: --check passes exactly when feeds and air cooling
    carry the nominal load (exit 0), fails with exit 4 otherwise, and a rack whose GPU power is not
    disclosed is exit 3 naming it rather than a pass."""
    for f in BUNDLED_RACKS.iterdir():
        if not f.name.endswith(".toml"):
            continue
        code, env = _rack_json(cli, ["rack", f.name[:-5], "--check"])
        if code == 3:
            assert "not disclosed" in env["errors"][0]["message"], (f.name, env)
            continue
        row = env["data"]["rows"][0]
        assert row["feed_capacity_w"] > 0 and row["feeds"]["usable_w"] == row["feed_capacity_w"], f.name
        assert (row["feed_capacity_w"] >= row["wall_power_w"]) == row["feeds_ok"], f.name
        assert code == (0 if row["feeds_ok"] and row["cooling_ok"] else 4), (f.name, code)


def test_nearest_working_gpu_counts_scan_is_bounded():
    """Was a hang: sweep --gpus 16777216 (in range) with no valid layout scanned every multiple of 8
    from half to twice the count for a nearest working size, over a million searches."""
    from mi400plan.api.sweep import nearest_candidates

    below, above = nearest_candidates(2**24)
    assert below[:3] == [2**24 - 8, 2**24 - 16, 2**24 - 24] and above[:2] == [2**24 + 8, 2**24 + 16]
    assert below[:16] == [2**24 - 8 * k for k in range(1, 17)]  # the 16 nearest, one by one
    assert len(below) == len(above) == 64  # of 1,048,576 and 2,097,152 multiples of 8
    assert below == sorted(below, reverse=True) and above == sorted(above)
    assert (below[-1], above[-1]) == (2**23, 2**25)  # still reaching half and twice the count
    # up to 64 multiples on a side are all tried (1,000: 62 below, 63 above), as before
    assert nearest_candidates(1000)[0] == list(range(992, 499, -8))
    assert nearest_candidates(64) == ([56, 48, 40, 32], [72, 80, 88, 96, 104, 112, 120, 128])


def test_sweep_at_the_largest_gpu_count_answers(cli):
    # at 512 sequences no layout fills 2^24 GPUs, so the answer names the nearest counts that work
    args = ["sweep", "llama3.1-405b", "--sku", "mi300x", "--gpus", "16777216", "--no-ranges", "--json"]
    r = cli([*args, "--global-batch", "512"])
    assert r.exit_code == 0, r.output
    assert "nearest GPU counts that work" in " ".join(json.loads(r.stdout)["data"]["warnings"])
    # the planned batch stops at its bound (B_opt) and says the pipeline is still starved
    r = cli(args)
    assert r.exit_code == 0, r.output
    assert "leaves the cluster mostly idle" in " ".join(json.loads(r.stdout)["data"]["warnings"])


@pytest.mark.slow  # bounded, but about 10 s
def test_calibration_work_is_bounded_when_the_runs_disagree_with_the_model(cli, tmp_path):
    """Was 100 Levenberg-Marquardt iterations crawling along a ridge (a run's DP halved: 10 s for
    five runs, 46 s on a loaded machine). The iterations are capped; the calibration still answers."""
    import numpy as np

    from mi400plan.calibrate import LM_MAX_ITER, least_squares

    calls = []

    def rosenbrock(x):  # the classic curved valley: Levenberg-Marquardt creeps along it
        calls.append(1)
        return np.array([10.0 * (x[1] - x[0] ** 2), 1.0 - x[0]])

    least_squares(rosenbrock, [-1.2, 1.0], [-5.0, -5.0], [5.0, 5.0], [1.0, 1.0])
    assert len(calls) <= 1 + (LM_MAX_ITER + 1) * 3  # residuals + 2-column Jacobian per accepted step

    text = (Path(__file__).parent / "data" / "calibrate" / "runs.toml").read_text()
    f = tmp_path / "runs.toml"
    f.write_text(text.replace("dp = 8\n", "dp = 4\n", 1))
    r = cli(["calibrate", str(f), "--sku", "mi355x", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "ok"


@pytest.mark.parametrize(
    ("line", "value"),
    [("hbm_usable = { nominal = 205822885888,", "0"), ("hbm_usable = { nominal = 205822885888,", "-1"),
     ("hbm_capacity = { nominal = 192,", "0"), ("hbm_capacity = { nominal = 192,", "1e7")],
)
def test_memory_capacity_with_a_unit_has_a_domain(cli, tmp_path, line, value):
    """Was ZeroDivisionError (exit 1) in fit: capacities written with their unit had no domain."""
    d = tmp_path / "accelerators"
    d.mkdir()
    key = line.split(" =")[0]
    (d / "mi300x.toml").write_text(
        (resources.files("mi400plan") / "profiles" / "accelerators" / "mi300x.toml").read_text().replace(
            line, line.split("nominal = ")[0] + f"nominal = {value},"))
    r = cli(["fit", "llama3.1-8b", "--sku", "mi300x", "--profiles", str(tmp_path), "--json"])
    assert r.exit_code == 3, r.output
    message = json.loads(r.stdout)["errors"][0]["message"]
    assert f"memory.{key}" in message and "at most 1 PiB" in message, message


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [("step_time_s = 6.002", "step_time_s = 5e-324", "step_time_s"),
     ("step_time_s = 6.002", "tflops_per_gpu = 5e-324", "tflops_per_gpu")],
)
def test_calibration_measurements_have_a_lower_bound(cli, tmp_path, old, new, field):
    """Was an internal error (overflow in a divide): a denormal step time is positive but the model's
    time over it is not a float."""
    f = tmp_path / "runs.toml"
    f.write_text((Path(__file__).parent / "data" / "calibrate" / "runs.toml").read_text().replace(old, new))
    r = cli(["calibrate", str(f), "--sku", "mi355x", "--json"])
    assert r.exit_code == 3, r.output
    assert field in json.loads(r.stdout)["errors"][0]["message"]


def test_nccl_log_time_has_a_lower_bound(cli, tmp_path):
    f = tmp_path / "all_reduce_perf.txt"
    f.write_text((Path(__file__).parent / "data" / "calibrate" / "all_reduce_perf.txt").read_text().replace(
        "  316.88  ", "  5e-324  ", 1))
    r = cli(["calibrate", str(f), "--sku", "mi355x", "--json"])
    assert r.exit_code == 3, r.output
    assert "0.001 to 1e12" in json.loads(r.stdout)["errors"][0]["message"]


@pytest.mark.parametrize("args", [
    ["fit", "llama3-70b", "--sku", "mi300x", "--profiles", ""],
    ["sweep", "llama3-70b", "--sku", "mi300x", "--gpus", "64", "--save", ""],
    ["profiles", "validate", ""],
    ["fit", "llama3-70b", "--sku", "mi300x", "--plot", ""],
])
def test_an_empty_path_is_a_usage_error_not_the_current_directory(cli, args) -> None:
    """``Path("")`` is ``.``: an empty --profiles would read the current directory's files as profiles,
    an empty --save would name it as the plan file. Each is exit 2 naming the option."""
    r = cli(args)
    assert r.exit_code == 2, r.output
    assert "empty" in r.output
