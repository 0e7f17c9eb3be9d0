"""The report's run and per-step figures as vectorised polars expressions over the record frame
(:mod:`harness.report.frame`): the one definition of each (``DEFINITIONS`` in :mod:`harness.report.build`),
computed column-wise so a soak of a million records needs no Python object per record. Goodput, soak slices and
the per-prompt table are in :mod:`harness.report.goodput`, :mod:`harness.report.soak` and
:mod:`harness.report.diagnosis`, over the same frame; shared expressions in :mod:`harness.report.exprs`, tokens in
a window in :mod:`harness.report.tokens`. Here:

* phases from ``phases.jsonl`` (a phase ends at the next ``phase_start``; the last at ``load_end``, else
  ``run_end``, else the latest record end), or inferred per step from the records when it has none;
* the steady window of each step (the first wave replaced: per-user first request ending after the step
  start, or the first C requests when records carry no user id), made not steady where a lost worker left the
  step short of users (:mod:`harness.report.lost`);
* one sample per step (:func:`harness.report.exprs.in_sample`): every request (ok or not) that ended inside the
  steady window ``(w0, w1)``, or every request of the step when it has none; every sample column is over it, the
  ``step_*`` counts, client lag and users seen over the step's own requests;
* aggregate output tok/s (tokens by chunk arrival when a record has ``chunk_times``, with its ``chunk_tokens``
  when they match; else each phase spread uniformly over its interval, the reasoning over ``[start + ttft,
  start + ttfat]`` (``[start, start + ttft]`` when it was hidden), the answer over ``[start + ttfat, end]``, and
  counted pro rata inside the window; ``tokens_by`` says which) and its split by phase, reasoning and answer
  tok/s (``output_tps_reasoning`` + ``output_tps_answer`` = ``output_tps``; :mod:`harness.report.tokens`),
  usable req/s, completion rate and Little's law, hours to N by batch means (``hours.batch_means`` over the
  usable end times, then the report's ``interval_info`` / ``hours_entry``), per-stream tok/s (a ratio of sums
  over streamed tokens: answer tokens with hidden reasoning), TTFT / TTFAT p50/p90/p99, inter-chunk gap p50/p99
  (merged log histograms), TPOT mean/p50, E2E p50, mean output tokens, usable share, why not usable
  (``usable_reasons``), % truncated, hidden-reasoning count and share, error counts by class, the split by
  finish reason, client read lag, low-confidence (with its fix), real-time and cost figures (the last three by
  the report's own helpers, which take plain numbers).

Units are the report's: seconds (``*_s``), tokens, tokens per second (``*_tps``), requests per second
(``request_rate``), percentages (``*_pct``, 0..100), shares (0..1); wall times are epoch seconds.

Values are those of the records as :meth:`harness.result.RequestResult.from_record` reads them: the frame
reader (:func:`harness.report.frame.read_frame`) reads a missing or null non-nullable field as its default (a
missing ``step`` is 0, ``start_wall`` 0.0, ``ok`` / ``usable`` / ``truncated`` ... False, ``output_tokens`` 0,
``token_source`` ``estimate``, ``phase`` ``step``), and a record's end is
:attr:`~harness.result.RequestResult.end_wall` (``start_wall + e2e``; without ``e2e``, the latest timing
present). Percentiles interpolate linearly between closest ranks, like :func:`harness.stats.percentile.percentile`.
Two records with identical fields are two requests (the test oracle, ``tests/report/oracle.py``, which compares
records by value in its no-user-id first wave, counts them once in ``first_wave_users``).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from harness.chunkpath import native_records
from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.histogram import LogHistogram
from harness.report.chunkbins import reduce_chunks_flat
from harness.report.cost import add_cost
from harness.report.diagnosis import low_confidence_fix
from harness.report.exprs import (
    END,
    OK,
    START,
    STEP,
    SUSPECT_FINISH_KEY,
    USABLE,
    WARMUP,
    count_by,
    counts,
    ends_in,
    errors_by_class,
    failures_by_class,
    finish_reason_key,
    flag,
    in_sample,
    mean_tokens,
    not_usable_reason,
    pct,
    pctl,
    per_stream_parts,
    share,
)
from harness.report.figures import (
    LITTLE_TOLERANCE,
    SPLIT_FINISH_REASONS,
    USABLE_CRITERION,
    low_confidence,
    rate_estimate,
    real_time,
    row_header,
)
from harness.report.figures import hours_entry as _hours_entry
from harness.report.figures import interval_info as _hours_interval_info
from harness.report.frame import (
    CHUNK_COLUMNS,
    DEFAULT_CHUNK_BYTES,
    ROW,
    decode_chunk_lists,
    iter_chunk_batches,
    read_frame,
    record_files,
    torn_last_line,
)
from harness.report.heap import trim_heap
from harness.report.interval import cycle_frame, renewal_reward
from harness.report.load import (
    INFERRED_PHASES_NOTE,
    Phase,
    check_run_dir,
    mark_repeated,
    phases_from_events,
    read_meta,
)
from harness.report.lost import apply_losses, loss_note, losses_and_stalls, worker_losses
from harness.report.rundata import PhaseEvent, PhaseStart, RunMeta, read_events
from harness.report.selfcert import selfcert_figures
from harness.report.steady import Window, close_window
from harness.report.tokens import CHUNK_BINS_DTYPE, reduce_chunks, window_phase_tokens

__all__ = [
    "REPORT_COLUMNS",
    "FrameRun",
    "gap_histogram",
    "gap_histograms",
    "load_frame_run",
    "phases_from_events",
    "phases_from_frame",
    "prepare",
    "run_totals",
    "steady_windows",
    "step_gap_histograms",
    "step_rows",
    "step_windows",
    "warmup_summary",
    "without_gaps",
]

#: The record fields the report's figures read (pass to :func:`harness.report.frame.read_frame`).
REPORT_COLUMNS: tuple[str, ...] = (
    "prompt_id", "prompt_class", "max_tokens", "user", "phase", "step", "concurrency", "start_wall", "read_lag_max",
    "t_headers", "ttft", "ttfat", "t_last_token", "e2e", "gap_hist", "output_tokens", "token_source",
    "reasoning_tokens", "answer_tokens", "ok", "error_class", "finish_reason", "truncated", "truncated_in_reasoning",
    "suspect_truncation", "usable", "usable_reason", "hidden_reasoning", "tpot", "chunk_times", "chunk_tokens",
    "setting", "turn", "prompt_tokens", "cached_tokens", "scheduled_wall", "chunks",
    "error_detail", "http_status", "retry_after_s",
)

def prepare(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with the derived columns the figures use (start, end, step, ok, usable, warm-up flag).

    Args:
        frame: a record frame holding at least :data:`REPORT_COLUMNS`.
    """
    start = pl.col("start_wall").fill_null(0.0)
    latest = pl.max_horizontal("t_last_token", "ttfat", "ttft", "t_headers")
    step = pl.col("step").fill_null(0)
    return frame.with_columns(
        start.alias(START),
        (start + pl.coalesce(pl.col("e2e"), latest, pl.lit(0.0))).alias(END),
        step.alias(STEP),
        flag("ok").alias(OK),
        flag("usable").alias(USABLE),
        ((pl.col("phase") == "warmup").fill_null(False) | (step < 0)).alias(WARMUP),
    )


