"""One helper per interval method (harness.stats.intervals), used by the search, compare, hours and soak."""

from __future__ import annotations

import math
import random

import pytest

from harness import search
from harness.report import compare_stats, hours, soak
from harness.stats import intervals
from harness.stats.intervals import linear_fit, mean_interval, quantile_interval, t_quantile_975


def _t_two_sided(t: float, dof: int, steps: int = 20_000) -> float:
    """P(|T| <= t) by Simpson's rule over Student's t density (independent of the closed form)."""
    c = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(dof * math.pi)
    f = [c * (1 + (t * i / steps) ** 2 / dof) ** (-(dof + 1) / 2) for i in range(steps + 1)]
    return 2 * (f[0] + f[-1] + 4 * sum(f[1:-1:2]) + 2 * sum(f[2:-1:2])) * t / steps / 3


@pytest.mark.parametrize("dof", [1, 2, 4, 5, 6, 9, 30, 999, 1000, 5000])
def test_t_quantile_is_the_975_point(dof: int) -> None:
    assert _t_two_sided(t_quantile_975(dof), dof) == pytest.approx(0.95, abs=1e-11 if dof > 2 else 1e-7)


def test_t_quantile_at_large_dof_falls_to_the_normal_point() -> None:
    # the expansion used from 1,000 dof on: continuous with the bisection below, decreasing towards z
    z = 1.959963984540054
    step = (z ** 3 + z) / 4 / 1000 ** 2  # d/dν of g1/ν: the drop from 999 to 1,000 dof
    assert t_quantile_975(999) - t_quantile_975(1000) == pytest.approx(step, rel=1e-2)
    assert t_quantile_975(999) > t_quantile_975(1000) > t_quantile_975(40_000) > t_quantile_975(10**7) > z
    assert t_quantile_975(10**7) == pytest.approx(z, abs=1e-6)


def test_every_user_takes_the_t_quantile_from_one_place() -> None:
    assert hours.T975 == {df: t_quantile_975(df) for df in range(hours.MIN_BATCHES - 1, hours.MAX_BATCHES)}
    assert soak.t_quantile_975 is t_quantile_975 and soak.linear_fit is linear_fit


def test_the_search_and_compare_use_the_one_percentile_interval() -> None:
    rng = random.Random(11)
    xs = [rng.expovariate(1.0) for _ in range(300)]
    for q in (50, 90, 99):
        assert search.percentile_interval(xs, q) == quantile_interval(xs, q)
    assert compare_stats.quantile_interval is quantile_interval and compare_stats.mean_interval is mean_interval
    assert compare_stats.ratio_of_sums_interval is intervals.ratio_of_sums_interval


def test_quantile_interval_is_exact_binomial_ranks() -> None:
    xs = [float(i) for i in range(1, 101)]  # x_(i) = i
    lo, hi = quantile_interval(xs, 50)
    # P(B <= 39) = 0.0176 <= 0.025 < P(B <= 40) = 0.0284 for B ~ Bin(100, 0.5): i = 40; symmetric: j = 61
    assert (lo, hi) == (40.0, 61.0)
    assert quantile_interval(xs, 99)[1] is None  # too few values to bound p99 from above
    assert quantile_interval(xs, 90) == (84.0, 96.0) and quantile_interval(xs, 95) == (90.0, 100.0)
    assert quantile_interval([], 50) == (None, None)


def test_quantile_interval_covers_at_least_95_percent_for_a_small_sample() -> None:
    rng = random.Random(5)
    trials, hits = 2000, 0
    for _ in range(trials):
        lo, hi = quantile_interval([rng.random() for _ in range(40)], 90)
        hits += lo is not None and hi is not None and lo <= 0.9 <= hi
    assert hits / trials >= 0.94  # exact ranks: coverage >= 95 %, both sides bounded (the search's former normal
    # approximation, ranks n·p ∓ 1.96·√(n·p·(1−p)) + 1, left the upper side unbounded for this sample size)


def test_t_mean_interval_uses_student_t_with_n_minus_1_dof() -> None:
    from harness.stats.intervals import t_mean_interval

    assert t_mean_interval([1.0]) == (None, None)
    lo, hi = t_mean_interval([1.0, 3.0])  # mean 2, s = √2, t(1) = 12.706
    assert lo is not None and hi is not None
    assert (hi - lo) / 2 == pytest.approx(12.7062 * math.sqrt(2) / math.sqrt(2), rel=1e-4)
    lo, hi = t_mean_interval([1.0, 2.0, 3.0])  # s = 1, t(2) = 4.303
    assert (lo, hi) == (pytest.approx(2 - 4.3027 / math.sqrt(3), rel=1e-4),
                        pytest.approx(2 + 4.3027 / math.sqrt(3), rel=1e-4))


def test_combined_interval_of_a_weighted_mean() -> None:
    from harness.stats.intervals import combined_interval

    assert combined_interval([]) == (None, None)
    lo, hi = combined_interval([(1.0, 0.2, 1.0), (3.0, 0.2, 1.0)])  # mean 2, half √(0.25·0.04·2) = 0.1414
    assert (lo, hi) == (pytest.approx(2 - math.sqrt(0.02)), pytest.approx(2 + math.sqrt(0.02)))
    lo, hi = combined_interval([(1.0, 0.3, 3.0), (5.0, 0.0, 1.0)])  # mean 2, half 0.75 · 0.3
    assert (lo, hi) == (pytest.approx(2 - 0.225), pytest.approx(2 + 0.225))
    with pytest.raises(ValueError, match=">= 0"):
        combined_interval([(1.0, -0.1, 1.0)])
