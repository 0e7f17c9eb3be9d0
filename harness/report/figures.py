"""Row-level rules of a step row, shared by the columnar engine (:mod:`harness.report.columns`, which computes
every figure over the record frame): its identity and window keys, the hours-to-N entries and interval info, the
low-confidence rule and the real-time equivalents. They take plain numbers, not records.

Also, over :class:`harness.result.RequestResult` records, the step sample (:func:`step_sample`,
:func:`latency_sample`) and tokens in a window (:func:`record_tokens_in`, :func:`window_tokens`,
:func:`output_tokens_in`): used by charts until it moves to the frame (``harness.report.charts``); the report's
figures use their frame versions (:func:`harness.report.exprs.in_sample`, :func:`harness.report.tokens.window_tokens`).

Units in the rows: seconds (``*_s``), tokens, tokens per second (``*_tps``), requests per second
(``request_rate``), percentages (``*_pct``, 0..100) and shares (0..1).
"""

from __future__ import annotations

from typing import Any

from harness.report.hours import (
    MIN_BATCH_E2E,
    MIN_BATCHES,
    BatchMeans,
    hours_by_tokens,
    hours_interval,
    needed_window,
)
from harness.report.load import Phase
from harness.report.steady import Window

__all__ = [
    "LITTLE_TOLERANCE",
    "SPLIT_FINISH_REASONS",
    "USABLE_CRITERION",
    "hours_entry",
    "interval_info",
    "row_header",
]

#: The sample criterion of the hours-to-N figure, as the report names it.
USABLE_CRITERION = "usable = success, not truncated, passing the profile's usable checks"
#: Finish reasons always present in a row's ``by_finish_reason`` (others only when they occur).
SPLIT_FINISH_REASONS = ("stop", "length")
#: Little's law check: a step whose ``completions/s × mean E2E`` differs from C by more than this share is flagged.
LITTLE_TOLERANCE = 0.10
#: Relative half-width of the hours interval above which the report says how long the step should have been.
HOURS_TARGET_HALFWIDTH = 0.10


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
    label, phase, step, concurrency, sweep-axes setting (None without ``axes:``), the step's interval and end
    source, steadiness, the first wave, the measurement window ``[w0, w1)`` and which sample the row is over. Used
    by the columnar engine (:mod:`harness.report.columns`)."""
    return {
        "label": phase.label,
        "phase": phase.phase,
        "step": phase.step,
        "concurrency": phase.concurrency,
        "setting": phase.setting,
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
