"""Differential-test oracle: the report's figures computed the straightforward way, one Python object
(:class:`harness.result.RequestResult`) per record, as the report computed them before it moved to the columnar
engine (:mod:`harness.report.columns`, :mod:`harness.report.exprs`, :mod:`harness.report.tokens`, goodput, soak
and per-prompt figures over the record frame).

Kept ONLY here, under tests/, as a second, independent reading of each definition (``DEFINITIONS`` in
:mod:`harness.report.build`): loops and list comprehensions over records, which the frame engine must equal
figure-for-figure (exact for counts, strings and flags; 1e-9 relative for floats). It is not used by ``harness/``.
:func:`oracle_report` assembles the same report dict as :func:`harness.report.build.build_report` (header, notes
and row-level rules are shared: :func:`harness.report.build.assemble_report`, ``figures.row_header`` /
``hours_entry`` / ``interval_info`` / ``low_confidence`` / ``real_time``, ``cost.add_cost``, ``soak.step_drift``),
so a test can compare whole reports. Units are the report's (seconds, tokens, tokens/s, req/s, %, shares).

One known difference: two records with identical fields are two requests in the frame, while the no-user-id
first wave here (``first_c_requests``, which compares records by value) counts them once in ``first_wave_users``.
"""

from __future__ import annotations

import itertools
import math
import os
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.arrivals import arrivals_before
from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.config import SloSpec
from harness.failures import summarise
from harness.histogram import LogHistogram
from harness.rate import LEAD_S
from harness.records import read_phases, read_records
from harness.report.build import RunFigures, assemble_report, report_settings
from harness.report.cost import add_cost
from harness.report.diagnosis import low_confidence_fix
from harness.report.figures import (
    LITTLE_TOLERANCE,
    SPLIT_FINISH_REASONS,
    USABLE_CRITERION,
    hours_entry,
    interval_info,
    low_confidence,
    rate_estimate,
    real_time,
    row_header,
)
from harness.report.goodput import GOODPUT_ROW_KEYS
from harness.report.interval import MIN_CYCLES, MIN_USABLE, RateEstimate
from harness.report.load import (
    INFERRED_PHASES_NOTE,
    NoRecordsError,
    Phase,
    mark_repeated,
    phases_from_events,
    read_meta,
)
from harness.report.rate import LATE_S as RATE_LATE_S
from harness.report.rundata import RunMeta, parse_event
from harness.report.search import search_result
from harness.report.soak import slice_bounds, step_drift
from harness.report.stats import mean, overlap_fraction, percentile
from harness.report.steady import Window, close_window
from harness.report.until import add_until
from harness.result import RequestResult
from harness.stats.intervals import t_quantile_975


@dataclass
class RunData:
    """Everything the report is computed from.

    Attributes:
        path: the run directory.
        meta: ``run.json`` (empty when missing or unreadable).
        records: every request record (:meth:`RequestResult.from_record`), warm-up included, in file order.
        phases: the phases in order (warm-up included).
        has_run_end: whether ``phases.jsonl`` holds a ``run_end`` event.
        phases_inferred: True when ``phases.jsonl`` was missing and boundaries were inferred from records.
        problems: human-readable issues met while loading (shown as notes).
        events: the ``phases.jsonl`` events.
    """

    path: Path
    meta: RunMeta
    records: list[RequestResult]
    phases: list[Phase]
    has_run_end: bool
    phases_inferred: bool = False
    problems: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def _phases_from_records(records: list[RequestResult]) -> list[Phase]:
    """Phase intervals inferred from records alone: [first request sent, last request ended] per step."""
    by_step: dict[int, list[RequestResult]] = {}
    for r in records:
        by_step.setdefault(r.step, []).append(r)
    out = []
    for step in sorted(by_step):
        recs = by_step[step]
        start = min(r.start_wall for r in recs)
        end = max(r.end_wall for r in recs)
        phase = recs[0].phase or ("warmup" if step < 0 else "single" if step == 0 else "step")
        conc = recs[0].concurrency or 1
        setting = next((r.setting for r in recs if r.setting is not None), None)
        out.append(Phase(phase, step, conc, start, end, None, "records", setting))
    # consecutive steps must not overlap: a step ends where the next one starts
    for a, b in pairwise(out):
        a.end = max(a.start, min(a.end, b.start))
    mark_repeated(out)  # the labelling rule, not a figure: one C=4 twice is "C=4 (step 1)", "C=4 (step 2)"
    return out


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Read a run directory.

    Raises:
        NoRecordsError: when the directory or its ``records.jsonl`` does not exist (message names the path).
        ValueError: when a line in the middle of a JSON-lines file is not valid JSON, or a record's schema version
            is not readable.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise NoRecordsError(f"{root}: no such run directory")
    if not (root / "records.jsonl").exists() and not any(root.glob("records*.jsonl")):
        raise NoRecordsError(f"{root / 'records.jsonl'}: not found (is {root} a run directory?)")
    problems: list[str] = []
    meta = read_meta(root, problems)
    records = read_records(root)
    events = read_phases(root)
    inferred = False
    if any(e.get("event") == "phase_start" for e in events):
        phases, has_end = phases_from_events([parse_event(e) for e in events],
                                             max((r.end_wall for r in records), default=None))
    else:
        phases, has_end, inferred = _phases_from_records(records), False, True
        if records:
            problems.append(INFERRED_PHASES_NOTE)
    return RunData(root, meta, records, phases, has_end, inferred, problems, events)


def steady_window(phase: Phase, records: Sequence[RequestResult]) -> Window:
    """Compute the steady window of ``phase`` from every record of the run (warm-up included).

    Args:
        phase: the step, with its wall interval [start, end).
        records: all request records of the run.
    """
    s = phase.start
    step = phase.step
    step_recs = [r for r in records if r.step == step]
    inflight = [r for r in records if r.start_wall < s < r.end_wall]
    relevant = step_recs + inflight
    if all(r.user for r in relevant):
        method = "users"
        users = {r.user for r in relevant}
        first_end: dict[str, float] = {}
        for r in records:
            u = r.user
            if u not in users:
                continue
            end = r.end_wall
            if (end > s or r.step == step) and end < first_end.get(u, float("inf")):
                first_end[u] = end
        ws = max(first_end.values(), default=s)
        n_users = len(users)
    else:
        method = "first_c_requests"
        need = max(0, phase.concurrency - len(inflight))
        first = sorted(step_recs, key=lambda r: r.start_wall)[:need]
        wave = inflight + [r for r in first if r not in inflight]
        ws = max((r.end_wall for r in wave), default=s)
        n_users = len(wave)
    e2e = sum(r.end_wall - (r.start_wall or 0.0) for r in step_recs) / len(step_recs) if step_recs else None
    return close_window(phase, ws, bool(step_recs), n_users, method, e2e)


