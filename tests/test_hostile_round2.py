"""Hostile input, round two: the commands added since the first round (cost, budget, serve, calibrate,
``fit --largest``, ``--save``) and the profile cache. One regression test per class; each bad input ends
with a clear message naming the flag, file, line or field and the documented exit code (2 usage,
3 profile or file), never exit 1, a traceback, a hang, a file destroyed or a printed NaN/inf.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from mi400plan.cli import main


def _json(argv: list[str], capsys) -> tuple[int, dict]:  # noqa: ANN001
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--json"])
    out = capsys.readouterr().out
    return exc.value.code, json.loads(out)


def _message(env: dict) -> str:
    return env["errors"][0]["message"] if env["errors"] else ""


# --- class 4: an implausible COLUMNS is an unknown width, not a zero-width table ---------------------


@pytest.mark.parametrize("columns", ["0", "1", "99999999", "-5", "wide"])
def test_an_implausible_columns_prints_the_tables_at_the_default_width(cli, columns):
    res = cli(["fit", "llama3-8b", "--sku", "mi355x"], env={"COLUMNS": columns})
    assert res.exit_code == 0
    lines = res.stdout.splitlines()
    assert any("verdict" in line for line in lines), res.stdout
    # Unknown width: output that is not a terminal prints at the tables' natural width, the same as
    # with COLUMNS unset (the width rule, render.table.output_width).
    assert res.stdout == cli(["fit", "llama3-8b", "--sku", "mi355x"], env={"COLUMNS": ""}).stdout


# --- class 7: --save never damages a file it was not asked to replace --------------------------------


def test_write_atomic_creates_exclusively_when_not_replacing(tmp_path):
    """The name is taken between the up-front check and the write (another run saving the same path):
    the second writer fails with FileExistsError and the first writer's file is intact."""
    from mi400plan.fileio import write_atomic

    target = tmp_path / "race.toml"

    def write(fh):  # noqa: ANN001, ANN202
        target.write_text("the other run's plan\n")  # the race: created while this run writes
        fh.write(b"this run's plan\n")

    with pytest.raises(FileExistsError):
        write_atomic(target, write, replace=False)
    assert target.read_text() == "the other run's plan\n"
    assert [p.name for p in tmp_path.iterdir()] == ["race.toml"]  # no temporary file left behind


def test_two_concurrent_exclusive_writes_one_wins(tmp_path):
    from mi400plan.fileio import write_atomic

    target = tmp_path / "race.toml"
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def writer(tag: str) -> None:
        def write(fh):  # noqa: ANN001, ANN202
            barrier.wait(timeout=10)  # both have checked and are writing
            fh.write(tag.encode())

        try:
            write_atomic(target, write, replace=False)
            outcomes.append("ok " + tag)
        except FileExistsError:
            outcomes.append("refused " + tag)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.split()[0] for o in outcomes) == ["ok", "refused"]
    winner = next(o.split()[1] for o in outcomes if o.startswith("ok"))
    assert target.read_text() == winner


@pytest.mark.parametrize("force", [False, True])
def test_save_over_a_fifo_is_refused_and_the_fifo_kept(tmp_path, capsys, force):
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)
    argv = ["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--save", str(fifo)]
    code, env = _json(argv + (["--force"] if force else []), capsys)
    assert code == 2
    assert str(fifo) in _message(env)
    assert fifo.is_fifo()


def test_replace_never_replaces_a_device_or_a_link(tmp_path):
    from mi400plan.fileio import NotRegularFileError, write_atomic

    link = tmp_path / "null.toml"
    link.symlink_to("/dev/null")
    with pytest.raises(NotRegularFileError, match="symbolic link"):
        write_atomic(link, lambda fh: fh.write(b"x"), replace=True)
    assert link.is_symlink()
    if os.path.exists("/dev/null"):
        with pytest.raises(NotRegularFileError, match="device"):
            write_atomic("/dev/null", lambda fh: fh.write(b"x"), replace=True)


