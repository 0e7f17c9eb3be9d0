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

import polars as pl

from harness.report.exprs import END, OK, START, flag

__all__ = ["chunk_tokens_in", "has_chunk_times", "overlap", "pro_rata_tokens", "token_spread_start",
           "window_tokens"]


def overlap(a0: pl.Expr, a1: pl.Expr, w0: float, w1: float) -> pl.Expr:
    """Fraction of ``[a0, a1]`` inside ``[w0, w1)``, as :func:`harness.report.stats.overlap_fraction`."""
    point = pl.when((a0 >= w0) & (a0 < w1)).then(1.0).otherwise(0.0)
    inside = pl.min_horizontal(a1, pl.lit(w1)) - pl.max_horizontal(a0, pl.lit(w0))
    spread = pl.max_horizontal(pl.lit(0.0), inside) / (a1 - a0)
    return pl.when(a1 <= a0).then(point).otherwise(spread)


def token_spread_start() -> pl.Expr:
    """Where a request's output tokens start being spread for aggregate tok/s (epoch s): start + TTFT; the request
    start without TTFT, or with hidden reasoning (its reasoning was generated, unseen, before the first visible
    chunk)."""
    ttft = pl.col("ttft")
    return pl.when(ttft.is_not_null() & ~flag("hidden_reasoning")).then(pl.col(START) + ttft) \
        .otherwise(pl.col(START))


def pro_rata_tokens(w0: float, w1: float) -> pl.Expr:
    """Per record: output tokens generated inside ``[w0, w1)``, pro rata (tokens, Float64), as the no-chunk-times
    branch: spread uniformly over [:func:`token_spread_start`, end]."""
    return pl.col("output_tokens").cast(pl.Float64) * overlap(token_spread_start(), pl.col(END), w0, w1)


def has_chunk_times() -> pl.Expr:
    """The record carries chunk arrival times (a non-empty ``chunk_times``), as ``bool(r.chunk_times)``."""
    ct = pl.col("chunk_times")
    return (ct.is_not_null() & (ct.list.len() > 0)).fill_null(False)


def chunk_tokens_in(chunked: pl.DataFrame, w0: float, w1: float) -> float:
    """Σ over ``chunked`` (records with chunk times, in the window's reach) of the tokens that arrived inside
    ``[w0, w1)`` (tokens): the chunk branch.

    A chunk ``i`` is inside when ``w0 - start <= chunk_times[i] < w1 - start`` (``bisect_left`` over the sorted
    arrival times). With per-chunk usage (``chunk_tokens`` as long as ``chunk_times``, summing to ``shown > 0``):
    the tokens of the chunks inside, plus ``output_tokens - shown`` when the request ended inside (those arrive at
    the end), or, when the usage counts fewer tokens than the chunks, the chunks' tokens scaled by
    ``output_tokens / shown``. Otherwise ``output_tokens`` split evenly over the chunks.
    """
    if chunked.height == 0:
        return 0.0
    ct, toks = pl.col("chunk_times"), pl.col("chunk_tokens")
    rows = chunked.select(
        pl.int_range(pl.len(), dtype=pl.UInt32).alias("_i"), START, END, "output_tokens", "chunk_times",
        pl.when(toks.is_not_null() & (toks.list.len() == ct.list.len()) & (toks.list.sum() > 0))
        .then(toks).otherwise(pl.lit(None, pl.List(pl.Int64))).alias("chunk_tokens"),
    )
    inside = (ct >= pl.lit(w0) - pl.col(START)) & (ct < pl.lit(w1) - pl.col(START))
    n_in = (rows.select("_i", START, "chunk_times").explode("chunk_times")
            .group_by("_i").agg(inside.sum().alias("n_in")))
    with_usage = rows.filter(toks.is_not_null())
    t_in = (with_usage.select("_i", START, "chunk_times", "chunk_tokens").explode(["chunk_times", "chunk_tokens"])
            .group_by("_i").agg(toks.filter(inside).sum().alias("t_in")))
    per = rows.join(n_in, on="_i", how="left").join(t_in, on="_i", how="left")
    out = pl.col("output_tokens")
    shown = toks.list.sum()
    rest = out - shown
    ends_inside = (pl.col(END) >= w0) & (pl.col(END) < w1)
    t_in_f = pl.col("t_in").fill_null(0)
    value = (
        pl.when(toks.is_null()).then(out * pl.col("n_in").fill_null(0) / ct.list.len())
        .when(rest >= 0).then(t_in_f.cast(pl.Float64) + pl.when(ends_inside).then(rest).otherwise(0))
        .otherwise(t_in_f * out / shown)
    )
    return float(per.select(value.sum()).item() or 0.0)


def window_tokens(main: pl.DataFrame, w0: float, w1: float) -> tuple[float, str]:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (epoch s) over ``main`` (prepared
    records, :func:`harness.report.columns.prepare`; any superset of those overlapping the window gives the same
    result), in tokens, by chunk arrival when a record has chunk times, else pro rata; and how they were placed:
    ``chunks`` (every contributing request had chunk times), ``pro_rata`` (none had), ``mixed``, or ``none`` (no
    successful request with output tokens overlaps the window)."""
    tokens = pl.col("output_tokens")
    reach = main.filter(pl.col(OK) & tokens.is_not_null() & (tokens != 0) & (pl.col(END) >= w0)
                        & (pl.col(START) < w1)).with_columns(has_chunk_times().alias("_chunked"))
    v = reach.select(
        pro_rata_tokens(w0, w1).filter(~pl.col("_chunked")).sum().alias("pro_rata"),
        (~pl.col("_chunked")).sum().alias("by_rate"),
        pl.col("_chunked").sum().alias("by_chunks"),
    ).row(0, named=True)
    by_rate, by_chunks = int(v["by_rate"] or 0), int(v["by_chunks"] or 0)
    total = float(v["pro_rata"] or 0.0)
    if by_chunks:
        total += chunk_tokens_in(reach.filter(pl.col("_chunked")), w0, w1)
    basis = "mixed" if by_chunks and by_rate else "chunks" if by_chunks else "pro_rata" if by_rate else "none"
    return total, basis