def record_phase_tokens_in(r: RequestResult, w0: float, w1: float) -> tuple[float, float, bool]:
    """(reasoning, answer) output tokens of one request that arrived inside ``[w0, w1)``, and whether chunk
    arrivals were used.

    Reasoning tokens are ``reasoning_tokens`` clipped to ``[0, output_tokens]``, answer tokens the rest. With
    ``chunk_times``: a chunk arriving before ``ttfat`` (every chunk without it) is a reasoning chunk, else an answer
    chunk; each chunk's tokens count at its arrival ``start_wall + chunk_times[i]`` in its phase:
    ``chunk_tokens[i]`` when the server sent per-chunk usage (tokens the usage counts beyond the chunks, e.g. the
    EOS token, arrive at the request's end, as answer), else reasoning tokens split evenly over the reasoning
    chunks and answer tokens over the answer chunks (a phase without chunks: over all of them). Without them: each
    phase spread uniformly over its interval and counted pro rata to the part inside the window: reasoning over
    ``[start + ttft, start + ttfat]`` (``[start, start + ttft]`` with hidden reasoning; from the start without
    TTFT; to the end without TTFAT), answer over ``[start + ttfat, end]`` (from ``start + ttft``, else the start,
    without TTFAT); every bound clipped into ``[start, end]``. Failed requests and requests without output tokens
    give 0 (and True when they carry chunk times).
    """
    ct = r.chunk_times
    has_chunks = bool(ct)
    if not r.ok or not r.output_tokens or r.end_wall < w0 or r.start_wall >= w1:
        return 0.0, 0.0, has_chunks
    out = float(r.output_tokens)
    rt = min(max(float(r.reasoning_tokens or 0), 0.0), out)
    at = out - rt
    s, end = r.start_wall, r.end_wall
    if ct:
        lo, hi = bisect_left(ct, w0 - s), bisect_left(ct, w1 - s)
        is_r = [r.ttfat is None or t < r.ttfat for t in ct]
        in_r = sum(1 for i in range(lo, hi) if is_r[i])
        in_a = (hi - lo) - in_r
        toks = r.chunk_tokens
        if toks and len(toks) == len(ct) and (shown := sum(toks)) > 0:
            tr = float(sum(toks[i] for i in range(lo, hi) if is_r[i]))
            ta = float(sum(toks[i] for i in range(lo, hi) if not is_r[i]))
            rest = out - shown
            if rest >= 0:
                return tr, ta + (rest if w0 <= end < w1 else 0.0), True
            return tr * out / shown, ta * out / shown, True
        n, n_r = len(ct), sum(is_r)
        n_a = n - n_r
        er = rt * (in_r / n_r if n_r else (hi - lo) / n)
        ea = at * (in_a / n_a if n_a else (hi - lo) / n)
        return er, ea, True
    ttft, ttfat = r.ttft, r.ttfat
    if r.hidden_reasoning:
        r0 = s
        r1 = s + ttft if ttft is not None else (s + ttfat if ttfat is not None else end)
    else:
        r0 = s + ttft if ttft is not None else s
        r1 = s + ttfat if ttfat is not None else end
    r0 = min(r0, end)
    r1 = min(max(r1, r0), end)
    a0 = s + ttfat if ttfat is not None else s + ttft if ttft is not None else s
    a0 = min(max(a0, s), end)
    return rt * overlap_fraction(r0, r1, w0, w1), at * overlap_fraction(a0, end, w0, w1), False


def record_tokens_in(r: RequestResult, w0: float, w1: float) -> tuple[float, bool]:
    """Output tokens of one request that arrived inside ``[w0, w1)`` (reasoning + answer of
    :func:`record_phase_tokens_in`), and whether chunk arrivals were used."""
    rt, at, has_chunks = record_phase_tokens_in(r, w0, w1)
    return rt + at, has_chunks


