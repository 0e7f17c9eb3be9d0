"""Ctrl-C (SIGINT) and SIGTERM: on the master or the single process, and on workers.

The state (first SIGINT time, interrupted) is the process's :class:`harness.runtime.SignalState`
(``current().signals``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from typing import Any

import gevent

from harness.locust.drain import worker_stop_gracefully
from harness.runtime import Run

__all__ = ["SIGINT_ECHO_S", "TERM_DRAIN_S", "install_master_signals", "install_worker_sigint"]

log = logging.getLogger("llmload")

#: A SIGINT this many seconds or less after the first is the same Ctrl-C delivered twice, not a second Ctrl-C.
SIGINT_ECHO_S = 0.5
#: Seconds in-flight requests get to finish after a SIGTERM (docker stop waits 10 s before SIGKILL).
TERM_DRAIN_S = 3.0


def _interrupt_main() -> None:
    """Raise KeyboardInterrupt in the main greenlet, as gevent does for a Ctrl-C: Locust's own Ctrl-C path."""
    gevent.get_hub().handle_system_error(KeyboardInterrupt, KeyboardInterrupt())


def _end_load(run: Run, cause: str) -> None:
    """The stop begins now: the last step's window ends here, before in-flight requests drain (``load_end``,
    once; :meth:`harness.runtime.RunContext.end_load`). No-op without an open run (e.g. web UI between runs)."""
    if run.ctx is not None:
        run.ctx.end_load(cause)


def _echo(run: Run, now: float) -> bool:
    """True when a SIGINT at ``now`` is the first one delivered again (a terminal's Ctrl-C reaches the whole
    process group, and GNU ``timeout`` forwards the one it got to its child as well)."""
    first = run.signals.first_sigint
    return first is not None and now - first < SIGINT_ECHO_S


def _refuse_later_sigterm_handlers() -> None:
    """Keep this module's SIGTERM handler the only one: a later ``gevent.signal_handler(SIGTERM, ...)`` (Locust's
    main installs one that calls its ``shutdown()`` in the signal's greenlet, whose ``sys.exit`` raised a SystemExit
    traceback while the main greenlet shut down a second time: the summary and "Shutting down" printed twice) is
    dropped. Only in web-UI mode, where the handler of :func:`install_master_signals` covers every state."""
    orig = gevent.signal_handler
    if getattr(orig, "_llmload_guard", False):
        return

    def guarded(signalnum: int, handler: Any, *args: Any, **kwargs: Any) -> Any:
        if signalnum == signal.SIGTERM:
            log.debug("a later SIGTERM handler (%r) is not installed: llmload's handles SIGTERM", handler)
            return None
        return orig(signalnum, handler, *args, **kwargs)

    guarded._llmload_guard = True  # type: ignore[attr-defined]
    gevent.signal_handler = guarded


def mark_aborted(run: Run) -> str | None:
    """Before an abort (second Ctrl-C): the run's ``run.json`` says ``status: aborted`` with its end time, so a
    later ``llmload report`` (and anyone reading run.json) sees a dead run, not a running one; the records written so
    far stay (each was flushed as written). Returns the run directory (None: no run open here, e.g. a worker, or it
    could not be written: the abort goes on)."""
    ctx = run.ctx
    rd = getattr(ctx, "run_dir", None) if ctx is not None else None
    if rd is None:
        return None
    try:
        if not rd.closed:
            rd.meta["status"] = "aborted"
            rd.meta["end_wall"] = time.time()
            rd.write_meta()
    except Exception:  # the abort goes on whatever happens here
        log.exception("could not mark run.json aborted")
    return str(rd.path)


