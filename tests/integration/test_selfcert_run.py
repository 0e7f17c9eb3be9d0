"""A deliberately starved client certifies itself as STARVED: a real headless run against the built-in simulator
whose Locust process also runs a greenlet that burns the CPU in 0.3 s slices without yielding (the gevent loop
gets a few ms between slices), so responses are read up to 0.3 s after their bytes arrived."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import build_report
from harness.report.selfcert import selfcert_text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PROFILE = """
name: starved
simulator: {preset: demo, time_scale: 0.5, seed: 3}
prompts:
  - {id: ok, text: "Say just 'OK' and nothing else, please.", max_tokens: 64}
warmup: {max_tokens: 8, timeout: 30}
single_stream: {duration: 0}
steps: {concurrency: [4], duration: 8, drain_timeout: 10}
output: {dir: %(out)s}
"""
#: The k26 sweep plus a CPU burner started with the process (0.3 s busy, 5 ms yield, until the process ends).
LOCUSTFILE = '''
import time
import gevent
import harness.locust  # noqa: F401
from harness.shapes import ReasoningSweepShape
from harness.users import ReasoningChatUser


def _burn() -> None:
    while True:
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            pass
        gevent.sleep(0.005)


gevent.spawn(_burn)
__all__ = ["ReasoningChatUser", "ReasoningSweepShape"]
'''


def _locust(tmp: Path, locustfile: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One headless run of ``locustfile`` with :data:`PROFILE`; the process and its run directory."""
    (tmp / "p.yaml").write_text(PROFILE % {"out": tmp / "runs"})
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless", "--only-summary", *args,
         "--profile", str(tmp / "p.yaml")],
        cwd=tmp, env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT)), capture_output=True,
        text=True, timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    (run,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    return proc, run


def test_each_workers_cpu_reaches_the_master(tmp_path: Path) -> None:
    """--processes 2 (a master and two workers): each worker's client_cpu samples are in the master's
    phases.jsonl, and the step's CPU share and chunks/s per process are over both workers."""
    from harness.records import read_phases

    _, run = _locust(tmp_path, ROOT / "locustfiles" / "k26.py", "--processes", "2")
    samples = [e for e in read_phases(run) if e["event"] == "client_cpu"]
    assert len({e["process"] for e in samples}) == 2, samples
    (step,) = [r for r in build_report(run).steps if r.phase == "step"]
    assert step.client_processes == 2 and step.client_cpu_share_max is not None and step.client_cpu_share_max > 0
    assert step.client_chunks_per_s_proc is not None and step.client_chunks_per_s_proc > 0


def test_a_cpu_starved_client_is_flagged_starved_on_its_self_certification_line(tmp_path: Path) -> None:
    (tmp_path / "starve.py").write_text(LOCUSTFILE)
    proc, run = _locust(tmp_path, tmp_path / "starve.py")
    (step,) = [r for r in build_report(run).steps if r.phase == "step"]
    assert step.client_starved and step.client_selfcert == "starved", (step.client_lagged_pct, step.client_selfcert)
    assert step.client_ttft_error_bound_s is None
    assert step.client_processes == 1
    # the burner wants a whole core; what it gets depends on the machine's other load (24 % seen on 2 shared cores)
    assert step.client_cpu_share_max is not None and 0.05 < step.client_cpu_share_max < 1.5
    line = selfcert_text(step)
    assert line.endswith("STARVED: no error bound, figures are the load generator's limit")
    assert f"{step.label}: {line[:40]}" in " ".join((proc.stdout + proc.stderr).split())  # the terminal summary
