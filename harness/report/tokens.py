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

from harness.report.chunkbins import CHUNK_BINS_DTYPE
from harness.report.exprs import END, OK, START, flag

__all__ = [
    "CHUNK_BINS_DTYPE",
    "CHUNK_BIN_COLUMNS",
    "WINDOW_INDEX",
    "CoarseChunkBins",
    "has_chunk_times",
    "is_reduced",
    "overlap",
    "phase_tokens_in_windows",
    "reduce_chunks",
    "token_spread_start",
    "tokens_in_windows",
    "window_of",
    "window_phase_tokens",
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


def has_chunk_times(reduced: bool = False) -> pl.Expr:
    """The record carries chunk arrival times (a non-empty ``chunk_times``), as ``bool(r.chunk_times)``;
    ``reduced``: of a frame whose chunk lists were reduced (:func:`reduce_chunks`: ``chunk_n > 0``)."""
    if reduced:
        return (pl.col("chunk_n") > 0).fill_null(False)
    ct = pl.col("chunk_times")
    return (ct.is_not_null() & (ct.list.len() > 0)).fill_null(False)


def is_reduced(frame: pl.DataFrame) -> bool:
    """``frame`` holds reduced chunk lists (:data:`CHUNK_BIN_COLUMNS`) instead of ``chunk_times``."""
    return "chunk_times" not in frame.columns and "chunk_n" in frame.columns


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
    n = len(windows)
    # each row's window bounds are gathered by index from the window list (no join: frame order is kept)
    lows = pl.lit(pl.Series(_T0, [w[0] for w in windows], pl.Float64))
    highs = pl.lit(pl.Series(_T1, [w[1] for w in windows], pl.Float64))
    if n == 1:
        cand = frame.with_columns(pl.lit(0, pl.Int64).alias(_W))
    else:
        w0, width = windows[0][0], windows[0][1] - windows[0][0]
        first = ((at - w0) / width).floor().clip(0, n - 1).cast(pl.Int64).alias(_W)
        w = pl.col(_W)
        below, above = value < lows.gather(w) - offset, value >= highs.gather(w) - offset
        cand = frame.with_columns(first).with_columns(
            pl.when(below).then(w - 1).when(above).then(w + 1).otherwise(w).alias(_W))
        cand = cand.filter((pl.col(_W) >= 0) & (pl.col(_W) < n))
    got = cand.with_columns(lows.gather(pl.col(_W)).alias(_T0), highs.gather(pl.col(_W)).alias(_T1))
    return got.filter((value >= pl.col(_T0) - offset) & (value < pl.col(_T1) - offset))


def _pair_reach() -> pl.Expr:
    """A (record, window) pair in the window's reach: the request started before the window ends and ended at or
    after it starts (the records :func:`window_tokens` considers)."""
    return (pl.col(START) < pl.col(_T1)) & (pl.col(END) >= pl.col(_T0))


#: Seconds by which a record's candidate windows extend past its own interval, so float rounding of the
#: candidate (epoch times carry ~2.4e-7 s of it) never misses a window; the exact per-window test decides.
_EDGE_S = 1e-6


def _phase_counts() -> tuple[pl.Expr, pl.Expr]:
    """(reasoning, answer) output tokens of a record (tokens, Float64): ``reasoning_tokens`` clipped to
    ``[0, output_tokens]`` (null as 0), and the rest of ``output_tokens`` (``answer_tokens`` by its definition),
    so the two always sum to ``output_tokens``."""
    out = pl.col("output_tokens").cast(pl.Float64)
    r = pl.min_horizontal(pl.max_horizontal(pl.col("reasoning_tokens").cast(pl.Float64).fill_null(0.0),
                                            pl.lit(0.0)), out)
    return r, out - r


def _pro_rata_pairs(recs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """(window, reasoning, answer) tokens of records without chunk times, each phase spread uniformly over its
    interval and counted pro rata to the part inside each window (``[t0, t1)``): reasoning tokens over
    ``[start + ttft, start + ttfat]`` (from the start without TTFT; ``[start, start + ttft]`` with hidden
    reasoning, generated unseen before the first visible chunk), answer tokens over ``[start + ttfat, end]``
    (``start + ttft``, else the start, without TTFAT); without TTFAT reasoning over the whole decode interval
    ``[token_spread_start, end]``. Every bound is clipped into ``[start, end]`` (``[r0, end]`` for the reasoning
    end), so a TTFAT past the request's end puts its answer tokens at the end."""
    s, ttft, ttfat = pl.col(START), pl.col("ttft"), pl.col("ttfat")
    hidden_ttft = flag("hidden_reasoning") & ttft.is_not_null()
    end = pl.col(END)
    r0 = pl.min_horizontal(pl.when(flag("hidden_reasoning")).then(s).otherwise(token_spread_start()), end)
    r1 = pl.when(hidden_ttft).then(s + ttft).otherwise(pl.coalesce(s + ttfat, end)).clip(r0, end)
    a0 = pl.coalesce(s + ttfat, s + ttft, s).clip(s, end)
    reasoning, answer = _phase_counts()
    t0, t1 = pl.col(_T0), pl.col(_T1)
    values = (reasoning * overlap(r0, r1, t0, t1)).alias("_reasoning"), \
        (answer * overlap(a0, pl.col(END), t0, t1)).alias("_answer")
    n = len(windows)
    if n == 1:
        (w0, w1), = windows
        one = recs.with_columns(pl.lit(w0, pl.Float64).alias(_T0), pl.lit(w1, pl.Float64).alias(_T1))
        return one.filter(_pair_reach()).select(pl.lit(0, pl.Int64).alias(_W), *values)
    g0, width = windows[0][0], windows[0][1] - windows[0][0]
    lo = ((pl.min_horizontal(START, END) - g0 - _EDGE_S) / width).floor().clip(0, n - 1).cast(pl.Int64)
    hi = ((pl.col(END) - g0 + _EDGE_S) / width).floor().clip(0, n - 1).cast(pl.Int64)
    pairs = (recs.with_columns(pl.int_ranges(lo, hi + 1).alias(_W)).explode(_W).drop_nulls(_W)
             .join(_bounds_frame(windows), on=_W))
    return pairs.filter(_pair_reach()).select(_W, *values)


def _chunk_pairs(recs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """(window, reasoning, answer) tokens of records with chunk times: each chunk's tokens at its arrival.

    A chunk ``i`` is inside ``[t0, t1)`` when ``t0 - start <= chunk_times[i] < t1 - start`` (``bisect_left`` over
    the sorted arrival times); it is a reasoning chunk when it arrived before the first answer token
    (``chunk_times[i] < ttfat``; every chunk without TTFAT), else an answer chunk. With per-chunk usage
    (``chunk_tokens`` as long as ``chunk_times``, summing to ``shown > 0``): the tokens of the chunks inside, in
    their chunk's phase, plus ``output_tokens - shown`` (answer) in the window the request ended in (those arrive
    at the end), or, when the usage counts fewer tokens than the chunks, the chunks' tokens scaled by
    ``output_tokens / shown``. Otherwise the record's reasoning tokens (:func:`_phase_counts`) split evenly over
    its reasoning chunks and its answer tokens over its answer chunks (a phase without chunks: over all chunks).
    """
    ct, toks = pl.col("chunk_times"), pl.col("chunk_tokens")
    usage = (toks.is_not_null() & (toks.list.len() == ct.list.len()) & (toks.list.sum() > 0)).fill_null(False)
    reasoning, answer = _phase_counts()
    rows = recs.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(_R), START, END, "output_tokens", "chunk_times", "ttfat",
        usage.alias("_usage"), reasoning.alias("_rt"), answer.alias("_at"),
        # without usable per-chunk usage: zeros as long as the chunks (so both lists explode together; unused)
        pl.when(usage).then(toks).otherwise(ct.list.eval(pl.element().cast(pl.Int64) * 0)).alias("chunk_tokens"),
    )
    chunks = _chunk_rows(rows.select(_R, START, "ttfat", "chunk_times", "chunk_tokens"))
    n_r = chunks.group_by(_R).agg(pl.col("_is_r").sum().cast(pl.Int64).alias("_n_r"))
    rows = rows.join(n_r, on=_R, how="left").with_columns(
        pl.col("_n_r").fill_null(0), ct.list.len().cast(pl.Int64).alias("_n"),
        toks.list.sum().cast(pl.Int64).alias("_shown")).drop("chunk_times", "chunk_tokens", "ttfat")
    start = pl.col(START)
    inside = window_of(chunks, start + ct, ct, start, windows)
    per_chunk = _in_window_sums(inside, _W)
    return _finish_pairs(rows, per_chunk, windows)


def _chunk_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """One row per chunk of ``rows`` (:data:`_R`, START, ``ttfat``, ``chunk_times``, ``chunk_tokens`` as lists of
    equal lengths): its arrival ``chunk_times`` (s from the start), tokens ``chunk_tokens`` and ``_is_r`` (a
    reasoning chunk: it arrived before ``ttfat``, or the record has no TTFAT)."""
    chunks = rows.explode(["chunk_times", "chunk_tokens"])
    ct, ttfat = pl.col("chunk_times"), pl.col("ttfat")
    return chunks.with_columns((ttfat.is_null() | (ct < ttfat)).fill_null(True).alias("_is_r"))


def _in_window_sums(inside: pl.DataFrame, by: str) -> pl.DataFrame:
    """Per (record, ``by``) of chunk rows (:func:`_chunk_rows`): chunks ``_n_in``, reasoning chunks ``_n_in_r``,
    tokens of reasoning ``_t_in_r`` and answer ``_t_in_a`` chunks (Int64, counts and tokens)."""
    is_r, toks = pl.col("_is_r"), pl.col("chunk_tokens")
    return inside.group_by(_R, by).agg(
        pl.len().cast(pl.Int64).alias("_n_in"), is_r.sum().cast(pl.Int64).alias("_n_in_r"),
        toks.filter(is_r).sum().cast(pl.Int64).alias("_t_in_r"),
        toks.filter(~is_r).sum().cast(pl.Int64).alias("_t_in_a"))


def _finish_pairs(rows: pl.DataFrame, per_chunk: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """(window, reasoning, answer) tokens from the per-record scalars ``rows`` (:data:`_R`, START, END,
    ``output_tokens``, ``_usage``, ``_rt``, ``_at``, chunks ``_n``, reasoning chunks ``_n_r``, usage tokens
    ``_shown``) and the per (record, window) sums ``per_chunk`` (:func:`_in_window_sums`): the rule of
    :func:`_chunk_pairs`, whether the sums came from the chunk lists or from their reduced form
    (:func:`reduce_chunks`)."""
    ends = window_of(rows.select(_R, END), pl.col(END), pl.col(END), pl.lit(0.0), windows)
    per = (per_chunk.join(ends.select(_R, _W, pl.lit(True).alias("_ends")), on=[_R, _W], how="full", coalesce=True)
           .join(rows, on=_R).join(_bounds_frame(windows), on=_W).filter(_pair_reach()))
    out = pl.col("output_tokens").cast(pl.Float64)
    shown = pl.col("_shown").cast(pl.Float64)
    rest = out - shown
    n = pl.col("_n").cast(pl.Float64)
    n_r_all = pl.col("_n_r").cast(pl.Float64)
    n_a_all = n - n_r_all
    n_in = pl.col("_n_in").fill_null(0).cast(pl.Float64)
    n_in_r = pl.col("_n_in_r").fill_null(0).cast(pl.Float64)
    n_in_a = n_in - n_in_r
    t_in_r = pl.col("_t_in_r").fill_null(0).cast(pl.Float64)
    t_in_a = pl.col("_t_in_a").fill_null(0).cast(pl.Float64)
    even_r = pl.col("_rt") * pl.when(n_r_all > 0).then(n_in_r / n_r_all).otherwise(n_in / n)
    even_a = pl.col("_at") * pl.when(n_a_all > 0).then(n_in_a / n_a_all).otherwise(n_in / n)
    at_end = pl.when(pl.col("_ends").fill_null(False)).then(rest).otherwise(0.0)
    usage_on = pl.col("_usage")
    r_value = pl.when(~usage_on).then(even_r).when(rest >= 0).then(t_in_r).otherwise(t_in_r * out / shown)
    a_value = pl.when(~usage_on).then(even_a).when(rest >= 0).then(t_in_a + at_end).otherwise(t_in_a * out / shown)
    return per.select(_W, r_value.alias("_reasoning"), a_value.alias("_answer"))


# ------------------------------------------------------------------------------ reduced chunk lists (two-pass read)

#: The columns :func:`reduce_chunks` puts in place of ``chunk_times`` / ``chunk_tokens``: ``chunk_bins``
#: (List(Struct): per time bin ``[b0, b1)`` (epoch s) that holds chunks of the record, its chunks ``n``, reasoning
#: chunks ``n_r`` and usage tokens of its reasoning ``t_r`` and answer ``t_a`` chunks), ``chunk_n`` (chunks),
#: ``chunk_n_r`` (reasoning chunks), ``chunk_shown`` (tokens of the per-chunk usage, 0 without usable usage) and
#: ``chunk_usage`` (the per-chunk usage is usable).
CHUNK_BIN_COLUMNS: tuple[str, ...] = ("chunk_bins", "chunk_n", "chunk_n_r", "chunk_shown", "chunk_usage")


class CoarseChunkBins(ValueError):
    """A window asked of records whose chunk lists were reduced (:func:`reduce_chunks`) cuts one of their time
    bins: its tokens cannot be placed exactly from the reduced form (read the run with its chunk lists)."""


def reduce_chunks(batch: pl.DataFrame, edges: Sequence[float]) -> pl.DataFrame:
    """The chunk lists of ``batch`` reduced to per-bin sums (:data:`CHUNK_BIN_COLUMNS`, one row per row of
    ``batch``, same order), exact for every window whose bounds are in ``edges``.

    Args:
        batch: records with ``start_wall`` (epoch s, null read as 0 as :func:`harness.report.columns.prepare`
            does), ``ttfat`` (s), ``chunk_times`` (List(Float64), s from the request start) and ``chunk_tokens``
            (List(Int64), tokens).
        edges: time bin edges (epoch s, finite); bins are ``(-inf, e0)``, ``[e0, e1)``, ..., ``[e_last, inf)``.
            A chunk is in ``[b0, b1)`` when ``b0 - start <= chunk_times[i] < b1 - start``, the test
            :func:`_chunk_pairs` makes for a window, so a window made of whole bins gets exactly its chunks.
    """
    e = sorted(set(float(x) for x in edges))
    if any(x != x or x in (float("inf"), float("-inf")) for x in e):
        raise ValueError(f"chunk bin edges must be finite, got {edges!r}")
    ct, toks = pl.col("chunk_times"), pl.col("chunk_tokens")
    usage = (toks.is_not_null() & (toks.list.len() == ct.list.len()) & (toks.list.sum() > 0)).fill_null(False)
    rows = batch.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(_R), pl.col("start_wall").fill_null(0.0).alias(START), "ttfat",
        ct, pl.when(usage).then(toks).otherwise(ct.list.eval(pl.element().cast(pl.Int64) * 0)).alias("chunk_tokens"),
        usage.alias("chunk_usage"))
    scal = rows.select(_R, ct.list.len().fill_null(0).cast(pl.Int64).alias("chunk_n"),
                       pl.col("chunk_tokens").list.sum().fill_null(0).cast(pl.Int64).alias("chunk_shown"),
                       "chunk_usage")
    chunks = _chunk_rows(rows.select(_R, START, "ttfat", "chunk_times", "chunk_tokens")).drop_nulls("chunk_times")
    grid = pl.Series("e", e, dtype=pl.Float64)
    k = "_k"
    if e:
        start = pl.col(START)
        approx = (start + ct)
        idx = grid.search_sorted(chunks.select(approx).to_series(), side="right").cast(pl.Int64) - 1
        chunks = chunks.with_columns(idx.alias(k))
        lo = pl.col(k).clip(0, len(e) - 1).replace_strict(list(range(len(e))), e, return_dtype=pl.Float64)
        hi = (pl.col(k) + 1).clip(0, len(e) - 1).replace_strict(list(range(len(e))), e, return_dtype=pl.Float64)
        for _ in range(2):  # the exact test decides: start + t rounds, b - start <= t < b' - start does not
            below = (pl.col(k) >= 0) & (ct < lo - start)
            above = (pl.col(k) + 1 < len(e)) & (ct >= hi - start)
            chunks = chunks.with_columns(pl.when(below).then(pl.col(k) - 1).when(above).then(pl.col(k) + 1)
                                         .otherwise(pl.col(k)).alias(k))
    else:
        chunks = chunks.with_columns(pl.lit(-1, pl.Int64).alias(k))
    sums = _in_window_sums(chunks, k)
    ext = [float("-inf"), *e, float("inf")]
    b0 = pl.col(k).add(1).replace_strict(list(range(len(ext))), ext, return_dtype=pl.Float64)
    b1 = pl.col(k).add(2).replace_strict(list(range(len(ext))), ext, return_dtype=pl.Float64)
    bins = (sums.sort(_R, k)
            .select(_R, pl.struct(b0.alias("b0"), b1.alias("b1"), pl.col("_n_in").alias("n"),
                                  pl.col("_n_in_r").alias("n_r"), pl.col("_t_in_r").alias("t_r"),
                                  pl.col("_t_in_a").alias("t_a")).alias("chunk_bins"))
            .group_by(_R).agg(pl.col("chunk_bins"),
                              pl.col("chunk_bins").struct.field("n_r").sum().alias("chunk_n_r")))
    out = scal.join(bins, on=_R, how="left", maintain_order="left")
    return out.select(pl.col("chunk_bins").cast(CHUNK_BINS_DTYPE), pl.col("chunk_n"),
                      pl.col("chunk_n_r").fill_null(0).cast(pl.Int64), "chunk_shown", "chunk_usage")


def _bin_windows(pairs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """The window index :data:`_W` of each distinct bin ``(b0, b1)`` of ``pairs`` lying inside one of ``windows``
    (bins outside every window are left out).

    Raises:
        CoarseChunkBins: a window edge falls strictly inside a bin.
    """
    import bisect

    edges = sorted({x for w in windows for x in w})
    b0s, b1s, ws = [], [], []
    for b0, b1 in pairs.iter_rows():
        if bisect.bisect_right(edges, b0) < bisect.bisect_left(edges, b1):
            raise CoarseChunkBins(f"a window edge cuts the chunk time bin [{b0!r}, {b1!r}) of records whose chunk "
                                  "lists were reduced: read them with their chunk lists")
        for i, (t0, t1) in enumerate(windows):
            if t0 <= b0 and b1 <= t1:
                b0s.append(b0)
                b1s.append(b1)
                ws.append(i)
                break
    return pl.DataFrame({"b0": b0s, "b1": b1s, _W: ws}, schema={"b0": pl.Float64, "b1": pl.Float64, _W: pl.Int64})


def _bins_pairs(recs: pl.DataFrame, windows: Sequence[Window]) -> pl.DataFrame:
    """:func:`_chunk_pairs` over records whose chunk lists were reduced (:func:`reduce_chunks`): the same rule,
    from the bins' sums. Raises :class:`CoarseChunkBins` when a window cuts a bin."""
    reasoning, answer = _phase_counts()
    rows = recs.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(_R), START, END, "output_tokens", "chunk_bins",
        pl.col("chunk_usage").alias("_usage"), reasoning.alias("_rt"), answer.alias("_at"),
        pl.col("chunk_n").alias("_n"), pl.col("chunk_n_r").alias("_n_r"), pl.col("chunk_shown").alias("_shown"))
    bins = rows.select(_R, "chunk_bins").explode("chunk_bins").drop_nulls("chunk_bins").unnest("chunk_bins")
    where = _bin_windows(bins.select("b0", "b1").unique(), windows)
    inside = bins.join(where, on=["b0", "b1"])
    per_chunk = inside.group_by(_R, _W).agg(
        pl.col("n").sum().alias("_n_in"), pl.col("n_r").sum().alias("_n_in_r"),
        pl.col("t_r").sum().alias("_t_in_r"), pl.col("t_a").sum().alias("_t_in_a"))
    return _finish_pairs(rows.drop("chunk_bins"), per_chunk, windows)


#: Chunks placed at a time by :func:`phase_tokens_in_windows` (records with chunk times are taken in batches of
#: about this many chunks: the placement explodes every chunk into a row and joins them, ~100 bytes a chunk, so
#: a million records of ~370 chunks at once needed ~20 GB; in batches the transient memory is bounded).
CHUNK_BATCH = 2_000_000


def _chunk_batches(recs: pl.DataFrame, chunks: int = CHUNK_BATCH) -> list[pl.DataFrame]:
    """``recs`` as consecutive row slices (zero-copy) of about ``chunks`` chunks each (a record with more chunks
    is a slice of its own); none when no record has chunk times."""
    if not recs.height or not recs.select(has_chunk_times().any()).item():
        return []
    lens = recs.get_column("chunk_times").list.len().fill_null(0)
    ends = (lens.cum_sum() // max(1, chunks)).to_list()
    out, at = [], 0
    for i in range(1, len(ends) + 1):
        if i == len(ends) or ends[i] != ends[i - 1]:
            out.append(recs.slice(at, i - at))
            at = i
    return out


#: The record columns the token placement reads (:func:`_pro_rata_pairs`, :func:`_chunk_pairs`).
_TOKEN_COLUMNS = (START, END, OK, "ttft", "ttfat", "hidden_reasoning", "output_tokens", "reasoning_tokens",
                  "chunk_times", "chunk_tokens")


def _in_reach(lo: float, hi: float) -> pl.Expr:
    """The counted records overlapping ``[lo, hi]``: ended at or after ``lo``, started before ``hi``."""
    return _counted() & (pl.col(END) >= lo) & (pl.col(START) < hi)


def phase_tokens_in_windows(main: pl.DataFrame, windows: Sequence[Window]) -> list[tuple[float, float]]:
    """(reasoning, answer) output tokens of successful requests that arrived inside each window ``[t0, t1)`` of
    ``windows`` (epoch s; one window, or consecutive equal ones: the slices of a soak), in tokens, over ``main``
    (prepared records, :func:`harness.report.columns.prepare`; any superset of those overlapping the windows gives
    the same result): by chunk arrival for a record with chunk times (:func:`_chunk_pairs`), else pro rata over
    each phase's interval (:func:`_pro_rata_pairs`). Their sum is :func:`tokens_in_windows` (the one definition of
    the aggregate). Each record is paired only with the windows it can reach, so a soak's hundreds of slices cost
    one pass, not one per slice.

    Memory: records with chunk times are placed a row slice of ``main`` at a time (:func:`_chunk_batches`, zero-copy
    slices of about :data:`CHUNK_BATCH` chunks, each filtered to the records in reach), so neither the chunk lists
    of the records in reach nor their exploded chunks are ever copied out all at once."""
    if not windows:
        return []
    lo, hi = min(w[0] for w in windows), max(w[1] for w in windows)
    reduced = is_reduced(main)
    reach, chunked = _in_reach(lo, hi), has_chunk_times(reduced)
    plain = [c for c in _TOKEN_COLUMNS if c not in ("chunk_times", "chunk_tokens")]
    parts = [_pro_rata_pairs(main.lazy().filter(reach & ~chunked).select(plain).collect(), windows)]
    if reduced:  # the chunk lists were reduced while reading (a few bins a record): one pass
        sub = main.lazy().filter(reach & chunked).select(*plain, *CHUNK_BIN_COLUMNS).collect()
        if sub.height:
            parts.append(_bins_pairs(sub, windows))
    for batch in ([] if reduced else _chunk_batches(main)):  # each record's pairs are its own: batches bound memory
        sub = batch.lazy().filter(reach & chunked).select(_TOKEN_COLUMNS).collect()
        if sub.height:
            parts.append(_chunk_pairs(sub, windows))
    sums = pl.concat(parts).group_by(_W).agg(pl.col("_reasoning").sum(), pl.col("_answer").sum())
    got = {w: (float(r or 0.0), float(a or 0.0)) for w, r, a in sums.iter_rows()}
    return [got.get(i, (0.0, 0.0)) for i in range(len(windows))]


def tokens_in_windows(main: pl.DataFrame, windows: Sequence[Window]) -> list[float]:
    """Output tokens of successful requests that arrived inside each window ``[t0, t1)`` of ``windows`` (epoch s),
    in tokens: reasoning + answer of :func:`phase_tokens_in_windows` (same arguments)."""
    return [r + a for r, a in phase_tokens_in_windows(main, windows)]


def window_phase_tokens(main: pl.DataFrame, w0: float, w1: float) -> tuple[float, float, str]:
    """(reasoning, answer, basis) of :func:`window_tokens`: the window's output tokens by phase
    (:func:`phase_tokens_in_windows`; they sum to :func:`window_tokens`' total) and how they were placed."""
    v = main.lazy().filter(_in_reach(w0, w1)).select(has_chunk_times(is_reduced(main)).sum().alias("by_chunks"),
                                                     pl.len().alias("n")).collect().row(0, named=True)
    by_chunks = int(v["by_chunks"] or 0)
    by_rate = int(v["n"]) - by_chunks
    r, a = phase_tokens_in_windows(main, [(w0, w1)])[0] if v["n"] else (0.0, 0.0)
    basis = "mixed" if by_chunks and by_rate else "chunks" if by_chunks else "pro_rata" if by_rate else "none"
    return r, a, basis


def window_tokens(main: pl.DataFrame, w0: float, w1: float) -> tuple[float, str]:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (epoch s) over ``main`` (prepared
    records, :func:`harness.report.columns.prepare`; any superset of those overlapping the window gives the same
    result), in tokens (reasoning + answer of :func:`window_phase_tokens`); and how they were placed: ``chunks``
    (every contributing request had chunk times), ``pro_rata`` (none had), ``mixed``, or ``none`` (no successful
    request with output tokens overlaps the window)."""
    r, a, basis = window_phase_tokens(main, w0, w1)
    return r + a, basis