def test_save_and_plot_on_one_path_are_refused_before_any_work(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    same = tmp_path / "same.svg"
    argv = ["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--save", str(same), "--plot", str(same)]
    code, env = _json(argv, capsys)
    assert code == 2 and "same file" in _message(env)
    assert not same.exists()


def test_calibrate_save_over_a_fifo_is_refused(tmp_path):
    """The profile a calibration would write is a FIFO: refused with --force too, the FIFO kept."""
    from mi400plan.api.calibrate import save_profiles

    class Fit:  # what save_profiles reads of a fit: the file it would write, no parameter at a bound
        kind, name = "accelerators", "mi300x"
        params: list = []
        points: list = []

        def fitted_values(self):  # noqa: ANN202
            return {"x": 1}

    (tmp_path / "accelerators").mkdir()
    fifo = tmp_path / "accelerators" / "mi300x.toml"
    os.mkfifo(fifo)
    from mi400plan.errors import UsageError

    with pytest.raises(UsageError, match="FIFO"):
        save_profiles(None, [Fit()], [], str(tmp_path), True, "2026-01-01")
    assert fifo.is_fifo()


# --- class 1: tiny positive (and huge) physical inputs are refused by a plausible bound --------------

TINY_FLAGS = [
    (["cost", "mi355x", "--tokens-per-s", "1e-310"], "--tokens-per-s", "0.001"),
    (["cost", "mi355x", "--tokens-per-s", "1e300"], "--tokens-per-s", "1,000,000,000"),
    (["budget", "--sku", "mi355x", "--gpus", "1024", "--flops", "5e-324"], "--flops", "1e+15"),
    (["budget", "--sku", "mi355x", "--gpus", "1024", "--flops", "1e40"], "--flops", "1e+32"),
    (["budget", "--sku", "mi355x", "--gpus", "1024", "--days", "30d", "--mfu", "5e-324"], "--mfu", "0.001"),
    (["cost", "mi355x", "--depreciation-years", "5e-324"], "--depreciation-years", "0.1"),
    (["cost", "mi355x", "--gpu-load", "1e-300"], "--gpu-load", "0.001"),
    (["serve", "llama3-8b", "--sku", "mi355x", "--hbm-efficiency", "1e-300"], "--hbm-efficiency", "0.001"),
    (["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--tokens", "1e-300"], "--tokens", "1"),
]


@pytest.mark.parametrize(("argv", "flag", "bound"), TINY_FLAGS, ids=[" ".join(a) for a, _, _ in TINY_FLAGS])
def test_physical_flags_have_a_plausible_lower_and_upper_bound_named_in_the_error(argv, flag, bound, capsys):
    code, env = _json(argv, capsys)
    assert code == 2, env
    msg = _message(env)
    assert flag in msg and bound in msg, msg


SITE = """name = "tiny"
currency = "USD"
year = 2025
[site]
depreciation_years = {dep}
cost_of_capital = 0.08
electricity_price_per_kwh = 0.08
pue = 1.3
facility_capex_per_mw = 10000000
facility_life_years = {life}
operating_cost_per_kw_month = 10
colocation_per_kw_month = 150
network_capex_per_gpu = 2000
gpu_load = 0.8
grid_kg_co2e_per_kwh = 0.4
"""


@pytest.mark.parametrize(("dep", "life", "field"), [("5e-324", "15", "depreciation_years"),
                                                     ("5", "5e-324", "facility_life_years"),
                                                     ("5", "1e6", "facility_life_years")])
@pytest.mark.parametrize("command", [["cost", "mi355x"], ["serve", "llama3-8b", "--sku", "mi355x"],
                                     ["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--tokens", "1T"]])
def test_site_profile_lives_have_plausible_bounds(tmp_path, capsys, dep, life, field, command):
    site = tmp_path / "tiny.toml"
    site.write_text(SITE.format(dep=dep, life=life))
    code, env = _json([*command, "--site", str(site)], capsys)
    assert code == 3, env
    msg = _message(env)
    assert field in msg and "[0.1, 100]" in msg, msg


@pytest.mark.parametrize(("key", "value", "bound"), [("bf16_dense_tflops", "1e-300", "[0.001, 1e+07]"),
                                                     ("hbm_bandwidth_tb_per_s", "1e-300", "[0.001, 1000]"),
                                                     ("hbm_bandwidth_tb_per_s", "1e9", "[0.001, 1000]")])
def test_accelerator_peaks_and_bandwidth_have_plausible_bounds(tmp_path, capsys, key, value, bound):
    from importlib import resources

    text = (resources.files("mi400plan") / "profiles" / "accelerators" / "mi355x.toml").read_text()
    import re

    text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text, count=1)
    path = tmp_path / "accelerators" / "slow.toml"
    path.parent.mkdir()
    path.write_text(text.replace('name = "mi355x"', 'name = "slow"', 1))
    code, env = _json(["sweep", "llama3-8b", "--sku", str(path), "--gpus", "8", "--tokens", "1T"], capsys)
    assert code == 3, env
    msg = _message(env)
    assert key in msg and bound in msg, msg


