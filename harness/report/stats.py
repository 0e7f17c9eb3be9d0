"""Small statistics helpers: percentiles, means and interval overlap (units are the caller's)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["mean", "overlap_fraction", "percentile"]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) with linear interpolation between closest ranks, None when empty.

    Same as ``numpy.percentile(values, q)`` (method "linear"): position ``(n - 1) * q / 100`` in the sorted
    values, interpolated between its two neighbours.
    """
    if not values:
        return None
    xs = sorted(float(v) for v in values)
    pos = (len(xs) - 1) * min(max(q, 0.0), 100.0) / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    frac = pos - lo
    return xs[lo] + (xs[hi] - xs[lo]) * frac


def mean(values: Iterable[float]) -> float | None:
    """Arithmetic mean, None when empty."""
    xs = [float(v) for v in values]
    return sum(xs) / len(xs) if xs else None


def overlap_fraction(a0: float, a1: float, w0: float, w1: float) -> float:
    """Fraction (0..1) of the interval ``[a0, a1]`` that lies inside the window ``[w0, w1)``.

    A zero-length interval counts fully when its point is inside ``[w0, w1)`` and not at all otherwise.
    """
    if a1 <= a0:
        return 1.0 if w0 <= a0 < w1 else 0.0
    inside = min(a1, w1) - max(a0, w0)
    return max(0.0, inside) / (a1 - a0)
