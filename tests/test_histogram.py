"""LogHistogram: 1 % buckets, exact extremes and mean, mergeable, JSON round trip."""

from __future__ import annotations

import random

import pytest

from harness.histogram import LogHistogram


def test_quantiles_within_half_a_percent() -> None:
    rng = random.Random(1)
    values = [rng.lognormvariate(-3, 1) for _ in range(20000)]
    h = LogHistogram.of(values)
    s = sorted(values)
    for q in (0.5, 0.9, 0.99):
        exact = s[int(q * len(s)) - 1]
        assert h.quantile(q) == pytest.approx(exact, rel=0.006)
    assert h.quantile(0) == min(values) and h.quantile(1) == max(values)
    assert h.mean() == pytest.approx(sum(values) / len(values))


def test_merge_and_json_round_trip() -> None:
    a, b = LogHistogram.of([0.01, 0.02]), LogHistogram.of([0.03])
    a.merge(LogHistogram.from_json(b.to_json()))
    assert (a.n, a.min, a.max) == (3, 0.01, 0.03)
    assert a.total == pytest.approx(0.06)
    assert LogHistogram.from_json(None).quantile(0.5) is None
