"""A run directory for the report: its checks, metadata and phase intervals (the records are read as a frame by
:func:`harness.report.columns.load_frame_run`).

All times are wall-clock epoch seconds. A record's *end* is :attr:`harness.result.RequestResult.end_wall`
(``start_wall + e2e``: request sent -> last byte or failure); a phase ``[start, end)`` ends at the next
``phase_start``; the last one at ``load_end`` (the load stopped, in-flight requests then drain), else ``run_end``,
else (interrupted run) at the latest record end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.config import DEFAULT_HOURS_TO_N
from harness.report.rundata import LoadEnd, PhaseEvent, PhaseStart, RunEnd, RunMeta, read_run_meta

__all__ = [
    "DEFAULT_HOURS_TO_N",
    "INFERRED_PHASES_NOTE",
    "NoRecordsError",
    "Phase",
    "check_run_dir",
    "mark_repeated",
    "phases_from_events",
    "read_meta",
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
        setting: the sweep-axes setting's label the phase ran with (:attr:`harness.axes.Setting.label`; from its
            ``phase_start`` event, or its records' ``setting`` when phases are inferred); None without ``axes:``.
        repeated: another load step of the run has the same concurrency and setting (``steps.concurrency: [4,
            4]``): the label then names the step too (set by :func:`mark_repeated`).
    """

    phase: str
    step: int
    concurrency: int
    start: float
    end: float
    planned_duration: float | None = None
    end_source: str = "next_phase"
    setting: str | None = None
    repeated: bool = False

    @property
    def label(self) -> str:
        """Table label: ``warmup``, ``single`` or ``C=<concurrency>``, with `` (<setting>)`` after it for a step of
        a sweep-axes run (``C=8 (thinking=on,effort=low)``), so a note names the step it is about; a step whose
        concurrency and setting another step repeats names its step too (``C=4 (step 2)``,
        ``C=8 (thinking=on, step 3)``), so no two rows of a run share a label."""
        if self.phase == "warmup" or self.step < 0:
            return "warmup"
        if self.phase == "single" or self.step == 0:
            return "single"
        inner = [x for x in (self.setting, f"step {self.step}" if self.repeated else None) if x]
        return f"C={self.concurrency}" + (f" ({', '.join(inner)})" if inner else "")

    @property
    def duration(self) -> float:
        """Length of the phase in seconds."""
        return max(0.0, self.end - self.start)


def mark_repeated(phases: Sequence[Phase]) -> None:
    """Set :attr:`Phase.repeated` on every load step whose concurrency and setting another load step of
    ``phases`` shares (in place)."""
    seen: dict[tuple[int, str | None], int] = {}
    steps = [p for p in phases if p.label not in ("warmup", "single")]
    for p in steps:
        seen[p.concurrency, p.setting] = seen.get((p.concurrency, p.setting), 0) + 1
    for p in steps:
        p.repeated = seen[p.concurrency, p.setting] > 1


#: The note of a run whose phases.jsonl has no phase_start (boundaries inferred from the records).
INFERRED_PHASES_NOTE = ("phases.jsonl is missing or empty: step boundaries were inferred from the records "
                        "(first request sent to last request ended per step).")


def check_run_dir(root: Path) -> None:
    """Raise :class:`NoRecordsError` (naming the path) when ``root`` is not a directory or holds no
    ``records*.jsonl``."""
    if root.is_file():
        raise NoRecordsError(f"{root}: a file, not a run directory (give the directory that holds it: {root.parent})")
    if not root.is_dir():
        raise NoRecordsError(f"{root}: no such run directory")
    if not (root / "records.jsonl").exists() and not any(root.glob("records*.jsonl")):
        raise NoRecordsError(f"{root / 'records.jsonl'}: not found (is {root} a run directory?)")


def read_meta(root: Path, problems: list[str]) -> RunMeta:
    """``run.json`` of ``root``, read and validated by :func:`harness.report.rundata.read_run_meta` (the one reader:
    a key of the wrong type is dropped with a note); empty (and a note appended to ``problems``) when it is missing
    or unreadable, empty when it is not an object."""
    return read_run_meta(root, problems)


def phases_from_events(events: Sequence[PhaseEvent], last_end: float | None) -> tuple[list[Phase], bool]:
    """The phases of ``phases.jsonl`` events (see the module docstring for where each ends); ``last_end`` is the
    latest record end (epoch s; None without records), the end of an interrupted run's last phase.

    Returns:
        ``(phases, has_run_end)``. Used by :func:`harness.report.columns.load_frame_run`.
    """
    starts = [e for e in events if isinstance(e, PhaseStart) and e.wall is not None]

    def first(kind: type[LoadEnd | RunEnd]) -> float | None:
        return next((float(e.wall) for e in events if isinstance(e, kind) and e.wall is not None), None)

    run_end, load_end = first(RunEnd), first(LoadEnd)
    phases: list[Phase] = []
    for i, ev in enumerate(starts):
        start = float(ev.wall or 0.0)
        if i + 1 < len(starts):
            end, src = float(starts[i + 1].wall or 0.0), "next_phase"
        elif load_end is not None and load_end >= start:
            end, src = load_end, "load_end"
        elif run_end is not None:
            end, src = run_end, "run_end"
        else:
            end, src = (last_end if last_end is not None else start), "last_record"
        pd = ev.planned_duration
        phases.append(
            Phase(
                phase=ev.phase or "step",
                step=ev.step,
                concurrency=ev.concurrency or 1,
                start=start,
                end=max(start, end),
                planned_duration=float(pd) if pd is not None else None,
                end_source=src,
                setting=ev.setting,
            )
        )
    mark_repeated(phases)
    return phases, run_end is not None