def window_tokens(records: Sequence[RequestResult], w0: float, w1: float) -> tuple[float, str]:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (:func:`record_tokens_in`), and how
    they were placed: ``chunks`` (every contributing request had chunk times), ``pro_rata`` (none had),
    ``mixed``, or ``none`` (no successful request overlaps the window)."""
    total = 0.0
    by_chunks = by_rate = 0
    for r in records:
        if not r.ok or not r.output_tokens or r.end_wall < w0 or r.start_wall >= w1:
            continue
        n, chunked = record_tokens_in(r, w0, w1)
        total += n
        if chunked:
            by_chunks += 1
        else:
            by_rate += 1
    basis = "mixed" if by_chunks and by_rate else "chunks" if by_chunks else "pro_rata" if by_rate else "none"
    return total, basis


def window_phase_tokens(records: Sequence[RequestResult], w0: float, w1: float) -> tuple[float, float]:
    """(reasoning, answer) output tokens of successful requests that arrived inside ``[w0, w1)``
    (:func:`record_phase_tokens_in`); they sum to :func:`window_tokens`' total."""
    parts = [record_phase_tokens_in(r, w0, w1) for r in records]
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def output_tokens_in(records: Sequence[RequestResult], w0: float, w1: float) -> float:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (tokens; see :func:`window_tokens`)."""
    return window_tokens(records, w0, w1)[0]


def usable_ends_in(records: Sequence[RequestResult], w0: float, w1: float) -> int:
    """Number of usable requests whose end (``start_wall + e2e``) falls in the steady window after its start,
    ``(w0, w1)``: the request ending at ``w0`` is the first wave's last, which opened the window (counting it would
    add one completion to every window)."""
    return sum(1 for r in records if r.usable and w0 < r.end_wall < w1)


def _latency(sample: Sequence[RequestResult]) -> dict[str, Any]:
    """Latency and per-request figures over ``sample`` (successful requests). Seconds and tokens."""
    ttft = [r.ttft for r in sample if r.ttft is not None]
    ttfat = [r.ttfat for r in sample if r.ttfat is not None]
    tpot = [r.tpot for r in sample if r.tpot is not None]
    e2e = [r.e2e for r in sample if r.e2e is not None]
    gaps = LogHistogram()
    for r in sample:
        if r.gap_hist:
            gaps.merge(LogHistogram.from_json(r.gap_hist))
    usable = [r for r in sample if r.usable]
    return {
        "latency_n": len(sample),
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p90_s": percentile(ttft, 90),
        "ttft_p95_s": percentile(ttft, 95),
        "ttft_p99_s": percentile(ttft, 99),
        "ttfat_n": len(ttfat),
        "ttfat_p50_s": percentile(ttfat, 50),
        "ttfat_p90_s": percentile(ttfat, 90),
        "ttfat_p95_s": percentile(ttfat, 95),
        "ttfat_p99_s": percentile(ttfat, 99),
        "gap_n": gaps.n,
        "gap_p50_s": gaps.quantile(0.50),
        "gap_p95_s": gaps.quantile(0.95),
        "gap_p99_s": gaps.quantile(0.99),
        "tpot_mean_s": mean(tpot),
        "tpot_p50_s": percentile(tpot, 50),
        "e2e_p50_s": percentile(e2e, 50),
        "per_stream_tps": _per_stream_tps(sample),
        "mean_output_tokens": mean(float(r.output_tokens) for r in sample),
        "mean_output_tokens_usable": mean(float(r.output_tokens) for r in usable),
        "mean_reasoning_tokens": mean(float(r.reasoning_tokens) for r in sample),
        "mean_answer_tokens": mean(float(r.answer_tokens) for r in sample),
        "usable_share": len(usable) / len(sample) if sample else None,
    }


def step_sample(
    records: Sequence[RequestResult], step: int, steady: bool, w0: float, w1: float
) -> list[RequestResult]:
    """The one sample of a step, in record order: every column of its row is over these requests.

    Steady step: every request (any step, ok or not) that ENDED inside the steady window ``(w0, w1)`` (epoch
    seconds; the request ending at ``w0`` opened the window). All of them started after the step began and ran at
    its concurrency; none ran in the drain or the next step. Not steady: every request of ``step`` (flagged).
    """
    if steady:
        return [r for r in records if w0 < r.end_wall < w1]
    return [r for r in records if r.step == step]


def latency_sample(
    records: Sequence[RequestResult], step: int, steady: bool, w0: float, w1: float
) -> list[RequestResult]:
    """The successful requests of :func:`step_sample`: what a step's latency, per-stream and token figures are over."""
    return [r for r in step_sample(records, step, steady, w0, w1) if r.ok]


def _per_stream_tps(sample: Sequence[RequestResult]) -> float | None:
    """Per-stream decode rate of a sample: Σ streamed tokens ÷ Σ (E2E − TTFT), in tokens per second.

    Streamed tokens are :attr:`RequestResult.streamed_tokens`: output tokens, or answer tokens when the reasoning
    was hidden (it was generated before TTFT). A ratio of sums, not the mean of per-request rates: a request whose
    tokens all arrive in one read (a busy server flushing late) has a near-zero decode interval and would dominate
    a mean of ratios.
    """
    tokens = 0.0
    seconds = 0.0
    for r in sample:
        ttft, e2e = r.ttft, r.e2e
        n = r.streamed_tokens
        if ttft is None or e2e is None or e2e <= ttft or not n:
            continue
        tokens += n
        seconds += e2e - ttft
    return tokens / seconds if seconds > 0 else None


def by_finish_reason(sample: Sequence[RequestResult]) -> dict[str, dict[str, Any]]:
    """Latency and length of ``sample`` (successful requests) split by ``finish_reason``.

    Returns:
        ``{reason: {"requests", "ttft_p50_s", "ttfat_p50_s", "e2e_p50_s", "mean_output_tokens",
        "mean_reasoning_tokens", "mean_answer_tokens"}}`` for ``stop`` and ``length`` (figures None when no request
        ended so) and every other finish reason in the sample; seconds and tokens.
    """
    groups: dict[str, list[RequestResult]] = {k: [] for k in SPLIT_FINISH_REASONS}
    for r in sample:
        suspect = r.suspect_truncation and r.finish_reason != "length"
        groups.setdefault("suspect_truncation" if suspect else r.finish_reason or "none", []).append(r)
    if "suspect_truncation" in groups:  # right after stop and length, then the others as they occur
        groups = {k: groups[k] for k in dict.fromkeys([*SPLIT_FINISH_REASONS, "suspect_truncation", *groups])}
    out = {}
    for reason, rs in groups.items():
        out[reason] = {
            "requests": len(rs),
            "ttft_p50_s": percentile([r.ttft for r in rs if r.ttft is not None], 50),
            "ttfat_p50_s": percentile([r.ttfat for r in rs if r.ttfat is not None], 50),
            "e2e_p50_s": percentile([r.e2e for r in rs if r.e2e is not None], 50),
            "mean_output_tokens": mean(float(r.output_tokens) for r in rs),
            "mean_reasoning_tokens": mean(float(r.reasoning_tokens) for r in rs),
            "mean_answer_tokens": mean(float(r.answer_tokens) for r in rs),
        }
    return out


def request_cycles(records: Sequence[RequestResult], reward: str) -> list[tuple[float, float, str, float, float]]:
    """(start, end, stream, x, y) of every record, one by one: x = max(end, the same user's next start) − start
    (its E2E for an anonymous request or a user's last one), y = 1.0 when ``reward`` (``usable`` / ``ok``)."""
    by_user: dict[str, list[RequestResult]] = defaultdict(list)
    out: list[tuple[float, float, str, float, float]] = []
    for r in records:
        if r.user:
            by_user[r.user].append(r)
        else:
            s = r.start_wall or 0.0
            out.append((s, r.end_wall, "", r.end_wall - s, 1.0 if getattr(r, reward) else 0.0))
    for user, recs in by_user.items():
        recs.sort(key=lambda r: r.start_wall or 0.0)
        for i, r in enumerate(recs):
            s = r.start_wall or 0.0
            nxt = (recs[i + 1].start_wall or 0.0) if i + 1 < len(recs) else r.end_wall
            out.append((s, r.end_wall, user, max(r.end_wall, nxt) - s, 1.0 if getattr(r, reward) else 0.0))
    return out


