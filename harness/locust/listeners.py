"""Locust event listeners: run set-up at ``init``, record transport, and the end of the run.

Nothing is registered by importing this module: :func:`register` adds the listeners to an event hook set, once
(:func:`harness.locust.register` calls it for Locust's ``locust.events``), each bound to the process's
:class:`harness.runtime.Run`, which ``init`` makes reachable as ``environment.llmload``.

* ``init``: every process registers the messages; the master (or the single process) installs the signal
  handlers, opens the exporter (first: a port in use stops the run before anything starts), loads the profile
  and sets up the run (exit code 2 on a bad profile or an unreachable target) and serves its metrics; a worker
  installs its Ctrl-C handler and waits for the master's first ``llmload_phase`` message.
* Record transport: a worker builds its context from each ``llmload_phase`` message and sends its records to the
  master in ``llmload_records`` batches (:class:`harness.runtime.RunContext`); the master writes them.
* Master: a worker lost while the load runs (no heartbeat, or it quit) is recorded as a ``worker_lost`` event
  (:mod:`harness.locust.lost`).
* ``test_stopping`` (a stop begins): the master writes ``load_end`` (once a run) before in-flight requests drain.
* ``test_stop``: a worker flushes its records; a master whose run stopped early drains its workers
  (:func:`harness.locust.drain.stop_workers`).
* ``quitting``: the master (or the single process) closes the run directory with its status (finished,
  interrupted, warmup_failed: exit code 3) and writes the report; ``quit``: prints its compact summary
  (:func:`harness.report.render_summary`), lingers for a last Prometheus scrape, stops the built-in simulator.

In web-UI mode (no ``--headless``) each Start is a run (:mod:`harness.locust.webrun`): ``init`` opens no run
directory, a Start opens one, ``test_stop`` (the end of the load, Stop) drains and closes it and writes its report,
and ``quitting`` (Ctrl-C) first stops and ends a run that goes. Headless runs are as described above.
"""

from __future__ import annotations

from locust.env import Environment
from locust.event import Events
from locust.runners import MasterRunner, WorkerRunner

import logging
import sys
from functools import partial
from typing import Any

import gevent

from harness import rate
from harness.config import PROFILES_DIR, ProfileError
from harness.locust import live, webrun
from harness.locust.drain import flush_worker_records, on_stop_request, on_worker_stopped, stop_workers
from harness.locust.form import Knobs
from harness.locust.live import open_exporter, serve_run
from harness.locust.lost import start_watch
from harness.locust.options import metrics_options
from harness.locust.setup import SimHolder, load_run_profile, resolve_target, setup_master, setup_worker_from_message
from harness.locust.signals import install_master_signals, install_worker_sigint
from harness.runtime import MSG_PHASE, MSG_RECORDS, MSG_STOP, MSG_STOPPED, Run, of

__all__ = ["register"]

log = logging.getLogger("llmload")

#: Seconds the master waits at quitting for the workers' last record batches, which arrive after test_stop.
_LAST_BATCH_WAIT_S = 1.0


