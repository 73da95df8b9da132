"""Serving stacks (``profiles/serving``, ``mi400plan.serving_stacks``): the profiles, the default rule,
the refusals, the scheduler defaults the scenario simulation runs with, and the per-stack calibration
(``serve_calibration.STACK_CALIBRATION``: re-running the fit on the CSV gives the stored figures)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from mi400plan.errors import ProfileError, UsageError

DATA = Path(__file__).resolve().parent / "data"


def _rows(name: str) -> list[dict[str, str]]:
    text = (DATA / name).read_text(encoding="utf-8").splitlines()
    return list(csv.DictReader(line for line in text if not line.startswith("#")))


# --- profiles ----------------------------------------------------------------------------------------

def test_bundled_serving_stacks(catalog) -> None:
    assert catalog.names("serving") == ["atom", "rocm-vllm", "sglang", "trtllm", "vllm"]
    trt = catalog.get("serving", "tensorrt-llm").spec  # an alias
    assert (trt.name, trt.framework, trt.version, trt.vendors) == ("trtllm", "TensorRT-LLM", "1.1.0rc2.post2", ["NVIDIA"])
    assert catalog.get("serving", "vllm").spec.released == "2025-09"
    assert catalog.get("serving", "rocm-vllm").spec.released == "2025-09-27"
    for name in catalog.names("serving"):
        spec = catalog.get("serving", name).spec
        assert all(spec.sources[k].date for k in spec.release_source), name
        assert spec.inferencex is not None and spec.inferencex.images, name


def test_serving_names_do_not_clash_with_training_stacks(catalog) -> None:
    def names(kind: str) -> set[str]:
        out: set[str] = set()
        for n in catalog.names(kind):
            spec = catalog.get(kind, n).spec
            out |= {spec.name, *spec.aliases}
        return out

    assert not names("serving") & names("stacks")


def test_every_inferencex_framework_has_a_stack(catalog) -> None:
    """Each (family, framework) of the calibration CSV maps to one serving profile: vLLM on AMD is ROCm vLLM."""
    from mi400plan.serving_stacks import stack_of_inferencex

    pairs = {(r["family"], r["framework"]) for r in _rows("serve_inferencex.csv")}
    got = {p: stack_of_inferencex(catalog, *p) for p in pairs}
    assert got[("amd-cdna3", "vllm")] == "rocm-vllm" and got[("nvidia-hopper", "vllm")] == "vllm"
    assert got[("nvidia-hopper", "trt")] == "trtllm" and got[("amd-cdna4", "sglang")] == "sglang"
    assert None not in got.values()


def _raw(**over: object) -> dict:
    raw = {"name": "x-serve", "display_name": "X", "framework": "X", "version": "1", "released": "2025-01",
           "release_source": ["S"], "vendors": ["NVIDIA"],
           "sources": {"S": {"title": "release notes", "date": "2025-01"}},
           "scheduler": {"chunked_prefill": True, "prefill_with_decodes": True,
                         "max_num_batched_tokens": [{"value": 4096}],
                         "max_num_seqs": [{"value": 128}], "status": "unverified"},
           "kv_admission": {"policy": "current", "status": "unverified"}}
    raw.update(over)
    return raw


@pytest.mark.parametrize("change, words", [
    ({"scheduler": {"chunked_prefill": True, "prefill_with_decodes": True, "max_num_batched_tokens": [{"value": 1}, {"below_hbm_gib": 70, "value": 2}],
                    "max_num_seqs": "kv-pool", "status": "unverified"}}, "last tier"),
    ({"scheduler": {"chunked_prefill": True, "prefill_with_decodes": True, "max_num_batched_tokens": [{"below_hbm_gib": 90, "value": 1},
                                                                          {"below_hbm_gib": 70, "value": 2}, {"value": 3}],
                    "max_num_seqs": "kv-pool", "status": "unverified"}}, "increasing"),
    ({"scheduler": {"chunked_prefill": True, "prefill_with_decodes": True, "max_num_batched_tokens": [{"value": 1}], "max_num_seqs": "kv-pool"}},
     "needs 'source'"),
    ({"scheduler": {"chunked_prefill": "sometimes", "prefill_with_decodes": True, "max_num_batched_tokens": [{"value": 1}], "max_num_seqs": "kv-pool",
                    "status": "unverified"}}, "chunked_prefill"),
    ({"vendor_reference": True}, "vendor_reference_source"),
    ({"release_source": ["NOPE"]}, "NOPE"),
    ({"released": "2025-13"}, "released"),
])
def test_schema_refusals(change: dict, words: str) -> None:
    from mi400plan.profiles import validate_dict

    assert validate_dict("serving", _raw(), "x.toml").name == "x-serve"
    with pytest.raises(ProfileError) as exc:
        validate_dict("serving", _raw(**change), "x.toml")
    assert words in str(exc.value)


def test_scheduler_tiers_by_hand(catalog) -> None:
    """vLLM: 8,192 / 1,024 at 70 GiB or more except A100, else 2,048 / 256; SGLang's chunk: 2,048 under 35
    GiB, 8,192 under 160 GiB, else 16,384; TensorRT-LLM: 8,192 / 2,048 on every GPU."""
    from mi400plan.serving_stacks import scheduler_limits

    vllm = catalog.get("serving", "vllm").spec.scheduler
    assert scheduler_limits(vllm, "h100", 79.6 * 2**30, 1e6, 8192) == (8192, 1024)
    assert scheduler_limits(vllm, "a100", 80 * 2**30, 1e6, 8192) == (2048, 256)
    assert scheduler_limits(vllm, "l40s", 48 * 2**30, 1e6, 8192) == (2048, 256)
    sgl = catalog.get("serving", "sglang").spec.scheduler
    # KV pool 100,000 tokens, context 8,192: 100,000 / 8,192 x 512 = 6,250 -> clamped to 4,096; half the pool 50,000.
    assert scheduler_limits(sgl, "mi300x", 191.69 * 2**30, 1e5, 8192) == (16384, 4096)
    assert scheduler_limits(sgl, "h100", 79.6 * 2**30, 3000, 8192) == (8192, 1500)
    assert scheduler_limits(sgl, "x", 32 * 2**30, 1e5, 8192)[0] == 2048
    trt = catalog.get("serving", "trtllm").spec.scheduler
    assert scheduler_limits(trt, "b200", 179 * 2**30, 1e6, 8192) == (8192, 2048)


# --- choosing the stack --------------------------------------------------------------------------------

def test_default_rule_and_override(catalog) -> None:
    from mi400plan.serving_stacks import resolve_serving_stack

    acc = lambda n: catalog.get("accelerators", n).spec  # noqa: E731
    nv, amd = resolve_serving_stack(catalog, acc("h100"), None), resolve_serving_stack(catalog, acc("mi355x"), None)
    assert (nv.name, amd.name) == ("trtllm", "rocm-vllm")
    assert "default for NVIDIA" in nv.basis and "default for AMD" in amd.basis
    assert resolve_serving_stack(catalog, acc("tpu-v6e"), None) is None  # no serving stack profile runs on TPUs
    over = resolve_serving_stack(catalog, acc("h100"), "sgl")
    assert (over.name, over.basis) == ("sglang", "--stack")


def test_newer_vendor_reference_becomes_the_default(tmp_path) -> None:
    from mi400plan.profiles import Catalog
    from mi400plan.serving_stacks import resolve_serving_stack

    (tmp_path / "serving").mkdir()
    src = (Path(__file__).resolve().parent.parent / "profiles" / "serving" / "trtllm.toml").read_text()
    text = (src.replace('name = "trtllm"', 'name = "trtllm-next"').replace('aliases = ["tensorrt-llm", "trt-llm", "trt"]',
                                                                            "aliases = []")
            .replace('released = "2025-09"', 'released = "2026-03"').replace('date = "2025-09-15"', 'date = "2026-03-01"'))
    (tmp_path / "serving" / "trtllm-next.toml").write_text(text)
    cat = Catalog.default([tmp_path])
    assert resolve_serving_stack(cat, cat.get("accelerators", "b200").spec, None).name == "trtllm-next"


def test_refusals(catalog, cli) -> None:
    from mi400plan.serving_stacks import resolve_serving_stack

    h100 = catalog.get("accelerators", "h100").spec
    with pytest.raises(UsageError, match="did you mean 'sglang'"):
        resolve_serving_stack(catalog, h100, "sglan")
    with pytest.raises(UsageError, match="is a training stack"):
        resolve_serving_stack(catalog, h100, "torchtitan")
    with pytest.raises(UsageError, match="runs on NVIDIA accelerators, not on AMD"):
        resolve_serving_stack(catalog, catalog.get("accelerators", "mi300x").spec, "trtllm")
    r = cli(["serve", "llama3.1-8b", "--sku", "h100", "--stack", "sglan", "--concurrency", "1"])
    assert r.exit_code == 2 and "did you mean" in r.output


def test_the_answer_names_the_stack(cli) -> None:
    r = cli(["serve", "llama3.1-8b", "--sku", "h100,mi300x", "--concurrency", "1,16", "--no-ranges", "--json"])
    assert r.exit_code == 0, r.output
    import json

    skus = {s["sku"]: s for s in json.loads(r.output)["data"]["skus"]}
    assert skus["h100"]["serving_stack"].startswith("trtllm (TensorRT-LLM 1.1.0rc2.post2")
    assert skus["mi300x"]["serving_stack"].startswith("rocm-vllm")
    assert "default for AMD" in skus["mi300x"]["serving_stack_basis"]
    assert "on trtllm" in skus["h100"]["calibration"]
    assert (skus["h100"]["calibration_status"], skus["mi300x"]["calibration_status"]) == ("stack fit", "stack fit")
    r = cli(["serve", "deepseek-r1", "--sku", "mi355x", "--stack", "atom", "--concurrency", "1", "--no-ranges", "--json"])
    status = json.loads(r.output)["data"]["skus"][0]["calibration_status"]
    assert status.startswith("family fit standing in for atom")


def test_profiles_cli_lists_the_serving_kind(cli) -> None:
    import json

    r = cli(["profiles", "list", "--kind", "serving", "--json"])
    assert r.exit_code == 0, r.output
    assert "atom" in r.output and "trtllm" in r.output and "torchtitan" not in r.output
    r = cli(["profiles", "show", "sglang"])
    assert r.exit_code == 0 and "(serving stack)" in r.output and "chunked_prefill: false" not in r.output
    assert json.loads(cli(["profiles", "show", "atom", "--json"]).output)["status"] == "ok"


# --- the scheduler reaches the simulation -----------------------------------------------------------------

def _scenario_rows(catalog, stack: str | None, sku: str = "h100", scenario: str = "offline"):
    from mi400plan.api.serve import ServeRequest, serve
    from mi400plan.api.serve_scenario import ScenarioRequest

    return serve(catalog, "llama3.1-8b", [sku], ServeRequest(
        concurrency="1,16", ranges=False, scenario=ScenarioRequest(scenario, candidates=1), stack=stack)).scenario_rows


def test_scheduler_defaults_reach_the_simulation(catalog) -> None:
    # Server: the stack's limits as they are (offline also runs the limits that keep the KV in the cache)
    trt = _scenario_rows(catalog, None, scenario="server")[0]  # H100's default: TensorRT-LLM, 8,192 tokens, 2,048
    assert (trt.max_num_batched_tokens, trt.max_num_seqs) == (8192, 2048)
    vllm = _scenario_rows(catalog, "vllm", scenario="server")[0]
    assert (vllm.max_num_batched_tokens, vllm.max_num_seqs) == (8192, 1024)
    sgl = _scenario_rows(catalog, "sglang", "mi300x")[0]  # 191.7 GiB: SGLang's 16,384-token chunk
    assert sgl.max_num_batched_tokens == 16384 and sgl.max_num_seqs <= 4096


def test_a_user_stack_scheduler_reaches_the_simulation(tmp_path) -> None:
    from mi400plan.profiles import Catalog

    (tmp_path / "serving").mkdir()
    src = (Path(__file__).resolve().parent.parent / "profiles" / "serving" / "vllm.toml").read_text()
    text = (src.replace('name = "vllm"', 'name = "vllm-small"').replace('aliases = ["vllm-cuda"]', "aliases = []")
            .replace("{ value = 8192 }", "{ value = 3000 }").replace("{ value = 1024 }", "{ value = 96 }"))
    (tmp_path / "serving" / "vllm-small.toml").write_text(text)
    row = _scenario_rows(Catalog.default([tmp_path]), "vllm-small")[0]
    assert (row.max_num_batched_tokens, row.max_num_seqs) == (3000, 96)


def test_chunked_prefill_policy_sets_the_limits(catalog) -> None:
    """SGLang: prefill iterations apart; TensorRT-LLM (prompts not chunked): a prompt's budget is at least its
    length, here a 10,000-token prompt against the 8,192-token default; ATOM: both (16,384 tokens by default)."""
    from mi400plan import serve as core
    from mi400plan import serve_sim as sim
    from mi400plan.api.serve_scenario import _limits, config
    from mi400plan.hardware import serve_hardware
    from mi400plan.params import count_params
    from mi400plan.serving_stacks import resolve_serving_stack
    from mi400plan.specs.layout import infer_recipe

    model = catalog.get("models", "llama3.1-8b").spec
    wl = core.Workload(model, count_params(model), infer_recipe("fp8", kv_dtype="fp8"), 10000, 100)
    hw, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    cfg = config("llama3.1-8b", "offline", ttft_p99=None, tpot_p99=None, inp=sim.LengthDist("fixed", (10000,)),
                 out=sim.LengthDist("fixed", (100,)), max_batched_tokens=None, max_seqs=None, candidates=1, notes=[])
    lay = sim.Layout(1, 1, 1, False)
    h100 = catalog.get("accelerators", "h100").spec
    trt = _limits(wl, "h100", hw, lay, cfg, resolve_serving_stack(catalog, h100, "trtllm"))
    sgl = _limits(wl, "h100", hw, lay, cfg, resolve_serving_stack(catalog, h100, "sglang"))
    vllm = _limits(wl, "h100", hw, lay, cfg, resolve_serving_stack(catalog, h100, "vllm"))
    assert (trt.max_batched_tokens, trt.mixed) == (10000, True)
    assert (sgl.max_batched_tokens, sgl.mixed) == (8192, False)
    assert (vllm.max_batched_tokens, vllm.mixed) == (8192, True)
    mi355x = catalog.get("accelerators", "mi355x").spec
    hw_amd, _ = serve_hardware(catalog, "mi355x", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    atom = _limits(wl, "mi355x", hw_amd, lay, cfg, resolve_serving_stack(catalog, mi355x, "atom"))
    assert (atom.max_batched_tokens, atom.max_seqs, atom.mixed) == (16384, 512, False)


# --- per-stack calibration --------------------------------------------------------------------------------

def test_points_per_fitted_figure_rule() -> None:
    from mi400plan.serve_calibration import Point, stack_fit_allowed

    pt = lambda isl: Point("h100", "llama3-70b", "fp8", 1, 1, False, isl, 1024, 4, 1.0, 0.01, 0.1)  # noqa: E731
    assert stack_fit_allowed([pt(1024)] * 9)  # 3 figures x 3
    assert not stack_fit_allowed([pt(1024)] * 8)
    assert not stack_fit_allowed([pt(8192)] + [pt(1024)] * 10)  # 4 figures (matmul scale too): 12 needed
    assert stack_fit_allowed([pt(8192)] + [pt(1024)] * 11)


def test_stored_stack_groups_are_the_ones_with_enough_points(catalog) -> None:
    from mi400plan.serve_calibration import STACK_CALIBRATION, calibration_groups, stack_fit_allowed

    groups = calibration_groups(catalog, _rows("serve_inferencex.csv"), by_stack=True)
    assert sorted(STACK_CALIBRATION) == sorted(k for k, g in groups.items() if stack_fit_allowed(g.fitted))
    for key, cal in STACK_CALIBRATION.items():
        assert key == f"{cal.family}/{cal.model_class}/{cal.stack}" and cal.status == "stack fit"
        assert cal.points == len(groups[key].fitted)


@pytest.mark.slow  # refits each stored stack calibration: 1-5 s each
def test_stack_fit_reproduces_the_stored_constants(catalog) -> None:
    """What ``benchmarks/calibrate_serve.py`` prints for the stacks: the same fit on the same points."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import STACK_CALIBRATION, calibration_groups, fit_family

    groups = calibration_groups(catalog, _rows("serve_inferencex.csv"), by_stack=True)
    for key, stored in STACK_CALIBRATION.items():
        g = groups[key]
        base = {(p.sku, p.precision): serve_hardware(catalog, p.sku, p.precision, "nominal", matmul=None, hbm=None,
                                                     model_class=g.model_class, calibrated=False)[0] for p in g.fitted}
        cal = fit_family(catalog, g.family, g.model_class, g.fitted, base, stack=stored.stack)
        for f in ("hbm_efficiency", "kernel_overhead_us", "matmul_scale", "request_overhead_ms", "tput_mean_err",
                  "tput_max_err", "tpot_mean_err", "tpot_max_err", "ttft_mean_err"):
            assert getattr(cal, f) == pytest.approx(getattr(stored, f), abs=1e-4), (key, f)
        assert (cal.matmul_precisions, cal.points, cal.stack) == (stored.matmul_precisions, stored.points, stored.stack)
        assert (cal.host_per_seq_us, cal.precision_fits) == (stored.host_per_seq_us, stored.precision_fits), key


