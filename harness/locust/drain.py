"""Stopping before the end without losing records: in-flight requests finish and their records reach the master.

A reasoning request can stream for minutes. When a run stops early (Ctrl-C, SIGTERM, the web UI's Stop) the
master sends every worker ``llmload_stop`` (:data:`harness.runtime.MSG_STOP`) with its stop timeout; each worker
stops its users, in-flight requests given that timeout to finish (each user sends its last record as it stops),
sends the records left and answers ``llmload_stopped``. The master waits for the answers (at most the stop timeout
+ :data:`STOP_MARGIN_S`) while it still receives messages. Without this, Locust's master quits 0.5 s after telling
the workers to quit and the records of the requests that finish after that never reach ``records.jsonl``.
"""

from __future__ import annotations

from locust.env import Environment

import logging
import time
from typing import Any

import gevent

from harness.runtime import MSG_STOP, MSG_STOPPED, Run, of

__all__ = [
    "STOP_MARGIN_S",
    "flush_worker_records",
    "refuse_spawns_while_quitting",
    "stop_workers",
    "worker_stop_gracefully",
]

log = logging.getLogger("llmload")

#: Seconds the master waits for the workers' MSG_STOPPED beyond the stop timeout.
STOP_MARGIN_S = 10.0


def flush_worker_records(run: Run) -> None:
    """On a worker: take a CPU sample (:meth:`harness.runtime.RunContext.sample_cpu`) and send it with the queued
    records to the master now (no-op before the first phase message)."""
    if run.ctx is not None:
        run.ctx.sample_cpu()
        run.ctx.flush()


def worker_stop_gracefully(run: Run, runner: Any, stop_timeout: float) -> None:
    """Worker: stop the users, in-flight requests given ``stop_timeout`` s to finish (each user sends its last
    record as it stops), then send what is left to the master. Blocks until done; a second call (the master's
    MSG_STOP after this worker's own Ctrl-C) waits for the first instead of starting another."""
    g = run.workers.stop
    if g is None:
        runner.environment.stop_timeout = stop_timeout

        def stop() -> None:
            runner.stop()  # no-op when already stopped (e.g. the web UI's Stop reached the worker first)
            flush_worker_records(run)

        g = run.workers.stop = gevent.spawn(stop)
    g.join()


def refuse_spawns_while_quitting(run: Run, runner: Any) -> None:
    """Worker: once it took its own Ctrl-C (``run.signals.first_sigint`` set; it drains, then quits), Locust's
    ``spawn`` messages from the master are dropped, so it starts no new user and no new request.

    The master does not know a worker drains its own stop: at the next step (or a ramp) it sends that worker its
    share of the new user count. Locust's worker would spawn those users (their requests cut off at its quit,
    never recorded, aborted on the server) and take the message's ``stop_timeout`` as its own, shortening the
    drain. The master gives the users to the other workers once this one has quit. Wraps the instance's
    ``handle_message`` (Locust's worker loop calls ``self.handle_message(msg)`` for every message); other messages
    pass through unchanged.

    Raises:
        TypeError: ``runner`` has no ``handle_message`` (a Locust without it: the guard cannot be installed).
    """
    orig = getattr(runner, "handle_message", None)
    if not callable(orig):
        raise TypeError(f"{type(runner).__name__} has no handle_message: cannot refuse spawns while quitting")

    def handle_message(msg: Any) -> None:
        if getattr(msg, "type", None) == "spawn" and run.signals.first_sigint is not None:
            data = msg.data if isinstance(msg.data, dict) else {}
            users = sum((data.get("user_classes_count") or {}).values())
            log.info("draining this worker's Ctrl-C: the master's spawn message (%d users) is not followed", users)
            return
        orig(msg)

    runner.handle_message = handle_message


def on_stop_request(environment: Environment, msg: Any, **_: Any) -> None:
    """Worker, on MSG_STOP: stop gracefully with the master's stop timeout (seconds), then answer MSG_STOPPED."""
    runner = environment.runner
    assert runner is not None
    data = msg.data if isinstance(msg.data, dict) else {}
    run = of(environment)
    worker_stop_gracefully(run, runner, float(data.get("stop_timeout") or 0.0))
    runner.send_message(MSG_STOPPED, {"cut_off": run.ctx.cut_off if run.ctx is not None else 0})


def on_worker_stopped(environment: Environment, msg: Any, **_: Any) -> None:
    """Master, on MSG_STOPPED: that worker has sent all its records; its count of requests cut off by the stop
    timeout is added to the run's."""
    run = of(environment)
    if str(msg.node_id) in run.workers.stopped:
        return
    run.workers.stopped.add(str(msg.node_id))
    data = msg.data if isinstance(msg.data, dict) else {}
    if run.ctx is not None:
        run.ctx.cut_off += int(data.get("cut_off") or 0)


def _missing(node: Any) -> bool:
    """Locust's worker node ``node`` is in state ``missing`` (no heartbeat for 3 s)."""
    return str(getattr(node, "state", "")) == "missing"


def stop_workers(run: Run, runner: Any) -> None:
    """Master, when a run stops before its end: have every live worker stop its users and send its records,
    and wait for their MSG_STOPPED (at most the stop timeout + :data:`STOP_MARGIN_S` seconds), logging the workers
    that did not answer. A worker that quit meanwhile (its own Ctrl-C) sent its records before its quit message.
    A worker Locust shows ``missing`` (no heartbeat: killed, hung) is not waited for, nor one that goes missing
    during the wait: it cannot answer (:mod:`harness.locust.lost` recorded it)."""
    dead = sorted(c.id for c in runner.clients.all if _missing(c))
    if dead:
        log.warning("not waiting for worker(s) %s: missing (no heartbeat)", dead)
    workers = [c.id for c in runner.clients.all if not _missing(c)]
    if not workers:
        return
    timeout = float(runner.environment.stop_timeout or 0.0)
    log.info("run stopped: %d worker(s) finish in-flight requests (up to %.0f s)", len(workers), timeout)
    stopped = run.workers.stopped
    stopped.clear()
    for w in workers:
        runner.send_message(MSG_STOP, {"stop_timeout": timeout}, client_id=w)

    def pending() -> set[str]:
        return {w for w in workers if w not in stopped and w in runner.clients and not _missing(runner.clients[w])}

    deadline = time.monotonic() + timeout + STOP_MARGIN_S
    while time.monotonic() < deadline and pending():
        gevent.sleep(0.1)
    missing = sorted(pending())
    if missing:
        log.warning("no final records from worker(s) %s (their last requests are missing)", missing)