def test_a_non_finite_result_is_a_validation_error_naming_the_numbers_given(monkeypatch, capsys):
    """The finite-result guard: whatever arithmetic escapes the bounds (here a forced overflow) ends as
    exit 2 naming the command line's numbers, not exit 1."""
    import mi400plan.api.cost as api_cost

    def overflow(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise OverflowError("(34, 'Numerical result out of range')")

    monkeypatch.setattr(api_cost, "cost", overflow)
    code, env = _json(["cost", "mi355x", "--tokens-per-s", "1000"], capsys)
    assert code == 2, env
    assert "--tokens-per-s 1000" in _message(env)


# --- class 3: calibrate's inputs at their documented maxima answer in seconds -----------------------

DATA = Path(__file__).parent / "data" / "calibrate"


def test_an_nccl_log_of_100000_one_gpu_hosts_parses_in_linear_time(tmp_path):
    """Counting ranks per host was quadratic (minutes for 100,000 hosts); it is one pass now."""
    import time

    from mi400plan.measurements import read_nccl_log

    lines = ["# Collective test starting: all_reduce_perf"]
    lines += [f"#  Rank {r:6d} Group  0 Pid {r} on host{r:06d} device  0 [0x00] MI300X" for r in range(100_000)]
    lines += ["#  size  count  type  redop  root  time  algbw  busbw  #wrong",
              "1048576 262144 float sum -1 50.0 20.0 40.0 0"]
    t0 = time.perf_counter()
    log = read_nccl_log(tmp_path / "all_reduce_perf.txt", "\n".join(lines))
    assert time.perf_counter() - t0 < 20.0  # quadratic counting took minutes
    assert (log.ranks, log.hosts, log.ranks_per_host, log.even) == (100_000, 100_000, 1, True)


def _runs_copies(tmp_path: Path, copies: int) -> Path:
    head, *runs = (DATA / "runs.toml").read_text().split("[[run]]")
    text = head + "".join(f"[[run]]{r}" for _ in range(copies) for r in runs)
    path = tmp_path / f"runs{copies}.toml"
    path.write_text(text)
    return path


@pytest.mark.slow  # calibrates 5 and 200 runs: 2-6 s
def test_the_fit_prices_each_workload_once_per_step_whatever_the_run_count(catalog, tmp_path, monkeypatch):
    """1,000 runs (the documented maximum) of a few workloads cost what those workloads cost: the runs of
    one workload are priced in one vectorized step-time call, so 40 copies of a 5-run file make about as
    many calls as the file itself or fewer (the solver's path to the same minimum may take more or fewer
    iterations on the larger sum of squares: the 5 runs take 360 calls, their 40 copies 200), with the
    same fitted values."""
    from mi400plan import search
    from mi400plan.api.calibrate import calibrate

    calls = {"n": 0}
    real = search.step_time

    def counting(*a, **k):  # noqa: ANN002, ANN003, ANN202
        calls["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(search, "step_time", counting)
    one = calibrate(catalog, [str(_runs_copies(tmp_path, 1))])
    n_one, calls["n"] = calls["n"], 0
    many = calibrate(catalog, [str(_runs_copies(tmp_path, 40))])
    assert len(many.rows) == 40 * len(one.rows)
    assert calls["n"] <= 1.25 * n_one, (calls["n"], n_one)  # run by run it was 40 x
    fitted = [(p.key, p.value) for p in one.params if p.value is not None]
    assert fitted and [(p.key, p.value) for p in many.params if p.value is not None] == [
        (k, pytest.approx(v, rel=1e-4)) for k, v in fitted]


def test_the_solver_iterations_are_cut_to_the_evaluation_budget():
    from mi400plan import calibrate as cal

    for groups in range(1, cal.MAX_WORKLOADS + 1):
        for free in range(1, 5):
            it = cal._max_iter(groups, free)
            assert 3 <= it <= cal.LM_MAX_ITER
            # pricings of one solve: 8 before it, the Jacobian at the start, then 1 + free per iteration
            assert groups * (8 + free + it * (1 + free)) <= cal.EVAL_BUDGET
    assert cal._max_iter(1, 4) == cal.LM_MAX_ITER


def test_more_distinct_workloads_than_the_bound_is_a_usage_error(cli, monkeypatch, capsys):
    from mi400plan import calibrate as cal

    monkeypatch.setattr(cal, "MAX_WORKLOADS", 2)
    code, env = _json(["calibrate", str(DATA / "runs.toml")], capsys)
    assert code == 2
    assert "distinct workloads" in _message(env) and "at most 2" in _message(env)


# --- class 5: combinations Megatron-Core refuses are refused, never priced -------------------------


@pytest.mark.parametrize(("extra", "words"), [
    (["--pp", "4", "--gpus", "8"], "pipeline parallelism (PP 4)"),
    (["--recompute", "full"], "recomputation (recompute full)"),
    (["--recompute", "selective"], "recomputation (recompute selective)"),
    (["--offload-layers", "32"], "at most 31 of the model's 32 layers"),
])
def test_fit_refuses_offloading_where_megatron_core_does(capsys, extra, words):
    argv = ["fit", "llama3-8b", "--sku", "mi355x", "--offload-layers", "4", *extra]
    code, env = _json(argv, capsys)
    assert code == 2, env
    assert words in _message(env), _message(env)


def test_sweep_never_proposes_offloading_with_pp_or_recomputation(capsys):
    code, env = _json(["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "16", "--offload-layers", "4",
                       "--no-ranges", "--top", "50"], capsys)
    assert code == 0
    rows = env["data"]["rows"]
    assert rows and all(r["layout"]["pp"] == 1 and r["layout"]["recompute"] == "none" for r in rows)
    assert env["data"]["rejected"]["offload-runtime"] > 0


RUN = """sku = "mi355x"
[[run]]
model = "llama3.1-8b"
tp = 1
micro_batch = 1
seq_len = 4096
global_batch = 64
step_time_s = 5.0
"""


@pytest.mark.parametrize(("lines", "words"), [
    ("pp = 4\ndp = 2\noffload_layers = 4\n", "pipeline parallelism"),
    ('dp = 8\noffload_layers = 4\nrecompute = "full"\n', "recomputation"),
    ("dp = 8\noffload_layers = 32\n", "at most 31 of the model's 32 layers"),
])
def test_calibrate_refuses_runs_megatron_core_cannot_have_made(tmp_path, capsys, lines, words):
    """Like fit: PP with offloading, recomputation with offloading, every layer offloaded."""
    runs = tmp_path / "runs.toml"
    runs.write_text(RUN + lines)
    code, env = _json(["calibrate", str(runs)], capsys)
    assert code == 3, env
    msg = _message(env)
    assert words in msg and f"{runs}:2" in msg, msg




# --- class 6: calibrate fits only runs the model can have made, and saves only fits that match ------


def test_a_run_beyond_the_model_maximum_context_is_refused_naming_its_line(tmp_path, capsys):
    runs = tmp_path / "runs.toml"
    runs.write_text(RUN.replace("seq_len = 4096", "seq_len = 10000000") + "dp = 8\n")
    code, env = _json(["calibrate", str(runs)], capsys)
    assert code == 3, env
    msg = _message(env)
    assert f"{runs}:2 [seq_len]" in msg and "131,072" in msg, msg


@pytest.mark.slow  # two calibration fits pinned at a bound: 3-10 s
def test_a_fit_that_only_matches_at_a_bound_is_refused_and_nothing_saved(tmp_path, capsys):
    """Step times of 50 ms for runs the model prices at seconds: the fit pins the matmul efficiency at
    its upper bound (1.0) and is still far off. Shown with a warning; --save refuses it (exit 3)."""
    text = (DATA / "runs.toml").read_text()
    import re

    fast = tmp_path / "fast.toml"
    fast.write_text(re.sub(r"step_time_s = [0-9.]+", "step_time_s = 0.05", text))
    code, env = _json(["calibrate", str(fast)], capsys)
    assert code == 0
    assert any("would not be saved" in w and "at its bound" in w for w in env["data"]["warnings"]), env["data"]["warnings"]
    out = tmp_path / "saved"
    code, env = _json(["calibrate", str(fast), "--save", str(out)], capsys)
    assert code == 3, env
    assert "refused and nothing is saved" in _message(env) and str(fast) in _message(env)
    assert not out.exists()


def test_the_refusal_rule_by_hand():
    """Residuals past 50 % refuse a fit even inside the bounds; a bound value refuses it even with no residual."""
    from mi400plan.calibrate import FABRIC_PARAMS, MAX_ABS_RESIDUAL, ParamFit, PointFit, ProfileFit, refusal

    eff, lat = FABRIC_PARAMS
    inside = [ParamFit(eff, 0.9, 0.8), ParamFit(lat, 2.0, 3.0)]
    assert refusal(ProfileFit("fabrics", "f", inside, [PointFit(1.0, 1.0, 1.4)])) is None
    assert MAX_ABS_RESIDUAL == 0.5
    assert "off by 60%" in refusal(ProfileFit("fabrics", "f", inside, [PointFit(1.0, 1.0, 1.6)]))
    pinned = [ParamFit(eff, 0.9, 1.0), ParamFit(lat, 2.0, 3.0)]
    assert "efficiency = 1 is at its bound" in refusal(ProfileFit("fabrics", "f", pinned, [PointFit(1.0, 1.0, 1.0)]))


# --- class 8: one answer for one question ------------------------------------------------------------


def test_fit_refuses_nvfp4_where_serve_does(capsys):
    fit_code, fit_env = _json(["fit", "llama3-8b", "--sku", "mi300x", "--mode", "infer", "--precision", "nvfp4"], capsys)
    serve_code, serve_env = _json(["serve", "llama3-8b", "--sku", "mi300x", "--precision", "nvfp4"], capsys)
    assert fit_code == serve_code == 3
    assert _message(fit_env) == _message(serve_env) == "mi300x does not run NVFP4 (an NVIDIA Blackwell format)"


def test_fit_over_several_skus_leaves_out_those_without_nvfp4(capsys):
    code, env = _json(["fit", "llama3-8b", "--sku", "mi300x", "--sku", "b200", "--mode", "infer",
                       "--precision", "nvfp4"], capsys)
    assert code == 0
    assert [r["sku"] for r in env["data"]["rows"]] == ["b200"]
    assert any("mi300x does not run NVFP4" in w for w in env["data"]["warnings"])


def test_the_longest_context_is_capped_at_the_model_maximum_and_says_so(capsys):
    """Llama 3.1 8B: max_seq_len 131,072 (its config.json's max_position_embeddings). The KV room of one
    MI355X holds far more tokens at batch 1; the longest context is the model's maximum, with a warning."""
    code, env = _json(["fit", "llama3-8b", "--sku", "mi355x", "--mode", "infer"], capsys)
    assert code == 0
    row = env["data"]["rows"][0]
    assert row["max_context"] == 131_072 < row["max_tokens"]
    assert any("capped at llama3.1-8b's max_seq_len 131,072" in w for w in env["data"]["warnings"])


# --- class 9: contract slips ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["cost", "mi355x"], ["serve", "llama3-8b", "--sku", "mi355x"]])
def test_one_bad_cost_profile_is_skipped_not_fatal(tmp_path, capsys, command):
    (tmp_path / "costs").mkdir()
    (tmp_path / "costs" / "bad.toml").write_bytes(b'name = "bad"\ncurrency = 5\n\xff\xfe')
    code, env = _json([*command, "--profiles", str(tmp_path)], capsys)
    assert code == 0, env


def _plan(tmp_path: Path, capsys) -> Path:  # noqa: ANN001
    plan = tmp_path / "plan.toml"
    code, _ = _json(["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--no-ranges", "--save", str(plan)], capsys)
    assert code == 0
    return plan


@pytest.mark.parametrize(("edit", "field"), [
    (lambda t: t.replace('precision = "bf16"', 'precision = "fp4"'), "[plan.precision]"),
    (lambda t: t.replace("sequence_parallel = false", 'sequence_parallel = "yes"'), "[layout.sequence_parallel]"),
    (lambda t: t.replace("sequence_parallel = false", "sequence_parallel = 1"), "[layout.sequence_parallel]"),
    (lambda t: t.replace('recompute = "none"', 'recompute = "selective"') + "\n[recipe]\nrecompute_layers = 3\n",
     "[recipe.recompute_layers]"),
])
def test_a_plan_file_is_held_to_the_flags_rules_naming_file_and_line(tmp_path, capsys, edit, field):
    plan = _plan(tmp_path, capsys)
    plan.write_text(edit(plan.read_text()))
    code, env = _json(["fit", "--plan", str(plan)], capsys)
    assert code == 3, env
    msg = _message(env)
    assert msg.startswith(f"{plan}:") and field in msg, msg


def test_sweep_refuses_recompute_layers_with_recompute_none(capsys):
    code, env = _json(["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--recompute", "none",
                       "--recompute-layers", "5"], capsys)
    assert code == 2 and "--recompute-layers" in _message(env)


def test_a_profiles_path_longer_than_the_os_allows_is_a_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("MI400PLAN_PROFILES", "/" + "a" * 5000)
    code, env = _json(["fit", "llama3-8b", "--sku", "mi355x"], capsys)
    assert code == 2 and "MI400PLAN_PROFILES" in _message(env)
    monkeypatch.delenv("MI400PLAN_PROFILES")
    code, env = _json(["sweep", "llama3-8b", "--sku", "mi355x", "--gpus", "8", "--save", "/tmp/" + "b" * 5000], capsys)
    assert code == 2 and "File name too long" in _message(env)


def test_an_empty_estimate_table_is_an_error_not_undisclosed(tmp_path, capsys):
    from importlib import resources
    import re

    text = (resources.files("mi400plan") / "profiles" / "accelerators" / "mi300x.toml").read_text()
    text = re.sub(r"(?m)^hbm_capacity = .*$", "hbm_capacity_gb = { }", text).replace('name = "mi300x"', 'name = "x"', 1)
    path = tmp_path / "accelerators" / "x.toml"
    path.parent.mkdir()
    path.write_text(text)
    code, env = _json(["profiles", "validate", str(path)], capsys)
    assert code == 3
    assert "empty table" in json.dumps(env)


def test_budget_days_errors_name_days(capsys):
    code, env = _json(["budget", "--sku", "mi355x", "--gpus", "8", "--days", "1e-400d"], capsys)
    assert code == 2 and _message(env).startswith("--days ") and "--deadline" not in _message(env)
