"""Loading a run directory for the report: metadata, request records and phase intervals.

All times are wall-clock epoch seconds. A record's *end* is :attr:`harness.result.RequestResult.end_wall`
(``start_wall + e2e``: request sent -> last byte or failure); a phase ``[start, end)`` ends at the next
``phase_start``; the last one at ``load_end`` (the load stopped, in-flight requests then drain), else ``run_end``,
else (interrupted run) at the latest record end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.config import DEFAULT_HOURS_TO_N
from harness.records import read_phases, read_records
from harness.result import RequestResult

__all__ = [
    "DEFAULT_HOURS_TO_N",
    "NoRecordsError",
    "Phase",
    "RunData",
    "load_run",
    "phases_from_events",
]


class NoRecordsError(FileNotFoundError):
    """The directory does not exist or holds no ``records.jsonl``."""


@dataclass
class Phase:
    """One phase of the run: warm-up, single stream (step 0) or a load step (1..).

    Attributes:
        phase: "warmup" | "single" | "step".
        step: step index (-1 warm-up, 0 single stream, 1.. load steps).
        concurrency: target number of concurrent users.
        start / end: wall interval [start, end) in epoch seconds.
        planned_duration: the planned length in seconds, when the phase event gave one.
        end_source: "next_phase" | "load_end" (last step; in-flight requests drained after it) | "run_end" |
            "last_record" (interrupted run without run_end) | "records" (no phases.jsonl).
    """

    phase: str
    step: int
    concurrency: int
    start: float
    end: float
    planned_duration: float | None = None
    end_source: str = "next_phase"

    @property
    def label(self) -> str:
        """Table label: ``warmup``, ``single`` or ``C=<concurrency>``."""
        if self.phase == "warmup" or self.step < 0:
            return "warmup"
        if self.phase == "single" or self.step == 0:
            return "single"
        return f"C={self.concurrency}"

    @property
    def duration(self) -> float:
        """Length of the phase in seconds."""
        return max(0.0, self.end - self.start)


@dataclass
class RunData:
    """Everything the report is computed from.

    Attributes:
        path: the run directory.
        meta: ``run.json`` (empty when missing or unreadable).
        records: every request record (:meth:`RequestResult.from_record`), warm-up included, in file order.
        phases: the phases in order (warm-up included).
        has_run_end: whether ``phases.jsonl`` holds a ``run_end`` event.
        phases_inferred: True when ``phases.jsonl`` was missing and boundaries were inferred from records.
        problems: human-readable issues met while loading (shown as notes).
    """

    path: Path
    meta: dict[str, Any]
    records: list[RequestResult]
    phases: list[Phase]
    has_run_end: bool
    phases_inferred: bool = False
    problems: list[str] = field(default_factory=list)


def _read_meta(root: Path, problems: list[str]) -> dict[str, Any]:
    p = root / "run.json"
    if not p.exists():
        problems.append("run.json is missing: no metadata (profile, target, status) in this report.")
        return {}
    try:
        meta = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        problems.append(f"run.json is unreadable ({e}); metadata ignored.")
        return {}
    return meta if isinstance(meta, dict) else {}


def phases_from_events(events: Sequence[dict[str, Any]], last_end: float | None) -> tuple[list[Phase], bool]:
    """The phases of ``phases.jsonl`` events (see the module docstring for where each ends); ``last_end`` is the
    latest record end (epoch s; None without records), the end of an interrupted run's last phase.

    Returns:
        ``(phases, has_run_end)``. Used by :func:`load_run` and by the columnar engine
        (:mod:`harness.report.columns`), so both derive phases one way.
    """
    starts = [e for e in events if e.get("event") == "phase_start" and e.get("wall") is not None]

    def first(name: str) -> float | None:
        return next((float(e["wall"]) for e in events if e.get("event") == name and e.get("wall") is not None), None)

    run_end, load_end = first("run_end"), first("load_end")
    phases: list[Phase] = []
    for i, ev in enumerate(starts):
        start = float(ev["wall"])
        if i + 1 < len(starts):
            end, src = float(starts[i + 1]["wall"]), "next_phase"
        elif load_end is not None and load_end >= start:
            end, src = load_end, "load_end"
        elif run_end is not None:
            end, src = run_end, "run_end"
        else:
            end, src = (last_end if last_end is not None else start), "last_record"
        pd = ev.get("planned_duration")
        phases.append(
            Phase(
                phase=str(ev.get("phase") or "step"),
                step=int(ev.get("step", 0)),
                concurrency=int(ev.get("concurrency") or 1),
                start=start,
                end=max(start, end),
                planned_duration=float(pd) if pd is not None else None,
                end_source=src,
            )
        )
    return phases, run_end is not None


def _phases_from_records(records: list[RequestResult]) -> list[Phase]:
    """Phase intervals inferred from records alone: [first request sent, last request ended] per step."""
    by_step: dict[int, list[RequestResult]] = {}
    for r in records:
        by_step.setdefault(r.step, []).append(r)
    out = []
    for step in sorted(by_step):
        recs = by_step[step]
        start = min(r.start_wall for r in recs)
        end = max(r.end_wall for r in recs)
        phase = recs[0].phase or ("warmup" if step < 0 else "single" if step == 0 else "step")
        conc = recs[0].concurrency or 1
        out.append(Phase(phase, step, conc, start, end, None, "records"))
    # consecutive steps must not overlap: a step ends where the next one starts
    for a, b in pairwise(out):
        a.end = max(a.start, min(a.end, b.start))
    return out


def load_run(run_dir: str | os.PathLike[str]) -> RunData:
    """Read a run directory.

    Raises:
        NoRecordsError: when the directory or its ``records.jsonl`` does not exist (message names the path).
        ValueError: when a line in the middle of a JSON-lines file is not valid JSON, or a record's schema version
            is not readable.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise NoRecordsError(f"{root}: no such run directory")
    if not (root / "records.jsonl").exists() and not any(root.glob("records*.jsonl")):
        raise NoRecordsError(f"{root / 'records.jsonl'}: not found (is {root} a run directory?)")
    problems: list[str] = []
    meta = _read_meta(root, problems)
    cut = meta.get("cut_off")
    if isinstance(cut, int) and cut > 0:
        problems.append(f"CUT OFF: {cut} request(s) were still in flight when the stop timeout ran out; they were "
                        "ended unfinished and are not in the records (raise steps.drain_timeout or --stop-timeout).")
    records = read_records(root)
    events = read_phases(root)
    inferred = False
    if any(e.get("event") == "phase_start" for e in events):
        phases, has_end = phases_from_events(events, max((r.end_wall for r in records), default=None))
    else:
        phases, has_end, inferred = _phases_from_records(records), False, True
        if records:
            problems.append("phases.jsonl is missing or empty: step boundaries were inferred from the records "
                            "(first request sent to last request ended per step).")
    return RunData(root, meta, records, phases, has_end, inferred, problems)
