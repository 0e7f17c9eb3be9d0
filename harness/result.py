"""The one result type of a streamed request, and the record (JSON line) written for it.

Every figure the harness reports (Locust's table, the records, the per-step report) is derived from
:class:`RequestResult`. Definitions follow the README's "Metric definitions" section, which is the single
source for what each field means. All durations are seconds on the client's monotonic clock
(``time.perf_counter``), measured from the moment the request bytes were handed to the socket ("request
sent"); ``start_wall`` is the wall-clock epoch time of that moment, used only to place a request on a
timeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["ERROR_CLASSES", "RequestResult"]

#: Every error class a failed request can carry, with its meaning.
ERROR_CLASSES: dict[str, str] = {
    "connect_error": "TCP/TLS connection refused, reset or failed before the request was sent",
    "timeout_connect": "connecting took longer than timeouts.connect",
    "timeout_first_byte": "no response status line within timeouts.first_byte of the request being sent",
    "timeout_first_token": "no token-bearing chunk within timeouts.first_token of the request being sent",
    "timeout_idle": "a gap between token-bearing chunks exceeded timeouts.idle",
    "timeout_total": "the request exceeded timeouts.total end to end",
    "http_429": "HTTP 429 Too Many Requests",
    "http_4xx": "HTTP 4xx other than 429",
    "http_5xx": "HTTP 5xx",
    "http_other": "HTTP status outside 2xx/4xx/5xx",
    "not_sse": "HTTP 2xx but the body was not an event stream",
    "server_error_event": "an in-band error object arrived inside the stream",
    "malformed_chunk": "a data event that is not valid JSON",
    "aborted": "the stream ended with finish_reason 'abort' (or another non-OpenAI terminal reason)",
    "stream_truncated": "the connection closed mid-stream with no finish_reason",
    "no_finish_reason": "the stream ended cleanly but never carried a finish_reason",
    "protocol_error": "malformed HTTP framing from the server",
}

#: finish_reason values that end a request successfully.
SUCCESS_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "eos"})


@dataclass(slots=True)
class RequestResult:
    """Everything measured about one request. Seconds unless the name says otherwise.

    Identity and context:
        prompt_id: the profile's prompt id; prompt_class: its class (``class`` in the profile, else the id;
        None for warm-up); user: id of the Locust user that sent it (unique in the run);
        phase: "warmup" | "single" | "step"; step: step index (0 for the single-stream phase, 1.. for the load
        steps, -1 for warm-up); concurrency: the target concurrency of that step; max_tokens: the request's cap
        (None when unset).
    Timings (None when the event never happened):
        t_headers: request sent -> arrival of the response status line and headers (kernel receive time when
            stamped, else the time they were read).
        ttft: request sent -> first token-bearing chunk of any channel (reasoning included).
        ttfat: request sent -> first chunk with non-empty ``content`` (time to first answer token).
        t_first_reasoning: request sent -> first chunk with reasoning text.
        t_last_token: request sent -> last token-bearing chunk.
        e2e: request sent -> last byte of the stream (or the moment the request failed).
        connect: seconds spent opening a new connection before sending (0.0 on a reused connection).
        time_source: "kernel" when every body read carried the kernel's receive time (Linux, plain HTTP), else
            "read" (the time this process read the bytes).
        read_lag_max: client read lag, the largest over the response's reads of (wall time this process read
            the bytes - the kernel's receive time of those bytes), seconds; None without kernel stamps. A few
            ms on a healthy client; tenths of a second mean the load generator was starved of CPU (chunk arrivals stay
            kernel-stamped, but it starts requests late, so throughput is then the client's, not the server's, and
            latencies include client delays).
    Chunks: token-bearing chunk counts (total, with reasoning text, with answer text) and a
        :class:`~harness.histogram.LogHistogram` of the gaps between consecutive token-bearing chunks
        (``gap_hist``, JSON form); ``itl_hist`` holds per-token ITL (gap / tokens in the later chunk) when the
        server sent cumulative per-chunk usage.
    Tokens: output_tokens (``usage.completion_tokens`` when sent, else a client estimate), token_source
        ("usage" | "estimate"), reasoning_tokens / answer_tokens and reasoning_source ("usage" |
        "chunk_usage" | "estimate" | "none"), prompt_tokens (usage, or None).
    Outcome: ok (success per the README), error_class (a key of :data:`ERROR_CLASSES`) and error_detail,
        http_status, finish_reason, truncated, truncated_in_reasoning, suspect_truncation (server said
        stop but output == max_tokens), usable (ok and not truncated).
    """

    prompt_id: str
    prompt_class: str | None = None
    user: str = ""
    phase: str = "step"
    step: int = 0
    concurrency: int = 1
    max_tokens: int | None = None
    start_wall: float = 0.0
    # timings, seconds from request sent
    connect: float = 0.0
    time_source: str = "read"
    read_lag_max: float | None = None
    t_headers: float | None = None
    ttft: float | None = None
    ttfat: float | None = None
    t_first_reasoning: float | None = None
    t_last_token: float | None = None
    e2e: float | None = None
    # chunks
    chunks: int = 0
    reasoning_chunks: int = 0
    answer_chunks: int = 0
    sse_comments: int = 0
    gap_hist: dict[str, Any] | None = None
    itl_hist: dict[str, Any] | None = None
    chunk_times: list[float] | None = None
    chunk_tokens: list[int] | None = None
    # tokens
    output_tokens: int = 0
    token_source: str = "estimate"
    estimated_output_tokens: int = 0
    reasoning_tokens: int = 0
    answer_tokens: int = 0
    reasoning_source: str = "none"
    prompt_tokens: int | None = None
    reasoning_chars: int = 0
    answer_chars: int = 0
    # outcome
    ok: bool = False
    error_class: str | None = None
    error_detail: str | None = None
    # seconds the response's Retry-After header asked to wait (delta-seconds, or an HTTP-date as seconds from its
    # receipt; a past date gives 0.0); None when absent or unparseable
    retry_after_s: float | None = None
    # the ``code`` of an in-band error object in the stream (``{"error": {"code": ...}}``), as text; None when no
    # such object arrived or it had no code
    error_code: str | None = None
    http_status: int | None = None
    finish_reason: str | None = None
    done_seen: bool = False
    truncated: bool = False
    truncated_in_reasoning: bool = False
    suspect_truncation: bool = False
    usable: bool = False
    # derived rates (tokens per second), None when undefined
    tpot: float | None = None
    decode_rate: float | None = None
    reasoning_rate: float | None = None
    answer_rate: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready dict written as one line of ``records.jsonl`` (no prompt or output text)."""
        d = asdict(self)
        if not d["extra"]:
            del d["extra"]
        for k in ("chunk_times", "chunk_tokens", "itl_hist"):
            if d[k] is None:
                del d[k]
        return d
