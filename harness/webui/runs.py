"""Which run directories the LLM view shows, and the state of the workers: the ONE adapter onto the run state.

:func:`run_dirs` and :func:`workers` are the only places the web UI reads the process's runs from. They read
``harness.runtime.runs()`` (each web-UI Start its own run directory; ``current``, ``finished`` newest first,
``state``, ``workers``) when it exists, else ``harness.runtime.current().ctx.run_dir`` (one run per process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import runtime

__all__ = ["Live", "RunDirs", "WorkerInfo", "live", "run_dirs", "stopping", "workers"]


@dataclass(frozen=True)
class RunDirs:
    """The runs of this process the view knows.

    Attributes:
        current: the directory of the run in progress (None between runs).
        finished: directories of this process's finished runs, newest first (without ``current``).
        state: ``running`` | ``stopping`` | ``finished`` | ``interrupted`` | ``idle`` (no run yet) | ``unknown``.
    """

    current: Path | None
    finished: tuple[Path, ...] = ()
    state: str = "unknown"

    def all(self) -> list[Path]:
        """Every known run directory, the current one first, then finished ones newest first."""
        return ([self.current] if self.current is not None else []) + list(self.finished)


@dataclass(frozen=True)
class WorkerInfo:
    """One worker as the master sees it (Locust's ``runner.clients`` and the harness's :class:`WorkerBook`).

    Attributes:
        id: Locust's client id.
        state: Locust's worker state (``ready``, ``spawning``, ``running``, ``stopped``, ``missing``) or ``gone``
            (seen earlier, no longer in ``runner.clients``: it quit or was removed).
        users: users running on it (Locust's last report).
        in_flight: requests in flight on it (its last report to the master; None when unknown).
        cpu_pct: its CPU use (%), Locust's last report.
        dead: True when ``missing`` (no heartbeat) or ``gone``.
    """

    id: str
    state: str
    users: int = 0
    in_flight: int | None = None
    cpu_pct: float | None = None
    dead: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def run_dirs() -> RunDirs:
    """The runs of this process (see :class:`RunDirs`); never raises."""
    runs_fn = getattr(runtime, "runs", None)
    if callable(runs_fn):  # the run registry of the web-UI runs (harness.runtime.runs())
        try:
            r = runs_fn()
            cur = getattr(r, "current", None)
            fin = tuple(Path(p) for p in (getattr(r, "finished", None) or ()))
            return RunDirs(Path(cur) if cur is not None else None, fin, str(getattr(r, "state", "unknown")))
        except Exception:  # fall back to the process context below
            pass
    ctx = runtime.current().ctx
    rd = ctx.run_dir if ctx is not None else None
    if rd is None:
        return RunDirs(None, (), "idle")
    status = str(rd.meta.get("status") or "unknown")
    if status == "running":
        return RunDirs(Path(rd.path), (), "running")
    return RunDirs(None, (Path(rd.path),), status)


@dataclass(frozen=True)
class Live:
    """What the view knows of the run in progress beyond its records.

    Attributes:
        users: users running now (Locust's ``runner.user_count``; on a master the workers' last reports); None
            when unknown.
        plan: the run's stages after the warm-up as ``(phase, step, planned seconds)``
            (:func:`harness.shapes.plan_stages`; ``inf`` for a fixed run without a run time); None when unknown
            (no run context, or a capacity search, which adds its steps as it goes).
    """

    users: int | None = None
    plan: tuple[tuple[str, int, float], ...] | None = None


def live(runner: Any) -> Live:
    """The current run's :class:`Live` facts (users, plan). Never raises (unknowns are None)."""
    users = getattr(runner, "user_count", None)
    plan = None
    try:
        from harness.shapes import plan_stages  # the load shape's module imports Locust's shape machinery

        ctx = runtime.current().ctx
        if ctx is not None and getattr(ctx.profile, "search", None) is None:
            plan = tuple((s.phase, s.step, float(s.duration)) for s in plan_stages(ctx))
    except Exception:
        plan = None
    return Live(int(users) if isinstance(users, int) else None, plan or None)


def stopping(runner: Any) -> dict[str, Any] | None:
    """The stop in progress of the current run (:attr:`harness.runtime.Run.progress`) as the view shows
    it, None when no run is stopping: ``{"run_id", "stage": "draining" | "writing_report", "since_wall",
    "stop_wall" (epoch s), "drain_timeout_s", "users_left" (users not stopped yet: each finishes its request;
    on a master the workers' last report; None when unknown)}``. Never raises."""
    try:
        p = runtime.current().progress
    except Exception:
        return None
    if p is None:
        return None
    users = getattr(runner, "user_count", None)
    return {"run_id": p.run_id, "stage": p.stage, "since_wall": p.since_wall, "stop_wall": p.stop_wall,
            "drain_timeout_s": p.drain_timeout_s, "users_left": int(users) if isinstance(users, int) else None}


def workers(runner: Any, seen: set[str]) -> list[WorkerInfo]:
    """The master's workers: every client Locust knows (users and CPU from its last report), plus those seen
    before and no longer there (``gone``). The harness's own list (``harness.runtime.runs().workers``: state,
    in-flight count, gone ones) is used when it exists; otherwise ``seen`` (updated in place) remembers the ids.
    Empty on a single process (no ``clients``)."""
    clients = getattr(runner, "clients", None)
    if clients is None:
        return []
    nodes = {node.id: node for node in list(clients.values())}
    statuses: dict[str, Any] = {}
    runs_fn = getattr(runtime, "runs", None)
    if callable(runs_fn):
        try:
            statuses = {str(w.id): w for w in (getattr(runs_fn(), "workers", None) or ())}
        except Exception:
            statuses = {}
    book = runtime.current().workers
    seen |= set(nodes) | set(statuses)
    out: list[WorkerInfo] = []
    for wid in sorted(seen):
        node, st = nodes.get(wid), statuses.get(wid)
        state = str(node.state) if node is not None else (str(st.state) if st is not None else "gone")
        in_flight = getattr(st, "in_flight", None) if st is not None else book.in_flight.get(wid)
        out.append(
            WorkerInfo(
                id=wid,
                state=state,
                users=int(node.user_count) if node is not None else 0,
                in_flight=int(in_flight) if in_flight is not None else None,
                cpu_pct=float(node.cpu_usage) if node is not None and node.cpu_usage is not None else None,
                dead=state in ("missing", "gone"),
            )
        )
    return out
