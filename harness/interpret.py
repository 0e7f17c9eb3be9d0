"""Chunk interpreter: SSE payloads with arrival times in, a classified :class:`RequestResult` out.

Pure: no sockets, no Locust, no clock reads (times are passed in, seconds since the request was sent).
This module *is* the metric definitions of the docs (:data:`harness.terms.TERMS`, rendered as
``docs/reference/metric-definitions.md``); change one there, change it here, and the stream-case tests in
``tests/test_interpret.py`` say whether the two still agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from orjson import JSONDecodeError as _JSONError
from orjson import loads as _loads

from harness.histogram import LogHistogram
from harness.result import SUCCESS_FINISH_REASONS, RequestResult
from harness.usable import UsableRule, usable_reason

__all__ = ["StreamInterpreter", "Transcript", "estimate_tokens"]

_DONE = b"[DONE]"


def estimate_tokens(text: str) -> int:
    """Client-side output-token estimate for servers that send no ``usage``: UTF-8 bytes / 4, rounded up.

    A deliberately simple, documented heuristic (≈ GPT-style BPE on English text); results using it are
    flagged ``token_source == "estimate"``. Empty text gives 0.
    """
    if not text:
        return 0
    return math.ceil(len(text.encode("utf-8")) / 4)


def _is_count(value: object) -> TypeGuard[int]:
    """True for a token count a server may send: a JSON integer >= 0 (not a bool, not a float, not negative).

    Anything else in ``usage`` is treated as absent (the estimate is used), so a record never holds -3 or
    ``true`` output tokens."""
    return type(value) is int and value >= 0


def _reasoning_text(delta: dict[str, Any]) -> str | None:
    """Reasoning text of one delta: first non-empty of reasoning_content, reasoning, reasoning_details[*].text.

    Never the sum: servers that send both keys (with the same text) must not be double-counted.
    """
    r = delta.get("reasoning_content") or delta.get("reasoning")
    if r:
        return r if isinstance(r, str) else None
    details = delta.get("reasoning_details")
    if details and isinstance(details, list):
        text = "".join(t for d in details if isinstance(d, dict) and isinstance(t := d.get("text"), str))
        return text or None
    return None


@dataclass
class Transcript:
    """The text of one streamed reply, kept only when the caller asks (a conversation carrying its answers).

    Attributes:
        answer: the answer (``content``) text pieces, in arrival order.
        reasoning: the reasoning text pieces, in arrival order.
    """

    answer: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)

    @property
    def answer_text(self) -> str:
        """The whole answer text."""
        return "".join(self.answer)

    @property
    def reasoning_text(self) -> str:
        """The whole reasoning text."""
        return "".join(self.reasoning)


class StreamInterpreter:
    """Accumulates one streamed chat completion, chunk by chunk.

    Call :meth:`on_payload` for every SSE data payload with its arrival time (seconds since the request was
    sent), then :meth:`finish` once the stream has ended (or failed) to fill a :class:`RequestResult`.

    Args:
        max_tokens: the request's ``max_tokens`` (for truncation), or None.
        keep_chunk_times: also keep every token-bearing chunk's arrival time (and per-chunk token counts when
            the server sends cumulative usage) in the result; large, off by default.
        usable: the profile's usable-sample rule (:class:`harness.usable.UsableRule`), or None (usable = ok and
            not truncated). Only when it has a text check is answer text kept, at most ``usable.buffer_chars``
            characters; otherwise the interpreter keeps counts only, never text.
        transcript: when given, every reasoning and answer text piece is appended to it (the whole reply, no
            bound: for multi-turn conversations, :mod:`harness.conversation`); never written to the records.
    """

    def __init__(
        self, max_tokens: int | None = None, keep_chunk_times: bool = False, usable: UsableRule | None = None,
        transcript: Transcript | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.transcript = transcript
        self.keep = keep_chunk_times
        self.ttft: float | None = None
        self.ttfat: float | None = None
        self.t_first_reasoning: float | None = None
        self.t_last: float | None = None
        self.chunks = 0
        self.reasoning_chunks = 0
        self.answer_chunks = 0
        self.gaps = LogHistogram()
        self.itl = LogHistogram()
        self.reasoning_chars = 0
        self.answer_chars = 0
        self.text_bytes = 0  # UTF-8 bytes of reasoning + answer text (the token estimate)
        self.usable_rule = usable
        #: answer text kept for the usable rule's text checks (None when it has none), and room left in it
        self.answer_buf: list[str] | None = [] if usable is not None and usable.needs_text else None
        self.answer_room = usable.buffer_chars if usable is not None else 0
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.cum_tokens: int | None = None  # cumulative completion_tokens from per-chunk usage
        self.cum_at_last_reasoning: int | None = None
        self.mixed_chunks = 0  # chunks carrying both reasoning text and answer text
        self.done_seen = False
        self.error_class: str | None = None
        self.error_detail: str | None = None
        self.error_code: str | None = None  # ``code`` of the first in-band error object, as text
        self.chunk_times: list[float] | None = [] if keep_chunk_times else None
        self.chunk_tokens: list[int] | None = [] if keep_chunk_times else None

    @property
    def answer_text(self) -> str | None:
        """The answer text kept for the usable rule's text checks (at most ``usable.buffer_chars`` characters),
        or None when the rule has no text check (then no text is kept)."""
        return None if self.answer_buf is None else "".join(self.answer_buf)

    # -- hot path ---------------------------------------------------------------------------------------
    def on_payload(self, t: float, payload: bytes) -> None:
        """Interpret one SSE data payload that completed at ``t`` seconds after the request was sent."""
        if payload == _DONE:
            self.done_seen = True
            return
        if not payload:
            return
        try:
            obj = _loads(payload)
        except _JSONError:
            obj = None
        if not isinstance(obj, dict):
            self._malformed(payload)
            return
        if obj.get("error") or obj.get("object") == "error":
            e = obj.get("error")
            err: dict[str, Any] = e if isinstance(e, dict) else obj
            if self.error_class in (None, "malformed_chunk"):
                code = err.get("code")
                self.error_class = "server_error_event"
                self.error_code = None if code is None else str(code)
                self.error_detail = f"code={code} type={err.get('type')} message={err.get('message')}"
            return
        usage = obj.get("usage")
        token_bearing = False
        is_reasoning = False
        choices = obj.get("choices")
        if choices:
            ch = choices[0] if isinstance(choices, list) else None
            delta = ch.get("delta") if isinstance(ch, dict) else None
            fr = ch.get("finish_reason") if isinstance(ch, dict) else None
            content = delta.get("content") if isinstance(delta, dict) else None
            if (
                not isinstance(ch, dict)
                or (delta and not isinstance(delta, dict))
                or (content and not isinstance(content, str))
                or (fr and not isinstance(fr, str))
            ):
                # JSON, but not a chunk: counting it would crash (len(5), 5.isascii()) or record a finish_reason
                # that is not text; nothing of it is used, as for a payload that is not JSON
                self._malformed(payload)
                return
            if delta:
                reasoning = _reasoning_text(delta)
                if reasoning:
                    is_reasoning = True
                    token_bearing = True
                    self.reasoning_chars += len(reasoning)
                    self.text_bytes += len(reasoning) if reasoning.isascii() else len(reasoning.encode("utf-8"))
                    self.reasoning_chunks += 1
                    if self.transcript is not None:
                        self.transcript.reasoning.append(reasoning)
                    if self.t_first_reasoning is None:
                        self.t_first_reasoning = t
                if content:
                    if reasoning:  # one chunk spans the end of reasoning: per-chunk usage cannot split it
                        self.mixed_chunks += 1
                    token_bearing = True
                    is_reasoning = False
                    self.answer_chars += len(content)
                    self.text_bytes += len(content) if content.isascii() else len(content.encode("utf-8"))
                    if self.answer_buf is not None and self.answer_room > 0:
                        part = content[: self.answer_room]
                        self.answer_buf.append(part)
                        self.answer_room -= len(part)
                    if self.transcript is not None:
                        self.transcript.answer.append(content)
                    self.answer_chunks += 1
                    if self.ttfat is None:
                        self.ttfat = t
                elif delta.get("tool_calls"):
                    token_bearing = True
                    is_reasoning = False
                    self.answer_chunks += 1
                    if self.ttfat is None:
                        self.ttfat = t
            if fr:
                self.finish_reason = fr
        n_tok = 0
        if usage and isinstance(usage, dict):
            self.usage = usage
            cum = usage.get("completion_tokens")
            if token_bearing and _is_count(cum):
                prev = self.cum_tokens or 0
                n_tok = cum - prev
                self.cum_tokens = cum
        if token_bearing:
            if self.ttft is None:
                self.ttft = t
            else:
                gap = t - self.t_last  # type: ignore[operator]
                self.gaps.add(gap)
                if n_tok > 0:
                    self.itl.add(gap / n_tok)
            self.t_last = t
            self.chunks += 1
            if is_reasoning and self.cum_tokens is not None:
                self.cum_at_last_reasoning = self.cum_tokens
            if self.keep:
                self.chunk_times.append(t)  # type: ignore[union-attr]
                self.chunk_tokens.append(n_tok)  # type: ignore[union-attr]

    def _malformed(self, payload: bytes) -> None:
        """Record a data payload that is not a chat-completion chunk (error class ``malformed_chunk`` unless an
        error is already recorded; the detail is its first 200 bytes)."""
        if self.error_class is None:
            self.error_class = "malformed_chunk"
            self.error_detail = payload[:200].decode("utf-8", "replace")

    # -- end of stream ------------------------------------------------------------------------------------
    def finish(
        self,
        result: RequestResult,
        e2e: float,
        transport_error: str | None = None,
        transport_detail: str | None = None,
        error_field: str | None = None,
        comments: int = 0,
    ) -> RequestResult:
        """Fill ``result`` from what was seen and classify the outcome.

        Args:
            result: the result to fill (identity, timing of headers and HTTP status already set).
            e2e: seconds from request sent to the last byte (or to the failure).
            transport_error: an error class from the transport (a timeout, ``stream_truncated`` for a body cut
                short, ``protocol_error``), or None when the body ended cleanly.
            transport_detail: human-readable detail for that error.
            error_field: the value of a non-standard SSE ``error:`` field, if the decoder saw one.
            comments: number of SSE comment lines seen.

        Returns:
            ``result``, for chaining.
        """
        r = result
        r.e2e = e2e
        r.ttft, r.ttfat, r.t_first_reasoning, r.t_last_token = (
            self.ttft,
            self.ttfat,
            self.t_first_reasoning,
            self.t_last,
        )
        r.chunks, r.reasoning_chunks, r.answer_chunks = self.chunks, self.reasoning_chunks, self.answer_chunks
        r.sse_comments = comments
        r.gap_hist = self.gaps.to_json() if self.gaps.n else None
        r.itl_hist = self.itl.to_json() if self.itl.n else None
        r.chunk_times, r.chunk_tokens = self.chunk_times, self.chunk_tokens
        r.finish_reason = self.finish_reason
        r.done_seen = self.done_seen
        r.reasoning_chars, r.answer_chars = self.reasoning_chars, self.answer_chars

        # -- tokens
        est = math.ceil(self.text_bytes / 4)  # = estimate_tokens(reasoning text + answer text)
        r.estimated_output_tokens = est
        usage = self.usage or {}
        completion = usage.get("completion_tokens")
        if _is_count(completion):
            r.output_tokens, r.token_source = completion, "usage"
        else:
            r.output_tokens, r.token_source = est, "estimate"
        pt = usage.get("prompt_tokens")
        r.prompt_tokens = pt if _is_count(pt) else None
        prompt_details = usage.get("prompt_tokens_details")
        cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
        r.cached_tokens = cached if isinstance(cached, int) and not isinstance(cached, bool) else None
        details = usage.get("completion_tokens_details") or {}
        rt = details.get("reasoning_tokens") if isinstance(details, dict) else None
        if _is_count(rt) and 0 < rt <= r.output_tokens:
            r.reasoning_tokens, r.reasoning_source = rt, "usage"
        elif self.reasoning_chunks == 0:
            r.reasoning_tokens, r.reasoning_source = 0, "none"
        elif self.cum_at_last_reasoning is not None and r.token_source == "usage" and not self.mixed_chunks:
            r.reasoning_tokens, r.reasoning_source = min(self.cum_at_last_reasoning, r.output_tokens), "chunk_usage"
        else:
            # Share of token-bearing chunks, not of text: one server streams both phases with the same
            # tokens-per-chunk, while characters per token differ between prose, code and numbers.
            share = self.reasoning_chunks / max(1, self.reasoning_chunks + self.answer_chunks)
            r.reasoning_tokens, r.reasoning_source = round(r.output_tokens * share), "estimate"
        r.answer_tokens = max(0, r.output_tokens - r.reasoning_tokens)

        # -- outcome
        status_ok = r.http_status is not None and 200 <= r.http_status < 300
        err: str | None = None
        detail: str | None = None
        if r.http_status is None:  # failed before a response head: connect error or a timeout
            err = r.error_class or transport_error or "protocol_error"
            detail = r.error_detail or transport_detail
        elif not status_ok:
            err = r.error_class or "http_other"
            detail = r.error_detail
        elif self.error_class == "server_error_event":
            err, detail = self.error_class, self.error_detail
        elif transport_error is not None:
            err, detail = transport_error, transport_detail
        elif self.error_class is not None:
            err, detail = self.error_class, self.error_detail
        elif self.finish_reason is None:
            if self.done_seen:
                err = "no_finish_reason"
                detail = f"sse error field: {error_field}" if error_field else "stream ended without finish_reason"
            else:
                err = "stream_truncated"
                detail = "stream ended with neither finish_reason nor [DONE]"
                if error_field:
                    detail += f"; sse error field: {error_field}"
        elif self.finish_reason not in SUCCESS_FINISH_REASONS:
            err, detail = "aborted", f"finish_reason={self.finish_reason}"
        r.ok = err is None
        r.error_class, r.error_detail = err, detail
        r.error_code = self.error_code

        mt = self.max_tokens
        hit_cap = mt is not None and r.token_source == "usage" and r.output_tokens >= mt
        r.truncated = self.finish_reason == "length" or hit_cap
        r.suspect_truncation = hit_cap and self.finish_reason != "length"
        r.truncated_in_reasoning = r.truncated and self.answer_chunks == 0
        r.usable_reason = usable_reason(self.usable_rule, r.ok, r.truncated, r.answer_tokens, self.answer_text)
        r.usable = r.usable_reason is None

        # -- rates: over what was streamed. Hidden reasoning (counted in usage, never streamed) was generated
        # before the first visible chunk, so the per-token figures count only the answer tokens after it.
        r.hidden_reasoning = r.reasoning_source == "usage" and r.reasoning_tokens > 0 and self.reasoning_chunks == 0
        streamed = r.answer_tokens if r.hidden_reasoning else r.output_tokens
        if self.chunks >= 2 and streamed > 1 and self.ttft is not None and self.t_last is not None:
            r.tpot = (self.t_last - self.ttft) / (streamed - 1)
        if self.ttft is not None and e2e > self.ttft and streamed > 0:
            r.decode_rate = streamed / (e2e - self.ttft)
        if self.t_first_reasoning is not None and r.reasoning_tokens > 0:
            end = self.ttfat if self.ttfat is not None else e2e
            if end > self.t_first_reasoning:
                r.reasoning_rate = r.reasoning_tokens / (end - self.t_first_reasoning)
        if self.ttfat is not None and r.answer_tokens > 0 and e2e > self.ttfat:
            r.answer_rate = r.answer_tokens / (e2e - self.ttfat)
        return r
