"""ReasoningChatUser: pause after failures (no hammering of a dead server), reset on success."""

from __future__ import annotations

import types

import pytest

import harness.users as users
from harness.metrics import InFlight
from harness.result import RequestIdentity, RequestResult


def test_backoff_doubles_honours_retry_after_and_resets(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(users.gevent, "sleep", pauses.append)
    user = types.SimpleNamespace()
    fail = RequestResult(prompt_id="p", ok=False, error_class="connect_error", error_detail="refused")
    for _ in range(8):
        users.ReasoningChatUser._backoff_after(user, fail)  # type: ignore[arg-type]
    assert pauses == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    users.ReasoningChatUser._backoff_after(user, RequestResult(prompt_id="p", ok=True))  # type: ignore[arg-type]
    assert len(pauses) == 8  # no pause after a success
    throttled = RequestResult(
        prompt_id="p", ok=False, error_class="http_429", error_detail="HTTP 429 retry-after=3: x", retry_after_s=3.0
    )
    users.ReasoningChatUser._backoff_after(user, throttled)  # type: ignore[arg-type]
    assert pauses[-1] == 3.0  # first failure after the reset: max(0.25, Retry-After)


def test_backoff_reads_retry_after_from_the_field_not_the_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pause follows ``retry_after_s`` (fractions kept, capped at 10 s); the human detail text is not parsed."""
    pauses: list[float] = []
    monkeypatch.setattr(users.gevent, "sleep", pauses.append)

    def first_failure(**kw: object) -> float:
        user = types.SimpleNamespace()
        users.ReasoningChatUser._backoff_after(user, RequestResult(prompt_id="p", ok=False, **kw))  # type: ignore[arg-type]
        return pauses[-1]

    assert first_failure(error_class="http_429", retry_after_s=1.5) == 1.5
    assert first_failure(error_class="http_5xx", retry_after_s=60.0) == 10.0  # capped like the doubling
    assert first_failure(error_class="http_429", retry_after_s=0.0) == 0.25  # never below the first step
    assert first_failure(error_class="http_429", error_detail="HTTP 429 retry-after=7: x") == 0.25  # no field


def _fire(res: RequestResult, monkeypatch: pytest.MonkeyPatch, size: int = 0, setting: str | None = None,
          sent: list[RequestIdentity] | None = None, api_key: str | None = None) -> dict[str, object]:
    """The request event ReasoningChatUser.chat fires for ``res`` (the client receives ``size`` bytes) in a phase
    with sweep ``setting``; the identity it sends with is appended to ``sent``."""
    fired: list[dict[str, object]] = []
    in_flight = InFlight()
    monkeypatch.setattr(users.gevent, "sleep", lambda s: None)
    prompt = types.SimpleNamespace(id="p", label="cls")
    conn = types.SimpleNamespace(rx_bytes=5000)  # bytes of earlier requests on the same connection

    def stream_chat(body: object, identity: RequestIdentity, **kw: object) -> RequestResult:
        conn.rx_bytes += size
        assert in_flight.n == 1  # counted while it runs
        if sent is not None:
            sent.append(identity)
        return res

    client = types.SimpleNamespace(stream_chat=stream_chat, conn=conn)
    state = types.SimpleNamespace(phase="step", step=1, concurrency=2, setting=setting)
    ctx = types.SimpleNamespace(
        state=state,
        pick=lambda rng: (prompt, {"messages": []}),
        profile=types.SimpleNamespace(output=types.SimpleNamespace(chunk_times=False),
                                      target=types.SimpleNamespace(api_key=lambda: api_key)),
        record=lambda rec: None,
        run_id="run-1",
    )
    user = types.SimpleNamespace(
        ctx=ctx,
        rng=None,
        user_id="u1",
        conversation=None,
        client=client,
        in_flight=in_flight,
        environment=types.SimpleNamespace(
            events=types.SimpleNamespace(request=types.SimpleNamespace(fire=lambda **kw: fired.append(kw)))
        ),
        _backoff_after=lambda r: None,
    )
    users.ReasoningChatUser.chat(user)  # type: ignore[arg-type]
    assert in_flight.n == 0
    return fired[0]


def test_the_request_identity_is_complete_when_it_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep setting goes to the client with the identity (the result is created with it, not patched after)."""
    sent: list[RequestIdentity] = []
    _fire(RequestResult(prompt_id="p", ok=True, e2e=1.0), monkeypatch, setting="thinking=off", sent=sent)
    assert [(i.prompt_id, i.prompt_class, i.user, i.setting, i.conversation, i.turn, i.scheduled_wall)
            for i in sent] == [("p", "cls", "u1", "thinking=off", None, None, None)]


def _failure_name(res: RequestResult, monkeypatch: pytest.MonkeyPatch) -> str:
    """The exception message ReasoningChatUser.chat reports to Locust for ``res``."""
    exc = _fire(res, monkeypatch)["exception"]
    assert isinstance(exc, users.RequestFailed)
    return str(exc)


def test_response_length_is_the_bytes_received_not_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """Locust's "Average size (bytes)" column: the request's bytes as received (this request's only), never its
    output tokens."""
    ok = RequestResult(prompt_id="p", ok=True, output_tokens=321, e2e=1.0)
    ev = _fire(ok, monkeypatch, size=4711)
    assert ev["response_length"] == 4711 and ev["exception"] is None


def test_failure_name_carries_the_in_band_error_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """``server_error_event code=<code>`` from ``error_code`` (not split out of the detail text); no code, no suffix."""
    detail = "code=500 type=internal message=boom"
    ev = RequestResult(prompt_id="p", error_class="server_error_event", error_detail=detail, error_code="500")
    assert _failure_name(ev, monkeypatch) == "server_error_event code=500: boom"
    named = RequestResult(prompt_id="p", error_class="server_error_event", error_detail="x", error_code="overloaded")
    assert _failure_name(named, monkeypatch) == "server_error_event code=overloaded: x"
    bare = RequestResult(prompt_id="p", error_class="server_error_event", error_detail=detail)
    assert _failure_name(bare, monkeypatch) == "server_error_event: code=500: boom"
    http = RequestResult(prompt_id="p", error_class="http_5xx", error_detail="HTTP 503: x", error_code="500")
    assert _failure_name(http, monkeypatch) == "http_5xx: HTTP 503: x"
    empty = RequestResult(prompt_id="p", error_class="timeout_idle", error_detail=None)
    assert _failure_name(empty, monkeypatch) == "timeout_idle"


def test_failure_name_carries_the_normalised_server_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """Locust's failures tab shows the server's message, not only ``http_4xx``: ids and numbers collapsed (one row
    for "request 123" and "request 456"), a key in the body redacted."""
    a = RequestResult(prompt_id="p", error_class="http_4xx", http_status=400,
                      error_detail='HTTP 400: {"object":"error","message":"request 123: maximum context length is '
                                   '32768 tokens"}')
    b = RequestResult(prompt_id="p", error_class="http_4xx", http_status=400,
                      error_detail='HTTP 400: {"object":"error","message":"request 456: maximum context length is '
                                   '32768 tokens"}')
    name_a, name_b = _failure_name(a, monkeypatch), _failure_name(b, monkeypatch)
    assert name_a == name_b == "http_4xx: HTTP 400: request #: maximum context length is # tokens"
    leak = RequestResult(prompt_id="p", error_class="http_4xx", http_status=401,
                         error_detail='HTTP 401: {"error":{"message":"Incorrect API key provided: sk-live12345678"}}')
    assert _failure_name(leak, monkeypatch) == "http_4xx: HTTP 401: Incorrect API key provided: [redacted]"
    plain = RequestResult(prompt_id="p", error_class="http_4xx", http_status=401,
                          error_detail='HTTP 401: {"error":{"message":"key plainkey!! is not valid"}}')
    exc = _fire(plain, monkeypatch, api_key="plainkey!!")["exception"]  # the profile's own key, whatever its form
    assert str(exc) == "http_4xx: HTTP 401: key [redacted] is not valid"


def test_first_failure_of_a_class_is_logged_once_with_its_message(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """One WARNING per new error class per run, carrying the server's message and the hint; repeats are quiet."""
    monkeypatch.setattr(users, "FIRST_FAILURES", users.FIRST_FAILURES.__class__())
    detail = 'HTTP 401: {"error":{"message":"Unauthorized"}}'
    res = RequestResult(prompt_id="p", error_class="http_4xx", http_status=401, error_detail=detail)
    with caplog.at_level("WARNING", logger="llmload.failures"):
        for _ in range(3):
            _fire(res, monkeypatch)
        _fire(RequestResult(prompt_id="p", error_class="http_429", http_status=429, retry_after_s=7.0,
                            error_detail="HTTP 429 retry-after=7: slow down"), monkeypatch)
    msgs = [r.getMessage() for r in caplog.records if r.name == "llmload.failures"]
    assert len(msgs) == 2, msgs
    assert msgs[0].startswith("first http_4xx failure: HTTP 401: Unauthorized (") and "target.api_key_env" in msgs[0]
    assert msgs[1].startswith("first http_429 failure: HTTP 429: slow down") and "Retry-After seen (7 s)" in msgs[1]


def test_backoff_honours_the_servers_retry_after_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real 429 with ``Retry-After: 2`` through the client: the user pauses 2 s, not the first step's 0.25 s."""
    from harness.client import ChatClient
    from tests.replay_server import ReplayServer

    pauses: list[float] = []
    with ReplayServer(framing="chunked") as srv:
        srv.queue.append("C12/c_429_then_success")
        res = ChatClient(srv.url).stream_chat({"model": "m", "messages": []}, RequestIdentity("p"))
    assert (res.error_class, res.retry_after_s) == ("http_429", 2.0)
    monkeypatch.setattr(users.gevent, "sleep", pauses.append)
    users.ReasoningChatUser._backoff_after(types.SimpleNamespace(), res)  # type: ignore[arg-type]
    assert pauses == [2.0]


def test_rx_bytes_count_the_whole_response_as_received() -> None:
    """The byte count behind ``response_length``: status line, headers and body with its framing, as received
    from the socket (a loopback server sending a known response)."""
    import socket
    import threading

    from harness.client import ChatClient
    from harness.result import RequestIdentity

    events = [
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    body = b"".join(events)
    response = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
                b"content-length: %d\r\n\r\n" % len(body)) + body  # fmt: skip
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")))
            while len(rest) < length:
                rest += conn.recv(65536)
            conn.sendall(response)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client = ChatClient(f"http://127.0.0.1:{srv.getsockname()[1]}/v1")
    try:
        before = client.conn.rx_bytes
        res = client.stream_chat({"model": "m", "messages": []}, RequestIdentity("p", None, "u", "step", 1, 1))
        assert res.ok, res.error_detail
        assert client.conn.rx_bytes - before == len(response)
    finally:
        client.close()
        srv.close()
        t.join(5)
