"""Live metrics: the Prometheus exporter on the master (or the single process), fed by the run directory.

The records are the ground truth: whatever writes a record (local users, the warm-up, the master for its
workers' batches) goes through :meth:`harness.records.RunDir.write_record`, and the run's
:class:`harness.metrics.RunMetrics` listens to it (``on_record``) and to the phase events (``on_phase``), so the
exported totals equal ``records.jsonl`` exactly. Workers add their in-flight request count to their Locust
reports; the master adds them up for ``llmload_requests_in_flight``.
"""

from __future__ import annotations

from locust.event import Events

import logging
import sys
import time
from functools import partial
from typing import Any

from harness.exporter import Exporter, RunCollector, run_info
from harness.locust.options import MetricsOptions
from harness.metrics import RunMetrics, prompt_labels
from harness.records import redact_url
from harness.redact import redact_text
from harness.runtime import Run

__all__ = ["open_exporter", "register", "serve_run"]

log = logging.getLogger("llmload")

#: Key of llmload's part of a worker's Locust report.
_REPORT_KEY = "llmload_metrics"


def open_exporter(mo: MetricsOptions | None) -> Exporter | None:
    """Start the exporter's HTTP server (nothing to serve yet) per the ``--metrics-*`` options
    (:func:`harness.locust.options.metrics_options`); None with ``--no-metrics`` (``mo`` None) or when the default
    address and port cannot be bound (e.g. another run on this machine has them: a warning is logged).

    Raises:
        SystemExit: code 2 (one line on stderr) when an explicit ``--metrics-port`` or ``--metrics-addr`` cannot
            be bound.
    """
    if mo is None:
        return None
    exporter = Exporter(mo.addr, mo.port)
    try:
        exporter.start()
    except (OSError, OverflowError, ValueError) as e:
        if mo.explicit:
            sys.stderr.write(f"llmload: cannot serve metrics on {mo.addr}:{mo.port}: {e} (use --no-metrics to skip)\n")
            raise SystemExit(2) from None
        log.warning(
            "Prometheus exporter NOT started on %s:%d: %s (see --metrics-port)", mo.addr, mo.port, e
        )
        return None
    return exporter


def time_scale_of(ctx: Any) -> float:
    """The simulator's time scale of ``ctx``'s target (1.0: a server, or the simulator in real time)."""
    meta = ctx.run_dir.meta.get("simulator") if ctx.run_dir is not None else None
    ts = meta.get("time_scale") if isinstance(meta, dict) else None
    return float(ts) if isinstance(ts, (int, float)) and ts > 0 else 1.0


def serve_run(run: Run, exporter: Exporter, runner: Any, linger: float) -> RunMetrics:
    """Count every record and phase event written to the run's directory and serve them with ``exporter``.

    ``run.ctx`` must be set up with its run directory (master or single process); a collector served before
    (the previous run of a web-UI process) is replaced. Sets ``run.metrics``,
    ``run.exporter`` and ``run.linger`` (seconds to wait at quit for a last scrape); returns the metrics.
    """
    ctx = run.ctx
    assert ctx is not None and ctx.run_dir is not None
    labels = prompt_labels(ctx.prompt_source.label_rows())
    if len(labels) > len(set(labels.values())):
        log.warning(
            "%d prompt classes: the Prometheus 'prompt' label shows %s, the rest as 'other' "
            "(give prompts a 'class' in the profile to group them)",
            len(labels),
            sorted(set(labels.values()) - {"other"}) or "none of them",
        )
    metrics = RunMetrics(ctx.model, labels)
    run_dir = ctx.run_dir
    run_dir.on_record.add_listener(metrics.observe)
    run_dir.on_phase.add_listener(metrics.on_phase)
    workers = run.workers.in_flight
    own = run.in_flight

    def in_flight() -> int:
        clients = getattr(runner, "clients", None)
        return own.n + sum(n for cid, n in workers.items() if clients is None or cid in clients)

    if exporter.collector is not None:  # web UI: the previous run's metrics make way for this run's
        exporter.registry.unregister(exporter.collector)  # type: ignore[arg-type]
        exporter.collector = None
    exporter.attach(
        RunCollector(
            metrics,
            run_info(ctx.profile.name, redact_text(redact_url(ctx.base_url), ctx.secrets), run_dir.path.name,
                     time_scale_of(ctx)),
            ctx.profile.report.hours_to_n[0],
            users=lambda: runner.user_count,
            in_flight=in_flight,
            time_scale=time_scale_of(ctx),
        )
    )
    run.metrics, run.exporter, run.linger = metrics, exporter, linger
    log.info("Prometheus metrics on %s", exporter.url)
    return metrics


def _on_report_to_master(run: Run, data: dict[str, Any], **_: Any) -> None:
    data[_REPORT_KEY] = {"in_flight": run.in_flight.n}


def _on_worker_report(run: Run, client_id: str, data: dict[str, Any], **_: Any) -> None:
    book = run.workers
    book.seen[client_id] = time.time()
    m = data.get(_REPORT_KEY)
    if isinstance(m, dict):
        book.in_flight[client_id] = int(m.get("in_flight") or 0)


def register(events: Events, run: Run) -> None:
    """Add the in-flight reports to ``events``, bound to ``run``: a worker adds its requests in flight
    (:attr:`harness.runtime.Run.in_flight`) to each Locust report to the master (``report_to_master``); the master
    keeps each worker's count and last report time in ``run.workers`` (``worker_report``)."""
    events.report_to_master.add_listener(partial(_on_report_to_master, run))
    events.worker_report.add_listener(partial(_on_worker_report, run))