def install_master_signals(run: Run, runner: Any, web: bool = False) -> None:
    """Ctrl-C and SIGTERM on the master or the single process.

    * First SIGINT: Locust's Ctrl-C path (users stop, in-flight requests finish up to the stop timeout, records
      kept, report written, status interrupted). Handled here rather than by Python's default handler so that it
      also works when the process inherited SIGINT as ignored (a background job of a non-interactive shell,
      which is how ``--processes`` masters ignored Ctrl-C and SIGTERM).
    * Second SIGINT (at least :data:`SIGINT_ECHO_S` after the first): abort at once (exit 130): no report,
      run.json stays "running"; the records are on disk (flushed per record) and ``llmload report RUN_DIR``
      rebuilds the report. A SIGINT sooner than that is the first one delivered twice.
    * SIGTERM while the sweep runs: the first-SIGINT path with in-flight requests given :data:`TERM_DRAIN_S`.
      Locust 2.47 installs its own SIGTERM handler only after a headless shape has finished, so a SIGTERM during
      the sweep (``timeout``, docker stop, Kubernetes, Slurm) killed the process with no report; afterwards
      Locust's handler is in place. In-flight requests get the smaller of :data:`TERM_DRAIN_S` and the stop
      timeout (``--stop-timeout`` / ``steps.drain_timeout``).
    * Web UI (``web``): SIGTERM is Ctrl-C's path in every state (a run going: in-flight requests get the smaller of
      :data:`TERM_DRAIN_S` and the stop timeout, its report is written; between runs: the process just quits),
      and Locust's own SIGTERM handler is not installed (:func:`_refuse_later_sigterm_handlers`). A Ctrl-C between
      runs just quits (no drain message, the last run's summary is not printed again).
    """
    state = run.signals

    def on_int() -> None:
        now = time.monotonic()
        if _echo(run, now):
            return
        if state.interrupted:
            where = mark_aborted(run) or "RUN_DIR"
            sys.stderr.write(f"llmload: second Ctrl-C: aborting now (no report; records kept: llmload report "
                             f"{where})\n")
            sys.stderr.flush()
            os._exit(130)
        state.interrupted = True
        state.first_sigint = now
        if run.web and not run.active():
            run.report_summary = None  # the last run ended (report written, logged): no summary at quit
            log.warning("Ctrl-C: no run going: quitting")
        else:
            _end_load(run, "sigint")
            log.warning("Ctrl-C: stopping; in-flight requests finish and are recorded (Ctrl-C again: abort)")
        _interrupt_main()

    def on_term() -> None:
        if web:
            if state.interrupted:  # a Ctrl-C or SIGTERM is being handled: the quit goes on
                return
            state.interrupted = True
            if run.active():
                env = runner.environment
                env.stop_timeout = min(env.stop_timeout or 0.0, TERM_DRAIN_S)
                _end_load(run, "sigterm")
                log.warning("SIGTERM: stopping the run (in-flight requests get %.0f s), then quitting",
                            env.stop_timeout)
            else:
                run.report_summary = None
                log.warning("SIGTERM: no run going: quitting")
            _interrupt_main()
            return
        shape = getattr(runner, "shape_greenlet", None)
        if shape is not None and not shape.dead and not state.interrupted:
            log.warning("SIGTERM: stopping the sweep as for Ctrl-C (records kept, report written)")
            env = runner.environment
            env.stop_timeout = min(env.stop_timeout or 0.0, TERM_DRAIN_S)  # a SIGKILL usually follows soon
            state.interrupted = True
            _end_load(run, "sigterm")
            _interrupt_main()

    gevent.signal_handler(signal.SIGINT, on_int)
    gevent.signal_handler(signal.SIGTERM, on_term)
    if web:
        _refuse_later_sigterm_handlers()


def install_worker_sigint(run: Run, runner: Any) -> None:
    """Worker: the first Ctrl-C (SIGINT) lets in-flight requests finish (up to the profile's
    ``steps.drain_timeout``) and sends their records before the worker quits; a second one quits at once.

    Locust's worker quits on SIGINT at once, killing its users mid-request; a terminal's Ctrl-C reaches every
    process of ``--processes N`` (and a worker's own terminal), so without this the records of the requests in
    flight were lost even though the master waits for them. The quit itself is Locust's SIGTERM path."""

    def quit_now() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # Locust's handler: shutdown(), the worker tells the master it quits

    def on_int() -> None:
        now = time.monotonic()
        if run.signals.first_sigint is not None:
            if _echo(run, now):
                return
            log.warning("second Ctrl-C: quitting now")
            quit_now()
            return
        run.signals.first_sigint = now
        if run.ctx is None:  # no phase message yet: nothing in flight
            quit_now()
            return
        timeout = float(run.ctx.profile.steps.drain_timeout)
        log.warning("Ctrl-C: in-flight requests finish (up to %.0f s), then quit; Ctrl-C again: now", timeout)

        def stop_then_quit() -> None:
            worker_stop_gracefully(run, runner, timeout)
            quit_now()

        gevent.spawn(stop_then_quit)

    gevent.signal_handler(signal.SIGINT, on_int)
