"""End to end: the SLO capacity search headless against the built-in simulator (short steps, bounded)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.records import read_records
from harness.search import CapacitySearch, Probe, measure_step
from tests.integration.test_locust_run import LOCUST, run_dir_of

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
        end = min(w for w in ends if w > st["wall"])
        again = measure_step(p["setting"], p["step"], st["wall"], end, recs, {"tpot_p50_s": 0.0045,
                                                                              "ttft_p99_s": 0.5})
        assert abs(again.sample - p["sample"]) <= 2 and again.passed == p["passed"]
    md = (run / "report.md").read_text()
    assert "## SLO capacity search" in md and res["verdict"] in md.replace("\n", " ")
