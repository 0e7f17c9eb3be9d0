"""harness.failures: the server's message of a failed request, normalised, with a hint; first failures logged once."""

from __future__ import annotations

import logging

import pytest

from harness.failures import (
    MAX_CHARS,
    FirstFailureLog,
    hint,
    locust_message,
    message_key,
    server_message,
    summarise,
)
from tests.failure_server import CASES, ECHOED_KEY


def _detail(case: str) -> str:
    """The ``error_detail`` the client writes for ``case`` of the failure server (status, retry-after, body)."""
    status, headers, body, _ = CASES[case]
    retry = headers.get("Retry-After")
    return f"HTTP {status}{f' retry-after={retry}' if retry else ''}: {body[:300]}"


def test_server_message_takes_the_json_message_and_never_the_html_page() -> None:
    assert server_message(_detail("context")).startswith("HTTP 400: This model's maximum context length is 32768")
    assert server_message(_detail("throttle")) == "HTTP 429: Rate limit reached for requests"
    assert server_message(_detail("html404")) == "HTTP 404: HTML page"
    assert server_message(_detail("server")).startswith("HTTP 503: Service Unavailable: engine dead")
    assert server_message("code=500 type=internal message=boom") == "code=500: boom"
    assert server_message("read timed out after 30 s") == "read timed out after 30 s"
    assert server_message(None) == server_message("") == ""


def test_server_message_is_redacted_and_truncated() -> None:
    out = server_message(_detail("auth"))
    assert ECHOED_KEY not in out and out == "HTTP 401: Incorrect API key provided: [redacted]."
    long = server_message("HTTP 400: " + '{"message": "' + "word " * 100 + '"}')
    assert len(long) == MAX_CHARS and long.endswith("…")
    truncated_json = server_message('HTTP 400: {"object":"error","message":"prompt is too long for this mod')
    assert truncated_json == "HTTP 400: prompt is too long for this mod"  # the client keeps ≤ 300 body chars


def test_message_key_collapses_numbers_and_ids_but_keeps_the_status() -> None:
    a = message_key("HTTP 400: request 123 failed (id 9f8e7d6c-1a2b-4c3d-8e9f-0a1b2c3d4e5f, chatcmpl-AbC123xyz789)")
    b = message_key("HTTP 400: request 456 failed (id 00000000-1111-4222-8333-444455556666, chatcmpl-ZZZ999qqq000)")
    assert a == b == "HTTP 400: request # failed (id <id>, chatcmpl-<id>)"
    assert message_key("code=500: boom 7") == "code=500: boom #"


@pytest.mark.parametrize(("case", "expect"), [
    ("context", "lower max_tokens"),
    ("auth", "target.api_key_env"),
    ("throttle", "Retry-After seen (3 s)"),
    ("html404", "target.model"),
    ("server", "server's log"),
])
def test_each_failure_gets_its_hint(case: str, expect: str) -> None:
    status, headers, _, _ = CASES[case]
    cls = "http_429" if status == 429 else "http_5xx" if status >= 500 else "http_4xx"
    retry = [float(headers["Retry-After"])] if "Retry-After" in headers else []
    h = hint(cls, status, server_message(_detail(case)), retry)
    assert h is not None and expect in h
    assert hint("timeout_idle", None, "") == "raise timeouts.idle or lower the load"
    assert hint("malformed_chunk", None, "bad json") is None


def test_summarise_counts_per_class_and_groups_messages_by_key() -> None:
    rows = [
        ("http_4xx", 'HTTP 400: {"message":"request 1: maximum context length is 32768 tokens"}', 400, None),
        ("http_4xx", 'HTTP 400: {"message":"request 2: maximum context length is 32768 tokens"}', 400, None),
        ("http_4xx", _detail("auth"), 401, None),
        ("http_429", _detail("throttle"), 429, 3.0),
        ("http_429", _detail("throttle"), 429, 5.0),
        (None, None, None, None),
    ]
    out = summarise(rows)
    assert [(c.error_class, c.count) for c in out] == [("http_4xx", 3), ("http_429", 2), ("unknown", 1)]
    ctx, auth = out[0].messages
    assert (ctx.message, ctx.count) == ("HTTP 400: request 1: maximum context length is 32768 tokens", 2)
    assert ctx.hint is not None and "max_tokens" in ctx.hint
    assert auth.count == 1 and auth.hint is not None and "API key" in auth.hint  # its own hint, not the class's
    assert out[1].messages[0].hint is not None and "Retry-After seen (3 s, 5 s)" in out[1].messages[0].hint
    assert out[2].messages == []  # counted, no message to show
    assert len(summarise([("http_5xx", f"HTTP 500: error {chr(97 + i)}", 500, None) for i in range(6)],
                         top=3)[0].messages) == 3


def test_locust_message_is_stable_per_server_message() -> None:
    a = locust_message("http_4xx", None, 'HTTP 400: {"message":"request 11 over 32768"}')
    assert a == locust_message("http_4xx", None, 'HTTP 400: {"message":"request 12 over 32768"}')
    assert a == "http_4xx: HTTP 400: request # over #"
    assert locust_message("timeout_idle", None, None) == "timeout_idle"


def test_first_failure_per_class_and_run_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    first = FirstFailureLog()
    with caplog.at_level(logging.WARNING, logger="llmload.failures"):
        assert first.note("run-a", "http_4xx", _detail("context"), 400)
        assert not first.note("run-a", "http_4xx", _detail("auth"), 401)
        assert first.note("run-b", "http_4xx", _detail("auth"), 401)  # a new run logs its own first
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 2
    assert "maximum context length is 32768" in msgs[0] and "lower max_tokens" in msgs[0]
    assert ECHOED_KEY not in msgs[1] and "target.api_key_env" in msgs[1]