def renewal_reward(cycles: Sequence[tuple[float, float, str, float, float]], w0: float, w1: float) -> RateEstimate:
    """The renewal-reward estimate (:func:`harness.report.interval.renewal_reward`), in plain Python from its
    docstring's formulas."""
    length = max(0.0, w1 - w0)
    inside = sorted((c for c in cycles if w0 < c[1] < w1), key=lambda c: c[0])
    n = len(inside)
    k = round(sum(c[4] for c in inside))
    rate = k / length if length > 0 else 0.0
    streams = len({c[2] for c in inside if c[2]}) + sum(1 for c in inside if not c[2])
    if length <= 0:
        return RateEstimate(rate, k, length, None, None, None, cycles=n, reason="empty window")
    if n < MIN_CYCLES or k < MIN_USABLE:
        why = (f"{n} requests ({k} usable) ended in the {length:.1f} s window: an interval needs at least "
               f"{MIN_CYCLES} ({MIN_USABLE} usable)")
        return RateEstimate(rate, k, length, None, None, None, cycles=n, streams=streams, reason=why)
    sx = sum(c[3] for c in inside)
    big_r = k / sx if sx > 0 else 0.0
    d = [c[4] - big_r * c[3] for c in inside]
    md = sum(d) / n
    e = [v - md for v in d]
    lags = min(n - 1, max(streams, math.ceil(n ** (1.0 / 3.0))))
    g0 = sum(v * v for v in e)
    acc = g0 + sum(2.0 * (1.0 - j / (lags + 1)) * sum(e[i] * e[i + j] for i in range(n - j))
                   for j in range(1, lags + 1))
    iid = g0 * n / (n - 1)
    v = max(acc * n / (n - 1), iid)
    se = math.sqrt(v + streams / 4.0) / length
    return RateEstimate(rate, k, length, se, v / length, t_quantile_975(n - 1), cycles=n, streams=streams,
                        dof=n - 1, bandwidth=lags, inflation=(v / iid) if iid > 0 else 1.0)


def step_row(
    phase: Phase,
    window: Window,
    records: Sequence[RequestResult],
    hours_n: Sequence[int],
    time_scale: float = 1.0,
    shortfall: tuple[bool, float | None] = (False, None),
) -> dict[str, Any]:
    """The report row of one step.

    Args:
        phase: the step.
        window: its steady window (:func:`harness.report.steady.steady_window`).
        records: every non-warm-up record of the run.
        hours_n: sample counts N for the hours-to-N figures.
        time_scale: the simulator's time scale (wall seconds per simulated second); 1 for a real server.
        shortfall: (open loop, the rate step's shortfall or None).

    Returns:
        The row dict (see the module docstring for the sample every figure is over and the units).
    """
    step_recs = [r for r in records if r.step == phase.step]
    # measurement interval and sample: the steady window and the requests ending in it, or (flagged) the step
    if window.steady:
        w0, w1 = window.start, window.end
    else:
        w0, w1 = phase.start, phase.end
    sample = step_sample(records, phase.step, window.steady, w0, w1)
    ok = [r for r in sample if r.ok]  # = latency_sample(...)
    errors = Counter(r.error_class or "unknown" for r in sample if not r.ok)
    truncated = sum(1 for r in ok if r.truncated)
    trunc_reason = sum(1 for r in ok if r.truncated_in_reasoning)
    estimated = sum(1 for r in ok if r.token_source == "estimate")
    reasons = Counter(x for x in (not_usable_reason(r) for r in sample) if x is not None)
    hidden = sum(1 for r in ok if r.hidden_reasoning)
    length = max(0.0, w1 - w0)
    tokens, tokens_by = window_tokens(records, w0, w1)
    usable_ends = [r.end_wall for r in records if r.usable and w0 < r.end_wall < w1]
    ok_ends = [r.end_wall for r in records if r.ok and w0 < r.end_wall < w1]
    k = len(usable_ends)  # = usable_ends_in(records, w0, w1)
    lat = _latency(ok)
    e2e_all = [r.e2e for r in sample if r.e2e is not None]
    e2e_mean = mean(e2e_all)
    tokens_per_usable = (
        lat["mean_output_tokens"] / lat["usable_share"]
        if lat["mean_output_tokens"] is not None and lat["usable_share"]
        else None
    )
    output_tps = tokens / length if length > 0 else None
    tokens_r, tokens_a = window_phase_tokens(records, w0, w1)
    completions_rate = len(sample) / length if length > 0 else None
    little = completions_rate * e2e_mean if completions_rate is not None and e2e_mean is not None else None
    step_ok = sum(1 for r in step_recs if r.ok)
    step_errors = Counter(r.error_class or "unknown" for r in step_recs if not r.ok)
    row: dict[str, Any] = {
        **row_header(phase, window, w0, w1),
        "sample_requests": len(sample),
        "requests": len(step_recs),
        "step_completed": step_ok,
        "step_errors": len(step_recs) - step_ok,
        "step_errors_by_class": dict(sorted(step_errors.items())),
        "failures": [
            {"error_class": c.error_class, "count": c.count,
             "messages": [{"message": m.message, "count": m.count, "hint": m.hint} for m in c.messages]}
            for c in summarise((r.error_class, r.error_detail, r.http_status, r.retry_after_s)
                               for r in step_recs if not r.ok)
        ],
        "completed": len(ok),
        "errors": len(sample) - len(ok),
        "errors_by_class": dict(sorted(errors.items())),
        "error_rate": (len(sample) - len(ok)) / len(sample) if sample else None,
        "usable": sum(1 for r in ok if r.usable),
        "usable_reasons": dict(sorted(reasons.items())),
        "truncated": truncated,
        "truncated_pct": _pct(truncated, len(ok)),
        "truncated_in_reasoning": trunc_reason,
        "truncated_in_reasoning_pct": _pct(trunc_reason, len(ok)),
        "suspect_truncations": sum(1 for r in sample if r.suspect_truncation),
        "estimated_tokens_share": estimated / len(ok) if ok else None,
        "hidden_reasoning": hidden,
        "hidden_reasoning_share": hidden / len(ok) if ok else None,
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
        "by_finish_reason": by_finish_reason(ok),
    }
    is_open, sf = shortfall
    est = rate_estimate(renewal_reward(request_cycles(records, "usable"), w0, w1), usable_ends, w0, w1, e2e_mean,
                        sf, is_open)
    est_ok = rate_estimate(renewal_reward(request_cycles(records, "ok"), w0, w1), ok_ends, w0, w1, e2e_mean, sf,
                           is_open)
    row["hours_interval"] = interval_info(est, phase, w0, e2e_mean, lat["usable_share"])
    row["hours"] = [hours_entry(int(n), est.primary, est_ok.primary, lat, output_tps) for n in hours_n]
    row.update(client_lag(step_recs))
    row["users_seen"] = len({r.user for r in step_recs if r.user})
    row["low_confidence"] = low_confidence(row)
    row["low_confidence_fix"] = low_confidence_fix(row) if row["low_confidence"] else None
    row["real_time"] = real_time(row, time_scale) if time_scale != 1.0 else None
    return row


