"""Compute-optimal size and tokens, against the papers' own numbers and arithmetic written out."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mi400plan.errors import UsageError
from mi400plan.scaling import LAWS, compute_optimal, get_law, loss

GOPHER_FLOPS = 5.76e23  # Hoffmann et al. 2022: Gopher's (and Chinchilla's) training compute


def test_twenty_tokens_per_parameter_gives_chinchilla_at_gophers_budget():
    # N = sqrt(C / (6 x 20)) = sqrt(5.76e23 / 120) = sqrt(4.8e21) = 6.928e10; D = 20 N = 1.386e12.
    # Published: Chinchilla is 70B parameters trained on 1.4T tokens (both rounded).
    opt = compute_optimal(GOPHER_FLOPS, get_law("chinchilla-20"))
    assert opt.params == pytest.approx(6.928e10, rel=1e-3)
    assert opt.tokens == pytest.approx(1.386e12, rel=1e-3)
    assert opt.params == pytest.approx(70e9, rel=0.015)
    assert opt.tokens == pytest.approx(1.4e12, rel=0.015)


def test_approach_3_closed_form_by_hand():
    # G = (0.34 x 406.4 / (0.28 x 410.7))^(1/0.62) = 1.201572^1.612903 = 1.34473
    # a = 0.28 / 0.62 = 0.451613; N = G x (9.6e22)^a = 1.34473 x 2.39371e10 = 3.21892e10
    # D = C / (6 N) = 9.6e22 / 3.21892e10 = 2.98237e12
    opt = compute_optimal(GOPHER_FLOPS, get_law("chinchilla"))
    assert opt.exponent_params == pytest.approx(0.451613, abs=1e-6)
    assert opt.params == pytest.approx(3.21892e10, rel=1e-4)
    assert opt.tokens == pytest.approx(2.98237e12, rel=1e-4)
    # L = 1.69 + 406.4 / N^0.34 + 410.7 / D^0.28
    expected = 1.69 + 406.4 / 3.21892e10**0.34 + 410.7 / 2.98237e12**0.28
    assert opt.loss == pytest.approx(expected, rel=1e-5)


def test_refit_exponent_is_the_published_0_5126():
    # Besiroglu et al. 2024: a = beta / (alpha + beta) = 0.3658 / 0.7136 = 0.5126
    opt = compute_optimal(1e24, get_law("chinchilla-refit"))
    assert round(opt.exponent_params, 4) == 0.5126


@given(st.sampled_from(sorted(LAWS)), st.floats(min_value=1e18, max_value=1e28))
def test_the_optimum_spends_exactly_the_budget_and_grows_with_it(name, flops):
    law = LAWS[name]
    opt = compute_optimal(flops, law)
    assert 6 * opt.params * opt.tokens == pytest.approx(flops, rel=1e-9)
    bigger = compute_optimal(flops * 10, law)
    assert bigger.params > opt.params and bigger.tokens > opt.tokens


@given(st.floats(min_value=1e20, max_value=1e27), st.floats(min_value=0.5, max_value=2.0).filter(lambda x: abs(x - 1) > 1e-3))
def test_the_parametric_optimum_minimises_the_loss_on_the_budget_line(flops, shift):
    law = LAWS["chinchilla"]
    opt = compute_optimal(flops, law)
    n = opt.params * shift
    assert loss(n, flops / (6 * n), law) > opt.loss  # type: ignore[operator]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_a_bad_budget_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        compute_optimal(bad, LAWS["chinchilla"])


def test_unknown_law_names_the_choices():
    with pytest.raises(UsageError) as exc:
        get_law("kaplan")
    assert "chinchilla" in (exc.value.hint or "")
