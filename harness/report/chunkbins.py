"""Chunk lists reduced to per-bin sums with numpy over the flat chunk buffers: the fast form of
:func:`harness.report.tokens.reduce_chunks` (the second pass of the report's two-pass read).

The polars form explodes every chunk into a row, joins and groups them (~0.1 ms of CPU per record with ~310
chunks); this one takes each batch's chunk lists as flat arrays (one value per chunk, in record then chunk order)
and reduces them with vectorised numpy operations: a running sum per record to decode the schema-3 compact form
(integer µs deltas), a sorted search for each chunk's time bin, and segmented sums over the runs of equal
(record, bin). The float operations are those of the polars reader and reducer (the same additions,
multiplications and comparisons, IEEE double, in the same order per value), so the result is equal to
``reduce_chunks`` on the decoded lists, bit for bit (tested, ``tests/report/test_chunkbins.py``).

It declines (returns None, and the caller uses the polars form) what it does not handle exactly: a null inside a
chunk list, a schema-3 delta that is not a whole number of µs, or running sums beyond 2**53 µs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl

from harness.chunkpath import native_records
from harness.report.packed import is_packed, unpack_flat
from harness.result import CHUNK_ANCHORS, CHUNK_TIME_UNIT_S

__all__ = ["CHUNK_BINS_DTYPE", "reduce_chunks_flat"]

#: Dtype of ``chunk_bins`` (:data:`harness.report.tokens.CHUNK_BIN_COLUMNS`): per time bin ``[b0, b1)`` (epoch s)
#: that holds chunks of the record, its chunks ``n``, reasoning chunks ``n_r`` and usage tokens of its reasoning
#: ``t_r`` and answer ``t_a`` chunks.
CHUNK_BINS_DTYPE = pl.List(pl.Struct({"b0": pl.Float64, "b1": pl.Float64, "n": pl.Int64, "n_r": pl.Int64,
                                      "t_r": pl.Int64, "t_a": pl.Int64}))

_MAX_EXACT = float(2 ** 53)


#: The compiled decode of schema-3 chunk times (the numpy one's values in one pass), or None: numpy decodes.
_DECODE: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray | None] | None = \
    (native_records("decode_us_times") or (None,))[0]


def _lengths(s: pl.Series) -> np.ndarray:
    """List lengths of ``s`` (int64; -1 for a null list)."""
    return s.list.len().fill_null(-1).cast(pl.Int64).to_numpy()


def _times(s: pl.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """``(lengths, values)`` of the chunk times ``s``: :func:`_lengths`, and the values of its lists concatenated
    in row order (:func:`_flat`; None when a list holds a null); packed (``Binary``, :mod:`harness.report.packed`)
    or lists."""
    if is_packed(s):
        values, lengths = unpack_flat(s)
        return lengths, values
    lengths = _lengths(s)
    return lengths, _flat(s, int(np.maximum(lengths, 0).sum()))


def _flat(s: pl.Series, count: int) -> np.ndarray | None:
    """The values of the lists of ``s`` concatenated in row order (null and empty lists give none); None when one
    holds a null or they are not ``count`` values."""
    vals = s.list.explode(empty_as_null=False, keep_nulls=False)  # no copy (Series.explode copies: ~100 ms a part)
    if vals.null_count() or vals.len() != count:
        return None
    return vals.to_numpy()


def _running_us(deltas: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """Per-list running sums of ``deltas`` (float64 µs, lists of ``lengths`` back to back), as float64; None when
    a delta is not whole or a sum could exceed 2**53 (the sums of whole numbers below it are exact, so they equal the
    per-list float running sums the polars reader computes)."""
    if not deltas.size:
        return deltas.astype(np.float64)
    if float(max(abs(deltas.max()), abs(deltas.min()))) * deltas.size >= _MAX_EXACT:
        return None
    if not bool((np.floor(deltas) == deltas).all()):  # not whole µs
        return None
    # whole numbers below 2**53: every float sum below is exact (so equal to the per-list running sums)
    d = deltas.astype(np.float64)  # a copy, changed below
    firsts = np.cumsum(lengths) - lengths
    sums = np.add.reduceat(d, firsts)
    d[firsts[1:]] -= sums[:-1]  # each list's running sum starts again at its first delta
    return np.cumsum(d)


def _pins(us: np.ndarray, firsts: np.ndarray, lengths: np.ndarray, anchor_us: np.ndarray) -> np.ndarray:
    """Indices of the chunks whose running µs ``us`` equal their record's ``anchor_us`` (float, whole; -1e6 for
    none), each record's ``us`` non-decreasing: a binary search per record, not a comparison per chunk."""
    ends = firsts + lengths
    left = _first_at_or_after(us, firsts, ends, anchor_us)
    right = left.copy()
    last = max(us.size - 1, 0)
    going = np.flatnonzero(right < ends)
    while going.size:  # along the run of chunks in the anchor's µs (one chunk, or none, nearly always)
        same = us[np.minimum(right[going], last)] == anchor_us[going]
        going = going[same]
        right[going] += 1
        going = going[right[going] < ends[going]]
    k = right - left
    if not k.any():
        return np.zeros(0, dtype=np.int64)
    return np.repeat(left, k) + (np.arange(int(k.sum()), dtype=np.int64) - np.repeat(np.cumsum(k) - k, k))


