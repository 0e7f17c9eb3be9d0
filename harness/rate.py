"""The open-loop rate mode at run time: one arrival schedule per process, and the users' hooks into it.

The master's shape (:class:`harness.shapes.ReasoningSweepShape`) runs a rate step with enough users (the cap, or
the pool) and, at the step's start, calls :func:`begin_step` (single process) or broadcasts a ``llmload_rate``
message (workers: :func:`_on_rate`, registered by :func:`register` at Locust's init). Each process then holds one
:class:`ArrivalSchedule`: the step's seeded arrival sequence (:func:`harness.arrivals.arrival_offsets`) anchored
at the step's start wall time plus :data:`LEAD_S`, of which it takes its share.

**Split across workers: every n-th arrival of one schedule.** Worker ``i`` of ``n`` (its position in the
master's sorted list of worker ids, sent in the message) takes arrivals ``k`` with ``k % n == i`` of the one
sequence every worker draws from the same seed. The union of the workers' arrivals is then exactly the target
process (a constant or gamma process split as ``rate / n`` independent streams would not be: their superposition
is neither constant nor gamma), and the total is exact whatever ``n``. Workers on other hosts need synchronised
clocks (the anchor is the master's wall time).

A process's dispatcher greenlet sleeps until each of its arrivals and hands it to an idle user: the one that
became idle last (so a step uses as few distinct users as its load needs, and the report's first wave stays
short). Idle users wait for it in their Locust ``wait_time`` (:func:`arrival_wait`), where a stopping user is
killed at once, then send it (:func:`take_arrival` in their task). When no user is idle (every one of the cap is
busy) the arrival waits in a queue and the next user to finish takes the oldest at once: it is late, and its
record's ``scheduled_wall`` says by how much. The queue of an ended step is dropped.
"""

from __future__ import annotations

from locust.runners import MasterRunner, WorkerRunner

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gevent
from gevent.event import AsyncResult

from harness.arrivals import LEAD_S, arrival_offsets
from harness.split import slot_of, worker_ids

__all__ = [
    "LEAD_S",
    "MSG_RATE",
    "Arrival",
    "ArrivalSchedule",
    "Dispatcher",
    "arrival_wait",
    "begin_step",
    "broadcast_step",
    "dispatcher_of",
    "end_schedule",
    "give_back",
    "pending",
    "register",
    "schedule",
    "take_arrival",
]

log = logging.getLogger("llmload")

#: Master -> workers at each rate step's start: the step's schedule (see :meth:`ArrivalSchedule.message`).
MSG_RATE = "llmload_rate"


@dataclass(frozen=True)
class Arrival:
    """One arrival taken by a user: ``step`` of the schedule, ``index`` in the whole sequence (all processes),
    ``wall`` the scheduled send time (epoch seconds)."""

    step: int
    index: int
    wall: float


class ArrivalSchedule:
    """One rate step's arrivals on this process (see the module docstring).

    Args:
        step: the step index (records' ``step``).
        rate: target requests/s of the whole run (all processes).
        arrival / burstiness / seed: the process (:func:`harness.arrivals.interarrival_gaps`); the sequence's seed
            is ``f"{seed}:{step}"``, so each step has its own.
        t0_wall: epoch seconds of the first arrival of the sequence.
        slot / slots: this process takes arrivals ``k % slots == slot``.
        run_id: the run it belongs to (a user of another run treats it as absent).

    Raises:
        ValueError: bad process parameters, or ``slot`` outside ``range(slots)``.
    """

    def __init__(self, step: int, rate: float, arrival: str, burstiness: float, seed: int, t0_wall: float,
                 slot: int = 0, slots: int = 1, run_id: str = "") -> None:
        self.run_id = run_id
        self.step = step
        self.rate = rate
        self.arrival = arrival
        self.burstiness = burstiness
        self.seed = seed
        self.t0_wall = t0_wall
        self.slot = slot
        self.slots = slots
        self.taken = 0
        self._it: Iterator[tuple[int, float]] = arrival_offsets(arrival, rate, burstiness, f"{seed}:{step}", slot,
                                                                slots)

    def take(self) -> Arrival:
        """The next untaken arrival of this process (possibly already past: the caller is late)."""
        k, off = next(self._it)
        self.taken += 1
        return Arrival(self.step, k, self.t0_wall + off)

    def message(self, slots_ids: list[str]) -> dict[str, Any]:
        """The ``llmload_rate`` payload (msgpack-safe): the schedule's parameters and the worker ids in slot
        order."""
        return {"step": self.step, "rate": self.rate, "arrival": self.arrival, "burstiness": self.burstiness,
                "seed": self.seed, "t0_wall": self.t0_wall, "workers": list(slots_ids), "run_id": self.run_id}


