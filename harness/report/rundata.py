"""``run.json`` and the ``phases.jsonl`` events as typed models, with one reader for each.

A run directory's metadata (:class:`RunMeta`, written by :class:`harness.records.RunDir`) and phase events
(:data:`PhaseEvent`: ``phase_start``, ``load_end``, ``run_end``, ``worker_lost``, ``worker_back``, ``search``,
``client_cpu``; an
event of another kind is kept as :class:`OtherEvent`) are validated when read: :func:`read_run_meta` and
:func:`read_events` are the report's readers of those files (:func:`harness.report.load.read_meta` and
:func:`harness.report.columns.load_frame_run` go through them). Unknown keys are kept (``extra``), so a file of an
earlier or later version reads; a key of the wrong type is dropped with a note rather than failing the report.

Units: ``*_wall`` epoch seconds, ``*_duration`` / ``*_s`` seconds, ``rate`` requests per second.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, TypeAdapter, ValidationError

from harness.jsonl import read_jsonl_numbered
from harness.report.model import Num, ReportModel, SearchResult
from harness.selfcert import CPU_EVENT, cpu_event_problem

_log = logging.getLogger(__name__)

__all__ = [
    "ClientCpu",
    "LoadEnd",
    "OtherEvent",
    "PhaseEvent",
    "PhaseStart",
    "RunEnd",
    "RunMeta",
    "SearchEvent",
    "WorkerBack",
    "WorkerLost",
    "parse_event",
    "read_events",
    "read_run_meta",
]


class RunMeta(ReportModel):
    """``run.json``: the run's identity, status, wall interval, environment, its profile as written (a dict: the
    profile's own types are :class:`harness.config.Profile`'s), the target and, against the built-in simulator,
    the simulator's settings; ``cut_off`` requests ended unfinished at the stop, and why it stopped."""

    run_id: str | None = None
    status: str | None = None
    start_wall: Num | None = None
    end_wall: Num | None = None
    hostname: str | None = None
    argv: list[str] = Field(default_factory=list)
    versions: dict[str, Any] = Field(default_factory=dict)
    profile_path: str | None = None
    profile: dict[str, Any] = Field(default_factory=dict)
    target: dict[str, Any] = Field(default_factory=dict)
    simulator: dict[str, Any] | None = None
    records: int | None = None
    cut_off: int | None = None
    stop_cause: str | None = None


class _Event(ReportModel):
    """Every event has a kind and the wall time it was written at (epoch s; None when a file lacks it)."""

    wall: Num | None = None


class PhaseStart(_Event):
    """A phase (warm-up, single stream or a load step) starts; a rate step adds its schedule's settings."""

    event: Literal["phase_start"] = "phase_start"
    phase: str = "step"
    step: int = 0
    concurrency: int | None = None
    planned_duration: Num | None = None
    setting: str | None = None
    rate: Num | None = None
    arrival: str | None = None
    burstiness: Num | None = None
    max_concurrency: int | None = None


class LoadEnd(_Event):
    """The load stopped (in-flight requests then drain): the last step's window ends here."""

    event: Literal["load_end"] = "load_end"


class RunEnd(_Event):
    """The run ended."""

    event: Literal["run_end"] = "run_end"


class WorkerLost(_Event):
    """A worker stopped answering (:mod:`harness.locust.lost`): its users and requests in flight (None: unknown)."""

    event: Literal["worker_lost"] = "worker_lost"
    since_wall: Num | None = None
    worker: str | None = None
    state: str | None = None
    users: int | None = None
    in_flight: int | None = None


class WorkerBack(_Event):
    """A worker taken for lost answers again: its loss is withdrawn."""

    event: Literal["worker_back"] = "worker_back"
    worker: str | None = None


class SearchEvent(_Event):
    """The SLO capacity search's outcome (:meth:`harness.search.CapacitySearch.result`)."""

    event: Literal["search"] = "search"
    result: SearchResult | None = None


class ClientCpu(_Event):
    """A load-generating process's CPU sample (:mod:`harness.selfcert`): its id and its CPU seconds so far."""

    event: Literal["client_cpu"] = "client_cpu"
    process: str | None = None
    cpu_s: Num | None = None


