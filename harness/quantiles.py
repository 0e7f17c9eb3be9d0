"""Exact-to-0.5 % latency percentiles over sliding time windows, for the exporter's quantile gauges.

Prometheus' ``histogram_quantile`` over fixed buckets interpolates inside a bucket: with the exporter's six
buckets per decade it was up to ~25 % off the records' percentiles. These gauges are computed here instead, on
the master (or the single process), from the records it writes:

* :class:`BucketCounts`: sparse counts in the 1 % wide log buckets of :mod:`harness.histogram` (the buckets the
  records' gap histograms already use), with the exact count, min and max. Its percentiles are those of the
  report (:func:`harness.stats.percentile.percentile`: linear interpolation between closest ranks; or, for
  inter-chunk gaps, :meth:`harness.histogram.LogHistogram.quantile`: nearest rank), computed on the buckets'
  representative values clamped to the exact [min, max]. A representative is within ±0.5 % of every value of
  its bucket and the mapping keeps the order, so a linear percentile is within ±0.5 % of the exact one (for
  values above 1 µs), and a nearest-rank one on gap histograms equals the report's.
* :class:`SlidingQuantiles`: one metric's values over the last ``length`` seconds, kept as :data:`SLICES`
  slices of ``length / SLICES`` seconds each. A value belongs to the slice of its time (a request's end,
  ``start_wall + e2e``); the window at time ``now`` is the slice of ``now`` and the ``SLICES - 1`` before it, so
  it covers between ``length * (1 - 1/SLICES)`` and ``length`` seconds back from ``now``. A slice keeps its counts
  dense (:class:`Slice`: one 4-byte count per bucket from its lowest to its highest bucket; 8 bytes once a count
  passes 2**32 - 1), so memory is bounded by ``SLICES`` slices of at most ~2,300 buckets (1 µs to 2 h at 1 %),
  ~9 KB each, whatever the request rate; latencies within one or two decades take ~1-2 KB a slice. (A dict per
  slice cost ~80 bytes a bucket held: docs/development/benchmarks.md, Soak.)

Times are epoch seconds, values seconds. Not thread-safe: :class:`harness.metrics.RunMetrics` holds its lock.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.histogram import LogHistogram, bucket_of, bucket_value

__all__ = ["SLICES", "BucketCounts", "GapCounts", "Slice", "SlidingQuantiles", "gap_counts"]

#: Slices per window: the window's start moves in steps of 1/60 of its length (1 s for 1 min, 30 s for 30 min).
SLICES = 60


@dataclass(frozen=True)
class GapCounts:
    """A record's gap histogram read once (bucket indexes as ints), to count it in several windows."""

    items: tuple[tuple[int, int], ...]
    n: int
    min: float | None
    max: float | None


def gap_counts(gh: Mapping[str, Any]) -> GapCounts | None:
    """A record's gap histogram (:meth:`harness.histogram.LogHistogram.to_json`) as :class:`GapCounts`, None when
    it holds no gap."""
    n = int(gh.get("n") or 0)
    if n == 0:
        return None
    lo, hi = gh.get("min"), gh.get("max")
    items = tuple((int(k), int(v)) for k, v in (gh.get("buckets") or {}).items())
    return GapCounts(items, n, float(lo) if lo is not None else None, float(hi) if hi is not None else None)


class _Extremes:
    """The exact min and max (seconds) that :class:`BucketCounts` and :class:`Slice` keep beside their counts."""

    __slots__ = ("max", "min")

    def __init__(self) -> None:
        self.min: float | None = None
        self.max: float | None = None

    def _extremes(self, lo: float, hi: float) -> None:
        if self.min is None or lo < self.min:
            self.min = lo
        if self.max is None or hi > self.max:
            self.max = hi


