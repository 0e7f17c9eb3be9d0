"""Time series and per-step samples over the record frame, for the report's figures (and the live web UI).

Each function here is the columnar engine's own definition (:mod:`harness.report.columns`) applied to many
windows at once instead of one:

* :func:`row_sample` / :func:`row_latency_sample`: a report row's sample (``columns._step_sample``: the requests
  that ended inside the steady window ``(w0, w1)``, or every request of a step that is NOT steady), and its
  successful requests (what the latency, per-stream and token figures are over);
* :func:`output_tokens_binned`: output tokens per time bin in ONE pass over the records, by the aggregate tok/s
  rule of ``columns._window_tokens`` (tokens by chunk arrival when a record has ``chunk_times``, else spread pro
  rata over the decode interval): bin ``i`` holds exactly what ``_window_tokens`` gives for the window
  ``[t0 + i*width, t0 + (i+1)*width)``, so no token is lost or counted twice across bins;
* :func:`ttft_by_start_bin`: p50 TTFT of the successful requests per start-time bin;
* :func:`time_bin_s`: the bin width for a run's span.

Frames are :func:`harness.report.columns.prepare`-d record frames (``FrameRun.frame``); times are epoch seconds,
widths and latencies seconds, token counts tokens.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from harness.report.columns import (
    _END,
    _OK,
    _START,
    _STEP,
    _WARMUP,
    FrameRun,
    _has_chunk_times,
    _overlap,
    _step_sample,
    _token_spread_start,
)
from harness.report.load import Phase
from harness.report.steady import Window

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
    return (main if columns is None else main.select(columns)).collect()  # only the columns are filtered


def row_sample(main: pl.DataFrame, row: dict[str, Any]) -> pl.DataFrame:
    """The sample of a report row (``build_report(...)["steps"][i]``), by ``columns._step_sample``: every request of
    ``main`` (ok or not, any step) that ended inside ``(window_start_wall, window_end_wall)`` when the row is steady,
    else every request of its step. Record order.

    Args:
        main: the non-warm-up records (:func:`main_frame`).
        row: a step row; reads ``step``, ``phase``, ``concurrency``, ``start_wall``, ``end_wall``, ``steady``,
            ``window_start_wall``, ``window_end_wall``.
    """
    phase = Phase(str(row["phase"]), int(row["step"]), int(row["concurrency"]), float(row["start_wall"]),
                  float(row["end_wall"]))
    w0, w1 = float(row["window_start_wall"]), float(row["window_end_wall"])
    window = Window(w0, w1, w0, bool(row["steady"]), 0, str(row.get("first_wave_method") or "users"))
    step_recs = main.clear() if window.steady else main.filter(pl.col(_STEP) == phase.step)  # only read unsteady
    return _step_sample(main, step_recs, phase, window)[2]


def row_latency_sample(main: pl.DataFrame, row: dict[str, Any]) -> pl.DataFrame:
    """The successful requests of :func:`row_sample`: what a row's latency and token figures are over."""
    return row_sample(main, row).filter(pl.col(_OK))


def time_bin_s(span_s: float, max_bins: int = 150) -> float:
    """Width (s) of the time bins for a run of ``span_s`` seconds: the smallest of 1, 2, 5, 10, 15, 30 s, 1, 2,
    5, 10, 15, 30 min, 1 h giving at most ``max_bins`` bins (1 h beyond)."""
    for w in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800):
        if span_s / w <= max_bins:
            return float(w)
    return 3600.0


def _bin_lo(t0: float, width: float) -> pl.Expr:
    """Start (epoch s) of the bin ``_bin``: ``t0 + _bin * width``, the float the per-window rule is given."""
    return pl.lit(t0) + pl.col("_bin").cast(pl.Float64) * width


def _bin_hi(t0: float, width: float) -> pl.Expr:
    return pl.lit(t0) + (pl.col("_bin") + 1).cast(pl.Float64) * width