# ---------------------------------------------------------------------------------------------- phases


def phases_from_frame(frame: pl.DataFrame) -> list[Phase]:
    """Phases inferred from the records alone: [first request sent, last request ended] per step.

    Phase name and concurrency come from the step's first record in file order, the setting from its first record
    that has one; consecutive steps are cut so
    they do not overlap. ``frame`` must be :func:`prepare`-d.
    """
    if frame.height == 0:
        return []
    agg = (
        frame.sort(ROW)
        .group_by(STEP, maintain_order=True)
        .agg(pl.col(START).min().alias("s"), pl.col(END).max().alias("e"),
             pl.col("phase").first().alias("p"), pl.col("concurrency").first().alias("c"),
             pl.col("setting").drop_nulls().first().alias("z"))
        .sort(STEP)
    )
    out: list[Phase] = []
    for step, s, e, p, c, z in agg.iter_rows():
        name = str(p or ("warmup" if step < 0 else "single" if step == 0 else "step"))
        out.append(Phase(name, int(step), int(c or 1), float(s), float(e), None, "records", z))
    for a, b in pairwise(out):
        a.end = max(a.start, min(a.end, b.start))
    mark_repeated(out)
    return out


@dataclass
class FrameRun:
    """A run directory's records as a prepared frame, with its phases.

    Attributes:
        path: the run directory.
        frame: every record (warm-up included), :data:`REPORT_COLUMNS` plus the derived columns.
        phases: the phases in order (warm-up included).
        has_run_end: ``phases.jsonl`` holds a ``run_end`` event.
        phases_inferred: ``phases.jsonl`` had no ``phase_start``: boundaries come from the records.
        meta: ``run.json`` (empty when missing or unreadable).
        problems: human-readable issues met while loading (the report shows them as notes).
        events: the ``phases.jsonl`` events as read (rate steps' ``phase_start`` keys, the ``search`` event).
        gaps: the merged gap histogram of each step's latency sample (:func:`step_gap_histograms`), keyed by
            (step, steady, w0, w1); set by the two-pass read, which then drops the ``gap_hist`` column (most of the
            frame's memory). Empty otherwise: the step rows merge the frame's ``gap_hist`` themselves.
    """

    path: Path
    frame: pl.DataFrame
    phases: list[Phase]
    has_run_end: bool
    phases_inferred: bool
    meta: RunMeta = field(default_factory=RunMeta)
    problems: list[str] = field(default_factory=list)
    events: list[PhaseEvent] = field(default_factory=list)
    gaps: dict[tuple[int, bool, float, float], LogHistogram] = field(default_factory=dict)

    @property
    def main(self) -> pl.DataFrame:
        """The non-warm-up records (every figure but the warm-up block is over them), prepared, in file order.

        Zero-copy when the warm-up records are the first rows of the frame (as a run writes them: the warm-up
        ends before the first phase starts): a slice of the frame. Otherwise a filtered copy.
        """
        mask = self.frame.get_column(WARMUP)
        k = int(mask.sum())
        if k == 0:
            return self.frame
        if bool(mask.head(k).all()):
            return self.frame.slice(k)
        return self.frame.filter(~pl.col(WARMUP))

    @property
    def last_end(self) -> float | None:
        """The latest record end (epoch s), None without records."""
        v = self.frame.get_column(END).max() if self.frame.height else None
        return float(v) if v is not None else None  # type: ignore[arg-type]


