"""The end of a run: one path for a headless run and for each run of the web UI.

A headless run is the web UI's lifecycle with one run started at ``init`` (Locust's own rule: ``--headless`` is
``--autostart`` without a web UI). Either way the run ends at Locust's ``test_stop`` (the shape's end, the web UI's
Stop, Ctrl-C or SIGTERM: Locust stops the runner before it quits), in :func:`end_run`:

1. on a master, every worker stops its users (in-flight requests finish for up to the stop timeout) and sends its
   last records (:func:`harness.locust.drain.stop_workers`), then :data:`LAST_BATCH_WAIT_S` for batches that trail
   the answers;
2. the status (:func:`run_status`): ``finished`` (the load ran to its end; a web UI fixed run without run time
   ended by Stop counts as finished), ``warmup_failed`` (every warm-up request failed) or ``interrupted``;
3. ``load_end`` written if the stop did not write it already (not after a failed warm-up: no measured load);
   requests cut off by the stop timeout counted in ``run.json`` (``cut_off``) and logged;
4. ``run.json`` closed with the status, then the report (``report.json`` / ``.md`` / ``.html``) written: in a
   child process when a web UI must keep answering meanwhile (:func:`write_report_child`), else in this process;
   its terminal summary kept for ``quit`` (:attr:`harness.runtime.Run.report_summary`);
5. the run listed as ended (:meth:`harness.runtime.Run.ended_run`).

At ``test_stopping`` the stop begins (:func:`begin_stop`; ``load_end`` is written then, by
:meth:`harness.runtime.RunContext.end_load`). At ``quitting`` a run still going is stopped and ended the same way
(:func:`stop_for_quit`) and the process's exit code is set from its runs (:func:`set_exit_code`).
"""

from __future__ import annotations

from locust.runners import MasterRunner

import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent

from harness.locust.drain import STOP_MARGIN_S, stop_workers
from harness.runtime import Run, RunContext, StopProgress

if TYPE_CHECKING:
    from harness.report.model import Report

__all__ = [
    "LAST_BATCH_WAIT_S",
    "REPORT_TIMEOUT_S",
    "begin_stop",
    "cut_off_by_timeout",
    "end_run",
    "run_status",
    "set_exit_code",
    "stop_for_quit",
    "write_report_child",
]

log = logging.getLogger("llmload")

#: Seconds the master waits at a run's end for the workers' last record batches (after their MSG_STOPPED).
LAST_BATCH_WAIT_S = 1.0
#: Seconds the report's child process may take; after that the run is recorded without a report (the log says
#: how to rebuild it).
REPORT_TIMEOUT_S = 900.0


def run_status(run: Run, ctx: RunContext, warmup_error: str | None) -> str:
    """The status ``run.json`` gets for the run of ``ctx``: ``warmup_failed`` (``warmup_error``: the shape's, every
    warm-up request failed), ``finished`` (the load ran to its end, or a fixed run without run time was stopped:
    in the web UI by Stop, headless by Ctrl-C or SIGTERM, its only way to end) or ``interrupted``."""
    open_ended = ctx.fixed is not None and ctx.fixed.run_time is None
    if warmup_error:
        return "warmup_failed"
    if ctx.finished or (open_ended and (not run.signals.interrupted or not ctx.web)):
        return "finished"
    return "interrupted"


def cut_off_by_timeout(cut_off: int, meta: dict[str, Any]) -> int:
    """The requests of ``cut_off`` (``run.json``'s count of unfinished, unrecorded requests) that the stop timeout
    cut off: the rest were in flight on a worker lost during the run (``meta["workers_lost"]`` entries without
    ``back_wall``: a worker that answered again had its count withdrawn), logged when it was lost."""
    with_workers = sum(int(w.get("in_flight") or 0) for w in meta.get("workers_lost", []) if "back_wall" not in w)
    return max(0, cut_off - with_workers)


def end_run(run: Run, environment: Any) -> None:
    """End the current run (see the module docstring): close it (master: after its workers sent their last
    records), write its report, list it as ended. No-op when no run is going or it ended already."""
    ctx = run.ctx
    if not run.active() or ctx is None or ctx.run_dir is None or ctx.run_dir.closed:
        return
    run.state = "stopping"
    runner = environment.runner
    if isinstance(runner, MasterRunner):
        stop_workers(run, runner)
        gevent.sleep(LAST_BATCH_WAIT_S)  # the last batches may trail the MSG_STOPPED answers by a flush
    warmup_error = getattr(environment.shape_class, "warmup_error", None)
    status = run_status(run, ctx, warmup_error)
    rd = ctx.run_dir
    if status == "finished" and not ctx.finished:  # a fixed run without run time, ended by Stop
        ctx.finished = True
    if not warmup_error:
        ctx.end_load()  # no-op: written when the stop began (Stop, Ctrl-C) or the load ended (the shape)
    if ctx.cut_off:
        rd.meta["cut_off"] = ctx.cut_off
        by_timeout = cut_off_by_timeout(ctx.cut_off, rd.meta)
        if by_timeout:
            log.warning("%d request(s) cut off by the stop timeout (not recorded)", by_timeout)
    if rd.failed:
        run.any_failed = True
    run.warmup_failed = bool(warmup_error)
    rd.close(status)
    now = time.time()
    progress = run.progress
    stop_wall = progress.stop_wall if progress is not None and progress.run_id == ctx.run_id else now
    run.progress = StopProgress(ctx.run_id, "writing_report", now, stop_wall, float(environment.stop_timeout or 0.0))
    run.report_summary = _write_report(Path(rd.path), child=run.web)
    if run.web:
        log.info("run %s %s; records and report in %s", ctx.run_id, status, rd.path)
    run.ended_run(rd.path, status)
    run.progress = None