def selfcert(phase: Phase, step_recs: Sequence[RequestResult], events: Sequence[dict[str, Any]],
             lag_p99: float | None, starved: bool | None) -> dict[str, Any]:
    """The self-certification keys of a step row, record by record and sample by sample (the calibration lookup
    is harness.report.selfcert.error_bound's, tested on its own)."""
    from harness.report.selfcert import MIN_SPAN_S, SLACK_S, error_bound

    chunks: dict[str, int] = {}
    for r in step_recs:
        proc = r.user.rsplit(":", 1)[0] if ":" in r.user else r.user
        chunks[proc] = chunks.get(proc, 0) + (r.chunks or 0)
    length = phase.end - phase.start
    rates = {k: v / length for k, v in chunks.items()} if length > 0 else {}
    samples: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("event") == "client_cpu" and phase.start <= e["wall"] <= phase.end + SLACK_S:
            samples.setdefault(e["process"], []).append((e["wall"], e["cpu_s"]))
    shares = []
    for proc, ss in samples.items():
        ss.sort()  # pairs of consecutive samples; a pair whose counter went down (a restart) counts in neither sum
        pairs = [(w1 - w0, c1 - c0) for (w0, c0), (w1, c1) in itertools.pairwise(ss) if c1 >= c0 and w1 > w0]
        wall, cpu = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
        if wall >= MIN_SPAN_S and (proc in rates or not rates):
            shares.append(cpu / wall)
    rate = max(rates.values()) if rates else None
    bound = None
    if starved:
        verdict = "starved"
    elif lag_p99 is None or rate is None:
        verdict = "not_measured"
    else:
        bound = error_bound(rate, lag_p99)
        verdict = "certified" if bound else "beyond_calibration"
    return {
        "client_processes": len(rates) if length > 0 else 0,
        "client_cpu_share_max": max(shares) if shares else None,
        "client_chunks_per_s_proc": rate,
        "client_ttft_error_bound_s": bound.ttft_err_p99_s if bound else None,
        "client_itl_error_bound_s": bound.itl_err_p99_s if bound else None,
        "client_selfcert": verdict,
        "client_selfcert_range": ({"chunks_per_s": bound.chunks_per_s, "read_lag_p99_s": bound.read_lag_p99_s}
                                  if bound else None),
    }


def client_lag(step_recs: Sequence[RequestResult]) -> dict[str, Any]:
    """Client read lag of a step's requests (every record of the step, failed ones included).

    ``read_lag_max`` (seconds; see :class:`harness.result.RequestResult`) is how late this process read a
    response's bytes after the kernel received them, at worst over the response. Returns
    ``client_lag_requests`` (records that carry it, i.e. kernel-stamped), ``client_read_lag_p50_s`` /
    ``_p99_s`` / ``_max_s`` over them, ``client_lagged_pct`` (% above :data:`CLIENT_LAG_LIMIT_S`) and
    ``client_starved`` (that % above :data:`CLIENT_STARVED_PCT`). Figures, ``client_starved`` included, are None
    without stamped records (TLS, non-Linux): not measured is not healthy.
    """
    lags = sorted(float(r.read_lag_max) for r in step_recs if r.read_lag_max is not None)
    late = sum(1 for v in lags if v > CLIENT_LAG_LIMIT_S)
    pct = _pct(late, len(lags))
    return {
        "client_lag_requests": len(lags),
        "client_read_lag_p50_s": percentile(lags, 50),
        "client_read_lag_p99_s": percentile(lags, 99),
        "client_read_lag_max_s": lags[-1] if lags else None,
        "client_lagged_pct": pct,
        "client_starved": None if pct is None else pct > CLIENT_STARVED_PCT,
    }


def meets_slo(r: RequestResult, slo: SloSpec) -> bool:
    """Whether ``r`` meets every threshold of ``slo`` (each ``measurement ≤ threshold``, seconds). A measurement
    that is missing (None) does not meet its threshold. Says nothing about success or usability."""
    measured = {"ttft_s": r.ttft, "ttfat_s": r.ttfat, "tpot_s": r.tpot, "e2e_s": r.e2e}
    for key, limit in slo.thresholds().items():
        v = measured[key]
        if v is None or v > limit:
            return False
    return True


def add_goodput(row: dict[str, Any], records: Sequence[RequestResult], slo: SloSpec | None) -> None:
    """Put the goodput figures into a step row (:func:`harness.report.figures.step_row`), in place.

    Keys: ``slo_sample_n`` (requests in the latency sample), ``slo_met`` (of them meeting every SLO),
    ``slo_met_share`` (0..1, None for an empty sample), ``slo_window_met`` (usable requests meeting every SLO
    ending in the window) and ``goodput_rps`` (that ÷ window length, req/s; None for an empty window). All None
    without SLOs. ``records``: every non-warm-up record of the run.
    """
    if slo is None:
        row.update(dict.fromkeys(GOODPUT_ROW_KEYS))
        return
    w0, w1 = row["window_start_wall"], row["window_end_wall"]
    sample = latency_sample(records, row["step"], row["steady"], w0, w1)
    met = sum(1 for r in sample if meets_slo(r, slo))
    k = sum(1 for r in records if r.usable and w0 < r.end_wall < w1 and meets_slo(r, slo))  # as request_rate
    length = max(0.0, w1 - w0)
    row.update({
        "slo_sample_n": len(sample),
        "slo_met": met,
        "slo_met_share": met / len(sample) if sample else None,
        "slo_window_met": k,
        "goodput_rps": k / length if length > 0 else None,
    })


