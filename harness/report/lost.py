"""Workers lost mid-run (``worker_lost`` events of ``phases.jsonl``, :mod:`harness.locust.lost`) and the steps
they left short of users.

A lost worker's users stop at once; Locust gives their share to the live workers only when the user count next
changes (or it drops the missing worker, about a minute later; a worker that quit has its users re-dispatched at
once). So from the worker's last heartbeat (``since_wall``) until then fewer users than the target ran: the
*shortfall* (:func:`shortfall_end`). Every step
whose window (its steady window, else the whole step) overlaps a shortfall is marked not steady: its figures are
for fewer users than its C.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from harness.report.exprs import END, OK, START
from harness.report.load import Phase
from harness.report.rundata import PhaseEvent, WorkerBack, WorkerLost
from harness.report.steady import Window

__all__ = ["MISSING_DROPPED_AFTER_S", "WorkerLoss", "apply_losses", "loss_note", "losses_and_stalls", "shortfall_end",
           "stalled_outages", "worker_losses"]


@dataclass(frozen=True)
class WorkerLoss:
    """One worker lost while the load ran.

    Attributes:
        worker: Locust's client id.
        since: epoch seconds from which its users may have been gone (its last heartbeat).
        detected: epoch seconds when the master saw it lost.
        state: "missing" (no heartbeat: killed, hung) or "gone" (it quit).
        users: its users at the master's last look before the loss (None: unknown).
        in_flight: its requests in flight that were never recorded (None: unknown; 0 for a worker that quit,
            which let them finish).
        until: for a worker that came back (:func:`stalled_outages`), epoch seconds when its users ran again: its
            ``worker_back``, or later, when the last of its requests in flight at ``since`` ended; None for a worker
            that did not come back.
    """

    worker: str
    since: float
    detected: float
    state: str
    users: int | None
    in_flight: int | None
    until: float | None = None

    def describe(self) -> str:
        """``worker ID stopped answering (2 users, 2 requests in flight lost)``; ``unknown`` for a missing count."""
        if self.until is not None:
            users = "unknown" if self.users is None else str(self.users)
            return (f"worker {self.worker} was missing for {self.until - self.since:.1f} s (no heartbeat, then back) "
                    f"and none of its requests completed while the master heard nothing ({users} users stalled)")
        how = "stopped answering (no heartbeat)" if self.state == "missing" else "quit"
        users = "unknown" if self.users is None else str(self.users)
        lost = "unknown" if self.in_flight is None else str(self.in_flight)
        return f"worker {self.worker} {how} ({users} users lost, requests in flight not recorded: {lost})"


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _count(v: Any) -> int | None:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def worker_losses(events: Sequence[PhaseEvent]) -> list[WorkerLoss]:
    """The ``worker_lost`` events of ``phases.jsonl`` (in the order written); an event without a ``wall`` is
    skipped, and so is one withdrawn by a later ``worker_back`` of the same worker (it was late, not dead: its users
    kept running)."""
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, WorkerLost):
            continue
        if any(isinstance(b, WorkerBack) and b.worker == e.worker for b in events[i + 1:]):
            continue
        detected = _num(e.wall)
        if detected is None:
            continue
        since = _num(e.since_wall)
        out.append(WorkerLoss(worker=e.worker or "?", since=min(detected, since or detected),
                              detected=detected, state=e.state or "missing",
                              users=_count(e.users), in_flight=_count(e.in_flight)))
    return out


#: Seconds after its last heartbeat when Locust drops a missing worker and gives its users to the live ones
#: (``HEARTBEAT_LIVENESS`` + ``-HEARTBEAT_DEAD_INTERNAL`` heartbeats of 1 s, Locust 2.x).
MISSING_DROPPED_AFTER_S = 63.0

#: Seconds between a Locust worker's heartbeats (``locust.runners.HEARTBEAT_INTERVAL``, Locust 2.x): a worker's last
#: heartbeat may precede the moment it was cut off by up to this much.
HEARTBEAT_INTERVAL_S = 1.0


def stalled_outages(events: Sequence[PhaseEvent], frame: pl.DataFrame) -> list[WorkerLoss]:
    """Workers that went missing and came back (a ``worker_lost`` then a ``worker_back``) whose users did *not* keep
    running meanwhile, as :class:`WorkerLoss` with ``until`` set.

    A ``worker_back`` withdraws a loss (:func:`worker_losses`): a worker whose heartbeats were late kept its users.
    But a worker cut off by the network also comes back, and its users were stalled, not running. The records tell
    the two apart: a worker counts as stalled when none of its requests (its users' ids start with the last 12
    characters of its client id) completed successfully from one heartbeat interval after its last heartbeat
    (``since_wall`` + :data:`HEARTBEAT_INTERVAL_S`: it may have been cut off that long after it) until the master
    declared it lost (the ``worker_lost``'s ``wall``). Completions between that and its ``worker_back`` do not
    count: when a cut link comes back, the data the server had sent meanwhile arrives at once and the stalled
    requests complete, in an order against the resumed heartbeats that TCP's retransmission timers decide. A worker
    with few users and requests longer than that span (~4 s in Locust 2.x) is called stalled even if it was only
    late: the step is then NOT steady, the conservative side. Its shortfall lasts until the later of the
    ``worker_back`` and the end of the last of its requests that was in flight at ``since_wall`` (those waited on a
    dead link until a timeout, or until the link came back).

    Args:
        events: the run's ``phases.jsonl`` events.
        frame: the records frame (:mod:`harness.report.exprs` columns ``_start``, ``_end``, ``_ok`` and ``user``).
    """
    out = []
    for i, e in enumerate(events):
        if not isinstance(e, WorkerLost):
            continue
        back = next((b for b in events[i + 1:] if isinstance(b, WorkerBack) and b.worker == e.worker), None)
        detected, back_at = _num(e.wall), _num(back.wall) if back is not None else None
        if detected is None or back_at is None:
            continue
        since = min(detected, _num(e.since_wall) or detected)
        short = (e.worker or "?")[-12:]
        mine = frame.filter(pl.col("user").str.starts_with(f"{short}:")).select(START, END, OK)
        if mine.filter(pl.col(OK) & (pl.col(END) > since + HEARTBEAT_INTERVAL_S) & (pl.col(END) <= detected)).height:
            continue  # its streams progressed while the master heard nothing: late heartbeats, users running
        cut = mine.filter((pl.col(START) <= since) & (pl.col(END) > since)).get_column(END).max()
        until = max(back_at, float(cut)) if isinstance(cut, (int, float)) else back_at
        out.append(WorkerLoss(worker=e.worker or "?", since=since, detected=detected, state=e.state or "missing",
                              users=_count(e.users), in_flight=_count(e.in_flight), until=until))
    return out


def losses_and_stalls(events: Sequence[PhaseEvent], frame: pl.DataFrame) -> list[WorkerLoss]:
    """Every shortfall of users the steps' windows are checked against: the workers lost and not back
    (:func:`worker_losses`) and those back after a stall (:func:`stalled_outages`)."""
    return worker_losses(events) + stalled_outages(events, frame)


def shortfall_end(loss: WorkerLoss, phases: Sequence[Phase]) -> float:
    """Epoch seconds when the users ``loss`` took were given back to the live workers: for a worker that came back
    (``loss.until``), then; for a worker that quit, when the master saw it (Locust re-dispatches at once); for a
    missing one, the start of the first phase after the loss whose concurrency differs from the phase running at
    ``loss.since``, or :data:`MISSING_DROPPED_AFTER_S` after its last heartbeat (Locust drops it then), whichever
    is first."""
    if loss.until is not None:
        return loss.until
    if loss.state == "gone":
        return loss.detected
    at = next((p for p in phases if p.start <= loss.since < p.end), None)
    end = loss.since + MISSING_DROPPED_AFTER_S
    for p in phases:
        if p.start > loss.since and (at is None or p.concurrency != at.concurrency):
            return min(end, p.start)
    return end


def apply_losses(windows: Sequence[Window], phases: Sequence[Phase], losses: Sequence[WorkerLoss]) -> list[Window]:
    """``windows`` (one per phase of ``phases``, same order) with every one that overlaps a loss's shortfall
    (:func:`shortfall_end`) made not steady, its reason naming the worker, the time into the step and the users
    lost (a window already not steady keeps its reason first)."""
    out = list(windows)
    for i, (w, p) in enumerate(zip(windows, phases, strict=True)):
        w0 = w.start if w.steady else p.start
        hits = [x for x in losses if x.since < p.end and shortfall_end(x, phases) > w0]
        if not hits:
            continue
        parts = []
        for x in hits:
            when = f"+{x.since - p.start:.1f} s into the step" if x.since >= p.start else "before the step"
            parts.append(f"{x.describe()} {when}")
        span = "then" if all(x.until is not None for x in hits) else "from then on"
        reason = (f"{'; '.join(parts)}: fewer than C={p.concurrency} users ran {span} (its figures are "
                  "for fewer users)")
        if not w.steady and w.reason:
            reason = f"{w.reason}; {reason}"
        out[i] = dataclasses.replace(w, steady=False, reason=reason)
    return out


def loss_note(loss: WorkerLoss, phases: Sequence[Phase]) -> str:
    """The report note of one lost worker: when (UTC, and into which phase), the users it took, its requests in
    flight that were never recorded (cut off; "unknown" when the master had no report of them) and until when
    fewer users ran."""
    at = next((p for p in phases if p.start <= loss.since < p.end), None)
    where = f" during {at.label} (+{loss.since - at.start:.1f} s into it)" if at is not None else ""
    clock = time.strftime("%H:%M:%S", time.gmtime(loss.since))
    users = "an unknown number of" if loss.users is None else str(loss.users)
    if loss.state == "missing":
        lost = "an unknown number" if loss.in_flight is None else str(loss.in_flight)
        cut = f"; {lost} of its requests in flight were cut off (never recorded)"
    else:
        cut = " (it quit: its requests in flight finished first)"
    end = shortfall_end(loss, phases)
    nxt = next((p.label for p in phases if p.start == end), None)
    until = (f"until the next step ({nxt}) started" if nxt is not None
             else f"until +{end - loss.since:.0f} s (Locust then gave its users to the live workers)")
    return (f"WORKER LOST: worker {loss.worker} {'stopped answering' if loss.state == 'missing' else 'quit'} at "
            f"{clock} UTC{where}: its {users} users stopped{cut}. Fewer users than the target ran {until}; the "
            "steps in that period are marked NOT steady.")
