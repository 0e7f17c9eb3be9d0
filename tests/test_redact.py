"""harness.redact.redact_text: keys, tokens and given secrets masked in free text; ordinary text unchanged."""

from __future__ import annotations

import pytest

from harness.redact import MASK, redact_text


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
    out = redact_text(text)
    assert secret not in out and MASK in out


def test_given_secrets_are_masked_verbatim_and_short_ones_ignored() -> None:
    assert redact_text("the key was plainword42!", secrets=["plainword42!"]) == "the key was ***"
    assert redact_text("a b c", secrets=["b", ""]) == "a b c"  # too short to mask safely


def test_ordinary_messages_are_unchanged() -> None:
    for text in ("This model's maximum context length is 32768 tokens. However, you requested 40960 tokens.",
                 "Rate limit reached for requests", "HTTP 503: Service Unavailable", "max_tokens must be at least 1",
                 ""):
        assert redact_text(text) == text