class Dispatcher:
    """A process's schedule, its dispatcher greenlet, the idle users (a stack: the last idle first) and the
    arrivals no user was idle for (a queue: the oldest first). One per process, held by its run
    (:attr:`harness.runtime.Run.dispatch`); :func:`dispatcher_of` finds it from a user."""

    def __init__(self) -> None:
        self.sched: ArrivalSchedule | None = None
        self.idle: list[AsyncResult] = []
        self.pending: deque[Arrival] = deque()
        self.greenlet: Any = None
        #: (run id, step) of a load step announced closed-loop (the web UI's fixed mode of a rate profile).
        self.closed: tuple[str, int] | None = None

    def halt(self) -> None:
        """Stop dispatching: no more arrivals; users waiting for one keep waiting (until Locust stops them)."""
        if self.greenlet is not None:
            self.greenlet.kill(block=False)
            self.greenlet = None
        self.pending.clear()

    def begin(self, sched: ArrivalSchedule) -> None:
        self.halt()
        self.sched = sched
        self.closed = None
        self.greenlet = gevent.spawn(self._run, sched)

    def close_loop(self, run_id: str, step: int) -> None:
        """Step ``step`` of run ``run_id`` is closed-loop: no schedule, and every waiting user is released."""
        self.halt()
        self.sched = None
        self.closed = (run_id, step)
        idle, self.idle = self.idle, []
        for ev in idle:
            ev.set(None)

    def _run(self, sched: ArrivalSchedule) -> None:
        while True:
            a = sched.take()
            delay = a.wall - time.time()
            if delay > 0:
                gevent.sleep(delay)
            if self.idle:
                self.idle.pop().set(a)
            else:
                self.pending.append(a)

    def wait(self) -> Arrival | None:
        """Block until an arrival is handed to the caller (None: released, the step is closed-loop)."""
        if self.pending:
            return self.pending.popleft()
        ev: AsyncResult = AsyncResult()
        self.idle.append(ev)
        got = False
        try:
            a: Arrival | None = ev.get()
            got = True
            return a
        finally:
            if ev in self.idle:  # killed while waiting (the user stopped): no arrival is handed to it
                self.idle.remove(ev)
            elif not got and ev.ready():  # killed just after one was handed to it: the next user sends it
                self.give_back(ev.value)

    def give_back(self, a: Arrival | None) -> None:
        """An arrival taken but not sent (its user stopped): first in the queue, while its step is dispatched."""
        if a is not None and self.greenlet is not None and self.sched is not None and a.step == self.sched.step:
            if self.idle:
                self.idle.pop().set(a)
            else:
                self.pending.appendleft(a)


def dispatcher_of(user: Any) -> Dispatcher:
    """The dispatcher of ``user``'s process: its environment's run's (:attr:`harness.runtime.Run.dispatch`).

    Raises:
        AttributeError: the user's environment has no llmload run (``harness.locust.register`` was not called).
    """
    d: Dispatcher = user.environment.llmload.dispatch
    return d


def schedule(dispatch: Dispatcher, run_id: str) -> ArrivalSchedule | None:
    """The current schedule of run ``run_id`` on ``dispatch`` (None: none, or one of another run)."""
    sched = dispatch.sched
    return sched if sched is not None and sched.run_id == run_id else None


def begin_step(dispatch: Dispatcher, sched: ArrivalSchedule) -> None:
    """Make ``sched`` the schedule of ``dispatch`` and start dispatching it (the previous step's waiting arrivals
    are dropped; users waiting for an arrival get this step's)."""
    dispatch.begin(sched)


def end_schedule(dispatch: Dispatcher) -> None:
    """The load ended: no more arrivals (waiting users wait until Locust stops them)."""
    dispatch.halt()


def give_back(user: Any) -> None:
    """A stopping user's arrival taken but not sent goes back to the head of the queue (call from ``on_stop``;
    Locust can stop a user between its wait and its task, e.g. when it rebalances users over workers)."""
    a = getattr(user, "_llmload_arrival", None)
    user._llmload_arrival = None
    dispatcher_of(user).give_back(a)


def pending(dispatch: Dispatcher) -> int:
    """Arrivals of the current step that are due but wait for a free user (the cap)."""
    return len(dispatch.pending)


