"""Per-step figures: counts, steady-state throughput, latency percentiles and hours to N.

One sample per step: when the step has a steady window ``[ws, e)`` (:mod:`harness.report.steady`), every column
of its row is over the requests (ok or not) that ENDED inside the window (after ``ws``: the request ending at
``ws`` is the first wave's last, which opened the window); success-only figures over its successes. Every such
request started after the step began and ran entirely at the step's concurrency (the carried-over first wave has
ended by ``ws``, nothing of the drain or of the next step is in it), and completions
ending in a window are an unbiased (renewal) sample of the steady state, the same set the request rate counts.
A step without a steady window falls back to its own requests over ``[s, e)`` (burst figures, marked NOT steady).
``requests`` / ``step_completed`` / ``step_errors`` / ``step_errors_by_class`` count the requests that STARTED in
the step (the whole step), whenever they ended.

Units in the returned rows: seconds (``*_s``), tokens, tokens per second (``*_tps``), requests per second
(``request_rate``), percentages (``*_pct``, 0..100) and shares (0..1).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.histogram import LogHistogram
from harness.report.diagnosis import low_confidence_fix, not_usable_reason
from harness.report.hours import (
    MIN_BATCH_E2E,
    MIN_BATCHES,
    BatchMeans,
    batch_means,
    hours_by_tokens,
    hours_interval,
    needed_window,
)
from harness.report.load import Phase
from harness.report.stats import mean, overlap_fraction, percentile
from harness.report.steady import Window
from harness.result import RequestResult

__all__ = [
    "LITTLE_TOLERANCE",
    "SPLIT_FINISH_REASONS",
    "USABLE_CRITERION",
    "by_finish_reason",
    "hours_entry",
    "interval_info",
    "latency_sample",
    "output_tokens_in",
    "record_tokens_in",
    "row_header",
    "step_row",
    "step_sample",
    "usable_ends_in",
    "window_tokens",
]

#: The sample criterion of the hours-to-N figure, as the report names it.
USABLE_CRITERION = "usable = success and not truncated"
#: Little's law check: a step whose ``completions/s × mean E2E`` differs from C by more than this share is flagged.
LITTLE_TOLERANCE = 0.10
#: Relative half-width of the hours interval above which the report says how long the step should have been.
HOURS_TARGET_HALFWIDTH = 0.10


def record_tokens_in(r: RequestResult, w0: float, w1: float) -> tuple[float, bool]:
    """Output tokens of one request that arrived inside ``[w0, w1)``, and whether chunk arrivals were used.

    With ``chunk_times`` (``output.chunk_times: true``): each token-bearing chunk's tokens count at its arrival
    ``start_wall + chunk_times[i]``: ``chunk_tokens[i]`` when the server sent per-chunk usage (tokens the usage
    counts beyond the chunks, e.g. the EOS token, arrive at the request's end), else ``output_tokens`` split
    evenly over the chunks. Without them: ``output_tokens`` spread uniformly over the decode interval
    ``[start_wall + ttft, start_wall + e2e]`` and counted pro rata to the part inside the window. Failed requests
    and requests without output tokens give 0 (and True when they carry chunk times).
    """
    ct = r.chunk_times
    has_chunks = bool(ct)
    if not r.ok or not r.output_tokens or r.end_wall < w0 or r.start_wall >= w1:
        return 0.0, has_chunks
    s = r.start_wall
    if ct:
        lo, hi = bisect_left(ct, w0 - s), bisect_left(ct, w1 - s)
        toks = r.chunk_tokens
        if toks and len(toks) == len(ct) and (shown := sum(toks)) > 0:
            rest = r.output_tokens - shown
            if rest >= 0:
                inside = float(sum(toks[lo:hi]))
                return inside + (rest if w0 <= r.end_wall < w1 else 0.0), True
            return sum(toks[lo:hi]) * r.output_tokens / shown, True
        return r.output_tokens * (hi - lo) / len(ct), True
    ttft = r.ttft
    # hidden reasoning was generated before the first visible chunk, unseen: spread from the request's start
    a0 = s + ttft if ttft is not None and not r.hidden_reasoning else s
    return r.output_tokens * overlap_fraction(a0, r.end_wall, w0, w1), False


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


def output_tokens_in(records: Sequence[RequestResult], w0: float, w1: float) -> float:
    """Output tokens of successful requests that arrived inside ``[w0, w1)`` (tokens; see :func:`window_tokens`)."""
    return window_tokens(records, w0, w1)[0]


def usable_ends_in(records: Sequence[RequestResult], w0: float, w1: float) -> int:
    """Number of usable requests whose end (``start_wall + e2e``) falls in the steady window after its start,
    ``(w0, w1)``: the request ending at ``w0`` is the first wave's last, which opened the window (counting it would
    add one completion to every window)."""
    return sum(1 for r in records if r.usable and w0 < r.end_wall < w1)


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


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
        "ttft_p99_s": percentile(ttft, 99),
        "ttfat_n": len(ttfat),
        "ttfat_p50_s": percentile(ttfat, 50),
        "ttfat_p90_s": percentile(ttfat, 90),
        "ttfat_p99_s": percentile(ttfat, 99),
        "gap_n": gaps.n,
        "gap_p50_s": gaps.quantile(0.50),
        "gap_p99_s": gaps.quantile(0.99),
        "tpot_mean_s": mean(tpot),
        "tpot_p50_s": percentile(tpot, 50),
        "e2e_p50_s": percentile(e2e, 50),
        "per_stream_tps": _per_stream_tps(sample),
        "mean_output_tokens": mean(float(r.output_tokens) for r in sample),
        "mean_output_tokens_usable": mean(float(r.output_tokens) for r in usable),
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


#: Finish reasons always present in a row's ``by_finish_reason`` (others only when they occur).
SPLIT_FINISH_REASONS = ("stop", "length")


def by_finish_reason(sample: Sequence[RequestResult]) -> dict[str, dict[str, Any]]:
    """Latency and length of ``sample`` (successful requests) split by ``finish_reason``.

    Returns:
        ``{reason: {"requests", "ttft_p50_s", "ttfat_p50_s", "e2e_p50_s", "mean_output_tokens",
        "mean_reasoning_tokens", "mean_answer_tokens"}}`` for ``stop`` and ``length`` (figures None when no request
        ended so) and every other finish reason in the sample; seconds and tokens.
    """
    groups: dict[str, list[RequestResult]] = {k: [] for k in SPLIT_FINISH_REASONS}
    for r in sample:
        groups.setdefault(r.finish_reason or "none", []).append(r)
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


def interval_info(bm: BatchMeans, phase: Phase, w0: float, e2e_mean: float | None) -> dict[str, Any]:
    """The row's ``hours_interval``: the batch-means figures and, when its half-width is above ±10 %, the window
    and step duration that would bring it to ±10 % (seconds; ``duration_key`` names the profile setting). Without
    an interval (window too short for 5 batches of 2 × mean E2E) they are the least that gives one."""
    hw = bm.rel_halfwidth()
    wide = hw is not None and hw > HOURS_TARGET_HALFWIDTH
    need = needed_window(bm, HOURS_TARGET_HALFWIDTH) if wide else None
    if not bm.batches and e2e_mean and bm.window_s > 0:
        need = MIN_BATCHES * MIN_BATCH_E2E * e2e_mean
    return {
        "method": "batch_means",
        "batches": bm.batches,
        "batch_s": bm.batch_s,
        "rate": bm.rate,
        "rate_se": bm.se,
        "sigma2": bm.sigma2,
        "t": bm.t,
        "rel_halfwidth": hw,
        "reason": bm.reason,
        "needed_window_s": need,
        "needed_duration_s": (w0 - phase.start) + need if need is not None else None,
        "duration_key": "single_stream.duration" if phase.phase == "single" or phase.step == 0 else "steps.duration",
    }


def hours_entry(n: int, bm: BatchMeans, bm_ok: BatchMeans, lat: dict[str, Any], output_tps: float | None
           ) -> dict[str, Any]:
    """One hours-to-N entry: the recommended figure and its interval, the token cross-check and the what-ifs."""
    h = hours_interval(n, bm)
    tok = hours_by_tokens(n, lat["mean_output_tokens"], output_tps, lat["usable_share"])
    lo, hi = h["hours_low"], h["hours_high"]
    check: str | None = None
    if tok is not None and (lo is not None or hi is not None):
        check = "outside" if (lo is not None and tok < lo) or (hi is not None and tok > hi) else "inside"
    m = lat["mean_output_tokens_usable"]
    ok = hours_interval(n, bm_ok)
    return {
        "n": n,
        **h,
        "token_hours": tok,
        "token_check": check,
        "what_if": {
            "hours_per_1k_output_tokens": h["hours"] * 1000.0 / m if h["hours"] is not None and m else None,
            "usable_is_success": {k: ok[k] for k in ("hours", "hours_low", "hours_high")},
        },
    }


def row_header(phase: Phase, window: Window, w0: float, w1: float) -> dict[str, Any]:
    """The identity and window keys that open a step row (times: epoch s; ``*_s``: seconds from the step start):
    label, phase, step, concurrency, the step's interval and end source, steadiness, the first wave, the
    measurement window ``[w0, w1)`` and which sample the row is over. Shared by :func:`step_row` and the columnar
    engine (:mod:`harness.report.columns`)."""
    return {
        "label": phase.label,
        "phase": phase.phase,
        "step": phase.step,
        "concurrency": phase.concurrency,
        "start_wall": phase.start,
        "end_wall": phase.end,
        "duration_s": phase.duration,
        "planned_duration_s": phase.planned_duration,
        "end_source": phase.end_source,
        "steady": window.steady,
        "not_steady_reason": window.reason,
        "first_wave_end_s": window.first_wave_end - phase.start,
        "first_wave_users": window.users,
        "first_wave_method": window.method,
        "window_start_wall": w0,
        "window_end_wall": w1,
        "window_start_s": w0 - phase.start,
        "window_s": max(0.0, w1 - w0),
        "sample": "ended_in_window" if window.steady else "started_in_step",
    }


def step_row(
    phase: Phase,
    window: Window,
    records: Sequence[RequestResult],
    hours_n: Sequence[int],
    time_scale: float = 1.0,
) -> dict[str, Any]:
    """The report row of one step.

    Args:
        phase: the step.
        window: its steady window (:func:`harness.report.steady.steady_window`).
        records: every non-warm-up record of the run.
        hours_n: sample counts N for the hours-to-N figures.
        time_scale: the simulator's time scale (wall seconds per simulated second); 1 for a real server.

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
    bm = batch_means(usable_ends, w0, w1, e2e_mean)
    bm_ok = batch_means(ok_ends, w0, w1, e2e_mean)
    row["hours_interval"] = interval_info(bm, phase, w0, e2e_mean)
    row["hours"] = [hours_entry(int(n), bm, bm_ok, lat, output_tps) for n in hours_n]
    row.update(client_lag(step_recs))
    row["users_seen"] = len({r.user for r in step_recs if r.user})
    row["low_confidence"] = low_confidence(row)
    row["low_confidence_fix"] = low_confidence_fix(row) if row["low_confidence"] else None
    row["real_time"] = real_time(row, time_scale) if time_scale != 1.0 else None
    return row


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


