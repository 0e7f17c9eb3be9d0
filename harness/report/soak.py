"""Soak analysis: a step's steady window cut into time slices, and a drift test over them.

Slices: the steady window ``(w0, w1)`` of a step is cut into ``floor((w1 - w0) / slice_s)`` consecutive slices of
``slice_s`` seconds from ``w0`` (a remainder shorter than a slice at the end is left out); a step with fewer than
:data:`MIN_SLICES` slices, or no steady window, gets none. Per slice (:func:`slice_figures`): output tok/s
(:func:`harness.report.tokens.window_tokens` over the slice ÷ its length), req/s (usable completions ending in
the slice ÷ its length), and over the requests *ending* in the slice: TTFT and TTFAT p50/p99 (successful requests),
error rate (failed ÷ ended) and truncation rate (truncated ÷ successful).

A request ends in slice ``(t0, t1]`` when ``t0 < end <= t1``, the step sample's rule
(:func:`harness.report.exprs.in_sample`: ended after the window start ``w0``): the request ending exactly at ``w0``
(the one that opened the window) is in no slice, one ending exactly on a boundary between two slices is in the
earlier one, and one ending exactly at the window end ``w1`` (outside the step's sample) is in none; so the slices'
requests are the step's sample, less those ending in a left-out remainder.

Drift (:func:`drift_test`): ordinary least squares of a figure against slice mid-time (hours), slope per hour with
its 95 % interval from the t distribution with n − 2 degrees of freedom (slope ± t₀.₉₇₅ × standard error, standard
error = √(Σ residual² ÷ (n − 2) ÷ Σ (x − x̄)²)). A drift is flagged when the interval excludes 0 AND the total
change over the slices (|slope| × their span) exceeds :data:`DRIFT_MIN_CHANGE` of the figure's mean AND, for the
figures of :data:`DRIFT_MIN_ABS_CHANGE` (TTFT p50), exceeds that absolute amount in the figure's unit, so that a
statistically clear but negligible trend is not called drift (a 20 ms TTFT moving 2 ms is +10 % but timing noise).
The Prometheus alert LlmloadTTFTDrift (prometheus/alerts.yml) applies the same absolute floor to its change over an
hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from harness.report.exprs import END, OK, USABLE, flag, pctl
from harness.report.model import StepRow
from harness.report.stats import mean
from harness.report.tokens import WINDOW_INDEX, tokens_in_windows, window_of
from harness.stats.intervals import linear_fit, t_quantile_975

__all__ = [
    "DRIFT_METRICS",
    "DRIFT_MIN_ABS_CHANGE",
    "DRIFT_MIN_CHANGE",
    "MIN_DRIFT_SLICES",
    "MIN_SLICES",
    "drift_notes",
    "drift_test",
    "drift_text",
    "linear_fit",
    "slice_bounds",
    "slice_figures",
    "slices_figures",
    "step_drift",
    "step_slices",
    "t_quantile_975",
]

#: A step gets slices only when its steady window holds at least this many whole slices.
MIN_SLICES = 2
#: The drift test (and the Markdown "Soak" section) needs at least this many slices (n − 2 ≥ 1 degree of freedom).
MIN_DRIFT_SLICES = 3
#: A drift is flagged only when the total change over the step exceeds this share of the figure's mean.
DRIFT_MIN_CHANGE = 0.05
#: Beside :data:`DRIFT_MIN_CHANGE`, an absolute floor per figure (its own unit): a drift is flagged only when the total
#: change over the step also exceeds it. TTFT p50: 5 ms (seconds here), above client timing noise (a 20 ms TTFT
#: moving 2 ms is not drift); prometheus/alerts.yml's LlmloadTTFTDrift uses the same 5 ms over its hour
#: (tests/test_alerts.py checks they agree). Figures not listed have no absolute floor.
DRIFT_MIN_ABS_CHANGE: dict[str, float] = {"ttft_p50_s": 0.005}

#: Slice figures tested for drift: key in a slice dict -> (name in notes, word when it rises, word when it falls).
DRIFT_METRICS: dict[str, tuple[str, str, str]] = {
    "output_tps": ("tok/s", "rose", "fell"),
    "ttft_p50_s": ("TTFT p50", "rose", "fell"),
    "error_rate": ("error rate", "rose", "fell"),
}


def slice_bounds(w0: float, w1: float, slice_s: float) -> list[tuple[float, float]]:
    """Whole slices ``[(t0, t1), ...]`` (epoch seconds) of ``slice_s`` seconds from ``w0`` inside ``[w0, w1)``.

    Empty when fewer than :data:`MIN_SLICES` fit. Raises ValueError when ``slice_s`` is not > 0.
    """
    if not slice_s > 0:
        raise ValueError(f"slice_s must be > 0 seconds, got {slice_s!r}")
    n = math.floor((w1 - w0) / slice_s + 1e-9) if w1 > w0 else 0
    if n < MIN_SLICES:
        return []
    return [(w0 + i * slice_s, w0 + (i + 1) * slice_s) for i in range(n)]


def slice_figures(main: pl.DataFrame, t0: float, t1: float, window_end: float | None = None) -> dict[str, Any]:
    """Figures of one slice ``(t0, t1]`` (epoch seconds; ``t1`` excluded too when it is ``window_end``, the steady
    window's end) over ``main`` (the run's non-warm-up records as a prepared frame,
    :attr:`harness.report.columns.FrameRun.main`; any superset of the records that start before ``t1`` and end at or
    after ``t0`` gives the same figures).

    Returns ``start_wall``, ``end_wall``, ``output_tokens`` (tokens generated in the slice), ``output_tps``,
    ``usable_completions``, ``request_rate`` (usable ends ÷ slice length, req/s), ``ended`` (requests ending in
    the slice), ``errors``, ``error_rate`` (errors ÷ ended), ``truncated``, ``truncation_rate`` (truncated ÷
    successful ended), ``ttft_p50_s`` / ``ttft_p99_s`` / ``ttfat_p50_s`` / ``ttfat_p99_s`` (seconds, successful
    requests ending in the slice). Rates and percentiles are None without requests to compute them over.
    """
    return slices_figures(main, [(t0, t1)], window_end)[0]


def slices_figures(main: pl.DataFrame, bounds: Sequence[tuple[float, float]], window_end: float | None = None
                   ) -> list[dict[str, Any]]:
    """:func:`slice_figures` of each slice of ``bounds`` (one slice, or consecutive equal ones, epoch seconds), in
    one pass over ``main``: each request is placed in the slice its end falls in (``t0 < end <= t1``: slices tile
    the window as the step sample does, module docstring; a request ending exactly at ``window_end``, the steady
    window's end, is outside the sample and so in no slice) and its tokens in the slices it reaches
    (:func:`harness.report.tokens.tokens_in_windows`).
    """
    if not bounds:
        return []
    ok = pl.col(OK)
    ended = _ended_in(main.select(END, OK, USABLE, "truncated", "ttft", "ttfat"), bounds, window_end)
    by = ended.group_by(WINDOW_INDEX).agg(
        pl.len().alias("ended"), ok.sum().alias("ok"), (ok & pl.col(USABLE)).sum().alias("usable"),
        (ok & flag("truncated")).sum().alias("truncated"),
    )
    lat = ended.filter(ok).group_by(WINDOW_INDEX).agg(
        pctl("ttft", 50).alias("ttft_p50_s"), pctl("ttft", 99).alias("ttft_p99_s"),
        pctl("ttfat", 50).alias("ttfat_p50_s"), pctl("ttfat", 99).alias("ttfat_p99_s"),
    )
    counts = {g.pop(WINDOW_INDEX): g for g in by.iter_rows(named=True)}
    lats = {g.pop(WINDOW_INDEX): g for g in lat.iter_rows(named=True)}
    no_lat = dict.fromkeys(("ttft_p50_s", "ttft_p99_s", "ttfat_p50_s", "ttfat_p99_s"))
    tokens = tokens_in_windows(main, bounds)
    out = []
    for i, ((t0, t1), toks) in enumerate(zip(bounds, tokens, strict=True)):
        length = t1 - t0
        c = counts.get(i) or {"ended": 0, "ok": 0, "usable": 0, "truncated": 0}
        n_ended, n_ok, usable, truncated = (int(c[k]) for k in ("ended", "ok", "usable", "truncated"))
        errors = n_ended - n_ok
        out.append({
            "start_wall": t0,
            "end_wall": t1,
            "output_tokens": toks,
            "output_tps": toks / length,
            "usable_completions": usable,
            "request_rate": usable / length,
            "ended": n_ended,
            "errors": errors,
            "error_rate": errors / n_ended if n_ended else None,
            "truncated": truncated,
            "truncation_rate": truncated / n_ok if n_ok else None,
            **lats.get(i, no_lat),
        })
    return out


def step_slices(row: dict[str, Any], main: pl.DataFrame, slice_s: float) -> list[dict[str, Any]]:
    """The slices of a report row (:func:`harness.report.columns.step_rows`): [] when the row is NOT steady or its
    window holds fewer than :data:`MIN_SLICES` slices. Each slice is :func:`slice_figures` plus ``start_s`` (from
    the step's start, seconds). ``main``: the run's non-warm-up records, prepared."""
    if not row["steady"]:
        return []
    bounds = slice_bounds(row["window_start_wall"], row["window_end_wall"], slice_s)
    figures = slices_figures(main, bounds, row["window_end_wall"])
    return [{"start_s": s["start_wall"] - row["start_wall"], **s} for s in figures]


def _ended_in(frame: pl.DataFrame, bounds: Sequence[tuple[float, float]], window_end: float | None
              ) -> pl.DataFrame:
    """``frame`` (with :data:`END`) with :data:`WINDOW_INDEX`, the slice of ``bounds`` each row ENDED in
    (``t0 < end <= t1``), rows in none (or ending exactly at ``window_end``) dropped.

    :func:`harness.report.tokens.window_of` places values in half-open ``[t0, t1)``; negated, ``-t1 <= -end < -t0``
    is ``t0 < end <= t1`` exactly (negation is exact in floating point), over the slices in reverse order."""
    if window_end is not None:
        frame = frame.filter(pl.col(END) != window_end)
    neg = -pl.col(END)
    mirrored = [(-t1, -t0) for t0, t1 in reversed(bounds)]
    got = window_of(frame, neg, neg, pl.lit(0.0), mirrored)
    return got.with_columns((len(bounds) - 1 - pl.col(WINDOW_INDEX)).alias(WINDOW_INDEX))


def _pct_of(v: float, m: float | None) -> float | None:
    return 100.0 * v / m if m else None


def drift_test(times_s: Sequence[float], values: Sequence[float | None], span_s: float,
               min_abs_change: float = 0.0) -> dict[str, Any] | None:
    """Least-squares drift of ``values`` against ``times_s`` (slice mid-times, seconds; None values skipped).

    Args:
        times_s: each slice's mid-time, seconds (any origin).
        values: the figure per slice (its unit; None where undefined).
        span_s: the time the slices cover (seconds), over which the total change is taken.
        min_abs_change: the absolute floor (the figure's unit) the total change |slope| × span must also exceed to
            be flagged (:data:`DRIFT_MIN_ABS_CHANGE`); 0 for none.

    Returns:
        None with fewer than :data:`MIN_DRIFT_SLICES` defined values, else ``n``, ``mean``, ``slope_per_h``,
        ``slope_low_per_h`` / ``slope_high_per_h`` (95 % interval, the figure's unit per hour), ``t975``,
        ``slope_pct_per_h`` / ``low_pct_per_h`` / ``high_pct_per_h`` (the same as % of the mean per hour; None when
        the mean is 0), ``change_pct`` (slope × span as % of the mean), ``significant`` (the interval excludes 0)
        and ``flagged`` (significant, |change_pct| > :data:`DRIFT_MIN_CHANGE` × 100 and |slope| × span >
        ``min_abs_change``).
    """
    pts = [(t / 3600.0, float(v)) for t, v in zip(times_s, values, strict=True) if v is not None]
    if len(pts) < MIN_DRIFT_SLICES:
        return None
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    b, se, _ = linear_fit(xs, ys)
    t = t_quantile_975(len(pts) - 2)
    lo, hi = b - t * se, b + t * se
    m = mean(ys)
    change_abs = b * span_s / 3600.0
    change = _pct_of(change_abs, m)
    significant = lo > 0 or hi < 0
    return {
        "n": len(pts),
        "mean": m,
        "slope_per_h": b,
        "slope_low_per_h": lo,
        "slope_high_per_h": hi,
        "t975": t,
        "slope_pct_per_h": _pct_of(b, m),
        "low_pct_per_h": _pct_of(lo, m),
        "high_pct_per_h": _pct_of(hi, m),
        "change_pct": change,
        "significant": significant,
        "flagged": bool(significant and change is not None and abs(change) > 100.0 * DRIFT_MIN_CHANGE
                        and abs(change_abs) > min_abs_change),
    }


def drift_text(metric: str, d: dict[str, Any]) -> str:
    """A drift in words, e.g. ``tok/s fell 12.4 %/h (95 % −15.1 … −9.7)`` (% of the step's mean per hour)."""
    name, up, down = DRIFT_METRICS.get(metric, (metric, "rose", "fell"))
    pct, lo, hi = d["slope_pct_per_h"], d["low_pct_per_h"], d["high_pct_per_h"]
    if pct is None and d["slope_per_h"] == 0 and d["slope_low_per_h"] == d["slope_high_per_h"] == 0:
        return f"{name} 0 in every slice"
    if pct is None:
        return f"{name} slope {d['slope_per_h']:+.4g}/h (95 % {d['slope_low_per_h']:.4g} … {d['slope_high_per_h']:.4g})"
    word = up if pct > 0 else down
    return f"{name} {word} {abs(pct):.1f} %/h (95 % {lo:.1f} … {hi:.1f})".replace("-", "−")


def step_drift(slices: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Drift of each of :data:`DRIFT_METRICS` over a step's slices (:func:`step_slices`):
    ``{metric: drift_test(...) (with the metric's :data:`DRIFT_MIN_ABS_CHANGE`) with "text" added, or None}``;
    all None with fewer than :data:`MIN_DRIFT_SLICES`."""
    out: dict[str, dict[str, Any] | None] = {}
    if not slices:
        return dict.fromkeys(DRIFT_METRICS)
    mids = [0.5 * (s["start_wall"] + s["end_wall"]) - slices[0]["start_wall"] for s in slices]
    span = slices[-1]["end_wall"] - slices[0]["start_wall"]
    for key in DRIFT_METRICS:
        d = drift_test(mids, [s[key] for s in slices], span, DRIFT_MIN_ABS_CHANGE.get(key, 0.0))
        if d is not None:
            d["text"] = drift_text(key, d)
        out[key] = d
    return out


def drift_notes(rows: Sequence[StepRow]) -> list[str]:
    """One note per flagged drift of the report rows (each carrying ``slices`` and ``drift``)."""
    notes = []
    for row in rows:
        slices = row.slices
        for d in (row.drift.output_tps, row.drift.ttft_p50_s, row.drift.error_rate):
            if not d or not d.flagged:
                continue
            span = float(slices[-1].end_wall or 0.0) - float(slices[0].start_wall or 0.0) if slices else 0.0
            notes.append(
                f"{row.label}: DRIFT: {d.text} over {d.n} slices ({span / 3600.0:.2f} h of the steady "
                f"window); total change {d.change_pct:+.1f} % of the step's mean: the step's averages do not "
                "describe a stable server.".replace("-", "−")
            )
    return notes
