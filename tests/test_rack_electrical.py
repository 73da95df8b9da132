"""Line current per phase, apparent power and the overcurrent device a feed needs, with the
arithmetic written out (I = P / (sqrt(3) x V_LL x PF); NEC 210.20(A) 125 % rule; NEC 240.6(A) sizes)."""

from __future__ import annotations

import json
import math

import pytest

from mi400plan.rack import (
    FeedSpec,
    carrying_feeds,
    feed_loading,
    line_current_a,
    overcurrent_device_a,
)


def test_three_phase_line_current_by_hand():
    # 100 kW at 415 V line-to-line, PF 0.95: 100000 / (1.7320508 x 415 x 0.95) = 146.44 A
    assert line_current_a(100e3, 415.0, 3, 0.95) == pytest.approx(100e3 / (math.sqrt(3) * 415 * 0.95))
    assert line_current_a(100e3, 415.0, 3, 0.95) == pytest.approx(146.44, abs=0.01)


def test_single_phase_line_current_by_hand():
    # 7.36 kW at 230 V, PF 1: 32 A
    assert line_current_a(7360.0, 230.0, 1, 1.0) == pytest.approx(32.0)


@pytest.mark.parametrize(
    ("amps", "derate", "device"),
    [
        (80.0, 0.8, 100),  # 80 / 0.8 = 100 A exactly: a 100 A device
        (81.0, 0.8, 110),  # 101.25 A -> next standard size 110 A
        (245.4, 0.8, 350),  # 306.75 A -> 350 A
        (300.0, 0.8, 400),  # 375 A -> 400 A
        (300.0, 1.0, 300),  # 100 %-rated assembly: the load current itself
        (5000.0, 0.8, None),  # 6,250 A: above the largest standard rating
    ],
)
def test_overcurrent_device_follows_the_125_percent_rule_and_standard_sizes(amps, derate, device):
    assert overcurrent_device_a(amps, derate) == device


def test_carrying_feeds_under_n_and_2n():
    assert carrying_feeds(4, "N") == 4
    assert carrying_feeds(4, "2N") == 2


def test_feed_loading_of_a_2n_rack_by_hand():
    # 176.4 kW on 2 x 415 V 3-phase feeds, 2N: one feed carries it all.
    # I = 176400 / (sqrt(3) x 415 x 1.0) = 245.41 A; device >= 245.41 / 0.8 = 306.8 A -> 350 A.
    ld = feed_loading(FeedSpec(2, 415.0, 3, 60.0, 1.0), 0.8, "2N", (150e3, 176.4e3, 200e3))
    assert ld.carrying_feeds == 1
    assert ld.line_current_a.nominal == pytest.approx(245.41, abs=0.01)
    assert ld.line_current_a.high == pytest.approx(200e3 / (math.sqrt(3) * 415), rel=1e-9)
    assert ld.load_va.nominal == pytest.approx(176.4e3)
    # high: 278.24 A / 0.8 = 347.8 A -> 350 A
    assert ld.overcurrent_device_a == 350


def test_rack_json_reports_the_loading(cli):
    out = json.loads(cli(["rack", "gb200-nvl72", "--json"]).stdout)
    fd = out["data"]["rows"][0]["feeds"]
    ld = fd["loading"]
    pf = fd["power_factor"]
    n = fd["count"] // 2 if fd["redundancy"] == "2N" else fd["count"]
    wall = fd["load_w"]["nominal"]
    assert ld["carrying_feeds"] == n
    assert ld["line_current_a"]["nominal"] == pytest.approx(wall / n / (math.sqrt(3) * fd["voltage_v"] * pf))
    assert ld["load_va"]["nominal"] == pytest.approx(wall / pf)
    assert ld["overcurrent_device_a"] >= ld["line_current_a"]["high"] / fd["derate"]