def test_stack_fit_is_the_one_served(catalog) -> None:
    """Hopper dense on TensorRT-LLM: the stored stack fit HBM 0.95, 6 us and 40 us of CPU time per sequence reach
    serve's hardware, and the family fit (0.85, 6 us, 50 us) stays the one without a stack."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import STACK_CALIBRATION

    c = STACK_CALIBRATION["nvidia-hopper/dense/trtllm"]
    assert (c.hbm_efficiency, c.kernel_overhead_us, c.host_per_seq_us) == (0.95, 6.0, 40.0)
    hw, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense", stack="trtllm")
    assert (hw.hbm_eff, hw.kernel_overhead_s, hw.host_per_seq_s) == pytest.approx((0.95, 6e-6, 40e-6))
    fam, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    assert (fam.hbm_eff, fam.kernel_overhead_s, fam.host_per_seq_s) == pytest.approx((0.85, 6e-6, 50e-6))


def test_uncalibrated_stack_takes_the_family_fit_with_a_wider_range(catalog) -> None:
    """ROCm vLLM has no DeepSeek-R1 points on CDNA 4: the family's MoE fit (HBM 0.95, mean TPOT error 0.0588,
    max 0.1034) with corners at the max: pessimistic HBM 0.95 x (1 - 0.1034) = 0.85177."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import stack_calibration_for

    arch = catalog.get("accelerators", "mi355x").spec.architecture
    cal = stack_calibration_for(arch, "moe", "rocm-vllm")
    assert (cal.hbm_efficiency, cal.range_err, cal.stack) == (0.95, 0.1034, "rocm-vllm")
    assert "family fit standing in for rocm-vllm" in cal.status
    lo, _ = serve_hardware(catalog, "mi355x", "mxfp4", "pessimistic", matmul=None, hbm=None, model_class="moe",
                           stack="rocm-vllm")
    assert lo.hbm_eff == pytest.approx(0.85177)
    fam_lo, _ = serve_hardware(catalog, "mi355x", "mxfp4", "pessimistic", matmul=None, hbm=None, model_class="moe")
    assert fam_lo.hbm_eff == pytest.approx(0.95 * (1 - 0.0588))


