"""Hours to collect N usable samples: one recommended figure with its 95 % prediction interval, the batch-means
cross-check and the token-based cross-check.

Recommended figure: with ``k`` usable completions (success, not truncated, passing the profile's usable checks)
ending inside the steady window ``(ws, e)`` of ``W`` seconds, the rate is ``r = k / W`` usable samples per second
and ``hours = N / (r * 3600)``.

THE interval (chosen per step by :func:`harness.report.figures.rate_estimate`; docs: "Hours to N: the interval"):

* closed-loop steps (and the single stream): renewal-reward over every stream's request cycles with a Bartlett
  autocorrelation correction (:func:`harness.report.interval.renewal_reward`); batch means (below) is its
  cross-check where the window allows it;
* open-loop (rate) steps that achieved their target rate: batch means with a fixed
  :data:`OPEN_LOOP_BATCHES` batches, not limited by the E2E latency (the completions of an open-loop system whose
  server keeps up mirror its arrival process); renewal-reward is the cross-check, and the interval when the
  target rate was not achieved.

Batch means (:func:`batch_means`): the window is cut into ``B`` equal batches of ``L = W / B`` seconds (closed
loop: ``B = 10``, fewer -- at least 5 -- when a batch would be shorter than 2 x mean E2E; no batch-means interval
when even 5 batches would be that short). ``r_b`` = usable completions ending in batch b / L. ``SE = sd(r_b) /
sqrt(B)`` is the standard error of ``r``; ``sigma2 = L * var(r_b)`` estimates the long-run variance of the
completion count per unit time, so a production run of ``T_N = N / r`` seconds has its own rate spread
``sigma2 / T_N``. Either method's 95 % prediction interval of the rate a future run of N samples achieves is
``r ± t * sqrt(SE² + sigma2 / T_N)`` (:func:`hours_interval`); the hours bounds are N over the rate bounds (no
upper hours bound when the lower rate bound is <= 0). Not a Poisson interval ``k ± 1.96 sqrt(k)``: closed-loop
completions are autocorrelated and not Poisson (a closed loop of C users is more regular than Poisson, a batch of
long requests makes it burstier). A prediction interval because the user books GPU time for one future run, which
has its own variability on top of the estimate's.

Token-based (the seed article's method, corrected for unusable completions), kept as a cross-check:
``hours = N * tokens_per_usable / output_tps / 3600`` where
``tokens_per_usable = mean output tokens per successful request / usable share`` (usable / successful).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from harness.report.interval import RateBounds, RateEstimate
from harness.stats.intervals import t_quantile_975

__all__ = [
    "MAX_BATCHES",
    "MIN_BATCHES",
    "MIN_BATCH_E2E",
    "OPEN_LOOP_BATCHES",
    "T975",
    "BatchMeans",
    "batch_means",
    "hours_by_tokens",
    "hours_interval",
    "needed_window",
]

#: Batches per window by default, the fewest allowed, and the shortest batch in mean E2E latencies.
MAX_BATCHES = 10
MIN_BATCHES = 5
MIN_BATCH_E2E = 2.0
#: Batches of an open-loop (rate) step's batch means (fixed: not limited by the E2E latency).
OPEN_LOOP_BATCHES = 20

#: Two-sided 95 % quantiles of Student's t, ``t_{df, 0.975}`` (:func:`harness.stats.intervals.t_quantile_975`), for
#: the degrees of freedom batch means uses (B - 1 for B = 5..10).
T975: dict[int, float] = {df: t_quantile_975(df) for df in range(MIN_BATCHES - 1, MAX_BATCHES)}


@dataclass(frozen=True)
class BatchMeans(RateBounds):
    """Batch-means estimate of a completion rate over one window.

    Attributes:
        rate: events per second over the whole window (``k / W``).
        events: events (completions) in the window.
        window_s: window length in seconds.
        batches: number of batches B (0 when no interval could be formed).
        batch_s: batch length L in seconds (0 when ``batches`` is 0).
        batch_rates: ``r_b`` per batch, events per second (empty when ``batches`` is 0).
        se: standard error of ``rate``, ``sd(r_b) / sqrt(B)`` (events per second), None without batches.
        sigma2: long-run variance per unit time, ``L * var(r_b)`` (events² per second), None without batches.
        t: ``t_{B-1, 0.975}``, None without batches.
        reason: why there is no interval (None when there is one).
    """

    rate: float
    events: int
    window_s: float
    batches: int
    batch_s: float
    batch_rates: tuple[float, ...]
    se: float | None
    sigma2: float | None
    t: float | None
    reason: str | None = None


def batch_means(
    event_times: Sequence[float] | pl.Series, w0: float, w1: float, mean_e2e_s: float | None,
    batches: int = MAX_BATCHES,
) -> BatchMeans:
    """Batch means of the events at ``event_times`` (epoch seconds) inside the window ``(w0, w1)``.

    The window opens at an event (the end of the first wave), which is not counted: counting it would add one
    event to every window (a bias of 1 / k). An event on an inner batch edge counts in the later batch.

    Args:
        event_times: when each event happened (epoch s; a polars Series, e.g. a column of the record frame, or a
            sequence of floats); events outside ``(w0, w1)`` are ignored. Counted column-wise (no Python object
            per event).
        w0 / w1: the window, epoch seconds.
        mean_e2e_s: mean E2E latency of the window's requests (seconds): a batch must last at least
            :data:`MIN_BATCH_E2E` times it, so B = min(batches, floor(W / (2 × mean E2E))); None or 0 allows
            ``batches`` (an open-loop step: :data:`OPEN_LOOP_BATCHES`).
        batches: the most batches (10 by default).

    Returns:
        A :class:`BatchMeans`; ``batches == 0`` (and a ``reason``) when B would be below :data:`MIN_BATCHES` or the
        window is empty.
    """
    length = max(0.0, w1 - w0)
    times = event_times if isinstance(event_times, pl.Series) else pl.Series("t", list(event_times), pl.Float64)
    inside = times.cast(pl.Float64).filter((times > w0) & (times < w1))
    k = inside.len()
    rate = k / length if length > 0 else 0.0
    if length <= 0:
        return BatchMeans(rate, k, length, 0, 0.0, (), None, None, None, "empty window")
    b = batches
    if mean_e2e_s and mean_e2e_s > 0:
        b = min(batches, math.floor(length / (MIN_BATCH_E2E * mean_e2e_s) + 1e-9))
    if b < MIN_BATCHES:
        need = MIN_BATCHES * MIN_BATCH_E2E * (mean_e2e_s or 0.0)
        why = (f"window {length:.1f} s < {MIN_BATCHES} batches × {MIN_BATCH_E2E:g} × mean E2E "
               f"({mean_e2e_s or 0.0:.1f} s) = {need:.1f} s: no interval")
        return BatchMeans(rate, k, length, 0, 0.0, (), None, None, None, why)
    size = length / b
    batch = ((inside - w0) / size).floor().cast(pl.Int64).clip(upper_bound=b - 1)  # (t - w0) / size >= 0: int()
    per = dict(zip(*batch.value_counts(name="n").get_columns(), strict=True))
    counts = [int(per.get(i, 0)) for i in range(b)]
    rates = tuple(c / size for c in counts)
    mc = k / b  # variance from the integer counts: exactly 0 for equal counts
    var = sum((c - mc) ** 2 for c in counts) / (b - 1) / size**2
    t = T975.get(b - 1) or t_quantile_975(b - 1)
    return BatchMeans(rate, k, length, b, size, rates, math.sqrt(var / b), size * var, t)


def hours_interval(n: int, bm: BatchMeans | RateEstimate) -> dict[str, float | None]:
    """Hours to ``n`` usable samples at the rate of ``bm`` (either method's estimate), with the 95 % prediction
    interval.

    Returns:
        ``{"hours", "hours_low", "hours_high", "samples_per_hour", "rate_low", "rate_high"}``: hours
        ``n / (rate * 3600)`` (None for a zero rate); ``hours_low`` from the upper rate bound and ``hours_high``
        from the lower one (None when unbounded or without an interval); usable samples per hour; the rate
        bounds in samples per second.
    """
    if bm.window_s <= 0:
        return {"hours": None, "hours_low": None, "hours_high": None, "samples_per_hour": None,
                "rate_low": None, "rate_high": None}
    lo, hi = bm.rate_bounds(n)
    return {
        "hours": n / (bm.rate * 3600.0) if bm.rate > 0 else None,
        "hours_low": n / (hi * 3600.0) if hi else None,
        "hours_high": n / (lo * 3600.0) if lo else None,
        "samples_per_hour": bm.rate * 3600.0,
        "rate_low": lo,
        "rate_high": hi,
    }


def needed_window(bm: BatchMeans | RateEstimate, target: float = 0.10) -> float | None:
    """Window length (seconds) that would bring the estimate's relative 95 % half-width to ``target``.

    Either method's SE scales ~ 1/sqrt(W) (renewal-reward: ``V`` grows ~ W, ``SE = sqrt(V + C/4) / W``), so the
    half-width does: ``W * (halfwidth / target)²``. None without an interval; the current
    window when it is already narrow enough.
    """
    hw = bm.rel_halfwidth()
    if hw is None:
        return None
    return bm.window_s * max(1.0, (hw / target) ** 2)


def hours_by_tokens(n: int, mean_output_tokens: float | None, output_tps: float | None,
                    usable_share: float | None = 1.0) -> float | None:
    """Hours to N usable samples from aggregate token throughput (the cross-check).

    ``N * mean_output_tokens / output_tps / 3600 / usable_share``.

    Args:
        n: number of usable samples wanted.
        mean_output_tokens: mean output tokens per successful request (tokens).
        output_tps: aggregate output throughput (tokens per second).
        usable_share: usable / successful requests (0..1).

    Returns:
        Hours, or None when an input is missing or zero.
    """
    if not mean_output_tokens or not output_tps or not usable_share:
        return None
    return n * mean_output_tokens / output_tps / 3600.0 / usable_share