def slice_figures(records: Sequence[RequestResult], t0: float, t1: float, window_end: float | None = None
                  ) -> dict[str, Any]:
    """Figures of one slice ``(t0, t1]`` (epoch seconds; a request ending exactly at ``window_end``, the steady
    window's end, is outside the step's sample and in no slice) over ``records`` (every non-warm-up record).

    Returns ``start_wall``, ``end_wall``, ``output_tokens`` (tokens generated in the slice), ``output_tps``,
    ``usable_completions``, ``request_rate`` (usable ends ÷ slice length, req/s), ``ended`` (requests ending in
    the slice), ``errors``, ``error_rate`` (errors ÷ ended), ``truncated``, ``truncation_rate`` (truncated ÷
    successful ended), ``ttft_p50_s`` / ``ttft_p99_s`` / ``ttfat_p50_s`` / ``ttfat_p99_s`` (seconds, successful
    requests ending in the slice). Rates and percentiles are None without requests to compute them over.
    """
    length = t1 - t0
    ended = [r for r in records if t0 < r.end_wall <= t1 and r.end_wall != window_end]
    ok = [r for r in ended if r.ok]
    tokens = output_tokens_in(records, t0, t1)
    usable = sum(1 for r in ok if r.usable)  # the slice's own set: slices tile the window as the sample, (t0, t1]
    ttft = [r.ttft for r in ok if r.ttft is not None]
    ttfat = [r.ttfat for r in ok if r.ttfat is not None]
    errors = len(ended) - len(ok)
    truncated = sum(1 for r in ok if r.truncated)
    return {
        "start_wall": t0,
        "end_wall": t1,
        "output_tokens": tokens,
        "output_tps": tokens / length,
        "usable_completions": usable,
        "request_rate": usable / length,
        "ended": len(ended),
        "errors": errors,
        "error_rate": errors / len(ended) if ended else None,
        "truncated": truncated,
        "truncation_rate": truncated / len(ok) if ok else None,
        "ttft_p50_s": percentile(ttft, 50),
        "ttft_p99_s": percentile(ttft, 99),
        "ttfat_p50_s": percentile(ttfat, 50),
        "ttfat_p99_s": percentile(ttfat, 99),
    }


def step_slices(row: dict[str, Any], records: Sequence[RequestResult], slice_s: float) -> list[dict[str, Any]]:
    """The slices of a report row (:func:`harness.report.figures.step_row`): [] when the row is NOT steady or its
    window holds fewer than :data:`MIN_SLICES` slices. Each slice is :func:`slice_figures` plus ``start_s`` (from
    the step's start, seconds)."""
    if not row["steady"]:
        return []
    bounds = slice_bounds(row["window_start_wall"], row["window_end_wall"], slice_s)
    out = []
    for (t0, t1), recs in zip(bounds, _by_slice(records, bounds), strict=True):
        out.append({"start_s": t0 - row["start_wall"], **slice_figures(recs, t0, t1, row["window_end_wall"])})
    return out


def _by_slice(records: Sequence[RequestResult], bounds: Sequence[tuple[float, float]]) -> list[list[RequestResult]]:
    """Per slice of ``bounds`` (equal, consecutive), the records that can count in it, in record order: those with
    ``start_wall < t1`` and ``end_wall >= t0`` (every request whose tokens or end fall in the slice). Each record is
    visited once, so a long soak does not scan every record once per slice; :func:`slice_figures` of a slice's
    records equals that of all records."""
    out: list[list[RequestResult]] = [[] for _ in bounds]
    if not bounds:
        return out
    w0, width, n = bounds[0][0], bounds[0][1] - bounds[0][0], len(bounds)
    for r in records:
        s, e = r.start_wall, r.end_wall
        first = max(0, math.floor((s - w0) / width) - 1)  # ±1: float rounding at a boundary; re-checked below
        last = min(n - 1, math.floor((e - w0) / width) + 1)
        for i in range(first, last + 1):
            t0, t1 = bounds[i]
            if s < t1 and e >= t0:
                out[i].append(r)
    return out


