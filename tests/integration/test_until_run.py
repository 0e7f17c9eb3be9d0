"""End to end: ``steps.until`` ends steps at the margin on the built-in simulator, in one process and in master/worker
mode (``--processes 2``), and at ``max`` when the margin is out of reach (short steps, bounded)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from harness.report.interval import cycle_frame, renewal_reward
from tests.integration.test_locust_run import LOCUST, run_dir_of
from tests.procs import master_port_args, records

pytestmark = pytest.mark.slow

PROFILE = """
name: until
simulator: {preset: demo, seed: 1, time_scale: 0.1}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: p, text: "Explain quantum entanglement to a university student.", max_tokens: 4000}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 0}
steps: {concurrency: [8, 16], drain_timeout: 5, until: %(until)s}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def _run(tmp_path: Path, until: str, extra: list[str]) -> tuple[Path, list[dict[str, Any]]]:
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE % {"out": tmp_path / "runs", "until": until})
    proc = subprocess.run([*LOCUST, "--profile", str(prof), "--no-metrics", *extra], cwd=tmp_path,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = run_dir_of(tmp_path / "runs")
    return run, [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines()]


def _check_reached(run: Path, events: list[dict[str, Any]], margin: float, lo: float, hi: float) -> None:
    """Each step ended at its margin, between ``lo`` and ``hi`` seconds, and the next phase started right then;
    the half-width recomputed from records.jsonl over the same window is within the margin too."""
    starts = [e for e in events if e["event"] == "phase_start" and e["phase"] == "step"]
    untils = [e for e in events if e["event"] == "until"]
    ends = [e["wall"] for e in events if e["event"] in ("phase_start", "load_end")]
    assert [u["step"] for u in untils] == [s["step"] for s in starts] == [1, 2]
    recs = [r for r in records(run) if r["phase"] == "step"]
    frame = pl.DataFrame({"s": [r["start_wall"] for r in recs], "e": [r["start_wall"] + r["e2e"] for r in recs],
                          "u": [r["user"] for r in recs], "y": [bool(r["usable"]) for r in recs]})
    for st, u in zip(starts, untils, strict=True):
        assert u["reached"] is True and u["halfwidth"] <= margin and lo <= u["at_s"] < hi, u
        end = min(w for w in ends if w > st["wall"])
        assert end - st["wall"] == pytest.approx(u["at_s"], abs=0.5)  # the step ended when the margin was reached
        # the same estimator over what the records hold (the cycles of the requests then in flight included)
        again = renewal_reward(cycle_frame(frame, "s", "e", "u", "y"), u["wall"] - u["window_s"], u["wall"])
        h = again.rel_halfwidth()
        assert h is not None and h <= 1.5 * margin and again.cycles >= u["requests"] * 0.9, (u, h, again.cycles)


def test_steps_end_at_the_margin_before_max_on_the_simulator(tmp_path: Path) -> None:
    run, events = _run(tmp_path, "{margin: 0.1, min: 2, max: 40, check_every: 1}", [])
    _check_reached(run, events, 0.1, 2.0, 40.0)


def test_steps_end_at_the_margin_in_master_worker_mode(tmp_path: Path) -> None:
    run, events = _run(tmp_path, "{margin: 0.1, min: 2, max: 40, check_every: 1}", ["--processes", "2",
                                                                                     *master_port_args()])
    users = {r["user"] for r in records(run) if r["phase"] == "step"}
    assert len(users) == 16  # both steps' users ran (on two workers), each one a stream of the estimate
    _check_reached(run, events, 0.1, 2.0, 40.0)


def test_a_margin_out_of_reach_ends_each_step_at_max(tmp_path: Path) -> None:
    _, events = _run(tmp_path, "{margin: 0.002, max: 4, check_every: 1}", [])
    untils = [e for e in events if e["event"] == "until"]
    starts = [e for e in events if e["event"] == "phase_start" and e["phase"] == "step"]
    assert [u["step"] for u in untils] == [1, 2]
    for u in untils:
        assert u["reached"] is False and u["at_s"] == pytest.approx(4.0, abs=1.1), u
        assert u["halfwidth"] is None or u["halfwidth"] > 0.002
    assert starts[1]["wall"] - starts[0]["wall"] == pytest.approx(4.0, abs=1.1)


LIVE_PROFILE = """
name: until-live
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: short, text: "Explain quantum entanglement to a university student.", max_tokens: 1500}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: 0}
steps: {concurrency: [8], drain_timeout: 30, until: {margin: 0.001, max: 10, check_every: 1}}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


@pytest.mark.parametrize("mode", ["processes", "webui-login"])
def test_prometheus_shows_the_live_halfwidth_in_master_worker_mode_and_from_the_web_ui(tmp_path: Path,
                                                                                       mode: str) -> None:
    """The gauge ``llmload_step_rate_halfwidth_ratio`` is scraped during the step (master with two workers; the web
    UI started with --autostart), its values are the checks' half-widths, and the step ends at its max."""
    from harness.sim import launch
    from tests.integration.test_prometheus import SIM_ARGS, parse_exposition, run_locust
    from tests.procs import free_port

    with launch(preset="demo", time_scale=0.25, seed=3, extra_args=SIM_ARGS) as sim:
        run = run_locust(tmp_path, mode, sim.url, free_port(), profile=LIVE_PROFILE % {"out": tmp_path / "runs"})
    seen = [v for text in run.live for (name, _), v in parse_exposition(text).items()
            if name == "llmload_step_rate_halfwidth_ratio"]
    assert seen and all(0 < v < 10 for v in seen), run.logs[-3000:]
    events = [json.loads(x) for x in (run.run_dir / "phases.jsonl").read_text().splitlines()]
    (u,) = [e for e in events if e["event"] == "until"]
    assert u["reached"] is False and u["at_s"] == pytest.approx(10.0, abs=1.1) and u["halfwidth"] is not None
    assert "margin ±0.1 % NOT reached in its" in (run.run_dir / "report.md").read_text().replace("\n", " ")