def load_frame_run(run_dir: str | os.PathLike[str], chunk_bytes: int | None = None,
                   chunk_edges: Callable[[FrameRun], Sequence[float]] | None = None) -> FrameRun:
    """Read a run directory: ``run.json``, its records (only :data:`REPORT_COLUMNS`) and phases.

    With ``chunk_edges``, a two-pass read whose memory does not grow with the chunk times kept: pass 1 reads every
    column but ``chunk_times`` / ``chunk_tokens`` (and the phases); ``chunk_edges(run)`` then gives the time bin
    edges (epoch s) of every window the caller will ask tokens of; the steps' gap histograms are merged
    (:func:`step_gap_histograms`, kept in ``run.gaps``) and the ``gap_hist`` column dropped; pass 2 streams the
    chunk lists (:func:`harness.report.frame.iter_chunk_batches`) and reduces each batch to its records' per-bin sums
    (:func:`harness.report.tokens.reduce_chunks`), so the frame holds :data:`harness.report.tokens.CHUNK_BIN_COLUMNS`
    instead of the lists. The tokens placed in a window of whole bins are those placed from the lists; a window
    cutting a bin raises :class:`harness.report.tokens.CoarseChunkBins` (read again without ``chunk_edges``).

    Raises:
        NoRecordsError: the directory or its records.jsonl does not exist (the message names the path).
        ValueError: a records line before a file's last is not valid JSON, or has a field of the wrong type, or
            a record's schema version is not readable.
        OSError: a file cannot be read.
    """
    root = Path(run_dir)
    check_run_dir(root)
    problems: list[str] = []
    meta = read_meta(root, problems)
    events = read_events(root, problems)  # typed (harness.report.rundata)
    losses = worker_losses(events)
    cut = meta.cut_off
    if cut is not None:  # the lost workers' requests have their own note
        cut -= sum(x.in_flight or 0 for x in losses)
    if cut is not None and cut > 0:
        fix = ("the run was stopped by SIGTERM, whose drain is a fixed 3 s: stop it with Ctrl-C (SIGINT) to let "
               "them finish" if meta.stop_cause == "sigterm" else "raise steps.drain_timeout or --stop-timeout")
        problems.append(f"CUT OFF: {cut} request(s) were still in flight when the stop timeout ran out; they were "
                        f"ended unfinished and are not in the records ({fix}).")
    columns = REPORT_COLUMNS if chunk_edges is None else tuple(c for c in REPORT_COLUMNS if c not in _CHUNK_LISTS)
    frame = prepare(read_frame(root, columns, chunk_bytes or DEFAULT_CHUNK_BYTES, parts=chunk_edges is not None))
    trim_heap()  # what the parser threads freed goes back to the system before the figures grow the process
    problems.extend(f"{f.name} ends in an incomplete line (the run was killed while writing it): that record "
                    "was skipped." for f in record_files(root) if torn_last_line(f))
    if frame.height == 0:
        problems.append("records.jsonl holds no records: every figure is empty (the run stopped before any request "
                        "ended, or the file was emptied).")
    run = FrameRun(root, frame, [], False, False, meta, problems, events)
    if any(isinstance(e, PhaseStart) for e in events):
        run.phases, run.has_run_end = phases_from_events(events, run.last_end)
    else:
        run.phases, run.phases_inferred = phases_from_frame(frame), True
        if frame.height:
            problems.append(INFERRED_PHASES_NOTE)
    problems.extend(loss_note(x, run.phases) for x in losses)
    del frame  # run.frame is the frame: its columns dropped below are freed, not held here
    if chunk_edges is not None:
        edges = list(chunk_edges(run))
        # the only reader of gap_hist is the step rows' merge: done now, the column (~0.4 KB a record) dropped
        run.gaps = step_gap_histograms(run)
        run.frame = run.frame.drop("gap_hist", strict=False)
        try:
            run.frame = _with_reduced_chunks(run, edges, chunk_bytes or DEFAULT_CHUNK_BYTES)
        except _RecordsChanged:  # a run still going appended records between the passes: one pass, consistent
            return load_frame_run(root, chunk_bytes)
        series, run.frame = run.frame.get_columns(), pl.DataFrame()
        run.frame = _compacted(series)
    return run


def _compacted(columns: list[pl.Series]) -> pl.DataFrame:
    """The frame of ``columns`` (emptied: the caller holds no other reference), each column copied into one buffer
    of its own, one at a time, the original freed before the next is copied (at most one column's size more
    memory), then the C heap trimmed (:func:`harness.report.heap.trim_heap`).

    Measured, 1M records with chunk times: a frame parsed from ``records.jsonl`` holds the compiled scanner's
    buffers (one per piece and column, handed over through the Arrow C interface); computing the figures over it
    grew the process by ~360 MB (peak 1,556 MB), over the same frame read from Parquet parts by ~90 MB. Copied, the
    figures add what they add over the parts (peak ~1,200 MB); the copy costs ~0.3 s.
    """
    out: list[pl.Series] = []
    while columns:  # not with_columns: one column chunked unlike the others makes polars copy the whole frame
        out.append(columns.pop(0).rechunk())
        trim_heap()  # the original's buffers, when the scanner allocated them (C heap), go back at once
    return pl.DataFrame(out)


class _RecordsChanged(ValueError):
    """Pass 2 of a two-pass read read another number of records than pass 1 (a run still going appends)."""


#: What sets a fixed-mode run's length (its rows' advice names it instead of ``steps.duration``).
FIXED_RUN_TIME = "the run time (-t, or the web form's Run time)"

#: Batches of chunk lists reduced at once in pass 2 of a two-pass read (threads).
_REDUCERS = 2

#: The record fields a two-pass read (:func:`load_frame_run` with ``chunk_edges``) reduces instead of keeping.
_CHUNK_LISTS = ("chunk_times", "chunk_tokens")


def _with_reduced_chunks(run: FrameRun, edges: list[float], chunk_bytes: int) -> pl.DataFrame:
    """``run.frame`` with the reduced chunk columns of pass 2 (:func:`load_frame_run`) added.

    Raises:
        _RecordsChanged: pass 2 read another number of records than pass 1 (the records file changed in between;
            :func:`load_frame_run` then reads the run again in one pass).
    """
    parts: list[pl.DataFrame] = []
    with ThreadPoolExecutor(max_workers=_REDUCERS) as pool:  # numpy and polars release the GIL: both cores
        pending: deque[Future[pl.DataFrame]] = deque()
        for b, decoded in iter_chunk_batches(run.path, chunk_bytes):
            pending.append(pool.submit(_reduce, b, edges, decoded))
            if len(pending) > _REDUCERS:  # at most _REDUCERS + 1 batches of chunk lists held
                parts.append(pending.popleft().result())
        parts.extend(f.result() for f in pending)
    reduced = pl.concat(parts, rechunk=False) if parts else pl.DataFrame(
        schema={"chunk_bins": CHUNK_BINS_DTYPE, "chunk_n": pl.Int64(), "chunk_n_r": pl.Int64(),
                "chunk_shown": pl.Int64(), "chunk_usage": pl.Boolean()})
    if reduced.height != run.frame.height:
        raise _RecordsChanged(f"{run.path}: the records changed while they were read ({run.frame.height} records, then "
                         f"{reduced.height} with their chunk times)")
    return run.frame.hstack(reduced)


def _reduce(batch: pl.DataFrame, edges: list[float], decoded: bool) -> pl.DataFrame:
    """One batch of pass 2 reduced: by numpy over the flat chunk buffers (:mod:`harness.report.chunkbins`), or,
    for what that form declines, by :func:`harness.report.tokens.reduce_chunks` over the decoded lists (equal)."""
    fast = reduce_chunks_flat(batch, edges, decoded)
    if fast is not None:
        return fast
    return reduce_chunks((batch if decoded else decode_chunk_lists(batch)).select(CHUNK_COLUMNS), edges)


