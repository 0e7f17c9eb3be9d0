"""Output tokens that arrived inside a time window, over the record frame: the aggregate tok/s of a step row and
of a soak slice (``definitions.output_tps`` in the report).

Output tokens of successful requests that ARRIVED inside ``[w0, w1)`` (epoch seconds): by chunk arrival when a
record has ``chunk_times`` (each token-bearing chunk's tokens at ``start + chunk_times[i]``: its per-chunk usage
``chunk_tokens`` when they match the chunks, tokens the usage counts beyond the chunks, e.g. EOS, at the request's
end; else ``output_tokens`` split evenly over the chunks); else spread uniformly over the decode interval
``[start + ttft, end]`` (from the request start without TTFT or with hidden reasoning, whose reasoning was
generated unseen before the first visible chunk) and counted pro rata to the part inside the window.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from harness.report.exprs import END, OK, START, flag

__all__ = [
    "WINDOW_INDEX",
    "has_chunk_times",
    "overlap",
    "token_spread_start",
    "tokens_in_windows",
    "window_of",
    "window_tokens",
]


Window = tuple[float, float]


def overlap(a0: pl.Expr, a1: pl.Expr, w0: pl.Expr | float, w1: pl.Expr | float) -> pl.Expr:
    """Fraction of ``[a0, a1]`` inside ``[w0, w1)``, as :func:`harness.report.stats.overlap_fraction` (the window
    bounds are numbers or, per row, expressions)."""
    lo, hi = (w if isinstance(w, pl.Expr) else pl.lit(w) for w in (w0, w1))
    point = pl.when((a0 >= lo) & (a0 < hi)).then(1.0).otherwise(0.0)
    inside = pl.min_horizontal(a1, hi) - pl.max_horizontal(a0, lo)
    spread = pl.max_horizontal(pl.lit(0.0), inside) / (a1 - a0)
    return pl.when(a1 <= a0).then(point).otherwise(spread)


def token_spread_start() -> pl.Expr:
    """Where a request's output tokens start being spread for aggregate tok/s (epoch s): start + TTFT; the request
    start without TTFT, or with hidden reasoning (its reasoning was generated, unseen, before the first visible
    chunk)."""
    ttft = pl.col("ttft")
    return pl.when(ttft.is_not_null() & ~flag("hidden_reasoning")).then(pl.col(START) + ttft) \
        .otherwise(pl.col(START))


def has_chunk_times() -> pl.Expr:
    """The record carries chunk arrival times (a non-empty ``chunk_times``), as ``bool(r.chunk_times)``."""
    ct = pl.col("chunk_times")
    return (ct.is_not_null() & (ct.list.len() > 0)).fill_null(False)


def _counted() -> pl.Expr:
    """Records whose output tokens count: successful, with output tokens."""
    tokens = pl.col("output_tokens")
    return pl.col(OK) & tokens.is_not_null() & (tokens != 0)


# Columns of the (record, window) pairs: record index, window index and the window's bounds (epoch s).
_R, _W, _T0, _T1 = "_r", "_w", "_t0", "_t1"
#: The window index column :func:`window_of` adds (0-based, the position in ``windows``).
WINDOW_INDEX = _W


def _bounds_frame(windows: Sequence[Window]) -> pl.DataFrame:
    return pl.DataFrame({_W: list(range(len(windows))), _T0: [w[0] for w in windows], _T1: [w[1] for w in windows]},
                        schema={_W: pl.Int64, _T0: pl.Float64, _T1: pl.Float64})


def window_of(frame: pl.DataFrame, at: pl.Expr, value: pl.Expr, offset: pl.Expr, windows: Sequence[Window]
               ) -> pl.DataFrame:
    """``frame`` with the index :data:`_W` and bounds of the window holding each row, rows in none dropped.

    A row is in window ``i`` when ``t0_i - offset <= value < t1_i - offset`` (the exact test); ``at`` (epoch s,
    ``≈ value + offset``) only picks the candidate, for equal consecutive windows (a slice grid)."""
    bounds = _bounds_frame(windows)
    n = len(windows)
    if n == 1:
        cand = frame.with_columns(pl.lit(0, pl.Int64).alias(_W))
    else:
        w0, width = windows[0][0], windows[0][1] - windows[0][0]
        first = ((at - w0) / width).floor().clip(0, n - 1).cast(pl.Int64).alias(_W)
        cand = frame.with_columns(first).join(bounds, on=_W, how="left")
        below, above = value < pl.col(_T0) - offset, value >= pl.col(_T1) - offset
        cand = cand.with_columns(pl.when(below).then(pl.col(_W) - 1).when(above).then(pl.col(_W) + 1)
                                 .otherwise(pl.col(_W)).alias(_W)).drop(_T0, _T1)
        cand = cand.filter((pl.col(_W) >= 0) & (pl.col(_W) < n))
    got = cand.join(bounds, on=_W, how="inner")
    return got.filter((value >= pl.col(_T0) - offset) & (value < pl.col(_T1) - offset))


def _pair_reach() -> pl.Expr:
    """A (record, window) pair in the window's reach: the request started before the window ends and ended at or
    after it starts (the records :func:`window_tokens` considers)."""
    return (pl.col(START) < pl.col(_T1)) & (pl.col(END) >= pl.col(_T0))


#: Seconds by which a record's candidate windows extend past its own interval, so float rounding of the
#: candidate (epoch times carry ~2.4e-7 s of it) never misses a window; the exact per-window test decides.
_EDGE_S = 1e-6


def _pro_rata_pairs(recs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """(window, tokens) of records without chunk times: output tokens spread uniformly over
    [:func:`token_spread_start`, end], counted pro rata to the part inside each window (``[t0, t1)``)."""
    value = pl.col("output_tokens").cast(pl.Float64) * overlap(token_spread_start(), pl.col(END), pl.col(_T0),
                                                               pl.col(_T1))
    n = len(windows)
    if n == 1:
        (t0, t1), = windows
        one = recs.with_columns(pl.lit(t0, pl.Float64).alias(_T0), pl.lit(t1, pl.Float64).alias(_T1))
        return one.filter(_pair_reach()).select(pl.lit(0, pl.Int64).alias(_W), value.alias("_tokens"))
    w0, width = windows[0][0], windows[0][1] - windows[0][0]
    lo = ((pl.min_horizontal(START, END) - w0 - _EDGE_S) / width).floor().clip(0, n - 1).cast(pl.Int64)
    hi = ((pl.col(END) - w0 + _EDGE_S) / width).floor().clip(0, n - 1).cast(pl.Int64)
    pairs = (recs.with_columns(pl.int_ranges(lo, hi + 1).alias(_W)).explode(_W).drop_nulls(_W)
             .join(_bounds_frame(windows), on=_W))
    return pairs.filter(_pair_reach()).select(_W, value.alias("_tokens"))


def _chunk_pairs(recs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """(window, tokens) of records with chunk times: each chunk's tokens at its arrival.

    A chunk ``i`` is inside ``[t0, t1)`` when ``t0 - start <= chunk_times[i] < t1 - start`` (``bisect_left`` over
    the sorted arrival times). With per-chunk usage (``chunk_tokens`` as long as ``chunk_times``, summing to
    ``shown > 0``): the tokens of the chunks inside, plus ``output_tokens - shown`` in the window the request
    ended in (those arrive at the end), or, when the usage counts fewer tokens than the chunks, the chunks' tokens
    scaled by ``output_tokens / shown``. Otherwise ``output_tokens`` split evenly over the chunks.
    """
    ct, toks = pl.col("chunk_times"), pl.col("chunk_tokens")
    usage = (toks.is_not_null() & (toks.list.len() == ct.list.len()) & (toks.list.sum() > 0)).fill_null(False)
    rows = recs.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(_R), START, END, "output_tokens", "chunk_times",
        usage.alias("_usage"),
        # without usable per-chunk usage: zeros as long as the chunks (so both lists explode together; unused)
        pl.when(usage).then(toks).otherwise(ct.list.eval(pl.element().cast(pl.Int64) * 0)).alias("chunk_tokens"),
    )
    chunks = rows.select(_R, START, "chunk_times", "chunk_tokens").explode(["chunk_times", "chunk_tokens"])
    start = pl.col(START)
    inside = window_of(chunks, start + ct, ct, start, windows)
    per_chunk = inside.group_by(_R, _W).agg(pl.len().alias("_n_in"), toks.sum().alias("_t_in"))
    ends = window_of(rows.select(_R, END), pl.col(END), pl.col(END), pl.lit(0.0), windows)
    per = (per_chunk.join(ends.select(_R, _W, pl.lit(True).alias("_ends")), on=[_R, _W], how="full", coalesce=True)
           .join(rows, on=_R).join(_bounds_frame(windows), on=_W).filter(_pair_reach()))
    out = pl.col("output_tokens")
    shown = toks.list.sum()
    rest = out - shown
    t_in = pl.col("_t_in").fill_null(0)
    value = (
        pl.when(~pl.col("_usage")).then(out * pl.col("_n_in").fill_null(0) / ct.list.len())
        .when(rest >= 0).then(t_in.cast(pl.Float64) + pl.when(pl.col("_ends").fill_null(False)).then(rest)
                              .otherwise(0))
        .otherwise(t_in * out / shown)
    )
    return per.select(_W, value.cast(pl.Float64).alias("_tokens"))


def tokens_in_windows(main: pl.DataFrame, windows: Sequence[Window]) -> list[float]:
    """Output tokens of successful requests that arrived inside each window ``[t0, t1)`` of ``windows`` (epoch s;
    one window, or consecutive equal ones: the slices of a soak), in tokens, over ``main`` (prepared records,
    :func:`harness.report.columns.prepare`; any superset of those overlapping the windows gives the same result):
    by chunk arrival for a record with chunk times (:func:`_chunk_pairs`), else pro rata over its decode interval
    (:func:`_pro_rata_pairs`). Each record is paired only with the windows it can reach, so a soak's hundreds of
    slices cost one pass, not one per slice."""
    if not windows:
        return []
    lo, hi = min(w[0] for w in windows), max(w[1] for w in windows)
    reach = main.filter(_counted() & (pl.col(END) >= lo) & (pl.col(START) < hi))
    chunked = has_chunk_times()
    parts = [_pro_rata_pairs(reach.filter(~chunked), windows)]
    with_chunks = reach.filter(chunked)
    if with_chunks.height:
        parts.append(_chunk_pairs(with_chunks, windows))
    sums = pl.concat(parts).group_by(_W).agg(pl.col("_tokens").sum())
    got = dict(zip(sums.get_column(_W).to_list(), sums.get_column("_tokens").to_list(), strict=True))
    return [float(got.get(i) or 0.0) for i in range(len(windows))]


def window_tokens(main: pl.DataFrame, w0: float, w1: float) -> tuple[float, str]:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (epoch s) over ``main`` (prepared
    records, :func:`harness.report.columns.prepare`; any superset of those overlapping the window gives the same
    result), in tokens (:func:`tokens_in_windows`); and how they were placed: ``chunks`` (every contributing
    request had chunk times), ``pro_rata`` (none had), ``mixed``, or ``none`` (no successful request with output
    tokens overlaps the window)."""
    reach = main.filter(_counted() & (pl.col(END) >= w0) & (pl.col(START) < w1))
    v = reach.select(has_chunk_times().sum().alias("by_chunks"), pl.len().alias("n")).row(0, named=True)
    by_chunks = int(v["by_chunks"] or 0)
    by_rate = int(v["n"]) - by_chunks
    total = tokens_in_windows(reach, [(w0, w1)])[0] if reach.height else 0.0
    basis = "mixed" if by_chunks and by_rate else "chunks" if by_chunks else "pro_rata" if by_rate else "none"
    return total, basis
