"""Steps that end when the answer is known (``steps.until``): the live margin check of one step.

On the master (or the single local process) a :class:`MarginChecker` is fed every request record of the run as it
is written (:attr:`harness.records.RunDir.on_record`: in master/worker mode the records the workers send). For the
current step it keeps the requests' ``(start, end, user, usable)`` and, when asked, computes the usable-sample
rate's interval with the report's one estimator (:func:`harness.report.interval.cycle_frame` +
:func:`harness.report.interval.renewal_reward`) over the requests that ended since the step's steady window
opened, and returns its relative half-width (``t * SE / rate``).

The window opens as the report's (:mod:`harness.report.steady`): when the first wave has been replaced, i.e. once
each of the step's C users has ended a request after the step start (a request of this step, or the one it had in
flight at the start); the window starts at the latest of those first end times. Live, only the users seen so far
are known, so the window opens once C distinct users have ended a request after the step start. The report
recomputes the window from every record afterwards, so its interval can differ slightly from the live one (the
live one lacks the cycles of requests still in flight: each user's last cycle is its E2E).

The step's decision (:meth:`MarginChecker.decide`): ``reached`` once at least ``until.min`` seconds have passed and
the half-width is at most ``until.margin``; ``max`` once ``until.max`` seconds have passed without that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from harness.config.sections import UntilSpec
from harness.report.interval import cycle_frame, renewal_reward
from harness.result import RequestResult

__all__ = ["Decision", "MarginChecker"]


@dataclass(frozen=True)
class Decision:
    """What a check of the current step found.

    Attributes:
        end: True when the step ends now (margin reached after ``min``, or ``max`` elapsed).
        reached: True when the margin was reached (only meaningful with ``end``).
        elapsed_s: seconds since the step started.
        halfwidth: the relative half-width of the usable rate's 95 % interval (0.05 = ±5 %); None while there is
            no interval (no steady window yet, or too few requests in it).
        window_s: seconds of steady window the half-width was computed over (0 while it is not open).
        requests: requests that ended in the window.
    """

    end: bool
    reached: bool
    elapsed_s: float
    halfwidth: float | None
    window_s: float
    requests: int

    def event(self, step: int, margin: float, wall: float) -> dict[str, object]:
        """The ``until`` event of ``phases.jsonl`` for ``step`` ending on this decision at epoch ``wall``:
        ``reached`` (bool), ``at_s`` (seconds into the step), ``halfwidth`` (relative, or None), ``margin``,
        ``window_s``, ``requests``."""
        return {"event": "until", "step": step, "wall": wall, "reached": self.reached, "at_s": round(self.elapsed_s, 3),
                "halfwidth": self.halfwidth, "margin": margin, "window_s": round(self.window_s, 3),
                "requests": self.requests}


class MarginChecker:
    """The live half-width of the current step's usable rate (see the module docstring).

    Call :meth:`add` with every record (any step; it keeps those that can be in the current step's sample),
    :meth:`begin` at each step start, :meth:`halfwidth` / :meth:`decide` during the step. Not thread-safe (the
    master's gevent loop is one thread).
    """

    def __init__(self, spec: UntilSpec) -> None:
        self.spec = spec
        self.step: int | None = None
        self.start: float = 0.0
        self.users: int = 0
        self._rows: list[tuple[float, float, str, bool]] = []
        self._first_end: dict[str, float] = {}
        self.last: float | None = None  # the last half-width computed (None: no interval yet)

    def begin(self, step: int, start_wall: float, users: int) -> None:
        """A new step ``step`` with ``users`` users started at epoch ``start_wall``: forget the previous one's
        requests but for those still in flight at the start (they end later and are added then)."""
        self.step, self.start, self.users = step, start_wall, users
        self._rows = []
        self._first_end = {}
        self.last = None

    def add(self, res: RequestResult) -> None:
        """One finished request (any phase; warm-up and requests that ended before the step start are ignored)."""
        if self.step is None or res.phase == "warmup" or res.step < 0:
            return
        end = res.end_wall
        if end <= self.start:
            return
        user = res.user or ""
        if user and (res.step == self.step or res.start_wall < self.start):
            prev = self._first_end.get(user)
            if prev is None or end < prev:
                self._first_end[user] = end
        self._rows.append((res.start_wall, end, user, bool(res.usable)))

    def window_start(self) -> float | None:
        """Epoch seconds the steady window opened (the first wave's last end), None while fewer than the step's
        users have ended a request after the step start."""
        if self.users <= 0 or len(self._first_end) < self.users:
            return None
        return max(self._first_end.values())

    def estimate(self, now: float) -> tuple[float | None, float, int]:
        """(relative half-width or None, window seconds, requests ended in the window) at epoch ``now``."""
        ws = self.window_start()
        if ws is None or now <= ws:
            return None, 0.0, 0
        frame = pl.DataFrame(self._rows, schema={"s": pl.Float64, "e": pl.Float64, "u": pl.String, "y": pl.Boolean},
                             orient="row")
        est = renewal_reward(cycle_frame(frame, "s", "e", "u", "y"), ws, now)
        h = est.rel_halfwidth()
        return h, est.window_s, est.cycles

    def decide(self, elapsed_s: float, now: float) -> Decision:
        """The decision ``elapsed_s`` seconds into the step at epoch ``now`` (see the module docstring); records the
        half-width in :attr:`last`."""
        h, w, n = self.estimate(now)
        self.last = h
        reached = h is not None and math.isfinite(h) and h <= self.spec.margin
        if elapsed_s >= self.spec.min and reached:
            return Decision(True, True, elapsed_s, h, w, n)
        return Decision(elapsed_s >= self.spec.max, False, elapsed_s, h, w, n)
