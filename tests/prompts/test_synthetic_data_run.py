"""End to end: the shipped ``profiles/synthetic-data.yaml`` (its seed-prompt file) run headless against the
simulator, shortened and time-scaled; bounded by a subprocess timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

from harness.config import PROFILES_DIR

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless"]


def test_synthetic_data_profile_headless_on_the_simulator(tmp_path: Path) -> None:
    data = yaml.safe_load((PROFILES_DIR / "synthetic-data.yaml").read_text())
    data["dataset"]["path"] = str(PROFILES_DIR / "data" / "seed-prompts.jsonl")
    data["simulator"]["time_scale"] = 0.05  # faster than real time: short answers, bounded run
    data["single_stream"]["duration"] = 2
    data["steps"] = {"concurrency": [4, 8], "duration": 4, "drain_timeout": 10}
    out = tmp_path / "runs"
    data["output"] = {"dir": str(out)}
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished"
    src = meta["prompt_source"]
    assert (src["kind"], src["rows"], src["replacement"], src["class"]) == ("dataset", 80, False, "seeds")
    rows = {
        i: orjson.loads(line)
        for i, line in enumerate((PROFILES_DIR / "data" / "seed-prompts.jsonl").read_bytes().splitlines(), 1)
    }
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    measured = [r for r in recs if r["phase"] != "warmup"]
    assert len(measured) >= 20, len(measured)
    for r in measured:
        stem, line = r["prompt_id"].split(":")
        assert stem == "seed-prompts" and r["prompt_class"] == "seeds"
        assert r["max_tokens"] == rows[int(line)]["max_tokens"]  # the row's own max_tokens was sent
    ids = [r["prompt_id"] for r in sorted(measured, key=lambda r: r["start_wall"])][:80]
    assert len(set(ids)) == len(ids)  # without replacement: no row twice within a pass (one process)
    report = (run / "report.md").read_text()
    hours = report.split("## Hours to N usable samples", 1)[1].split("\n## ", 1)[0]
    assert "N=1,000,000" in hours and "$ / 1k usable" in hours  # hours and dollars per concurrency
    assert "| C=4 | 4 |" in hours and "| C=8 | 8 |" in hours


def test_bad_data_file_stops_locust_before_any_load(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"prompt": "b"}\n')
    (tmp_path / "p.yaml").write_text(f"name: bad\ndataset: {{path: bad.jsonl}}\noutput: {{dir: {tmp_path / 'runs'}}}\n")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(
        [*LOCUST, "--profile", "p.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if x.startswith("llmload:")]
    assert lines == [
        f"llmload: p.yaml: dataset.path: {tmp_path / 'bad.jsonl'}:2: no 'messages' " + "(a JSONL row is"
        ' {"messages": [{role, content}], ...})'
    ], proc.stderr[-2000:]
    assert not (tmp_path / "runs").exists()  # no run directory: nothing was sent


def test_dataset_in_master_worker_mode(tmp_path: Path) -> None:
    """``--processes 2``: each worker rebuilds the data set from the master's phase message (absolute path) and
    draws from it; the records of both workers name rows of the file."""
    from tests.procs import free_port

    data = yaml.safe_load((PROFILES_DIR / "synthetic-data.yaml").read_text())
    data["dataset"]["path"] = str(PROFILES_DIR / "data" / "seed-prompts.jsonl")
    data["simulator"]["time_scale"] = 0.05
    data["single_stream"]["duration"] = 1
    data["steps"] = {"concurrency": [4], "duration": 4, "drain_timeout": 10}
    out = tmp_path / "runs"
    data["output"] = {"dir": str(out)}
    prof = tmp_path / "p.yaml"
    prof.write_text(yaml.safe_dump(data))
    rpc = str(free_port())
    cmd = [*LOCUST, "--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]
    cmd += ["--master-port", rpc, "--profile", str(prof), "--no-metrics"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    recs = [json.loads(x) for x in (run / "records.jsonl").read_text().splitlines() if x.strip()]
    steps = [r for r in recs if r["phase"] == "step"]
    workers = {r["user"].rsplit(":", 1)[0] for r in steps}
    assert len(workers) == 2, workers
    assert steps and all(r["prompt_id"].startswith("seed-prompts:") and r["prompt_class"] == "seeds" for r in steps)
