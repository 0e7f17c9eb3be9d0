"""harness.redact: known secret values and Bearer/sk- tokens become the marker; secret names; log redaction."""

from __future__ import annotations

import logging

import pytest

from harness.redact import (
    MARKER,
    MASK,
    is_secret_header,
    redact_logs,
    redact_message,
    redact_query,
    redact_text,
    secret_query_values,
)

KEY = "azk-9f8e7d6c5b4a"


def test_known_values_and_token_patterns_become_the_marker() -> None:
    text = f'{{"error": "bad key {KEY}; sent Authorization: Bearer abc.DEF-123 and sk-proj_ABCDEFGH12"}}'
    out = redact_text(text, [KEY, "", "ab"])
    assert KEY not in out and "abc.DEF-123" not in out and "sk-proj_ABCDEFGH12" not in out
    assert out.count(MARKER) == 3
    assert "Bearer " + MARKER in out


def test_short_values_are_not_searched_and_clean_text_is_unchanged() -> None:
    assert redact_text("a cat sat", ["a", "cat"]) == "a cat sat"
    assert redact_text("no secrets here", [KEY]) == "no secrets here"


def test_a_longer_secret_containing_a_shorter_one_is_hidden_whole() -> None:
    assert redact_text("xx-secret-long yy", ["secret", "xx-secret-long"]) == f"{MARKER} yy"


@pytest.mark.parametrize("name", ["Authorization", "api-key", "X-API-Key", "x-goog-api-key", "X-Auth-Token",
                                  "Cookie", "client_secret"])
def test_secret_header_names(name: str) -> None:
    assert is_secret_header(name)


@pytest.mark.parametrize("name", ["Content-Type", "X-Request-Id", "OpenAI-Organization", "api-version"])
def test_ordinary_header_names(name: str) -> None:
    assert not is_secret_header(name)


def test_secret_query_parameters() -> None:
    url = f"https://x.openai.azure.com/openai?api-version=2024-02-01&api-key={KEY}"
    assert secret_query_values(url) == [KEY]
    assert redact_query(url) == f"https://x.openai.azure.com/openai?api-version=2024-02-01&api-key={MARKER}"


def test_log_records_are_redacted_whatever_the_logger(caplog: pytest.LogCaptureFixture) -> None:
    redact_logs([KEY])
    with caplog.at_level(logging.INFO):
        logging.getLogger("some.library").info("server said %s", f"no such key {KEY}")
    assert KEY not in caplog.text
    assert f"no such key {MARKER}" in caplog.text


# the wider patterns of free text shown to people (server messages: harness.failures)
@pytest.mark.parametrize(("text", "secret"), [
    ("Incorrect API key provided: sk-proj-abcDEF123456789.", "sk-proj-abcDEF123456789"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9.payload.sig"),
    ('{"api_key": "azure-0123abcd"}', "azure-0123abcd"),
    ("GET /v1/models?api-key=hunter2hunter2 failed", "hunter2hunter2"),
    ("token=abcd1234efgh", "abcd1234efgh"),
    ("http://user:pa55word@example.com/v1", "pa55word"),
    ("opaque 0123456789abcdef0123456789abcdef01 here", "0123456789abcdef0123456789abcdef01"),
])
def test_keys_and_tokens_are_masked(text: str, secret: str) -> None:
    out = redact_message(text)
    assert secret not in out and MASK in out


def test_given_secrets_are_masked_verbatim_and_short_ones_ignored() -> None:
    assert redact_message("the key was plainword42!", secrets=["plainword42!"]) == "the key was [redacted]"
    assert redact_message("a b c", secrets=["b", ""]) == "a b c"  # too short to mask safely


def test_ordinary_messages_are_unchanged() -> None:
    for text in ("This model's maximum context length is 32768 tokens. However, you requested 40960 tokens.",
                 "Rate limit reached for requests", "HTTP 503: Service Unavailable", "max_tokens must be at least 1",
                 ""):
        assert redact_message(text) == text
