"""End to end in web-UI mode: SIGTERM during a run and Ctrl-C between runs (one shutdown, no traceback).

Bounded: a time-scaled simulator, subprocess waits with timeouts.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.test_web import (
    WebLocust,
    env,  # noqa: F401 - a fixture
    launched,  # noqa: F401 - a fixture
    meta,
    truth_requests,
    wait_ended,
    write_profile,
)
from tests.procs import free_port, records

pytestmark = pytest.mark.slow


def _out(web: WebLocust) -> str:
    web.stdout.flush()
    return (Path(web.stdout.name)).read_text(errors="replace")


def test_sigterm_during_a_web_run_shuts_down_once(
    tmp_path: Path, env: dict[str, str], launched: list[WebLocust]  # noqa: F811
) -> None:
    """SIGTERM with a fixed run of 4 users going and --stop-timeout 1: the run is stopped (in-flight requests get
    min(3 s, the stop timeout) = 1 s), its report written, then one shutdown: no traceback, no "unexpected state",
    the summary and "Shutting down" once."""
    prof, out, truth = write_profile(tmp_path, step=60)
    port = free_port()
    args = ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof), "--stop-timeout", "1"]
    web = WebLocust(tmp_path, args, port, env)
    launched.append(web)
    web.wait_ready()
    assert web.start(mode="fixed", user_count=4, spawn_rate=4, run_time="")["success"] is True
    time.sleep(4)
    web.proc.send_signal(signal.SIGTERM)
    assert web.proc.wait(60) == 0, web.err()[-3000:]
    [run] = wait_ended(out, 1, timeout=5)
    m = meta(run)
    assert m["status"] == "interrupted" and m["stop_cause"] == "sigterm", m
    assert (run / "report.md").exists()
    # every request the simulator saw is recorded, or counted as cut off by the 1 s drain
    assert len(records(run)) + (m.get("cut_off") or 0) == len(truth_requests(truth)) > 0
    err, stdout = web.err(), _out(web)
    assert "Traceback" not in err and "unexpected state" not in err, err[-3000:]
    assert err.count("Shutting down (exit code") == 1, err[-3000:]
    assert stdout.count("llmload: records and report in") == 1, stdout[-3000:]


def test_ctrl_c_between_web_runs_just_quits(
    tmp_path: Path, env: dict[str, str], launched: list[WebLocust]  # noqa: F811
) -> None:
    """A run ends (its run time), then Ctrl-C: no "stopping; in-flight requests finish" message, the ended run's
    summary is not printed again, exit 0."""
    prof, out, _truth = write_profile(tmp_path, step=60)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    assert web.start(mode="fixed", user_count=2, spawn_rate=2, run_time="2s", max_tokens=40)["success"] is True
    [run] = wait_ended(out, 1, timeout=60)
    time.sleep(1)
    web.proc.send_signal(signal.SIGINT)
    assert web.proc.wait(30) == 0, web.err()[-3000:]
    err, stdout = web.err(), _out(web)
    assert "Ctrl-C: no run going: quitting" in err and "Ctrl-C: stopping" not in err, err[-3000:]
    assert "Traceback" not in err
    assert "llmload: records and report in" not in stdout and "hours to" not in stdout.lower(), stdout[-3000:]
    assert meta(run)["status"] == "finished"