class BucketCounts(_Extremes):
    """Sparse counts of values (seconds) in 1 % log buckets, with the exact number, min and max.

    Attributes:
        counts: bucket index (:func:`harness.histogram.bucket_of`) -> number of values.
        n: number of values.
        min / max: exact extreme values (seconds); None when empty.
    """

    __slots__ = ("counts", "n")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.n = 0
        super().__init__()

    def add(self, value_s: float) -> None:
        """Count one value (seconds)."""
        k = bucket_of(value_s)
        self.counts[k] = self.counts.get(k, 0) + 1
        self.n += 1
        self._extremes(value_s, value_s)

    def add_hist(self, gh: Mapping[str, Any] | GapCounts) -> None:
        """Count every value of a record's gap histogram (:meth:`harness.histogram.LogHistogram.to_json`: its
        ``n``, ``min``, ``max`` and ``buckets`` ``{"k": count}``; or that read once by :func:`gap_counts`); an
        empty one changes nothing."""
        g = gh if isinstance(gh, GapCounts) else gap_counts(gh)
        if g is None:
            return
        c = self.counts
        for k, v in g.items:
            c[k] = c.get(k, 0) + v
        self.n += g.n
        if g.min is not None and g.max is not None:
            self._extremes(g.min, g.max)

    def pairs(self) -> Iterator[tuple[int, int]]:
        """(bucket index, count) of every bucket holding values."""
        return iter(self.counts.items())

    def merge(self, other: BucketCounts) -> None:
        """Add every value of ``other``."""
        c = self.counts
        for k, v in other.counts.items():
            c[k] = c.get(k, 0) + v
        self.n += other.n
        if other.min is not None and other.max is not None:
            self._extremes(other.min, other.max)

    def subtract(self, other: BucketCounts | Slice) -> None:
        """Remove the counts of ``other`` (values added before; min and max are left as they were)."""
        c = self.counts
        for k, v in other.pairs():
            left = c[k] - v
            if left:
                c[k] = left
            else:
                del c[k]
        self.n -= other.n

    def _value(self, k: int) -> float:
        assert self.min is not None and self.max is not None
        return min(max(bucket_value(k), self.min), self.max)

    def percentile(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) as :func:`harness.stats.percentile.percentile` defines it (linear interpolation
        between closest ranks, position ``(n - 1) * q``) on the bucket values (the exact min and max at ranks 0
        and n - 1), in seconds; None when empty. Within ±0.5 % of the exact percentile of the values counted
        (above 1 µs)."""
        if self.n == 0:
            return None
        pos = (self.n - 1) * min(max(q, 0.0), 1.0)
        lo = math.floor(pos)
        frac = pos - lo
        hi = min(lo + 1, self.n - 1)
        v_lo = v_hi = None
        seen = 0
        for k in sorted(self.counts):
            seen += self.counts[k]
            if v_lo is None and seen > lo:
                v_lo = self._ranked(lo, k)
            if seen > hi:
                v_hi = self._ranked(hi, k)
                break
        assert v_lo is not None and v_hi is not None  # the counts sum to n
        return v_lo + (v_hi - v_lo) * frac

    def _ranked(self, rank: int, k: int) -> float:
        """The value of 0-based ``rank`` in bucket ``k``: the exact min / max at the ends, else the bucket's."""
        assert self.min is not None and self.max is not None
        if rank == 0:
            return self.min
        if rank == self.n - 1:
            return self.max
        return self._value(k)

    def nearest_rank(self, q: float) -> float | None:
        """The ``q`` quantile (0..1) as :meth:`harness.histogram.LogHistogram.quantile` defines it (nearest rank
        ``ceil(q * n)`` on the bucket values, the exact min and max for q = 0 and 1), in seconds; None when
        empty. Equal to the report's inter-chunk percentile for the same gap histograms: it is that method, run
        on these counts (shared, not copied)."""
        h = LogHistogram()
        h.counts, h.n, h.min, h.max = self.counts, self.n, self.min, self.max
        return h.quantile(q)