# ---------------------------------------------------------------------------------------------- windows


def _steady_window(frame: pl.DataFrame, phase: Phase) -> Window:
    """The steady window of ``phase`` over every record (warm-up included; :mod:`harness.report.steady`): per-user
    first request ending after the step start (users of the step or with a request in flight at its start), or,
    when a relevant record has no user id, the requests in flight at the start plus the first C − in-flight
    requests of the step; closed by :func:`harness.report.steady.close_window`."""
    s = phase.start
    is_step = pl.col(STEP) == phase.step
    inflight = (pl.col(START) < s) & (pl.col(END) > s)
    has_user = pl.col("user").is_not_null() & (pl.col("user") != "")
    head = frame.select(
        is_step.sum().alias("n_step"),
        inflight.sum().alias("n_inflight"),
        (is_step | inflight).sum().alias("n_rel"),
        ((is_step | inflight) & has_user).sum().alias("n_rel_user"),
    ).row(0, named=True)
    n_step = int(head["n_step"])
    e2e = frame.filter(is_step).select((pl.col(END) - pl.col(START)).mean()).item() if n_step else None
    if head["n_rel"] == head["n_rel_user"]:
        method = "users"
        users = frame.filter(is_step | inflight).get_column("user").unique()
        firsts = (
            frame.filter(pl.col("user").is_in(users.implode()) & ((pl.col(END) > s) | is_step))
            .group_by("user")
            .agg(pl.col(END).min())
        )
        top = firsts.get_column(END).max()
        ws = float(top) if top is not None else s  # type: ignore[arg-type]
        n_users = users.len()
    else:
        method = "first_c_requests"
        need = max(0, phase.concurrency - int(head["n_inflight"]))
        first = frame.filter(is_step).sort([START, ROW]).head(need).select(ROW, END)
        wave = pl.concat([frame.filter(inflight).select(ROW, END), first]).unique(ROW)
        top = wave.get_column(END).max()
        ws = float(top) if top is not None else s  # type: ignore[arg-type]
        n_users = wave.height
    return close_window(phase, ws, bool(n_step), n_users, method, float(e2e) if e2e is not None else None)


def steady_windows(frame: pl.DataFrame, phases: Sequence[Phase]) -> list[Window]:
    """The steady window of each phase (:class:`harness.report.steady.Window`), over every record.

    ``frame`` must be :func:`prepare`-d and hold the warm-up records too (they count in the first wave).
    """
    narrow = frame.select(STEP, START, END, ROW, "user")  # zero-copy; the filters then copy only these
    return [_steady_window(narrow, p) for p in phases]


# ---------------------------------------------------------------------------------------------- figures
#
# One small function per rule of a step row; the row-level rules that take plain numbers (row_header,
# interval_info, hours_entry, low_confidence, real_time) are in harness/report/figures.py.


def without_gaps(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without its ``gap_hist`` column (zero-copy): most of a record frame's memory (its bucket text),
    which only :func:`gap_histogram` reads; filter this, not the frame, when the gaps are not needed."""
    return frame.drop("gap_hist", strict=False)


#: The compiled merge of the gap histograms' bucket texts, or None: polars merges them (:func:`gap_histogram`).
_MERGE: Callable[[pl.Series, np.ndarray, int], np.ndarray | None] | None = \
    (native_records("merge_buckets") or (None,))[0]


def _gap_stats(sample: pl.DataFrame, keep: list[pl.Expr], h: LogHistogram) -> None:
    """Set ``h``'s n, total, min and max from the ``gap_hist`` of the rows of ``sample`` that ``keep`` selects."""
    g = pl.col("gap_hist")
    stats = sample.lazy().filter(*keep).select(
        g.struct.field("n").fill_null(0).sum().alias("n"),
        g.struct.field("sum").fill_null(0.0).sum().alias("sum"),
        g.struct.field("min").min().alias("min"),
        g.struct.field("max").max().alias("max"),
    ).collect().row(0, named=True)
    h.n = int(stats["n"])
    h.total = float(stats["sum"])
    h.min = float(stats["min"]) if stats["min"] is not None else None
    h.max = float(stats["max"]) if stats["max"] is not None else None


def gap_histograms(sample: pl.DataFrame, wheres: Sequence[pl.Expr]) -> list[LogHistogram]:
    """:func:`gap_histogram` of ``sample`` for each of ``wheres`` (boolean expressions over its columns; a null
    selects nothing, as in a filter), in that order: equal histograms (the same n, sum, min and max, and the same
    count in every bucket; a bucket whose counts sum to 0 is left out).

    When the selections are disjoint (each row in at most one: the steps' samples are) and the compiled merge is
    built (``harness._fastrecords.merge_buckets``), every row's bucket text is read once, in C (two halves in two
    threads), and added into its selection's counts: 0.2 s for 1M demo records instead of 0.9 (1.4 CPU-s),
    docs/development/benchmarks.md. Otherwise,
    or when a text is not the plain ``{"k": count, ...}`` form, each is merged by :func:`gap_histogram`.

    Raises:
        ValueError: as :func:`gap_histogram`.
    """
    if _MERGE is None or not wheres or sample.height == 0 or "gap_hist" not in sample.columns:
        return [gap_histogram(sample, where=w) for w in wheres]
    hit = [w.fill_null(False) for w in wheres]
    most = sample.select(pl.sum_horizontal([x.cast(pl.Int32) for x in hit]).max()).item()
    if most is not None and most > 1:  # a row in two selections: one merge each
        return [gap_histogram(sample, where=w) for w in wheres]
    key: Any = pl.when(hit[0]).then(pl.lit(0, pl.Int64))
    for i, x in enumerate(hit[1:], start=1):
        key = key.when(x).then(pl.lit(i, pl.Int64))
    groups = sample.select(pl.repeat(0, pl.len(), dtype=pl.Int64).add(key.otherwise(pl.lit(-1, pl.Int64)))
                           .alias("g")).to_series().to_numpy()  # a literal selection (pl.lit(True)): every row
    texts = sample.get_column("gap_hist").struct.field("buckets")
    groups = np.ascontiguousarray(groups, np.int64)
    half = texts.len() // 2  # two halves merged at once (the merge runs without the GIL): both cores
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(_MERGE, texts.slice(a, b - a), groups[a:b], len(wheres))
                for a, b in ((0, half), (half, texts.len()))]
        first, second = (f.result() for f in done)
    if first is None or second is None:  # a text the compiled merge does not read: polars reads it (or says why)
        return [gap_histogram(sample, where=w) for w in wheres]
    counts = first + second
    out: list[LogHistogram] = []
    for i, where in enumerate(wheres):
        h = LogHistogram()
        row = counts[i]
        nz = np.flatnonzero(row)
        h.counts = dict(zip(nz.tolist(), row[nz].tolist(), strict=True))
        _gap_stats(sample, [where], h)
        out.append(h)
    return out


