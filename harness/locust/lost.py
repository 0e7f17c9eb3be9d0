"""Master: workers lost while the load runs (killed, crashed, cut off), recorded so the report can flag them.

A worker killed with ``kill -9`` sends nothing: Locust's master marks it ``missing`` after
:data:`locust.runners.HEARTBEAT_LIVENESS` missed heartbeats (about 3 s) and gives its users to nobody until the
user count next changes (the next step of another concurrency). Its users' requests in flight are never recorded.
:class:`WorkerWatch` polls the master's workers every :data:`POLL_S` seconds while a run's load runs and, for each
worker that goes ``missing`` or leaves (its own ``quit``), writes one event to ``phases.jsonl``::

    {"event": "worker_lost", "wall": <detected, epoch s>, "since_wall": <its last heartbeat, epoch s>,
     "worker": <Locust client id>, "state": "missing" | "gone", "users": <int | null>, "in_flight": <int | null>}

``users`` is the worker's user count at the last poll before it was lost; ``in_flight`` its requests in flight from
its last Locust report (every 3 s; null when it never reported). A missing worker that answers again (Locust's
"self-healed": it was busy, its heartbeats late) kept its users: ``{"event": "worker_back", "wall", "worker"}``
withdraws its loss (the report ignores it, its in-flight count leaves ``cut_off``). A ``missing`` worker's in-flight
requests are never recorded: they are added to the run's ``cut_off`` (``run.json``); when unknown, ``run.json`` says
so (``cut_off_unknown``: the workers whose count is unknown). A ``gone`` worker quit on its own (its Ctrl-C): it let
its requests finish and sent their records first. ``run.json`` also lists ``workers`` (every worker id seen in the
run) and ``workers_lost`` (the events). The report (:mod:`harness.report.lost`) marks the steps that ran with fewer
users than their concurrency as not steady.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import gevent

from harness.runtime import Run

__all__ = ["POLL_S", "WorkerWatch", "start_watch"]

log = logging.getLogger("llmload")

#: Seconds between two looks at the master's workers.
POLL_S = 0.25


@dataclass
class WorkerWatch:
    """What the master last saw of each worker (client id keys), and the workers already reported lost."""

    #: Users running on each live worker at the last poll.
    users: dict[str, int] = field(default_factory=dict)
    #: Epoch seconds of each worker's last heartbeat (Locust's ``heartbeat_sent`` event on the master).
    heartbeat: dict[str, float] = field(default_factory=dict)
    #: Workers reported lost in the current run.
    lost: set[str] = field(default_factory=set)
    #: The in-flight requests of each lost worker added to the run's ``cut_off`` (withdrawn if it comes back).
    counted: dict[str, int] = field(default_factory=dict)
    #: Every worker seen in the current run.
    seen: set[str] = field(default_factory=set)
    #: The run id the sets above belong to.
    run_id: str = ""

    def on_heartbeat(self, client_id: str, timestamp: float, **_: Any) -> None:
        """Locust's ``heartbeat_sent`` listener (master): ``client_id`` was alive at ``timestamp`` (epoch s)."""
        self.heartbeat[str(client_id)] = float(timestamp)

    def poll(self, run: Run, runner: Any) -> list[dict[str, Any]]:
        """One look at ``runner``'s workers: write a ``worker_lost`` event (see the module docstring) for each
        worker of the running load that went missing or left since the last look. Returns the events written.
        No-op (returns []) outside a run's load (before its first phase, after ``load_end``)."""
        ctx = run.ctx
        if ctx is None or ctx.run_dir is None or ctx.run_dir.closed:
            return []
        if ctx.run_id != self.run_id:  # a new run (web UI): forget the last run's workers
            self.run_id, self.lost, self.seen, self.counted = ctx.run_id, set(), set(), {}
        clients = {c.id: c for c in runner.clients.all}
        if ctx.load_ended:
            return []
        out: list[dict[str, Any]] = []
        now = time.time()
        for cid in sorted(set(self.users) | set(clients)):
            node = clients.get(cid)
            state = "gone" if node is None else str(node.state)
            if state not in ("missing", "gone"):
                if cid in self.lost:
                    out.append(self._back(run, cid, now))
                self.users[cid] = int(node.user_count) if node is not None else 0
                if cid not in self.seen:
                    self.seen.add(cid)
                    ctx.run_dir.meta["workers"] = sorted(self.seen)
                continue
            if cid in self.lost or cid not in self.seen:
                continue
            self.lost.add(cid)
            out.append(self._lost(run, cid, state, now))
        return out

    def _back(self, run: Run, cid: str, now: float) -> dict[str, Any]:
        """``cid`` answers again (Locust's "self-healed": a busy worker whose heartbeats were late, not dead): its
        users kept running, so its loss is withdrawn (``worker_back``; its in-flight count leaves ``cut_off``)."""
        ctx = run.ctx
        assert ctx is not None and ctx.run_dir is not None
        self.lost.discard(cid)
        ev = {"event": "worker_back", "wall": now, "worker": cid}
        ctx.run_dir.write_phase(ev)
        meta = ctx.run_dir.meta
        ctx.cut_off -= self.counted.pop(cid, 0)
        if ctx.cut_off:
            meta["cut_off"] = ctx.cut_off
        else:
            meta.pop("cut_off", None)
        meta["cut_off_unknown"] = [w for w in meta.get("cut_off_unknown", []) if w != cid]
        if not meta["cut_off_unknown"]:
            del meta["cut_off_unknown"]
        for w in meta.get("workers_lost", []):
            if w.get("worker") == cid and "back_wall" not in w:
                w["back_wall"] = now
        ctx.run_dir.write_meta()
        log.warning("worker %s answers again (it was late, not dead): its loss is withdrawn", cid)
        return ev

    def _lost(self, run: Run, cid: str, state: str, now: float) -> dict[str, Any]:
        ctx = run.ctx
        assert ctx is not None and ctx.run_dir is not None
        in_flight = run.workers.in_flight.get(cid) if state == "missing" else 0
        ev: dict[str, Any] = {
            "event": "worker_lost",
            "wall": now,
            "since_wall": self.heartbeat.get(cid, now),
            "worker": cid,
            "state": state,
            "users": self.users.pop(cid, None),
            "in_flight": in_flight,
        }
        meta = ctx.run_dir.meta
        ctx.run_dir.write_phase(ev)
        meta.setdefault("workers_lost", []).append({k: v for k, v in ev.items() if k != "event"})
        if in_flight is None:
            meta["cut_off_unknown"] = [*meta.get("cut_off_unknown", []), cid]
        elif in_flight:
            self.counted[cid] = in_flight
            ctx.cut_off += in_flight
            meta["cut_off"] = ctx.cut_off
        ctx.run_dir.write_meta()
        how = "stopped answering (no heartbeat)" if state == "missing" else "quit"
        lost = "unknown" if in_flight is None else str(in_flight)
        log.warning("worker %s %s during step C=%s: its %s user(s) stopped; requests in flight lost "
                    "(not recorded): %s", cid, how, ctx.state.concurrency, ev["users"], lost)
        return ev


def start_watch(run: Run, runner: Any) -> WorkerWatch:
    """Master: listen to the workers' heartbeats and poll ``runner``'s workers every :data:`POLL_S` s for the
    life of the process (a greenlet). Returns the watch."""
    watch = WorkerWatch()
    runner.environment.events.heartbeat_sent.add_listener(watch.on_heartbeat)

    def loop() -> None:
        while True:
            gevent.sleep(POLL_S)
            try:
                watch.poll(run, runner)
            except Exception:  # never let the watch take the master down
                log.exception("worker watch failed")

    gevent.spawn(loop)
    return watch