def test_signed_errors_by_hand(catalog) -> None:
    """Signed: + = optimistic. A point measured at half the predicted TPOT and throughput: throughput +100 %
    (too high), TPOT -100 % (predicted twice the measured: pessimistic)."""
    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import Point, errors, predict

    hw, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    p = Point("h100", "llama3-70b", "fp8", 4, 1, False, 1024, 1024, 16, 1.0, 1.0, 1.0)
    pr = predict(catalog, p, hw)
    q = Point("h100", "llama3-70b", "fp8", 4, 1, False, 1024, 1024, 16, float(pr["tput"]) / 2, float(pr["tpot"]) / 2,
              float(pr["ttft"]) * 2)
    e = errors(catalog, [q], {("h100", "fp8"): hw}, signed=True)
    assert (e["tput"][0], e["tpot"][0], e["ttft"][0]) == pytest.approx((1.0, -1.0, 0.5))


# Validation (never fitted): (source, family) -> mean |error| of output tokens/s and TPOT with the stack each
# source measured on (serve_calibration.VALIDATION_STACKS), from benchmarks/serve_stack_errors.py; the
# family-only figures are tests/test_serve_calibration.py's VALIDATION_REPORTED.
# M1 Hopper 0.062 / 0.107 -> 0.105 / 0.199, Blackwell 0.106 / 0.285 -> 0.228 / 0.610, T1 Hopper 0.136 -> 0.115: the
# refit with the CPU time per scheduled sequence added to the decode step (serve.host_bound_step; held out, never
# fitted: reported as they come out). M1 Blackwell 0.228 / 0.610 -> 0.167 / 0.562: the TensorRT-LLM refit with an
# HBM efficiency and matmul scale per compute precision (NVFP4 0.70 / 1.25, FP8 0.95 / 1.05; serve_calibration.
# precision_split). M1 Hopper 0.105 / 0.199 -> 0.146 / 0.236, Blackwell 0.167 / 0.562 -> 0.206 / 0.606, T1 Hopper
# 0.115 -> 0.107: the refits at the lengths InferenceX's client sends (mean 0.9 of the nominal ones:
# serve_calibration.inferencex_lengths; Hopper TensorRT-LLM's CPU time per sequence 30 -> 40 us, which MLPerf's
# 1,000+ sequences in flight magnify).
VALIDATION_STACK_REPORTED = {("M1", "nvidia-hopper"): (0.146, 0.236), ("M1", "nvidia-blackwell"): (0.206, 0.606),
                             ("D1", "nvidia-hopper"): (1.799, 0.614), ("T1", "nvidia-hopper"): (0.107, None)}


