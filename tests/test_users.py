"""ReasoningChatUser: pause after failures (no hammering of a dead server), reset on success."""

from __future__ import annotations

import types

import pytest

import harness.users as users
from harness.result import RequestResult


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
    throttled = RequestResult(prompt_id="p", ok=False, error_class="http_429", error_detail="HTTP 429 retry-after=3: x")
    users.ReasoningChatUser._backoff_after(user, throttled)  # type: ignore[arg-type]
    assert pauses[-1] == 3.0  # first failure after the reset: max(0.25, Retry-After)