def _on_phase(environment: Environment, msg: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        ctx = setup_worker_from_message(msg.data, runner.client_id[-12:], runner.client_id, of(environment))
        ctx.start_flusher(runner)


def _on_records(environment: Environment, msg: Any, **_: Any) -> None:
    ctx = of(environment).ctx
    if ctx is None or ctx.run_dir is None:
        return
    if ctx.run_dir.closed:  # a worker's batch after its run ended (it did not answer the stop in time)
        ctx.late += len(msg.data)
        log.warning("llmload: %d record(s) from %s after run %s ended: not recorded", len(msg.data), msg.node_id,
                    ctx.run_id)
        return
    for rec in msg.data:
        ctx.run_dir.write_record(rec)


def _profile_arg(opts: Any) -> str | None:
    """``--profile``, else ``--web-profile`` (a name in ``profiles/``), else None (the default)."""
    arg = getattr(opts, "profile", None)
    picked = getattr(opts, "web_profile", None)
    if not arg and picked:
        return str(PROFILES_DIR / f"{picked}.yaml")
    return arg


def _init_web(run: Run, environment: Environment, runner: Any, role: str, web_ui: Any) -> None:
    """Web-UI master / single process: check the launch profile and target (exit 2 on error), start the built-in
    simulator if it is the target, show the profile's values in the form, hook the Start; no run directory yet
    (each Start opens one, :mod:`harness.locust.webrun`)."""
    opts = environment.parsed_options
    run.web = True
    sims = SimHolder()
    run.sims = sims
    knobs = Knobs.from_options(opts)
    path, profile = load_run_profile(_profile_arg(opts), environment.host, knobs)
    target = resolve_target(profile, path, environment.host, sims)
    launch = webrun.launch_of(opts, environment.host, role, path, profile, sims)
    environment.host = target.base_url
    if opts is not None:
        opts.host = target.base_url
    if not environment.stop_timeout:
        environment.stop_timeout = profile.steps.drain_timeout
    shape = environment.shape_class
    if shape is not None:  # the form shows Number of users, Ramp up and Run time (fixed mode); headless: unchanged
        shape.use_common_options = True  # type: ignore[misc]
    webrun.install(web_ui, environment, run, launch)
    if getattr(opts, "autostart", False):  # no form: the command line's values
        form = {"mode": str(getattr(opts, "mode", "") or "sweep"), "host": target.base_url}
        if opts is not None and opts.num_users:
            form.update(user_count=str(opts.num_users), spawn_rate=str(opts.spawn_rate or ""),
                        run_time=str(opts.run_time or ""))
        webrun.start_run(run, environment, form, launch)
    log.info("llmload: web UI: profile %s, target %s; each Start is a run", path, target.shown)


def _on_init(run: Run, environment: Environment, runner: Any, web_ui: Any = None, **_: Any) -> None:
    environment.llmload = run  # type: ignore[attr-defined]
    rate.register(runner)
    runner.register_message(MSG_PHASE, _on_phase)
    runner.register_message(MSG_RECORDS, _on_records)
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_STOP, on_stop_request, concurrent=True)
        install_worker_sigint(run, runner)
        return
    if isinstance(runner, MasterRunner):
        runner.register_message(MSG_STOPPED, on_worker_stopped)
        start_watch(run, runner)  # a worker lost mid-run is recorded (phases.jsonl worker_lost, run.json)
    install_master_signals(run, runner, web=web_ui is not None)
    opts = environment.parsed_options
    role = "master" if isinstance(runner, MasterRunner) else "local"
    mo = metrics_options(opts)
    if getattr(opts, "mode", "sweep") == "fixed" and web_ui is None:
        sys.stderr.write("llmload: --mode fixed is for the web UI (headless: the profile's sweep)\n")
        raise SystemExit(2)
    exporter = open_exporter(mo)  # first: a port in use stops the run before anything starts
    run.runner = runner
    if web_ui is not None:
        try:
            _init_web(run, environment, runner, role, web_ui)
        except (ProfileError, RuntimeError, webrun.StartError) as e:
            if exporter is not None:
                exporter.stop()
            if run.sims is not None:
                run.sims.stop()
            sys.stderr.write(f"llmload: {e}\n")
            raise SystemExit(2) from None
        if exporter is not None and mo is not None:
            run.exporter, run.linger = exporter, mo.linger
            run.on_begin = lambda r: serve_run(r, exporter, runner, mo.linger)
            if run.ctx is not None:  # --autostart opened a run already
                serve_run(run, exporter, runner, mo.linger)
        return
    try:
        ctx = setup_master(
            _profile_arg(opts), environment.host, role, getattr(opts, "output_dir", None), Knobs.from_options(opts)
        )
    except (ProfileError, RuntimeError) as e:
        if exporter is not None:
            exporter.stop()
        sys.stderr.write(f"llmload: {e}\n")
        raise SystemExit(2) from None
    run.begin(ctx)
    environment.host = ctx.base_url
    if not environment.stop_timeout:  # --stop-timeout not given: drain in-flight requests at the end
        environment.stop_timeout = ctx.profile.steps.drain_timeout
    if opts is not None:
        opts.host = ctx.base_url
    if exporter is not None and mo is not None:
        serve_run(run, exporter, runner, mo.linger)


def _on_test_stopping(run: Run, environment: Environment, **_: Any) -> None:
    """Master / single process, as a stop begins (web UI's Stop, Ctrl-C, SIGTERM, the shape's end): the last
    step's window ends now, before in-flight requests drain (``load_end``, written once a run)."""
    if isinstance(environment.runner, WorkerRunner):
        return
    ctx = run.ctx
    if ctx is None or getattr(environment.shape_class, "warmup_error", None):
        return
    ctx.end_load("" if ctx.finished else "stop")


