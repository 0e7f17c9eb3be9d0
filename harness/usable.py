"""What makes a successful request a *usable sample*: the rule a profile's ``usable:`` section defines.

Pure and dependency-free (no pydantic, no sockets), so the chunk interpreter can apply it at the end of a request.
A request is usable when it succeeded (``ok``), was not truncated, and passes every check the profile asks for;
:meth:`UsableRule.reason` says why not, as one of :data:`USABLE_REASONS`. The text checks (``answer_regex``,
``answer_json``) need the answer text, which the client keeps only when the rule asks for it
(:attr:`UsableRule.needs_text`), in a buffer bounded by :attr:`UsableRule.buffer_chars`; only the verdict is
recorded, never the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orjson import JSONDecodeError as _JSONError
from orjson import loads as _loads

__all__ = ["DEFAULT_BUFFER_CHARS", "USABLE_REASONS", "UsableRule", "strip_json_fence", "usable_reason"]

#: Why a request is not a usable sample (the record's ``usable_reason``), in the order they are checked.
USABLE_REASONS: dict[str, str] = {
    "error": "the request failed (ok false: see error_class)",
    "truncated": "the output was cut at max_tokens (finish_reason length, or output tokens >= max_tokens)",
    "min_answer_tokens": "fewer answer tokens than usable.min_answer_tokens",
    "regex": "the answer text does not match usable.answer_regex",
    "json": "the answer text is not JSON (usable.answer_json)",
}

#: Characters of answer text kept for the text checks when the profile does not set ``usable.buffer_chars``.
DEFAULT_BUFFER_CHARS = 1_000_000

_FENCE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\r?\n(?P<body>.*?)\r?\n?```\Z", re.DOTALL)


def strip_json_fence(text: str) -> str:
    """``text`` without surrounding whitespace and, when the whole answer is one Markdown code fence (````` ```json
    ... ``` `````, any or no language tag), without the fence lines."""
    s = text.strip()
    m = _FENCE.match(s)
    return m.group("body") if m else s


@dataclass(frozen=True, slots=True)
class UsableRule:
    """The checks that make a successful, untruncated request usable (all optional; none = any such request).

    Attributes:
        min_answer_tokens: at least this many answer tokens (``answer_tokens`` of the record), or None.
        answer_regex: a compiled pattern that must be *found* (``re.search``) in the answer text, or None.
        answer_json: the answer text must parse as JSON (any JSON value), after :func:`strip_json_fence`.
        buffer_chars: characters of answer text kept for the text checks; an answer longer than this is checked
            on its first ``buffer_chars`` characters (so it fails ``answer_json``).
    """

    min_answer_tokens: int | None = None
    answer_regex: re.Pattern[str] | None = None
    answer_json: bool = False
    buffer_chars: int = DEFAULT_BUFFER_CHARS

    @property
    def needs_text(self) -> bool:
        """Whether a check reads the answer text (the client then keeps it, bounded)."""
        return self.answer_regex is not None or self.answer_json

    def reason(self, ok: bool, truncated: bool, answer_tokens: int, answer_text: str | None) -> str | None:
        """Why the request is not usable (a key of :data:`USABLE_REASONS`), or None when it is.

        Args:
            ok: the request succeeded.
            truncated: its output was cut at ``max_tokens``.
            answer_tokens: its answer tokens (tokens).
            answer_text: its answer text (at most ``buffer_chars`` characters); only read when
                :attr:`needs_text`, where None counts as empty.
        """
        return usable_reason(self, ok, truncated, answer_tokens, answer_text)


def usable_reason(
    rule: UsableRule | None, ok: bool, truncated: bool, answer_tokens: int, answer_text: str | None
) -> str | None:
    """:meth:`UsableRule.reason`, with ``rule`` None meaning no profile checks (only error and truncation)."""
    if not ok:
        return "error"
    if truncated:
        return "truncated"
    if rule is None:
        return None
    if rule.min_answer_tokens is not None and answer_tokens < rule.min_answer_tokens:
        return "min_answer_tokens"
    if rule.needs_text:
        text = answer_text or ""
        if rule.answer_regex is not None and rule.answer_regex.search(text) is None:
            return "regex"
        if rule.answer_json:
            try:
                _loads(strip_json_fence(text))
            except _JSONError:
                return "json"
    return None
