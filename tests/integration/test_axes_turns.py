"""End to end: the shipped thinking-sweep and multi-turn profiles, shortened, headless against the simulator.

Each run is bounded: short steps, a time-scaled simulator, a subprocess timeout.
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

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless"]


def _shortened(name: str, tmp_path: Path, **over: Any) -> Path:
    """The shipped profile ``name`` with ``over`` replacing top-level sections (keys merged one level deep)."""
    data = yaml.safe_load((ROOT / "profiles" / f"{name}.yaml").read_text())
    for key, value in over.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and isinstance(data.get(key), dict) else value
    data["output"] = {**data.get("output", {}), "dir": str(tmp_path / "runs")}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _run(prof: Path, tmp_path: Path, timeout: float) -> tuple[Path, list[dict[str, Any]], dict[str, Any], str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([*LOCUST, "--profile", str(prof)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    recs = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines() if line.strip()]
    report = json.loads((run / "report.json").read_text())
    return run, recs, report, (run / "report.md").read_text()


def test_thinking_sweep_profile_runs_each_setting_and_compares_them(tmp_path: Path) -> None:
    prof = _shortened(
        "thinking-sweep", tmp_path,
        simulator={"time_scale": 0.2, "seed": 3},
        axes={"thinking": [True, False], "reasoning_effort": ["low", "high"], "effort_param": "reasoning_effort"},
        steps={"concurrency": [2], "duration": 5, "drain_timeout": 10},
    )
    run, recs, report, md = _run(prof, tmp_path, timeout=150)
    labels = ["thinking=on,effort=low", "thinking=on,effort=high", "thinking=off"]
    phases = [json.loads(line) for line in (run / "phases.jsonl").read_text().splitlines()]
    starts = [(p["step"], p.get("setting")) for p in phases if p["event"] == "phase_start" and p["phase"] == "step"]
    assert starts == [(1, labels[0]), (2, labels[1]), (3, labels[2])]
    steps = [r for r in recs if r["phase"] == "step"]
    assert all(r["ok"] for r in steps), [r["error_class"] for r in steps if not r["ok"]]
    assert {r["step"]: r["setting"] for r in steps} == {1: labels[0], 2: labels[1], 3: labels[2]}
    assert all(r["setting"] is None for r in recs if r["phase"] == "warmup")
    reasoning = {lab: [r["reasoning_tokens"] for r in steps if r["setting"] == lab] for lab in labels}
    assert all(reasoning[labels[2]]) is False and set(reasoning[labels[2]]) == {0}  # thinking off: no reasoning
    low, high = (sum(reasoning[lab]) / len(reasoning[lab]) for lab in labels[:2])
    assert 3.0 < high / low < 8.0, (low, high)  # the simulator's factors: 1.6 / 0.3 = 5.3
    rows = report["settings"]
    assert [r["setting"] for r in rows] == labels and all(r["concurrency"] == 2 for r in rows)
    assert rows[0]["mean_reasoning_tokens"] < rows[1]["mean_reasoning_tokens"] and rows[2]["mean_reasoning_tokens"] == 0
    assert rows[1]["e2e_p50_s"] > rows[0]["e2e_p50_s"] > rows[2]["e2e_p50_s"]  # longer reasoning, longer requests
    assert all(r["hours"] is not None and r["usd"] is not None for r in rows)
    assert rows[2]["hours"] < rows[1]["hours"]  # shorter outputs, more samples per hour
    assert "## Settings (sweep axes)" in md and "thinking=on,effort=high" in md


def test_multi_turn_profile_grows_the_prompt_and_hits_the_prefix_cache(tmp_path: Path) -> None:
    prof = _shortened(
        "multi-turn", tmp_path,
        simulator={"time_scale": 0.1, "seed": 5},
        conversation={"turns": 3, "think_time": 0.1},
        single_stream={"duration": 0},
        steps={"concurrency": [3], "duration": 8, "drain_timeout": 10},
    )
    _, recs, report, md = _run(prof, tmp_path, timeout=150)
    steps = [r for r in recs if r["phase"] == "step"]
    assert steps and all(r["ok"] for r in steps), [r["error_class"] for r in steps if not r["ok"]]
    assert {r["turn"] for r in steps} == {0, 1, 2}
    assert all(r["conversation"] is None and r["turn"] is None for r in recs if r["phase"] == "warmup")
    convs: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(steps, key=lambda r: r["start_wall"]):
        convs.setdefault(r["conversation"], []).append(r)
    assert len(convs) >= 3 and len({c.split("/")[0] for c in convs}) == 3  # every user ran conversations
    for turns in convs.values():
        assert [r["turn"] for r in turns] == list(range(len(turns)))
        prompts = [r["prompt_tokens"] for r in turns]
        assert prompts == sorted(prompts) and len(set(prompts)) == len(prompts), prompts  # the prompt grows
        assert len({r["prompt_id"] for r in turns}) == 1
        for r in turns[1:]:  # the earlier turns are cached (all but the new follow-up's blocks)
            assert r["cached_tokens"] >= r["prompt_tokens"] - 100, (r["prompt_tokens"], r["cached_tokens"])
    assert all(r["cached_tokens"] is not None for r in steps)
    first_turns = [r for r in steps if r["turn"] == 0]
    assert any(r["cached_tokens"] > 0 for r in first_turns)  # the shared system prompt
    rows = report["turns"]
    assert [r["turn"] for r in rows] == [0, 1, 2]
    means = [r["mean_prompt_tokens"] for r in rows]
    assert means == sorted(means) and means[2] > means[0] + 100
    assert rows[2]["cached_share"] > 0.8 and rows[2]["cached_sent"] == rows[2]["completed"]
    assert "## By conversation turn" in md
