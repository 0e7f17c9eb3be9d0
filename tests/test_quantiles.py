"""harness.quantiles: percentiles from 1 % log buckets against numpy / the report's percentile, sliding windows."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from harness.histogram import LogHistogram
from harness.quantiles import SLICES, BucketCounts, GapCounts, Slice, SlidingQuantiles
from harness.report.stats import percentile

QS = (0.0, 0.01, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 5000])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_percentile_is_within_half_a_percent_of_numpy_and_the_report(n: int, seed: int) -> None:
    rng = random.Random(seed * 1000 + n)
    values = [rng.lognormvariate(math.log(0.2), 1.2) for _ in range(n)]  # 1 ms ... minutes
    values += [0.2] * (n // 10)  # ties
    c = BucketCounts()
    for v in values:
        c.add(v)
    assert c.n == len(values) and c.min == min(values) and c.max == max(values)
    worst = 0.0
    for q in QS:
        got = c.percentile(q)
        exact = percentile(values, q * 100)
        assert got is not None and exact is not None
        assert exact == pytest.approx(float(np.percentile(values, q * 100)), rel=1e-12)
        worst = max(worst, rel(got, exact))
    assert worst <= 0.005, worst
    assert c.percentile(0.0) == min(values) and c.percentile(1.0) == max(values)  # exact extremes


def test_percentile_interpolates_like_the_report_on_few_values() -> None:
    """Two values: the median is their mean (linear interpolation), not one of them (nearest rank)."""
    c = BucketCounts()
    c.add(0.1)
    c.add(0.2)
    assert c.percentile(0.5) == pytest.approx(0.15, rel=0.005)
    assert c.nearest_rank(0.5) == pytest.approx(0.1, rel=0.005)
    assert BucketCounts().percentile(0.5) is None and BucketCounts().nearest_rank(0.5) is None


def test_nearest_rank_on_gap_histograms_equals_the_reports_merged_log_histogram() -> None:
    rng = random.Random(5)
    hists = [LogHistogram.of(rng.expovariate(1 / 0.012) + 0.001 for _ in range(rng.randint(0, 400))) for _ in range(50)]
    merged = LogHistogram()
    c = BucketCounts()
    for h in hists:
        merged.merge(h)
        c.add_hist(h.to_json())
    assert c.n == merged.n and c.min == merged.min and c.max == merged.max
    for q in QS:
        assert c.nearest_rank(q) == merged.quantile(q), q


def test_merge_and_subtract() -> None:
    a, b = BucketCounts(), BucketCounts()
    for v in (0.1, 0.2, 0.3):
        a.add(v)
    for v in (0.2, 5.0):
        b.add(v)
    a.merge(b)
    assert a.n == 5 and a.max == 5.0 and sum(a.counts.values()) == 5
    a.subtract(b)
    assert a.n == 3 and sum(a.counts.values()) == 3 and len(a.counts) == 3


def in_window(t: float, now: float, length: float) -> bool:
    """The documented window: the slice of ``now`` and the SLICES - 1 before it."""
    width = length / SLICES
    return math.floor(now / width) - SLICES < math.floor(t / width) <= math.floor(now / width)


def test_sliding_window_matches_the_exact_percentiles_of_the_values_in_it() -> None:
    """Values at random times over 10 windows, read every few seconds: each read is within 0.5 % of the exact
    percentile of the values whose time is in the window; the slices kept stay bounded."""
    rng = random.Random(9)
    length = 60.0
    sq = SlidingQuantiles(length)
    events = sorted((1e9 + rng.uniform(0, 600), rng.lognormvariate(-2, 0.8)) for _ in range(6000))
    seen: list[tuple[float, float]] = []
    reads = worst = 0.0
    next_read = events[0][0]
    for t, v in events:
        sq.advance(t)
        sq.add(t, v)
        seen.append((t, v))
        if t >= next_read:
            next_read = t + 3.7
            now = t + 0.5
            inside = [x for (s, x) in seen if in_window(s, now, length)]
            got = sq.quantiles(now, (0.5, 0.9, 0.99))
            assert sq.n == len(inside) and len(sq._slices) <= SLICES
            for q, g in zip((0.5, 0.9, 0.99), got, strict=True):
                exact = percentile(inside, q * 100)
                assert g is not None and exact is not None
                worst = max(worst, rel(g, exact))
            reads += 1
    assert reads > 100 and worst <= 0.005, (reads, worst)
    # Nothing more for a window's length: empty, every slice dropped.
    later = events[-1][0] + length + 1
    assert sq.quantiles(later, (0.5,)) == [None] and sq.n == 0 and not sq._slices and not sq.total.counts


def test_sliding_window_ignores_values_that_left_it_and_never_goes_back() -> None:
    sq = SlidingQuantiles(60.0)
    sq.advance(1000.0)
    sq.add(900.0, 1.0)  # 100 s before now: out of the window
    sq.add(999.0, 2.0)
    assert sq.n == 1 and sq.quantiles(1000.0, (0.5,)) == [2.0]
    sq.advance(500.0)  # backwards: ignored
    assert sq.quantiles(1000.0, (0.5,)) == [2.0]
    assert sq.quantiles(1058.0, (0.5,)) == [2.0]  # slice 999 still in the window of 1058 (1 s slices)
    assert sq.quantiles(1059.0, (0.5,)) == [None]
    gaps = SlidingQuantiles(60.0, nearest=True)
    gaps.add_hist(2000.0, LogHistogram.of([0.01, 0.02, 0.03]).to_json())
    gaps.add_hist(2000.0, LogHistogram().to_json())  # an empty gap histogram: nothing
    assert gaps.n == 3 and gaps.quantiles(2000.0, (0.5,)) == [pytest.approx(0.02, rel=0.005)]
    with pytest.raises(ValueError):
        SlidingQuantiles(0.0)


def test_a_slice_counts_as_bucket_counts_do_densely_from_its_lowest_to_its_highest_bucket() -> None:
    rng = random.Random(7)
    values = [rng.lognormvariate(math.log(0.01), 1.0) for _ in range(3000)]
    values[100] = 0.5  # above the first values, then below them: the array grows at both ends
    values[200] = 1e-5
    gh = LogHistogram()
    for v in (0.001, 0.002, 0.002, 30.0):
        gh.add(v)
    s, c = Slice(), BucketCounts()
    for v in values:
        s.add(v)
        c.add(v)
    s.add_hist(gh.to_json())
    c.add_hist(gh.to_json())
    assert dict(s.pairs()) == c.counts and (s.n, s.min, s.max) == (c.n, c.min, c.max)
    ks = [k for k, _ in s.pairs()]
    assert ks == sorted(ks) and len(s.counts) == max(ks) - min(ks) + 1 == max(ks) - s.lo + 1
    total = BucketCounts()
    total.merge(c)
    total.subtract(s)
    assert total.n == 0 and total.counts == {}


def test_a_windows_memory_is_its_slices_bucket_range_not_its_values() -> None:
    """60 slices of latencies within 1 ms ... 100 ms (at most ~470 1 % buckets a slice): under 2 KB a slice,
    whatever the number of values (a dict per slice took ~80 bytes a bucket held)."""
    rng = random.Random(3)
    sq = SlidingQuantiles(60.0)
    t0 = 1_000_000.0
    for i in range(60_000):
        sq.add(t0 + i / 1000, min(max(rng.lognormvariate(math.log(0.01), 0.8), 0.001), 0.1))
    assert len(sq._slices) == SLICES
    assert all(len(s.counts) <= 470 and s.counts.itemsize == 4 for s in sq._slices.values())
    assert sum(s.n for s in sq._slices.values()) == sq.n == 60_000


def test_a_slice_widens_its_cells_when_a_count_passes_four_bytes() -> None:
    s = Slice()
    s.add(0.01)
    big = GapCounts(((s.lo, 2**32 - 1), (s.lo + 3, 5)), 2**32 + 4, 0.01, 0.0104)
    s.add_hist(big)
    assert s.counts.itemsize == 8 and dict(s.pairs()) == {s.lo: 2**32, s.lo + 3: 5} and s.n == 2**32 + 5
    s.add(0.01)
    assert dict(s.pairs())[s.lo] == 2**32 + 1
