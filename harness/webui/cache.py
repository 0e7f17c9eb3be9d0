"""The report of a run directory, recomputed at most every ``max(2 s, 3 × its last compute time)``.

:class:`ReportCache` answers with the latest report it has (never blocking the caller longer than the first
compute of a run) and starts a recompute in the background when the cached one is older than that interval.
The report is ``harness.report.build.build_report`` run in one long-lived child process
(:mod:`harness.webui.compute`, :class:`ComputeChild`); a finished run whose ``report.json`` is at least as new
as its records is read from that file (the same function wrote it).
Every time a new report of a run in progress arrives, the figures of its step in progress are appended to that
run's history (:attr:`Entry.history`), which the view's charts draw as the live trace.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import gevent.lock
from gevent import subprocess as gsubprocess

from harness.report.model import Report, ReportError, StepRow, load_report, parse_report

__all__ = ["HISTORY_KEYS", "MIN_INTERVAL_S", "SLOWDOWN", "ComputeChild", "Entry", "ReportCache", "current_row"]

log = logging.getLogger("llmload")

#: The least time between two computes of one run's report (seconds), and the factor on the last compute time.
MIN_INTERVAL_S = 2.0
SLOWDOWN = 3.0
#: Seconds a compute may take before it is abandoned (the view then shows the error).
COMPUTE_TIMEOUT_S = 300.0
#: Row keys kept per point of a run's live history (the charts' trace of the step in progress).
HISTORY_KEYS = (
    "label", "step", "concurrency", "output_tps", "output_tps_reasoning", "output_tps_answer",
    "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
    "ttfat_p50_s", "ttfat_p90_s", "ttfat_p99_s", "completed", "window_s",
)
_HISTORY_MAX = 3000


def current_row(rep: Report) -> StepRow | None:
    """The report's row of the step in progress, or None.

    While a run is in progress (``status`` ``running``) the report ends its last step at the latest request end
    (``end_source`` ``last_record``: no next ``phase_start``, no ``load_end``, no ``run_end`` yet), so that row is
    the step's figures over its window so far: the steady window ``[ws, latest end)`` once the first wave has been
    replaced, else (marked NOT steady) the step's own requests.
    """
    steps = rep.steps
    if rep.status != "running" or not steps:
        return None
    last = steps[-1]
    return last if last.end_source == "last_record" else None


@dataclass
class Entry:
    """One run directory's cached report.

    Attributes:
        report: the last report (None before the first compute finished, or when every compute failed).
        error: the last compute's error text (None when it succeeded).
        computed_at: ``time.time()`` when the last compute finished (0 before).
        started_at: ``time.time()`` when the last compute started (the interval counts from it).
        compute_s: how long the last compute took (seconds).
        history: points of the step in progress, one per report of the running run (``t``: epoch s, plus
            :data:`HISTORY_KEYS`).
        job: the greenlet of the compute in progress (None when none).
    """

    report: Report | None = None
    error: str | None = None
    computed_at: float = 0.0
    started_at: float = 0.0
    compute_s: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)
    job: Any = None

    def interval(self) -> float:
        """Seconds the cached report stays fresh: ``max(2 s, 3 × the last compute time)``."""
        return max(MIN_INTERVAL_S, SLOWDOWN * self.compute_s)


def _report_file(run_dir: Path) -> Report | None:
    """``report.json`` of a run that is no longer running when it is at least as new as its records (read by
    :func:`harness.report.model.load_report`), else None (also when it is unreadable or not a report)."""
    rj, meta, recs = run_dir / "report.json", run_dir / "run.json", run_dir / "records.jsonl"
    try:
        if json.loads(meta.read_text()).get("status") == "running":
            return None
        if rj.stat().st_mtime < max(recs.stat().st_mtime, meta.stat().st_mtime):
            return None
        return load_report(rj)
    except (OSError, ValueError):  # ReportError is a ValueError
        return None


class ComputeChild:
    """The child process that computes reports (:mod:`harness.webui.compute`), started on first use and again
    after it died. One compute at a time (the cache runs one per run directory; a lock orders them)."""

    def __init__(self) -> None:
        self._proc: Any = None
        self._lock = gevent.lock.Semaphore()

    def report(self, run_dir: Path) -> Report:
        """The report of ``run_dir`` (the child's JSON validated, :func:`harness.report.model.parse_report`).
        Raises RuntimeError with the child's error text (or its death, or an answer that is not a report)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = gsubprocess.Popen(
                    [sys.executable, "-m", "harness.webui.compute"], stdin=gsubprocess.PIPE,
                    stdout=gsubprocess.PIPE, stderr=gsubprocess.DEVNULL,
                )
            proc = self._proc
            try:
                with gevent.Timeout(COMPUTE_TIMEOUT_S):
                    proc.stdin.write(str(run_dir).encode() + b"\n")
                    proc.stdin.flush()
                    line = proc.stdout.readline()
            except (gevent.Timeout, OSError) as e:
                self.stop()
                raise RuntimeError(f"the report process failed: {type(e).__name__}") from None
            if not line:
                self.stop()
                raise RuntimeError("the report process ended")
        ans = json.loads(line)
        if "error" in ans:
            raise RuntimeError(str(ans["error"]))
        try:
            return parse_report(ans.get("report"), "the report process's answer")
        except ReportError as e:
            raise RuntimeError(str(e)) from None

    def stop(self) -> None:
        """End the child (it is started again on the next compute)."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


class ReportCache:
    """Reports of run directories, keyed by path (see the module docstring). Use from gevent greenlets."""

    def __init__(self) -> None:
        self._entries: dict[Path, Entry] = {}
        self.child = ComputeChild()

    def entry(self, run_dir: Path) -> Entry:
        """The cache entry of ``run_dir`` (created empty)."""
        return self._entries.setdefault(Path(run_dir), Entry())

    def get(self, run_dir: Path, wait_s: float = 60.0) -> Entry:
        """The entry of ``run_dir`` with its latest report, starting a recompute when that one is stale.

        Blocks (cooperatively) for at most ``wait_s`` only while the run has no report yet. A cached report of a
        running run is replaced by ``report.json`` as soon as that is written for the ended run (not after the
        interval), so the view's status follows the run's at once.
        """
        e = self.entry(run_dir)
        now = time.time()
        if e.report is not None and e.report.status == "running":  # the run may have been recorded since
            done = _report_file(Path(run_dir))
            if done is not None:
                e.report, e.error, e.computed_at = done, None, now
        if e.job is None and (e.report is None or now - e.started_at >= e.interval()):
            if e.report is None or e.report.status == "running":
                done = _report_file(Path(run_dir))
                if done is not None:
                    e.report, e.error, e.computed_at = done, None, now
                else:
                    e.started_at = now
                    e.job = gevent.spawn(self._run, Path(run_dir), e)
        if e.report is None and e.job is not None:
            e.job.join(timeout=wait_s)
        return e

    def _run(self, run_dir: Path, e: Entry) -> None:
        t0 = time.monotonic()
        try:
            rep = self.child.report(run_dir)
        except Exception as exc:  # shown on the page; the next poll retries after the interval
            e.error = str(exc) or type(exc).__name__
            log.debug("LLM view report failed for %s: %s", run_dir, e.error)
        else:
            if rep.status == "running" and e.report is not None and e.report.status != "running":
                return  # computed before the run was recorded: the final report is already here
            e.report, e.error = rep, None
            row = current_row(rep)
            if row is not None:
                e.history.append({"t": time.time(), **row.pick(HISTORY_KEYS)})
                del e.history[:-_HISTORY_MAX]
        finally:
            e.compute_s = time.monotonic() - t0
            e.computed_at = time.time()
            e.job = None
