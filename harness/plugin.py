"""Locust event wiring: command-line options, run set-up, record transport, end-of-run report.

Import this module from a locustfile (``locustfiles/k26.py`` does) to get:

* ``--profile PATH`` (default ``profiles/demo.yaml`` without ``--host``, ``profiles/k26.yaml`` with one) and
  ``--output-dir DIR`` (overrides the profile's ``output.dir``);
* on the master or the single process: the profile validated before any load (exit code 2 on error), the
  built-in simulator started when there is no host, the run directory created;
* on workers: context from the master's phase messages, records sent to the master in batches;
* on the master or the single process: the Prometheus exporter (:mod:`harness.exporter`) on its own port
  (``--metrics-addr`` / ``--metrics-port``, off with ``--no-metrics``), counting every record written to
  ``records.jsonl``; workers add their in-flight request count to their Locust reports;
* at the end (finished, stopped or Ctrl-C): the run directory closed with its status and the report written
  to ``report.md`` / ``report.json`` and printed.
"""

from __future__ import annotations

from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

import logging
import os
import signal
import sys
import time
from typing import Any

import gevent

from harness.config import ProfileError
from harness.exporter import DEFAULT_ADDR, DEFAULT_PORT, Exporter, RunCollector, run_info
from harness.metrics import IN_FLIGHT, RunMetrics, prompt_labels
from harness.runtime import (
    MSG_PHASE,
    MSG_RECORDS,
    MSG_STOP,
    MSG_STOPPED,
    RunContext,
    context,
    set_context,
    setup_master,
    setup_worker_from_message,
)

__all__: list[str] = []

log = logging.getLogger("llmload")
_state: dict[str, Any] = {"report_md": None, "ctx": None, "exporter": None, "linger": 0.0}
#: Master: requests in flight on each worker, from the workers' Locust reports (key ``llmload_metrics``).
_worker_in_flight: dict[str, int] = {}
#: Master: workers that answered MSG_STOP (all their records sent).
_workers_stopped: set[str] = set()
#: Seconds the master waits for the workers' MSG_STOPPED beyond the stop timeout.
_STOP_MARGIN_S = 10.0


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_: Any) -> None:
    # ``--profile`` is Locust's own option (a free-form run label there); llmload reads it as the profile path.
    parser.add_argument(
        "--output-dir", default=None, help="directory for run directories (default: profile output.dir)"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        include_in_web_ui=False,
        help=f"port of the Prometheus exporter (default {DEFAULT_PORT}; 0 picks a free port)",
    )
    parser.add_argument(
        "--metrics-addr",
        default=None,
        include_in_web_ui=False,
        help=f"bind address of the Prometheus exporter (default {DEFAULT_ADDR}; 0.0.0.0 for every interface)",
    )
    parser.add_argument(
        "--no-metrics", action="store_true", default=False, include_in_web_ui=False, help="no Prometheus exporter"
    )
    parser.add_argument(
        "--metrics-linger",
        type=float,
        default=30.0,
        include_in_web_ui=False,
        help="at exit, if the exporter was scraped during the run, wait up to this many seconds for one more "
        "scrape so Prometheus gets the final totals (default 30; 0: exit at once)",
    )