def not_usable_reason(r: RequestResult) -> str | None:
    """Why ``r`` is not usable (its ``usable_reason``; for records written before that field, ``error`` or
    ``truncated`` from ``ok`` / ``truncated``, else ``unknown``), None when it is usable."""
    if r.usable:
        return None
    if r.usable_reason:
        return r.usable_reason
    return "error" if not r.ok else "truncated" if r.truncated else "unknown"


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def prompt_rows(records: Sequence[RequestResult]) -> list[dict[str, Any]]:
    """One row per prompt class (``prompt_class``, else ``prompt_id``) over ``records`` (non-warm-up), sorted by name.

    Keys: ``prompt`` (the class), ``prompt_ids`` (ids seen, sorted), ``requests``, ``completed``, ``errors``,
    ``usable``, ``usable_pct`` (of requests), ``usable_reasons`` (``usable_reason`` -> count over requests),
    ``truncated``, ``truncated_pct``, ``truncated_in_reasoning``, ``truncated_in_reasoning_pct`` (of completed),
    ``hidden_reasoning`` (count), ``max_tokens`` (the requests' cap when they all had the same one, else None),
    ``max_tokens_seen`` (distinct caps, sorted), ``mean_reasoning_tokens``, ``mean_answer_tokens`` (over completed),
    ``min_reasoning_tokens_truncated`` (smallest reasoning tokens of a request truncated in reasoning: its reasoning
    ran at least this long; None when none) and ``ttfat_p50_s`` (over completed requests whose answer started).
    """
    by: dict[str, list[RequestResult]] = {}
    for r in records:
        by.setdefault(r.prompt_class or r.prompt_id, []).append(r)
    rows = []
    for name in sorted(by):
        recs = by[name]
        ok = [r for r in recs if r.ok]
        reasons = Counter(x for x in (not_usable_reason(r) for r in recs) if x is not None)
        trunc = [r for r in ok if r.truncated]
        in_reasoning = [r for r in ok if r.truncated_in_reasoning]
        caps = sorted({r.max_tokens for r in recs if r.max_tokens is not None})
        usable = sum(1 for r in recs if r.usable)
        rows.append({
            "prompt": name,
            "prompt_ids": sorted({r.prompt_id for r in recs}),
            "requests": len(recs),
            "completed": len(ok),
            "errors": len(recs) - len(ok),
            "usable": usable,
            "usable_pct": _pct(usable, len(recs)),
            "usable_reasons": dict(sorted(reasons.items())),
            "truncated": len(trunc),
            "truncated_pct": _pct(len(trunc), len(ok)),
            "truncated_in_reasoning": len(in_reasoning),
            "truncated_in_reasoning_pct": _pct(len(in_reasoning), len(ok)),
            "hidden_reasoning": sum(1 for r in ok if r.hidden_reasoning),
            "max_tokens": caps[0] if len(caps) == 1 and all(r.max_tokens is not None for r in recs) else None,
            "max_tokens_seen": caps,
            "mean_reasoning_tokens": mean(float(r.reasoning_tokens) for r in ok),
            "mean_answer_tokens": mean(float(r.answer_tokens) for r in ok),
            "min_reasoning_tokens_truncated": min((r.reasoning_tokens for r in in_reasoning), default=None),
            "ttfat_p50_s": percentile([r.ttfat for r in ok if r.ttfat is not None], 50),
        })
    return rows


def is_warmup(r: RequestResult) -> bool:
    """A warm-up record: phase ``warmup`` or step < 0 (excluded from every figure but the warm-up block)."""
    return r.phase == "warmup" or r.step < 0


def warmup_block(records: list[RequestResult]) -> dict[str, Any]:
    """The report's ``warmup`` block over the warm-up records."""
    ok = [r for r in records if r.ok]
    e2e = [float(r.e2e) for r in records if r.e2e is not None]
    errs = Counter(r.error_class or "unknown" for r in records if not r.ok)
    return {
        "requests": len(records),
        "completed": len(ok),
        "errors": len(records) - len(ok),
        "errors_by_class": dict(sorted(errs.items())),
        "e2e_p50_s": percentile(e2e, 50),
        "e2e_max_s": max(e2e) if e2e else None,
    }


def totals_block(main: list[RequestResult]) -> dict[str, Any]:
    """The report's ``totals`` block over the non-warm-up records."""
    ok = [r for r in main if r.ok]
    est = sum(1 for r in ok if r.token_source == "estimate")
    errs = Counter(r.error_class or "unknown" for r in main if not r.ok)
    return {
        "requests": len(main),
        "completed": len(ok),
        "errors": len(main) - len(ok),
        "errors_by_class": dict(sorted(errs.items())),
        "usable": sum(1 for r in main if r.usable),
        "hidden_reasoning": sum(1 for r in ok if r.hidden_reasoning),
        "truncated": sum(1 for r in ok if r.truncated),
        "suspect_truncations": sum(1 for r in main if r.suspect_truncation),
        "estimated_tokens": est,
        "estimated_tokens_share": est / len(ok) if ok else None,
    }


def turn_rows(records: Sequence[RequestResult]) -> list[dict[str, Any]]:
    """One row per conversation turn index over every request with a ``turn`` (``harness.report.turns``)."""
    by_turn: dict[int, list[RequestResult]] = {}
    for r in records:
        if r.turn is not None:
            by_turn.setdefault(r.turn, []).append(r)
    out = []
    for turn in sorted(by_turn):
        rs = by_turn[turn]
        ok = [r for r in rs if r.ok]
        ttft = [r.ttft for r in ok if r.ttft is not None]
        e2e = [r.e2e for r in ok if r.e2e is not None]
        prompt = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
        cached = [float(r.cached_tokens) for r in ok if r.cached_tokens is not None]
        both = [(r.cached_tokens, r.prompt_tokens) for r in ok if r.cached_tokens is not None and r.prompt_tokens]
        total_prompt = sum(p for _, p in both if p)
        out.append({
            "turn": turn,
            "requests": len(rs),
            "completed": len(ok),
            "ttft_p50_s": percentile(ttft, 50),
            "ttft_p90_s": percentile(ttft, 90),
            "ttft_mean_s": mean(ttft),
            "e2e_p50_s": percentile(e2e, 50),
            "mean_prompt_tokens": mean(prompt),
            "mean_cached_tokens": mean(cached),
            "cached_share": sum(c for c, _ in both if c is not None) / total_prompt if total_prompt else None,
            "cached_sent": len(cached),
            "mean_output_tokens": mean(float(r.output_tokens) for r in ok),
        })
    return out


def _process(user: str | None) -> str:
    """The load-generator process of a user id: up to its last ':' ('' without one)."""
    return user.rsplit(":", 1)[0] if user and ":" in user else ""