def _bin_of(t: pl.Expr, t0: float, width: float) -> pl.Expr:
    """Index of the bin ``[t0 + i*width, t0 + (i+1)*width)`` holding time ``t`` (Int64; may be out of range)."""
    return ((t - t0) / width).floor().cast(pl.Int64)


def _pro_rata_binned(rate: pl.DataFrame, t0: float, width: float, n: int) -> pl.DataFrame:
    """(``_bin``, ``tokens``) of the records without chunk times: ``output_tokens × overlap`` of the decode
    interval with each bin it touches (``columns._pro_rata_tokens`` per bin). Every bin a record can reach (±1
    for float rounding at a boundary) is one row; the overlap itself is computed exactly as per window."""
    a0, a1 = _token_spread_start(), pl.col(_END)
    spans = rate.select(
        a0.alias("_a0"), a1.alias("_a1"), _START, pl.col("output_tokens").cast(pl.Float64).alias("_tok"),
        (_bin_of(a0, t0, width) - 1).clip(lower_bound=0).alias("_lo"),
        (_bin_of(pl.max_horizontal(a0, a1), t0, width) + 1).clip(upper_bound=n - 1).alias("_hi"),
    ).filter(pl.col("_lo") <= pl.col("_hi"))
    per = spans.with_columns(pl.int_ranges("_lo", pl.col("_hi") + 1).alias("_bin")).explode("_bin")
    lo, hi = _bin_lo(t0, width), _bin_hi(t0, width)
    reach = (pl.col("_a1") >= lo) & (pl.col(_START) < hi)  # figures.record_tokens_in: outside the window -> 0
    share = _overlap(pl.col("_a0"), pl.col("_a1"), lo, hi)
    return per.filter(reach).select("_bin", (pl.col("_tok") * share).alias("tokens"))


def _chunk_binned(chunked: pl.DataFrame, t0: float, width: float, n: int) -> pl.DataFrame:
    """(``_bin``, ``tokens``) of the records with chunk times, by ``columns._chunk_tokens_in`` per bin.

    A chunk ``i`` is in bin ``b`` when ``lo_b - start <= chunk_times[i] < hi_b - start``. Per (record, bin): with
    per-chunk usage (``chunk_tokens`` as long as ``chunk_times``, summing to ``shown > 0``) the tokens of its
    chunks there, plus ``output_tokens - shown`` in the bin holding the record's end when that is >= 0, or the
    chunks' tokens scaled by ``output_tokens / shown`` when the usage counts fewer; otherwise ``output_tokens``
    split evenly over the chunks.
    """
    ct, toks = pl.col("chunk_times"), pl.col("chunk_tokens")
    rows = chunked.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i"), _START, _END, "output_tokens", "chunk_times",
        pl.when(toks.is_not_null() & (toks.list.len() == ct.list.len()) & (toks.list.sum() > 0))
        .then(toks).otherwise(pl.lit(None, pl.List(pl.Int64))).alias("chunk_tokens"),
    )
    valid = rows.filter(toks.is_not_null())
    plain = rows.filter(toks.is_null()).select("_i", _START, _END, "chunk_times").explode("chunk_times") \
        .with_columns(pl.lit(None, pl.Int64).alias("chunk_tokens"))
    used = valid.select("_i", _START, _END, "chunk_times", "chunk_tokens").explode(["chunk_times", "chunk_tokens"])
    chunks = pl.concat([plain, used], how="vertical_relaxed").drop_nulls("chunk_times")
    guess = _bin_of(pl.col(_START) + ct, t0, width).alias("_bin")
    chunks = chunks.with_columns(guess)
    # exact membership, as the per-window comparison against ``w - start`` (the guess can be off by one)
    chunks = chunks.with_columns(
        pl.when(ct < _bin_lo(t0, width) - pl.col(_START)).then(pl.col("_bin") - 1)
        .when(ct >= _bin_hi(t0, width) - pl.col(_START)).then(pl.col("_bin") + 1)
        .otherwise(pl.col("_bin")).alias("_bin"))
    chunks = chunks.filter((pl.col("_bin") >= 0) & (pl.col("_bin") < n)
                           & (pl.col(_END) >= _bin_lo(t0, width)))  # record_tokens_in: ended before -> 0
    per = chunks.group_by("_i", "_bin").agg(pl.len().alias("n_in"), toks.sum().alias("t_in"))
    per = per.join(rows.select("_i", _END, "output_tokens", ct.list.len().alias("_n"),
                               toks.list.sum().alias("_shown"), toks.is_not_null().alias("_usage")), on="_i")
    out, shown = pl.col("output_tokens"), pl.col("_shown")
    value = (
        pl.when(~pl.col("_usage")).then(out * pl.col("n_in") / pl.col("_n"))
        .when(out - shown >= 0).then(pl.col("t_in").cast(pl.Float64))
        .otherwise(pl.col("t_in") * out / shown)
    )
    inside = per.select("_bin", value.alias("tokens"))
    # usage tokens beyond the chunks (e.g. EOS) arrive at the request's end: the bin holding the end
    rest = rows.filter(toks.is_not_null()).select(
        _START, _END, (pl.col("output_tokens") - toks.list.sum()).cast(pl.Float64).alias("tokens"),
        _bin_of(pl.col(_END), t0, width).alias("_bin"),
    ).filter(pl.col("tokens") > 0)
    rest = rest.with_columns(
        pl.when(pl.col(_END) < _bin_lo(t0, width)).then(pl.col("_bin") - 1)
        .when(pl.col(_END) >= _bin_hi(t0, width)).then(pl.col("_bin") + 1)
        .otherwise(pl.col("_bin")).alias("_bin"))
    rest = rest.filter((pl.col("_bin") >= 0) & (pl.col("_bin") < n) & (pl.col(_START) < _bin_hi(t0, width)))
    return pl.concat([inside, rest.select("_bin", "tokens")])


