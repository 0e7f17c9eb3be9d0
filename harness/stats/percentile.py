"""The one percentile of a sample: linear interpolation between closest ranks (numpy's default, ``method="linear"``;
Hyndman & Fan type 7).

Every percentile of a sample computed in Python uses :func:`percentile`; a polars expression uses
``quantile(q / 100, interpolation=POLARS_INTERPOLATION)`` (:func:`harness.report.exprs.pctl`), the same definition.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["POLARS_INTERPOLATION", "percentile"]

#: The ``interpolation`` of polars' ``quantile`` that is :func:`percentile`'s definition.
POLARS_INTERPOLATION: Literal["linear"] = "linear"


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
