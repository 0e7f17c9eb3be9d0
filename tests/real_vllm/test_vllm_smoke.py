"""Smoke tests of a real vLLM server (CPU build) serving the scripted model; stdlib HTTP only.

They pin down what vLLM 0.32.0 really streams, because the harness must parse exactly that:

* the first chunk is role-only (``{"role": "assistant", "content": ""}``, cumulative usage 0): not a token;
* reasoning text arrives in ``delta.reasoning`` (no ``reasoning_content`` key at all);
* usually one chunk per token, but **chunks are not tokens**: when the API server falls behind (CPU
  contention) vLLM merges several tokens into one delta (seen: 7 tokens in one chunk, 234 reasoning chunks
  for K = 240, and deltas holding both ``reasoning`` and ``content``). Chunks never split a token, and with
  ``continuous_usage_stats`` each chunk's cumulative ``completion_tokens`` accounts for every token in it;
* the ``</think>`` token gets no chunk of its own: it is counted in the usage of the first chunk with answer
  text (cumulative K + 2 when nothing was merged);
* the EOS token gets the final choice chunk, ``delta == {"content": ""}`` with ``finish_reason``;
* the usage-only chunk has ``choices: []``; ``usage.completion_tokens`` is K + M + 2 (``</think>`` and
  EOS included) while ``completion_tokens_details.reasoning_tokens`` stays 0, in every chunk.

Measured values are printed (``pytest -s``) and attached with ``record_property``.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.real_vllm

#: Seconds allowed for one request.
REQUEST_TIMEOUT = 120.0


@dataclass
class StreamResult:
    """One streamed chat completion, parsed.

    Attributes:
        chunks: every ``data:`` JSON object, in order (``[DONE]`` excluded).
        arrival: ``time.monotonic()`` seconds at which each chunk of ``chunks`` was read.
        done: whether ``data: [DONE]`` arrived.
        started: ``time.monotonic()`` seconds just before sending the request.
        finished: ``time.monotonic()`` seconds after the stream ended.
    """

    chunks: list[dict[str, Any]] = field(default_factory=list)
    arrival: list[float] = field(default_factory=list)
    done: bool = False
    started: float = 0.0
    finished: float = 0.0

    @property
    def duration(self) -> float:
        """Seconds from sending the request to the end of the stream."""
        return self.finished - self.started

    def deltas(self, key: str) -> list[tuple[int, str]]:
        """Return ``(chunk index, text)`` for each chunk whose first choice's delta has non-empty ``key``."""
        out: list[tuple[int, str]] = []
        for i, chunk in enumerate(self.chunks):
            choices = chunk.get("choices") or []
            if choices:
                text = (choices[0].get("delta") or {}).get(key)
                if text:
                    out.append((i, text))
        return out

    def has_key(self, key: str) -> bool:
        """Whether any delta carries ``key`` at all (even empty or null)."""
        return any(key in (c.get("delta") or {}) for ch in self.chunks for c in ch.get("choices") or [])

    @property
    def finish_reason(self) -> str | None:
        """The last non-null ``finish_reason`` seen."""
        reason: str | None = None
        for chunk in self.chunks:
            for choice in chunk.get("choices") or []:
                if choice.get("finish_reason") is not None:
                    reason = choice["finish_reason"]
        return reason

    @property
    def final_usage(self) -> dict[str, Any]:
        """``usage`` of the usage-only chunk (``choices == []``), or ``{}``."""
        for chunk in reversed(self.chunks):
            if not chunk.get("choices") and chunk.get("usage"):
                usage: dict[str, Any] = chunk["usage"]
                return usage
        return {}

    @property
    def ttft(self) -> float:
        """Seconds from sending the request to the first chunk carrying reasoning or content text."""
        for i, chunk in enumerate(self.chunks):
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("reasoning") or delta.get("content") or delta.get("reasoning_content"):
                    return self.arrival[i] - self.started
        return float("nan")


