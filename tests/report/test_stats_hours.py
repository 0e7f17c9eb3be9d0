"""Percentiles, overlap fractions and the hours-to-N formulas (batch means, prediction interval, tokens)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.report.hours import (
    MAX_BATCHES,
    MIN_BATCHES,
    T975,
    batch_means,
    hours_by_tokens,
    hours_interval,
    needed_window,
)
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


def _events(counts: list[int], w0: float = 0.0, size: float = 10.0) -> list[float]:
    """``counts[b]`` events spread inside batch b of ``size`` seconds starting at ``w0``."""
    out = []
    for b, c in enumerate(counts):
        out += [w0 + b * size + size * (i + 0.5) / c for i in range(c)]
    return out


def test_batch_means_figures_are_exact() -> None:
    counts = [10, 12, 8, 10, 10, 10, 10, 10, 10, 10]
    bm = batch_means([*_events(counts), -1.0, 100.0, 150.0], 0.0, 100.0, mean_e2e_s=1.0)  # outside: ignored
    assert (bm.events, bm.window_s, bm.batches, bm.batch_s) == (100, 100.0, 10, 10.0)
    assert bm.rate == pytest.approx(1.0)
    assert bm.batch_rates == pytest.approx([c / 10 for c in counts])
    var = (0.2**2 + 0.2**2) / 9  # sample variance of the batch rates (mean 1.0)
    assert bm.se == pytest.approx(math.sqrt(var / 10))
    assert bm.sigma2 == pytest.approx(10 * var)
    assert bm.t == T975[9] and bm.reason is None
    # estimate alone, then the prediction interval of a run collecting N = 360 samples (T_N = 360 s)
    lo, hi = bm.rate_bounds()
    assert (lo, hi) == pytest.approx((1 - T975[9] * math.sqrt(var / 10), 1 + T975[9] * math.sqrt(var / 10)))
    half = T975[9] * math.sqrt(var / 10 + 10 * var / 360)
    assert bm.rate_bounds(360) == pytest.approx((1 - half, 1 + half))
    assert bm.rel_halfwidth() == pytest.approx(T975[9] * math.sqrt(var / 10))
    h = hours_interval(360, bm)
    assert h["hours"] == pytest.approx(0.1)  # 360 samples at 1 per second
    assert h["samples_per_hour"] == pytest.approx(3600)
    assert h["hours_low"] == pytest.approx(360 / ((1 + half) * 3600))
    assert h["hours_high"] == pytest.approx(360 / ((1 - half) * 3600))
    assert (h["rate_low"], h["rate_high"]) == pytest.approx((1 - half, 1 + half))
    # a long production run: its own variability vanishes, the estimate's error stays
    big = hours_interval(10**9, bm)
    assert big["hours_low"] == pytest.approx(10**9 / ((1 + T975[9] * math.sqrt(var / 10)) * 3600), rel=1e-6)


def test_event_on_a_batch_edge_goes_to_the_later_batch_and_the_window_is_open() -> None:
    # the event at the window start opened the window (the first wave's last end): not counted; nor one at its end
    bm = batch_means([0.0, 10.0, 99.999, 100.0], 0.0, 100.0, None)
    assert bm.batches == 10 and bm.events == 2
    assert bm.batch_rates[0] == 0.0 and bm.batch_rates[1] == 0.1 and bm.batch_rates[9] == 0.1


def test_fewer_batches_when_short_and_no_interval_below_five() -> None:
    ev = _events([5] * 10)
    assert batch_means(ev, 0.0, 100.0, 5.0).batches == 10  # 10 s batches = 2 x 5 s
    b8 = batch_means(ev, 0.0, 100.0, 6.0)  # floor(100 / 12) = 8 batches of 12.5 s
    assert (b8.batches, b8.batch_s, b8.t) == (8, 12.5, T975[7])
    assert batch_means(ev, 0.0, 100.0, 10.0).batches == 5
    none = batch_means(ev, 0.0, 100.0, 10.1)  # 4 batches would be needed: no interval
    assert none.batches == 0 and none.se is None and none.rate == pytest.approx(0.5)
    assert none.reason == "window 100.0 s < 5 batches × 2 × mean E2E (10.1 s) = 101.0 s: no interval"
    assert none.rate_bounds(100) == (None, None) and none.rel_halfwidth() is None
    h = hours_interval(1800, none)
    assert h["hours"] == pytest.approx(1.0) and h["hours_low"] is None and h["hours_high"] is None
    assert needed_window(none) is None


def test_regular_completions_give_a_point_interval_and_bursty_ones_lose_the_upper_bound() -> None:
    even = batch_means(_events([4] * 10), 0.0, 100.0, 1.0)
    assert even.se == 0.0 and even.rate_bounds(400) == pytest.approx((0.4, 0.4))
    bursty = batch_means(_events([40, 0, 0, 0, 0, 0, 0, 0, 0, 0]), 0.0, 100.0, 1.0)
    lo, hi = bursty.rate_bounds(100)
    assert lo is None and hi is not None and hi > 0.4
    h = hours_interval(100, bursty)
    assert h["hours_high"] is None and h["hours_low"] == pytest.approx(100 / (hi * 3600))


def test_no_completions_or_empty_window() -> None:
    zero = batch_means([], 0.0, 100.0, 1.0)
    h = hours_interval(1000, zero)
    assert h["hours"] is None and h["hours_high"] is None and h["samples_per_hour"] == 0.0
    empty = batch_means([1.0], 5.0, 5.0, 1.0)
    assert empty.reason == "empty window" and hours_interval(1000, empty)["hours"] is None


def test_needed_window_scales_with_the_square_of_the_half_width() -> None:
    bm = batch_means(_events([10, 12, 8, 10, 10, 10, 10, 10, 10, 10]), 0.0, 100.0, 1.0)
    hw = bm.rel_halfwidth()
    assert hw is not None
    assert needed_window(bm, hw / 2) == pytest.approx(400.0)
    assert needed_window(bm, 2 * hw) == pytest.approx(100.0)  # already narrow enough: the window itself


def _t_cdf(x: float, df: int, steps: int = 20000) -> float:
    """Student's t CDF by Simpson's rule on [0, x] (independent of the table)."""
    c = math.gamma((df + 1) / 2) / (math.sqrt(df * math.pi) * math.gamma(df / 2))
    f = [c * (1 + (x * i / steps) ** 2 / df) ** (-(df + 1) / 2) for i in range(steps + 1)]
    area = (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2])) * x / steps / 3
    return 0.5 + area


def test_t_quantiles_are_the_975_points() -> None:
    assert sorted(T975) == list(range(MIN_BATCHES - 1, MAX_BATCHES))
    for df, q in T975.items():
        assert _t_cdf(q, df) == pytest.approx(0.975, abs=1e-9)
