"""Cost, energy and emissions: seed 002's table from its own inputs, hand arithmetic, properties,
a published training run's energy, and bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan.cost import (
    CostInputs,
    capex_per_hour,
    capital_recovery_factor,
    cost_per_mtok,
    emissions_t,
    per_gpu_hour,
    run_energy_mwh,
    tokens_per_s_per_mw,
)

# --- seed 002: "Total Cost of Ownership and Power Efficiency by GPU" (SemiAnalysis, 2025-06-20) --------
# Its inputs: upfront cluster capex per GPU (USD), TDP (W), dense TFLOP/s (FP4, FP6, FP8).
SEED = {
    "B200 HGX": (44954, 1000, 9000, 4500, 4500),
    "B300": (53742, 1200, 13500, 4500, 4500),
    "GB200 NVL72": (54123, 1200, 10000, 5000, 5000),
    "GB300 NVL72": (61644, 1400, 15000, 5000, 5000),
    "MI355X": (24711, 1400, 10000, 10000, 5000),
}
# Its outputs: capex per GPU-hour; "TCO" per PFLOP/s-hour at FP4, FP6, FP8; TFLOP/s per W FP4, FP6, FP8.
SEED_ROWS = {
    "B200 HGX": (1.54, 0.17, 0.34, 0.34, 9.0, 4.5, 4.5),
    "B300": (1.85, 0.14, 0.41, 0.41, 11.3, 3.8, 3.8),
    "GB200 NVL72": (1.86, 0.19, 0.37, 0.37, 8.3, 4.2, 4.2),
    "GB300 NVL72": (2.12, 0.14, 0.42, 0.42, 10.7, 3.6, 3.6),
    "MI355X": (0.85, 0.08, 0.08, 0.17, 7.1, 7.1, 3.6),
}

# The seed does not state its amortization. Assumption (stated in the README): an annuity with annual
# payments over 5 years at 15.36% cost of capital, 8760 h a year:
#   (1.1536)^5 = 2.04304, (1.1536)^-5 = 0.489467, CRF = 0.1536 / (1 - 0.489467) = 0.1536 / 0.510533 = 0.300862
#   B200:  44,954 x 0.300862 = 13,524.96 per year / 8760 = 1.5439 -> 1.54
#   MI355X: 24,711 x 0.300862 =  7,434.61 per year / 8760 = 0.8487 -> 0.85
# No round (rate, life) pair does it: the five rounded rows need CRF in [0.30074, 0.30107]
# (5 years: 15.34-15.39%; 4 years: 7.82-7.87%; 6 years: 20.00-20.05%).
SEED_RATE, SEED_YEARS = 0.1536, 5


def half_up(x: float, digits: int) -> float:
    """Round half away from zero, as a spreadsheet does (Python's round() goes to even: 11.25 -> 11.2)."""
    from decimal import ROUND_HALF_UP, Decimal

    return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def test_seed_crf_by_hand() -> None:
    assert capital_recovery_factor(SEED_RATE, SEED_YEARS) == pytest.approx(0.300862, abs=1e-6)


@pytest.mark.parametrize("name", list(SEED))
def test_seed_002_rows_from_its_own_inputs(name: str) -> None:
    capex, tdp, fp4, fp6, fp8 = SEED[name]
    want = SEED_ROWS[name]
    per_hour = capex_per_hour(capex, SEED_RATE, SEED_YEARS)
    assert half_up(per_hour, 2) == want[0]
    # "TCO per PFLOPS" = capex per GPU-hour / dense PFLOP/s (no power, no operating cost):
    #   B200 FP4: 1.5439 / 9.0 = 0.1715 -> 0.17; FP8: 1.5439 / 4.5 = 0.3431 -> 0.34
    #   MI355X FP4: 0.8487 / 10.0 = 0.0849 -> 0.08; FP8: 0.8487 / 5.0 = 0.1697 -> 0.17
    for tflops, got in zip((fp4, fp6, fp8), want[1:4]):
        assert half_up(per_hour / (tflops / 1000), 2) == pytest.approx(got)
    # TFLOP/s per W = dense TFLOP/s / chip TDP: B200 9000 / 1000 = 9.0; MI355X 10000 / 1400 = 7.14 -> 7.1
    for tflops, got in zip((fp4, fp6, fp8), want[4:]):
        assert half_up(tflops / tdp, 1) == pytest.approx(got)  # B300: 13,500 / 1,200 = 11.25 -> 11.3


def test_seed_002_rows_through_the_cost_command(cli) -> None:  # noqa: ANN001
    """The bundled seed systems at the seed's amortization reproduce its B200 HGX and MI355X rows."""
    out = cli(["cost", "b200-hgx", "mi355x-dlc-128", "--cost-of-capital", str(SEED_RATE),
               "--depreciation-years", str(SEED_YEARS), "--json"])
    assert out.exit_code == 0, out.stdout
    data = json.loads(out.stdout)["data"]
    rows = {r["system"]: r for r in data["rows"]}
    b200, mi = rows["b200-hgx"], rows["mi355x-dlc-128"]
    assert round(b200["capex_per_gpu_hour"]["nominal"], 2) == 1.54
    assert round(mi["capex_per_gpu_hour"]["nominal"], 2) == 0.85
    assert round(b200["capex_per_pflops_hour"]["fp4"], 2) == 0.17
    assert round(b200["capex_per_pflops_hour"]["fp8"], 2) == 0.34
    # The MI355X profile's disclosed rates are 10,066.3 / 5,033.2 TFLOP/s (AMD), not the seed's 10,000 / 5,000:
    # 0.8487 / 10.0663 = 0.0843 -> 0.08; 0.8487 / 5.0332 = 0.1686 -> 0.17
    assert round(mi["capex_per_pflops_hour"]["fp4"], 2) == 0.08
    assert round(mi["capex_per_pflops_hour"]["fp8"], 2) == 0.17
    assert round(b200["tflops_per_w_tdp"]["fp4"], 1) == 9.0
    assert any("33% lower" in n for n in data["notes"])  # where the seed does not follow from its inputs


# --- the all-in GPU-hour by hand ---------------------------------------------------------------------

BASE = CostInputs(
    capex_per_gpu=40_000.0, depreciation_years=5.0, cost_of_capital=0.10, wall_w_load=1500.0,
    wall_w_provisioned=1800.0, pue=1.2, electricity_price_per_kwh=0.08, facility="owned",
    facility_capex_per_mw=12e6, facility_life_years=15.0, operating_cost_per_kw_month=20.0,
    colocation_per_kw_month=180.0,
)


def test_all_in_gpu_hour_by_hand() -> None:
    # CRF(0.10, 5) = 0.1 / (1 - 1.1^-5) = 0.1 / (1 - 0.620921) = 0.263797
    # capex    = 40,000 x 0.263797 / 8760 = 1.20455
    # facility = 12e6 x 0.0018 MW = 21,600 x CRF(0.10, 15) = 21,600 x 0.131474 = 2,839.83 / 8760 = 0.324181
    # O&M      = 20 x 1.8 kW / 730 = 0.0493151
    # energy   = 1.5 kW x 1.2 x 0.08 = 0.144
    b = per_gpu_hour(BASE)
    assert b.capex == pytest.approx(1.20455, rel=1e-5)
    assert b.facility == pytest.approx(0.324181, rel=1e-5)
    assert b.operating == pytest.approx(0.0493151, rel=1e-5)
    assert b.energy == pytest.approx(0.144)
    assert b.total == pytest.approx(1.20455 + 0.324181 + 0.0493151 + 0.144, rel=1e-5)
    # colocation: 180 x 1.8 kW / 730 = 0.443836 replaces facility + O&M
    c = per_gpu_hour(CostInputs(**{**BASE.__dict__, "facility": "colocation"}))
    assert c.facility == pytest.approx(0.443836, rel=1e-5)
    assert c.operating == 0.0


def test_zero_cost_of_capital_is_straight_line() -> None:
    assert capital_recovery_factor(0.0, 4) == 0.25
    assert capex_per_hour(35_040.0, 0.0, 4) == pytest.approx(1.0)  # 35,040 / 4 / 8760


def test_mtok_and_tokens_per_mw_by_hand() -> None:
    # 2.00 per GPU-hour at 1,000 tokens/s per GPU: 3.6e6 tokens an hour -> 2.00 / 3.6 = 0.5556 per Mtok
    assert cost_per_mtok(2.0, 1000.0) == pytest.approx(0.555556, rel=1e-5)
    # 1,000 tokens/s per GPU at 1,800 W provisioned, PUE 1.2: 1,000 / (0.0018 x 1.2) = 462,963 tokens/s per MW
    assert tokens_per_s_per_mw(1000.0, 1800.0, 1.2) == pytest.approx(462_962.96, rel=1e-6)


# --- properties ------------------------------------------------------------------------------------

PRICE_FIELDS = ("capex_per_gpu", "cost_of_capital", "wall_w_load", "wall_w_provisioned", "pue",
                "electricity_price_per_kwh", "facility_capex_per_mw", "operating_cost_per_kw_month",
                "colocation_per_kw_month")

inputs = st.builds(
    CostInputs,
    capex_per_gpu=st.floats(1e3, 2e5), depreciation_years=st.floats(1, 10), cost_of_capital=st.floats(0, 0.5),
    wall_w_load=st.floats(100, 3000), wall_w_provisioned=st.floats(100, 4000), pue=st.floats(1, 2),
    electricity_price_per_kwh=st.floats(0.01, 0.5), facility=st.sampled_from(["owned", "colocation"]),
    facility_capex_per_mw=st.floats(1e6, 3e7), facility_life_years=st.floats(5, 30),
    operating_cost_per_kw_month=st.floats(1, 100), colocation_per_kw_month=st.floats(50, 400),
)


@given(inputs, st.sampled_from(PRICE_FIELDS), st.floats(1.0, 3.0))
def test_cost_never_decreases_when_a_price_increases(i: CostInputs, name: str, factor: float) -> None:
    before = per_gpu_hour(i).total
    raised = CostInputs(**{**i.__dict__, name: getattr(i, name) * factor + (0.01 if name == "cost_of_capital" else 0)})
    assert before > 0
    assert per_gpu_hour(raised).total >= before * (1 - 1e-12)


@given(inputs, st.sampled_from(("depreciation_years", "facility_life_years")), st.floats(1.0, 3.0))
def test_longer_life_never_costs_more(i: CostInputs, name: str, factor: float) -> None:
    longer = CostInputs(**{**i.__dict__, name: getattr(i, name) * factor})
    assert per_gpu_hour(longer).total <= per_gpu_hour(i).total * (1 + 1e-12)


@given(st.floats(1, 1e8), st.floats(1, 1e4), st.floats(100, 3000), st.floats(1, 2))
def test_energy_linear_in_gpu_hours(hours: float, k: float, watts: float, pue: float) -> None:
    assert run_energy_mwh(hours * k, watts, pue) == pytest.approx(k * run_energy_mwh(hours, watts, pue), rel=1e-12)


def test_energy_by_hand() -> None:
    # 1,000 GPU-hours x 1,500 W = 1.5 MWh at the wall; x PUE 1.2 = 1.8 MWh; x 0.367 kg/kWh = 0.6606 t
    assert run_energy_mwh(1000, 1500, 1.2) == pytest.approx(1.8)
    assert emissions_t(1.8, 0.367) == pytest.approx(0.6606)


# --- a published run: Llama 3.1 (Meta model card, "Training Energy Use", July 2024) ------------------
# 8B 1.46M, 70B 7.0M, 405B 30.84M H100-80GB GPU-hours (39.3M in all) at 700 W (TDP, the card's power,
# "adjusted for power usage efficiency"); location-based emissions 420, 2,040, 8,930 t CO2eq (11,390).
def test_llama31_training_energy_reproduces() -> None:
    e405 = run_energy_mwh(30.84e6, 700.0, 1.0)
    assert e405 == pytest.approx(21_588.0)  # 30.84e6 h x 0.0007 MW
    # The card's grid intensity follows from the 405B row: 8,930 t / 21,588 MWh = 0.41365 kg/kWh.
    k = 8930.0 / e405
    # That one intensity then gives the other rows and the total (energy linear in GPU-hours):
    assert emissions_t(run_energy_mwh(39.3e6, 700.0, 1.0), k) == pytest.approx(11_390, rel=0.005)  # 11,380
    assert emissions_t(run_energy_mwh(7.0e6, 700.0, 1.0), k) == pytest.approx(2_040, rel=0.01)  # 2,027
    assert emissions_t(run_energy_mwh(1.46e6, 700.0, 1.0), k) == pytest.approx(420, rel=0.01)  # 422.7


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--electricity-price", "-0.1"], "--electricity-price must be a number in [1e-06,"),
        (["--electricity-price", "0"], "--electricity-price must be a number in [1e-06,"),
        (["--pue", "0.9"], "--pue must be a number in [1,"),
        (["--depreciation-years", "0"], "--depreciation-years must be a number in [0.1, 100]"),
        (["--capex-per-gpu", "-5"], "--capex-per-gpu must be a number in [1,"),
        (["--gpu-load", "1.5"], "--gpu-load must be a number in [0.001, 1]"),
        (["--cost-of-capital", "-0.01"], "--cost-of-capital must be a number in [0, 1]"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(cli, flags: list[str], words: str) -> None:  # noqa: ANN001
    out = cli(["cost", "b200-hgx", *flags, "--json"])
    assert out.exit_code == 2
    env = json.loads(out.stdout)
    assert env["status"] == "error" and words in env["errors"][0]["message"]



def _site(text_site: str, currency: str = "USD") -> str:
    return f'''name = "s"
display_name = "s"
currency = "{currency}"
year = 2025
[site]
depreciation_years = 5
cost_of_capital = 0.1
electricity_price_per_kwh = 0.08
pue = 1.2
facility_capex_per_mw = 1e7
facility_life_years = 15
operating_cost_per_kw_month = 20
colocation_per_kw_month = 180
network_capex_per_gpu = 4000
gpu_load = 0.9
grid_kg_co2e_per_kwh = 0.4
{text_site}'''


@pytest.mark.parametrize(
    ("currency", "extra", "field", "words"),
    [
        ("XYZ", "", "currency", "unknown currency"),
        ("USD", "", None, None),
    ],
)
def test_site_profile_currency(cli, tmp_path, write_profile, currency, extra, field, words) -> None:  # noqa: ANN001
    write_profile(tmp_path, "costs", "s", _site(extra, currency))
    out = cli(["cost", "b200-hgx", "--site", "s", "--profiles", str(tmp_path), "--json"])
    if words is None:
        assert out.exit_code == 0
        return
    assert out.exit_code == 3
    err = json.loads(out.stdout)["errors"][0]["message"]
    assert words in err and field in err


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("electricity_price_per_kwh", "-0.05", "electricity_price_per_kwh must be in [1e-06,"),
        ("electricity_price_per_kwh", "0", "electricity_price_per_kwh must be in [1e-06,"),
        ("pue", "0.95", "pue must be in [1, 10]"),
        ("depreciation_years", "0", "depreciation_years must be in [0.1, 100]"),
        ("colocation_per_kw_month", "{ nominal = 150, low = -1, high = 200, status = \"E\" }", "colocation_per_kw_month must be in (0,"),
    ],
)
def test_bad_site_values_exit_3_naming_the_field(cli, tmp_path, write_profile, key, value, words) -> None:  # noqa: ANN001
    text = "\n".join(f"{key} = {value}" if line.startswith(f"{key} =") else line for line in _site("").splitlines())
    write_profile(tmp_path, "costs", "s", text)
    out = cli(["cost", "b200-hgx", "--site", "s", "--profiles", str(tmp_path), "--json"])
    assert out.exit_code == 3
    assert words in json.loads(out.stdout)["errors"][0]["message"]
    plain = cli(["cost", "b200-hgx", "--site", "s", "--profiles", str(tmp_path)])
    assert "Traceback" not in plain.output and "site" in plain.output


def test_currency_mismatch_is_an_error(cli, tmp_path, write_profile) -> None:  # noqa: ANN001
    write_profile(tmp_path, "costs", "s", _site("", "EUR"))
    out = cli(["cost", "b200-hgx", "--site", "s", "--profiles", str(tmp_path), "--json"])
    assert out.exit_code == 3
    assert "no exchange rates" in json.loads(out.stdout)["errors"][0]["message"]


# --- the command -----------------------------------------------------------------------------------


def test_names_resolve_by_system_rack_or_sku(catalog) -> None:  # noqa: ANN001
    from mi400plan.cost import resolve_system

    assert resolve_system(catalog, "b200").name == "b200-hgx"
    assert resolve_system(catalog, "mi355x").name == "mi355x-dlc-128"
    assert resolve_system(catalog, "gb200-nvl72").name == "gb200-nvl72"


def test_unknown_name_exits_3(cli) -> None:  # noqa: ANN001
    out = cli(["cost", "nosuchthing", "--json"])
    assert out.exit_code == 3


def test_ranking_flip_warned_inside_ranges(cli) -> None:  # noqa: ANN001
    # Helios and VR200 capex are wide estimates: their order per FP8 PFLOP/s-hour can reverse.
    data = json.loads(cli(["cost", "helios", "vr200-nvl72", "--json"]).stdout)["data"]
    assert data["ranking_flips"]
    assert all("reverse inside the estimate ranges" in f for f in data["ranking_flips"])
    # One system alone has nothing to flip against.
    assert json.loads(cli(["cost", "helios", "--json"]).stdout)["data"]["ranking_flips"] == []


def test_all_in_is_the_sum_of_its_terms_and_within_its_range(cli) -> None:  # noqa: ANN001
    rows = json.loads(cli(["cost", "gb200-nvl72", "mi355x", "b300", "--json"]).stdout)["data"]["rows"]
    for r in rows:
        h = r["per_gpu_hour"]
        assert h["total"]["nominal"] == pytest.approx(h["capex"] + h["facility"] + h["operating"] + h["energy"])
        assert 0 < h["total"]["low"] <= h["total"]["nominal"] <= h["total"]["high"]
        for p, rng in r["tco_per_pflops_hour"].items():
            assert rng["nominal"] == pytest.approx(h["total"]["nominal"] / (r["dense_tflops"][p] / 1000))


def test_energy_term_uses_rack_wall_power(cli) -> None:  # noqa: ANN001
    """Energy per GPU-hour = rack wall power per GPU at the load x PUE x price (rack command's figure)."""
    rack = json.loads(cli(["rack", "gb200-nvl72", "--gpu-load", "0.8", "--json"]).stdout)["data"]["rows"][0]
    per_gpu_w = rack["wall_power_w"] / rack["gpus"]
    row = json.loads(cli(["cost", "gb200-nvl72", "--gpu-load", "0.8", "--pue", "1.3",
                          "--electricity-price", "0.1", "--json"]).stdout)["data"]["rows"][0]
    assert row["wall_power_per_gpu_w"]["nominal"] == pytest.approx(per_gpu_w)
    assert row["per_gpu_hour"]["energy"] == pytest.approx(per_gpu_w / 1000 * 1.3 * 0.1)


def test_colocation_replaces_facility_and_operating(cli) -> None:  # noqa: ANN001
    row = json.loads(cli(["cost", "gb200-nvl72", "--facility", "colocation", "--json"]).stdout)["data"]["rows"][0]
    kw = row["provisioned_power_per_gpu_w"]["nominal"] / 1000
    assert row["per_gpu_hour"]["operating"] == 0
    assert row["per_gpu_hour"]["facility"] == pytest.approx(184.06 * kw / 730)


def test_csv_columns_are_the_json_row_fields(csv_matches_json) -> None:  # noqa: ANN001
    header, keys, _ = csv_matches_json(["cost", "b200-hgx", "mi355x", "--tokens-per-s", "1000"])
    assert set(keys) <= set(header)


def test_every_bundled_system_costs(cli, catalog) -> None:  # noqa: ANN001
    systems = [n for n in catalog.names("costs") if catalog.get("costs", n).spec.system is not None]
    out = cli(["cost", *systems, "--json"])
    assert out.exit_code == 0, out.stdout
    assert len(json.loads(out.stdout)["data"]["rows"]) == len(systems)


# --- wired into sweep, rack and (for serve) the library ------------------------------------------------

SWEEP = ["sweep", "llama3.1-8b", "--sku", "mi355x", "--gpus", "64", "--no-ranges", "--top", "1"]


def test_sweep_reports_energy_emissions_and_model_cost(cli) -> None:  # noqa: ANN001
    data = json.loads(cli([*SWEEP, "--tokens", "1T", "--json"]).stdout)["data"]
    e = data["energy"][0]
    row = data["rows"][0]
    gpu_hours = row["days"] * 24 * 64
    assert e["gpu_hours"] == pytest.approx(gpu_hours)
    # MWh = GPU-hours x wall W per GPU / 1e6 x PUE; t CO2e = MWh x 0.367 kg/kWh (EIA 2023 US average)
    assert e["energy_mwh"]["nominal"] == pytest.approx(gpu_hours * e["wall_power_per_gpu_w"]["nominal"] / 1e6 * 1.2)
    assert e["emissions_t"]["nominal"] == pytest.approx(e["energy_mwh"]["nominal"] * 0.367)
    # No --gpu-hour-cost: the cost model's all-in figure, the same as `mi400plan cost mi355x`
    per_hour = json.loads(cli(["cost", "mi355x", "--json"]).stdout)["data"]["rows"][0]["per_gpu_hour"]["total"]["nominal"]
    assert e["cost_source"] == "model: mi355x-dlc-128 at us-2025"
    assert row["cost_usd"] == pytest.approx(gpu_hours * per_hour)
    assert e["cost"]["nominal"] == pytest.approx(gpu_hours * per_hour)


def test_sweep_energy_doubles_with_tokens_and_flag_cost_wins(cli) -> None:  # noqa: ANN001
    # the batch is pinned: a planned batch grows with the tokens (batch.batch_law), which changes the step
    one = json.loads(cli([*SWEEP, "--global-batch", "512", "--tokens", "1T", "--json"]).stdout)["data"]["energy"][0]
    two = json.loads(cli([*SWEEP, "--global-batch", "512", "--tokens", "2T", "--gpu-hour-cost", "2",
                          "--json"]).stdout)["data"]
    e2 = two["energy"][0]
    assert e2["energy_mwh"]["nominal"] == pytest.approx(2 * one["energy_mwh"]["nominal"])
    assert e2["cost_source"] == "--gpu-hour-cost"
    assert two["rows"][0]["cost_usd"] == pytest.approx(e2["gpu_hours"] * 2)


def test_sweep_grid_intensity_and_pue_flags(cli) -> None:  # noqa: ANN001
    base = json.loads(cli([*SWEEP, "--tokens", "1T", "--json"]).stdout)["data"]["energy"][0]
    e = json.loads(cli([*SWEEP, "--tokens", "1T", "--pue", "1.5", "--grid-intensity", "0.1", "--json"]).stdout)["data"]["energy"][0]
    assert e["energy_mwh"]["nominal"] == pytest.approx(base["energy_mwh"]["nominal"] / 1.2 * 1.5)
    assert e["emissions_t"]["nominal"] == pytest.approx(e["energy_mwh"]["nominal"] * 0.1)
    bad = cli([*SWEEP, "--tokens", "1T", "--pue", "0.8", "--json"])
    assert bad.exit_code == 2 and "--pue" in json.loads(bad.stdout)["errors"][0]["message"]


def test_rack_racks_reports_facility_capex_and_cost_per_day(cli) -> None:  # noqa: ANN001
    row = json.loads(cli(["rack", "gb200-nvl72", "--racks", "10", "--json"]).stdout)["data"]["rows"][0]
    f = row["facility"]
    c = f["cost"]
    # facility capex = USD 11.7M per MW (Cushman & Wakefield 2025 average) x IT MW of 10 racks
    assert c["facility_capex"]["nominal"] == pytest.approx(11.7e6 * f["it_power_w"]["nominal"] / 1e6)
    # all-in cost per day = cost per GPU-hour x 24 h x 720 GPUs, at the rack command's load 1.0 and PUE 1.2
    per_hour = json.loads(cli(["cost", "gb200-nvl72", "--gpu-load", "1", "--pue", "1.2", "--json"]).stdout)
    per_hour = per_hour["data"]["rows"][0]["per_gpu_hour"]["total"]["nominal"]
    assert c["cost_per_gpu_hour"]["nominal"] == pytest.approx(per_hour)
    assert c["cost_per_day"]["nominal"] == pytest.approx(per_hour * 24 * 720)
    assert json.loads(cli(["rack", "gb200-nvl72", "--json"]).stdout)["data"]["rows"][0]["facility"] is None


def test_serving_economics_by_hand(catalog) -> None:  # noqa: ANN001
    from mi400plan.cost import gpu_hour_model, load_site, resolve_system, serving_economics
    from mi400plan.pricing import CostOverrides

    s = serving_economics(catalog, "gb200-nvl72", 2000.0)
    site_prof, site, _ = load_site(catalog, None, CostOverrides())
    m = gpu_hour_model(catalog, resolve_system(catalog, "gb200-nvl72"), site_prof, site)
    # 2,000 tokens/s per GPU = 7.2e6 tokens per GPU-hour: cost per Mtok = cost per GPU-hour / 7.2
    assert s.cost_per_mtok == pytest.approx(m.nominal.total / 7.2)
    # tokens/s per MW of IT = 2,000 / (provisioned W per GPU / 1e6); facility MW = IT MW x PUE 1.2
    assert s.tokens_per_s_per_mw_it == pytest.approx(2000 / (m.power.provisioned[1] / 1e6))
    assert s.tokens_per_s_per_mw_facility == pytest.approx(s.tokens_per_s_per_mw_it / 1.2)


@pytest.mark.parametrize("value", ["0", "-1"])
def test_sweep_gpu_hour_cost_must_be_positive(cli, value: str) -> None:  # noqa: ANN001
    out = cli([*SWEEP, "--tokens", "1T", "--gpu-hour-cost", value, "--json"])
    assert out.exit_code == 2
    assert "--gpu-hour-cost must be a number in [0.0001," in json.loads(out.stdout)["errors"][0]["message"]


SITE_PRICES = ("electricity_price_per_kwh", "pue", "cost_of_capital", "facility_capex_per_mw",
               "operating_cost_per_kw_month", "colocation_per_kw_month", "network_capex_per_gpu", "gpu_load")


@settings(max_examples=30)
@given(st.sampled_from(SITE_PRICES), st.floats(1.0, 1.5), st.sampled_from(["owned", "colocation"]))
def test_command_cost_never_decreases_when_a_site_price_increases(catalog, name: str, factor: float,  # noqa: ANN001
                                                                   facility: str) -> None:
    """Through the whole command (profiles, rack model, overrides): raising one site input from its
    profile value never lowers the all-in cost or its range ends."""
    from mi400plan.api.cost import CostOverrides, cost

    site = catalog.get("costs", "us-2025").spec.site
    base_value = getattr(site, name).nominal
    raised = min(base_value * factor, 0.99 if name == "cost_of_capital" else 1.0 if name == "gpu_load" else 1e12)
    before = cost(catalog, ["mi300x-server", "gb200-nvl72"], overrides=CostOverrides(site={name: base_value}, facility=facility))
    after = cost(catalog, ["mi300x-server", "gb200-nvl72"], overrides=CostOverrides(site={name: raised}, facility=facility))
    for b, a in zip(before.rows, after.rows):
        for end in ("low", "nominal", "high"):
            assert getattr(a.per_gpu_hour.total, end) >= getattr(b.per_gpu_hour.total, end) * (1 - 1e-12)


def test_site_network_capex_applies_only_where_the_system_excludes_it(cli) -> None:  # noqa: ANN001
    rows = json.loads(cli(["cost", "mi300x-server", "b200-hgx", "--network-capex-per-gpu", "5000", "--json"]).stdout)
    rows = {r["system"]: r for r in rows["data"]["rows"]}
    assert rows["mi300x-server"]["capex_per_gpu"]["nominal"] == 19000 + 5000  # server estimate + given network
    assert rows["mi300x-server"]["network"] == "site"
    assert rows["b200-hgx"]["capex_per_gpu"]["nominal"] == 44954  # seed figure includes its network


def test_cost_per_mtok_and_tokens_per_mw_in_the_command(cli) -> None:  # noqa: ANN001
    row = json.loads(cli(["cost", "gb200-nvl72", "--tokens-per-s", "2000", "--json"]).stdout)["data"]["rows"][0]
    total = row["per_gpu_hour"]["total"]
    # 2,000 tokens/s x 3,600 s = 7.2e6 tokens per GPU-hour: per Mtok = per GPU-hour / 7.2
    for end in ("low", "nominal", "high"):
        assert row["cost_per_mtok"][end] == pytest.approx(total[end] / 7.2)
    # per MW of facility power: 2,000 / (provisioned W / 1e6 x PUE 1.2)
    assert row["tokens_per_s_per_mw"] == pytest.approx(2000 / (row["provisioned_power_per_gpu_w"]["nominal"] / 1e6 * 1.2))


def test_serve_cost_per_token_from_the_model_without_a_flag(cli) -> None:  # noqa: ANN001
    args = ["serve", "llama3.1-8b", "--sku", "mi355x", "--concurrency", "64", "--no-ranges", "--top", "1", "--json"]
    data = json.loads(cli(args).stdout)["data"]
    info, row = data["skus"][0], data["rows"][0]
    per_hour = json.loads(cli(["cost", "mi355x", "--json"]).stdout)["data"]["rows"][0]["per_gpu_hour"]["total"]["nominal"]
    assert info["gpu_hour_cost"] == pytest.approx(per_hour)
    assert info["cost_source"].startswith("model: mi355x-dlc-128 at us-2025")
    # $/Mtok out = cost per GPU-second x decode share / output tokens/s per GPU x 1e6
    want = per_hour / 3600 * (1 - row["prefill_share"]) / row["tokens_per_s_per_gpu"] * 1e6
    assert row["cost_per_mtok_output"] == pytest.approx(want)
    flagged = json.loads(cli([*args[:-1], "--gpu-hour-cost", "3", "--json"]).stdout)["data"]["skus"][0]
    assert flagged["gpu_hour_cost"] == 3 and flagged["cost_source"] == "--gpu-hour-cost"


@pytest.mark.parametrize("value", ["0", "-0.1"])
def test_rack_price_per_kwh_must_be_positive(cli, value: str) -> None:  # noqa: ANN001
    out = cli(["rack", "gb200-nvl72", "--racks", "2", "--price-per-kwh", value, "--json"])
    assert out.exit_code == 2
    assert "--price-per-kwh must be a number in [1e-06," in json.loads(out.stdout)["errors"][0]["message"]


def test_user_profile_overrides_a_bundled_system(cli, tmp_path, write_profile) -> None:  # noqa: ANN001
    write_profile(tmp_path, "costs", "b200-hgx", '''name = "b200-hgx"
display_name = "our B200 quote"
currency = "USD"
year = 2026
[sources]
Q = { title = "Vendor quote", date = "2026-10-01" }
[system]
sku = "b200"
server_capex_per_gpu = { nominal = 35040, status = "disclosed", source = ["Q"] }
network_capex_per_gpu = { nominal = 3000, status = "estimate", source = ["Q"] }
wall_power_per_gpu_w = 1787.5
''')
    out = cli(["cost", "b200-hgx", "--profiles", str(tmp_path), "--cost-of-capital", "0", "--depreciation-years", "4",
               "--json"])
    row = json.loads(out.stdout)["data"]["rows"][0]
    assert row["capex_per_gpu"]["nominal"] == 38040 and row["network"] == "system" and row["capex_year"] == 2026
    # straight line: 38,040 / 4 y / 8760 h = 1.0856 per GPU-hour
    assert row["capex_per_gpu_hour"]["nominal"] == pytest.approx(38040 / 4 / 8760)
