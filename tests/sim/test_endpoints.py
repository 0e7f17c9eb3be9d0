"""Models, health, metrics, authentication, errors and keep-alive of the simulator."""

from __future__ import annotations

import re
import socket
import time
from typing import Any

from harness.sim import SimProcess
from tests.sim.sseclient import chat, connect, hostport, raw_chat_request, raw_exchange, request

MSG = [{"role": "user", "content": "What is continuous batching in LLM serving?"}]


def test_models(sim: SimProcess) -> None:
    r = request(sim.url, "GET", "/v1/models")
    assert r.status == 200
    d = r.json()
    assert d["object"] == "list"
    (card,) = d["data"]
    assert card["id"] == "sim-reasoner" == sim.model
    assert card["object"] == "model"
    assert card["sim"]["time_scale"] == 0.05
    assert card["sim"]["preset"] == "demo"
    assert card["sim"]["flavour"] == "vllm"
    assert card["sim"]["model"]["decode_base"] > 0


def test_custom_model_name(launch_sim: Any) -> None:
    proc = launch_sim(model="my-model")
    assert proc.model == "my-model"
    assert request(proc.url, "GET", "/v1/models").json()["data"][0]["id"] == "my-model"
    r = chat(proc.url, {"model": "my-model", "messages": MSG, "max_tokens": 2, "stream": True})
    assert r.status == 200 and r.chunks[0].data["model"] == "my-model"


def test_health(sim: SimProcess) -> None:
    r = request(sim.url, "GET", "/health")
    assert r.status == 200 and r.body == b""


def test_metrics(sim: SimProcess) -> None:
    before = request(sim.url, "GET", "/metrics")
    assert before.status == 200
    assert before.headers["content-type"].startswith("text/plain")
    r = chat(sim.url, {"messages": MSG, "max_tokens": 5, "stream": True})
    assert r.status == 200
    text = request(sim.url, "GET", "/metrics").body.decode()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:prompt_tokens_total",
                 "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:e2e_request_latency_seconds_count"):
        assert re.search(rf'^{re.escape(name)}\{{.*model_name="sim-reasoner".*\}} ', text, re.M), name

    def value(series: str, src: str) -> float:
        m = re.search(rf"^{re.escape(series)} (\S+)$", src, re.M)
        return float(m.group(1)) if m else 0.0

    length = 'vllm:request_success_total{finished_reason="length",model_name="sim-reasoner"}'
    gen = 'vllm:generation_tokens_total{model_name="sim-reasoner"}'
    old = before.body.decode()
    assert value(length, text) >= value(length, old) + 1
    assert value(gen, text) >= value(gen, old) + 5
    assert 'vllm:request_success_total{finished_reason="stop",model_name="sim-reasoner"}' in text


def test_api_key(launch_sim: Any) -> None:
    proc = launch_sim(extra_args=["--api-key", "sekret"])
    body = {"messages": MSG, "max_tokens": 2}
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = chat(proc.url, body, headers=headers)
        assert r.status == 401 and "error" in r.json()
    assert request(proc.url, "GET", "/v1/models").status == 401
    ok = chat(proc.url, body, headers={"Authorization": "Bearer sekret"})
    assert ok.status == 200 and ok.json()["usage"]["completion_tokens"] == 2
    assert request(proc.url, "GET", "/health").status == 200  # health and metrics stay open, as in vLLM
    assert request(proc.url, "GET", "/metrics").status == 200


def test_unknown_model_404(sim: SimProcess) -> None:
    r = chat(sim.url, {"model": "gpt-17", "messages": MSG, "stream": True})
    assert r.status == 404
    err = r.json()["error"]
    assert err["type"] == "NotFoundError" and err["code"] == 404 and "gpt-17" in err["message"]


def test_bad_requests_400(sim: SimProcess) -> None:
    bad: Any
    for bad in (
        b"{not json",
        {"messages": []},
        {"messages": MSG, "max_tokens": 0},
        {"messages": MSG, "stream_options": {"include_usage": True}},  # stream_options without stream
        {"messages": MSG, "max_tokens": 10**9},  # beyond the context length
    ):
        r = request(sim.url, "POST", "/v1/chat/completions", bad)
        assert r.status == 400, bad
        assert r.json()["error"]["code"] == 400


def test_unknown_path_and_method(sim: SimProcess) -> None:
    assert request(sim.url, "GET", "/nope").status == 404
    assert request(sim.url, "GET", "/v1/chat/completions").status == 405


def test_keep_alive_http_client(sim: SimProcess) -> None:
    conn = connect(sim.url)
    try:
        first = chat(sim.url, {"messages": MSG, "max_tokens": 5, "stream": True}, conn=conn)
        sock = conn.sock
        second = chat(sim.url, {"messages": MSG, "max_tokens": 5, "stream": True}, conn=conn)
        assert conn.sock is sock is not None  # http.client did not need to reconnect
        third = chat(sim.url, {"messages": MSG, "max_tokens": 5}, conn=conn)
        assert conn.sock is sock
    finally:
        conn.close()
    assert first.status == second.status == third.status == 200
    assert first.events[-1].data == second.events[-1].data == "[DONE]"


def test_keep_alive_raw_socket(sim: SimProcess) -> None:
    with socket.create_connection(hostport(sim.url), timeout=10) as s:
        req = raw_chat_request({"messages": MSG, "max_tokens": 3, "stream": True})
        a = raw_exchange(s, req)
        b = raw_exchange(s, req)
    for resp in (a, b):
        assert resp.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in resp.lower()
        assert b"connection: close" not in resp.lower()
        assert resp.count(b"data: ") == 1 + 3 + 1 + 1  # role, 3 tokens, finish, [DONE]


def test_connection_close_honoured(sim: SimProcess) -> None:
    with socket.create_connection(hostport(sim.url), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 OK") and b"connection: close" in data.lower()


def test_client_disconnect_aborts(sim: SimProcess) -> None:
    with socket.create_connection(hostport(sim.url), timeout=10) as s:
        s.sendall(raw_chat_request({"messages": MSG, "max_tokens": 5000, "stream": True, "ignore_eos": True}))
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
    # the server notices on its next write and frees the slot
    series = 'vllm:request_success_total{finished_reason="abort",model_name="sim-reasoner"}'
    pattern = re.compile(rf"^{re.escape(series)} (\S+)$", re.M)
    for _ in range(100):
        m = pattern.search(request(sim.url, "GET", "/metrics").body.decode())
        if m and float(m.group(1)) >= 1:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("abort not counted")
