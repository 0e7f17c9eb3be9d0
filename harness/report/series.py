"""Time series and per-step samples over the record frame, for the report's figures (and the live web UI).

Each function here is the columnar engine's own definition (:mod:`harness.report.columns`) applied to many
windows at once instead of one:

* :func:`row_sample` / :func:`row_latency_sample`: a report row's sample (``columns._step_sample``: the requests
  that ended inside the steady window ``(w0, w1)``, or every request of a step that is NOT steady), and its
  successful requests (what the latency, per-stream and token figures are over);
* :func:`output_tokens_binned`: output tokens per time bin in ONE pass over the records, by the aggregate tok/s
  rule of ``tokens.window_tokens`` (tokens by chunk arrival when a record has ``chunk_times``, else each phase
  spread pro rata over its interval): bin ``i`` holds exactly what ``_window_tokens`` gives for the window
  ``[t0 + i*width, t0 + (i+1)*width)``, so no token is lost or counted twice across bins;
* :func:`ttft_by_start_bin`: p50 TTFT of the successful requests per start-time bin;
* :func:`time_bin_s`: the bin width for a run's span.

Frames are :func:`harness.report.columns.prepare`-d record frames (``FrameRun.frame``); times are epoch seconds,
widths and latencies seconds, token counts tokens.
"""

from __future__ import annotations

import polars as pl

from harness.report.columns import FrameRun, _step_sample
from harness.report.exprs import END as _END
from harness.report.exprs import OK as _OK
from harness.report.exprs import START as _START
from harness.report.exprs import STEP as _STEP
from harness.report.exprs import WARMUP as _WARMUP
from harness.report.exprs import pctl
from harness.report.load import Phase
from harness.report.model import StepRow
from harness.report.steady import Window
from harness.report.tokens import CHUNK_BIN_COLUMNS, is_reduced, tokens_in_windows

__all__ = ["SERIES_COLUMNS", "main_frame", "output_tokens_binned", "row_latency_sample", "row_sample", "time_bin_s",
           "ttft_by_start_bin"]


#: The frame columns the functions of this module read (select them first: filtering fewer columns is faster).
SERIES_COLUMNS: tuple[str, ...] = (_START, _END, _STEP, _OK, "ttft", "ttfat", "e2e", "output_tokens",
                                   "reasoning_tokens", "answer_tokens", "hidden_reasoning", "chunk_times",
                                   "chunk_tokens")


def main_frame(run: FrameRun, columns: tuple[str, ...] | None = SERIES_COLUMNS) -> pl.DataFrame:
    """The run's non-warm-up records (phase ``warmup`` or step < 0 dropped, as every figure does), record order:
    the ``columns`` (default :data:`SERIES_COLUMNS`; None: every column of ``run.frame``)."""
    main = run.frame.lazy().filter(~pl.col(_WARMUP))
    if columns is not None and is_reduced(run.frame):  # a two-pass read: the reduced chunk lists instead
        columns = (*(c for c in columns if c not in ("chunk_times", "chunk_tokens")), *CHUNK_BIN_COLUMNS)
    return (main if columns is None else main.select(columns)).collect()  # only the columns are filtered


def row_sample(main: pl.DataFrame, row: StepRow) -> pl.DataFrame:
    """The sample of a report row (``build_report(...).steps[i]``), by ``columns._step_sample``: every request of
    ``main`` (ok or not, any step) that ended inside ``(window_start_wall, window_end_wall)`` when the row is steady,
    else every request of its step. Record order.

    Args:
        main: the non-warm-up records (:func:`main_frame`).
        row: a step row; reads ``step``, ``phase``, ``concurrency``, ``start_wall``, ``end_wall``, ``steady``,
            ``window_start_wall``, ``window_end_wall``.

    Raises:
        ValueError: the row has no step interval or window (a row of a report.json edited by hand).
    """
    if None in (row.start_wall, row.end_wall, row.window_start_wall, row.window_end_wall):
        raise ValueError(f"report row {row.label!r} has no step interval or window")
    phase = Phase(row.phase, row.step, row.concurrency, float(row.start_wall or 0.0), float(row.end_wall or 0.0))
    w0, w1 = float(row.window_start_wall or 0.0), float(row.window_end_wall or 0.0)
    window = Window(w0, w1, w0, row.steady, 0, row.first_wave_method or "users")
    return _step_sample(main, phase, window)[2]


def row_latency_sample(main: pl.DataFrame, row: StepRow) -> pl.DataFrame:
    """The successful requests of :func:`row_sample`: what a row's latency and token figures are over."""
    return row_sample(main, row).filter(pl.col(_OK))


def time_bin_s(span_s: float, max_bins: int = 150) -> float:
    """Width (s) of the time bins for a run of ``span_s`` seconds: the smallest of 1, 2, 5, 10, 15, 30 s, 1, 2,
    5, 10, 15, 30 min, 1 h giving at most ``max_bins`` bins (1 h beyond)."""
    for w in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800):
        if span_s / w <= max_bins:
            return float(w)
    return 3600.0


def _bin_of(t: pl.Expr, t0: float, width: float) -> pl.Expr:
    """Index of the bin ``[t0 + i*width, t0 + (i+1)*width)`` holding time ``t`` (Int64; may be out of range)."""
    return ((t - t0) / width).floor().cast(pl.Int64)


def output_tokens_binned(main: pl.DataFrame, t0: float, width: float, n: int) -> list[float]:
    """Output tokens that arrived in each time bin ``[t0 + i*width, t0 + (i+1)*width)``, ``i = 0 .. n-1`` (tokens;
    divide by ``width`` for tok/s), in one pass over the records.

    Bin ``i`` is the report's aggregate tok/s rule over that bin: :func:`harness.report.tokens.tokens_in_windows`
    itself, over the bins as consecutive equal windows (one pass; no second definition): successful
    requests with output tokens; by chunk arrival when a record has ``chunk_times`` (with its ``chunk_tokens`` when
    they match), else reasoning and answer tokens each spread uniformly over their phase's interval and counted pro rata
    (:func:`harness.report.tokens.phase_tokens_in_windows`). Tokens outside ``[t0, t0 + n*width)`` are not counted.

    Args:
        main: prepared records (:func:`main_frame`: warm-up excluded by the caller).
        t0: start of the first bin (epoch s).
        width: bin width (s), > 0.
        n: number of bins, >= 0.

    Raises:
        ValueError: ``width`` is not positive.
    """
    if width <= 0:
        raise ValueError(f"bin width must be positive, got {width}")
    if n <= 0:
        return []
    return tokens_in_windows(main, [(t0 + i * width, t0 + (i + 1) * width) for i in range(n)])


def ttft_by_start_bin(ok: pl.DataFrame, t0: float, width: float) -> list[tuple[int, float]]:
    """``(bin, p50 TTFT in s)`` per bin ``floor((start_wall - t0) / width)`` of the requests in ``ok`` that have a
    TTFT, sorted by bin; the p50 is :func:`harness.report.exprs.pctl`'s."""
    got = (ok.filter(pl.col("ttft").is_not_null())
           .group_by(_bin_of(pl.col(_START), t0, width).alias("_bin"))
           .agg(pctl("ttft", 50).alias("p50"))
           .sort("_bin"))
    return [(int(b), float(v)) for b, v in got.iter_rows()]