def output_tokens_binned(main: pl.DataFrame, t0: float, width: float, n: int) -> list[float]:
    """Output tokens that arrived in each time bin ``[t0 + i*width, t0 + (i+1)*width)``, ``i = 0 .. n-1`` (tokens;
    divide by ``width`` for tok/s), in one pass over the records.

    Bin ``i`` equals the aggregate tok/s rule of the report (``columns._window_tokens``) over that bin: successful
    requests with output tokens; by chunk arrival when a record has ``chunk_times`` (with its ``chunk_tokens`` when
    they match), else spread uniformly over the decode interval (from the request start with hidden reasoning) and
    counted pro rata. Tokens outside ``[t0, t0 + n*width)`` are not counted.

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
    tokens = pl.col("output_tokens")
    base = main.filter(pl.col(_OK) & tokens.is_not_null() & (tokens != 0)).with_columns(
        _has_chunk_times().alias("_chunked"))
    parts = [_pro_rata_binned(base.filter(~pl.col("_chunked")), t0, width, n)]
    chunked = base.filter(pl.col("_chunked"))
    if chunked.height:
        parts.append(_chunk_binned(chunked, t0, width, n))
    sums = pl.concat(parts).group_by("_bin").agg(pl.col("tokens").sum())
    out = [0.0] * n
    for i, v in sums.iter_rows():
        out[int(i)] = float(v)
    return out


def ttft_by_start_bin(ok: pl.DataFrame, t0: float, width: float) -> list[tuple[int, float]]:
    """``(bin, p50 TTFT in s)`` per bin ``floor((start_wall - t0) / width)`` of the requests in ``ok`` that have a
    TTFT, sorted by bin; the p50 interpolates linearly between closest ranks (as ``stats.percentile``)."""
    got = (ok.filter(pl.col("ttft").is_not_null())
           .group_by(_bin_of(pl.col(_START), t0, width).alias("_bin"))
           .agg(pl.col("ttft").quantile(0.5, interpolation="linear").alias("p50"))
           .sort("_bin"))
    return [(int(b), float(v)) for b, v in got.iter_rows()]
