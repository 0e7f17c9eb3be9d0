"""``--processes 2``: two forked workers under a local master give exact figures.

One small bounded run (4 users for 4 s against the time-scaled demo simulator with its ground-truth log): every
request the server received is one record, no record is duplicated or missing across the two worker processes
(each record pairs one-to-one with the simulator's truth, and the request ids the simulator saw are distinct),
and the report's totals equal the records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from harness.report.fidelity import compare
from harness.sim.truth import read_truth
from tests.procs import master_port_args, records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_processes_2_records_every_request_once(tmp_path: Path) -> None:
    from harness.sim import launch

    out, truth_path, prof = tmp_path / "runs", tmp_path / "truth.jsonl", tmp_path / "p.yaml"
    prof.write_text(
        f"""
name: processes
request: {{thinking: true, continuous_usage_stats: true}}
prompts:
  - {{id: short, text: "Explain X briefly", max_tokens: 120}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 0}}
steps: {{concurrency: [4], duration: 4, drain_timeout: 30}}
output: {{dir: {out}}}
"""
    )
    with launch(preset="demo", time_scale=0.1, seed=5, extra_args=["--truth-log", str(truth_path)]) as sim:
        cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
               "--profile", str(prof), "--host", sim.url, "--no-metrics", "--processes", "2", *master_port_args()]
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    recs = records(run)
    _, truths, restarts = read_truth(truth_path)
    meta = json.loads((run / "run.json").read_text())
    print(f"{len(recs)} records, {len(truths)} server requests, outcomes {Counter(t['outcome'] for t in truths)}")
    assert not restarts
    step = [r for r in recs if r["phase"] == "step"]
    assert len(step) >= 8, "too few requests to tell the processes apart"
    # Every request the server received is one record, and every record is a request the server received.
    assert len(recs) == len(truths)
    ids = [t["id"] for t in truths]
    assert len(set(ids)) == len(ids), "the server logged one request twice"
    fid = compare(run, truth_path)
    m = fid.summary["matching"]
    assert m["matched"] == len(recs) and m["unmatched_records"] == 0, m
    assert len({id(p.truth) for p in fid.pairs if p.truth is not None}) == len(truths), "a truth paired twice"
    assert fid.passed, fid.failures()
    # Every finished request is a success in the records.
    finished = sum(t["outcome"] == "completed" for t in truths)
    assert sum(r["ok"] for r in recs) == finished
    # The report counts what the records hold.
    rep = json.loads((run / "report.json").read_text())
    assert meta["records"] == len(recs)
    assert rep["totals"]["requests"] == len(step)
    assert rep["totals"]["completed"] == sum(r["ok"] for r in step)
    assert sum(s["requests"] for s in rep["steps"]) == len(step)
