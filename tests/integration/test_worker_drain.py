"""End to end: a worker's own Ctrl-C just before a step boundary, on a master with 2 workers.

The worker drains (its requests in flight finish and are recorded) and quits. Meanwhile the master starts the next
step and sends that worker its share of the larger user count: the draining worker must start no new request
(before the fix it spawned the new users, their requests were cut off at its quit, never recorded, and the server
counted them aborted). Bounded: 5 s steps, requests of ~6.5 s, a subprocess timeout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.test_locust_run import LOCUST, ROOT
from tests.integration.test_worker_lost import _wait_phase
from tests.procs import process_groups, records

pytestmark = pytest.mark.slow


def _server_outcomes(url: str) -> dict[str, int]:
    """The simulator's finished requests by finish reason (stop / length / abort), from its own /metrics."""
    from tests.integration.test_prometheus import http_get

    out: dict[str, int] = {}
    for fam in text_string_to_metric_families(http_get(url + "/metrics")):
        for s in fam.samples:
            if s.name == "vllm:request_success_total":
                reason = s.labels.get("finished_reason", "")
                out[reason] = out.get(reason, 0) + int(s.value)
    return out


def test_a_draining_worker_starts_no_request_of_the_next_step_and_records_its_in_flight(tmp_path: Path) -> None:
    from harness.sim import launch
    from tests.procs import free_port

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rpc = str(free_port())
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(
        f"""
name: drain-gap
request: {{thinking: true}}
prompts:
  - {{id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 300}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [8, 12], duration: 5, drain_timeout: 30}}
output: {{dir: {out}}}
"""
    )
    # time_scale 2: every request is 300 tokens of ~6.5 s, so the 4 requests a worker's users start at the C=8
    # step's start are still in flight at the C=12 boundary 5 s later, where the master sends 2 more users.
    with launch(preset="demo", time_scale=2.0, seed=7) as sim:
        common = ["--profile", str(prof), "--host", sim.url, "--no-metrics"]
        master = [*LOCUST, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]
        master += ["--expect-workers", "2", *common]
        worker = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--worker"]
        worker += ["--master-host", "127.0.0.1", "--master-port", rpc]
        logs = [tmp_path / f"proc{i}.log" for i in range(3)]
        with process_groups([master, worker, worker], logs, tmp_path, env) as procs:
            deadline = time.monotonic() + 120
            run, t8 = _wait_phase(out, 8, deadline)
            time.sleep(max(0.0, t8 + 4.0 - time.time()))
            t_sig = time.time()
            procs[2].send_signal(signal.SIGINT)  # 1 s before C=12: its 4 requests have ~2.5 s left
            _run, t12 = _wait_phase(out, 12, deadline)
            procs[2].wait(timeout=60)
            t_quit = time.time()
            procs[0].wait(timeout=90)
            procs[1].wait(timeout=30)
        outcomes = _server_outcomes(sim.url)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in logs)
    meta = json.loads((run / "run.json").read_text())
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    gone = [e for e in events if e["event"] == "worker_lost"]
    recs = records(run)
    ok = [r for r in recs if r["ok"]]
    print(f"SIGINT at C=8 +{t_sig - t8:.2f} s, C=12 at +{t12 - t8:.2f} s, worker quit at +{t_quit - t8:.2f} s; "
          f"server {outcomes}; {len(recs)} records ({len(ok)} ok); cut_off {meta.get('cut_off')}; lost {gone}")
    # The scenario happened: the master started C=12 while the worker drained (it quit after the boundary).
    assert t_sig < t12 < t_quit, log_text
    assert len(gone) == 1 and gone[0]["state"] == "gone", log_text
    mine = [r for r in recs if r["user"].startswith(gone[0]["worker"][-12:] + ":")]
    # No request started after its Ctrl-C, and its 4 requests in flight then finished and were recorded.
    assert mine and not [r for r in mine if r["start_wall"] > t_sig], log_text
    in_flight = [r for r in mine if r["ok"] and r["start_wall"] + r["e2e"] > t_sig]
    # (one per user; the user carried over from the single stream may still be on its C=1 request)
    assert len(in_flight) == len({r["user"] for r in in_flight}) == 4, in_flight
    # Records = the server's completions, nothing cut off: no request aborted at the worker's quit.
    assert outcomes.get("abort", 0) == 0, (outcomes, log_text)
    assert len(ok) == outcomes.get("stop", 0) + outcomes.get("length", 0) == len(recs), (outcomes, log_text)
    assert meta["status"] == "finished" and not meta.get("cut_off"), meta