def rate_figures(ev: dict[str, Any], seed: int, start: float, end: float,
                 recs: Sequence[RequestResult], every: Sequence[RequestResult] | None = None) -> dict[str, Any]:
    """The rate figures of one step (:func:`harness.report.rate.rate_figures`), over its records one by one."""
    a = start + LEAD_S
    span = max(0.0, end - a)
    timed = [r for r in recs if r.scheduled_wall is not None]
    sent = sum(1 for r in timed if a <= r.start_wall < end)
    try:
        n_sched: int | None = arrivals_before(str(ev.get("arrival") or "poisson"), float(ev["rate"]),
                                              float(ev.get("burstiness") or 1), f"{seed}:{int(ev['step'])}", span)
    except (KeyError, TypeError, ValueError):
        n_sched = None
    delays = [max(0.0, r.start_wall - float(r.scheduled_wall or 0.0)) for r in timed]
    late = sum(1 for d in delays if d > RATE_LATE_S)
    pool = list(recs if every is None else every)
    users = ev.get("concurrency")
    share = max(1, int(users) // max(1, len({_process(r.user) for r in timed}))) if users else 0
    free = sum(1 for r, d in zip(timed, delays, strict=True) if d > RATE_LATE_S and share and sum(
        1 for q in pool if _process(q.user) == _process(r.user) and q.start_wall <= float(r.scheduled_wall or 0.0)
        < q.end_wall) < share)
    ok = [r for r in timed if r.ok]
    d_ok = [max(0.0, r.start_wall - float(r.scheduled_wall or 0.0)) for r in ok]
    ttft = [float(r.ttft) for r in ok if r.ttft is not None]
    sttft = [d + float(r.ttft) for d, r in zip(d_ok, ok, strict=True) if r.ttft is not None]
    e2e = [float(r.e2e) for r in ok if r.e2e is not None]
    se2e = [d + float(r.e2e) for d, r in zip(d_ok, ok, strict=True) if r.e2e is not None]
    return {
        "target_rate": float(ev["rate"]), "arrival": ev.get("arrival"), "burstiness": ev.get("burstiness"),
        "max_concurrency": ev.get("max_concurrency"), "users": ev.get("concurrency"), "schedule_window_s": span,
        "scheduled": n_sched, "sent": sent,
        "scheduled_rate": n_sched / span if n_sched is not None and span > 0 else None,
        "achieved_rate": sent / span if span > 0 else None,
        "shortfall": (1 - sent / n_sched) if n_sched else None,
        "requests": len(timed), "late": late, "late_share": late / len(timed) if timed else None,
        "late_free_user": free,
        "dispatch_delay_p50_s": percentile(delays, 50), "dispatch_delay_p99_s": percentile(delays, 99),
        "dispatch_delay_max_s": max(delays) if delays else None,
        "ttft_p50_s": percentile(ttft, 50), "ttft_p99_s": percentile(ttft, 99),
        "sched_ttft_p50_s": percentile(sttft, 50), "sched_ttft_p99_s": percentile(sttft, 99),
        "sched_ttft_mean_s": mean(sttft),
        "e2e_p50_s": percentile(e2e, 50), "e2e_p99_s": percentile(e2e, 99), "e2e_mean_s": mean(e2e),
        "sched_e2e_p50_s": percentile(se2e, 50), "sched_e2e_p99_s": percentile(se2e, 99),
        "sched_e2e_mean_s": mean(se2e),
    }


def open_loop_steps(steps: Sequence[Phase], events: Sequence[dict[str, Any]], main: Sequence[RequestResult],
                    profile: dict[str, Any]) -> dict[int, float | None]:
    """The rate steps and their shortfall, as :func:`harness.report.rate.open_loop_steps`."""
    evs = {int(e["step"]): e for e in events if e.get("event") == "phase_start" and e.get("rate") is not None}
    spec = profile.get("rate") if isinstance(profile.get("rate"), dict) else {}
    seed = int((spec or {}).get("seed") or 0)
    out: dict[int, float | None] = {}
    for p in steps:
        ev = evs.get(p.step) if p.phase == "step" else None
        if ev is not None:
            recs = [r for r in main if r.step == p.step]
            out[p.step] = rate_figures(ev, seed, p.start, p.end, recs, main)["shortfall"]
    return out


def add_rate(rows: list[dict[str, Any]], events: Sequence[dict[str, Any]], main: Sequence[RequestResult],
             profile: dict[str, Any]) -> None:
    """``row["rate"]`` (and a rate step's label) of every row, as :func:`harness.report.rate.add_rate`."""
    evs = {int(e["step"]): e for e in events if e.get("event") == "phase_start" and e.get("rate") is not None}
    spec = profile.get("rate") if isinstance(profile.get("rate"), dict) else {}
    seed = int((spec or {}).get("seed") or 0)
    for row in rows:
        ev = evs.get(int(row["step"])) if row.get("phase") == "step" else None
        if ev is None:
            row["rate"] = None
            continue
        recs = [r for r in main if r.step == row["step"]]
        row["rate"] = rate_figures(ev, seed, float(row["start_wall"]), float(row["end_wall"]), recs, main)
        setting = row.get("setting")
        row["label"] = f"{float(ev['rate']):g} req/s" + (f" ({setting})" if setting else "")


def oracle_figures(run: RunData, n: Sequence[int] | None = None) -> RunFigures:
    """Every record-derived part of the report of ``run``, over its records one by one."""
    settings = report_settings(run.meta, n)
    main = [r for r in run.records if not is_warmup(r)]
    steps = [p for p in run.phases if p.label != "warmup"]
    profile = run.meta.get("profile") if isinstance(run.meta.get("profile"), dict) else {}
    open_loop = open_loop_steps(steps, run.events, main, profile or {})
    rows = [step_row(p, steady_window(p, run.records), main, settings.hours_n, settings.time_scale,
                     (p.step in open_loop, open_loop.get(p.step))) for p in steps]
    for p, row in zip(steps, rows, strict=True):
        add_cost(row, settings.usd_per_hour)
        row.update(selfcert(p, [r for r in main if r.step == p.step], run.events, row["client_read_lag_p99_s"],
                            row["client_starved"]))
        add_goodput(row, main, settings.slo)
        row["slices"] = step_slices(row, main, settings.slice_s)
        row["drift"] = step_drift(row["slices"])
    profile = run.meta.get("profile") if isinstance(run.meta.get("profile"), dict) else {}
    add_rate(rows, run.events, main, profile or {})
    add_until(rows, run.events)  # copied from the until events, no record figure: the report's own function
    placed = {p.step for p in steps}
    unplaced = sum(1 for r in main if r.step not in placed)
    last_end = max((r.end_wall for r in run.records), default=None)
    return RunFigures(rows, warmup_block([r for r in run.records if is_warmup(r)]), totals_block(main),
                      prompt_rows(main), unplaced, last_end, turn_rows(main),
                      search_result([parse_event(e) for e in run.events]))


def oracle_report(run_dir: str | os.PathLike[str], n: Sequence[int] | None = None) -> dict[str, Any]:
    """The whole report dict of a run directory, its figures computed by this oracle."""
    run = load_run(run_dir)
    return assemble_report(run, report_settings(run.meta, n), oracle_figures(run, n)).as_dict()
