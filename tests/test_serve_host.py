"""The serving framework's CPU time per scheduled sequence in the decode step (``serve.host_bound_step``):
the overlap rule by hand, the sequences one scheduler handles, the stack profiles' rule, and which
calibration groups may fit it."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from mi400plan import serve as core
from mi400plan.serve_calibration import CALIBRATION, Point, apply, host_fitted


def _hw(catalog, sku: str = "h200", stack: str | None = None):
    from mi400plan.hardware import serve_hardware

    return serve_hardware(catalog, sku, "fp8", "nominal", matmul=None, hbm=None, model_class="dense", stack=stack)[0]


def test_overlap_takes_the_larger_and_no_overlap_the_sum(catalog) -> None:
    # GPU 5 ms; host 0.1 ms per sequence x 128 sequences = 12.8 ms. Overlapped: max(5, 12.8) = 12.8 ms;
    # one after the other: 5 + 12.8 = 17.8 ms. A 15 ms GPU step hides the 12.8 ms of CPU work (15 ms) or
    # adds to it (27.8 ms).
    hw = replace(_hw(catalog), host_per_seq_s=1e-4, host_overlap=True)
    assert core.host_bound_step(5e-3, 128, hw) == pytest.approx(12.8e-3)
    assert core.host_bound_step(15e-3, 128, hw) == pytest.approx(15e-3)
    serial = replace(hw, host_overlap=False)
    assert core.host_bound_step(5e-3, 128, serial) == pytest.approx(17.8e-3)
    assert core.host_bound_step(15e-3, 128, serial) == pytest.approx(27.8e-3)
    # No host time: the GPU step, whatever the rule.
    none = replace(hw, host_per_seq_s=0.0)
    assert core.host_bound_step([5e-3, 15e-3], 128, none) == pytest.approx([5e-3, 15e-3])


def test_attention_data_parallel_ranks_schedule_their_own_sequences() -> None:
    # 256 sequences over 4 attention-DP ranks: 64 per scheduler; without DP attention one scheduler has all 256.
    assert core.scheduled_seqs([256.0, 256.0], [4.0, 4.0], [True, False]) == pytest.approx([64.0, 256.0])


def test_decode_step_is_bound_by_the_host_work(catalog) -> None:
    """Llama 70B on one H200 at 64 sequences: with 1 ms of CPU work per sequence (64 ms a step) the step is
    64 ms under overlap, the GPU step + 64 ms without; 1 us per sequence (64 us) leaves the GPU step."""
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    m = catalog.get("models", "llama3-70b").spec
    wl = core.Workload(m, count_params(m), infer_recipe("fp8", kv_dtype="fp8"), 1024, 1024)
    T = core.terms(m, wl.counts, wl.recipe)
    hw = replace(_hw(catalog), host_per_seq_s=0.0, host_overlap=True)
    kw = dict(tp=1, pp=1, ep=1, dpa=False, batch=64.0, context=1536.0)
    _, _, gpu = core.decode_step(T, wl, hw, **kw)
    assert 1e-3 < float(gpu) < 64e-3  # the GPU step alone: a few to tens of ms, below the host work below
    _, _, over = core.decode_step(T, wl, replace(hw, host_per_seq_s=1e-3), **kw)
    _, _, serial = core.decode_step(T, wl, replace(hw, host_per_seq_s=1e-3, host_overlap=False), **kw)
    _, _, small = core.decode_step(T, wl, replace(hw, host_per_seq_s=1e-6), **kw)
    assert float(over) == pytest.approx(64e-3)
    assert float(serial) == pytest.approx(float(gpu) + 64e-3)
    assert float(small) == pytest.approx(float(gpu))
    # TPOT follows the step (the steady state stretches the step by the prefill share 1 / (1 - rho)).
    ev = core.evaluate(wl, replace(hw, host_per_seq_s=1e-3), tp=1, pp=1, ep=1, dpa=False, batch=64.0)
    assert float(ev["t_step"]) == pytest.approx(64e-3)
    assert float(ev["tpot"]) == pytest.approx(64e-3 / (1.0 - float(ev["rho"])))


def test_stack_profiles_state_the_overlap_rule(catalog, tmp_path, write_profile) -> None:
    from mi400plan.profiles import Catalog

    for name, flag in (("trtllm", "disable_overlap_scheduler"), ("vllm", "--async-scheduling"),
                       ("rocm-vllm", "--async-scheduling"), ("sglang", "--disable-overlap-schedule")):
        host = catalog.get("serving", name).spec.host
        # the stack's overlap scheduler is on in the runs, and the fitted CPU time still adds (serve_calibration)
        assert not host.overlap and host.flag == flag and host.status == "estimate" and "IX-DATA-1016" in host.source
        assert _hw(catalog, "h200" if name != "rocm-vllm" else "mi300x", name).host_overlap is False
    # A stack that hides the CPU work behind the GPU step: a user profile says so, and serve takes the larger.
    text = Path(catalog.get("serving", "vllm").path).read_text(encoding="utf-8")
    text = text.replace('name = "vllm"', 'name = "vllm-hidden"').replace('aliases = ["vllm-cuda"]', "aliases = []")
    text = text.replace("[host]\noverlap = false", "[host]\noverlap = true")
    write_profile(tmp_path, "serving", "vllm-hidden", text)
    user = Catalog.default([tmp_path])
    assert user.get("serving", "vllm-hidden").spec.host.overlap is True
    assert _hw(user, "h200", "vllm-hidden").host_overlap is True


def test_a_disclosed_host_rule_needs_a_source(tmp_path, write_profile, catalog) -> None:
    from mi400plan.errors import ProfileError
    from mi400plan.profiles import Catalog

    text = Path(catalog.get("serving", "sglang").path).read_text(encoding="utf-8")
    text = text.replace('name = "sglang"', 'name = "sglang-x"')
    text = re.sub(r'(\[host\][^\[]*?)source = \[[^\]]*\]\n', r"\1", text)  # the [host] block's source line
    text = text.replace('overlap = false\nflag = "--disable-overlap-schedule"\nstatus = "estimate"',
                        'overlap = false\nflag = "--disable-overlap-schedule"\nstatus = "disclosed"')
    text = text.replace("aliases = [", "aliases = [] #")
    write_profile(tmp_path, "serving", "sglang-x", text)
    with pytest.raises(ProfileError, match="host: a disclosed overlap rule needs .source."):
        Catalog.default([tmp_path]).get("serving", "sglang-x")


def _points(n: int, isl: int) -> list[Point]:
    return [Point("h200", "llama3-70b", "fp8", 8, 1, False, isl, 1024, 4, 1.0, 1.0, 1.0)] * n


def test_host_time_is_fitted_only_with_three_points_per_figure() -> None:
    # Without 8k-token prompts the fit has 3 figures (HBM, kernel overhead, request overhead): the host time
    # makes 4, so it needs 4 x 3 = 12 points; with them (the matmul scale too) 5 x 3 = 15.
    assert host_fitted(_points(12, 1024)) and not host_fitted(_points(11, 1024))
    assert host_fitted(_points(15, 8192)) and not host_fitted(_points(14, 8192))


def test_calibration_sets_the_host_time_and_its_corners(catalog) -> None:
    cal = CALIBRATION["nvidia-hopper/dense"]
    assert cal.host_per_seq_us == 50.0  # the Hopper Llama points (vLLM and TensorRT-LLM, 4-128 sequences)
    base = _hw(catalog)
    nominal = apply(base, cal, "nominal", "fp8")
    assert nominal.host_per_seq_s == pytest.approx(cal.host_per_seq_us * 1e-6)
    # The pessimistic corner takes more CPU time (as it takes more per-kernel overhead), by the TPOT spread.
    pess = apply(base, cal, "pessimistic", "fp8")
    assert pess.host_per_seq_s == pytest.approx(cal.host_per_seq_us * 1e-6 * (1.0 + cal.tpot_mean_err))
    assert np.isclose(apply(base, replace(cal, host_per_seq_us=0.0)).host_per_seq_s, 0.0)
