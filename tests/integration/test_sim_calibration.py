"""Calibration: the k26 simulator preset, measured by the harness's standard sweep (profiles/sim-k26.yaml, 1/20 of
real time, ~2.3 minutes), reproduces the seed benchmark within 5 %: 26.5 tok/s single stream, 136.6 / 311.3 /
577.8 tok/s aggregate at C = 8 / 16 / 32, and 142.5 h for 100K samples at C=32 (~2,965 tokens per request).

The figures checked are the report's real-time equivalents (wall figures x the time scale) of each step's steady
window, exactly what a user reads in report.json / report.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.sim.presets import K26_SEED_HOURS_100K, K26_SEED_MEAN_OUTPUT, K26_SEED_TPS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOLERANCE = 0.05
#: A request gap longer than this (wall seconds) means the host froze the processes: the run is repeated once.
HOST_STALL_S = 0.5


def sweep(tmp: Path) -> tuple[dict[str, Any], dict[str, Any], float]:
    """Run the profile; returns (report.json, run.json, the longest chunk gap seen in any request)."""
    tmp.mkdir(parents=True, exist_ok=True)
    prof = yaml.safe_load((ROOT / "profiles" / "sim-k26.yaml").read_text())
    prof["output"]["dir"] = str(tmp / "runs")
    path = tmp / "sim-k26.yaml"
    path.write_text(yaml.safe_dump(prof))
    env = {k: v for k, v in os.environ.items() if k != "LLMLOAD_SIM_ARGS"}
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless", "--only-summary",
         "--profile", str(path)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=420,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    gaps = [json.loads(line).get("gap_hist") or {} for line in (run / "records.jsonl").read_text().splitlines()]
    worst = max((float(g.get("max") or 0.0) for g in gaps), default=0.0)
    return json.loads((run / "report.json").read_text()), json.loads((run / "run.json").read_text()), worst


def check(rep: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """Problems with the calibration (empty when it is within tolerance)."""
    problems: list[str] = []
    rows = {r["concurrency"]: r for r in rep["steps"]}
    assert rep["time_scale"] == meta["simulator"]["time_scale"] == 0.05
    assert any("COMPRESSED TIME" in n for n in rep["notes"])  # never silently compressed
    for c, seed in K26_SEED_TPS.items():
        row = rows[c]
        assert row["steady"], row["not_steady_reason"]
        assert row["errors"] == 0 and row["truncated"] == 0
        tps = row["real_time"]["output_tps"]
        if abs(tps / seed - 1) > TOLERANCE:
            problems.append(f"C={c}: {tps:.1f} tok/s vs seed {seed} ({100 * (tps / seed - 1):+.1f} %)")
    c32 = rows[32]
    (h,) = [x for x in c32["real_time"]["hours"] if x["n"] == 100_000]
    if abs(h["token_hours"] / K26_SEED_HOURS_100K - 1) > TOLERANCE:
        problems.append(f"hours to 100K at C=32: {h['token_hours']:.1f} vs seed {K26_SEED_HOURS_100K}")
    if abs(c32["mean_output_tokens"] / K26_SEED_MEAN_OUTPUT - 1) > TOLERANCE:
        problems.append(f"mean output tokens at C=32: {c32['mean_output_tokens']:.0f} vs {K26_SEED_MEAN_OUTPUT}")
    return problems


def test_k26_preset_reproduces_the_seed_benchmark(tmp_path: Path) -> None:
    rep, meta, worst_gap = sweep(tmp_path / "a")
    problems = check(rep, meta)
    if problems and worst_gap > HOST_STALL_S:  # the shared host froze us: one more try
        print(f"host stall of {worst_gap:.2f} s; repeating the sweep ({problems})")
        rep, meta, worst_gap = sweep(tmp_path / "b")
        problems = check(rep, meta)
    for row in rep["steps"]:
        rt = row["real_time"]
        seed = K26_SEED_TPS.get(row["concurrency"])
        (h,) = [x for x in rt["hours"] if x["n"] == 100_000]
        print(f"C={row['concurrency']:<3d} {rt['output_tps']:8.1f} tok/s (seed {seed})  per-stream "
              f"{rt['per_stream_tps']:.2f}  mean output {row['mean_output_tokens']:.0f}  window {rt['window_s']:.0f} s"
              f"  hours to 100K {h['token_hours']:.1f} (tokens) / {h['hours']:.1f} (requests)")
    assert not problems, problems
