"""The feed fix keeps what the user gave: the same feeds with a larger standard rating first, then more
feeds of the same rating, then the fewest standard rack feeds. Hand arithmetic: three-phase real power
P = sqrt(3) x V x I x PF, usable = P x derate (0.8, the NEC continuous-load rule), 2N counts one side."""

from __future__ import annotations

import pytest

from mi400plan.rack import FeedSpec, feed_fixes

S3 = 1.7320508075688772


def test_2n_two_415v_feeds_at_250kw():
    # One side carries 250 kW: I = 250,000 / (sqrt(3) x 415) = 250,000 / 718.80 = 347.8 A per phase;
    # device >= 347.8 / 0.8 = 434.8 A -> 450 A (NEC 240.6(A): ... 400, 450 ...).
    # Usable: 1 x sqrt(3) x 415 x 450 x 1.0 x 0.8 = 258,768 W >= 250,000.
    # Same 60 A rating: per feed sqrt(3) x 415 x 60 x 0.8 = 34,502 W; 250,000 / 34,502 = 7.25 -> 8 a side, 16 feeds.
    # Fewest standard feeds: 125 A at 415 V (71,880 W), 125 A at 400 V (69,282 W) and 100 A at 480 V (66,510 W)
    # each need 4 a side (8 feeds); the least spare of those is 480 V 100 A (4 x 66,510 = 266,040 W).
    fixes = feed_fixes(FeedSpec(2, 415.0, 3, 60.0), 250_000.0, 0.8, "2N")
    assert [f.label() for _, f in fixes] == ["2x415V3ph450A", "16x415V3ph60A", "8x480V3ph100A"]
    usable = [f.usable_w(0.8, "2N") for _, f in fixes]
    assert usable == pytest.approx([S3 * 415 * 450 * 0.8, 8 * S3 * 415 * 60 * 0.8, 4 * S3 * 480 * 100 * 0.8])
    assert usable[0] == pytest.approx(258_768, abs=1)


def test_n_four_feeds_keep_count_and_voltage():
    # N: four feeds share 250 kW: I = 250,000 / (4 x sqrt(3) x 415) = 86.95 A; / 0.8 = 108.7 A -> 110 A.
    # Usable 4 x sqrt(3) x 415 x 110 x 0.8 = 4 x 718.80 x 88 = 253,018 W.
    why, first = feed_fixes(FeedSpec(4, 415.0, 3, 60.0), 250_000.0, 0.8, "N")[0]
    assert first == FeedSpec(4, 415.0, 3, 110.0) and why == "same feeds, larger rating"
    assert first.usable_w(0.8, "N") == pytest.approx(253_018, abs=1)


def test_single_phase_and_power_factor_are_kept():
    # 2 x 230 V single-phase at PF 0.9, N, 20 kW: I = 20,000 / (2 x 230 x 0.9) = 48.3 A; / 0.8 = 60.4 A -> 70 A.
    _, first = feed_fixes(FeedSpec(2, 230.0, 1, 32.0, 0.9), 20_000.0, 0.8, "N")[0]
    assert first == FeedSpec(2, 230.0, 1, 70.0, 0.9)


def test_helios_reproducer_suggests_the_rating_its_own_loading_computes(catalog):
    """`rack helios --feeds 2x415V3ph60A`: the first fix is the same two 415 V three-phase feeds at the device
    rating the loading line computes for the high estimate, not a different voltage and count."""
    from mi400plan.api.rack import rack

    fd = rack(catalog, ["helios"], feeds="2x415V3ph60A", redundancy="2N").rows[0].feeds
    assert fd.needed == f"2N 2x415V3ph{fd.loading.overcurrent_device_a}A"
    assert fd.needed_usable_w >= fd.load_w.high
    assert fd.alternatives[0].startswith(fd.needed) and len(fd.alternatives) >= 2
    assert any("480V" in a for a in fd.alternatives[1:])