def gap_histogram(sample: pl.DataFrame, batch_rows: int = 25_000, where: pl.Expr | None = None) -> LogHistogram:
    """The merge of the sample's ``gap_hist`` histograms (seconds), as ``LogHistogram.merge`` would build it.

    ``where``: when given, only the rows of ``sample`` it selects (a boolean expression over its columns), filtered
    batch by batch, so a step's sample is never copied out of the whole frame with its ``gap_hist`` text.

    Each record's ``buckets`` JSON text (``{"bucket": count, ...}``) is split into its ``"bucket": count``
    pieces; equal pieces are counted together (a run has a few thousand distinct ones for millions of
    records), and only the distinct pieces are read as numbers. Done in batches of ``batch_rows`` records
    (25k records of ~35 buckets: ~30 MB of pieces at a time; 200k took 130 MB and more CPU).

    Raises:
        ValueError: a ``buckets`` piece is not ``"integer": integer``.
    """
    h = LogHistogram()
    if sample.height == 0 or "gap_hist" not in sample.columns:
        return h
    g = pl.col("gap_hist")
    keep = [where] if where is not None else []
    piece = g.struct.field("buckets").str.split(",").explode().alias("piece")
    parts = [
        sample.slice(off, batch_rows).lazy().filter(*keep).select(piece).group_by("piece").len()
        for off in range(0, sample.height, batch_rows)
    ]
    pieces = pl.concat(pl.collect_all(parts)).group_by("piece").agg(pl.col("len").sum())
    nums = pieces.select(pl.col("piece").str.extract_all(r"\d+").alias("kv"), "len").drop_nulls("kv")
    kv = nums.filter(pl.col("kv").list.len() > 0)
    if kv.height and not kv.get_column("kv").list.len().eq(2).all():
        bad = kv.filter(pl.col("kv").list.len() != 2).get_column("kv").to_list()[:3]
        raise ValueError(f"gap_hist buckets must map integer bucket indices to integer counts, got pieces {bad}")
    merged = kv.select(pl.col("kv").list.get(0).cast(pl.Int64).alias("k"),
                       (pl.col("kv").list.get(1).cast(pl.Int64) * pl.col("len")).alias("c")
                       ).group_by("k").agg(pl.col("c").sum())
    h.counts = dict(zip(merged.get_column("k").to_list(), merged.get_column("c").to_list(), strict=True))
    _gap_stats(sample, keep, h)
    return h


def _latency(sample: pl.DataFrame, gaps: LogHistogram | None = None) -> dict[str, Any]:
    """Latency and per-request figures over ``sample`` (successful requests): TTFT / TTFAT p50/p90/p95/p99, inter-chunk
    gap p50/p95/p99 (merged log histograms: ``gaps``, the sample's :func:`gap_histogram`, else computed from
    ``sample``), TPOT mean/p50, E2E p50, per-stream tok/s, mean output tokens (of all and of the usable ones), mean
    reasoning and answer tokens, usable share. Seconds and tokens."""
    n = sample.height
    v = sample.select(
        pctl("ttft", 50).alias("ttft_p50_s"), pctl("ttft", 90).alias("ttft_p90_s"),
        pctl("ttft", 95).alias("ttft_p95_s"), pctl("ttft", 99).alias("ttft_p99_s"),
        pl.col("ttfat").is_not_null().sum().alias("ttfat_n"),
        pctl("ttfat", 50).alias("ttfat_p50_s"), pctl("ttfat", 90).alias("ttfat_p90_s"),
        pctl("ttfat", 95).alias("ttfat_p95_s"), pctl("ttfat", 99).alias("ttfat_p99_s"),
        pl.col("tpot").drop_nulls().mean().alias("tpot_mean_s"), pctl("tpot", 50).alias("tpot_p50_s"),
        pctl("e2e", 50).alias("e2e_p50_s"),
        *per_stream_parts(),
        mean_tokens("output_tokens").alias("mean_output_tokens"),
        mean_tokens("output_tokens", pl.col(USABLE)).alias("mean_output_tokens_usable"),
        mean_tokens("reasoning_tokens").alias("mean_reasoning_tokens"),
        mean_tokens("answer_tokens").alias("mean_answer_tokens"),
        pl.col(USABLE).sum().alias("_usable"),
    ).row(0, named=True) if n else {}
    gaps = gap_histogram(sample) if gaps is None else gaps
    sec = float(v.get("_sec") or 0.0)
    return {
        "latency_n": n,
        "ttft_p50_s": v.get("ttft_p50_s"),
        "ttft_p90_s": v.get("ttft_p90_s"),
        "ttft_p95_s": v.get("ttft_p95_s"),
        "ttft_p99_s": v.get("ttft_p99_s"),
        "ttfat_n": int(v.get("ttfat_n") or 0),
        "ttfat_p50_s": v.get("ttfat_p50_s"),
        "ttfat_p90_s": v.get("ttfat_p90_s"),
        "ttfat_p95_s": v.get("ttfat_p95_s"),
        "ttfat_p99_s": v.get("ttfat_p99_s"),
        "gap_n": gaps.n,
        "gap_p50_s": gaps.quantile(0.50),
        "gap_p95_s": gaps.quantile(0.95),
        "gap_p99_s": gaps.quantile(0.99),
        "tpot_mean_s": v.get("tpot_mean_s"),
        "tpot_p50_s": v.get("tpot_p50_s"),
        "e2e_p50_s": v.get("e2e_p50_s"),
        "per_stream_tps": float(v["_tok"]) / sec if sec > 0 else None,
        "mean_output_tokens": v.get("mean_output_tokens"),
        "mean_output_tokens_usable": v.get("mean_output_tokens_usable"),
        "mean_reasoning_tokens": v.get("mean_reasoning_tokens"),
        "mean_answer_tokens": v.get("mean_answer_tokens"),
        "usable_share": int(v["_usable"]) / n if n else None,
    }


