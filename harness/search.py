"""SLO capacity search: bisection over concurrency (or rate) steps for the highest setting that meets the SLOs.

A profile with ``search:`` (:class:`harness.config.SearchSpec`) runs, after the warm-up and the single-stream
phase, one step per probed setting, each for ``steps.duration`` seconds. The master's shape decides the next
setting from the records measured so far (:class:`CapacitySearch`):

1. probe ``low``; if it fails the SLOs, stop (the capacity is below the bounds);
2. probe ``high``; if it passes, stop (the capacity is at least ``high``);
3. otherwise bisect between the highest passing and the lowest failing setting (concurrency: integer midpoints)
   until they are at most ``tolerance`` apart, or ``max_steps`` steps were run.

Each step is measured over its steady window (:func:`harness.report.steady.steady_window`: requests that ended
after the first wave was replaced, up to the step's end) by :func:`measure_step`: each SLO ``<metric>_p<q>_s``
(metric ``ttft`` | ``ttfat`` | ``tpot`` | ``e2e``, percentile ``q``, seconds; TPOT seconds per token) holds when
the ``q``-th percentile of the metric over the window's successful requests is ≤ its threshold.

A step that is under-sampled — no steady window, or fewer than :data:`MIN_SAMPLE` requests (successful or not)
ended in it — is *inconclusive*, never a fail: the driver (:class:`harness.shapes.SearchDriver`) extends it by
another ``steps.duration`` and measures it again over the whole step, at most :data:`MAX_EXTENSIONS` times; still
short, it is recorded as inconclusive (``reason``: "inconclusive (k requests < 10)"). An inconclusive probe is
neither the highest passing nor the lowest failing setting; when the lowest setting is inconclusive the search goes
on (high, then bisection down from the lowest failing setting), and no capacity below the lowest setting is
claimed. A step with at least :data:`MIN_SAMPLE` requests ended but fewer than :data:`MIN_SAMPLE` of them
successful fails (its errors are the answer).

In a rate search the sample is instead the step's successful requests *scheduled* in its schedule window ``[start +
LEAD_S, end)`` (:mod:`harness.report.rate`; the closed-loop first-wave rule does not apply to an arrival stream)
that ended by the time the step is measured (requests still in flight then are left out), and TTFT, TTFAT and E2E
are schedule-relative (from the scheduled send time): the latency the arrival stream sees. A rate step also fails
when it sent more than :data:`harness.report.rate.SHORTFALL_WARN` fewer requests in the window than its schedule
holds (the cap held them back: the missing requests' latencies are not in the sample). Each figure carries a
distribution-free 95 % interval of its percentile (:func:`percentile_interval`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.result import RequestResult
from harness.stats.intervals import quantile_interval
from harness.stats.percentile import percentile
from harness.vocab import SEARCH_SLO_KEY

__all__ = [
    "MAX_EXTENSIONS",
    "MIN_SAMPLE",
    "SLO_KEY",
    "CapacitySearch",
    "Probe",
    "measure_step",
    "percentile_interval",
]

#: The SLO keys a search tests (:data:`harness.vocab.SEARCH_SLO_KEY`).
SLO_KEY = SEARCH_SLO_KEY
#: A step needs at least this many successful requests in its steady window to pass; with fewer requests (of any
#: outcome) ended in it, it is inconclusive.
MIN_SAMPLE = 10
#: An inconclusive step is extended by ``steps.duration`` at most this many times before it is recorded so.
MAX_EXTENSIONS = 3


def percentile_interval(values: Sequence[float], q: float) -> tuple[float | None, float | None]:
    """Distribution-free 95 % confidence interval of the ``q``-th percentile (0..100) of ``values``: the report's
    order-statistic interval (:func:`harness.stats.intervals.quantile_interval`, exact binomial ranks); a bound is
    None when there are too few values to give it on that side."""
    return quantile_interval(values, q)


@dataclass
class Probe:
    """One measured step of the search.

    Attributes:
        setting: the concurrency (users) or rate (requests/s) of the step.
        step: its step index.
        passed: every SLO held (and the sample was large enough).
        inconclusive: too few requests to decide (no steady window, or fewer than :data:`MIN_SAMPLE` requests
            ended in it): neither a pass nor a fail.
        figures: per SLO key: ``value`` (the percentile, seconds), ``low`` / ``high`` (its 95 % interval, None
            when unbounded), ``threshold`` (seconds), ``ok``.
        sample: successful requests in the steady window.
        window_s: the steady window's length (seconds; 0 without one).
        reason: why it did not pass on its figures alone (inconclusive: no steady window or too few requests; too
            few successful requests; a rate step's shortfall); None otherwise.
        extensions: times the step was extended (by ``steps.duration``) because it was inconclusive.
        span: the ``(start, end)`` (epoch s) the step was measured over, as given to :func:`measure_step` (the
            master measures when the step's settle time is over, a little before the next step's ``phase_start``
            is written: re-measuring from the records needs this end, not that event's); None when not measured.
    """

    setting: float
    step: int
    passed: bool
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)
    sample: int = 0
    window_s: float = 0.0
    reason: str | None = None
    inconclusive: bool = False
    extensions: int = 0
    span: tuple[float, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"setting": self.setting, "step": self.step, "passed": self.passed, "figures": self.figures,
                "sample": self.sample, "window_s": self.window_s, "reason": self.reason,
                "inconclusive": self.inconclusive, "extensions": self.extensions,
                "span": list(self.span) if self.span is not None else None}


def _metric(r: RequestResult, name: str, schedule_relative: bool) -> float | None:
    v = getattr(r, name)
    if v is None:
        return None
    if schedule_relative and name != "tpot" and r.scheduled_wall is not None:
        return float(v) + max(0.0, r.start_wall - r.scheduled_wall)
    return float(v)


#: The record fields the steady window reads (:func:`harness.report.columns.steady_windows`).
_WINDOW_FIELDS = ("user", "phase", "step", "start_wall", "e2e", "t_last_token", "ttfat", "ttft", "t_headers", "ok",
                  "usable")


def _window_frame(records: Sequence[RequestResult]) -> Any:
    """The prepared polars frame (:func:`harness.report.columns.prepare`) of ``records``' steady-window fields,
    numbered in list order (:data:`harness.report.frame.ROW`)."""
    import polars as pl

    from harness.report.columns import prepare
    from harness.report.frame import RECORD_SCHEMA, ROW

    schema = {k: RECORD_SCHEMA[k] for k in _WINDOW_FIELDS}
    frame = pl.DataFrame({k: [getattr(r, k) for r in records] for k in _WINDOW_FIELDS}, schema=schema)
    return prepare(frame.with_row_index(ROW).with_columns(pl.col(ROW).cast(pl.Int64)))


def measure_step(setting: float, step: int, start: float, end: float, records: Sequence[RequestResult],
                 slos: dict[str, float], schedule_relative: bool = False, scheduled: int | None = None) -> Probe:
    """Measure one step ``[start, end)`` (epoch s) against ``slos`` (:data:`SLO_KEY` -> seconds).

    ``records``: every record of the run so far (warm-up included; the steady window needs the requests in flight
    at the step's start). ``schedule_relative``: a rate step (module docstring), ``scheduled`` the arrivals its
    schedule holds in the schedule window (None: not checked). See the module docstring for the rule.
    """
    from harness.rate import LEAD_S
    from harness.report.columns import steady_windows  # the report package only when a search runs (master)
    from harness.report.load import Phase
    from harness.report.rate import SHORTFALL_WARN

    short: str | None = None
    if schedule_relative:
        a = start + LEAD_S
        timed = [r for r in records if r.step == step and r.scheduled_wall is not None and a <= r.scheduled_wall < end]
        sample = [r for r in timed if r.ok]
        ended = len(timed)
        w0, w1 = a, end
        sent = sum(1 for r in timed if r.start_wall < end)
        if scheduled and 1 - sent / scheduled > SHORTFALL_WARN:
            short = f"sent {sent} of {scheduled} scheduled requests ({100 * (1 - sent / scheduled):.0f} % short)"
    else:
        phase = Phase("step", step, int(setting) if setting == int(setting) else 1, start, end)
        (w,) = steady_windows(_window_frame(records), [phase])  # the report's steady window, over a frame
        if not w.steady:
            return Probe(setting, step, False, reason=f"inconclusive (no steady window: {w.reason})",
                         inconclusive=True, span=(start, end))
        in_window = [r for r in records if r.step == step and w.start <= r.end_wall < w.end]
        sample = [r for r in in_window if r.ok]
        ended = len(in_window)
        w0, w1 = w.start, w.end
    probe = Probe(setting, step, True, sample=len(sample), window_s=max(0.0, w1 - w0), span=(start, end))
    for key, threshold in slos.items():
        m = SLO_KEY.match(key)
        assert m is not None, key  # validated by the profile
        name, q = m.group(1), float(m.group(2))
        vals = sorted(v for v in (_metric(r, name, schedule_relative) for r in sample) if v is not None)
        value = percentile(vals, q)
        lo, hi = percentile_interval(vals, q)
        ok = value is not None and value <= threshold
        probe.figures[key] = {"value": value, "low": lo, "high": hi, "threshold": threshold, "ok": ok, "n": len(vals)}
        probe.passed = probe.passed and ok
    if ended < MIN_SAMPLE:
        probe.passed = False
        probe.inconclusive = True
        probe.reason = f"inconclusive ({ended} requests < {MIN_SAMPLE})"
    elif len(sample) < MIN_SAMPLE:
        probe.passed = False
        probe.reason = f"only {len(sample)} successful of {ended} requests in the window (< {MIN_SAMPLE})"
    if short is not None:
        probe.passed = False
        probe.inconclusive = False  # the cap held requests back: a fail, whatever the sample
        probe.reason = short
    return probe


class CapacitySearch:
    """The bisection (module docstring) over ``[low, high]`` with ``tolerance``, at most ``max_steps`` probes.

    Args:
        axis: "concurrency" (integer settings) or "rate" (requests/s).
        low / high: the bounds (low < high).
        tolerance: stop when the highest passing and lowest failing settings are at most this far apart.
        max_steps: probes at most.
    """

    def __init__(self, axis: str, low: float, high: float, tolerance: float, max_steps: int) -> None:
        self.axis = axis
        self.low = low
        self.high = high
        self.tolerance = tolerance
        self.max_steps = max_steps
        self.probes: list[Probe] = []

    def _fmt(self, v: float) -> float:
        return float(round(v)) if self.axis == "concurrency" else float(v)

    def best_pass(self) -> Probe | None:
        """The passing probe of the highest setting, None when none passed."""
        ok = [p for p in self.probes if p.passed]
        return max(ok, key=lambda p: p.setting) if ok else None

    def first_fail(self) -> Probe | None:
        """The failing (not inconclusive) probe of the lowest setting above every passing one, None when none
        failed there."""
        best = self.best_pass()
        floor = best.setting if best is not None else -math.inf
        bad = [p for p in self.probes if not p.passed and not p.inconclusive and p.setting > floor]
        return min(bad, key=lambda p: p.setting) if bad else None

    def _low_probe(self) -> Probe | None:
        low = self._fmt(self.low)
        return next((p for p in self.probes if p.setting == low), None)

    def next_setting(self) -> float | None:
        """The next setting to probe, None when the search is done."""
        if len(self.probes) >= self.max_steps:
            return None
        settings = {p.setting for p in self.probes}
        if not self.probes:
            return self._fmt(self.low)
        best, fail = self.best_pass(), self.first_fail()
        low = self._low_probe()
        if best is None and low is not None and not low.inconclusive:
            return None  # low failed: below the bounds
        # the bisection's floor: the highest passing setting, or low when it was inconclusive (not a fail)
        floor = best.setting if best is not None else self._fmt(self.low)
        if fail is None:
            return None if self._fmt(self.high) in settings else self._fmt(self.high)
        if fail.setting - floor <= self.tolerance:
            return None
        mid = (floor + fail.setting) / 2
        mid = float(math.floor(mid)) if self.axis == "concurrency" else mid
        if mid in settings or mid <= floor:
            return None  # (an inconclusive midpoint ends the bisection: the verdict names it)
        return mid

    def observe(self, probe: Probe) -> None:
        """Add a measured step."""
        self.probes.append(probe)

    def result(self) -> dict[str, Any]:
        """The search's outcome (JSON-ready): ``axis``, bounds, ``tolerance``, ``highest_pass`` / ``lowest_fail``
        (probe dicts or None), ``converged`` (the two are within the tolerance), ``verdict`` (one sentence),
        ``inconclusive`` (settings whose probes had too few requests), ``probes`` in the order run. An inconclusive
        lowest setting never gives "the capacity is below it"."""
        best, fail = self.best_pass(), self.first_fail()
        unit = "users" if self.axis == "concurrency" else "req/s"
        low = self._low_probe()
        if best is None and low is not None and low.inconclusive:
            verdict = (f"inconclusive: the lowest setting ({self.low:g} {unit}) had too few requests to decide "
                       f"({str(low.reason).removeprefix('inconclusive (').removesuffix(')')} after {low.extensions} "
                       "extension(s)) and no setting met the SLOs")
            verdict += (f"; the lowest failing setting is {fail.setting:g} {unit}: the capacity is below that, not "
                        f"shown to be below {self.low:g} {unit}" if fail is not None else "")
        elif best is None:
            verdict = f"even the lowest setting ({self.low:g} {unit}) fails the SLOs: the capacity is below it"
        elif fail is None:
            verdict = f"the highest setting ({best.setting:g} {unit}) meets the SLOs: the capacity is at least that"
        else:
            verdict = (f"capacity between {best.setting:g} (meets the SLOs) and {fail.setting:g} {unit} (fails "
                       f"them)")
        converged = best is not None and fail is not None and fail.setting - best.setting <= self.tolerance
        open_ = [p for p in self.probes if p.inconclusive and p is not low
                 and (best is None or p.setting > best.setting) and (fail is None or p.setting < fail.setting)]
        if open_:
            verdict += "; inconclusive (too few requests) at " + ", ".join(f"{p.setting:g}" for p in open_) + f" {unit}"
        elif best is not None and fail is not None and not converged:
            verdict += f"; not within the tolerance {self.tolerance:g} after {len(self.probes)} steps (max_steps)"
        return {"axis": self.axis, "low": self.low, "high": self.high, "tolerance": self.tolerance,
                "highest_pass": best.as_dict() if best else None, "lowest_fail": fail.as_dict() if fail else None,
                "converged": converged, "verdict": verdict,
                "inconclusive": [p.setting for p in self.probes if p.inconclusive],
                "probes": [p.as_dict() for p in self.probes]}
