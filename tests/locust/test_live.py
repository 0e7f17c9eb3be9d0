"""harness.locust.live: the exporter opened per the options, and fed by the run directory's listeners."""

from __future__ import annotations

import socket
from argparse import Namespace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.config import load_profile
from harness.exporter import Exporter
from harness.locust import options
from harness.locust.live import open_exporter, serve_run
from harness.locust.options import metrics_options
from harness.metrics import RunMetrics
from harness.records import RunDir
from harness.result import RequestResult
from harness.runtime import Run, RunContext

ROOT = Path(__file__).resolve().parents[2]


def opened(**kw: Any) -> Exporter | None:
    """open_exporter() for Locust's parsed options ``kw`` (the rest: defaults)."""
    return open_exporter(metrics_options(Namespace(**{"no_metrics": False, "metrics_port": None,
                                                      "metrics_addr": None, **kw})))  # fmt: skip


def test_the_exporter_is_opened_per_options(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    assert opened(no_metrics=True) is None
    exp = opened(metrics_port=0)
    assert exp is not None and exp.port > 0
    try:
        # The port is taken: an explicit --metrics-port stops the run (exit 2) ...
        with pytest.raises(SystemExit) as ei:
            opened(metrics_port=exp.port)
        assert ei.value.code == 2
        # ... the default port only warns (e.g. a second run on the same machine).
        monkeypatch.setattr(options, "DEFAULT_PORT", exp.port)
        assert opened() is None
        assert "Prometheus exporter NOT started" in caplog.text
        # ... but not when the address was given explicitly either (the user asked for metrics there).
        with pytest.raises(SystemExit) as ei:
            opened(metrics_addr="127.0.0.1")
        assert ei.value.code == 2
    finally:
        exp.stop()
    # An address this machine does not have, given explicitly: exit 2, not a run without metrics.
    with pytest.raises(SystemExit) as ei:
        opened(metrics_addr="192.0.2.1")
    assert ei.value.code == 2


def record(user: str, **kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "prompt_id": "quicksort", "prompt_class": "quicksort", "user": user, "phase": "step", "step": 1,
        "concurrency": 2, "start_wall": 1000.0, "ttft": 0.5, "e2e": 3.0, "output_tokens": 10, "reasoning_tokens": 4,
        "prompt_tokens": 5, "ok": True, "finish_reason": "stop", "truncated": False, "usable": True,
    }  # fmt: skip
    r.update(kw)
    return r


def test_serve_run_counts_what_the_run_directory_writes(tmp_path: Path) -> None:
    """The metrics listen to the run directory: every record and phase event written there is counted, by
    whoever writes it (users, the warm-up, the master for its workers), and only while the directory is open."""
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    ctx = RunContext(profile=profile, base_url="http://127.0.0.1:1/v1", model="m", role="master")
    ctx.run_dir = RunDir.create(tmp_path, profile.name, {})
    run = Run()
    run.hold(ctx)
    exporter = Exporter("127.0.0.1", 0)
    connected = {"w1"}
    runner = SimpleNamespace(user_count=3, clients=connected)
    run.workers.in_flight.update({"w1": 4, "gone": 9})  # a worker that left no longer counts
    run.in_flight.inc()  # one of its own
    try:
        metrics = serve_run(run, exporter, runner, linger=7.0)
        assert (run.metrics, run.exporter, run.linger) == (metrics, exporter, 7.0)
        ctx.run_dir.write_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 2, "wall": 999.0})
        ctx.record(RequestResult.from_record(record("local:1")))
        ctx.run_dir.write_record(record("w1:1", ok=False, usable=False, finish_reason=None))  # a worker's batch
        assert metrics.records == 2 and metrics.phase is not None and metrics.phase["step"] == 1
        assert isinstance(metrics, RunMetrics) and metrics.records == ctx.run_dir.count
        collector = exporter.collector
        assert collector is not None and collector.in_flight() == 1 + 4 and collector.users() == 3
        assert collector.info["run"] == ctx.run_dir.path.name and collector.info["hostname"] == socket.gethostname()
        ctx.run_dir.close("finished")
        with pytest.raises(ValueError, match="closed"):
            ctx.run_dir.write_record(record("local:1"))
        ctx.record(RequestResult.from_record(record("local:1")))  # a request ending after its run: counted, no raise
        assert ctx.late == 1
        assert metrics.records == 2
    finally:
        ctx.run_dir.close()