#: A steady window shorter than this many median E2E latencies, or holding fewer usable completions than
#: :data:`MIN_WINDOW_COMPLETIONS`, gives low-confidence figures (flagged ‡ in the report).
MIN_WINDOW_E2E = 3.0
MIN_WINDOW_COMPLETIONS = 10


def low_confidence(row: dict[str, Any]) -> str | None:
    """Why a steady row's figures are low-confidence (a window too short or too empty), or None.

    Two runs of the same too-short step can differ by 3x in hours to N: the row then says so instead of
    presenting one draw as the answer.
    """
    if not row["steady"]:
        return None
    why = []
    e2e = row.get("e2e_p50_s")
    if e2e and row["window_s"] < MIN_WINDOW_E2E * e2e:
        why.append(f"window {row['window_s']:.1f} s < {MIN_WINDOW_E2E:g} × median E2E ({e2e:.1f} s)")
    k = row.get("window_usable_completions") or 0
    if k < MIN_WINDOW_COMPLETIONS:
        why.append(f"{k} usable completions in the window (< {MIN_WINDOW_COMPLETIONS})")
    return "; ".join(why) or None


def real_time(row: dict[str, Any], time_scale: float) -> dict[str, Any]:
    """Real-time equivalents of a row measured against a simulator running at ``time_scale``.

    Wall durations are simulated durations × ``time_scale``, so real durations are wall ÷ ``time_scale``
    and real rates are wall rates × ``time_scale`` (client overheads do not scale: approximate).
    """

    def rate(v: float | None) -> float | None:
        return v * time_scale if v is not None else None

    def dur(v: float | None) -> float | None:
        return v / time_scale if v is not None else None

    return {
        "time_scale": time_scale,
        "window_s": dur(row["window_s"]),
        "output_tps": rate(row["output_tps"]),
        "request_rate": rate(row["request_rate"]),
        "per_stream_tps": rate(row["per_stream_tps"]),
        "ttft_p50_s": dur(row["ttft_p50_s"]),
        "ttfat_p50_s": dur(row["ttfat_p50_s"]),
        "e2e_p50_s": dur(row["e2e_p50_s"]),
        "tpot_mean_s": dur(row["tpot_mean_s"]),
        "e2e_mean_s": dur(row["e2e_mean_s"]),
        "hours": [
            {
                "n": h["n"],
                "hours": dur(h["hours"]),
                "hours_low": dur(h["hours_low"]),
                "hours_high": dur(h["hours_high"]),
                "token_hours": dur(h["token_hours"]),
                "token_check": h["token_check"],
                "what_if": {
                    "hours_per_1k_output_tokens": dur(h["what_if"]["hours_per_1k_output_tokens"]),
                    "usable_is_success": {k: dur(v) for k, v in h["what_if"]["usable_is_success"].items()},
                },
            }
            for h in row["hours"]
        ],
    }
