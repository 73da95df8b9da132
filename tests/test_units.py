"""Unit parsing: decimal vs binary prefixes, bits vs bytes (IEC 80000-13)."""

from __future__ import annotations

import pytest

from mi400plan import units
from mi400plan.units import UnitError, parse_count, parse_duration, parse_rate, parse_size, parse_size_range


def test_decimal_and_binary_sizes_differ() -> None:
    assert parse_size("32MB") == 32_000_000
    assert parse_size("32MiB") == 33_554_432  # 32 * 1024 * 1024
    assert parse_size("4096") == 4096
    assert parse_size("1.5GiB") == 1_610_612_736


def test_bits_vs_bytes() -> None:
    assert parse_rate("400Gb/s") == pytest.approx(50e9)  # 400e9 bit/s / 8
    assert parse_rate("50GB/s") == pytest.approx(50e9)
    assert parse_rate("1.8TB/s") == pytest.approx(1.8e12)


def test_durations_and_counts() -> None:
    assert parse_duration("2us") == pytest.approx(2e-6)
    assert parse_duration("1.5ms") == pytest.approx(1.5e-3)
    assert parse_count("15T") == 15e12
    assert parse_count("128M") == 128e6


def test_size_range_doubles() -> None:
    assert parse_size_range("1KiB..8KiB") == [1024, 2048, 4096, 8192]


@pytest.mark.parametrize("bad", ["", "12XB", "abc", "-3MB"])
def test_bad_sizes_say_what_was_expected(bad: str) -> None:
    with pytest.raises(UnitError):
        parse_size(bad)


def test_formatting_states_unit() -> None:
    assert units.fmt_bytes(2**30) == "1.0 GiB"
    assert units.fmt_bytes(1e9, binary=False) == "1.0 GB"
    assert units.fmt_time(186.7e-6) == "186.7 us"
