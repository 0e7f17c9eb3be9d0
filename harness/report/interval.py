"""The usable-sample rate's 95 % interval from the request cycles of every stream (renewal-reward, the
regenerative method of simulation output analysis), with an autocorrelation correction.

Why not batch means alone (:func:`harness.report.hours.batch_means`): batch means needs batches that are each
several mean E2E latencies long, so a step gives an interval only when its steady window is >= 10 x the mean E2E
(1,700-2,100 s for a reasoning model's 120-190 s requests). A closed loop of C users gives far more information
than B batch counts: every user is a stream of request *cycles*, and each cycle is one observation.

Definitions (all times epoch seconds on the records' clock, ``start`` = request sent, ``end`` = start + E2E):

* **cycle** of request i of user u: ``X_i = max(end_i, next_start_i) - start_i`` seconds, where ``next_start_i``
  is the start of u's next request (the user's cycle: E2E plus any wait or think time before the next request;
  just E2E when u sent no further request);
* **reward** ``Y_i`` = 1 when request i is usable (success, not truncated, passing the profile's usable checks),
  else 0;
* **sample**: the requests (any step, any outcome) that ENDED inside the window ``(w0, w1)`` of ``W`` seconds, the
  report's one sample rule; ``k = sum(Y_i)`` is the window's usable completions and the rate is ``r = k / W``
  usable samples per second (the same point estimate as before: only the interval is new);
* **residuals** ``d_i = Y_i - R X_i`` with ``R = sum(Y) / sum(X)`` (usable samples per user-second);
* ``V`` = the variance of ``sum(d_i)`` by a Bartlett-weighted (Newey-West) sum of the autocovariances of the
  residuals ordered by start time, bandwidth ``L = min(n - 1, max(C, ceil(n^(1/3))))`` with C the number of
  streams (requests close in start time share the server: this is where concurrent requests' correlation
  shows), never less than the independent-cycles variance ``n * s_d^2`` (the correction only widens);
* ``SE(r) = sqrt(V + C / 4) / W``: ``V`` is the renewal-reward variance of the usable count; ``C / 4`` bounds the
  count's discretisation at the two window edges (a stream whose cycles were all equal would still end
  ``floor`` or ``ceil(W / X)`` requests inside the window: variance <= 1/4 per stream);
* ``sigma2 = V / W``: the long-run variance of the usable count per second, so a production run of
  ``T_N = N / r`` seconds has its own spread ``sigma2 / T_N`` (the prediction part, as in batch means);
* the 95 % prediction interval of the rate a run of N samples achieves is
  ``r ± t_{df, 0.975} * sqrt(SE^2 + sigma2 / T_N)`` with ``df = n - 1``.

Assumptions (said in the docs): cycles of one stream are exchangeable in steady state (no trend: the soak drift
figure tests that); streams interact only through requests close in time (the bandwidth); the window edges cut
at most one cycle per stream. A server-wide variation slower than the window (a throughput swing with a period
of 2,000 s under a 1,000 s window) is invisible to this and to any within-window interval: on synthetic loops with
such a swing this interval covered 103 of 200 runs (with a 600 s period: 195 and 197 of 200). Repeated runs (a
run-to-run interval) and the soak drift figure are what see it. Refuses (``reason`` set, no interval) with fewer
than :data:`MIN_CYCLES` cycles or fewer than :data:`MIN_USABLE` usable ones in the window, or a window of zero length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from harness.stats.intervals import t_quantile_975

__all__ = ["MIN_CYCLES", "MIN_USABLE", "RateBounds", "RateEstimate", "cycle_frame", "renewal_reward"]

#: The fewest cycles (requests ending in the window) and usable ones an interval is formed from.
MIN_CYCLES = 10
MIN_USABLE = 5


class RateBounds:
    """The interval arithmetic every rate estimate shares (:class:`RateEstimate`, and batch means'
    :class:`harness.report.hours.BatchMeans`): a subclass has ``rate`` (per second), ``se``, ``sigma2`` and ``t``
    (None without an interval)."""

    rate: float
    se: float | None
    sigma2: float | None
    t: float | None

    def rate_bounds(self, n: int | None = None) -> tuple[float | None, float | None]:
        """95 % bounds of the rate (samples per second): of the estimate when ``n`` is None, else the prediction
        interval of the rate a run collecting ``n`` samples achieves (it lasts ``n / rate`` seconds).

        ``rate ± t * sqrt(SE² + sigma2 / T_n)``; a lower bound <= 0 is None; both None without an interval.
        """
        if self.t is None or self.se is None or self.sigma2 is None:
            return None, None
        var = self.se**2
        if n is not None and n > 0 and self.rate > 0:
            var += self.sigma2 / (n / self.rate)
        half = self.t * math.sqrt(var)
        lo = self.rate - half
        return (lo if lo > 0 else None), self.rate + half

    def rel_halfwidth(self) -> float | None:
        """Relative half-width of the estimate's 95 % interval, ``t * SE / rate`` (the part a longer window
        shrinks), None without an interval or a zero rate."""
        if self.t is None or self.se is None or self.rate <= 0:
            return None
        return self.t * self.se / self.rate


@dataclass(frozen=True)
class RateEstimate(RateBounds):
    """A usable-sample rate over one window with the figures of its 95 % interval (any method).

    Attributes:
        rate: usable samples per second over the window, ``k / W``.
        events: k, usable completions ending in the window.
        window_s: W, seconds.
        se: standard error of ``rate`` (samples per second); None without an interval.
        sigma2: long-run variance of the usable count per second (samples² per second); None without one.
        t: the t quantile the half-width uses (``t_{df, 0.975}``); None without an interval.
        method: ``renewal_reward`` (this module) or ``batch_means``.
        cycles: n, requests (cycles) ending in the window, any outcome.
        streams: C, distinct users among them.
        dof: degrees of freedom of ``t``.
        bandwidth: L, the autocorrelation lags weighted in ``V``.
        inflation: ``V / (n s_d^2)``, how much the autocorrelation widened the variance (>= 1).
        reason: why there is no interval (None when there is one).
    """

    rate: float
    events: int
    window_s: float
    se: float | None
    sigma2: float | None
    t: float | None
    method: str = "renewal_reward"
    cycles: int = 0
    streams: int = 0
    dof: int = 0
    bandwidth: int = 0
    inflation: float | None = None
    reason: str | None = None


def cycle_frame(main: pl.DataFrame, start: str, end: str, user: str, usable: str) -> pl.DataFrame:
    """Every request of ``main`` with its cycle: columns ``start``, ``end`` (epoch s), ``stream`` (the user),
    ``x`` (cycle seconds, ``max(end, next start of the same user) - start``)
    and ``y`` (1.0 usable, else 0.0), sorted by start.

    Args:
        main: one row per request (any step, any outcome), holding the four named columns; ``user`` null or "" is
            one anonymous stream per request (its cycle is its E2E).
    """
    u = pl.col(user).fill_null("")
    frame = main.select(
        pl.col(start).cast(pl.Float64).alias("start"), pl.col(end).cast(pl.Float64).alias("end"),
        u.alias("stream"), pl.col(usable).fill_null(False).cast(pl.Float64).alias("y"),
    ).sort("stream", "start")
    nxt = pl.col("start").shift(-1).over("stream")
    nxt = pl.when(pl.col("stream") == "").then(None).otherwise(nxt)
    return frame.with_columns(
        (pl.max_horizontal(pl.col("end"), nxt.fill_null(pl.col("end"))) - pl.col("start")).alias("x"),
    ).sort("start")


def _long_run_variance(d: pl.Series, lags: int) -> tuple[float, float]:
    """(V, n s²): Bartlett-weighted variance of ``sum(d)`` with ``lags`` lags, floored at the independent value
    (column-wise: one pass per lag)."""
    n = d.len()
    c = d - d.mean()
    g0 = float((c * c).sum())  # n * gamma_0
    iid = g0 * n / (n - 1)  # n * s² (sample variance)
    acc = g0
    for k in range(1, lags + 1):
        gk = float((c.head(n - k) * c.tail(n - k)).sum())
        acc += 2.0 * (1.0 - k / (lags + 1)) * gk
    return max(acc * n / (n - 1), iid), iid


def renewal_reward(cycles: pl.DataFrame, w0: float, w1: float) -> RateEstimate:
    """The usable rate over the window ``(w0, w1)`` and its interval, from :func:`cycle_frame`'s cycles.

    Args:
        cycles: :func:`cycle_frame` of the step's requests (the cycles of requests ending outside the window are
            ignored; a request's cycle may reach into the next step).
        w0 / w1: the window, epoch seconds.

    Returns:
        A :class:`RateEstimate` (``method = "renewal_reward"``); with ``reason`` set and no interval when the
        window is empty or holds fewer than :data:`MIN_CYCLES` cycles / :data:`MIN_USABLE` usable ones.
    """
    length = max(0.0, w1 - w0)
    inside = cycles.filter((pl.col("end") > w0) & (pl.col("end") < w1))
    n = inside.height
    ys = inside.get_column("y")
    k = round(float(ys.sum())) if n else 0
    rate = k / length if length > 0 else 0.0
    named = inside.get_column("stream").filter(inside.get_column("stream") != "")
    streams = named.n_unique() + (n - named.len())  # an anonymous request is a stream of its own
    if length <= 0:
        return RateEstimate(rate, k, length, None, None, None, cycles=n, reason="empty window")
    if n < MIN_CYCLES or k < MIN_USABLE:
        why = (f"{n} requests ({k} usable) ended in the {length:.1f} s window: an interval needs at least "
               f"{MIN_CYCLES} ({MIN_USABLE} usable)")
        return RateEstimate(rate, k, length, None, None, None, cycles=n, streams=int(streams), reason=why)
    xs = inside.get_column("x")
    sx = float(xs.sum())
    big_r = k / sx if sx > 0 else 0.0
    d = ys - big_r * xs
    lags = min(n - 1, max(int(streams), math.ceil(n ** (1.0 / 3.0))))
    v, iid = _long_run_variance(d, lags)
    se = math.sqrt(v + streams / 4.0) / length
    return RateEstimate(
        rate, k, length, se, v / length, t_quantile_975(n - 1), cycles=n, streams=int(streams), dof=n - 1,
        bandwidth=lags, inflation=(v / iid) if iid > 0 else 1.0,
    )
