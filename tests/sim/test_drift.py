"""Drift (``--drift-per-hour F``): decode speed falls by the fraction F per simulated hour, prefill time rises by
``1 / (1 - F)`` per hour; measured on the engine's clock at two simulated times and through the HTTP server."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import pytest

from harness.sim.engine import HOUR, MAX_LOG_SLOWDOWN, Engine, Sequence, drift_slowdown
from harness.sim.lengths import LengthPlan, PromptClass
from harness.sim.presets import DEMO
from tests.sim.sseclient import Reply, chat, request


def test_drift_slowdown_compounds_per_hour() -> None:
    assert drift_slowdown(0.3, 0.0) == 1.0 and drift_slowdown(0.0, 5.0) == 1.0 and drift_slowdown(0.3, -1.0) == 1.0
    assert drift_slowdown(0.3, 1.0) == pytest.approx(1 / 0.7, rel=1e-12)
    assert drift_slowdown(0.3, 2.0) == pytest.approx(1 / 0.49, rel=1e-12)
    assert drift_slowdown(0.5, 0.5) == pytest.approx(math.sqrt(2), rel=1e-12)
    assert drift_slowdown(0.99, 1e6) == pytest.approx(math.exp(MAX_LOG_SLOWDOWN))  # saturates, no OverflowError
    for bad in (-0.1, 1.0, 1.5):
        with pytest.raises(ValueError, match="drift_per_hour"):
            drift_slowdown(bad, 1.0)


def test_engine_step_and_prefill_at_two_simulated_times() -> None:
    """The engine's per-token (step) time and prefill time one simulated hour apart differ by 1 / (1 - F)."""
    scale = 0.05
    engine = Engine(DEMO, time_scale=scale, drift_per_hour=0.3, drift_origin=100.0)
    t0, t1 = 100.0, 100.0 + HOUR * scale  # the drift origin, and one simulated hour later (180 real s)
    assert engine.step_seconds(4, t0) == pytest.approx(DEMO.step_seconds(4) * scale, rel=1e-12)
    assert engine.step_seconds(4, t1) / engine.step_seconds(4, t0) == pytest.approx(1 / 0.7, rel=1e-12)
    assert engine.prefill_seconds(40, t1) / engine.prefill_seconds(40, t0) == pytest.approx(1 / 0.7, rel=1e-12)
    # tokens/s per sequence falls by F per hour: -30 % after one hour, -51 % after two
    rate = [1 / engine.step_seconds(1, t0 + h * HOUR * scale) for h in (0, 1, 2)]
    assert rate[1] / rate[0] == pytest.approx(0.7) and rate[2] / rate[0] == pytest.approx(0.49)
    assert Engine(DEMO, time_scale=0.0, drift_per_hour=0.3).slowdown(1e9) == 1.0  # no modelled time at scale 0
    with pytest.raises(ValueError, match="drift_per_hour"):
        Engine(DEMO, drift_per_hour=1.0)


def _seq(total: int) -> Sequence:
    return Sequence("chatcmpl-drift", 40, LengthPlan(PromptClass.NORMAL, total, 0, "stop", total, 0))


def _timed(engine: Engine, total: int) -> tuple[float, float]:
    """Run one sequence of ``total`` tokens alone: (prefill seconds, mean seconds per decoded token), real."""
    seq = _seq(total)
    engine.submit(seq)
    with gevent.Timeout(10):
        while not seq.finished:
            seq.event.wait()
            seq.event.clear()
    assert seq.first_token_at is not None and seq.finished_at is not None
    return seq.first_token_at - seq.arrival, (seq.finished_at - seq.first_token_at) / (total - 1)


