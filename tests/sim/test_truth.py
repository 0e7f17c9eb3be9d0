"""The ground-truth log against what a client really received, and the pure helpers behind faults and chunks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.client import ChatClient
from harness.result import RequestIdentity
from harness.sim import launch
from harness.sim.faults import Fault, FaultConfig, FaultError, FaultPlanner, parse_request_fault
from harness.sim.presets import K26, K26_SEED_TPS, PRESETS
from harness.sim.server import SimServer
from harness.sim.truth import prompt_hash, read_truth

MSG = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]


def test_truth_log_matches_what_the_client_saw(tmp_path: Path) -> None:
    truth = tmp_path / "truth.jsonl"
    with launch(preset="demo", time_scale=0.1, seed=9, model="m1", extra_args=["--truth-log", str(truth)]) as proc:
        client = ChatClient(proc.url)
        body = {"model": "m1", "messages": MSG, "max_tokens": 400, "stream_options": {"continuous_usage_stats": True}}
        results = []
        for _ in range(3):
            results.append(client.stream_chat(body, RequestIdentity("p"), keep_chunk_times=True))
        client.close()
    server, reqs, restarts = read_truth(truth)
    assert server is not None and server["preset"] == "demo" and server["time_scale"] == 0.1
    assert server["model"] == "m1" and "--truth-log" in server["argv"] and restarts == []
    assert len(reqs) == 3
    assert [r["conn"] for r in reqs] == [reqs[0]["conn"]] * 3 and [r["conn_seq"] for r in reqs] == [1, 2, 3]
    for res, t in zip(results, reqs, strict=True):
        assert res.ok and t["outcome"] == "completed" and t["status"] == 200 and t["stream"]
        assert t["prompt_hash"] == prompt_hash(MSG) and t["max_tokens"] == 400
        assert t["sent_tokens"] == res.output_tokens == sum(c[2] for c in t["chunks"])
        assert t["reasoning_tokens"] == res.reasoning_tokens
        assert len(t["chunks"]) == res.chunks and [c[2] for c in t["chunks"]] == res.chunk_tokens
        assert [c[3] for c in t["chunks"]] == ["r"] * res.reasoning_chunks + ["a"] * res.answer_chunks
        times = [c[0] for c in t["chunks"]]
        assert times == sorted(times) and 0 < t["headers_at"] <= times[0] <= t["end_at"]
        assert all(abs(c[1] - (t["received_epoch"] + c[0])) < 1e-6 for c in t["chunks"])
        # received = kernel arrival time: just after the client sent it; each chunk read just after its write
        assert t["received_source"] == "kernel" and 0 <= t["received_epoch"] - res.start_wall < 0.05
        assert res.ttft is not None and 0 <= res.ttft - times[0] < 0.05
        assert res.chunk_times is not None
        lags = [a - w for a, w in zip(res.chunk_times, times, strict=True)]
        assert min(lags) > -0.002 and sorted(lags)[len(lags) // 2] < 0.01


def test_truth_log_records_api_errors_and_closes(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    with launch(preset="demo", time_scale=0.1, extra_args=["--truth-log", str(truth), "--api-key", "sekret"]) as p:
        client = ChatClient(p.url, api_key="sekret")
        bad = client.stream_chat({"messages": MSG, "max_tokens": 10**9}, RequestIdentity("p"))
        client.close()
        time.sleep(0.1)
    assert bad.error_class == "http_4xx"
    server, reqs, _ = read_truth(truth)
    assert server is not None and "sekret" not in str(server["argv"])
    assert reqs[0]["status"] == 400 and reqs[0]["outcome"] == "http_error"


def test_read_truth_skips_a_torn_last_line(tmp_path: Path) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text('{"type":"server","time_scale":1}\n{"type":"request","id":"a"}\n{"type":"requ')
    server, reqs, _ = read_truth(p)
    assert server == {"type": "server", "time_scale": 1} and [r["id"] for r in reqs] == ["a"]
    p.write_text('{"type":"ser\n{"type":"request","id":"a"}\n')
    with pytest.raises(ValueError):
        read_truth(p)


# -- pure helpers ---------------------------------------------------------------------------------
def test_k26_step_table_goes_through_the_seed_figures() -> None:
    assert K26.step_table is not None
    for c, tps in K26_SEED_TPS.items():
        assert K26.aggregate_rate(c) == pytest.approx(tps, rel=1e-9)
    assert K26.step_seconds(12) == pytest.approx((K26.step_seconds(8) + K26.step_seconds(16)) / 2)
    assert 1000 < K26.aggregate_rate(64) < 1020  # extrapolated from the C=16..32 slope
    assert K26.reasoning_mean + K26.answer_mean == 2965
    assert "step_table" in K26.describe() and set(PRESETS) >= {"demo", "k26", "bench"}


def test_parse_request_fault() -> None:
    f = parse_request_fault("drop; after_tokens=5")
    assert f == Fault("drop", after_tokens=5, source="request")
    assert parse_request_fault({"type": "stall-first", "seconds": 2}) == Fault("stall_first", seconds=2.0,
                                                                             source="request")
    assert parse_request_fault("429") == Fault("http_429", source="request")
    assert parse_request_fault("none") is None and parse_request_fault(None) is None
    for bad in ("", "explode", "drop; x", "drop; after_tokens=0", {"type": "drop", "when": 1}, 3, {"seconds": 1}):
        with pytest.raises(FaultError):
            parse_request_fault(bad)


def test_fault_planner_rates_and_defaults() -> None:
    with pytest.raises(FaultError):
        FaultConfig(rates={"drop": 0.7, "abort": 0.6})
    with pytest.raises(FaultError):
        FaultConfig(rates={"restart": 0.1})
    cfg = FaultConfig(rates={"drop": 0.25, "http_429": 0.25}, grace=3, seed=1, stall_seconds=7)
    a, b = FaultPlanner(cfg), FaultPlanner(cfg)
    draws_a = [a.choose(None) for _ in range(400)]
    draws_b = [b.choose(None) for _ in range(400)]
    assert [d and d.type for d in draws_a] == [d and d.type for d in draws_b]  # seeded
    assert draws_a[:3] == [None, None, None]
    counts = {k: sum(1 for d in draws_a if d and d.type == k) for k in ("drop", "http_429")}
    assert all(70 < n < 130 for n in counts.values()), counts
    asked = Fault("stall_first", source="request")
    assert a.choose(asked) is asked and a.choose(None, explicit_none=True) is None
    assert a.finalize(Fault("stall_chunk"), 10).seconds == 7
    for _ in range(50):
        f = a.finalize(Fault("stall_chunk"), 10)
        assert f.after_tokens is not None and 1 <= f.after_tokens <= 9
        g = a.finalize(Fault("drop"), 10)
        assert g.after_tokens is not None and 1 <= g.after_tokens <= 10
    assert a.finalize(Fault("http_503"), 10).retry_after == 1


@pytest.mark.parametrize(
    ("sent", "limit", "closes", "per_chunk", "marks", "expected"),
    [
        (0, 5, False, 1, None, 1),
        (3, 5, False, 4, None, None),  # wait for a full chunk
        (3, 5, True, 4, None, 5),  # ...unless the phase or the stream ends
        (1, 5, False, 1, [1, 3, 5], 3),  # one chunk per engine output
        (3, 5, False, 1, [1, 3, 5], 5),
        (1, 9, False, 4, [1, 3, 5, 9], 5),  # whole outputs until >= 4 tokens
        (1, 4, True, 1, [1, 3, 5], 3),
        (3, 4, True, 1, [1, 3, 5], 4),  # cut at the phase end inside an output
        (5, 5, False, 1, [1, 3, 5], None),
    ],
)
def test_chunk_boundaries(sent: int, limit: int, closes: bool, per_chunk: int, marks: list[int] | None,
                          expected: int | None) -> None:
    assert SimServer._chunk_end(sent, limit, closes, per_chunk, marks) == expected
