"""End to end: the rate mode headless against the built-in simulator (one process, and a master with 2 workers).

The coordinated-omission test: a 500 ms service, at most 1 request in flight, a target of 10 requests/s. A
closed-loop client would report E2E 0.5 s at 2 req/s and nothing else; the rate mode's report must show the
schedule-relative latency far above the service latency, the achieved rate far below the target, and the warning.
Each run is bounded: short steps, a subprocess timeout.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from harness.rate import LEAD_S, ArrivalSchedule
from tests.integration.test_locust_run import LOCUST, run_dir_of
from tests.procs import master_port_args, records

pytestmark = pytest.mark.slow


#: The simulator as a 500 ms service: 11 answer tokens (max_tokens) of 50 ms engine steps, no reasoning.
SLOW_SIM = '[--decode-base, "0.05", --decode-per-seq, "0", --prefill-base, "0", --prefill-per-token, "0", ' \
           '--answer-mean, "400", --length-sigma, "0.01"]'

CO_PROFILE = """
name: co
simulator: {preset: demo, seed: 1, args: %(args)s}
request: {thinking: false, continuous_usage_stats: true}
prompts:
  - {id: p, text: "Explain quantum entanglement to a university student.", max_tokens: 11}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 0}
rate: {arrival: constant, rates: [10], max_concurrency: 1}
steps: {duration: 8, drain_timeout: 5}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def _env() -> dict[str, str]:
    import os

    e = dict(os.environ)
    e.pop("LLMLOAD_TEST_KEY", None)
    return e


def _run(tmp_path: Path, profile: str, *extra: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    prof = tmp_path / "p.yaml"
    prof.write_text(profile)
    proc = subprocess.run([*LOCUST, "--profile", str(prof), "--no-metrics", *extra], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir_of(tmp_path / "runs"), proc


def test_coordinated_omission_is_shown(tmp_path: Path) -> None:
    run, _proc = _run(tmp_path, CO_PROFILE % {"args": SLOW_SIM, "out": tmp_path / "runs"})
    recs = [r for r in records(run) if r["phase"] == "step"]
    assert recs and all(r["ok"] and r["scheduled_wall"] is not None for r in recs)
    e2e = sorted(r["e2e"] for r in recs)
    assert 0.4 < e2e[len(e2e) // 2] < 0.7  # the service: ~500 ms
    # one in flight at a time: each request is sent when the previous one ended
    ends = sorted((r["start_wall"], r["start_wall"] + r["e2e"]) for r in recs)
    assert all(b[0] >= a[1] - 1e-3 for a, b in itertools.pairwise(ends))
    rep = json.loads((run / "report.json").read_text())
    (row,) = [s for s in rep["steps"] if s["phase"] == "step"]
    f = row["rate"]
    print(json.dumps({k: f[k] for k in ("target_rate", "scheduled_rate", "achieved_rate", "shortfall", "late_share",
                                        "dispatch_delay_p50_s", "dispatch_delay_p99_s", "e2e_p50_s",
                                        "sched_e2e_p50_s", "sched_e2e_mean_s", "sched_ttft_p50_s")}))
    assert f["target_rate"] == 10 and f["scheduled_rate"] == pytest.approx(10, rel=0.05)
    assert f["achieved_rate"] < 3.0 and f["shortfall"] > 0.6  # ~2 req/s of 10
    assert f["late_share"] > 0.8 and f["dispatch_delay_p99_s"] > 1.0
    assert f["sched_e2e_p50_s"] > 3 * f["e2e_p50_s"]  # schedule-relative far above the service latency
    assert f["sched_ttft_p50_s"] > 1.0 > 0.1 > f["ttft_p50_s"]
    notes = "\n".join(rep["notes"])
    assert "TARGET RATE NOT ACHIEVED" in notes and "% short" in notes
    assert "waited for a free user (the cap of 1 in flight)" in notes and "coordinated omission" in notes
    md = (run / "report.md").read_text()
    assert "## Open-loop rates" in md and "| 10 req/s | 10 |" in md


SPLIT_PROFILE = """
name: split
simulator: {preset: demo, seed: 2, time_scale: 0.2}
request: {thinking: false, continuous_usage_stats: true}
prompts:
  - {id: p, text: "Explain quantum entanglement to a university student.", max_tokens: 8}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 1}
rate: {arrival: %(arrival)s, burstiness: 2.0, rates: [20], pool: 16, seed: 3}
steps: {duration: 4, drain_timeout: 5}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


@pytest.mark.parametrize("arrival", ["constant", "gamma"])
def test_two_workers_split_one_schedule_exactly(tmp_path: Path, arrival: str) -> None:
    """``--processes 2``: worker i takes every 2nd arrival of the one schedule; together they send it all, on time
    (a fast service, a pool of 16: nobody waits), and the report's scheduled count is the schedule's."""
    run, _ = _run(tmp_path, SPLIT_PROFILE % {"arrival": arrival, "out": tmp_path / "runs"}, "--processes", "2",
                  *master_port_args())
    recs = [r for r in records(run) if r["phase"] == "step"]
    assert all(r["ok"] for r in recs) and all(r["scheduled_wall"] is not None for r in recs)
    assert all(r.get("scheduled_wall") is None for r in records(run) if r["phase"] == "single")
    workers = {r["user"].split(":")[0] for r in recs}
    assert len(workers) == 2, workers
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    (load_end,) = [e["wall"] for e in events if e["event"] == "load_end"]
    (start,) = [e for e in events if e["event"] == "phase_start" and e.get("rate")]
    # each worker sent exactly its share (every 2nd arrival) of the one schedule, re-drawn here from the seed
    # (until the load end: after it each worker stops at the master's message, an arrival or two may differ)
    t0 = start["wall"] + LEAD_S
    shares = []
    for slot in (0, 1):
        sched = ArrivalSchedule(1, 20.0, arrival, 2.0, 3, t0, slot, 2)
        walls = []
        while (a := sched.take()).wall < load_end:
            walls.append(a.wall)
        shares.append(sorted(walls))
    sent = {w: sorted(r["scheduled_wall"] for r in recs if r["user"].startswith(w + ":")
                      and r["scheduled_wall"] < load_end) for w in workers}
    assert sorted(sent.values()) == sorted(shares), (sent, shares)
    if arrival == "constant":
        merged = sorted(shares[0] + shares[1])
        assert all(b - a == pytest.approx(0.05, abs=1e-6) for a, b in itertools.pairwise(merged))
    rep = json.loads((run / "report.json").read_text())
    (row,) = [s for s in rep["steps"] if s["phase"] == "step"]
    f = row["rate"]
    assert f["sent"] == f["scheduled"] > 60  # every arrival of the step sent, once
    assert 0 <= len(recs) - f["sent"] <= 2  # (workers stop a few ms after the master's load_end)
    assert f["dispatch_delay_p99_s"] < 0.05 and f["late_share"] == 0
    assert not [n for n in rep["notes"] if "NOT ACHIEVED" in n or "waited for a free user" in n]