def broadcast_step(runner: Any, dispatch: Dispatcher, step: int, rate: float | None, spec: Any, start_wall: float,
                   run_id: str, closed: bool = False) -> None:
    """Master / single process, at a phase start of a profile with ``rate:``: set up the step's schedule
    everywhere.

    ``rate`` None: with ``closed``, the phase ``step`` is closed-loop (the single stream, or the web UI's fixed
    mode): users waiting for an arrival are released and send closed-loop; without it (the load ended) every
    schedule stops and waiting users keep waiting until Locust stops them. ``spec`` is the profile's
    :class:`harness.config.RateSpec`; ``run_id`` the run's id; ``dispatch`` this process's dispatcher. On a master
    the workers' slots are their client ids, sorted.
    """
    if rate is None:
        if closed:
            dispatch.close_loop(run_id, step)
        else:
            end_schedule(dispatch)
        if isinstance(runner, MasterRunner):
            runner.send_message(MSG_RATE, {"step": step, "rate": None, "closed": closed, "run_id": run_id})
        return
    sched = ArrivalSchedule(step, rate, spec.arrival, spec.burstiness, spec.seed, start_wall + LEAD_S,
                            run_id=run_id)
    if isinstance(runner, MasterRunner):
        ids = worker_ids(runner)
        runner.send_message(MSG_RATE, sched.message(ids))  # the master sends nothing itself
    else:
        begin_step(dispatch, sched)


def _on_rate(environment: Any, msg: Any, **_: Any) -> None:
    """Worker: a ``llmload_rate`` message: hold this worker's share of the step's schedule."""
    dispatch: Dispatcher = environment.llmload.dispatch
    data = msg.data
    if data.get("rate") is None:
        if data.get("closed"):
            dispatch.close_loop(str(data.get("run_id") or ""), int(data["step"]))
        else:
            end_schedule(dispatch)
        return
    runner = environment.runner
    ids = list(data.get("workers") or [])
    me = getattr(runner, "client_id", None)
    split = slot_of(ids, me)
    if split is None:
        log.warning("this worker (%s) is not in the master's rate split %s: it sends no arrivals", me, ids)
        end_schedule(dispatch)
        return
    begin_step(dispatch, ArrivalSchedule(int(data["step"]), float(data["rate"]), str(data["arrival"]),
                                         float(data["burstiness"]), int(data["seed"]), float(data["t0_wall"]),
                                         *split, str(data.get("run_id") or "")))


def register(runner: Any) -> None:
    """Called by :func:`harness.locust.register` at Locust's ``init``: a worker's ``runner`` takes the master's
    ``llmload_rate`` messages (:func:`_on_rate`); no-op on a master or single process."""
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_RATE, _on_rate)


def _in_rate_step(user: Any) -> bool:
    """``user``'s process is in a rate step: its profile has ``rate:``, its phase is a load step, and that step was
    not announced closed-loop."""
    ctx = getattr(user, "ctx", None)
    profile = getattr(ctx, "profile", None)
    state = getattr(ctx, "state", None)
    if getattr(profile, "rate", None) is None or getattr(state, "phase", None) != "step":
        return False
    return dispatcher_of(user).closed != (getattr(ctx, "run_id", ""), getattr(state, "step", None))


def _schedule_of(user: Any) -> ArrivalSchedule | None:
    """The schedule of ``user``'s run and current step, None when there is none (yet)."""
    sched = dispatcher_of(user).sched
    ctx = user.ctx
    if sched is None or sched.run_id != ctx.run_id or sched.step != ctx.state.step:
        return None
    return sched


def arrival_wait(user: Any) -> float:
    """A user's Locust ``wait_time``: 0 in a closed-loop phase; in a rate step, block until the dispatcher hands
    this user an arrival (kept on the user as ``_llmload_arrival``), then 0. A user that enters a rate step before
    its schedule arrived (a worker gets the phase message, then the rate message) waits for it likewise. Locust
    kills a user stopping while it waits here at once."""
    if not _in_rate_step(user):
        user._llmload_arrival = None
        return 0.0
    user._llmload_arrival = dispatcher_of(user).wait()
    return 0.0


def take_arrival(user: Any) -> tuple[bool, Arrival | None]:
    """In a user's task, before it sends: ``(send, arrival)``.

    ``(True, None)``: a closed-loop phase, send now. ``(True, arrival)``: a rate step and the arrival handed to
    the user in :func:`arrival_wait` belongs to this step's schedule: send it now (record
    ``scheduled_wall = arrival.wall``). ``(False, None)``: a rate step but no arrival of this step's schedule in
    hand (the user's first task, its arrival belongs to an ended step, or the schedule has not arrived yet): send
    nothing this time, the next wait takes one.
    """
    a: Arrival | None = getattr(user, "_llmload_arrival", None)
    user._llmload_arrival = None
    if not _in_rate_step(user):
        return True, None
    sched = _schedule_of(user)
    if a is None or sched is None or a.step != sched.step:
        return False, None
    return True, a