def stream_chat(base_url: str, model: str, max_tokens: int | None = None, prompt: str = "Hello") -> StreamResult:
    """POST one streaming ``/v1/chat/completions`` request with continuous usage stats; parse the SSE."""
    url = urlsplit(base_url)
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    result = StreamResult()
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=REQUEST_TIMEOUT)
    try:
        result.started = time.monotonic()
        conn.request(
            "POST",
            "/v1/chat/completions",
            body=json.dumps(body),
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        resp = conn.getresponse()
        if resp.status != 200:
            raise AssertionError(f"HTTP {resp.status}: {resp.read()[:2000]!r}")
        while True:
            raw = resp.readline()
            if not raw:
                break
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue
            data = line[len("data:") :].strip()
            if data == "[DONE]":
                result.done = True
                break
            result.chunks.append(json.loads(data))
            result.arrival.append(time.monotonic())
        result.finished = time.monotonic()
    finally:
        conn.close()
    return result


def report(record_property: Any, name: str, value: object) -> None:
    """Print a measured value and attach it to the test report (junit ``property``)."""
    print(f"[measured] {name} = {value}")
    record_property(name, value)


@dataclass(frozen=True)
class ChunkTokens:
    """Token accounting of one choice chunk.

    Attributes:
        index: position of the chunk in :attr:`StreamResult.chunks`.
        usage_delta: completion tokens added since the previous chunk (continuous usage stats).
        reasoning: reasoning tokens whose text is in this chunk's ``delta.reasoning``.
        content: answer tokens whose text is in this chunk's ``delta.content``.
        finish_reason: the chunk's ``finish_reason`` (None on all but the last choice chunk).
    """

    index: int
    usage_delta: int
    reasoning: int
    content: int
    finish_reason: str | None

    @property
    def hidden(self) -> int:
        """Tokens counted in this chunk's usage without text in it (``</think>``, EOS)."""
        return self.usage_delta - self.reasoning - self.content


def _consume(text: str, pieces: tuple[str, ...], start: int) -> int:
    """Return how many whole token texts ``pieces[start:]`` make up ``text`` exactly (raises otherwise)."""
    pos = n = 0
    while pos < len(text):
        assert start + n < len(pieces), f"more text than tokens: {text[pos:]!r}"
        piece = pieces[start + n]
        assert text.startswith(piece, pos), f"chunk text {text!r} does not continue with token {piece!r}"
        pos += len(piece)
        n += 1
    return n


def account(res: StreamResult, reasoning_pieces: tuple[str, ...], answer_pieces: tuple[str, ...]) -> list[ChunkTokens]:
    """Count the scripted tokens in each choice chunk; check chunks hold whole tokens, in script order."""
    out: list[ChunkTokens] = []
    r = a = prev = 0
    for i, chunk in enumerate(res.chunks):
        choices = chunk.get("choices") or []
        if not choices:
            continue
        cum = int(chunk["usage"]["completion_tokens"])
        delta = choices[0].get("delta") or {}
        nr = _consume(delta.get("reasoning") or "", reasoning_pieces, r)
        nc = _consume(delta.get("content") or "", answer_pieces, a)
        assert nr == 0 or a == 0, "reasoning text after answer text"
        out.append(ChunkTokens(i, cum - prev, nr, nc, choices[0].get("finish_reason")))
        r, a, prev = r + nr, a + nc, cum
    return out


def check_accounting(acc: list[ChunkTokens], k: int, m: int, stopped: bool = True) -> None:
    """Assert that the chunks' cumulative usage accounts for every token exactly once.

    K reasoning and M answer tokens carry text. The only tokens without text are ``</think>`` (counted
    either in the chunk holding the last reasoning token, when vLLM merged them, or else in the first
    chunk with answer text) and, if ``stopped``, EOS (counted in the chunk with ``finish_reason``).
    """
    assert sum(c.reasoning for c in acc) == k
    assert sum(c.content for c in acc) == m
    assert all(c.hidden >= 0 for c in acc), acc
    if not stopped:
        assert all(c.hidden == 0 for c in acc), [c for c in acc if c.hidden]
        return
    assert sum(c.hidden for c in acc) == 2, [c for c in acc if c.hidden]
    last_reasoning = max(c.index for c in acc if c.reasoning)
    first_content = min(c.index for c in acc if c.content)
    finish = [c.index for c in acc if c.finish_reason is not None]
    allowed = {last_reasoning, first_content, *finish}
    assert all(c.index in allowed for c in acc if c.hidden), [c for c in acc if c.hidden]
    assert sum(c.hidden for c in acc if c.index in finish) >= 1, "EOS is counted with the finish chunk"


def test_stream_reasoning_then_answer(vllm_server: Any, record_property: Any) -> None:
    """One full reply: the scripted reasoning and answer, ``stop``, and vLLM's token accounting.

    Exact chunk-per-token layout is asserted when vLLM merged nothing (tried up to 3 times); the token
    accounting, texts and usage are asserted always.
    """
    k, m = vllm_server.reasoning, vllm_server.answer
    report(record_property, "server_startup_seconds", round(vllm_server.startup_seconds, 2))
    report(record_property, "server_warmup_seconds", round(vllm_server.warmup_seconds, 2))
    merged_attempts = 0
    for _attempt in range(3):
        res = stream_chat(vllm_server.base_url, vllm_server.model)
        acc = account(res, vllm_server.reasoning_pieces, vllm_server.answer_pieces)
        merged = sum(1 for c in acc if c.reasoning + c.content > 1)
        if merged == 0:
            break
        merged_attempts += 1
    reasoning = res.deltas("reasoning")
    content = res.deltas("content")
    report(record_property, "attempts_with_merged_chunks", merged_attempts)
    report(record_property, "merged_chunks", merged)
    report(record_property, "chunks_total", len(res.chunks))
    report(record_property, "reasoning_chunks", len(reasoning))
    report(record_property, "content_chunks", len(content))
    report(record_property, "reasoning_content_key_present", res.has_key("reasoning_content"))
    report(record_property, "single_request_seconds", round(res.duration, 3))
    report(record_property, "ttft_seconds", round(res.ttft, 4))

    assert res.done, "stream did not end with data: [DONE]"
    # The first chunk is role-only: an empty content string, not a token.
    assert res.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert res.chunks[0]["usage"]["completion_tokens"] == 0
    # Reasoning in delta.reasoning (renamed from reasoning_content, which 0.32.0 does not send at all).
    assert not res.has_key("reasoning_content")
    assert "".join(t for _, t in reasoning) == vllm_server.expected_reasoning
    assert "".join(t for _, t in content) == vllm_server.expected_answer
    assert reasoning[-1][0] <= content[0][0], "answer text began before the reasoning ended"

    # Every token is accounted for by exactly one chunk's cumulative usage step.
    check_accounting(acc, k, m)
    assert sum(c.usage_delta for c in acc) == k + m + 2
    assert len(reasoning) <= k and len(content) <= m

    finish = res.chunks[-2]["choices"][0]
    assert finish["finish_reason"] == "stop"
    assert res.finish_reason == "stop"
    assert res.chunks[-1]["choices"] == [], "the usage chunk has no choices"

    usage = res.final_usage
    details = usage.get("completion_tokens_details") or {}
    report(record_property, "usage_completion_tokens", usage.get("completion_tokens"))
    report(record_property, "usage_prompt_tokens", usage.get("prompt_tokens"))
    report(record_property, "usage_reasoning_tokens", details.get("reasoning_tokens"))
    # </think> and EOS are generated tokens too.
    assert usage["completion_tokens"] == k + m + 2
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # vLLM does not fill this in although K tokens were reasoning: never trust a zero here.
    assert details.get("reasoning_tokens") == 0
    assert all(
        (c.get("usage") or {}).get("completion_tokens_details", {}).get("reasoning_tokens") == 0 for c in res.chunks
    )

    at_last_reasoning = res.chunks[reasoning[-1][0]]["usage"]["completion_tokens"]
    at_first_content = res.chunks[content[0][0]]["usage"]["completion_tokens"]
    at_finish = res.chunks[-2]["usage"]["completion_tokens"]
    report(record_property, "cumulative_completion_tokens_at_last_reasoning_chunk", at_last_reasoning)
    report(record_property, "cumulative_completion_tokens_at_first_content_chunk", at_first_content)
    report(record_property, "cumulative_completion_tokens_at_finish_chunk", at_finish)
    report(record_property, "finish_chunk_delta", finish["delta"])
    assert at_finish == k + m + 2
    if merged == 0:
        # Nothing merged: role chunk, K reasoning chunks, M answer chunks, EOS chunk, usage chunk.
        assert len(reasoning) == k and len(content) == m
        assert len(res.chunks) == 1 + k + m + 1 + 1
        assert at_last_reasoning == k
        assert at_first_content == k + 2, "</think> is counted with the first answer chunk"
        assert finish["delta"] == {"content": ""}, "EOS comes as an empty final delta"


def test_max_tokens_below_reasoning_ends_with_length(vllm_server: Any, record_property: Any) -> None:
    """``max_tokens`` < K: the reply is cut inside the reasoning, ``finish_reason == "length"``."""
    limit = vllm_server.reasoning // 2
    res = stream_chat(vllm_server.base_url, vllm_server.model, max_tokens=limit)
    assert res.done
    assert res.finish_reason == "length"
    assert res.deltas("content") == []
    reasoning = res.deltas("reasoning")
    report(record_property, "length_reasoning_chunks", len(reasoning))
    report(record_property, "length_completion_tokens", res.final_usage.get("completion_tokens"))
    assert "".join(t for _, t in reasoning) == "".join(vllm_server.reasoning_pieces[:limit])
    check_accounting(account(res, vllm_server.reasoning_pieces[:limit], ()), limit, 0, stopped=False)
    assert len(reasoning) <= limit
    assert res.final_usage["completion_tokens"] == limit


# Throughput rising with concurrency is checked through the harness itself, in steady state
# (tests/real_vllm/test_locust_vllm.py): a burst of 4 stdlib clients sharing a core with the API server
# was too noisy.