def reduce_chunks_flat(batch: pl.DataFrame, edges: Sequence[float], decoded: bool) -> pl.DataFrame | None:
    """``batch``'s chunk lists reduced to per-bin sums, equal to :func:`harness.report.tokens.reduce_chunks` of
    the decoded batch; None when the batch holds what this form declines (module docstring).

    Args:
        batch: records with ``start_wall`` (epoch s; null read as 0), ``ttfat`` (s), ``chunk_times`` (List(Float64),
            or packed: :mod:`harness.report.packed`)
            and ``chunk_tokens`` (List(Int64)); ``decoded``: the lists are seconds from the request start and one
            count per chunk (the frame's form), else as written (schema 3: µs deltas and one count for all chunks;
            schema 1-2 as they are), with ``schema``, ``ttft`` and ``t_last_token`` too
            (:data:`harness.report.frame.RAW_CHUNK_COLUMNS`).
        edges: time bin edges (epoch s, finite).

    Returns:
        One row per row of ``batch``: ``chunk_bins`` (:data:`CHUNK_BINS_DTYPE`, null for a record without chunks),
        ``chunk_n``, ``chunk_n_r``, ``chunk_shown`` (Int64) and ``chunk_usage`` (Boolean).
    """
    e = np.array(sorted(set(float(x) for x in edges)), dtype=np.float64)
    n_rows = batch.height
    ct_s, tk_s = batch.get_column("chunk_times"), batch.get_column("chunk_tokens")
    n_ct, times = _times(ct_s)
    has = n_ct > 0
    n = np.where(has, n_ct, 0)
    if times is None:
        return None
    times = times.astype(np.float64, copy=False)

    n_tk = _lengths(tk_s)
    v3 = np.zeros(n_rows, dtype=bool) if decoded else (batch.get_column("schema").fill_null(1).to_numpy() == 3)
    one = v3 & (n_tk == 1) & (n_ct >= 2)  # schema 3: one count for every chunk
    tk_rows = n_tk > 0
    tk_vals = _flat(tk_s, int(n_tk[tk_rows].sum()))
    if tk_vals is None:
        return None
    tk_vals = tk_vals.astype(np.int64, copy=False)
    sums = np.zeros(n_rows, dtype=np.int64)
    if tk_vals.size:
        np.add.at(sums, np.repeat(np.flatnonzero(tk_rows), n_tk[tk_rows]), tk_vals)
    firsts_tk = np.zeros(n_rows, dtype=np.int64)
    firsts_tk[tk_rows] = tk_vals[np.cumsum(n_tk[tk_rows]) - n_tk[tk_rows]] if tk_vals.size else 0
    sums = np.where(one, firsts_tk * n_ct, sums)
    eff_len = np.where(one, n_ct, n_tk)
    usage = (n_tk >= 0) & (n_ct >= 0) & (eff_len == n_ct) & (sums > 0)

    if not decoded and v3.any():  # schema-3 rows: running µs sums, then pinned to the anchors
        has3 = v3 & has
        every = bool((has3 == has).all())  # the usual case: every record with chunks is schema 3
        at3 = None if every else np.repeat(has3, n)
        raw3 = times if at3 is None else times[at3]
        t = _decode_v3(batch, raw3, np.flatnonzero(has3), n[has3])
        if t is None:
            return None
        times = t if at3 is None else _put(times, at3, t)

    start_row = batch.get_column("start_wall").fill_null(0.0).cast(pl.Float64).to_numpy()
    ttfat_row = batch.get_column("ttfat").cast(pl.Float64).fill_null(np.nan).to_numpy()
    firsts = np.cumsum(n) - n
    one_tok = np.where(usage & one, firsts_tk, 0)  # the count of every chunk of a single-count record
    toks = None
    as_is = usage & ~one
    if as_is.any():  # per-chunk tokens of the records whose usage lists one count per chunk, else 0
        toks = np.zeros(times.size, dtype=np.int64)
        toks[np.repeat(as_is, n)] = tk_vals[np.repeat(as_is[tk_rows], n_tk[tk_rows])]
    later = times[1:] < times[:-1]
    if later.size:
        later[firsts[has][1:] - 1] = False  # a record's first chunk may be earlier than the last one's before
    if later.any():  # a record's times out of order (a hand-edited file): chunk by chunk
        per_row = np.repeat(np.arange(n_rows, dtype=np.int64), n)
        if toks is None:
            toks = np.zeros(times.size, dtype=np.int64)
        toks = toks + np.repeat(one_tok, n)
        g_row, g_k, g_n, g_nr, g_tr, g_ta = _by_chunk(times, toks, per_row, start_row, ttfat_row, e)
    else:
        g_row, g_k, g_n, g_nr, g_tr, g_ta = _by_cuts(times, toks, one_tok, n, firsts, start_row, ttfat_row, e)
    ext = np.concatenate(([-np.inf], e, [np.inf]))
    flat = pl.DataFrame({"_r": g_row, "b0": ext[g_k + 1], "b1": ext[g_k + 2], "n": g_n, "n_r": g_nr, "t_r": g_tr,
                         "t_a": g_ta})
    bins = flat.group_by("_r", maintain_order=True).agg(
        pl.struct("b0", "b1", "n", "n_r", "t_r", "t_a").alias("chunk_bins"), pl.col("n_r").sum().alias("chunk_n_r"))
    scal = pl.DataFrame({"_r": np.arange(n_rows, dtype=np.int64), "chunk_n": np.maximum(n_ct, 0),
                         "chunk_shown": np.where(usage, sums, 0), "chunk_usage": usage})
    out = scal.join(bins, on="_r", how="left", maintain_order="left")
    return out.select(pl.col("chunk_bins").cast(CHUNK_BINS_DTYPE), pl.col("chunk_n").cast(pl.Int64),
                      pl.col("chunk_n_r").fill_null(0).cast(pl.Int64), pl.col("chunk_shown").cast(pl.Int64),
                      pl.col("chunk_usage").cast(pl.Boolean))


