"""Output-length model: how many reasoning and answer tokens a simulated request produces.

Deterministic: the draw depends only on the server seed, the request's messages, and either the
request's own ``seed`` field or the number of times the same messages were seen before (so the
n-th identical prompt gets the n-th draw regardless of what other prompts arrive in between).

All lengths are in **tokens** (the simulator emits one token per chunk unless told otherwise).
"""

from __future__ import annotations

import enum
import hashlib
import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.sim.presets import Preset

_SHORT_RE = re.compile(r"\bsay\s+(?:just|only)\b", re.IGNORECASE)
_LONG_RE = re.compile(r"guide|comprehensive", re.IGNORECASE)
#: Last user message shorter than this many characters counts as a short prompt.
SHORT_PROMPT_CHARS = 20
#: Factor applied to the natural reasoning length per ``reasoning_effort`` (no effort given = ``medium``).
EFFORT_FACTORS: dict[str, float] = {"low": 0.3, "medium": 1.0, "high": 1.6}


class PromptClass(enum.StrEnum):
    """Coarse prompt class that selects the length distribution."""

    SHORT = "short"
    NORMAL = "normal"
    LONG = "long"


@dataclass(frozen=True)
class LengthPlan:
    """Planned output of one request, in tokens, after applying ``max_tokens``.

    ``reasoning_tokens + answer_tokens == total_tokens <= max_tokens``; ``finish_reason`` is
    ``"length"`` when the natural length was cut at ``max_tokens`` (possibly inside reasoning, then
    ``answer_tokens == 0``), else ``"stop"``.
    """

    prompt_class: PromptClass
    reasoning_tokens: int
    answer_tokens: int
    finish_reason: str
    natural_reasoning: int
    natural_answer: int

    @property
    def total_tokens(self) -> int:
        """Completion tokens (reasoning + answer)."""
        return self.reasoning_tokens + self.answer_tokens


def _content_text(content: Any) -> str:
    """Text of one message ``content`` (a string or a list of OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    parts.append(text)
            elif isinstance(part, str):
                parts.append(part)
        return "".join(parts)
    return ""


def message_texts(messages: Iterable[Any]) -> list[str]:
    """Content text of every message (non-dict messages contribute an empty string)."""
    return [_content_text(m.get("content")) if isinstance(m, dict) else "" for m in messages]


def estimate_prompt_tokens(messages: list[Any]) -> int:
    """Prompt tokens ≈ characters / 4 of all message contents (at least 1)."""
    chars = sum(len(t) for t in message_texts(messages))
    return max(1, math.ceil(chars / 4))


def last_user_text(messages: list[Any]) -> str:
    """Text of the last ``user`` message (falls back to the last message of any role)."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            return _content_text(m.get("content"))
    return _content_text(messages[-1].get("content")) if messages and isinstance(messages[-1], dict) else ""


def classify(messages: list[Any]) -> PromptClass:
    """Classify a prompt: ``SHORT`` ("Say just 'OK'" or < 20 chars), ``LONG`` (guide/comprehensive), else ``NORMAL``."""
    text = last_user_text(messages)
    if _SHORT_RE.search(text) or len(text.strip()) < SHORT_PROMPT_CHARS:
        return PromptClass.SHORT
    if _LONG_RE.search(text):
        return PromptClass.LONG
    return PromptClass.NORMAL


def _lognormal(rng: random.Random, mean: float, sigma: float, lo: int, hi: int) -> int:
    """Integer draw from a lognormal with the given arithmetic ``mean`` and log-sigma, clipped to [lo, hi]."""
    if sigma <= 0.0:
        value = mean
    else:
        mu = math.log(max(mean, 1e-9)) - sigma * sigma / 2.0
        value = rng.lognormvariate(mu, sigma)
    return int(min(max(round(value), lo), hi))


class LengthModel:
    """Draws a :class:`LengthPlan` per request from a :class:`~harness.sim.presets.Preset`."""

    def __init__(self, preset: Preset, seed: int = 0) -> None:
        self.preset = preset
        self.seed = seed
        self._seen: dict[bytes, int] = {}

    def _rng(self, messages: list[Any], request_seed: int | None) -> random.Random:
        """Per-request RNG keyed on (server seed, messages, request seed or occurrence index)."""
        h = hashlib.blake2b(digest_size=16)
        for m in messages:
            if isinstance(m, dict):
                h.update(str(m.get("role", "")).encode())
                h.update(b"\x00")
                h.update(_content_text(m.get("content")).encode("utf-8", "surrogatepass"))
            h.update(b"\x01")
        key = h.digest()
        if request_seed is None:
            nth = self._seen.get(key, 0)
            self._seen[key] = nth + 1
            salt = f"n{nth}"
        else:
            salt = f"s{request_seed}"
        final = hashlib.blake2b(key + f"|{self.seed}|{salt}".encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(final, "big"))

    def natural(self, messages: list[Any], request_seed: int | None = None) -> tuple[PromptClass, int, int]:
        """Natural (uncapped) ``(class, reasoning_tokens, answer_tokens)`` for a request."""
        p = self.preset
        cls = classify(messages)
        rng = self._rng(messages, request_seed)
        if p.fixed_reasoning is not None or p.fixed_answer is not None:
            return cls, int(p.fixed_reasoning or 0), int(p.fixed_answer or 0)
        if cls is PromptClass.SHORT:
            return cls, rng.randint(5, 20), rng.randint(1, 3)
        factor = p.long_factor if cls is PromptClass.LONG else 1.0
        hi_r = p.reasoning_max if factor == 1.0 else int(p.reasoning_max * factor * 2)
        hi_a = p.answer_max if factor == 1.0 else int(p.answer_max * factor * 2)
        reasoning = _lognormal(rng, p.reasoning_mean * factor, p.reasoning_sigma, p.reasoning_min, hi_r)
        answer = _lognormal(rng, p.answer_mean * factor, p.answer_sigma, p.answer_min, hi_a)
        return cls, reasoning, answer

    def plan(
        self,
        messages: list[Any],
        max_tokens: int,
        *,
        thinking: bool = True,
        request_seed: int | None = None,
        ignore_eos: bool = False,
        min_tokens: int = 0,
        effort: str | None = None,
    ) -> LengthPlan:
        """Plan one request's output, capped at ``max_tokens`` tokens.

        ``thinking=False`` drops the reasoning phase. ``effort`` (a key of :data:`EFFORT_FACTORS`, None =
        ``medium``) scales the natural reasoning length by its factor (rounded, at least 1 token when there was
        any reasoning), before the cap; the answer length is unchanged. Raises ``KeyError`` for another effort.
        ``ignore_eos`` makes the output exactly
        ``max_tokens`` long (the answer is extended).  ``min_tokens`` extends the answer to at least
        that many completion tokens.
        """
        cls, reasoning, answer = self.natural(messages, request_seed)
        factor = EFFORT_FACTORS[effort] if effort is not None else 1.0
        if reasoning > 0 and factor != 1.0:
            reasoning = max(1, round(reasoning * factor))
        if not thinking:
            reasoning = 0
        if ignore_eos:
            answer = max(answer, max_tokens - reasoning)
        if min_tokens > reasoning + answer:
            answer = min_tokens - reasoning
        natural_r, natural_a = reasoning, answer
        if reasoning + answer > max_tokens:
            reasoning = min(reasoning, max_tokens)
            answer = max_tokens - reasoning
            finish = "length"
        else:
            finish = "stop"
        if ignore_eos and reasoning + answer == max_tokens:
            finish = "length"
        return LengthPlan(cls, reasoning, answer, finish, natural_r, natural_a)