def _write_report(run_dir: Path, child: bool) -> str | None:
    """Write the report of ``run_dir`` (in a child process with ``child``) and return its terminal summary; None
    when it failed (logged: the records are safe on disk, ``llmload report RUN_DIR`` rebuilds it)."""
    from harness.report import render_summary

    try:
        if child:
            rep = write_report_child(run_dir)
        else:
            from harness.report import write_report

            rep, _md = write_report(run_dir)
        return render_summary(rep)
    except Exception as e:
        (log.error if child else log.exception)("llmload: report failed: %s (rebuild with: llmload report %s)", e,
                                                run_dir)
        return None


def write_report_child(run_dir: Path, timeout_s: float = REPORT_TIMEOUT_S) -> Report:
    """Write the report of ``run_dir`` (``report.json``, ``report.md``, ``report.html`` and its figures) in a child
    process, ``python -m harness.report RUN_DIR --quiet``, waiting for it cooperatively: the gevent loop (the web
    UI, a master's worker heartbeats) goes on meanwhile. Returns the report (``report.json`` as written, read by
    :func:`harness.report.model.load_report`).

    Raises:
        RuntimeError: the child failed (its last stderr lines), did not end within ``timeout_s`` seconds (killed),
            or wrote no readable ``report.json``.
    """
    from gevent import subprocess as gsubprocess

    from harness.report.model import ReportError, load_report

    proc = gsubprocess.Popen(
        [sys.executable, "-m", "harness.report", str(run_dir), "--quiet"],
        stdin=gsubprocess.DEVNULL, stdout=gsubprocess.DEVNULL, stderr=gsubprocess.PIPE,
    )  # fmt: skip
    try:
        _out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"the report process took more than {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        tail = " | ".join((err or b"").decode(errors="replace").strip().splitlines()[-3:])
        raise RuntimeError(f"the report process exited {proc.returncode}: {tail}")
    try:
        return load_report(run_dir / "report.json")
    except ReportError as e:
        raise RuntimeError(f"report.json unreadable: {e}") from None


def stop_for_quit(run: Run, environment: Any) -> None:
    """At ``quitting`` (Ctrl-C, SIGTERM, Locust quitting): stop a run that goes, letting in-flight requests
    finish and be recorded, then end it (:func:`end_run`, status interrupted unless its load had ended). A run
    being stopped already (Stop) is waited for. No-op once the run ended (headless: at ``test_stop``)."""
    if not run.active():
        return
    runner = environment.runner
    if run.state == "running":
        run.signals.interrupted = True
        if runner is not None:
            runner.stop()  # drains, then test_stop ends the run
        end_run(run, environment)  # no-op once ended (e.g. the runner had already stopped)
        return
    deadline = time.monotonic() + float(environment.stop_timeout or 0.0) + STOP_MARGIN_S + 60.0
    while run.active() and time.monotonic() < deadline:
        gevent.sleep(0.2)


def begin_stop(run: Run, environment: Any) -> None:
    """At ``test_stopping`` (master / single process): a stop of the current run begins (the load's end, the web UI's
    Stop, Ctrl-C, SIGTERM): its state is "stopping" and :attr:`harness.runtime.Run.progress` says ``draining`` (the
    web UI's LLM view shows it). No-op without a running run."""
    ctx = run.ctx
    if run.state != "running" or ctx is None:
        return
    run.state = "stopping"
    now = time.time()
    run.progress = StopProgress(ctx.run_id, "draining", now, now, float(environment.stop_timeout or 0.0))


def set_exit_code(run: Run, environment: Any) -> None:
    """At ``quitting``: the process's exit code from its runs (``environment.process_exit_code``, which Locust
    exits with). 3 when a headless run's warm-up failed (every warm-up request failed: nothing measured); else,
    unless something set it already, Locust's ``--exit-code-on-error`` (default 1) when a run wrote a failed request
    record: Locust's rule, from the records rather than Locust's stats (a master's stats miss the workers' last
    reports when a Ctrl-C reached every process, ``--processes N``). Otherwise Locust's own rule applies."""
    if run.warmup_failed and not run.web:
        environment.process_exit_code = 3
    elif run.any_failed and environment.process_exit_code is None:
        opts = environment.parsed_options
        environment.process_exit_code = int(getattr(opts, "exit_code_on_error", 1) if opts is not None else 1)