class Slice(_Extremes):
    """One time slice's values, counted densely: ``counts[i]`` values in bucket ``lo + i``
    (:func:`harness.histogram.bucket_of`), from the lowest bucket seen to the highest, 4 bytes a bucket (8 once a
    count no longer fits in 4).

    Attributes:
        counts: an ``array('I')`` of counts (``array('Q')`` after a count passed 2**32 - 1; empty before the first
            value).
        lo: the bucket index of ``counts[0]``.
        n: number of values.
        min / max: exact extreme values (seconds); None when empty.
    """

    __slots__ = ("counts", "lo", "n")

    def __init__(self) -> None:
        self.counts = array("I")
        self.lo = 0
        self.n = 0
        super().__init__()

    def _index(self, k: int) -> int:
        """The position of bucket ``k`` in :attr:`counts`, which grows (zeros) to hold it."""
        c = self.counts
        if not c:
            self.lo = k
            c.append(0)
            return 0
        i = k - self.lo
        if i < 0:
            c[0:0] = array(c.typecode, bytes(c.itemsize * -i))
            self.lo = k
            return 0
        if i >= len(c):
            c.frombytes(bytes(c.itemsize * (i - len(c) + 1)))
        return i

    def _count(self, i: int, v: int) -> None:
        """Add ``v`` to ``counts[i]``, widening the cells to 8 bytes when the sum no longer fits in 4."""
        try:
            self.counts[i] += v
        except OverflowError:
            self.counts = array("Q", self.counts)
            self.counts[i] += v

    def add(self, value_s: float) -> None:
        """Count one value (seconds)."""
        k = bucket_of(value_s)
        c, i = self.counts, k - self.lo
        self._count(i if 0 <= i < len(c) else self._index(k), 1)
        self.n += 1
        self._extremes(value_s, value_s)

    def add_hist(self, gh: Mapping[str, Any] | GapCounts) -> None:
        """Count every value of a record's gap histogram (as :meth:`BucketCounts.add_hist`)."""
        g = gh if isinstance(gh, GapCounts) else gap_counts(gh)
        if g is None:
            return
        for k, v in g.items:
            i = k - self.lo
            if not 0 <= i < len(self.counts):
                i = self._index(k)
            self._count(i, v)
        self.n += g.n
        if g.min is not None and g.max is not None:
            self._extremes(g.min, g.max)

    def pairs(self) -> Iterator[tuple[int, int]]:
        """(bucket index, count) of every bucket holding values, in bucket order."""
        lo = self.lo
        return ((lo + i, v) for i, v in enumerate(self.counts) if v)


class SlidingQuantiles:
    """One metric's values over the last ``length`` seconds (see the module docstring for the window).

    Args:
        length: the window's length, seconds (> 0).
        nearest: quantiles by nearest rank (:meth:`BucketCounts.nearest_rank`, inter-chunk gaps) instead of
            linear interpolation (:meth:`BucketCounts.percentile`).
        slices: slices per window.

    Raises:
        ValueError: ``length`` or ``slices`` is not positive.
    """

    __slots__ = ("_k_now", "_slices", "length", "n_slices", "nearest", "total", "width")

    def __init__(self, length: float, nearest: bool = False, slices: int = SLICES) -> None:
        if length <= 0 or slices <= 0:
            raise ValueError(f"window length {length} s and slices {slices} must be positive")
        self.length = float(length)
        self.n_slices = slices
        self.width = self.length / slices
        self.nearest = nearest
        self.total = BucketCounts()  # every slice kept, summed (its min and max are not the window's)
        self._slices: dict[int, Slice] = {}
        self._k_now: int | None = None

    def _slice(self, t: float) -> Slice | None:
        """The slice of time ``t`` (created when missing), or None when it has left the window."""
        k = math.floor(t / self.width)
        if self._k_now is not None and k <= self._k_now - self.n_slices:
            return None
        s = self._slices.get(k)
        if s is None:
            s = self._slices[k] = Slice()
        return s

    def add(self, t: float, value_s: float) -> None:
        """Count ``value_s`` (seconds) at time ``t`` (epoch seconds); ignored when ``t`` has left the window."""
        s = self._slice(t)
        if s is not None:
            s.add(value_s)
            self.total.add(value_s)

    def add_hist(self, t: float, gh: Mapping[str, Any] | GapCounts) -> None:
        """Count a record's gap histogram (see :meth:`BucketCounts.add_hist`) at time ``t``."""
        s = self._slice(t)
        if s is not None:
            s.add_hist(gh)
            self.total.add_hist(gh)

    def advance(self, now: float) -> None:
        """Move the window to end at ``now`` (epoch seconds), dropping slices that left it; never backwards."""
        k_now = math.floor(now / self.width)
        if self._k_now is not None and k_now <= self._k_now:
            return
        self._k_now = k_now
        oldest = k_now - self.n_slices
        for k in [k for k in self._slices if k <= oldest]:
            self.total.subtract(self._slices.pop(k))

    def quantiles(self, now: float, qs: Sequence[float]) -> list[float | None]:
        """The ``qs`` quantiles (0..1) of the values in the window ending at ``now``, seconds (None: empty)."""
        self.advance(now)
        t = self.total
        if t.n == 0:
            return [None for _ in qs]
        t.min = min(s.min for s in self._slices.values() if s.min is not None)
        t.max = max(s.max for s in self._slices.values() if s.max is not None)
        pick = t.nearest_rank if self.nearest else t.percentile
        return [pick(q) for q in qs]

    @property
    def n(self) -> int:
        """Values in the slices kept (as of the last :meth:`advance`)."""
        return self.total.n
