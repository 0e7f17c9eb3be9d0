"""Percentiles, overlap fractions and the hours-to-N formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.report.hours import hours_by_requests, hours_by_tokens, poisson_rate_interval
from harness.report.stats import mean, overlap_fraction, percentile


def test_percentile_linear_interpolation() -> None:
    xs = [4.0, 1.0, 3.0, 2.0]
    assert percentile(xs, 50) == pytest.approx(2.5)
    assert percentile(xs, 90) == pytest.approx(3.7)
    assert percentile(xs, 99) == pytest.approx(3.97)
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_percentile_matches_numpy() -> None:
    rng = np.random.default_rng(1)
    xs = list(rng.exponential(2.0, 257))
    for q in (1, 25, 50, 90, 99, 99.9):
        assert percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_mean() -> None:
    assert mean([1, 2, 3, 6]) == 3.0
    assert mean([]) is None


def test_overlap_fraction() -> None:
    assert overlap_fraction(0, 10, 5, 20) == 0.5
    assert overlap_fraction(0, 10, -5, 20) == 1.0
    assert overlap_fraction(0, 10, 10, 20) == 0.0
    assert overlap_fraction(2, 6, 3, 4) == 0.25
    # zero-length interval: all or nothing, window half-open
    assert overlap_fraction(5, 5, 5, 6) == 1.0
    assert overlap_fraction(6, 6, 5, 6) == 0.0


def test_seed_hours_by_tokens() -> None:
    # the seed article: 100K samples x 2965 tokens / 577.8 tok/s / 3600 = 142.5 h
    h = hours_by_tokens(100_000, 2965, 577.8, 1.0)
    assert h == pytest.approx(142.5, abs=0.1)
    # a usable share below 1 scales the cost up
    assert hours_by_tokens(100_000, 2965, 577.8, 0.5) == pytest.approx(2 * h)
    assert hours_by_tokens(100_000, None, 577.8) is None
    assert hours_by_tokens(100_000, 2965, 0.0) is None


def test_poisson_interval_bounds() -> None:
    lo, hi = poisson_rate_interval(100, 1000.0)
    assert lo == pytest.approx((100 - 1.96 * 10) / 1000)
    assert hi == pytest.approx((100 + 1.96 * 10) / 1000)
    h = hours_by_requests(360, 100, 1000.0)
    assert h["hours"] == pytest.approx(1.0)  # 0.1 req/s = 360 per hour
    assert h["samples_per_hour"] == pytest.approx(360.0)
    assert h["hours_low"] == pytest.approx(360 / (0.1196 * 3600))
    assert h["hours_high"] == pytest.approx(360 / (0.0804 * 3600))
    assert h["hours_low"] < h["hours"] < h["hours_high"]


def test_poisson_no_upper_bound_when_lower_rate_not_positive() -> None:
    # k = 3: 3 - 1.96 * sqrt(3) = -0.39 <= 0
    lo, hi = poisson_rate_interval(3, 100.0)
    assert lo is None and hi == pytest.approx((3 + 1.96 * math.sqrt(3)) / 100)
    h = hours_by_requests(1000, 3, 100.0)
    assert h["hours"] == pytest.approx(1000 / (0.03 * 3600))
    assert h["hours_high"] is None and h["hours_low"] is not None
    # k = 4: 4 - 3.92 > 0 -> bounded
    assert hours_by_requests(1000, 4, 100.0)["hours_high"] is not None


def test_no_completions_or_empty_window() -> None:
    h = hours_by_requests(1000, 0, 100.0)
    assert h["hours"] is None and h["hours_high"] is None and h["samples_per_hour"] == 0.0
    assert hours_by_requests(1000, 5, 0.0)["hours"] is None
    assert poisson_rate_interval(5, 0.0) == (None, None)