@pytest.mark.parametrize("key", sorted(VALIDATION_STACK_REPORTED))
def test_validation_with_the_measured_stack(catalog, key: tuple[str, str]) -> None:
    import numpy as np

    from mi400plan.hardware import serve_hardware
    from mi400plan.serve_calibration import VALIDATION_STACKS, family_of, model_class, predict_measured
    from tests.test_serve_calibration import _measured

    tps, tpot = [], []
    for r in _rows("serve_validation.csv"):
        m = _measured(r)
        acc = catalog.get("accelerators", m.sku).spec
        if (m.source, family_of(acc.architecture)) != key:
            continue
        cls = model_class(catalog.get("models", m.model).spec)
        hw, _ = serve_hardware(catalog, m.sku, m.precision, "nominal", matmul=None, hbm=None, model_class=cls,
                               stack=VALIDATION_STACKS[(m.source, acc.vendor)])
        pr = predict_measured(catalog, m, hw)
        tps.append(abs(pr["output_tps"] / m.output_tps - 1))
        if m.tpot_s is not None:
            tpot.append(abs(pr["tpot"] / m.tpot_s - 1))
    want_tps, want_tpot = VALIDATION_STACK_REPORTED[key]
    assert np.mean(tps) == pytest.approx(want_tps, abs=0.002)
    if want_tpot is None:
        assert not tpot
    else:
        assert np.mean(tpot) == pytest.approx(want_tpot, abs=0.002)


def test_a_comparison_leaves_out_skus_the_stack_does_not_run_on(catalog) -> None:
    from mi400plan.api.serve import ServeRequest, serve

    r = serve(catalog, "llama3.1-8b", ["h100", "mi300x"], ServeRequest(concurrency="1,8", ranges=False, stack="trtllm"))
    assert [s.sku for s in r.skus] == ["h100"] and r.skus[0].serving_stack_basis == "--stack"
    assert any("mi300x: left out: serving stack trtllm runs on NVIDIA" in w for w in r.warnings)
    with pytest.raises(UsageError, match="no SKU named runs it"):
        serve(catalog, "llama3.1-8b", ["mi300x", "mi325x"], ServeRequest(concurrency="1", ranges=False, stack="trtllm"))