def _put(times: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A copy of ``times`` with ``values`` at the mask ``at``."""
    times = times.copy()
    times[at] = values
    return times


def _decode_v3(batch: pl.DataFrame, raw3: np.ndarray, rows: np.ndarray, lengths3: np.ndarray) -> np.ndarray | None:
    """The schema-3 chunk times of ``batch``'s rows ``rows`` (``raw3``: their µs deltas, lists of ``lengths3``)
    decoded to seconds and pinned to their anchors (float64, one per chunk); None when a delta is not whole or a
    running sum might exceed 2**53 µs. Compiled (``harness._fastrecords.decode_us_times``, one pass) when built,
    else numpy: the same float operations, equal values (tested)."""
    anchor_rows = [batch.get_column(name).cast(pl.Float64).fill_null(-1.0).to_numpy() for name in CHUNK_ANCHORS]
    if _DECODE is not None and CHUNK_TIME_UNIT_S == 1e-6:
        return _DECODE(np.ascontiguousarray(raw3, dtype=np.float64), lengths3.astype(np.int64),
                       np.ascontiguousarray(np.stack([a[rows] for a in anchor_rows])))
    us = _running_us(raw3, lengths3)
    if us is None:
        return None
    t = us * CHUNK_TIME_UNIT_S
    firsts3 = np.cumsum(lengths3) - lengths3
    ordered = bool((raw3 >= 0).all())  # every running sum non-decreasing: the anchors found by search
    rows3 = None if ordered else np.repeat(rows, lengths3)
    for a_row in anchor_rows:  # t + pin * (a - t), pin 1 where the µs is the anchor's, else 0 (t itself)
        a_us = np.round(a_row * 1e6)
        if rows3 is None:
            hit = _pins(us, firsts3, lengths3, a_us[rows])
            a = a_row[rows][np.searchsorted(firsts3, hit, side="right") - 1]
        else:
            hit = np.flatnonzero(us == a_us[rows3])
            a = a_row[rows3[hit]]
        if hit.size:
            t[hit] = t[hit] + (a - t[hit])
    return t


_Groups = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _first_at_or_after(times: np.ndarray, lo: np.ndarray, hi: np.ndarray, thr: np.ndarray) -> np.ndarray:
    """For each query, the first index ``i`` in ``[lo, hi)`` with ``times[i] >= thr`` (``hi`` when none): a binary
    search of every query at once over the sorted run ``times[lo:hi]``."""
    lo, hi = lo.copy(), hi.copy()
    last = max(times.size - 1, 0)
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) >> 1
        go = open_ & (times[np.minimum(mid, last)] < thr)
        lo = np.where(go, mid + 1, lo)
        hi = np.where(open_ & ~go, mid, hi)


def _by_cuts(times: np.ndarray, toks: np.ndarray | None, one_tok: np.ndarray, n: np.ndarray, firsts: np.ndarray,
             start_row: np.ndarray, ttfat_row: np.ndarray, e: np.ndarray) -> _Groups:
    """(record, bin, chunks, reasoning chunks, reasoning tokens, answer tokens) of every non-empty bin, records whose
    chunk times are in order: each record's chunks in bin ``[e_j, e_j+1)`` are those from the first at or after
    ``e_j - start`` to the first at or after ``e_j+1 - start`` (the exact test of :func:`_by_chunk`, found by a
    binary search per record and edge in its reach instead of per chunk); its reasoning chunks the prefix before
    the first at or after ``ttfat``."""
    rows = np.flatnonzero(n > 0)
    o, nn = firsts[rows], n[rows]
    s = start_row[rows]
    size = len(e)
    if size:
        a_f = np.searchsorted(e, s + times[o], side="right").astype(np.int64) - 1
        a_l = np.searchsorted(e, s + times[o + nn - 1], side="right").astype(np.int64) - 1
        lo_j = np.clip(a_f - 1, 0, size - 1)  # one edge of margin each side: start + t rounds, the test does not
        hi_j = np.minimum(a_l + 1, size - 1)
        m = hi_j - lo_j + 1
    else:
        lo_j = np.zeros(rows.size, dtype=np.int64)
        m = np.zeros(rows.size, dtype=np.int64)
    q_start = np.cumsum(m) - m
    q_row = np.repeat(np.arange(rows.size, dtype=np.int64), m)
    q_j = lo_j[q_row] + (np.arange(q_row.size, dtype=np.int64) - q_start[q_row])
    cut = _first_at_or_after(times, o[q_row], (o + nn)[q_row], e[q_j] - s[q_row]) if q_row.size else \
        np.zeros(0, dtype=np.int64)
    ttfat = ttfat_row[rows]
    r_end = np.where(np.isnan(ttfat), o + nn,  # the reasoning chunks: before ttfat (all without it)
                     _first_at_or_after(times, o, o + nn, np.where(np.isnan(ttfat), 0.0, ttfat)))
    # bins of a record: lo_j - 1 + b for b in 0..m, bounded by [o, cuts..., o + nn]
    b_start = np.cumsum(m + 1) - (m + 1)
    b_row = np.repeat(np.arange(rows.size, dtype=np.int64), m + 1)
    b = np.arange(b_row.size, dtype=np.int64) - b_start[b_row]
    mb = m[b_row]
    qi = q_start[b_row] + b
    top = max(cut.size - 1, 0)
    lower = np.where(b == 0, o[b_row], cut[np.clip(qi - 1, 0, top)] if cut.size else 0)
    upper = np.where(b == mb, (o + nn)[b_row], cut[np.clip(qi, 0, top)] if cut.size else 0)
    keep = upper > lower
    b_row, b, lower, upper = b_row[keep], b[keep], lower[keep], upper[keep]
    mid = np.maximum(lower, np.minimum(upper, r_end[b_row]))  # [lower, mid): reasoning, [mid, upper): answer
    if toks is not None:
        acc = np.concatenate(([0], np.cumsum(toks)))
        t_r, t_a = acc[mid] - acc[lower], acc[upper] - acc[mid]
    else:
        t_r = t_a = np.zeros(b_row.size, dtype=np.int64)
    v = one_tok[rows][b_row]
    t_r, t_a = t_r + v * (mid - lower), t_a + v * (upper - mid)
    return rows[b_row], lo_j[b_row] - 1 + b, upper - lower, mid - lower, t_r, t_a


def _by_chunk(times: np.ndarray, toks: np.ndarray, row_of: np.ndarray, start_row: np.ndarray,
              ttfat_row: np.ndarray, e: np.ndarray) -> _Groups:
    """:func:`_by_cuts` for any order of chunk times: each chunk's bin found by a sorted search and the exact test
    (``e_j - start <= t < e_j+1 - start``, as :func:`harness.report.tokens.reduce_chunks`), then summed per run of
    equal (record, bin)."""
    start, ttfat = start_row[row_of], ttfat_row[row_of]
    is_r = np.isnan(ttfat) | (times < ttfat)
    size = len(e)
    if size:
        k = np.searchsorted(e, start + times, side="right").astype(np.int64) - 1
        for _ in range(2):  # the exact test decides, as in reduce_chunks: b - start <= t < b' - start
            lo = e[np.clip(k, 0, size - 1)]
            hi = e[np.clip(k + 1, 0, size - 1)]
            below = (k >= 0) & (times < lo - start)
            above = (k + 1 < size) & (times >= hi - start)
            k = np.where(below, k - 1, np.where(above, k + 1, k))
    else:
        k = np.full(times.size, -1, dtype=np.int64)
    key = row_of * (size + 1) + (k + 1)
    if key.size > 1 and bool(np.any(key[1:] < key[:-1])):
        order = np.argsort(key, kind="stable")
        key, is_r, toks = key[order], is_r[order], toks[order]
    if key.size:
        starts = np.concatenate(([0], np.flatnonzero(key[1:] != key[:-1]) + 1))
    else:
        starts = np.zeros(0, dtype=np.int64)
    g_key = key[starts]
    g_row, g_k = g_key // (size + 1), g_key % (size + 1) - 1
    g_n = np.diff(np.append(starts, key.size)).astype(np.int64)
    r_int = is_r.astype(np.int64)
    if starts.size:
        g_nr = np.add.reduceat(r_int, starts)
        g_tr = np.add.reduceat(toks * r_int, starts)
        g_ta = np.add.reduceat(toks * (1 - r_int), starts)
    else:
        g_nr = g_tr = g_ta = np.zeros(0, dtype=np.int64)
    return g_row, g_k, g_n, g_nr, g_tr, g_ta
