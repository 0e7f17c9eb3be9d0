"""Sparse log-bucket histogram for latencies: 1 % relative resolution, mergeable, JSON-friendly.

Used for the inter-chunk gaps of a request (thousands per request, too many to store raw in every record)
and for merging gaps across requests in reports. A value ``v`` seconds falls in bucket
``k = floor(ln(v / 1 µs) / ln(1.01))``; the bucket's representative value is its geometric midpoint, so any
quantile read from the histogram is within ±0.5 % of a true sample value. Values below 1 µs go to bucket 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

__all__ = ["LogHistogram", "bucket_of", "bucket_value"]

_BASE_S = 1e-6
_GROWTH = 1.01
_INV_LOG_GROWTH = 1.0 / math.log(_GROWTH)


def bucket_of(value_s: float) -> int:
    """Bucket index of a duration in seconds (values <= 1 µs map to bucket 0)."""
    if value_s <= _BASE_S:
        return 0
    return int(math.log(value_s / _BASE_S) * _INV_LOG_GROWTH)


def bucket_value(k: int) -> float:
    """Representative value in seconds of bucket ``k`` (geometric midpoint of its bounds)."""
    if k <= 0:
        return _BASE_S
    return _BASE_S * _GROWTH ** (k + 0.5)


class LogHistogram:
    """A sparse histogram of durations (seconds) with 1 % wide log buckets.

    Attributes:
        counts: bucket index -> number of samples.
        n: number of samples.
        total: sum of the samples' exact values (seconds), for the exact mean.
        min / max: exact extreme samples (seconds); None when empty.
    """

    __slots__ = ("counts", "max", "min", "n", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None

    def add(self, value_s: float) -> None:
        """Add one sample (seconds)."""
        k = bucket_of(value_s)
        c = self.counts
        c[k] = c.get(k, 0) + 1
        self.n += 1
        self.total += value_s
        if self.min is None or value_s < self.min:
            self.min = value_s
        if self.max is None or value_s > self.max:
            self.max = value_s

    def merge(self, other: LogHistogram) -> None:
        """Add every sample of ``other`` to this histogram."""
        c = self.counts
        for k, v in other.counts.items():
            c[k] = c.get(k, 0) + v
        self.n += other.n
        self.total += other.total
        if other.min is not None and (self.min is None or other.min < self.min):
            self.min = other.min
        if other.max is not None and (self.max is None or other.max > self.max):
            self.max = other.max

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0 <= q <= 1) in seconds, or None when empty.

        Nearest-rank on the bucketed samples; the exact min and max are returned for q = 0 and q = 1. This is the
        histogram estimate (the gaps are not kept one by one), a different estimator from the percentile of a
        sample (:func:`harness.stats.percentile.percentile`, linear between closest ranks): the report's
        inter-chunk gap percentiles are this one, and say so.
        """
        if self.n == 0:
            return None
        if q <= 0:
            return self.min
        if q >= 1:
            return self.max
        rank = max(1, math.ceil(q * self.n))
        seen = 0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if seen >= rank:
                v = bucket_value(k)
                # Never report outside the exact observed range.
                assert self.min is not None and self.max is not None
                return min(max(v, self.min), self.max)
        return self.max

    def mean(self) -> float | None:
        """Exact mean in seconds, or None when empty."""
        return self.total / self.n if self.n else None

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict: ``{"n", "sum", "min", "max", "buckets": {"k": count}}`` (seconds)."""
        return {
            "n": self.n,
            "sum": self.total,
            "min": self.min,
            "max": self.max,
            "buckets": {str(k): v for k, v in self.counts.items()},
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, object] | None) -> LogHistogram:
        """Rebuild a histogram written by :meth:`to_json` (None gives an empty histogram)."""
        h = cls()
        if not obj:
            return h
        buckets = obj.get("buckets") or {}
        assert isinstance(buckets, Mapping)
        h.counts = {int(k): int(v) for k, v in buckets.items()}
        h.n = int(obj.get("n") or 0)  # type: ignore[call-overload]
        h.total = float(obj.get("sum") or 0.0)  # type: ignore[arg-type]
        mn, mx = obj.get("min"), obj.get("max")
        h.min = float(mn) if mn is not None else None  # type: ignore[arg-type]
        h.max = float(mx) if mx is not None else None  # type: ignore[arg-type]
        return h

    @classmethod
    def of(cls, values: Iterable[float]) -> LogHistogram:
        """A histogram of the given samples (seconds)."""
        h = cls()
        for v in values:
            h.add(v)
        return h
