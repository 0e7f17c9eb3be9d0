"""Which run directories the LLM view shows, and the state of the workers: the ONE adapter onto the run state.

:func:`run_dirs` is the only place the web UI reads the process's runs from. Today it reads
``harness.runtime.current().ctx.run_dir`` (one run per process); when ``harness.runtime.runs()`` exists (each web-UI
Start its own run directory, finished runs listed newest first) it reads that instead, so the switch is here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import runtime

__all__ = ["RunDirs", "WorkerInfo", "run_dirs", "workers"]


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


def workers(runner: Any, seen: set[str]) -> list[WorkerInfo]:
    """The master's workers: every client Locust knows, plus those seen before (``seen``, updated in place) and
    no longer there (``gone``). Empty on a single process (no ``clients``)."""
    clients = getattr(runner, "clients", None)
    if clients is None:
        return []
    book = runtime.current().workers
    out: list[WorkerInfo] = []
    now_ids = set()
    for node in list(clients.values()):
        now_ids.add(node.id)
        state = str(node.state)
        out.append(
            WorkerInfo(
                id=node.id,
                state=state,
                users=int(node.user_count),
                in_flight=book.in_flight.get(node.id),
                cpu_pct=float(node.cpu_usage) if node.cpu_usage is not None else None,
                dead=state == "missing",
            )
        )
    seen |= now_ids
    out.extend(WorkerInfo(id=w, state="gone", dead=True) for w in sorted(seen - now_ids))
    return out
