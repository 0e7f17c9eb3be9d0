"""Steady-state window of a step: the part after the first wave of requests has been replaced.

For step k with wall interval ``[s, e)``: every user active in the step (users with a record of step k, plus
users whose request was in flight at ``s``) contributes the end time of its first request that ends after
``s`` (the request in flight at ``s``, or its first request of the step). The window starts at the latest of
those end times, ``ws = max(...)``, and is ``[ws, e)``. From ``ws`` on every in-flight request was started
inside the step, at the step's concurrency. When ``ws >= e`` the step has no steady window; nor has it when the
window ``[ws, e)`` is shorter than :data:`MIN_STEADY_E2E` x the mean E2E of the step's requests (a step shorter
than its requests: the few requests ending in so short a window are the short ones, and each user completes
less than one). Either way the reason names the step duration that would give one: the first wave plus
:data:`NEEDED_E2E` x the mean E2E.

Warm-up requests in flight at ``s`` count in the first wave (they load the server) but, ending before
``ws`` by construction, they never contribute to any figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.report.load import Phase

__all__ = ["MIN_STEADY_E2E", "NEEDED_E2E", "Window", "close_window"]

#: A steady window must last at least this many mean E2E latencies of the step's requests (half: each user is
#: expected to complete a request in it with probability >= 1/2; a shorter window after the first wave holds next
#: to no completion, as in a step shorter than its requests).
MIN_STEADY_E2E = 0.5
#: The step duration a NOT steady step is told it needs: first wave + this many mean E2E latencies.
NEEDED_E2E = 2.0


@dataclass(frozen=True)
class Window:
    """The steady window of one step (wall-clock epoch seconds).

    Attributes:
        start / end: the window ``[start, end)``; ``start == first_wave_end`` (``end`` is the step's end).
        first_wave_end: when the last request of the first wave ended (``ws``), possibly after the step end.
        steady: True when there is a non-empty window and the step recorded at least one request.
        users: number of users counted in the first wave.
        method: "users" (per-user first requests) or "first_c_requests" (records without user ids: the
            requests in flight at the step start plus the first C - in-flight requests of the step).
        reason: why the step is not steady (None when steady).
    """

    start: float
    end: float
    first_wave_end: float
    steady: bool
    users: int
    method: str
    reason: str | None = None

    @property
    def length(self) -> float:
        """Window length in seconds (0 when there is no window)."""
        return max(0.0, self.end - self.start)


def close_window(phase: Phase, ws: float, recorded: bool, users: int, method: str,
                 e2e_mean: float | None = None) -> Window:
    """The :class:`Window` of ``phase`` whose first wave ended at ``ws`` (epoch s; clamped to the step start):
    not steady when the step recorded no request (``recorded`` False), ``ws`` is at or after the step's end, or
    the window is shorter than :data:`MIN_STEADY_E2E` x ``e2e_mean`` (the mean E2E of the step's requests,
    seconds; None skips that rule). The reason then names the step duration needed (seconds from the step start:
    first wave + :data:`NEEDED_E2E` x ``e2e_mean``).
    The window's start rule (the first wave) is computed over the record frame by
    :func:`harness.report.columns.steady_windows`."""
    s, e = phase.start, phase.end
    ws = max(ws, s)
    reason: str | None = None
    if not recorded:
        reason = "no request of this step was recorded"
    elif ws >= e or (e2e_mean and e - ws < MIN_STEADY_E2E * e2e_mean):
        shorter = (f"step too short for steady state: first wave ended at +{ws - s:.1f} s, step lasted "
                   f"{e - s:.1f} s" if ws >= e else
                   f"step shorter than its requests: the window after the first wave (+{ws - s:.1f} s) lasted "
                   f"{e - ws:.1f} s, less than {MIN_STEADY_E2E:g} × the mean E2E ({e2e_mean or 0.0:.1f} s) of the "
                   "step's requests")
        if e2e_mean:
            need = math.ceil(max(ws, s) - s + NEEDED_E2E * e2e_mean)
            shorter += (f"; a steady window needs a step of ≥ {need:,} s (first wave + {NEEDED_E2E:g} × mean E2E "
                        f"{e2e_mean:.1f} s)")
        reason = shorter
    return Window(start=min(ws, e), end=e, first_wave_end=ws, steady=reason is None, users=users, method=method,
                  reason=reason)
