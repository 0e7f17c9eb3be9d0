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
* ``test_stopping`` (a stop begins): the master writes ``load_end`` (once a run) before in-flight requests drain;
  the run is "stopping" (:func:`harness.locust.end.begin_stop`).
* ``test_stop``: a worker flushes its records; the master (or the single process) ends the run
  (:func:`harness.locust.end.end_run`: its workers drained, the run directory closed with its status, finished,
  interrupted or warmup_failed, the report written).
* ``quitting``: a run still going (web UI: Ctrl-C, SIGTERM) is stopped and ended the same way, and the exit code
  set (:func:`harness.locust.end.set_exit_code`: 3 after a headless run's failed warm-up, 1 when a request
  failed); ``quit``: prints the compact summary (:func:`harness.report.render_summary`), lingers for a last
  Prometheus scrape, stops the built-in simulator.

A headless run is the web UI's lifecycle with one run, started at ``init`` (Locust's rule: headless is autostart
without a web UI) by the web UI's own start, :func:`harness.locust.webrun.start_run`, with a headless launch
(:func:`harness.locust.webrun.headless_launch`: the command line's values, no form). In web-UI mode (no
``--headless``) each Start is a run (:mod:`harness.locust.webrun`): ``init`` opens no run directory, a Start opens
one; the rest is the same path.
"""

from __future__ import annotations

from locust.env import Environment
from locust.event import Events
from locust.runners import MasterRunner, WorkerRunner

import logging
import sys
from functools import partial
from typing import Any

from harness import rate
from harness.config import PROFILES_DIR, ProfileError
from harness.locust import live, webrun
from harness.locust.drain import flush_worker_records, on_stop_request, on_worker_stopped, refuse_spawns_while_quitting
from harness.locust.end import begin_stop, end_run, set_exit_code, stop_for_quit
from harness.locust.form import Knobs
from harness.locust.live import open_exporter, serve_run
from harness.locust.lost import start_watch
from harness.locust.options import metrics_options
from harness.locust.setup import SimHolder, load_run_profile, resolve_target, setup_worker_from_message
from harness.locust.signals import install_master_signals, install_worker_sigint
from harness.runtime import MSG_PHASE, MSG_RECORDS, MSG_STOP, MSG_STOPPED, Run, of
from harness.selfcert import CPU_EVENT, MSG_CPU

__all__ = ["register"]

log = logging.getLogger("llmload")


def _on_phase(environment: Environment, msg: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        ctx = setup_worker_from_message(msg.data, runner.client_id[-12:], runner.client_id, of(environment))
        ctx.sample_cpu()  # this phase's first CPU sample of this worker (harness.selfcert)
        ctx.start_flusher(runner)


def _on_records(environment: Environment, msg: Any, **_: Any) -> None:
    ctx = of(environment).ctx
    if ctx is None or ctx.run_dir is None:
        return
    if ctx.run_dir.closed:  # a worker's batch after its run ended (it did not answer the stop in time)
        ctx.late += len(msg.data)
        log.warning("%d record(s) from %s after run %s ended: not recorded", len(msg.data), msg.node_id,
                    ctx.run_id)
        return
    for rec in msg.data:
        ctx.run_dir.write_record(rec)


def _on_cpu(environment: Environment, msg: Any, **_: Any) -> None:
    """Master: write a worker's ``client_cpu`` samples (:mod:`harness.selfcert`) to ``phases.jsonl``."""
    ctx = of(environment).ctx
    if ctx is None or ctx.run_dir is None or ctx.run_dir.closed:
        return
    for ev in msg.data:
        if isinstance(ev, dict) and ev.get("event") == CPU_EVENT:
            ctx.run_dir.write_phase(ev)


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
    log.info("web UI: profile %s, target %s; each Start is a run", path, target.shown)


def _on_init(run: Run, environment: Environment, runner: Any, web_ui: Any = None, **_: Any) -> None:
    environment.llmload = run  # type: ignore[attr-defined]
    rate.register(runner)
    runner.register_message(MSG_PHASE, _on_phase)
    runner.register_message(MSG_RECORDS, _on_records)
    runner.register_message(MSG_CPU, _on_cpu)
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_STOP, on_stop_request, concurrent=True)
        install_worker_sigint(run, runner)
        refuse_spawns_while_quitting(run, runner)
        return
    if isinstance(runner, MasterRunner):
        runner.register_message(MSG_STOPPED, on_worker_stopped)
        start_watch(run, runner)  # a worker lost mid-run is recorded (phases.jsonl worker_lost, run.json)
    install_master_signals(run, runner, web=web_ui is not None)
    opts = environment.parsed_options
    role = "master" if isinstance(runner, MasterRunner) else "local"
    mo = metrics_options(opts)
    if web_ui is None and getattr(opts, "mode", "sweep") != "fixed" and not isinstance(runner, WorkerRunner) and \
            (getattr(opts, "num_users", None) is not None or getattr(opts, "run_time", None)):
        log.warning("-u/--users and -t/--run-time do not change the sweep (the profile's steps run as written): "
                    "for one fixed concurrency give --mode fixed -u N [-r RATE] [-t TIME], or --steps N "
                    "--step-duration SECONDS")
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
    sims = SimHolder()
    run.sims = sims  # the built-in simulator, when it is the target, stops at quit
    launch = webrun.headless_launch(opts, environment.host, role, _profile_arg(opts), sims)
    try:  # the one start of a run, the web UI's: Locust's rule, headless is a run started automatically
        webrun.start_run(run, environment, {"host": environment.host or ""}, launch)
    except webrun.StartError as e:
        if exporter is not None:
            exporter.stop()
        sims.stop()
        sys.stderr.write(f"llmload: {e.__cause__ or e}\n")
        raise SystemExit(2) from None
    if exporter is not None and mo is not None:
        serve_run(run, exporter, runner, mo.linger)


def _on_test_stopping(run: Run, environment: Environment, **_: Any) -> None:
    """Master / single process, as a stop begins (web UI's Stop, Ctrl-C, SIGTERM, the shape's end): the last
    step's window ends now, before in-flight requests drain (``load_end``, written once a run; not after a failed
    warm-up), and the run is "stopping" (:func:`harness.locust.end.begin_stop`)."""
    if isinstance(environment.runner, WorkerRunner):
        return
    ctx = run.ctx
    if ctx is not None and not getattr(environment.shape_class, "warmup_error", None):
        ctx.end_load("" if ctx.finished else "stop")
    begin_stop(run, environment)


def _on_test_stop(run: Run, environment: Environment, **_: Any) -> None:
    """The load stopped. A worker sends its records; the master (or the single process) ends the run, headless or
    web UI alike (:func:`harness.locust.end.end_run`)."""
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        flush_worker_records(run)
        # Locust's worker sleeps the stop timeout after a stop before it reads the next message; the users are gone
        # already, and the master's MSG_STOP at the run's end (and a web UI's next Start) must not wait for nothing.
        environment.stop_timeout = 0.0
        return
    end_run(run, environment)


def _on_quitting(run: Run, environment: Environment, **_: Any) -> None:
    """Quitting: a worker sends its records; the master (or the single process) stops and ends a run still going
    (:func:`harness.locust.end.stop_for_quit`: the web UI's Ctrl-C; a headless run ended at ``test_stop``) and sets
    the exit code (:func:`harness.locust.end.set_exit_code`)."""
    if isinstance(environment.runner, WorkerRunner):
        flush_worker_records(run)
        return
    stop_for_quit(run, environment)
    set_exit_code(run, environment)


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
