"""harness.panels.times: durations and times."""

from __future__ import annotations

import pytest

from harness.panels import format_duration, parse_duration, parse_time


def test_times_and_durations() -> None:
    assert parse_duration("90") == 90 and parse_duration("15m") == 900 and parse_duration("1h30m") == 5400
    assert parse_duration("15 minutes") == 900 and parse_duration("500ms") == 0.5
    with pytest.raises(ValueError):
        parse_duration("soon")
    assert format_duration(4) == "4s" and format_duration(90) == "1m30s" and format_duration(0.25) == "250ms"
    now = 1_800_000_000.0
    assert parse_time("1764450000", now) == 1764450000
    assert parse_time("now", now) == now and parse_time("now-15m", now) == now - 900
    assert parse_time("last 10 minutes", now) == now - 600 and parse_time("2 hours ago", now) == now - 7200
    assert parse_time("2027-01-15T08:00:00Z") == parse_time("2027-01-15T08:00:00") == 1_800_000_000
    with pytest.raises(ValueError):
        parse_time("yesterday-ish", now)
    with pytest.raises(ValueError, match=r"1764450000000 looks like milliseconds; give seconds \(1764450000\)"):
        parse_time("1764450000000", now)
