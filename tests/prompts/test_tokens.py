"""Token counting with a local tokenizer.json, the flagged estimate, and synthetic prompts of N tokens."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.prompts.files import DataFileError
from harness.prompts.tokens import SyntheticText, TokenCounter


def test_estimate_is_flagged_and_chars_over_four() -> None:
    c = TokenCounter(None)
    assert not c.exact and c.method == "estimate (chars/4)"
    assert c.count("") == 0 and c.count("abcd") == 1 and c.count("abcde") == 2


def test_tokenizer_counts_exactly(tokenizer_json: Path) -> None:
    c = TokenCounter(tokenizer_json)
    assert c.exact and c.method == f"tokenizer {tokenizer_json}"
    assert c.count("the model of the server") == 5


@pytest.mark.parametrize("n", [1, 7, 300, 5000])
def test_synthetic_text_has_n_tokens(tokenizer_json: Path, n: int) -> None:
    st = SyntheticText(TokenCounter(tokenizer_json), seed=3)
    rng = random.Random(0)
    texts = set()
    for _ in range(5):
        text, got = st.text(n, rng)
        assert got == n and TokenCounter(tokenizer_json).count(text) == n
        texts.add(text[:40])
    if n >= 7:
        assert len(texts) > 1  # random starts: prompts do not share a prefix


def test_synthetic_text_estimate_length() -> None:
    st = SyntheticText(TokenCounter(None))
    text, got = st.text(100, random.Random(0))
    assert 99 <= got <= 100 and 392 <= len(text) <= 400


def test_tokenizer_missing_or_not_a_tokenizer(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"tokenizer\.json: no such file"):
        TokenCounter(tmp_path / "tokenizer.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(DataFileError, match=r"bad\.json: not a tokenizer\.json"):
        TokenCounter(bad)
