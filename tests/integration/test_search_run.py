"""End to end: the SLO capacity search headless against the built-in simulator (short steps, bounded)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.records import read_records
from harness.search import CapacitySearch, Probe, measure_step
from tests.integration.test_locust_run import LOCUST, run_dir_of
from tests.procs import master_port_args

pytestmark = pytest.mark.slow


PROFILE = """
name: search
simulator: {preset: demo, seed: 1, time_scale: 0.25}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: p, text: "Explain quantum entanglement to a university student.", max_tokens: 200}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 0}
search: {axis: concurrency, low: 1, high: 48, tolerance: 8, max_steps: 5,
         slo: {tpot_p50_s: 0.0045, ttft_p99_s: 0.5}}
steps: {duration: 4, drain_timeout: 5}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def test_concurrency_search_on_the_simulator(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE % {"out": tmp_path / "runs"})
    proc = subprocess.run([*LOCUST, "--profile", str(prof), "--no-metrics"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = run_dir_of(tmp_path / "runs")
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    (ev,) = [e for e in events if e["event"] == "search"]
    res = ev["result"]
    starts = [e for e in events if e["event"] == "phase_start" and e["phase"] == "step"]
    settings = [float(e["concurrency"]) for e in starts]
    print(res["verdict"], settings)
    assert settings[:2] == [1.0, 48.0] and len(settings) == len(res["probes"]) <= 5
    # the steps probed are the bisection's, given each step's verdict
    replay = CapacitySearch("concurrency", 1, 48, 8, 5)
    for p in res["probes"]:
        assert replay.next_setting() == p["setting"]
        replay.observe(Probe(p["setting"], p["step"], p["passed"]))
    assert replay.next_setting() is None
    # on the demo preset C=1 meets these SLOs and C=48 does not (TPOT grows with the batch): a boundary inside
    best, fail = res["highest_pass"], res["lowest_fail"]
    assert best is not None and fail is not None and best["setting"] < fail["setting"]
    assert fail["setting"] - best["setting"] <= 8 or len(res["probes"]) == 5
    for side in (best, fail):
        for f in side["figures"].values():
            assert f["low"] is None or f["low"] <= f["value"]
            assert f["high"] is None or f["value"] <= f["high"]
    # the master's figures are those of the records: re-measure each step from records.jsonl
    recs = read_records(run)
    ends = [e["wall"] for e in events if e["event"] in ("phase_start", "load_end")]
    for p, st in zip(res["probes"], starts, strict=True):
        # measured over its recorded span: from its phase_start to when the master measured it (before the next
        # phase_start is written; requests ending in between are not the probe's: CI once counted 9 of them)
        start, end = p["span"]
        assert start == st["wall"] and end <= min(w for w in ends if w > st["wall"])
        again = measure_step(p["setting"], p["step"], start, end, recs, {"tpot_p50_s": 0.0045, "ttft_p99_s": 0.5})
        assert abs(again.sample - p["sample"]) <= 2 and again.passed == p["passed"]
    md = (run / "report.md").read_text()
    assert "## SLO capacity search" in md and res["verdict"] in md.replace("\n", " ")


RATE_PROFILE = """
name: rsearch
simulator: {preset: demo, seed: 1, time_scale: 0.25}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: p, text: "Explain quantum entanglement to a university student.", max_tokens: 200}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 0}
rate: {arrival: poisson, max_concurrency: 16, seed: 2}
search: {axis: rate, low: 4, high: 64, tolerance: 16, max_steps: 4, slo: {e2e_p90_s: 1.5}}
steps: {duration: 5, drain_timeout: 5}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def test_rate_search_with_two_workers(tmp_path: Path) -> None:
    """A rate search, master + 2 workers: 4 req/s meets the E2E SLO; 64 req/s cannot be sent with 16 in flight
    (~0.55 s requests: at most ~29 req/s), so it fails as short of its schedule; the bisection runs between."""
    prof = tmp_path / "p.yaml"
    prof.write_text(RATE_PROFILE % {"out": tmp_path / "runs"})
    proc = subprocess.run([*LOCUST, "--profile", str(prof), "--no-metrics", "--processes", "2",
                           *master_port_args()], cwd=tmp_path,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = run_dir_of(tmp_path / "runs")
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]
    (ev,) = [e for e in events if e["event"] == "search"]
    res = ev["result"]
    rates = [e["rate"] for e in events if e["event"] == "phase_start" and e["phase"] == "step"]
    print(res["verdict"], rates, [(p["setting"], p["passed"], p["reason"]) for p in res["probes"]])
    assert rates[:2] == [4.0, 64.0] and rates == [p["setting"] for p in res["probes"]]
    first, second = res["probes"][:2]
    assert first["passed"] and first["sample"] >= 10
    assert not second["passed"] and "scheduled requests" in second["reason"] and "% short" in second["reason"]
    replay = CapacitySearch("rate", 4, 64, 16, 4)
    for p in res["probes"]:
        assert replay.next_setting() == p["setting"]
        replay.observe(Probe(p["setting"], p["step"], p["passed"]))
    assert res["highest_pass"]["setting"] < res["lowest_fail"]["setting"]
    recs = read_records(run)
    assert len({r.user.split(":")[0] for r in recs if r.step >= 1}) == 2  # both workers sent
    assert all(r.scheduled_wall is not None for r in recs if r.step >= 1)
