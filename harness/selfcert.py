"""The load generator's own CPU, sampled per process for the report's self-certification.

Each load-generating process (the single process, or each worker; never a master, which runs no users) writes a
``client_cpu`` event ``{"event": "client_cpu", "wall": epoch s, "process": worker id, "cpu_s": process CPU
seconds}`` (``time.process_time()``: user + system time of every thread of the process since it started) when a
phase starts, when the load ends and, on a worker, every :data:`CPU_SAMPLE_S` seconds. A single process writes it
to ``phases.jsonl`` itself; a worker sends it to the master with its records (message :data:`MSG_CPU`), which
writes it there. ``process`` is the id that prefixes the process's user ids (``<worker id>:<n>`` in each record's
``user``), so the report pairs a process's CPU with its records (:mod:`harness.report.selfcert`): a step's CPU
share of a process = (CPU seconds between its first and last sample inside the step) ÷ (wall seconds between
them), summed over its consecutive samples (:class:`CpuShare`): where the CPU counter goes DOWN (the process
restarted, its counter began again) that sample starts a new baseline; the interval across the reset, whose CPU is
unknown, counts in neither sum (not a 0 % sample). An event that is not a ``client_cpu`` event of a non-empty
``process`` with finite numeric ``wall`` and ``cpu_s`` ≥ 0 is malformed (:func:`cpu_event_problem`): the report
and the live share leave it out with one warning naming it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CPU_EVENT", "CPU_SAMPLE_S", "MSG_CPU", "CpuShare", "cpu_event_problem", "cpu_sample"]

#: The ``phases.jsonl`` event kind of a CPU sample.
CPU_EVENT = "client_cpu"
#: Seconds between a worker's periodic CPU samples (besides those at phase starts and at the stop).
CPU_SAMPLE_S = 5.0
#: The Locust message a worker sends its CPU samples to the master with (a list of ``client_cpu`` events).
MSG_CPU = "llmload_cpu"


def cpu_sample(process: str) -> dict[str, Any]:
    """One ``client_cpu`` event of this process now: ``process`` (its worker id, ``local`` for a single process),
    ``wall`` (epoch s) and ``cpu_s`` (``time.process_time()``, seconds)."""
    return {"event": CPU_EVENT, "wall": time.time(), "process": process, "cpu_s": time.process_time()}


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def cpu_event_problem(event: Mapping[str, Any]) -> str | None:
    """What is wrong with a ``client_cpu`` event (``"cpu_s is missing"``, ``"wall is not a number: 'x'"`` ...), or
    None when it is well formed: a non-empty string ``process``, finite numbers ``wall`` (epoch s) and ``cpu_s``
    (seconds, ≥ 0)."""
    proc = event.get("process")
    if not isinstance(proc, str) or not proc:
        return "process is missing" if proc is None else f"process is not a non-empty string: {proc!r}"
    for key in ("wall", "cpu_s"):
        v = event.get(key)
        if v is None:
            return f"{key} is missing"
        if not _number(v):
            return f"{key} is not a number: {v!r}"
    if event["cpu_s"] < 0:
        return f"cpu_s is negative: {event['cpu_s']!r}"
    return None


@dataclass
class CpuShare:
    """One process's CPU share accumulated over its samples in time order (:meth:`add`): ``cpu_s`` and ``wall_s``
    (seconds) summed over consecutive pairs of samples whose counter did not go down; a sample whose CPU seconds are
    below the previous one's (a restarted process) starts a new baseline and its interval counts in neither."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    last: tuple[float, float] | None = None
    #: Times the counter went down (new baselines).
    resets: int = 0

    def add(self, wall: float, cpu_s: float) -> None:
        """Take the next sample (``wall`` epoch s, ``cpu_s`` the process's CPU seconds), no earlier than the last."""
        if self.last is not None:
            w0, c0 = self.last
            if cpu_s < c0:
                self.resets += 1
            elif wall > w0:
                self.cpu_s += cpu_s - c0
                self.wall_s += wall - w0
        self.last = (wall, cpu_s)

    def share(self, min_span_s: float) -> float | None:
        """CPU s ÷ wall s (1.0 = one core busy), or None when under ``min_span_s`` wall seconds were summed."""
        return self.cpu_s / self.wall_s if self.wall_s >= min_span_s and self.wall_s > 0 else None