def _on_phase(environment: Environment, msg: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        ctx = setup_worker_from_message(msg.data, runner.client_id[-12:])
        ctx.start_flusher(runner)


def _on_records(environment: Environment, msg: Any, **_: Any) -> None:
    ctx = _state["ctx"]
    if ctx is None or ctx.run_dir is None:
        return
    for rec in msg.data:
        ctx.write(rec)


#: A SIGINT this many seconds or less after the first is the same Ctrl-C delivered twice, not a second Ctrl-C.
_SIGINT_ECHO_S = 0.5
#: Seconds in-flight requests get to finish after a SIGTERM (docker stop waits 10 s before SIGKILL).
_TERM_DRAIN_S = 3.0


def _interrupt_main() -> None:
    """Raise KeyboardInterrupt in the main greenlet, as gevent does for a Ctrl-C: Locust's own Ctrl-C path."""
    gevent.get_hub().handle_system_error(KeyboardInterrupt, KeyboardInterrupt())


def _install_signals(runner: Any) -> None:
    """Ctrl-C and SIGTERM on the master or the single process.

    * First SIGINT: Locust's Ctrl-C path (users stop, in-flight requests finish up to the stop timeout, records
      kept, report written, status interrupted). Handled here rather than by Python's default handler so that it
      also works when the process inherited SIGINT as ignored (a background job of a non-interactive shell,
      which is how ``--processes`` masters ignored Ctrl-C and SIGTERM).
    * Second SIGINT (at least :data:`_SIGINT_ECHO_S` after the first): abort at once (exit 130): no report,
      run.json stays "running"; the records are on disk (flushed per record) and ``llmload report RUN_DIR``
      rebuilds the report. A SIGINT sooner than that is the first one delivered twice: a terminal's Ctrl-C
      reaches the whole process group, and GNU ``timeout`` forwards the one it got to its child as well.
    * SIGTERM while the sweep runs: the first-SIGINT path with in-flight requests given 3 s. Locust 2.47
      installs its own SIGTERM handler only after a headless shape has finished, so a SIGTERM during the sweep
      (``timeout``, docker stop, Kubernetes, Slurm) killed the process with no report; afterwards Locust's
      handler is in place.
    """
    state: dict[str, Any] = {"interrupted": False, "first_int": None}

    def on_int() -> None:
        now = time.monotonic()
        first = state["first_int"]
        if first is not None and now - first < _SIGINT_ECHO_S:
            return  # the same Ctrl-C delivered twice (GNU timeout forwards what the process group also got)
        if state["interrupted"]:
            sys.stderr.write("llmload: second Ctrl-C: aborting now (no report; records kept: llmload report DIR)\n")
            sys.stderr.flush()
            os._exit(130)
        state["interrupted"] = True
        state["first_int"] = now
        log.warning("llmload: Ctrl-C: stopping; in-flight requests finish and are recorded (Ctrl-C again: abort)")
        _interrupt_main()

    def on_term() -> None:
        shape = getattr(runner, "shape_greenlet", None)
        if shape is not None and not shape.dead and not state["interrupted"]:
            log.warning("llmload: SIGTERM: stopping the sweep as for Ctrl-C (records kept, report written)")
            env = runner.environment
            env.stop_timeout = min(env.stop_timeout or 0.0, _TERM_DRAIN_S)  # a SIGKILL usually follows soon
            state["interrupted"] = True
            _interrupt_main()

    gevent.signal_handler(signal.SIGINT, on_int)
    gevent.signal_handler(signal.SIGTERM, on_term)


@events.init.add_listener
def _on_init(environment: Environment, runner: Any, **_: Any) -> None:
    runner.register_message(MSG_PHASE, _on_phase)
    runner.register_message(MSG_RECORDS, _on_records)
    if isinstance(runner, WorkerRunner):
        runner.register_message(MSG_STOP, _on_stop_request, concurrent=True)
        _install_worker_sigint(runner)
        return
    if isinstance(runner, MasterRunner):
        runner.register_message(MSG_STOPPED, _on_worker_stopped)
    _install_signals(runner)
    opts = environment.parsed_options
    role = "master" if isinstance(runner, MasterRunner) else "local"
    exporter = _open_exporter(opts)  # first: a port in use stops the run before anything starts
    try:
        ctx = setup_master(getattr(opts, "profile", None), environment.host, role, getattr(opts, "output_dir", None))
    except (ProfileError, RuntimeError) as e:
        if exporter is not None:
            exporter.stop()
        sys.stderr.write(f"llmload: {e}\n")
        raise SystemExit(2) from None
    set_context(ctx)
    _state["ctx"] = ctx
    environment.host = ctx.base_url
    if not environment.stop_timeout:  # --stop-timeout not given: drain in-flight requests at the end
        environment.stop_timeout = ctx.profile.steps.drain_timeout
    if opts is not None:
        opts.host = ctx.base_url
    if exporter is not None:
        _serve_run(exporter, runner, ctx, float(getattr(opts, "metrics_linger", 0.0) or 0.0))


def _open_exporter(opts: Any) -> Exporter | None:
    """Start the exporter's HTTP server (nothing to serve yet), unless ``--no-metrics``.

    An explicit ``--metrics-port`` or ``--metrics-addr`` that cannot be bound stops the run (exit code 2), as
    does a port outside 0-65535; the default address and port in use (e.g. by another run on this machine) only
    log a warning.
    """
    if getattr(opts, "no_metrics", False):
        return None
    linger = getattr(opts, "metrics_linger", 0.0)
    if linger is not None and not float(linger) >= 0.0:
        sys.stderr.write(f"llmload: --metrics-linger {linger}: must be >= 0 seconds (0: do not wait)\n")
        raise SystemExit(2)
    port_arg = getattr(opts, "metrics_port", None)
    addr_arg = getattr(opts, "metrics_addr", None)
    addr = addr_arg or DEFAULT_ADDR
    port = DEFAULT_PORT if port_arg is None else port_arg
    if not 0 <= port <= 65535:
        sys.stderr.write(f"llmload: --metrics-port {port}: not a TCP port (0-65535; 0 picks a free one)\n")
        raise SystemExit(2)
    exporter = Exporter(addr, port)
    try:
        exporter.start()
    except (OSError, OverflowError, ValueError) as e:
        if port_arg is not None or addr_arg is not None:
            sys.stderr.write(f"llmload: cannot serve metrics on {addr}:{port}: {e} (use --no-metrics to skip)\n")
            raise SystemExit(2) from None
        log.warning("llmload: Prometheus exporter NOT started on %s:%d: %s (see --metrics-port)", addr, port, e)
        return None
    return exporter


def _serve_run(exporter: Exporter, runner: Any, ctx: RunContext, linger: float) -> None:
    """Count every record and phase event written to the run directory, and serve them to Prometheus."""
    assert ctx.run_dir is not None
    prompts = ctx.profile.prompts
    labels = prompt_labels((q.label, q.weight, q.prompt_class is not None) for q in prompts)
    if len(labels) > len(set(labels.values())):
        log.warning(
            "llmload: %d prompt classes: the Prometheus 'prompt' label shows %s, the rest as 'other' "
            "(give prompts a 'class' in the profile to group them)",
            len(labels),
            sorted(set(labels.values()) - {"other"}) or "none of them",
        )
    metrics = RunMetrics(ctx.model, labels)
    run_dir = ctx.run_dir
    # The records are the ground truth: whatever writes a record (local users, the warm-up, the master for its
    # workers' batches) goes through RunDir.write_record, so the exported totals equal records.jsonl exactly.
    write_record, write_phase = run_dir.write_record, run_dir.write_phase

    def _write_record(rec: dict[str, Any]) -> None:
        write_record(rec)
        metrics.observe(rec)

    def _write_phase(event: dict[str, Any]) -> None:
        write_phase(event)
        metrics.on_phase(event)

    run_dir.write_record = _write_record  # type: ignore[method-assign,assignment]
    run_dir.write_phase = _write_phase  # type: ignore[method-assign,assignment]

    def _in_flight() -> int:
        clients = getattr(runner, "clients", None)
        workers = sum(n for cid, n in _worker_in_flight.items() if clients is None or cid in clients)
        return IN_FLIGHT.n + workers

    exporter.attach(
        RunCollector(
            metrics,
            run_info(ctx.profile.name, ctx.base_url, run_dir.path.name),
            ctx.profile.report.hours_to_n[0],
            users=lambda: runner.user_count,
            in_flight=_in_flight,
        )
    )
    _state["exporter"] = exporter
    _state["linger"] = linger
    log.info("llmload: Prometheus metrics on %s", exporter.url)


@events.report_to_master.add_listener
def _on_report_to_master(data: dict[str, Any], **_: Any) -> None:
    data["llmload_metrics"] = {"in_flight": IN_FLIGHT.n}


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    m = data.get("llmload_metrics")
    if isinstance(m, dict):
        _worker_in_flight[client_id] = int(m.get("in_flight") or 0)


def _flush_worker_records() -> None:
    """On a worker: send the queued records to the master now (no-op before the first phase message)."""
    try:
        context().flush()
    except RuntimeError:
        pass


def _worker_stop_gracefully(runner: Any, stop_timeout: float) -> None:
    """Worker: stop the users, in-flight requests given ``stop_timeout`` s to finish (each user sends its last
    record as it stops), then send what is left to the master. Blocks until done; a second call (the master's
    MSG_STOP after this worker's own Ctrl-C) waits for the first instead of starting another."""
    g = _state.get("worker_stop")
    if g is None:
        runner.environment.stop_timeout = stop_timeout

        def stop() -> None:
            runner.stop()  # no-op when already stopped (e.g. the web UI's Stop reached the worker first)
            _flush_worker_records()

        g = _state["worker_stop"] = gevent.spawn(stop)
    g.join()


def _on_stop_request(environment: Environment, msg: Any, **_: Any) -> None:
    """Worker, on MSG_STOP: stop gracefully with the master's stop timeout, then answer MSG_STOPPED."""
    runner = environment.runner
    assert runner is not None
    data = msg.data if isinstance(msg.data, dict) else {}
    _worker_stop_gracefully(runner, float(data.get("stop_timeout") or 0.0))
    runner.send_message(MSG_STOPPED, {})


def _install_worker_sigint(runner: Any) -> None:
    """Worker: the first Ctrl-C (SIGINT) lets in-flight requests finish (up to the profile's
    ``steps.drain_timeout``) and sends their records before the worker quits; a second one quits at once.

    Locust's worker quits on SIGINT at once, killing its users mid-request; a terminal's Ctrl-C reaches every
    process of ``--processes N`` (and a worker's own terminal), so without this the records of the requests in
    flight were lost even though the master waits for them. The quit itself is Locust's SIGTERM path."""

    def quit_now() -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # Locust's handler: shutdown(), the worker tells the master it quits

    def on_int() -> None:
        first = _state.get("worker_sigint")
        if first is not None:
            if time.monotonic() - first < _SIGINT_ECHO_S:
                return  # the same Ctrl-C delivered twice (see _install_signals)
            log.warning("llmload: second Ctrl-C: quitting now")
            quit_now()
            return
        _state["worker_sigint"] = time.monotonic()
        try:
            timeout = float(context().profile.steps.drain_timeout)
        except RuntimeError:  # no phase message yet: nothing in flight
            quit_now()
            return
        log.warning("llmload: Ctrl-C: in-flight requests finish (up to %.0f s), then quit; Ctrl-C again: now", timeout)

        def stop_then_quit() -> None:
            _worker_stop_gracefully(runner, timeout)
            quit_now()

        gevent.spawn(stop_then_quit)

    gevent.signal_handler(signal.SIGINT, on_int)


def _on_worker_stopped(environment: Environment, msg: Any, **_: Any) -> None:
    _workers_stopped.add(str(msg.node_id))


def _stop_workers(runner: Any) -> None:
    """Master, when a run stops before its end: have every worker stop its users and send its records, and wait
    for them (at most the stop timeout + 10 s) while this process still receives messages.

    Without this, Locust's master quits 0.5 s after telling the workers to quit, and the records of requests that
    finish after that (a reasoning request can stream for minutes) never reach ``records.jsonl``."""
    workers = [c.id for c in runner.clients.all]
    if not workers:
        return
    timeout = float(runner.environment.stop_timeout or 0.0)
    log.info("llmload: run stopped: %d worker(s) finish in-flight requests (up to %.0f s)", len(workers), timeout)
    _workers_stopped.clear()
    for w in workers:
        runner.send_message(MSG_STOP, {"stop_timeout": timeout}, client_id=w)

    def pending() -> set[str]:  # a worker that quit (its own Ctrl-C) sent its records before its quit message
        return {w for w in workers if w not in _workers_stopped and w in runner.clients}

    deadline = time.monotonic() + timeout + _STOP_MARGIN_S
    while time.monotonic() < deadline and pending():
        gevent.sleep(0.1)
    missing = sorted(pending())
    if missing:
        log.warning("llmload: no final records from worker(s) %s (their last requests are missing)", missing)


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        _flush_worker_records()
        return
    ctx: RunContext | None = _state["ctx"]
    if isinstance(runner, MasterRunner) and ctx is not None and not ctx.finished:
        _stop_workers(runner)


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        _flush_worker_records()
        return
    ctx: RunContext | None = _state["ctx"]
    if ctx is None or ctx.run_dir is None:
        return
    if isinstance(environment.runner, MasterRunner):
        gevent.sleep(1.0)  # the workers' last record batches arrive after test_stop (see README)
    shape = environment.shape_class
    warmup_error = getattr(shape, "warmup_error", None)
    status = "finished" if ctx.finished else ("warmup_failed" if warmup_error else "interrupted")
    if warmup_error:
        environment.process_exit_code = 3
    ctx.run_dir.close(status)
    try:
        from harness.report import write_report

        _, md = write_report(ctx.run_dir.path)
        _state["report_md"] = md
    except Exception as e:  # the records are safe on disk; the report can be rebuilt with `llmload report`
        log.exception("llmload: report failed: %s (rebuild with: llmload report %s)", e, ctx.run_dir.path)
        _state["report_md"] = None


@events.quit.add_listener
def _on_quit(**_: Any) -> None:
    ctx: RunContext | None = _state["ctx"]
    if ctx is None:
        return
    md = _state["report_md"]
    if md:
        sys.stdout.write("\n" + md + "\n")
    if ctx.run_dir is not None:
        sys.stdout.write(f"\nllmload: records and report in {ctx.run_dir.path}\n")
    sys.stdout.flush()
    exporter: Exporter | None = _state["exporter"]
    if exporter is not None:
        exporter.linger(_state["linger"])
    if ctx.sim is not None:
        ctx.sim.stop()
