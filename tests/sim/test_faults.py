"""Every injected fault, asked for per request (body ``sim_fault`` or header ``x-sim-fault``) and by rate, as the
harness's own client classifies it, and as the ground-truth log records it."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.client import ChatClient, Timeouts
from harness.result import RequestIdentity, RequestResult
from harness.sim import SimProcess, launch
from harness.sim.truth import read_truth
from tests.sim.sseclient import raw_stream, request

SCALE = 0.05
MSG = [{"role": "user", "content": "Explain why the sky is blue, briefly."}]
#: Client timeouts (real seconds) below the stalls asked for (simulated seconds x SCALE).
TIMEOUTS = Timeouts(connect=2.0, first_byte=0.5, first_token=0.5, idle=0.5, total=20.0)


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimProcess, Path]]:
    truth = tmp_path_factory.mktemp("truth") / "truth.jsonl"
    with launch(preset="demo", time_scale=SCALE, seed=3,
                extra_args=["--truth-log", str(truth), "--restart-downtime", "0.2"]) as proc:
        yield proc, truth


def run(url: str, fault: Any = None, header: str | None = None, max_tokens: int = 40, stream: bool = True,
        timeouts: Timeouts = TIMEOUTS, **extra: Any) -> RequestResult:
    body: dict[str, Any] = {"messages": MSG, "max_tokens": max_tokens,
                            "stream_options": {"include_usage": True, "continuous_usage_stats": True}, **extra}
    if fault is not None:
        body["sim_fault"] = fault
    client = ChatClient(url, timeouts=timeouts, headers={"x-sim-fault": header} if header else None)
    try:
        return client.stream_chat(body, RequestIdentity("p"), keep_chunk_times=True)
    finally:
        client.close()


def truth_of(path: Path, fault_type: str) -> dict[str, Any]:
    """The last truth line whose fault has this type (the log is flushed per line)."""
    for _ in range(50):
        _, reqs, _ = read_truth(path)
        hits = [r for r in reqs if (r.get("fault") or {}).get("type") == fault_type]
        if hits:
            return hits[-1]
        time.sleep(0.05)
    raise AssertionError(f"no truth line for {fault_type}")


@pytest.mark.parametrize(("fault", "status", "cls"), [("http_429", 429, "http_429"), ("http_503", 503, "http_5xx")])
def test_http_errors_with_retry_after(faulty: tuple[SimProcess, Path], fault: str, status: int, cls: str) -> None:
    proc, truth = faulty
    r = run(proc.url, {"type": fault, "retry_after": 7})
    assert not r.ok and r.error_class == cls and r.http_status == status
    assert "retry-after=7" in (r.error_detail or "")
    raw = raw_stream(proc.url, {"messages": MSG, "stream": True, "sim_fault": fault})
    assert raw.status == status and raw.headers["retry-after"] == "1"
    assert json.loads(raw.body)["error"]["code"] == status
    t = truth_of(truth, fault)
    assert t["status"] == status and t["outcome"] == "http_error" and t["fault"]["fired"]


def test_error_event_mid_stream(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, "error_event; after_tokens=6")
    assert not r.ok and r.error_class == "server_error_event" and "code=500" in (r.error_detail or "")
    assert r.chunks == 6 and r.output_tokens == 6  # partial tokens kept in the record, not a success
    raw = raw_stream(proc.url, {"messages": MSG, "stream": True, "sim_fault": {"type": "error_event",
                                                                                "after_tokens": 2}})
    assert raw.complete and raw.events[-1] == b"data: [DONE]\n\n"
    assert raw.events[-2] == (b'data: {"error":{"message":"simulated engine failure","type":"InternalServerError",'
                              b'"param":null,"code":500}}\n\n')
    t = truth_of(truth, "error_event")
    assert t["outcome"] == "fault" and t["sent_tokens"] == 2 and len(t["chunks"]) == 2


def test_connection_dropped_mid_stream(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, None, header="drop; after_tokens=5")  # via the header this time
    assert not r.ok and r.error_class == "stream_truncated" and r.chunks == 5
    raw = raw_stream(proc.url, {"messages": MSG, "stream": True, "sim_fault": "drop; after_tokens=3"})
    assert not raw.complete and raw.events[-1].startswith(b"data: {")  # no [DONE], no terminating chunk
    t = truth_of(truth, "drop")
    assert t["outcome"] == "fault" and t["sent_tokens"] == 3


def test_finish_reason_abort(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, "abort; after_tokens=4")
    assert not r.ok and r.error_class == "aborted" and r.finish_reason == "abort"
    assert r.output_tokens == 4 and r.done_seen
    t = truth_of(truth, "abort")
    assert t["finish_reason"] == "abort" and t["sent_tokens"] == 4


def test_malformed_chunk(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, "malformed; after_tokens=3")
    assert not r.ok and r.error_class == "malformed_chunk"
    assert r.output_tokens == 40 and r.chunks == 39  # the stream went on; the broken chunk is not a token chunk
    t = truth_of(truth, "malformed")
    assert [c[3] for c in t["chunks"]].count("x") == 1 and t["chunks"][2][3] == "x"
    assert t["outcome"] == "completed" and t["finish_reason"] == "length"


def test_stall_before_first_token(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, {"type": "stall_first", "seconds": 40})  # 2 s real > first_token timeout 0.5 s
    assert not r.ok and r.error_class == "timeout_first_token" and r.http_status == 200 and r.chunks == 0
    short = run(proc.url, {"type": "stall_first", "seconds": 4})  # 0.2 s real: a slow success
    assert short.ok and short.ttft is not None and 0.2 <= short.ttft < 0.45
    t = truth_of(truth, "stall_first")
    assert t["outcome"] == "completed" and t["chunks"][0][0] >= 0.2


def test_stall_between_chunks(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, {"type": "stall_chunk", "after_tokens": 7, "seconds": 40})
    assert not r.ok and r.error_class == "timeout_idle" and r.chunks == 7
    short = run(proc.url, {"type": "stall_chunk", "after_tokens": 7, "seconds": 4})
    assert short.ok and short.chunk_times is not None
    gaps = [b - a for a, b in zip(short.chunk_times, short.chunk_times[1:], strict=False)]
    assert max(gaps) >= 0.2 and gaps.index(max(gaps)) == 6  # between the 7th and the 8th chunk
    t = truth_of(truth, "stall_chunk")
    assert t["fault"]["fired"] and t["chunks"][7][0] - t["chunks"][6][0] >= 0.2


def test_slow_headers(faulty: tuple[SimProcess, Path]) -> None:
    proc, truth = faulty
    r = run(proc.url, {"type": "slow_headers", "seconds": 40})
    assert not r.ok and r.error_class == "timeout_first_byte" and r.http_status is None
    short = run(proc.url, {"type": "slow_headers", "seconds": 4})
    assert short.ok and short.t_headers is not None and short.t_headers >= 0.2
    t = truth_of(truth, "slow_headers")
    assert t["headers_at"] >= 0.2


def test_non_streaming_faults(faulty: tuple[SimProcess, Path]) -> None:
    proc, _ = faulty
    ok = raw_stream(proc.url, {"messages": MSG, "max_tokens": 30, "sim_fault": "abort; after_tokens=3"})
    assert json.loads(ok.body)["choices"][0]["finish_reason"] == "abort"
    err = raw_stream(proc.url, {"messages": MSG, "max_tokens": 30, "sim_fault": "error_event; after_tokens=3"})
    assert err.status == 500
    bad = raw_stream(proc.url, {"messages": MSG, "max_tokens": 30, "sim_fault": "malformed; after_tokens=3"})
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad.body)


def test_bad_fault_is_a_400(faulty: tuple[SimProcess, Path]) -> None:
    proc, _ = faulty
    for bad in ("explode", {"type": "drop", "after_tokens": 0}, {"after_tokens": 3}, "drop; after=3", 5):
        r = raw_stream(proc.url, {"messages": MSG, "stream": True, "sim_fault": bad})
        assert r.status == 400 and "sim_fault" in json.loads(r.body)["error"]["message"], bad


def test_restart_kills_in_flight_then_comes_back(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    with launch(preset="demo", time_scale=SCALE, extra_args=["--truth-log", str(truth),
                                                             "--restart-downtime", "20"]) as proc:  # 1 s down
        before = request(proc.url, "GET", "/metrics").body.decode()
        r = run(proc.url, "restart; after_tokens=5")
        assert not r.ok and r.error_class == "stream_truncated" and r.chunks == 5
        down = run(proc.url)  # the port is closed during the downtime
        assert not down.ok and down.error_class == "connect_error" and down.http_status is None
        deadline = time.monotonic() + 10
        while True:
            back = run(proc.url)
            if back.ok or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert back.ok
        after = request(proc.url, "GET", "/metrics").body.decode()
    gen = re.compile(r'^vllm:generation_tokens_total\{model_name="sim-reasoner"\} (\S+)$', re.M)
    m_after, m_before = gen.search(after), gen.search(before)
    assert m_after is not None and m_before is not None
    assert float(m_after.group(1)) == 40  # a fresh registry: counters restart from zero
    assert float(m_before.group(1)) == 0
    _, reqs, restarts = read_truth(truth)
    assert len(restarts) == 1 and restarts[0]["up_epoch"] - restarts[0]["down_epoch"] >= 0.9
    assert reqs[0]["outcome"] == "killed_by_restart" and reqs[0]["fault"]["type"] == "restart"


def test_periodic_restarts(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    # every 10 simulated s (0.5 s real), down 0.1 s real; a 3000-token request (~1.6 s real) cannot survive
    with launch(preset="demo", time_scale=SCALE, extra_args=["--truth-log", str(truth), "--fault-restart-every",
                                                             "10", "--restart-downtime", "2"]) as proc:
        r = run(proc.url, max_tokens=3000, ignore_eos=True)
        time.sleep(1.0)
    assert not r.ok and r.error_class == "stream_truncated"
    _, reqs, restarts = read_truth(truth)
    assert len(restarts) >= 2 and all(x["reason"] == "periodic" for x in restarts)
    assert reqs[0]["outcome"] == "killed_by_restart" and reqs[0]["fault"] is None


def test_rates_grace_and_seeded_draws(tmp_path: Path) -> None:
    truth = tmp_path / "t.jsonl"
    extra = ["--truth-log", str(truth), "--fault-drop", "0.5", "--fault-abort", "0.5", "--fault-grace", "2",
             "--fault-seed", "11"]
    with launch(preset="demo", time_scale=SCALE, extra_args=extra) as proc:
        results = [run(proc.url, max_tokens=20) for _ in range(12)]
        none = run(proc.url, "none", max_tokens=20)  # a request can opt out
        card = request(proc.url, "GET", "/v1/models").json()["data"][0]["sim"]
    assert card["faults"]["rates"] == {"drop": 0.5, "abort": 0.5} and card["faults"]["grace"] == 2
    assert [r.ok for r in results[:2]] == [True, True]  # the grace requests (e.g. a warm-up)
    classes = {r.error_class for r in results[2:]}
    assert classes == {"stream_truncated", "aborted"}  # every later request faulted, by both kinds
    assert none.ok
    _, reqs, _ = read_truth(truth)
    kinds = [(x.get("fault") or {}).get("type") for x in reqs[:12]]
    assert kinds[:2] == [None, None] and set(kinds[2:]) == {"drop", "abort"}
    assert all((x.get("fault") or {}).get("source", "rate") == "rate" for x in reqs[:12])


def test_socket_errors_during_a_restart_are_the_restarts_not_the_clients() -> None:
    """A restart shuts sockets down before it kills handlers, so a handler can meet the OSError first: the truth
    must still say the restart cut the request (a clean request labelled ``client_disconnected`` may only end in
    a client timeout, and the fidelity check then calls the harness's correct ``stream_truncated`` wrong)."""
    from harness.sim.server import SimConfig, SimServer

    server = SimServer(SimConfig(time_scale=SCALE))
    assert server._cut_outcome() == "client_disconnected"
    server._restarting = True
    assert server._cut_outcome() == "killed_by_restart"
    server._stopping = True
    assert server._cut_outcome() == "server_stopped"


def test_every_stream_in_flight_at_a_restart_is_labelled_killed_by_restart(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    truth = tmp_path / "t.jsonl"
    # one restart 10 simulated s (0.5 s real) in; 16 streams of 3000 tokens (~1.6 s real each) are all cut by it
    with launch(preset="demo", time_scale=SCALE, extra_args=["--truth-log", str(truth), "--fault-restart-every",
                                                             "10", "--restart-downtime", "2"]) as proc:
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda _: run(proc.url, max_tokens=3000, ignore_eos=True), range(16)))
        time.sleep(0.5)  # the restart's own truth line is written once the port is back (0.1 s real)
    assert [r.error_class for r in results] == ["stream_truncated"] * 16
    _, reqs, restarts = read_truth(truth)
    assert len(restarts) >= 1 and len(reqs) == 16
    assert {q["outcome"] for q in reqs} == {"killed_by_restart"}
