"""Length-biased sequences in flight (``mi400plan.inflight``): the mean context a decode step reads and the KV a
sequence holds when output lengths vary, checked by hand arithmetic, against the request-level simulation,
and bit for bit against the fixed-length arithmetic it replaces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mi400plan import serve_sim as S
from mi400plan.inflight import in_flight_tokens


def test_two_point_outputs_by_hand() -> None:
    """O uniform on {1,000, 3,000}: E[O] = 2,000, E[O^2] = (1e6 + 9e6) / 2 = 5e6, so E[O^2] / (2 E[O]) =
    5e6 / 4,000 = 1,250 tokens generated on average by a sequence in flight (not E[O] / 2 = 1,000); with
    100-token prompts the context is 1,350, the whole reserved length 100 + 5e6 / 2,000 = 2,600.
    cv^2 = Var / mean^2 = 1e6 / 4e6 = 0.25."""
    d = S.LengthDist("histogram", (1000, 3000), (1.0, 1.0))
    assert d.mean == 2000.0 and d.cv2 == pytest.approx(0.25)
    assert in_flight_tokens(0.0, d.mean, d.cv2) == pytest.approx(1250.0)
    assert in_flight_tokens(100.0, d.mean, d.cv2) == pytest.approx(1350.0)
    assert in_flight_tokens(100.0, d.mean, d.cv2, whole=True) == pytest.approx(2600.0)
    assert S.in_flight(S.LengthDist("fixed", (100,)), d) == pytest.approx(1350.0)


def test_uniform_cv2_by_hand() -> None:
    """Uniform on 1..3: mean 2, E[O^2] = (1 + 4 + 9) / 3 = 14/3, variance 14/3 - 4 = 2/3, cv^2 = 1/6;
    E[O^2] / (2 E[O]) = 14/3 / 4 = 7/6."""
    u = S.LengthDist("uniform", (1, 3))
    assert u.cv2 == pytest.approx(1.0 / 6.0)
    assert in_flight_tokens(0.0, u.mean, u.cv2) == pytest.approx(7.0 / 6.0)


def test_fixed_lengths_are_the_old_arithmetic_bit_for_bit() -> None:
    """cv^2 = 0: exactly I + O / 2 and I + O, as floats and as the ints the memory model adds."""
    for i, o in ((804, 3886), (1024, 1024), (222, 294), (3, 7)):
        assert in_flight_tokens(float(i), float(o), 0.0) == float(i) + float(o) / 2.0
        assert in_flight_tokens(i, o, 0.0, whole=True) == i + o
    assert S.LengthDist("fixed", (512,)).cv2 == 0.0 and S.LengthDist("uniform", (64, 64)).cv2 == 0.0
    with pytest.raises(ValueError, match="output_cv2"):
        in_flight_tokens(1.0, 2.0, -0.1)


def test_deepseek_r1_outputs_as_the_dataset_gives_them() -> None:
    """The bundled DeepSeek-R1 output histogram against the 4,388 samples' tok_ref_output_len capped at 20,000
    (performance-dashboard mlperf-data/summaries/deepseek-r1.csv, 2025-11-04): mean 3,886.2274 (the README's
    mean-output-tok-len), squared coefficient of variation 1.24085, 4,388 samples, 83 of them at the cap; so a
    decode step reads 803.79 + 3,886.23 / 2 x 2.24085 = 5,158 tokens per sequence, not 803.79 + 1,943.11 =
    2,747."""
    b = S.benchmark_for("deepseek-v3")
    assert b is not None and b.output is not None and b.input is not None
    assert sum(b.output.weights) == 4388 and b.output.max == 20000
    assert dict(zip(b.output.values, b.output.weights, strict=True))[20000] == 83
    assert b.output.cv2 == pytest.approx(1.24085, abs=0.002)
    assert S.in_flight(b.input, b.output) == pytest.approx(5158.0, abs=3.0)


def test_llama31_405b_lengths_as_the_dataset_gives_them() -> None:
    """The 8,313 samples of llama3-1-405b.csv (performance-dashboard, 2025-11-20): reference outputs mean 684.68
    (inference_rules.adoc tokens_per_sample 684.68), max 1,830, cv^2 0.14507; prompts mean 9,428.64, max
    19,988."""
    b = S.benchmark_for("llama3.1-405b")
    assert b is not None and b.output is not None and b.input is not None
    assert sum(b.output.weights) == 8313 and sum(b.input.weights) == 8313
    assert b.output.max == 1830 and b.input.max == 19988
    assert b.output.cv2 == pytest.approx(0.14507, abs=0.001)
    assert b.input.mean == pytest.approx(9428.64, abs=0.2)


def test_simulation_reads_the_length_biased_context() -> None:
    """The simulation's decoding sequences, averaged over its decode iterations, hold the length-biased mean
    context: 100-token prompts, outputs 1,000 or 3,000 tokens (equally likely), Poisson arrivals at 1 request/s
    on a replica whose step is 10 ms + 0.1 ms per sequence: E[I] + E[O^2] / (2 E[O]) = 1,350 (less the ~1 token
    of the first output token, which the prompt's iteration produces), not E[I] + E[O] / 2 = 1,100, within 2 %
    (sampling: the share of long outputs among 1,500 draws). Fixed 2,000-token outputs: 1,100 within 0.5 %."""
    sm = S.StepModel(decode_s=(0.0,) + tuple(0.01 + 1e-4 * b for b in range(1, 513)), prefill_tokens=(0.0, 1e5),
                     prefill_s=(0.0, 1.0))
    rng = np.random.default_rng(7)
    n = 1500
    arr = np.cumsum(rng.exponential(1.0, n))
    inp = np.full(n, 100)
    two = S.LengthDist("histogram", (1000, 3000), (1.0, 1.0))
    r = S.simulate(arr, inp, two.sample(rng, n), sm, S.Limits(max_seqs=512))
    assert r.decode_context == pytest.approx(1350.0, rel=0.02)
    assert abs(r.decode_context - 1100.0) > 150.0
    f = S.simulate(arr, inp, np.full(n, 2000), sm, S.Limits(max_seqs=512))
    assert f.decode_context == pytest.approx(1100.0, rel=0.005)


def test_steady_state_prices_decode_at_the_biased_context(catalog) -> None:
    """serve.evaluate with outputs of mean 2,000 and cv^2 0.25 (the two-point case) and 100-token prompts: its
    decode step is serve.decode_step's at context 1,350 exactly; with fixed outputs at 1,100 = I + O / 2
    exactly (the arithmetic before length bias). The KV a concurrency needs grows by (100 + 2,000 x 1.25) /
    (100 + 2,000) = 2,600 / 2,100 per sequence (serve.memory's kv_cache, no DP-attention)."""
    from mi400plan import serve as core
    from mi400plan.hardware import serve_hardware
    from mi400plan.params import count_params
    from mi400plan.specs.layout import infer_recipe

    model = catalog.get("models", "llama3.1-8b").spec
    hw, _ = serve_hardware(catalog, "h100", "fp8", "nominal", matmul=None, hbm=None, model_class="dense")
    base = core.Workload(model, count_params(model), infer_recipe("fp8", kv_dtype="fp8"), 100, 2000)
    biased = core.Workload(model, base.counts, base.recipe, 100, 2000, output_cv2=0.25)
    T = core.terms(model, base.counts, base.recipe)
    b = np.array([1.0, 8.0, 64.0])
    kw = dict(tp=1, pp=1, ep=1, dpa=False, batch=b)
    assert np.array_equal(core.evaluate(base, hw, **kw)["t_step"], core.decode_step(T, base, hw, context=1100.0,
                                                                                     **kw)[2])
    assert np.array_equal(core.evaluate(biased, hw, **kw)["t_step"], core.decode_step(T, biased, hw, context=1350.0,
                                                                                       **kw)[2])
    m0 = core.memory(base, hw, tp=1, pp=1, dpa=False, batch=b)["kv_cache"]
    m1 = core.memory(biased, hw, tp=1, pp=1, dpa=False, batch=b)["kv_cache"]
    assert m1 / m0 == pytest.approx(2600.0 / 2100.0)


def test_scenario_on_deepseek_defaults_to_the_datasets_outputs(catalog) -> None:
    """serve --scenario on DeepSeek-V3 (the DeepSeek-R1 benchmark's model) with no --output-len: the dataset's
    output histogram, its mean 3,886 and cv^2 1.24 reach the steady-state workload, and a note prints the
    biased context (5,158 tokens, hand figure of test_deepseek_r1_outputs_as_the_dataset_gives_them); an
    --output-len overrides it and its own spread is used (uniform 1..2,047: cv^2 = (2,047^2 - 1) / 12 / 1,024^2
    = 4,190,208 / 12,582,912 = 0.33301)."""
    from mi400plan.api import serve_scenario as scen

    model = catalog.get("models", "deepseek-v3").spec
    cfg, i, o, cv2 = scen.prepare(model, None, None, scen.ScenarioRequest("server"), False)
    assert (i, o) == (804, 3886) and cv2 == pytest.approx(1.24085, abs=0.002)
    assert cfg is not None and cfg.out.kind == "histogram"
    assert any("decode context: 5,15" in n and "2,747" in n for n in cfg.notes), cfg.notes
    _, _, o2, cv2b = scen.prepare(model, None, "uniform:1-2047", scen.ScenarioRequest("server"), False)
    assert o2 == 1024 and cv2b == pytest.approx(0.33301, abs=1e-5)
    _, _, _, cv0 = scen.prepare(model, None, None, None, False)
    assert cv0 == 0.0  # no scenario: --output-len's default, 1,024 fixed


def test_cli_serve_prints_the_biased_context(cli) -> None:
    """`serve --output-len uniform:1-2047` (mean 1,024, cv^2 0.33301) with 1,024-token prompts: decode context
    1,024 + 512 x 1.33301 = 1,706.5 tokens and 1,024 + 1,024 x 1.33301 = 2,389 reserved per sequence, said in
    the table and in JSON; fixed 1,024-token outputs: 1,024 + 512 = 1,536 and 2,048, and no note."""
    r = cli(["serve", "llama3.1-8b", "--sku", "h100", "--output-len", "uniform:1-2047", "--top", "1", "--no-ranges"])
    assert r.exit_code == 0, r.output
    assert "decode context 1,706 tokens" in r.output and "2,389 tokens per sequence" in r.output
    j = json.loads(cli(["serve", "llama3.1-8b", "--sku", "h100", "--output-len", "uniform:1-2047", "--top", "1",
                        "--no-ranges", "--json"]).stdout)["data"]
    assert j["decode_context_tokens"] == pytest.approx(1706.5, abs=0.1)
    assert j["kv_tokens_per_sequence"] == pytest.approx(2389.0, abs=0.1)
    f = cli(["serve", "llama3.1-8b", "--sku", "h100", "--top", "1", "--no-ranges", "--json"])
    d = json.loads(f.stdout)["data"]
    assert (d["decode_context_tokens"], d["kv_tokens_per_sequence"]) == (1536.0, 2048.0)
    t = cli(["serve", "llama3.1-8b", "--sku", "h100", "--top", "1", "--no-ranges"])
    assert "decode context" not in t.output and "2,048 tokens per sequence (the fit model)" in t.output
