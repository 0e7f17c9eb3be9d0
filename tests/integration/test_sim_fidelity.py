"""Fidelity at C=64: the standard Locust sweep against the time-scaled simulator, with every fault injected by rate
and a server restart, checked request by request against the simulator's ground-truth log (harness.report.fidelity).

One run (~40 s) serves both tests: exact token counts and fault classification, and the TTFT accuracy target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.records import read_records
from harness.report.fidelity import FidelityReport, compare, render
from harness.sim.faults import FAULT_TYPES

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCALE = 0.5
#: Timeouts (wall seconds) below the injected stalls (6 simulated s = 3 s wall), above normal latencies.
PROFILE = """
name: fidelity-c64
simulator: {preset: demo, time_scale: %(scale)s, seed: 3}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: explain, text: "Explain how TCP congestion control works, with an example.", max_tokens: 1024, weight: 2}
  - {id: guide, text: "Write a comprehensive guide to B-trees.", max_tokens: 200, weight: 1}
  - {id: ok, text: "Say just 'OK' and nothing else, please.", max_tokens: 16, weight: 1}
warmup: {max_tokens: 16, timeout: 30}
single_stream: {duration: 0}
steps: {concurrency: [64], duration: 28, drain_timeout: 20}
timeouts: {connect: 5, first_byte: 1.0, first_token: 1.5, idle: 1.0, total: 120}
output: {dir: %(out)s, chunk_times: true}
"""
#: 2 % of requests per fault kind, a restart 40 simulated s (20 s wall) after start, down 2 simulated s (long
#: enough for users pausing after the restart's failures to hit the closed port), the warm-up spared.
SIM_ARGS = ("--fault-429 0.02 --fault-503 0.02 --fault-error-event 0.02 --fault-drop 0.02 --fault-abort 0.02 "
            "--fault-malformed 0.02 --fault-stall-first 0.02 --fault-stall-chunk 0.02 --fault-slow-headers 0.02 "
            "--stall-seconds 6 --slow-headers-seconds 6 --fault-restart-every 40 --restart-downtime 2 "
            "--fault-grace 1")
#: The accuracy target: |harness TTFT - true TTFT| p99, milliseconds.
TTFT_P99_MS = 2.0


@pytest.fixture(scope="module")
def c64(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FidelityReport, list[dict[str, Any]]]]:
    tmp = tmp_path_factory.mktemp("fidelity")
    prof = tmp / "fidelity.yaml"
    prof.write_text(PROFILE % {"scale": SCALE, "out": tmp / "runs"})
    truth = tmp / "truth.jsonl"
    env = dict(os.environ, PYTHONUNBUFFERED="1", LLMLOAD_SIM_ARGS=f"--truth-log {truth} {SIM_ARGS}")
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless", "--only-summary",
         "--profile", str(prof)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # Locust exits 1 when requests failed (they must)
    (run,) = [p for p in (tmp / "runs").iterdir() if p.is_dir()]
    rep = compare(run, truth)
    print(render(rep, TTFT_P99_MS))
    yield rep, read_records(run)


def test_c64_tokens_exact_and_every_fault_in_its_own_class(c64: tuple[FidelityReport, list[dict[str, Any]]]) -> None:
    rep, records = c64
    s = rep.summary
    assert s["records"] == len(records) and s["time_scale"] == SCALE
    assert max(r.concurrency for r in records) == 64
    m = s["matching"]
    assert m["matched"] >= 400 and m["unexplained_records"] == 0 and m["unmatched_truth"] == 0, m
    t = s["tokens"]
    assert t["checked"] >= 300 and t["mismatches"] == 0, t
    c = s["classification"]
    # the examples in full (pytest would cut a dict's repr), with the restart windows to place them against
    assert c["misclassified"] == 0 and c["false_successes"] == 0 and c["false_failures"] == 0, json.dumps(
        {"misclassified": c["misclassified_examples"], "false_successes": c["false_success_examples"],
         "restarts": s["restarts"]}, default=str)
    seen = {label.split("+")[0] for label in c["confusion"]}
    assert seen >= {*FAULT_TYPES, "none", "restart_down"} - {"restart"} | {"restart"}, seen
    own = {"http_429": "http_429", "http_503": "http_5xx", "error_event": "server_error_event",
           "drop": "stream_truncated", "abort": "aborted", "malformed": "malformed_chunk",
           "stall_first": "timeout_first_token", "stall_chunk": "timeout_idle",
           "slow_headers": "timeout_first_byte", "restart": "stream_truncated", "none": "ok"}
    for fault, cls in own.items():
        assert set(c["confusion"][fault]) == {cls}, (fault, c["confusion"][fault])
    assert rep.passed
    # TTFT: never earlier than the truth (beyond clock-reading noise: each side is an interval between two stamps
    # taken in its own process, so a descheduled process shifts one of them; seen down to -0.25 ms while the
    # machine ran other load), and accurate in the median
    d = s["ttft_diff_ms"]
    assert d["n"] >= 300 and d["min_signed"] > -0.5 and d["p50"] < 2.0, d
    assert s["gap_diff_ms"]["n"] > 10_000


def test_c64_ttft_difference_p99_within_2ms(c64: tuple[FidelityReport, list[dict[str, Any]]]) -> None:
    rep, records = c64
    d = rep.summary["ttft_diff_ms"]
    kernel = bool(records) and all(r.time_source == "kernel" for r in records if r.ttft is not None)
    if not kernel and d["p99"] is not None and d["p99"] > TTFT_P99_MS:
        # One client process reads the 64 chunks of each engine step one after another, so its user-space
        # timestamps of a first token that arrives inside such a burst are late by up to a few ms (and by the whole
        # freeze when this shared host stalls the process). Kernel receive timestamps in harness/http.py (see
        # harness/sim/README.md, "Fidelity") remove both (prototype at C=64: p99 0.22 ms); until the records carry
        # time_source == "kernel" this is expected.
        pytest.xfail(f"TTFT difference p99 {d['p99']:.2f} ms > {TTFT_P99_MS} ms with user-space read timestamps")
    assert d["p99"] is not None and d["p99"] <= TTFT_P99_MS, d
