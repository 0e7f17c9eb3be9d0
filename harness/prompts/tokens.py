"""Counting prompt tokens: a local ``tokenizer.json`` (the ``tokenizers`` library), else a flagged estimate.

Nothing is downloaded: the tokenizer is a file path (``tokenizer:`` in the profile), loaded with
``tokenizers.Tokenizer.from_file``. Without one, a text of N tokens is N × 4 characters (:data:`CHARS_PER_TOKEN`),
and every place that reports a count says it is an estimate (:attr:`TokenCounter.exact` False).

:class:`SyntheticText` builds prompts of a given token count from a seeded word corpus: each prompt starts at a
random word of the corpus, so prompts do not share a prefix (a server's prefix cache does not flatter them).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harness.prompts.files import DataFileError

__all__ = ["CHARS_PER_TOKEN", "SyntheticText", "TokenCounter"]

#: Characters per token of the estimate used without a tokenizer.
CHARS_PER_TOKEN = 4

_WORDS = (
    "the of and to in is that for it as with was on be by this are at from or an have not which but all were "
    "system model data value time number result method process function table server request answer question "
    "token stream network memory signal energy market river mountain history language science theory example "
    "simple complex large small early late quickly slowly carefully often never always between through under "
    "build write read measure compare explain describe analyse design improve reduce increase observe report"
).split()


class TokenCounter:
    """Counts tokens of a text: exactly with a local tokenizer file, else ``ceil(chars / 4)`` (flagged).

    Attributes:
        exact: True with a tokenizer file; False for the estimate.
        method: ``"tokenizer <path>"`` or ``"estimate (chars/4)"``, for logs and run metadata.
    """

    def __init__(self, tokenizer_path: str | Path | None = None) -> None:
        self._tok: Any = None
        self.exact = tokenizer_path is not None
        if tokenizer_path is None:
            self.method = f"estimate (chars/{CHARS_PER_TOKEN})"
            return
        p = Path(tokenizer_path)
        if not p.is_file():
            raise DataFileError(f"{p}: no such file (tokenizer: a local tokenizer.json; nothing is downloaded)")
        try:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_file(str(p))
        except Exception as e:
            raise DataFileError(
                f"{p}: not a tokenizer.json the tokenizers library reads ({str(e).splitlines()[0]})"
            ) from None
        self.method = f"tokenizer {p}"

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no special tokens added; the estimate: ``ceil(len(text) / 4)``)."""
        if self._tok is None:
            return -(-len(text) // CHARS_PER_TOKEN)
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character ``(start, end)`` of every token of ``text`` (the estimate: 4-character slices)."""
        if self._tok is None:
            return [(i, min(i + CHARS_PER_TOKEN, len(text))) for i in range(0, len(text), CHARS_PER_TOKEN)]
        return [tuple(o) for o in self._tok.encode(text, add_special_tokens=False).offsets]  # type: ignore[misc]


class SyntheticText:
    """Prompts of an exact token count (exact with a tokenizer; the estimate's 4 chars a token otherwise).

    A corpus of seeded random words is tokenized once (grown when a longer prompt is asked for); a prompt of N
    tokens is the text of N consecutive corpus tokens from a random start, re-counted and trimmed so the counter
    gives N (within 1 token where a tokenizer merges across the cut).
    """

    def __init__(self, counter: TokenCounter, seed: int = 0) -> None:
        self.counter = counter
        self._rng = random.Random(seed)
        self._text = ""
        self._offs: list[tuple[int, int]] = []
        self._spare = 2048  # tokens of start positions beyond the longest prompt

    def _ensure(self, n: int) -> None:
        need = n + self._spare
        if len(self._offs) >= need:
            return
        words = max(need * 2, 4096)
        self._text = " ".join(self._rng.choice(_WORDS) for _ in range(words))
        self._offs = self.counter.offsets(self._text)
        while len(self._offs) < need:  # a tokenizer with long tokens: more words
            words *= 2
            self._text = " ".join(self._rng.choice(_WORDS) for _ in range(words))
            self._offs = self.counter.offsets(self._text)

    def text(self, n: int, rng: random.Random) -> tuple[str, int]:
        """A prompt of ``n`` tokens (n >= 1) and its counted length (tokens; == n except at a merge)."""
        self._ensure(n)
        offs = self._offs
        start = rng.randrange(0, len(offs) - n + 1)
        s = offs[start][0]
        end = start + n - 1
        out = self._text[s : offs[end][1]].strip()
        got = self.counter.count(out)
        while got > n and end > start:  # merged across the cut into more tokens: drop one
            end -= 1
            out = self._text[s : offs[end][1]].strip()
            got = self.counter.count(out)
        return out, got