def _by_finish_reason(sample: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """``sample`` (successful requests) split by finish reason: ``stop`` and ``length`` first (figures
    None when no request ended so), then ``suspect_truncation`` when any (:data:`SUSPECT_FINISH_KEY`: output hit
    max_tokens without finish_reason ``length``; not in the ``stop`` group), then every other reason in the order it
    first occurs. Seconds and tokens."""
    groups = sample.lazy().group_by(finish_reason_key().alias("_reason"), maintain_order=True).agg(
        pl.len().alias("requests"),
        pctl("ttft", 50).alias("ttft_p50_s"),
        pctl("ttfat", 50).alias("ttfat_p50_s"),
        pctl("e2e", 50).alias("e2e_p50_s"),
        mean_tokens("output_tokens").alias("mean_output_tokens"),
        mean_tokens("reasoning_tokens").alias("mean_reasoning_tokens"),
        mean_tokens("answer_tokens").alias("mean_answer_tokens"),
    ).collect()
    got = {g.pop("_reason"): g for g in groups.iter_rows(named=True)}
    empty = {"requests": 0, "ttft_p50_s": None, "ttfat_p50_s": None, "e2e_p50_s": None, "mean_output_tokens": None,
             "mean_reasoning_tokens": None, "mean_answer_tokens": None}
    out: dict[str, dict[str, Any]] = {}
    suspect = [SUSPECT_FINISH_KEY] if SUSPECT_FINISH_KEY in got else []
    for reason in dict.fromkeys([*SPLIT_FINISH_REASONS, *suspect, *got]):
        g = got.get(reason)
        out[reason] = dict(empty) if g is None else {**g, "requests": int(g["requests"])}
    return out


def _usable_reasons(step_recs: pl.DataFrame) -> dict[str, int]:
    """``{reason: count}`` of the records that are not usable (:func:`harness.report.exprs.not_usable_reason`),
    sorted by reason."""
    return count_by(step_recs, not_usable_reason())


def _client_lag(step_recs: pl.DataFrame) -> dict[str, Any]:
    """Client read lag of a step's records (failed ones included; ``read_lag_max``, seconds): records that carry
    it, p50 / p99 / max, % above :data:`harness.clientlag.CLIENT_LAG_LIMIT_S` and ``client_starved`` (that % above
    :data:`harness.clientlag.CLIENT_STARVED_PCT`); all None without stamped records (not measured is not
    healthy)."""
    lag = pl.col("read_lag_max").drop_nulls()
    v = step_recs.select(
        lag.len().alias("n"), (lag > CLIENT_LAG_LIMIT_S).sum().alias("late"),
        pctl(lag, 50).alias("p50"), pctl(lag, 99).alias("p99"), lag.max().alias("max"),
    ).row(0, named=True)
    n = int(v["n"])
    pct = 100.0 * int(v["late"]) / n if n else None
    return {
        "client_lag_requests": n,
        "client_read_lag_p50_s": v["p50"] if n else None,
        "client_read_lag_p99_s": v["p99"] if n else None,
        "client_read_lag_max_s": v["max"] if n else None,
        "client_lagged_pct": pct,
        "client_starved": None if pct is None else pct > CLIENT_STARVED_PCT,
    }


def _sample_counts(sample: pl.DataFrame) -> dict[str, int]:
    """The sample's counts: ok, and truncated / in reasoning / estimated tokens / hidden reasoning / usable (of the
    successful ones), suspect truncations (of all)."""
    ok = pl.col(OK)
    return counts(
        sample,
        ok=ok,
        truncated=ok & flag("truncated"),
        trunc_reason=ok & flag("truncated_in_reasoning"),
        usable=ok & pl.col(USABLE),
        estimated=ok & (pl.col("token_source") == "estimate").fill_null(False),
        hidden=ok & flag("hidden_reasoning"),
        suspect=flag("suspect_truncation"),
    )


def _users_seen(step_recs: pl.DataFrame) -> int:
    """Distinct non-empty user ids of the step's records."""
    user = pl.col("user")
    return int(step_recs.select(user.filter(user.is_not_null() & (user != "")).n_unique()).item())


def _step_sample(main: pl.DataFrame, phase: Phase, window: Window) -> tuple[float, float, pl.DataFrame]:
    """(w0, w1, sample): the steady window and every request (any step, ok or not)
    that ended inside ``(w0, w1)``, or (flagged not steady) the whole step and its requests. Record order."""
    w0, w1 = (window.start, window.end) if window.steady else (phase.start, phase.end)
    return w0, w1, main.filter(in_sample(phase.step, window.steady, w0, w1))


#: The columns of a step's records that :func:`_step_row` reads from its sample and step records (the rows it
#: filters out of the frame): every other column (``gap_hist``, the reduced chunk bins, identity and timing columns
#: the row does not read) is left out of those copies. At 1M records a step's filters copied ~250 MB of its rows of
#: every column, and the allocator kept them: +125 MB of peak RSS per step. A figure reading a column not listed
#: here fails at once (polars: column not found), never silently; ``failures_by_class`` reads the four error
#: columns when present, so they are listed (tests/report/test_step_row_columns.py checks the row is unchanged).
_ROW_COLUMNS: tuple[str, ...] = (
    START, END, STEP, OK, USABLE, "user", "ttft", "ttfat", "e2e", "tpot", "read_lag_max", "output_tokens",
    "token_source", "reasoning_tokens", "answer_tokens", "finish_reason", "truncated", "truncated_in_reasoning",
    "suspect_truncation", "hidden_reasoning", "usable_reason", "error_class", "error_detail", "http_status",
    "retry_after_s",
)


def _step_row(main: pl.DataFrame, phase: Phase, window: Window, hours_n: Sequence[int],
              time_scale: float, usd_per_hour: float | None, open_loop: Mapping[int, float | None],
              cycles: tuple[pl.DataFrame, pl.DataFrame],
              known_gaps: Mapping[tuple[int, bool, float, float], LogHistogram] | None = None,
              fixed_run: bool = False) -> dict[str, Any]:
    """The row of one step, with ``cost.add_cost``; ``main`` holds every non-warm-up record, prepared;
    ``open_loop`` maps a rate step to its shortfall; ``cycles`` are the run's request cycles rewarded by usable
    and by ok (:func:`harness.report.interval.cycle_frame`); ``known_gaps``: :attr:`FrameRun.gaps` (the step's
    gap histogram when merged at load; else merged here from ``main``'s ``gap_hist``); ``fixed_run``: a fixed-mode
    run (its advice names the run time, :data:`FIXED_RUN_TIME`, not ``steps.duration``).

    Raises:
        ValueError: ``main`` has no ``gap_hist`` and ``known_gaps`` lacks the step's window.
    """
    narrow = main.select(_ROW_COLUMNS)  # zero-copy; the filters below copy these columns of their rows only
    w0, w1, sample = _step_sample(narrow, phase, window)
    gaps = known_gaps.get((phase.step, window.steady, w0, w1)) if known_gaps else None
    if gaps is None:
        if "gap_hist" not in main.columns:
            raise ValueError(f"step {phase.step}: its gap histogram was not merged before the gap_hist column was "
                             "dropped (FrameRun.gaps lacks its window)")
        gaps = _sample_gaps(main, phase, window.steady, w0, w1)
    main = without_gaps(main)
    step_recs = narrow.filter(pl.col(STEP) == phase.step)
    ok_sample = sample.filter(pl.col(OK))
    c = _sample_counts(sample)
    n_sample, n_ok = sample.height, c["ok"]
    step_ok = counts(step_recs, ok=pl.col(OK))["ok"]
    length = max(0.0, w1 - w0)
    tokens_r, tokens_a, tokens_by = window_phase_tokens(main, w0, w1)
    tokens = tokens_r + tokens_a
    usable_ends = ends_in(main, USABLE, w0, w1)
    ok_ends = ends_in(main, OK, w0, w1)
    k = len(usable_ends)
    lat = _latency(ok_sample, gaps)
    e2e = sample.select(pl.col("e2e").drop_nulls().mean()).item() if n_sample else None
    e2e_mean = float(e2e) if e2e is not None else None
    tokens_per_usable = (
        lat["mean_output_tokens"] / lat["usable_share"]
        if lat["mean_output_tokens"] is not None and lat["usable_share"]
        else None
    )
    output_tps = tokens / length if length > 0 else None
    completions_rate = n_sample / length if length > 0 else None
    little = completions_rate * e2e_mean if completions_rate is not None and e2e_mean is not None else None
    row: dict[str, Any] = {
        **row_header(phase, window, w0, w1),
        "sample_requests": n_sample,
        "requests": step_recs.height,
        "step_completed": step_ok,
        "step_errors": step_recs.height - step_ok,
        "step_errors_by_class": errors_by_class(step_recs.filter(~pl.col(OK))),
        "failures": failures_by_class(step_recs.filter(~pl.col(OK))),
        "completed": n_ok,
        "errors": n_sample - n_ok,
        "errors_by_class": errors_by_class(sample.filter(~pl.col(OK))),
        "error_rate": share(n_sample - n_ok, n_sample),
        "usable": c["usable"],
        "usable_reasons": _usable_reasons(sample),
        "truncated": c["truncated"],
        "truncated_pct": pct(c["truncated"], n_ok),
        "truncated_in_reasoning": c["trunc_reason"],
        "truncated_in_reasoning_pct": pct(c["trunc_reason"], n_ok),
        "suspect_truncations": c["suspect"],
        "estimated_tokens_share": share(c["estimated"], n_ok),
        "hidden_reasoning": c["hidden"],
        "hidden_reasoning_share": share(c["hidden"], n_ok),
        "window_output_tokens": tokens,
        "output_tps": output_tps,
        "output_tps_reasoning": tokens_r / length if length > 0 else None,
        "output_tps_answer": tokens_a / length if length > 0 else None,
        "tokens_by": tokens_by,
        "window_usable_completions": k,
        "request_rate": k / length if length > 0 else None,
        "completion_rate": completions_rate,
        "e2e_mean_s": e2e_mean,
        "littles_law_c": little,
        "littles_law_ok": (abs(little / phase.concurrency - 1) <= LITTLE_TOLERANCE) if little is not None else None,
        **lat,
        "tokens_per_usable": tokens_per_usable,
        "usable_criterion": USABLE_CRITERION,
        "by_finish_reason": _by_finish_reason(ok_sample),
    }
    is_open = phase.step in open_loop
    shortfall = open_loop.get(phase.step)
    est = rate_estimate(renewal_reward(cycles[0], w0, w1), usable_ends, w0, w1, e2e_mean, shortfall, is_open)
    est_ok = rate_estimate(renewal_reward(cycles[1], w0, w1), ok_ends, w0, w1, e2e_mean, shortfall, is_open)
    row["hours_interval"] = _hours_interval_info(est, phase, w0, e2e_mean, lat["usable_share"])
    if fixed_run and row["hours_interval"]["duration_key"] == "steps.duration":  # its length is its run time
        row["hours_interval"]["duration_key"] = FIXED_RUN_TIME
    row["hours"] = [_hours_entry(int(n), est.primary, est_ok.primary, lat, output_tps) for n in hours_n]
    row.update(_client_lag(step_recs))
    row["users_seen"] = _users_seen(step_recs)
    row["low_confidence"] = low_confidence(row)
    row["low_confidence_fix"] = low_confidence_fix(row) if row["low_confidence"] else None
    row["real_time"] = real_time(row, time_scale) if time_scale != 1.0 else None
    add_cost(row, usd_per_hour)
    return row


def step_rows(run: FrameRun, hours_n: Sequence[int], time_scale: float = 1.0,
              usd_per_hour: float | None = None, main: pl.DataFrame | None = None,
              open_loop: Mapping[int, float | None] | None = None) -> list[dict[str, Any]]:
    """The report row of every single-stream phase and load step (warm-up excluded), in phase order.

    Each row opens with :func:`harness.report.figures.row_header`, then the sample's counts, throughput, latency,
    hours to N (:func:`harness.report.figures.hours_entry`), client lag, low confidence, real-time equivalents and
    ``cost`` (:func:`harness.report.cost.add_cost`, which also adds the US$ keys to the hours entries); units:
    see the module docstring and ``DEFINITIONS``.

    Args:
        run: the loaded run (:func:`load_frame_run`).
        hours_n: sample counts N for the hours-to-N figures.
        time_scale: the simulator's time scale (wall seconds per simulated second); 1 for a real server.
        usd_per_hour: the deployment's price (US$ per hour; :func:`harness.report.cost.usd_per_hour` of the
            profile), or None for no cost figures.
        main: ``run.main``, when the caller already has it.
        open_loop: the rate (open-loop) steps, step -> its shortfall (0..1, None unknown;
            :func:`harness.report.rate.open_loop_steps`); the other steps are closed loops. Chooses each step's
            interval method (:func:`harness.report.figures.rate_estimate`).
    """
    main = run.main if main is None else main
    steps, windows = step_windows(run)
    light = without_gaps(main)
    cycles = (cycle_frame(light, START, END, "user", USABLE), cycle_frame(light, START, END, "user", OK))
    loops = dict(open_loop or {})
    fixed = run.meta.get("mode") == "fixed"
    rows = [_step_row(main, p, w, hours_n, time_scale, usd_per_hour, loops, cycles, run.gaps, fixed)
            for p, w in zip(steps, windows, strict=True)]
    for p, row in zip(steps, rows, strict=True):  # the self-certification (harness.report.selfcert)
        row.update(selfcert_figures(light.filter(pl.col(STEP) == p.step), run.events, p.start, p.end,
                                    row["client_read_lag_p99_s"], row["client_starved"]))
    return rows


def _sample_gaps(main: pl.DataFrame, phase: Phase, steady: bool, w0: float, w1: float) -> LogHistogram:
    """The merged gap histogram of a step's latency sample (its successful requests in the sample window)."""
    return gap_histogram(main, where=in_sample(phase.step, steady, w0, w1) & pl.col(OK))


def step_windows(run: FrameRun) -> tuple[list[Phase], list[Window]]:
    """The run's load phases (every phase but the warm-up) and each one's steady window: :func:`steady_windows`, then
    made not steady where a worker was lost or stalled (:func:`harness.report.lost.apply_losses` over
    :func:`harness.report.lost.losses_and_stalls`). The one source of the windows every figure is computed over."""
    steps = [p for p in run.phases if p.label != "warmup"]
    return steps, apply_losses(steady_windows(run.frame, steps), steps, losses_and_stalls(run.events, run.frame))


def step_gap_histograms(run: FrameRun) -> dict[tuple[int, bool, float, float], LogHistogram]:
    """The merged gap histogram (seconds) of each step's latency sample, keyed by (step, steady, w0, w1) (the
    sample window, as :func:`_step_row` finds it), over ``run.main``'s ``gap_hist``: what :func:`_step_row` would
    merge, so a frame can drop its ``gap_hist`` column once these are kept (:attr:`FrameRun.gaps`). Same windows
    as :func:`step_rows` (:func:`steady_windows`, then the lost workers' cut, :func:`apply_losses`)."""
    steps, windows = step_windows(run)
    keys = []
    for p, w in zip(steps, windows, strict=True):
        w0, w1 = (w.start, w.end) if w.steady else (p.start, p.end)
        keys.append((p.step, w.steady, w0, w1))
    merged = gap_histograms(run.main, [in_sample(step, steady, w0, w1) & pl.col(OK) for step, steady, w0, w1 in keys])
    return dict(zip(keys, merged, strict=True))


def warmup_summary(run: FrameRun) -> dict[str, Any]:
    """The report's ``warmup`` block: requests, completed, errors (by class), E2E p50 and max (seconds)."""
    warm = run.frame.filter(pl.col(WARMUP))
    v = warm.select(pl.len().alias("n"), pl.col(OK).sum().alias("ok"), pctl("e2e", 50).alias("p50"),
                    pl.col("e2e").max().alias("max")).row(0, named=True)
    n, ok = int(v["n"]), int(v["ok"])
    return {"requests": n, "completed": ok, "errors": n - ok,
            "errors_by_class": errors_by_class(warm.filter(~pl.col(OK))),
            "e2e_p50_s": v["p50"], "e2e_max_s": v["max"]}


def run_totals(run: FrameRun) -> dict[str, Any]:
    """The report's ``totals`` block over every non-warm-up record, plus ``unplaced``: records of no phase."""
    main = without_gaps(run.main)
    placed = [p.step for p in run.phases if p.label != "warmup"]
    ok = pl.col(OK)
    c = counts(
        main,
        ok=ok,
        usable=pl.col(USABLE),
        hidden=ok & flag("hidden_reasoning"),
        truncated=ok & flag("truncated"),
        suspect=flag("suspect_truncation"),
        est=ok & (pl.col("token_source") == "estimate").fill_null(False),
        unplaced=~pl.col(STEP).is_in(placed),
    )
    n = main.height
    return {
        "requests": n, "completed": c["ok"], "errors": n - c["ok"],
        "errors_by_class": errors_by_class(main.filter(~ok)),
        "usable": c["usable"], "hidden_reasoning": c["hidden"], "truncated": c["truncated"],
        "suspect_truncations": c["suspect"], "estimated_tokens": c["est"],
        "estimated_tokens_share": share(c["est"], c["ok"]), "unplaced": c["unplaced"],
    }
