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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from harness.report.hours import (
    MIN_BATCH_E2E,
    MIN_BATCHES,
    OPEN_LOOP_BATCHES,
    BatchMeans,
    batch_means,
    hours_by_tokens,
    hours_interval,
    needed_window,
)
from harness.report.interval import MIN_CYCLES, MIN_USABLE, RateEstimate
from harness.report.load import Phase
from harness.report.steady import Window

__all__ = [
    "LITTLE_TOLERANCE",
    "SPLIT_FINISH_REASONS",
    "USABLE_CRITERION",
    "hours_entry",
    "interval_info",
    "rate_estimate",
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


#: An open-loop step whose achieved rate is more than this share below its schedule did not keep up: its
#: completions no longer mirror the arrivals (the same threshold as the report's "target rate not achieved").
OPEN_LOOP_SHORTFALL = 0.05

Estimate = BatchMeans | RateEstimate


@dataclass(frozen=True)
class StepEstimate:
    """The usable-rate estimate of one step: THE interval (``primary``), the cross-check and why this method.

    Attributes:
        primary: the estimate the hours, cost and every surface use (renewal-reward, or open-loop batch means).
        cross: the other method over the same window (batch means for a closed loop, renewal-reward for an open
            loop), for the cross-check; None when it does not apply.
        open_loop: True for a rate step.
        why: one sentence on why ``primary``'s method was chosen (an open-loop step's fallback says why).
    """

    primary: Estimate
    cross: Estimate | None
    open_loop: bool
    why: str


def rate_estimate(rr: RateEstimate, usable_ends: pl.Series | Sequence[float], w0: float, w1: float,
                  e2e_mean: float | None, shortfall: float | None, open_loop: bool) -> StepEstimate:
    """Choose a step's usable-rate interval over the window ``(w0, w1)`` (epoch s).

    Closed loop (``open_loop`` False): ``rr``, the renewal-reward estimate over the window's request cycles
    (:func:`harness.report.interval.renewal_reward`), is THE interval;
    batch means (10 batches of >= 2 x mean E2E, :func:`harness.report.hours.batch_means`) the
    cross-check. Open loop (a rate step) whose achieved rate is at most :data:`OPEN_LOOP_SHORTFALL` below its
    schedule (``shortfall``, 0..1, None unknown: taken as kept up): batch means with
    :data:`harness.report.hours.OPEN_LOOP_BATCHES` fixed batches (not limited by the E2E: completions mirror the
    arrivals) when it has at least that many usable completions, else renewal-reward; renewal-reward is then the
    cross-check. An open-loop step that fell behind its schedule uses renewal-reward (its users form a closed loop
    at the cap) and says so.
    """
    if not open_loop:
        bm = batch_means(usable_ends, w0, w1, e2e_mean)
        return StepEstimate(rr, bm, False, "closed loop: renewal-reward over every stream's request cycles")
    if shortfall is not None and shortfall > OPEN_LOOP_SHORTFALL:
        return StepEstimate(rr, None, True, (
            f"open loop, target rate NOT achieved ({100 * shortfall:.0f} % short): completions do not mirror the "
            "arrivals, so renewal-reward over the users' request cycles (a closed loop at the cap)"))
    fixed = batch_means(usable_ends, w0, w1, None, batches=OPEN_LOOP_BATCHES)
    if fixed.events < OPEN_LOOP_BATCHES:
        return StepEstimate(rr, None, True, (
            f"open loop with {fixed.events} usable completions (< {OPEN_LOOP_BATCHES}, one per batch): "
            "renewal-reward over the users' request cycles"))
    return StepEstimate(fixed, rr, True, (
        f"open loop, target rate achieved: batch means with {OPEN_LOOP_BATCHES} fixed batches (completions "
        "mirror the arrivals)"))


def _refused_window(est: Estimate, e2e_mean: float | None, streams: int, usable_share: float | None
                    ) -> float | None:
    """The least window (seconds) that would give ``est``'s method an interval, from the step's mean E2E, its
    streams and its usable share; None when that cannot be said (no E2E, or no usable completion)."""
    if not e2e_mean or e2e_mean <= 0:
        return None
    if isinstance(est, BatchMeans):
        if est.batches == 0 and est.reason and "batches ×" in est.reason:
            return MIN_BATCHES * MIN_BATCH_E2E * e2e_mean
        return None
    c = max(1, streams)
    need = MIN_CYCLES * e2e_mean / c
    if usable_share:
        need = max(need, MIN_USABLE * e2e_mean / (c * usable_share))
    elif usable_share is not None:
        return None
    return need


def _cross_check(primary: Estimate, cross: Estimate | None) -> dict[str, Any] | None:
    """The cross-check block: the other method's figures and whether its estimate interval overlaps the
    primary's (``agree``; None when either has no interval)."""
    if cross is None:
        return None
    lo, hi = cross.rate_bounds()
    plo, phi = primary.rate_bounds()
    have = hi is not None and phi is not None
    agree = (max(lo or 0.0, plo or 0.0) <= min(hi, phi)) if have and hi is not None and phi is not None else None
    is_bm = isinstance(cross, BatchMeans)
    return {
        "method": "batch_means" if is_bm else "renewal_reward",
        "batches": cross.batches if isinstance(cross, BatchMeans) else None,
        "batch_s": cross.batch_s if isinstance(cross, BatchMeans) else None,
        "rate_low": lo if hi is not None else None,
        "rate_high": hi,
        "rel_halfwidth": cross.rel_halfwidth(),
        "agree": agree,
        "reason": cross.reason,
    }


def interval_info(est: StepEstimate, phase: Phase, w0: float, e2e_mean: float | None,
                  usable_share: float | None = None) -> dict[str, Any]:
    """The row's ``hours_interval``: THE interval's method and figures (renewal-reward: cycles, streams, dof,
    bandwidth, inflation; batch means: batches, batch_s), the cross-check, and, when its half-width is above
    ±10 %, the window and step duration that would bring it to ±10 % (seconds, from SE ~ 1/sqrt(W);
    ``duration_key`` names the profile setting). Without an interval they are the least window that gives one
    (renewal-reward: :data:`MIN_CYCLES` cycles and :data:`MIN_USABLE` usable ones over the step's streams at its
    mean E2E)."""
    p = est.primary
    hw = p.rel_halfwidth()
    wide = hw is not None and hw > HOURS_TARGET_HALFWIDTH
    need = needed_window(p, HOURS_TARGET_HALFWIDTH) if wide else None
    rr = p if isinstance(p, RateEstimate) else None
    bm = p if isinstance(p, BatchMeans) else None
    if p.reason:
        need = _refused_window(p, e2e_mean, rr.streams if rr else 0, usable_share)
    method = rr.method if rr else ("open_loop_batch_means" if est.open_loop else "batch_means")
    return {
        "method": method,
        "method_why": est.why,
        "open_loop": est.open_loop,
        "batches": bm.batches if bm else 0,
        "batch_s": bm.batch_s if bm else None,
        "cycles": rr.cycles if rr else None,
        "streams": rr.streams if rr else None,
        "dof": (rr.dof if rr and rr.t is not None else (bm.batches - 1 if bm and bm.batches else None)),
        "bandwidth": rr.bandwidth if rr and rr.t is not None else None,
        "inflation": rr.inflation if rr else None,
        "rate": p.rate,
        "rate_se": p.se,
        "sigma2": p.sigma2,
        "t": p.t,
        "rel_halfwidth": hw,
        "reason": p.reason,
        "needed_window_s": need,
        "needed_duration_s": (w0 - phase.start) + need if need is not None else None,
        "duration_key": "single_stream.duration" if phase.phase == "single" or phase.step == 0 else "steps.duration",
        "cross_check": _cross_check(p, est.cross),
    }


def hours_entry(n: int, bm: Estimate, bm_ok: Estimate, lat: dict[str, Any], output_tps: float | None
           ) -> dict[str, Any]:
    """One hours-to-N entry: the recommended figure and its interval (``bm``: the step's THE estimate), the
    token cross-check and the what-ifs (``bm_ok``: the same method over the successful requests)."""
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
        why.append(f"{k} usable completion{'' if k == 1 else 's'} in the window (< {MIN_WINDOW_COMPLETIONS})")
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