def _on_test_stop(run: Run, environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        flush_worker_records(run)
        if run.ctx is not None and run.ctx.web:
            # Locust's worker sleeps the stop timeout after a stop before it reads the next message; the users
            # are gone already, and the master's MSG_STOP (and the next Start) must not wait for nothing.
            environment.stop_timeout = 0.0
        return
    if run.web:
        webrun.end_run(run, environment)
        return
    if isinstance(runner, MasterRunner) and run.ctx is not None and not run.ctx.finished:
        stop_workers(run, runner)


def _on_quitting(run: Run, environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        flush_worker_records(run)
        return
    if run.web:
        webrun.stop_for_quit(run, environment)
        if run.any_failed and environment.process_exit_code is None:
            opts = environment.parsed_options
            environment.process_exit_code = int(getattr(opts, "exit_code_on_error", 1) if opts is not None else 1)
        return
    ctx = run.ctx
    if ctx is None or ctx.run_dir is None:
        return
    if isinstance(environment.runner, MasterRunner):
        gevent.sleep(_LAST_BATCH_WAIT_S)  # the workers' last record batches arrive after test_stop (see README)
    warmup_error = getattr(environment.shape_class, "warmup_error", None)
    status = "finished" if ctx.finished else ("warmup_failed" if warmup_error else "interrupted")
    if warmup_error:
        environment.process_exit_code = 3
    elif ctx.run_dir.failed and environment.process_exit_code is None:
        # Locust's rule (exit 1 when any request failed) from the records, not from Locust's stats: a master's
        # stats miss the workers' last reports when a Ctrl-C reached every process (--processes N).
        opts = environment.parsed_options
        environment.process_exit_code = int(getattr(opts, "exit_code_on_error", 1) if opts is not None else 1)
    if ctx.cut_off:
        ctx.run_dir.meta["cut_off"] = ctx.cut_off
    ctx.run_dir.close(status)
    try:
        from harness.report import render_summary, write_report

        rep, _md = write_report(ctx.run_dir.path)
        run.report_summary = render_summary(rep)
    except Exception as e:  # the records are safe on disk; the report can be rebuilt with `llmload report`
        log.exception("llmload: report failed: %s (rebuild with: llmload report %s)", e, ctx.run_dir.path)
        run.report_summary = None
    run.ended_run(ctx.run_dir.path, status)


def _on_quit(run: Run, **_: Any) -> None:
    ctx = run.ctx
    if run.sims is not None:
        run.sims.stop()
    if ctx is None:
        if run.exporter is not None:
            run.exporter.linger(run.linger)
        return
    if run.report_summary:  # the compact summary (120 columns); the full tables are in report.md / .json / .html
        sys.stdout.write("\n" + run.report_summary)
    if ctx.run_dir is not None and (run.report_summary or not run.web):  # web: only a run this quit ended
        sys.stdout.write(f"\nllmload: records and report in {ctx.run_dir.path}\n")
    sys.stdout.flush()
    if run.exporter is not None:
        run.exporter.linger(run.linger)
    if ctx.sim is not None:
        ctx.sim.stop()


#: The events :func:`register` adds a listener to, in order (``tests/locust/test_lifecycle.py`` counts them).
REGISTERED = ("init", "test_stopping", "test_stop", "quitting", "quit", "report_to_master", "worker_report")


def register(events: Events, run: Run) -> None:
    """Add llmload's run listeners to ``events`` (Locust's ``locust.events``, or a fresh
    :class:`locust.event.Events` in a test), each bound to ``run``: ``init`` (set-up, :func:`_on_init`, which also
    makes ``run`` reachable as ``environment.llmload`` and registers the custom messages), ``test_stopping``,
    ``test_stop``, ``quitting``, ``quit`` and the workers' in-flight reports (:func:`harness.locust.live.register`):
    one listener on each event of :data:`REGISTERED`. Call once per ``events``
    (:func:`harness.locust.register` does)."""
    events.init.add_listener(partial(_on_init, run))
    events.test_stopping.add_listener(partial(_on_test_stopping, run))
    events.test_stop.add_listener(partial(_on_test_stop, run))
    events.quitting.add_listener(partial(_on_quitting, run))
    events.quit.add_listener(partial(_on_quit, run))
    live.register(events, run)
