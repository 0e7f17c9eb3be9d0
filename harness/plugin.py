"""Locust event wiring: command-line options, run set-up, record transport, end-of-run report.

Import this module from a locustfile (``locustfiles/k26.py`` does) to get:

* ``--profile PATH`` (default ``profiles/demo.yaml`` without ``--host``, ``profiles/k26.yaml`` with one) and
  ``--output-dir DIR`` (overrides the profile's ``output.dir``);
* on the master or the single process: the profile validated before any load (exit code 2 on error), the
  built-in simulator started when there is no host, the run directory created;
* on workers: context from the master's phase messages, records sent to the master in batches;
* at the end (finished, stopped or Ctrl-C): the run directory closed with its status and the report written
  to ``report.md`` / ``report.json`` and printed.
"""

from __future__ import annotations

from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

import logging
import sys
from typing import Any

import gevent

from harness.config import ProfileError
from harness.runtime import (
    MSG_PHASE,
    MSG_RECORDS,
    RunContext,
    context,
    set_context,
    setup_master,
    setup_worker_from_message,
)

__all__ = ["installed"]

log = logging.getLogger("llmload")
installed = True
_state: dict[str, Any] = {"report_md": None, "ctx": None}


@events.init_command_line_parser.add_listener
def _add_options(parser: Any, **_: Any) -> None:
    # ``--profile`` is Locust's own option (a free-form run label there); llmload reads it as the profile path.
    parser.add_argument(
        "--output-dir", default=None, help="directory for run directories (default: profile output.dir)"
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
        ctx.run_dir.write_record(rec)


@events.init.add_listener
def _on_init(environment: Environment, runner: Any, **_: Any) -> None:
    runner.register_message(MSG_PHASE, _on_phase)
    runner.register_message(MSG_RECORDS, _on_records)
    if isinstance(runner, WorkerRunner):
        return
    opts = environment.parsed_options
    role = "master" if isinstance(runner, MasterRunner) else "local"
    try:
        ctx = setup_master(getattr(opts, "profile", None), environment.host, role, getattr(opts, "output_dir", None))
    except (ProfileError, RuntimeError) as e:
        sys.stderr.write(f"llmload: {e}\n")
        raise SystemExit(2) from None
    set_context(ctx)
    _state["ctx"] = ctx
    environment.host = ctx.base_url
    if not environment.stop_timeout:  # --stop-timeout not given: drain in-flight requests at the end
        environment.stop_timeout = ctx.profile.steps.drain_timeout
    if opts is not None:
        opts.host = ctx.base_url


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        try:
            context().flush()
        except RuntimeError:
            pass


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    if isinstance(environment.runner, WorkerRunner):
        try:
            context().flush()
        except RuntimeError:
            pass
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
    if ctx.sim is not None:
        ctx.sim.stop()
