"""ReasoningChatUser: pause after failures (no hammering of a dead server), reset on success."""

from __future__ import annotations

import types

import pytest

import harness.users as users
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


def _failure_name(res: RequestResult, monkeypatch: pytest.MonkeyPatch) -> str:
    """The exception message ReasoningChatUser.chat reports to Locust for ``res``."""
    fired: list[dict[str, object]] = []
    monkeypatch.setattr(users.gevent, "sleep", lambda s: None)
    prompt = types.SimpleNamespace(id="p", label="cls")
    state = types.SimpleNamespace(phase="step", step=1, concurrency=2, setting=None)
    ctx = types.SimpleNamespace(
        state=state,
        pick=lambda rng: (prompt, {"messages": []}),
        profile=types.SimpleNamespace(output=types.SimpleNamespace(chunk_times=False)),
        record=lambda rec: None,
    )
    user = types.SimpleNamespace(
        ctx=ctx,
        rng=None,
        user_id="u1",
        conversation=None,
        client=types.SimpleNamespace(stream_chat=lambda body, identity, **kw: res),
        environment=types.SimpleNamespace(
            events=types.SimpleNamespace(request=types.SimpleNamespace(fire=lambda **kw: fired.append(kw)))
        ),
        _backoff_after=lambda r: None,
    )
    users.ReasoningChatUser.chat(user)  # type: ignore[arg-type]
    exc = fired[0]["exception"]
    assert isinstance(exc, users.RequestFailed)
    return str(exc)


def test_failure_name_carries_the_in_band_error_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """``server_error_event code=<code>`` from ``error_code`` (not split out of the detail text); no code, no suffix."""
    detail = "code=500 type=internal message=boom"
    ev = RequestResult(prompt_id="p", error_class="server_error_event", error_detail=detail, error_code="500")
    assert _failure_name(ev, monkeypatch) == "server_error_event code=500"
    named = RequestResult(prompt_id="p", error_class="server_error_event", error_detail="x", error_code="overloaded")
    assert _failure_name(named, monkeypatch) == "server_error_event code=overloaded"
    bare = RequestResult(prompt_id="p", error_class="server_error_event", error_detail=detail)
    assert _failure_name(bare, monkeypatch) == "server_error_event"
    http = RequestResult(prompt_id="p", error_class="http_5xx", error_detail="HTTP 503: x", error_code="500")
    assert _failure_name(http, monkeypatch) == "http_5xx"


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
