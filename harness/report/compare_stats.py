"""95 % intervals of a step's latency figures from its records, for ``llmload compare``.

The report gives intervals only for hours to N (and so request throughput). For the latency figures this module
computes them from the records (the record frame), over the report's own latency sample of the step
(:func:`harness.report.series.row_latency_sample`: successful requests that ended inside the steady window, the
whole step's successful requests when it is not steady — :func:`harness.report.exprs.in_sample`), and checks that
the sample reproduces the report's point figure before using it.

Methods (all 95 %, units of the figure; each implemented once in :mod:`harness.stats.intervals`):

- percentiles (TTFT, TTFAT, E2E): distribution-free order-statistic interval :func:`quantile_interval`
  ``[x_(i), x_(j)]`` with ranks from the binomial distribution of the number of values below the true quantile;
  a bound is None (unbounded) when the sample is too small to give it (e.g. the upper bound of p99 with < ~300
  values).
- means (TPOT mean): normal interval ``mean ± 1.96 s / √n`` (:func:`mean_interval`).
- ratios of sums (per-stream tok/s = Σ tokens ÷ Σ decode seconds): delta-method interval of the ratio estimator
  (:func:`ratio_of_sums_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import polars as pl

from harness.report.columns import without_gaps
from harness.report.exprs import streamed_tokens
from harness.report.model import StepRow
from harness.report.series import row_latency_sample
from harness.report.stats import mean
from harness.stats.intervals import Interval, mean_interval, quantile_interval, ratio_of_sums_interval
from harness.stats.percentile import percentile

__all__ = [
    "LATENCY_FIGURES",
    "latency_intervals",
    "mean_interval",
    "quantile_interval",
    "ratio_of_sums_interval",
]


#: Relative tolerance within which a figure recomputed from the records must equal the report's figure.
REPRODUCE_RTOL = 1e-9


def _decode_pairs(sample: pl.DataFrame) -> list[tuple[float, float]]:
    """``(streamed tokens, e2e − ttft)`` pairs counted by the report's per-stream tok/s
    (:func:`harness.report.exprs.per_stream_parts`: streamed tokens = answer tokens with hidden reasoning), in
    record order."""
    ttft, e2e, n = pl.col("ttft"), pl.col("e2e"), streamed_tokens()
    counted = sample.filter(ttft.is_not_null() & e2e.is_not_null() & (e2e > ttft) & n.is_not_null() & (n != 0))
    pairs = counted.select(n.cast(pl.Float64).alias("tok"), (e2e - ttft).alias("d"))
    return list(zip(pairs.get_column("tok").to_list(), pairs.get_column("d").to_list(), strict=True))


def _values(sample: pl.DataFrame, col: str) -> list[float]:
    return [float(v) for v in sample.get_column(col).drop_nulls().to_list()]


def _pct_fig(attr: str, q: float) -> tuple[Callable[[pl.DataFrame], float | None],
                                            Callable[[pl.DataFrame], Interval]]:
    return (lambda s: percentile(_values(s, attr), q)), (lambda s: quantile_interval(_values(s, attr), q))


def _per_stream(sample: pl.DataFrame) -> float | None:
    pairs = _decode_pairs(sample)
    sx = sum(x for _, x in pairs)
    return sum(y for y, _ in pairs) / sx if sx > 0 else None


#: Report row key -> (point figure from a sample, 95 % interval from a sample, method).
LATENCY_FIGURES: dict[str, tuple[Callable[[pl.DataFrame], float | None],
                                 Callable[[pl.DataFrame], Interval], str]] = {
    **{f"{attr}_p{q}_s": (*_pct_fig(attr, q), "order-statistic")
       for attr in ("ttft", "ttfat", "e2e") for q in (50, 99)},
    "tpot_mean_s": ((lambda s: mean(_values(s, "tpot"))), (lambda s: mean_interval(_values(s, "tpot"))), "normal"),
    "per_stream_tps": (_per_stream, (lambda s: ratio_of_sums_interval(_decode_pairs(s))), "delta-method"),
}


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=REPRODUCE_RTOL, abs_tol=1e-12)


def latency_intervals(main: pl.DataFrame, row: StepRow) -> tuple[dict[str, Interval], list[str]]:
    """95 % intervals of a row's latency figures (:data:`LATENCY_FIGURES` keys) from the run's records.

    Args:
        main: the run's non-warm-up records as a prepared frame (:attr:`harness.report.columns.FrameRun.main`).
        row: the step's report row.

    Returns:
        ``(intervals, mismatches)``: intervals by row key for every figure the records reproduce (same value as
        the row within :data:`REPRODUCE_RTOL`), and the keys whose recomputed value differs from the row (a
        stale ``report.json``, or records changed since): those get no interval.
    """
    sample = row_latency_sample(without_gaps(main), row)  # the report's own rule (harness/report/series.py)
    out: dict[str, Interval] = {}
    bad: list[str] = []
    for key, (point, interval, _method) in LATENCY_FIGURES.items():
        if key not in row.model_fields_set:  # a report.json of a version without this figure
            continue
        value = getattr(row, key)
        if not _same(point(sample), value):
            bad.append(key)
            continue
        if value is not None:
            out[key] = interval(sample)
    return out, bad
