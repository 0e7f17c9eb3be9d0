"""Small statistics helpers: means and interval overlap (units are the caller's); the percentile is
:func:`harness.stats.percentile.percentile`, re-exported here."""

from __future__ import annotations

from collections.abc import Iterable

from harness.stats.percentile import percentile

__all__ = ["mean", "overlap_fraction", "percentile"]


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
