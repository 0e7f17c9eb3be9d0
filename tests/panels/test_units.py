"""harness.panels.units: values and axis ticks in Grafana's units."""

from __future__ import annotations

import pytest

from harness.panels import format_value, tick_labels


@pytest.mark.parametrize(
    ("value", "unit", "decimals", "want"),
    [
        (1548.1, "short", None, "1.55 K"),
        (613.2, "short", None, "613"),
        (2_300_000, "short", None, "2.30 Mil"),
        (0.025, "s", None, "25.0 ms"),
        (2.5, "s", None, "2.50 s"),
        (90, "s", None, "1.50 min"),
        (0, "s", None, "0 s"),
        (250, "ms", None, "250 ms"),
        (10.34, "h", 1, "10.3 hour"),
        (80, "h", 1, "3.3 day"),
        (0.5, "h", 0, "30 min"),
        (0.353, "percentunit", 1, "35.3%"),
        (4, "reqps", None, "4.00 req/s"),
        (12.5, "percent", 0, "12%"),
        (2048, "bytes", 0, "2 KiB"),
        (7, "suffix: tok/s", 0, "7 tok/s"),
        (7, "tok/s", 0, "7 tok/s"),
        (float("nan"), "s", None, "NaN"),
    ],
)
def test_format_value_units(value: float, unit: str, decimals: int | None, want: str) -> None:
    assert format_value(value, unit, decimals) == want


def test_tick_labels_fewest_distinct_decimals() -> None:
    assert tick_labels([0, 0.01, 0.02, 0.03], "s") == ["0 s", "10 ms", "20 ms", "30 ms"]
    assert tick_labels([0, 1000, 2000, 3000], "short") == ["0", "1 K", "2 K", "3 K"]
    assert tick_labels([0, 0.5, 1, 1.5], "reqps") == ["0 req/s", "0.5 req/s", "1.0 req/s", "1.5 req/s"]
    assert tick_labels([0, 0.2, 0.4], "percentunit") == ["0%", "20%", "40%"]
