"""End to end: a worker killed (``kill -9``) in the middle of a step, on a master with 2 workers.

The master records the loss (``worker_lost`` in phases.jsonl, ``workers_lost`` / ``cut_off`` in run.json), the
report marks the step not steady with a note naming the worker, and a Ctrl-C afterwards does not wait the drain
timeout for the dead worker. Bounded: 10 s steps, a subprocess timeout.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_locust_run import LOCUST, ROOT
from tests.procs import process_groups, records

pytestmark = pytest.mark.slow


def _phase_start(run: Path, concurrency: int) -> float | None:
    p = run / "phases.jsonl"
    if not p.exists():
        return None
    for line in p.read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "phase_start" and ev.get("phase") == "step" and ev.get("concurrency") == concurrency:
            return float(ev["wall"])
    return None


def _wait_phase(out: Path, concurrency: int, deadline: float) -> tuple[Path, float]:
    while time.monotonic() < deadline:
        time.sleep(0.2)
        dirs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
        if dirs and (t := _phase_start(dirs[0], concurrency)) is not None:
            return dirs[0], t
    raise AssertionError(f"the run did not reach C={concurrency} in time")


def test_a_worker_killed_mid_step_is_recorded_flagged_and_not_waited_for(tmp_path: Path) -> None:
    from harness.sim import launch
    from tests.integration.test_prometheus import server_completions
    from tests.procs import free_port

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rpc = str(free_port())
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(
        f"""
name: lost
request: {{thinking: true}}
prompts:
  - {{id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 300}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [4, 8], duration: 10, drain_timeout: 30}}
output: {{dir: {out}}}
"""
    )
    with launch(preset="demo", time_scale=1.0, seed=7) as sim:  # requests of ~3-4 s
        common = ["--profile", str(prof), "--host", sim.url, "--no-metrics"]
        master = [*LOCUST, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]
        master += ["--expect-workers", "2", *common]
        worker = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--worker"]
        worker += ["--master-host", "127.0.0.1", "--master-port", rpc]
        logs = [tmp_path / f"proc{i}.log" for i in range(3)]
        with process_groups([master, worker, worker], logs, tmp_path, env) as procs:
            deadline = time.monotonic() + 120
            run, t4 = _wait_phase(out, 4, deadline)
            time.sleep(max(0.0, t4 + 3.0 - time.time()))
            t_kill = time.time()
            os.kill(procs[2].pid, signal.SIGKILL)  # 3 s into C=4: its 2 users and their requests in flight die
            _run, t8 = _wait_phase(out, 8, deadline)
            time.sleep(max(0.0, t8 + 4.0 - time.time()))
            t_sig = time.monotonic()
            procs[0].send_signal(signal.SIGINT)  # the stop must not wait 30 s (+10) for the dead worker
            procs[0].wait(timeout=60)
            stop_s = time.monotonic() - t_sig
            procs[1].wait(timeout=30)
        served = server_completions(sim)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in logs)
    meta = json.loads((run / "run.json").read_text())
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    lost = [e for e in events if e["event"] == "worker_lost"]
    recs = records(run)
    ok = [r for r in recs if r["ok"]]
    print(f"stop took {stop_s:.1f} s; lost {lost}; {len(ok)} ok records, server finished {served}; "
          f"cut_off {meta.get('cut_off')}")
    # The master recorded the death: once, the killed worker, 2 users, after the kill, with its in-flight count.
    assert len(lost) == 1, log_text
    ev = lost[0]
    assert ev["state"] == "missing" and ev["users"] == 2 and ev["wall"] > t_kill, ev
    assert t_kill - 2.0 <= ev["since_wall"] <= t_kill + 0.1, ev
    assert ev["in_flight"] is not None and 0 <= ev["in_flight"] <= 2
    assert meta["workers_lost"][0]["worker"] == ev["worker"] and len(meta["workers"]) == 2
    assert (meta.get("cut_off") or 0) >= ev["in_flight"]
    # The requests the server finished but nobody recorded are the dead worker's in flight (it counts them).
    assert served - len(ok) <= 2 + (meta.get("cut_off") or 0), log_text
    # F4: the stop waited for the live worker only (its request of ~4 s), not the drain timeout of 30 s.
    assert stop_s < 20, log_text
    assert "no final records from worker" not in log_text, log_text
    rep = json.loads((run / "report.json").read_text())
    row4 = next(r for r in rep["steps"] if r["label"] == "C=4")
    assert row4["steady"] is False and ev["worker"] in row4["not_steady_reason"], row4["not_steady_reason"]
    md = (run / "report.md").read_text()
    assert f"WORKER LOST: worker {ev['worker']}" in md and "2 users stopped" in md, md
    assert "C=4: NOT steady" in md, md
