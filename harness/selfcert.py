"""The load generator's own CPU, sampled per process for the report's self-certification.

Each load-generating process (the single process, or each worker; never a master, which runs no users) writes a
``client_cpu`` event ``{"event": "client_cpu", "wall": epoch s, "process": worker id, "cpu_s": process CPU
seconds}`` (``time.process_time()``: user + system time of every thread of the process since it started) when a
phase starts, when the load ends and, on a worker, every :data:`CPU_SAMPLE_S` seconds. A single process writes it
to ``phases.jsonl`` itself; a worker sends it to the master with its records (message :data:`MSG_CPU`), which
writes it there. ``process`` is the id that prefixes the process's user ids (``<worker id>:<n>`` in each record's
``user``), so the report pairs a process's CPU with its records (:mod:`harness.report.selfcert`): a step's CPU
share of a process = (CPU seconds between its first and last sample inside the step) ÷ (wall seconds between
them).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["CPU_EVENT", "CPU_SAMPLE_S", "MSG_CPU", "cpu_sample"]

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
