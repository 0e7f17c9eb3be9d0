"""Per-step figures: counts, steady-state throughput, latency percentiles and hours to N.

Units in the returned rows: seconds (``*_s``), tokens, tokens per second (``*_tps``), requests per second
(``request_rate``), percentages (``*_pct``, 0..100) and shares (0..1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.histogram import LogHistogram
from harness.report.diagnosis import low_confidence_fix, not_usable_reason
from harness.report.hours import hours_by_requests, hours_by_tokens
from harness.report.load import Phase
from harness.report.stats import mean, overlap_fraction, percentile
from harness.report.steady import Window
from harness.result import RequestResult

__all__ = [
    "SPLIT_FINISH_REASONS",
    "by_finish_reason",
    "latency_sample",
    "output_tokens_in",
    "step_row",
    "usable_ends_in",
]


def output_tokens_in(records: Sequence[RequestResult], w0: float, w1: float) -> float:
    """Output tokens of successful requests generated inside ``[w0, w1)`` (tokens).

    Each request's ``output_tokens`` are spread uniformly over its decode interval
    ``[start_wall + ttft, start_wall + e2e]`` and counted pro rata to the part inside the window; with hidden
    reasoning (generated before the first visible chunk, unseen) over ``[start_wall, start_wall + e2e]``.
    """
    total = 0.0
    for r in records:
        if not r.ok or not r.output_tokens:
            continue
        s = r.start_wall
        ttft = r.ttft
        a0 = s + ttft if ttft is not None and not r.hidden_reasoning else s
        total += r.output_tokens * overlap_fraction(a0, r.end_wall, w0, w1)
    return total


def usable_ends_in(records: Sequence[RequestResult], w0: float, w1: float) -> int:
    """Number of usable requests whose end (``start_wall + e2e``) falls in ``[w0, w1)``."""
    return sum(1 for r in records if r.usable and w0 <= r.end_wall < w1)


def latency_sample(
    records: Sequence[RequestResult], step: int, steady: bool, w0: float, w1: float
) -> list[RequestResult]:
    """The requests a step's latency figures are computed over, in record order.

    Steady step: successful requests (any step) that started inside the window ``[w0, w1)`` (epoch seconds).
    Not steady: every successful request of ``step``.
    """
    if steady:
        return [r for r in records if r.ok and w0 <= r.start_wall < w1]
    return [r for r in records if r.ok and r.step == step]


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
    """
    step_recs = [r for r in records if r.step == phase.step]
    ok = [r for r in step_recs if r.ok]
    errors = Counter(r.error_class or "unknown" for r in step_recs if not r.ok)
    truncated = sum(1 for r in ok if r.truncated)
    trunc_reason = sum(1 for r in ok if r.truncated_in_reasoning)
    usable = sum(1 for r in step_recs if r.usable)
    reasons = Counter(x for x in (not_usable_reason(r) for r in step_recs) if x is not None)
    estimated = sum(1 for r in ok if r.token_source == "estimate")
    hidden = sum(1 for r in ok if r.hidden_reasoning)

    # measurement interval: the steady window, or (flagged) the whole step
    if window.steady:
        w0, w1 = window.start, window.end
    else:
        w0, w1 = phase.start, phase.end
    sample = latency_sample(records, phase.step, window.steady, w0, w1)
    length = max(0.0, w1 - w0)
    tokens = output_tokens_in(records, w0, w1)
    k = usable_ends_in(records, w0, w1)
    lat = _latency(sample)
    tokens_per_usable = (
        lat["mean_output_tokens"] / lat["usable_share"]
        if lat["mean_output_tokens"] is not None and lat["usable_share"]
        else None
    )
    output_tps = tokens / length if length > 0 else None
    row: dict[str, Any] = {
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
        "window_s": length,
        "requests": len(step_recs),
        "completed": len(ok),
        "errors": len(step_recs) - len(ok),
        "errors_by_class": dict(sorted(errors.items())),
        "error_rate": (len(step_recs) - len(ok)) / len(step_recs) if step_recs else None,
        "usable": usable,
        "usable_reasons": dict(sorted(reasons.items())),
        "truncated": truncated,
        "truncated_pct": _pct(truncated, len(ok)),
        "truncated_in_reasoning": trunc_reason,
        "truncated_in_reasoning_pct": _pct(trunc_reason, len(ok)),
        "suspect_truncations": sum(1 for r in step_recs if r.suspect_truncation),
        "estimated_tokens_share": estimated / len(ok) if ok else None,
        "hidden_reasoning": hidden,
        "hidden_reasoning_share": hidden / len(ok) if ok else None,
        "window_output_tokens": tokens,
        "output_tps": output_tps,
        "window_usable_completions": k,
        "request_rate": k / length if length > 0 else None,
        **lat,
        "tokens_per_usable": tokens_per_usable,
        "by_finish_reason": by_finish_reason(sample),
    }
    row["hours"] = [
        {
            "n": int(n),
            **hours_by_requests(int(n), k, length),
            "token_hours": hours_by_tokens(int(n), lat["mean_output_tokens"], output_tps, lat["usable_share"]),
        }
        for n in hours_n
    ]
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
        "hours": [
            {
                "n": h["n"],
                "hours": dur(h["hours"]),
                "hours_low": dur(h["hours_low"]),
                "hours_high": dur(h["hours_high"]),
                "token_hours": dur(h["token_hours"]),
            }
            for h in row["hours"]
        ],
    }