def test_engine_loop_runs_slower_an_hour_later() -> None:
    """The running engine loop: a sequence one simulated hour after the drift origin (F = 0.5) decodes at half the
    speed and prefills in twice the time of the same sequence at the origin (20 ms steps, 200 ms prefill: a late
    wake-up of a loaded host, which only adds, stays small against it)."""
    scale = 0.01  # a simulated hour is 36 real seconds: the drift within one sequence (~0.6 s) is ~1 %
    preset = DEMO.with_overrides(decode_base=2.0, decode_per_seq=0.0, prefill_base=20.0, prefill_per_token=0.0)
    measured = []
    for hours_ago in (0.0, 1.0):  # the engine's drift began now, or one simulated hour ago
        engine = Engine(preset, time_scale=scale, drift_per_hour=0.5,
                        drift_origin=time.perf_counter() - hours_ago * HOUR * scale)  # fmt: skip
        engine.start()
        try:
            measured.append(_timed(engine, 11))
        finally:
            engine.stop()
    (prefill_0, tpot_0), (prefill_1, tpot_1) = measured
    assert 0.019 < tpot_0 < 0.025 and 0.038 < tpot_1 < 0.048, measured
    assert 0.199 < prefill_0 < 0.23 and 0.399 < prefill_1 < 0.45, measured
    assert 1.8 < tpot_1 / tpot_0 < 2.2, measured
    assert 1.8 < prefill_1 / prefill_0 < 2.2, measured


def _token_times(reply: Reply) -> list[float]:
    return [e.t for e in reply.events if isinstance(e.data, dict) and (e.delta.get("reasoning") or
                                                                         e.delta.get("content"))]  # fmt: skip


def test_server_flag_drifts_the_stream(launch_sim: Any, tmp_path: Path) -> None:
    """``--drift-per-hour 0.5`` through the command line: two streams ~1 simulated hour apart (1.8 real s at time
    scale 0.0005) show per-token gaps and TTFTs in the ratio the model gives for their time apart; the model card
    and the truth log's server line say the drift."""
    scale = 0.0005
    truth = tmp_path / "truth.jsonl"
    proc = launch_sim(preset="demo", time_scale=scale, extra_args=[
        "--truth-log", str(truth), "--drift-per-hour", "0.5", "--decode-base", "40", "--decode-per-seq", "0",
        "--prefill-base", "400", "--prefill-per-token", "0"])  # fmt: skip
    assert proc.model  # started
    card = request(proc.url, "GET", "/v1/models").json()["data"][0]["sim"]
    assert card["drift_per_hour"] == 0.5
    assert json.loads(truth.read_text().splitlines()[0])["drift_per_hour"] == 0.5
    body = {"messages": [{"role": "user", "content": "Describe the drift."}], "stream": True, "max_tokens": 11,
            "ignore_eos": True}  # fmt: skip
    seen = []
    for wait in (0.0, HOUR * scale):
        time.sleep(wait)
        reply = chat(proc.url, body)
        times = _token_times(reply)
        assert len(times) == 11, reply.events
        seen.append((reply.t_sent, times[0] - reply.t_sent, (times[0] + times[-1]) / 2, (times[-1] - times[0]) / 10))
    (sent_0, ttft_0, mid_0, tpot_0), (sent_1, ttft_1, mid_1, tpot_1) = seen
    # a prefill lasts as the server was when it began (the request's arrival), a step as it was at the step
    model_ttft = drift_slowdown(0.5, (sent_1 - sent_0) / scale / HOUR)  # ~2: 200 ms, then ~400 ms
    model_tpot = drift_slowdown(0.5, (mid_1 - mid_0) / scale / HOUR)  # ~2.8: the second prefill takes longer
    assert 0.85 * model_ttft < ttft_1 / ttft_0 < 1.15 * model_ttft, (seen, model_ttft)
    assert 0.85 * model_tpot < tpot_1 / tpot_0 < 1.15 * model_tpot, (seen, model_tpot)


def test_cli_rejects_a_drift_outside_0_1() -> None:
    out = subprocess.run([sys.executable, "-m", "harness.sim", "serve", "--drift-per-hour", "1.0"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "--drift-per-hour must be in [0, 1)" in out.stderr, out.stderr
