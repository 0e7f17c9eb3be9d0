"""The one result type of a streamed request, and the record (JSON line) written and read back for it.

Every figure the harness reports (Locust's table, the records, the per-step report, the Prometheus metrics) is
derived from :class:`RequestResult`: the client fills it, :meth:`RequestResult.to_record` writes it as one line of
``records.jsonl`` and :meth:`RequestResult.from_record` is the only way any reader turns such a line back into
values. Definitions follow the docs' "Metric definitions" (``docs/reference/metric-definitions.md``), the single
source for what each measurement means. All durations are seconds on the client's monotonic clock
(``time.perf_counter``), measured from the moment the request bytes were handed to the socket ("request sent");
``start_wall`` is the wall-clock epoch time of that moment, used only to place a request on a timeline.

The record schema (every field's name, type, unit, nullability and meaning) is defined once, by the dataclass
fields of :class:`RequestResult` and their metadata (:func:`_doc`); :data:`RECORD_FIELDS` and
``docs/records.md`` (``python -m harness.result --markdown``) are generated from it. Adding a record field is one
declaration in :class:`RequestResult` (a default and ``metadata=_doc(unit, meaning)``); writer, reader and
documentation follow.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from harness.vocab import RESERVED_PROMPT_LABELS

__all__ = [
    "CHUNK_ANCHORS",
    "CHUNK_TIME_UNIT_S",
    "ERROR_CLASSES",
    "FINISH_REASONS",
    "READABLE_SCHEMAS",
    "RECORD_FIELDS",
    "RECORD_SCHEMA",
    "RESERVED_PROMPT_LABELS",
    "SUCCESS_FINISH_REASONS",
    "RecordField",
    "RequestIdentity",
    "RequestResult",
    "decode_chunks",
    "encode_chunks",
    "main",
    "records_markdown",
]

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
    "malformed_chunk": (
        "a data event that is not valid JSON, or not a chunk object (e.g. `choices` not a list of objects)"
    ),
    "aborted": "the stream ended with finish_reason 'abort' (or another non-OpenAI terminal reason)",
    "stream_truncated": "the connection closed mid-stream with no finish_reason",
    "no_finish_reason": "the stream ended cleanly but never carried a finish_reason",
    "protocol_error": (
        "malformed HTTP framing from the server, or an SSE line or event longer than harness.sse.MAX_LINE_BYTES"
    ),
}

#: finish_reason values that end a request successfully.
SUCCESS_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "eos"})
#: Every finish_reason value the harness knows: the successes plus ``abort`` (vLLM's aborted request, a failure,
#: error class ``aborted``). Anything else is a non-OpenAI value (also ``aborted``; ``other`` in the metrics).
FINISH_REASONS = SUCCESS_FINISH_REASONS | {"abort"}


#: Layout version written in every record's ``schema`` field. 1 = records without the field (the layout before
#: it existed: the same fields, no ``schema``); 2 = the same with ``schema``, ``chunk_times`` as float seconds and
#: ``chunk_tokens`` one count per chunk; 3 = this one: ``chunk_times`` as integer microsecond deltas and
#: ``chunk_tokens`` as one value when every chunk has the same count (:func:`encode_chunks`).
RECORD_SCHEMA = 3
#: Record schema versions :meth:`RequestResult.from_record` reads.
READABLE_SCHEMAS = frozenset({1, 2, 3})
#: Seconds per unit of a schema-3 ``chunk_times`` delta (1 µs). A time is decoded as ``(sum of deltas) * 1e-6``
#: (a float multiply, as the columnar reader does it) and is within 0.5 µs (plus one float rounding) of the time
#: measured.
CHUNK_TIME_UNIT_S = 1e-6


def encode_chunks(times: Sequence[float], tokens: Sequence[int] | None) -> tuple[list[int], list[int] | None]:
    """The schema-3 (compact) record form of a request's chunk arrival times and per-chunk token counts.

    ``times`` (seconds from request sent, non-decreasing) become integer microsecond deltas: element 0 is the first
    time in µs, element ``i`` the i-th time in µs minus the (i-1)-th, each time rounded to the nearest µs first
    (so rounding never accumulates: decoded times are within 0.5 µs of the measured ones). ``tokens`` (one count
    per chunk) become ``[v]`` when there are at least two chunks and every count is ``v`` (the usual case: one
    token per chunk, or 0 without per-chunk usage), else are kept as they are. Inverse: :func:`decode_chunks`.
    """
    us = [round(t * 1e6) for t in times]
    deltas = [b - a for a, b in zip([0, *us[:-1]], us, strict=True)]
    toks = list(tokens) if tokens is not None else None
    if toks is not None and len(toks) >= 2 and len(toks) == len(us) and all(v == toks[0] for v in toks):
        toks = toks[:1]
    return deltas, toks


#: The record timings a compact chunk time is anchored to (:func:`decode_chunks`), in the order applied.
CHUNK_ANCHORS: tuple[str, ...] = ("ttft", "t_last_token", "ttfat")


def decode_chunks(deltas: Sequence[int | float], tokens: Sequence[int] | None,
                  anchors: Sequence[float | None] = ()) -> tuple[list[float], list[int] | None]:
    """The chunk times (seconds from request sent) and per-chunk token counts of a schema-3 record's
    ``chunk_times`` / ``chunk_tokens`` (:func:`encode_chunks`): running sums of the µs deltas times
    :data:`CHUNK_TIME_UNIT_S`, and a one-element ``tokens`` repeated once per chunk when there are two or more.

    ``anchors``: the record's :data:`CHUNK_ANCHORS` timings (s; None when absent). A chunk whose µs equals an
    anchor's rounded to the µs reads back as that timing itself (a later anchor wins), so the first chunk is
    exactly ``ttft``, the last exactly ``t_last_token`` and the first answer chunk exactly ``ttfat``, as measured:
    the report compares chunk times with ``ttfat`` (reasoning or answer) and with window edges that are request
    ends, and rounding must not move those chunks across. The float operations are those of the columnar reader
    (``harness.report.frame``), so both read the same values.
    """
    pins = [(round(a * 1e6), a) for a in anchors if a is not None]
    times: list[float] = []
    acc = 0.0
    for d in deltas:
        acc += d
        t = acc * CHUNK_TIME_UNIT_S
        for us, a in pins:
            if acc == us:
                t = t + (a - t)
        times.append(t)
    toks = list(tokens) if tokens is not None else None
    if toks is not None and len(toks) == 1 and len(times) >= 2:
        toks = toks * len(times)
    return times, toks


def _doc(unit: str, meaning: str, *, omit_empty: bool = False) -> dict[str, Any]:
    """Field metadata of one record field: its unit ("" when none), one-line meaning, and whether the writer
    leaves it out of the record when it is None or empty."""
    return {"unit": unit, "doc": meaning, "omit_empty": omit_empty}


@dataclass(frozen=True, slots=True)
class RequestIdentity:
    """Who sent a request and when in the run: built once by the caller, handed to ``ChatClient.stream_chat``.

    The same names, types and meanings as the :class:`RequestResult` fields of the same names (see
    ``docs/records.md``; ``tests/test_result.py`` checks they agree), so a result is created with its whole identity
    (:meth:`RequestResult.for_request`), nothing patched on after the request, and the record stays flat. The
    request's ``max_tokens`` is not part of it: it is a property of the request body, which the client reads (for
    the record and to detect truncation), so it has one source.

    Attributes:
        prompt_id: the profile's prompt id (``warmup`` for the warm-up request).
        prompt_class: the prompt's class (``class`` in the profile, else its id); None for the warm-up.
        user: id of the Locust user that sent it, unique in the run (``warmup`` for the warm-up).
        phase: ``warmup`` | ``single`` | ``step``, the phase the request started in.
        step: step index: -1 warm-up, 0 single stream, 1.. load steps.
        concurrency: target concurrency (users) of that step.
        setting: the sweep-axes setting's label it is sent with (:attr:`harness.axes.Setting.label`); None without
            ``axes:``.
        conversation: id of the conversation it is a turn of (``<user>/<n>``); None for single requests.
        turn: 0-based index of its turn in that conversation; None for single requests.
        scheduled_wall: rate mode: epoch seconds the arrival schedule said to send it; None in closed-loop phases.
    """

    prompt_id: str
    prompt_class: str | None = None
    user: str = ""
    phase: str = "step"
    step: int = 0
    concurrency: int = 1
    setting: str | None = None
    conversation: str | None = None
    turn: int | None = None
    scheduled_wall: float | None = None


@dataclass(slots=True)
class RequestResult:
    """Everything measured about one request; one record of ``records.jsonl``. Seconds unless the unit says
    otherwise; a timing is None when its event never happened.

    The fields (with unit and meaning in their metadata, rendered as ``docs/records.md``) are, in record order:
    identity (:class:`RequestIdentity`'s first fields), ``max_tokens``, the sweep setting and conversation turn
    (``setting``, ``conversation``, ``turn``: also the identity's), ``start_wall``, ``scheduled_wall`` (the
    identity's),
    timings, chunk counts and histograms, token counts, outcome, derived rates and ``extra``.

    Create one with :meth:`for_request` (the client does, with the caller's identity); write it with
    :meth:`to_record`; read a record back with :meth:`from_record`.
    """

    # identity: RequestIdentity's first six fields, in its order, then the request body's output cap
    prompt_id: str = field(metadata=_doc("", "the profile's prompt id (`warmup` for the warm-up request)"))
    prompt_class: str | None = field(
        default=None,
        metadata=_doc("", "the prompt's class (`class` in the profile, else its id); null for the warm-up"),
    )
    user: str = field(
        default="",
        metadata=_doc("", "id of the Locust user that sent it, unique in the run (`warmup` for the warm-up)"),
    )
    phase: str = field(default="step", metadata=_doc("", "`warmup` | `single` | `step`: the phase it started in"))
    step: int = field(default=0, metadata=_doc("", "step it started in: -1 warm-up, 0 single stream, 1.. load steps"))
    concurrency: int = field(default=1, metadata=_doc("users", "target concurrency of that step"))
    max_tokens: int | None = field(
        default=None, metadata=_doc("tokens", "the request's output cap (`max_tokens` / `max_completion_tokens`)")
    )
    setting: str | None = field(
        default=None,
        metadata=_doc("", "the sweep-axes setting it was sent with (profile `axes:`, e.g. `thinking=off,effort=low`); "
                          "null without axes"),
    )
    conversation: str | None = field(
        default=None, metadata=_doc("", "id of the conversation it is a turn of, unique in the run; null for single "
                                        "requests")
    )
    turn: int | None = field(
        default=None, metadata=_doc("", "0-based index of the turn in its conversation; null for single requests")
    )
    start_wall: float = field(
        default=0.0, metadata=_doc("epoch s", "wall-clock time the request was sent (timeline placement only)")
    )
    scheduled_wall: float | None = field(
        default=None,
        metadata=_doc(
            "epoch s",
            "rate mode: wall-clock time the arrival schedule said to send it (dispatch delay = start_wall - this); "
            "null in closed-loop phases",
            omit_empty=True,
        ),
    )
    # timings, seconds from request sent
    connect: float = field(
        default=0.0, metadata=_doc("s", "opening a new connection before sending (0.0 on a reused connection)")
    )
    time_source: str = field(
        default="read",
        metadata=_doc("", "`kernel` when every body read carried the kernel's receive time, else `read` (read time)"),
    )
    read_lag_max: float | None = field(
        default=None,
        metadata=_doc(
            "s",
            "client read lag: largest (time this process read bytes - kernel receive time of those bytes) over "
            "the response; null without kernel stamps (TLS, non-Linux). Above 0.1 s the client was starved",
        ),
    )
    t_headers: float | None = field(
        default=None, metadata=_doc("s", "request sent -> response status line and headers arrived")
    )
    ttft: float | None = field(
        default=None, metadata=_doc("s", "request sent -> first token-bearing chunk of any channel (TTFT)")
    )
    ttfat: float | None = field(
        default=None, metadata=_doc("s", "request sent -> first chunk with answer `content` (TTFAT)")
    )
    t_first_reasoning: float | None = field(
        default=None, metadata=_doc("s", "request sent -> first chunk with reasoning text")
    )
    t_last_token: float | None = field(default=None, metadata=_doc("s", "request sent -> last token-bearing chunk"))
    e2e: float | None = field(
        default=None, metadata=_doc("s", "request sent -> last byte of the stream, or the moment it failed (E2E)")
    )
    # chunks
    chunks: int = field(default=0, metadata=_doc("chunks", "token-bearing chunks"))
    reasoning_chunks: int = field(default=0, metadata=_doc("chunks", "token-bearing chunks with reasoning text"))
    answer_chunks: int = field(default=0, metadata=_doc("chunks", "token-bearing chunks with answer text"))
    sse_comments: int = field(default=0, metadata=_doc("comments", "SSE comment lines (keep-alive pings)"))
    gap_hist: dict[str, Any] | None = field(
        default=None,
        metadata=_doc("s", "gaps between consecutive token-bearing chunks, a `LogHistogram` in JSON form; null "
                      "with fewer than 2 chunks"),
    )
    itl_hist: dict[str, Any] | None = field(
        default=None,
        metadata=_doc("s/token", "per-token ITL (gap / tokens of the later chunk), `LogHistogram` JSON; only when "
                      "the server sent cumulative per-chunk usage", omit_empty=True),
    )
    chunk_times: list[float] | None = field(
        default=None,
        metadata=_doc("s", "request sent -> each token-bearing chunk (with `output.chunk_times: true`); written "
                      "(schema 3) as integer microsecond deltas: the first time in µs, then each time minus the one "
                      "before, each time rounded to the µs (read back within 0.5 µs); schema 1-2 records hold the "
                      "float seconds", omit_empty=True),
    )
    chunk_tokens: list[int] | None = field(
        default=None,
        metadata=_doc("tokens", "tokens of each token-bearing chunk, from per-chunk usage (0 when not sent); with "
                      "`output.chunk_times: true`; written (schema 3) as one value `[v]` when every chunk of two or "
                      "more has `v` tokens", omit_empty=True),
    )
    # tokens
    output_tokens: int = field(
        default=0, metadata=_doc("tokens", "`usage.completion_tokens` when sent, else the client estimate")
    )
    token_source: str = field(
        default="estimate", metadata=_doc("", "`usage` | `estimate`: where output_tokens came from")
    )
    estimated_output_tokens: int = field(
        default=0, metadata=_doc("tokens", "client estimate: ceil(UTF-8 bytes of reasoning + answer text / 4)")
    )
    reasoning_tokens: int = field(default=0, metadata=_doc("tokens", "reasoning part of output_tokens"))
    answer_tokens: int = field(default=0, metadata=_doc("tokens", "output_tokens - reasoning_tokens"))
    reasoning_source: str = field(
        default="none",
        metadata=_doc("", "`usage` | `chunk_usage` | `estimate` | `none`: where reasoning_tokens came from"),
    )
    prompt_tokens: int | None = field(
        default=None, metadata=_doc("tokens", "`usage.prompt_tokens`; null when not sent")
    )
    cached_tokens: int | None = field(
        default=None,
        metadata=_doc("tokens", "`usage.prompt_tokens_details.cached_tokens` (prompt tokens served from the "
                                "server's prefix cache); null when not sent"),
    )
    reasoning_chars: int = field(default=0, metadata=_doc("characters", "length of the reasoning text streamed"))
    answer_chars: int = field(default=0, metadata=_doc("characters", "length of the answer text streamed"))
    # outcome
    ok: bool = field(default=False, metadata=_doc("", "success: HTTP 2xx, no in-band error, a success finish_reason"))
    error_class: str | None = field(
        default=None, metadata=_doc("", "why it failed: a key of `ERROR_CLASSES` (docs: errors); null on success")
    )
    error_detail: str | None = field(default=None, metadata=_doc("", "human-readable detail of the failure"))
    retry_after_s: float | None = field(
        default=None,
        metadata=_doc(
            "s",
            "the response's Retry-After (delta-seconds, or an HTTP-date as seconds from its receipt; a past date "
            "gives 0.0); null when absent or unparseable",
        ),
    )
    error_code: str | None = field(
        default=None,
        metadata=_doc("", "the `code` of an in-band error object in the stream, as text; null when none or no code"),
    )
    http_status: int | None = field(default=None, metadata=_doc("", "HTTP status code; null when no response head"))
    finish_reason: str | None = field(default=None, metadata=_doc("", "the server's finish_reason; null when none"))
    done_seen: bool = field(default=False, metadata=_doc("", "the stream carried `data: [DONE]`"))
    truncated: bool = field(
        default=False, metadata=_doc("", "finish_reason `length`, or output_tokens (usage) >= max_tokens")
    )
    truncated_in_reasoning: bool = field(default=False, metadata=_doc("", "truncated with no answer chunk"))
    suspect_truncation: bool = field(
        default=False, metadata=_doc("", "output_tokens >= max_tokens though the server did not say `length`")
    )
    usable: bool = field(
        default=False,
        metadata=_doc("", "a usable sample: ok, not truncated, and passing the profile's `usable` checks"),
    )
    usable_reason: str | None = field(
        default=None,
        metadata=_doc(
            "",
            "why not usable: `error` | `truncated` | `min_answer_tokens` | `regex` | `json` (checked in that "
            "order); null when usable",
        ),
    )
    hidden_reasoning: bool = field(
        default=False,
        metadata=_doc(
            "",
            "usage counted reasoning tokens (reasoning_source `usage`, reasoning_tokens > 0) but no reasoning text "
            "was streamed (OpenAI-style hidden reasoning): tpot and decode_rate then count answer tokens only",
        ),
    )
    # derived rates, null when undefined
    tpot: float | None = field(
        default=None,
        metadata=_doc(
            "s/token",
            "(t_last_token - ttft) / (streamed tokens - 1), streamed tokens = answer_tokens with hidden_reasoning, "
            "else output_tokens; null below 2 chunks or 2 streamed tokens",
        ),
    )
    decode_rate: float | None = field(
        default=None, metadata=_doc("tokens/s", "streamed tokens (as for tpot) / (e2e - ttft)")
    )
    reasoning_rate: float | None = field(
        default=None, metadata=_doc("tokens/s", "reasoning_tokens / (ttfat, else e2e, - t_first_reasoning)")
    )
    answer_rate: float | None = field(default=None, metadata=_doc("tokens/s", "answer_tokens / (e2e - ttfat)"))
    extra: dict[str, Any] = field(
        default_factory=dict,
        metadata=_doc("", "anything else (unknown keys of a record read back land here too)", omit_empty=True),
    )

    @classmethod
    def for_request(cls, identity: RequestIdentity, max_tokens: int | None = None) -> RequestResult:
        """A new, empty result of the request ``identity`` describes, whose body caps output at ``max_tokens``
        (tokens; None when uncapped): every identity field set, nothing measured yet."""
        return cls(
            identity.prompt_id,
            identity.prompt_class,
            identity.user,
            identity.phase,
            identity.step,
            identity.concurrency,
            max_tokens,
            setting=identity.setting,
            conversation=identity.conversation,
            turn=identity.turn,
            scheduled_wall=identity.scheduled_wall,
        )

    @property
    def identity(self) -> RequestIdentity:
        """The identity fields as a :class:`RequestIdentity`."""
        return RequestIdentity(self.prompt_id, self.prompt_class, self.user, self.phase, self.step, self.concurrency,
                               self.setting, self.conversation, self.turn, self.scheduled_wall)

    @property
    def end_wall(self) -> float:
        """Wall time (epoch s) the request ended: ``start_wall + e2e``.

        When ``e2e`` is missing (should not happen), the latest timing present is used, else ``start_wall``.
        """
        if self.e2e is not None:
            return self.start_wall + self.e2e
        present = [t for t in (self.t_last_token, self.ttfat, self.ttft, self.t_headers) if t is not None]
        return self.start_wall + (max(present) if present else 0.0)

    @property
    def streamed_tokens(self) -> int:
        """Tokens the stream's timing covers (tokens): ``answer_tokens`` when the reasoning was hidden (generated
        before the first visible chunk, see ``hidden_reasoning``), else ``output_tokens``. The per-token figures
        (``tpot``, ``decode_rate``, the report's per-stream tok/s) are over these."""
        return self.answer_tokens if self.hidden_reasoning else self.output_tokens

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready dict written as one line of ``records.jsonl`` (no prompt or output text).

        ``{"schema": RECORD_SCHEMA, <every field in declaration order>}``, leaving out the fields marked
        ``omit_empty`` when they are None or empty; ``chunk_times`` / ``chunk_tokens`` in their compact form
        (:func:`encode_chunks`). Other list and dict values are shared with this result, not copied.
        """
        d: dict[str, Any] = {"schema": RECORD_SCHEMA}
        for name in _NAMES:
            d[name] = getattr(self, name)
        for name in _OMIT_EMPTY:
            if not d[name]:
                del d[name]
        if "chunk_times" in d:
            d["chunk_times"], toks = encode_chunks(d["chunk_times"], d.get("chunk_tokens"))
            if toks:
                d["chunk_tokens"] = toks
        return d

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> RequestResult:
        """Read one record (a dict parsed from a ``records.jsonl`` line) back into a result.

        Every reader uses this, then attribute access: one typed object both ways, so writer and readers cannot
        drift apart and the type checker sees every field use. It is a classmethod of the same (mutable) dataclass
        rather than a separate frozen view because a view would repeat the field list, and a slots dataclass is as
        cheap to build; readers treat the result as read-only.

        Schema 1 records (no ``schema`` key) and schema 2 records read alike; a schema 3 record's compact
        ``chunk_times`` / ``chunk_tokens`` are decoded (:func:`decode_chunks`: seconds, one count per chunk), so
        every schema gives the same attributes. A field missing from the record (a
        record written before the field existed, a hand-written one), or null where the field is not nullable,
        takes its default; ``prompt_id`` defaults to ``""``. Keys that are not fields are kept in ``extra``.
        Values are taken as written (JSON types), not converted. List and dict values are shared with ``rec``.

        Raises:
            ValueError: when ``rec["schema"]`` is a version this harness cannot read (a newer writer).
        """
        kw = _READ_DEFAULTS.copy()
        kw.update(rec)
        schema = kw.pop("schema", 1)
        if schema not in READABLE_SCHEMAS:
            raise ValueError(
                f"record schema {schema!r} is not readable by this harness (reads {sorted(READABLE_SCHEMAS)})"
            )
        for name in [k for k, v in kw.items() if v is None and k in _NOT_NULL]:
            kw[name] = _READ_DEFAULTS[name]
        if schema == 3 and isinstance(kw["chunk_times"], list):
            kw["chunk_times"], kw["chunk_tokens"] = decode_chunks(
                kw["chunk_times"], kw["chunk_tokens"] if isinstance(kw["chunk_tokens"], list) else None,
                [v if isinstance(v, float | int) and not isinstance(v, bool) else None
                 for v in (kw[a] for a in CHUNK_ANCHORS)])
        extra = kw["extra"]
        if len(kw) != len(_NAMES):  # keys that are not fields: kept in extra
            moved = {k: kw.pop(k) for k in [k for k in kw if k not in _NAME_SET]}
            kw["extra"] = {**(extra if isinstance(extra, dict) else {"extra": extra}), **moved}
        elif extra is _NO_EXTRA:  # never hand out the shared default
            kw["extra"] = {}
        elif not isinstance(extra, dict):
            kw["extra"] = {"extra": extra}
        return cls(**kw)


@dataclass(frozen=True, slots=True)
class RecordField:
    """One field of the record schema.

    Attributes:
        name: the JSON key in ``records.jsonl``.
        type: the Python type as declared (``float | None``...).
        unit: ``s``, ``tokens``, ``epoch s``... ("" when none).
        nullable: whether the value may be null.
        doc: one-line meaning.
        omit_empty: the writer leaves the key out when the value is None or empty.
    """

    name: str
    type: str
    unit: str
    nullable: bool
    doc: str
    omit_empty: bool = False


def _record_fields() -> tuple[RecordField, ...]:
    version = f"record layout version ({RECORD_SCHEMA}; records without it are schema 1)"
    out = [RecordField("schema", "int", "", False, version)]
    for f in fields(RequestResult):
        if "doc" not in f.metadata:
            raise TypeError(f"RequestResult.{f.name}: declare it with metadata=_doc(unit, meaning) (the record schema)")
        t = str(f.type)
        out.append(
            RecordField(f.name, t, f.metadata["unit"], "None" in t, f.metadata["doc"], f.metadata["omit_empty"])
        )
    return tuple(out)


_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RequestResult))
_NAME_SET = frozenset(_NAMES)
_OMIT_EMPTY: tuple[str, ...] = tuple(f.name for f in fields(RequestResult) if f.metadata["omit_empty"])
_NOT_NULL = frozenset(f.name for f in fields(RequestResult) if "None" not in str(f.type))
#: Values a missing (or wrongly null) field is read as: the field's default (``extra``: a fresh dict per record).
_READ_DEFAULTS: dict[str, Any] = {
    f.name: (f.default if f.default is not MISSING else ({} if f.default_factory is not MISSING else ""))
    for f in fields(RequestResult)
}
_NO_EXTRA = _READ_DEFAULTS["extra"]
#: The record schema, generated from :class:`RequestResult`'s fields (plus ``schema``), in record order.
RECORD_FIELDS: tuple[RecordField, ...] = _record_fields()


def records_markdown() -> str:
    """``docs/records.md``: the record schema as a Markdown table, generated from :data:`RECORD_FIELDS`."""
    lines = [
        "# Request records (`records.jsonl`)",
        "",
        "<!-- Generated by `python -m harness.result --markdown > docs/records.md` from the fields of",
        "     harness.result.RequestResult; tests/test_result.py checks this file is up to date. -->",
        "",
        "One JSON object per request, written and flushed when the request completes (`RequestResult.to_record`)",
        "and read back with `RequestResult.from_record`. Times are seconds on the client's monotonic clock from",
        "**request sent** (the request bytes handed to an open connection) unless the unit says otherwise; the",
        "docs' \"Metric definitions\" (reference/metric-definitions.md) define each measurement. No prompt or",
        "output text is stored.",
        "",
        f"Schema version {RECORD_SCHEMA} (`\"schema\": {RECORD_SCHEMA}` in every record). Records without `schema` "
        "are schema 1: the",
        "same fields without `schema`, and they read the same way. Schema 2 records hold `chunk_times` as float",
        "seconds and `chunk_tokens` one count per chunk; schema 3 writes them compactly (integer µs deltas, and one",
        "count for all chunks when they are equal: about half the bytes of a record with chunk times) and reads",
        "back the same values, times within 0.5 µs. A field missing from a record (written before",
        "the field existed) reads as its default; fields marked *omitted when empty* are left out when null or",
        "empty.",
        "",
        "| field | type | unit | null | meaning |",
        "|---|---|---|---|---|",
    ]
    for f in RECORD_FIELDS:
        meaning = f.doc + (" (*omitted when empty*)" if f.omit_empty else "")
        cells = [f"`{f.name}`", f"`{f.type}`", f.unit or "-", "yes" if f.nullable else "no", meaning]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")  # GFM: \| inside a cell
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.result --markdown``: print ``docs/records.md``. Exit code 0, 2 on bad arguments."""
    ap = argparse.ArgumentParser(prog="python -m harness.result", description="The request record schema.")
    ap.add_argument("--markdown", action="store_true", help="print the record schema as Markdown (docs/records.md)")
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    if not args.markdown:
        ap.print_usage(sys.stderr)
        return 2
    sys.stdout.write(records_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
