"""Rack power, feeds and cooling: hand-computed values with the arithmetic written out."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mi400plan.errors import UsageError
from mi400plan.rack import (
    GLYCOL25,
    WATER,
    FeedSpec,
    airflow_m3_per_h,
    coolant_flow_l_per_min,
    energy_cost_per_day,
    facility_power_w,
    feed_apparent_power_va,
    feed_real_power_w,
    gpu_power_w,
    m3_per_h_to_cfm,
    parse_feed_spec,
    racks_needed,
    smallest_feed_set,
    usable_feed_capacity_w,
    wall_power_w,
)

RACK_NAMES = [
    "helios",
    "helios-s000nics",
    "ifoe64",
    "ifoe128",
    "mi355x-dlc-128",
    "mi350x-air",
    "mi300x-server",
    "gb200-nvl72",
    "gb300-nvl72",
    "vr200-nvl72",
]


# --- feeds ---------------------------------------------------------------------------------------


def test_415v_60a_three_phase_feed_is_43_1_kva_and_34_5_kw_at_80_percent() -> None:
    # sqrt(3) x 415 V x 60 A = 1.7320508 x 24,900 = 43,128 VA = 43.1 kVA (SPECS section 6)
    assert feed_apparent_power_va(415, 60, 3) == pytest.approx(43_128.1, abs=1)
    # x PF 1.0 x 0.8 continuous rating = 34,502 W ~ 34.5 kW
    assert feed_real_power_w(415, 60, 3, 1.0) * 0.8 == pytest.approx(34_502.5, abs=1)


def test_single_phase_feed_is_v_times_i() -> None:
    # 230 V x 32 A = 7,360 VA; x PF 0.95 = 6,992 W
    assert feed_apparent_power_va(230, 32, 1) == pytest.approx(7_360)
    assert feed_real_power_w(230, 32, 1, 0.95) == pytest.approx(6_992)


def test_two_415v_60a_feeds_cannot_carry_helios_range() -> None:
    # N: 2 x 34.5 kW = 69.0 kW; 2N: one side = 34.5 kW. Helios per S000: 180-220 kW.
    n = usable_feed_capacity_w(2, 415, 60, 3, 1.0, 0.8, "N")
    two_n = usable_feed_capacity_w(2, 415, 60, 3, 1.0, 0.8, "2N")
    assert n == pytest.approx(69_005, abs=2)
    assert two_n == pytest.approx(34_502, abs=2)
    assert n < 180_000 and two_n < 180_000


def test_smallest_feed_set_for_200_kw_2n() -> None:
    # Per feed at 0.8: 415 V 125 A: sqrt(3) x 415 x 125 x 0.8 = 71,881 W; 400 V 125 A: 69,282 W;
    # 480 V 100 A: 66,511 W. 200 kW per side needs ceil(200 / 71.9) = 3 (415 V), ceil(200 / 69.3) = 3
    # (400 V), ceil(200 / 66.5) = 4 (480 V). Fewest feeds: 6 (3 per side); of those, 400 V leaves the
    # least spare capacity: 3 x 69,282 = 207,846 W < 3 x 71,881 = 215,644 W.
    spec = smallest_feed_set(200_000, 0.8, "2N", 1.0)
    assert spec is not None
    assert (spec.count, spec.voltage_v, spec.phases, spec.current_a) == (6, 400, 3, 125)
    assert spec.usable_w(0.8, "2N") == pytest.approx(207_846, abs=2)
    # with N instead of 2N, the same load takes 3 feeds
    assert smallest_feed_set(200_000, 0.8, "N", 1.0).count == 3


def test_smallest_feed_set_none_when_too_many_feeds() -> None:
    # 2 MW at 2N needs 2 x ceil(2e6 / 71,881) = 2 x 28 = 56 feeds of the largest type: more than 16
    assert smallest_feed_set(2e6, 0.8, "2N", 1.0) is None


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4x415V3ph60A", FeedSpec(4, 415, 3, 60, 1.0)),
        ("2X480v3ph100a", FeedSpec(2, 480, 3, 100, 1.0)),
        ("2x230V1ph32A", FeedSpec(2, 230, 1, 32, 1.0)),
        ("4x415V3ph60Apf0.95", FeedSpec(4, 415, 3, 60, 0.95)),
        ("415V3ph63A", FeedSpec(1, 415, 3, 63, 1.0)),
    ],
)
def test_parse_feed_spec(text: str, expected: FeedSpec) -> None:
    assert parse_feed_spec(text) == expected


@pytest.mark.parametrize("text", ["4x415V", "four feeds", "4x415V2ph60A", "0x415V3ph60A", "4x415V3ph60Apf1.5", ""])
def test_parse_feed_spec_rejects_malformed(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_feed_spec(text)
    assert "4x415V3ph60A" in (exc.value.hint or "") or "power factor" in exc.value.message or "positive" in exc.value.message


@given(
    count=st.integers(1, 12),
    volts=st.sampled_from([208.0, 230.0, 400.0, 415.0, 480.0]),
    amps=st.floats(10, 400),
    pf=st.floats(0.5, 1.0),
    d1=st.floats(0.1, 1.0),
    d2=st.floats(0.1, 1.0),
)
def test_more_derating_never_increases_capacity(count, volts, amps, pf, d1, d2) -> None:  # noqa: ANN001
    lo, hi = sorted((d1, d2))  # derate hi keeps more of the rating than derate lo
    for red in ("N", "2N"):
        assert usable_feed_capacity_w(count, volts, amps, 3, pf, lo, red) <= usable_feed_capacity_w(
            count, volts, amps, 3, pf, hi, red
        )


@given(
    count=st.integers(1, 12),
    volts=st.sampled_from([208.0, 230.0, 415.0, 480.0]),
    phases=st.sampled_from([1, 3]),
    amps=st.floats(10, 400),
    pf=st.floats(0.5, 1.0),
    derate=st.floats(0.1, 1.0),
)
def test_2n_never_has_more_usable_capacity_than_n(count, volts, phases, amps, pf, derate) -> None:  # noqa: ANN001
    assert usable_feed_capacity_w(count, volts, amps, phases, pf, derate, "2N") <= usable_feed_capacity_w(
        count, volts, amps, phases, pf, derate, "N"
    )


# --- power ---------------------------------------------------------------------------------------


def test_gpu_power_cap_and_load() -> None:
    # min(1,750, 1,400) x 0.9 = 1,260 W; a cap above TDP changes nothing
    assert gpu_power_w(1750, 1400, 0.9) == pytest.approx(1260)
    assert gpu_power_w(1000, 1400) == 1000


def test_wall_power_through_efficiencies() -> None:
    # 100 kW / (0.975 x 0.97) = 100,000 / 0.94575 = 105,736 W
    assert wall_power_w(100_000, 0.975, 0.97) == pytest.approx(105_736, abs=1)


# --- heat ----------------------------------------------------------------------------------------


def test_water_at_10k_is_1_44_l_per_min_per_kw() -> None:
    # 1000 W / (997 kg/m^3 x 4181 J/(kg K) x 10 K) = 2.3990e-5 m^3/s x 60,000 = 1.439 L/min
    assert coolant_flow_l_per_min(1000, 10, WATER.rho_kg_per_m3, WATER.cp_j_per_kg_k) == pytest.approx(1.439, abs=5e-4)


def test_glycol_needs_more_flow_than_water() -> None:
    # 25% PG: 1000 / (1020 x 3900 x 10) x 60,000 = 1.508 L/min
    g = coolant_flow_l_per_min(1000, 10, GLYCOL25.rho_kg_per_m3, GLYCOL25.cp_j_per_kg_k)
    assert g == pytest.approx(1.508, abs=1e-3)


def test_airflow_for_10_kw_at_15_k() -> None:
    # 10,000 W / (1.2 x 1005 x 15) = 0.5528 m^3/s x 3600 = 1,990 m^3/h; / 1.699 (m^3/h per CFM) = 1,171 CFM
    m3h = airflow_m3_per_h(10_000, 15)
    assert m3h == pytest.approx(1990.0, abs=0.5)
    assert m3_per_h_to_cfm(m3h) == pytest.approx(1171.3, abs=0.5)


def test_facility_arithmetic() -> None:
    # 1,000 GPUs / 72 per rack = 13.9 -> 14 racks; 2 MW x PUE 1.2 = 2.4 MW; 2,400 kW x 24 h x $0.08 = $4,608
    assert racks_needed(1000, 72) == 14
    assert facility_power_w(2e6, 1.2) == pytest.approx(2.4e6)
    assert energy_cost_per_day(2.4e6, 0.08) == pytest.approx(4608)


# --- profiles and the whole chain ---------------------------------------------------------------


@pytest.mark.parametrize("name", RACK_NAMES)
def test_every_rack_profile_is_consistent(catalog, name: str) -> None:  # noqa: ANN001
    spec = catalog.get("racks", name).spec
    assert spec.consistency_errors() == []
    catalog.get("accelerators", spec.sku)  # the SKU resolves


def test_alias_vr200_nvl144(catalog) -> None:  # noqa: ANN001
    assert catalog.resolve("racks", "vr200-nvl144") == "vr200-nvl72"


def test_consistency_errors_catch_wrong_gpu_count(catalog) -> None:  # noqa: ANN001
    spec = catalog.get("racks", "helios").spec
    bad = spec.model_copy(update={"gpus": 64})
    errs = bad.consistency_errors()
    assert errs and "18 x 4 = 72" in errs[0]


def test_helios_gpus_alone_and_rack_total_vs_seed_000(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    row = rack(catalog, ["helios"]).rows[0]
    gpu = next(c for c in row.components if c.kind == "gpu")
    # 72 x 1.5-2.5 kW = 108-180 kW (AMD has not disclosed MI455X power)
    assert gpu.count == 72
    assert gpu.total_w.low == pytest.approx(72 * 1500)
    assert gpu.total_w.high == pytest.approx(72 * 2500)
    # the rack adds CPUs, NICs, switches and conversion losses on top of the GPUs
    assert row.wall_power_range_w.low > 108_000 and row.wall_power_range_w.high > 180_000
    assert row.wall_power_w > row.it_power_w.nominal
    # compared with S000's 180-220 kW, and the tool says how
    assert row.reference is not None
    assert row.reference.reference_w.low == 180_000 and row.reference.reference_w.high == 220_000
    lo, nom, hi = row.wall_power_range_w.low, row.wall_power_w, row.wall_power_range_w.high
    expected = (
        "agrees" if 180_000 <= nom <= 220_000 else "overlaps" if hi >= 180_000 and lo <= 220_000 else "below" if hi < 180_000 else "above"
    )
    assert row.reference.verdict == expected
    assert "S000" in row.reference.message


def test_two_60a_feeds_on_helios_show_deficit_and_needed_set(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    res = rack(catalog, ["helios"], feeds="2x415V3ph60A", redundancy="2N")
    row = res.rows[0]
    assert not row.feeds_ok and row.over_budget and res.check_failed()
    # usable = 1 side x 43,128 VA x 1.0 x 0.8 = 34,502 W
    assert row.feed_capacity_w == pytest.approx(34_502, abs=2)
    assert row.feeds.headroom_w == pytest.approx(34_502 - row.wall_power_w, abs=2)
    assert "86.3 kW" in row.feeds.arithmetic and "34.5 kW" in row.feeds.arithmetic and "deficit" in row.feeds.arithmetic
    # the suggested set carries the high estimate
    assert row.feeds.needed is not None and row.feeds.needed_usable_w >= row.wall_power_range_w.high


def test_seed_000_variant_fails_on_its_own_feeds(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    row = rack(catalog, ["helios-s000nics"]).rows[0]
    nic = [c for c in row.components if c.kind == "nic" and "Pollara" in c.component]
    assert nic and nic[0].count == 144  # 36 trays x 4
    assert not row.feeds_ok and row.feeds.needed is not None


def test_coolant_flow_follows_liquid_heat(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    row = rack(catalog, ["gb200-nvl72"]).rows[0]
    dt = row.cooling.coolant_delta_t_k
    assert row.coolant_l_per_min == pytest.approx(row.liquid_heat_w / (997 * 4181 * dt) * 60_000)
    # heat balance at nominal: liquid + air = wall power
    assert row.liquid_heat_w + row.air_heat_w == pytest.approx(row.wall_power_w)


def test_gpu_power_cap_lowers_power(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    full = rack(catalog, ["helios"]).rows[0]
    capped = rack(catalog, ["helios"], gpu_power_cap_w=1200).rows[0]
    # 72 GPUs x (1,750 - 1,200) W = 39,600 W less at the components
    assert full.it_power_w.nominal - capped.it_power_w.nominal == pytest.approx(72 * 550)


def test_air_rack_over_air_limit(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    res = rack(catalog, ["mi350x-air"])
    row = res.rows[0]
    # all heat to air: 64 GPUs x 1 kW alone exceed 40 kW
    assert row.liquid_heat_w == 0 and row.air_heat_w == pytest.approx(row.wall_power_w)
    assert not row.cooling_ok and res.check_failed()
    assert not rack(catalog, ["mi350x-air"], air_limit_kw=200).rows[0].over_budget


def test_facility_for_gpus(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    row = rack(catalog, ["helios"], gpus=1000, pue=1.3, price_per_kwh=0.1).rows[0]
    f = row.facility
    assert f is not None and f.racks == 14 and f.gpus == 14 * 72  # ceil(1000 / 72) = 14
    assert f.it_power_w.nominal == pytest.approx(14 * row.wall_power_w)
    assert f.facility_power_w.nominal == pytest.approx(1.3 * 14 * row.wall_power_w)
    assert f.cost_per_day_usd == pytest.approx(f.facility_power_w.nominal / 1000 * 24 * 0.1)


def test_flip_warning_when_feeds_fit_low_but_not_high(catalog) -> None:  # noqa: ANN001
    from mi400plan.api.rack import rack

    row = rack(catalog, ["helios"]).rows[0]
    lo, hi = row.wall_power_range_w.low, row.wall_power_range_w.high
    # pick N feeds of 415 V 3ph 100 A (57,504 W usable each at PF 1) so that capacity sits between lo and hi
    per = math.sqrt(3) * 415 * 100 * 0.8
    n = math.ceil(lo / per)
    assert n * per < hi, "choose a range where the verdict flips"
    res = rack(catalog, ["helios"], feeds=f"{n}x415V3ph100A", redundancy="N")
    assert any("flips" in w and "feed" in w for w in res.warnings)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), cap=st.floats(300, 1500))
def test_it_power_linear_in_gpu_count_at_fixed_per_gpu_power(n: int, cap: float) -> None:
    """IT(n trays) is affine in GPU count: equal steps in trays give equal steps in power, and the
    GPU line is exactly GPUs x per-GPU power (cap below the 1,500 W low TDP fixes it)."""
    from mi400plan.profiles import Catalog
    from mi400plan.rack import RackOptions, evaluate

    cat = Catalog.default([])
    spec = cat.get("racks", "helios").spec
    accel = cat.get("accelerators", spec.sku).spec
    trays = list(spec.trays)

    def it(k: int):  # noqa: ANN202
        r = spec.model_copy(update={"trays": [trays[0].model_copy(update={"count": k})] + trays[1:], "gpus": 4 * k})
        row, _ = evaluate(r, accel, RackOptions(gpu_power_cap_w=cap))
        return row

    r1, r2, r3 = it(n), it(2 * n), it(3 * n)
    gpu_line = next(c for c in r1.components if c.kind == "gpu")
    assert gpu_line.total_w.nominal == pytest.approx(4 * n * cap)
    assert r3.it_power_w.nominal - r2.it_power_w.nominal == pytest.approx(r2.it_power_w.nominal - r1.it_power_w.nominal)


def test_rack_it_power_linear_in_compute_trays(catalog) -> None:  # noqa: ANN001
    """Doubling the compute trays at fixed per-GPU power doubles the compute-tray power."""
    from mi400plan.rack import RackOptions, evaluate

    spec = catalog.get("racks", "helios").spec
    accel = catalog.get("accelerators", spec.sku).spec
    base, _ = evaluate(spec, accel, RackOptions())
    trays = list(spec.trays)
    doubled = spec.model_copy(update={"trays": [trays[0].model_copy(update={"count": 36})] + trays[1:], "gpus": 144})
    row2, _ = evaluate(doubled, accel, RackOptions())
    compute1 = sum(c.total_w.nominal for c in base.components if c.tray == "compute")
    compute2 = sum(c.total_w.nominal for c in row2.components if c.tray == "compute")
    assert compute2 == pytest.approx(2 * compute1)
    assert row2.gpus == 144


def _tiny_rack(psus_per_shelf: int, psu_redundancy: str, feed_redundancy: str):  # noqa: ANN202
    """One 10 kW GPU tray, 2 shelves of 3 kW PSUs, unity efficiencies, one pair of 415 V feeds."""
    from mi400plan.specs.rack import Rack

    return Rack.model_validate(
        {
            "name": "tiny", "display_name": "tiny", "vendor": "test", "sku": "mi455x", "gpus": 1,
            "trays": [{"name": "t", "count": 1, "components": [
                {"kind": "gpu", "name": "g", "count": 1, "power_w": 10_000}]}],
            "power": {"shelves": 2, "psus_per_shelf": psus_per_shelf, "psu_rating_w": 3_000,
                      "psu_efficiency": 1.0, "redundancy": psu_redundancy},
            "feeds": {"count": 2, "voltage_v": 415, "phases": 3, "current_a": 60, "redundancy": feed_redundancy},
        }
    )


def test_2n_feeds_need_psus_that_survive_losing_a_side(catalog) -> None:  # noqa: ANN001
    """A/B feeds: each power shelf has one AC input, so half the PSUs are behind each side.

    N+1, 2 shelves x 3 PSUs x 3 kW: usable with one spare per shelf = (6 - 2) x 3 kW = 12 kW >= 10 kW
    DC load (the shelf check passes), but one side holds 6 / 2 = 3 PSUs = 9 kW < 10 kW: a feed loss
    drops the rack. N+N, 2 x 4 PSUs: one side holds 4 x 3 kW = 12 kW >= 10 kW: no warning. The feeds
    themselves carry it: sqrt(3) x 415 V x 60 A x 0.8 = 34.5 kW per side >= 10 kW.
    """
    from mi400plan.rack import RackOptions, evaluate

    accel = catalog.get("accelerators", "mi455x").spec
    row, warns = evaluate(_tiny_rack(3, "N+1", "2N"), accel, RackOptions())
    assert row.psu.usable_w == pytest.approx(12_000) and row.psu.ok and row.feeds.ok
    side = [w for w in warns if "feeds are 2N" in w]
    assert len(side) == 1 and "3 x 3.00 kW = 9.0 kW" in side[0] and "10.0 kW DC load" in side[0]
    _, warns_nn = evaluate(_tiny_rack(4, "N+N", "2N"), accel, RackOptions())
    assert not any("feeds are 2N" in w for w in warns_nn)
    _, warns_n = evaluate(_tiny_rack(3, "N+1", "N"), accel, RackOptions())
    assert not any("feeds are 2N" in w for w in warns_n)