class OtherEvent(_Event):
    """An event of a kind this version does not know (kept as written)."""

    event: str = ""


_Known = PhaseStart | LoadEnd | RunEnd | WorkerLost | WorkerBack | SearchEvent | ClientCpu
_KNOWN = Annotated[_Known, Field(discriminator="event")]
#: One ``phases.jsonl`` event, typed by its ``event`` key.
PhaseEvent = PhaseStart | LoadEnd | RunEnd | WorkerLost | WorkerBack | SearchEvent | ClientCpu | OtherEvent
_ADAPTER: TypeAdapter[_Known] = TypeAdapter(_KNOWN)
_KINDS = frozenset({"phase_start", "load_end", "run_end", "worker_lost", "worker_back", "search", "client_cpu"})


_T = TypeVar("_T")


def _lenient(data: dict[str, Any], validate: Callable[[dict[str, Any]], _T], what: str,
             problems: list[str] | None) -> _T:
    """``validate(data)``; on a ValidationError, again without the top-level keys in error, each named in a note
    appended to ``problems``."""
    try:
        return validate(data)
    except ValidationError as e:
        # the top-level key of each error (a tagged union puts its tag before the field: skip it)
        bad = sorted({str(next((x for x in err["loc"] if x in data), err["loc"][0])) for err in e.errors()
                      if err["loc"]})
        if problems is not None:
            problems.append(f"{what}: {', '.join(bad)} of the wrong type; ignored.")
        return validate({k: v for k, v in data.items() if k not in bad})


def parse_event(data: dict[str, Any], problems: list[str] | None = None) -> PhaseEvent:
    """One decoded ``phases.jsonl`` line as its typed event (:class:`OtherEvent` for an unknown kind); keys of the
    wrong type are dropped with a note in ``problems``."""
    kind = data.get("event")
    if kind in _KINDS:
        return _lenient(data, _ADAPTER.validate_python, f"phases.jsonl {kind} event", problems)
    return _lenient(data, OtherEvent.model_validate, f"phases.jsonl {kind} event", problems)


def read_events(root: Path, problems: list[str] | None = None) -> list[PhaseEvent]:
    """The phase events of run directory ``root`` in the order written (none without ``phases.jsonl``; lines that
    are not JSON objects are skipped). A malformed ``client_cpu`` event (:func:`harness.selfcert.cpu_event_problem`)
    is left out, with one warning (logged, and a note in ``problems``) naming the file and line of the first and
    how many there were.

    Raises:
        ValueError: a line before the last is not valid JSON.
    """
    path = root / "phases.jsonl"
    out: list[PhaseEvent] = []
    bad: list[tuple[int, str]] = []
    for line, data in read_jsonl_numbered(path, missing_ok=True):
        if not isinstance(data, dict):
            continue
        if data.get("event") == CPU_EVENT and (why := cpu_event_problem(data)) is not None:
            bad.append((line, why))
            continue
        out.append(parse_event(data, problems))
    if bad:
        line, why = bad[0]
        more = f"; {len(bad)} malformed client_cpu events in all" if len(bad) > 1 else ""
        msg = (f"{path}:{line}: a malformed client_cpu event ({why}){more}; left out of the client CPU share "
               "(self-certification).")
        _log.warning("%s", msg)
        if problems is not None:
            problems.append(msg)
    return out


def read_run_meta(root: Path, problems: list[str]) -> RunMeta:
    """``run.json`` of ``root``; empty (and a note appended to ``problems``) when it is missing or unreadable, empty
    when it is not an object; a key of the wrong type is dropped with a note."""
    p = root / "run.json"
    if not p.exists():
        problems.append("run.json is missing: no metadata (profile, target, status) in this report.")
        return RunMeta()
    try:
        data = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        problems.append(f"run.json is unreadable ({e}); metadata ignored.")
        return RunMeta()
    if not isinstance(data, dict):
        return RunMeta()
    return _lenient(data, RunMeta.model_validate, "run.json", problems)
