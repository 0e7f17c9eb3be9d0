"""Property-based (fuzz) tests of the stream path: HTTP body framing, SSE decoder, chunk interpreter, client.

Properties (docs/development/tests.md, "Fuzz tests"):

* **splits change nothing**: every public stream case (``tests/data``), framed close-delimited, chunked (re-chunked
  at random, hex in either case, chunk extensions) or with a Content-Length, read in random pieces (1-byte runs,
  cuts inside multi-byte UTF-8, inside CRLF and blank lines, inside chunk-size lines) gives the record of reading
  it one write at a time: every field, times included, when the reads refine the writes; every field but the
  times when reads also merge writes (a read's time is then its last byte's);
* **hostile bytes end in a classified record**: garbage, NUL bytes, invalid UTF-8, JSON that is not a chunk, huge
  lines, streams truncated at any byte, bad chunk sizes never raise out of the decoders, never hang (a watchdog
  interrupts them) and always give a record whose ``error_class`` is a key of ``ERROR_CLASSES`` (or None with
  ``ok``), that serializes and reads back;
* the same two over a loopback socket through the real :class:`~harness.client.ChatClient`, the server writing
  the bytes in random pieces with random delays.

The pure properties drive the real objects directly (:class:`~harness.http.BodyFraming`,
:class:`~harness.sse.SSEDecoder`, :class:`~harness.interpret.StreamInterpreter`) in the loop the client runs
(:meth:`ChatClient._read_stream`), with each read's time given, so times compare exactly.
Profiles (reproducible CI, deeper on demand) are in ``tests/fuzz_settings.py``.
"""

from __future__ import annotations

import bisect
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from typing import Any

import gevent
import orjson
import pytest
from gevent.server import StreamServer
from hypothesis import example, given
from hypothesis import strategies as st

from harness.chunkpath import PYTHON, ChunkPath
from harness.client import _ERROR_CLASS, ChatClient, Timeouts
from harness.http import (
    ProtocolError,
    TransportError,
    parse_head,
    parse_retry_after,
)
from harness.interpret import Transcript
from harness.result import ERROR_CLASSES, SUCCESS_FINISH_REASONS, RequestIdentity, RequestResult
from harness.sse import MAX_LINE_BYTES, SSEDecoder
from tests.chunk_paths import PATH_NAMES, chunk_path
from tests.fuzz_settings import fuzz, within
from tests.replay_server import CUT_CASES
from tests.stream_cases import fixtures

SSE_CASES = sorted(k for k, c in fixtures().items() if c["http_status"] == 200)
#: Record fields that are times or rates over times: they differ when reads merge writes (a later read time).
TIME_FIELDS = frozenset({
    "e2e", "ttft", "ttfat", "t_first_reasoning", "t_last_token", "gap_hist", "itl_hist", "chunk_times", "tpot",
    "decode_rate", "reasoning_rate", "answer_rate",
})
#: Record fields the client sets around the stream (connection, clocks, identity): not the stream's result.
CLIENT_FIELDS = frozenset({
    "prompt_id", "prompt_class", "user", "phase", "step", "concurrency", "max_tokens", "setting", "conversation",
    "turn", "start_wall", "scheduled_wall", "connect", "time_source", "read_lag_max", "t_headers", "retry_after_s",
    "extra",
})
FRAMINGS = ("close", "chunked", "length")


# -- the pipeline, as the client runs it ----------------------------------------------------------------------------
@dataclass
class Framed:
    """A response body as the server writes it: ``writes`` = (t, raw bytes) with the transfer framing applied."""

    chunked: bool
    length: int | None
    writes: list[tuple[float, bytes]]

    @property
    def raw(self) -> bytes:
        return b"".join(b for _, b in self.writes)


def run(framed: Framed, reads: Sequence[tuple[float, bytes]], max_tokens: int | None = None,
        path: ChunkPath = PYTHON) -> tuple[RequestResult, Transcript]:
    """Feed ``reads`` ((t, raw bytes); empty reads dropped: an empty recv is EOF) through the body framing, the
    SSE decoder and the interpreter of ``path`` (compiled or pure Python, :mod:`harness.chunkpath`) as
    :meth:`ChatClient._read_stream` does; the peer closes after the last read.

    Returns:
        The finished result (``http_status`` 200) and the transcript of its text.
    """
    transcript = Transcript()
    interp = path.interpreter(max_tokens, keep_chunk_times=True, transcript=transcript)
    framing, dec = path.framing(framed.chunked, framed.length), path.decoder()
    err = detail = None
    t = 0.0
    try:
        for t_read, raw in reads:
            if not raw:
                continue
            t = t_read
            if path.feed_read(framing, dec, interp, t, raw):
                break
        else:
            framing.end_of_input()  # the peer closed: TruncatedStream unless the body was close-delimited
    except TransportError as e:
        err, detail = _ERROR_CLASS[type(e)], e.detail
    res = RequestResult(prompt_id="fuzz", http_status=200, max_tokens=max_tokens)
    interp.finish(res, t, err, detail, dec.error_field, dec.comments)
    return res, transcript


def frame(writes: Sequence[tuple[float, bytes]], framing: str, *, cut: bool = False,
          chunk_cuts: Sequence[int] = (), upper: bool = False, ext: bool = False) -> Framed:
    """Apply ``framing`` (``close``, ``chunked``, ``length``) to body ``writes``.

    ``chunked``: each write becomes one chunk, also cut at ``chunk_cuts`` (offsets in the body), sizes in hex
    (``upper`` case), with a chunk extension when ``ext``; the zero chunk ends the last write unless ``cut``.
    ``length``: a Content-Length of the body (one more byte when ``cut``: the peer closes before the end).
    """
    body_len = sum(len(b) for _, b in writes)
    if framing == "close":
        return Framed(False, None, list(writes))
    if framing == "length":
        return Framed(False, body_len + (1 if cut else 0), list(writes))
    out: list[tuple[float, bytes]] = []
    cuts = sorted(set(chunk_cuts))
    pos = 0
    for t, data in writes:
        inner = [c - pos for c in cuts if pos < c < pos + len(data)]
        raw = b""
        for a, b in zip([0, *inner], [*inner, len(data)], strict=True):
            size = (b"%X" if upper else b"%x") % (b - a)
            raw += size + (b";fuzz=1" if ext else b"") + b"\r\n" + data[a:b] + b"\r\n"
        out.append((t, raw))
        pos += len(data)
    if not cut:
        t, raw = out[-1] if out else (0.0, b"")
        out[-1:] = [(t, raw + b"0\r\n\r\n")]
    return Framed(True, None, out)


def split_reads(framed: Framed, cuts: Sequence[int]) -> list[tuple[float, bytes]]:
    """The framed bytes cut at ``cuts`` (offsets, any order, repeats give empty reads), each read at the time of
    the write its last byte belongs to."""
    raw = framed.raw
    ends = []
    pos = 0
    for _, b in framed.writes:
        pos += len(b)
        ends.append(pos)
    reads = []
    points = [0, *sorted(c for c in cuts if 0 <= c <= len(raw)), len(raw)]
    for a, b in pairwise(points):
        if b > a:
            reads.append((framed.writes[bisect.bisect_left(ends, b)][0], raw[a:b]))
        else:
            reads.append((0.0, b""))
    return reads


_INTERESTING = re.compile(rb"\r\n|\n\n|[\r\n]|[\x80-\xbf]")


def interesting_cuts(raw: bytes) -> list[int]:
    """Offsets worth cutting at: inside and around CRLF and blank lines, before UTF-8 continuation bytes, and the
    first bytes of a line (inside a chunk-size line)."""
    out = []
    for m in _INTERESTING.finditer(raw):
        s = m.start()
        out += (s, s + 1, s + 2)
    return out


def fields(res: RequestResult, drop: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The result's record, without the fields in ``drop``."""
    return {k: v for k, v in res.to_record().items() if k not in drop}


def case_writes(name: str) -> list[tuple[float, bytes]]:
    return [(w["t"], w["bytes"]) for w in fixtures()[name]["writes"]]


def case_max_tokens(name: str) -> int | None:
    return (fixtures()[name].get("request") or {}).get("max_tokens")


@cache
def reference(name: str, framing: str) -> tuple[dict[str, Any], str, str]:
    """A case's record (all fields) read one write at a time, with its answer and reasoning text."""
    framed = frame(case_writes(name), framing, cut=name in CUT_CASES)
    res, tr = run(framed, framed.writes, case_max_tokens(name))
    return fields(res), tr.answer_text, tr.reasoning_text


def assert_classified(res: RequestResult) -> None:
    """A finished record: ok with no error class, or not ok with a documented one; it serializes and reads back."""
    if res.ok:
        assert res.error_class is None and res.finish_reason in SUCCESS_FINISH_REASONS
    else:
        assert res.error_class in ERROR_CLASSES, res.error_class
    assert res.finish_reason is None or isinstance(res.finish_reason, str)
    for name in ("chunks", "reasoning_chunks", "answer_chunks", "output_tokens", "reasoning_tokens",
                 "answer_tokens", "estimated_output_tokens"):
        v = getattr(res, name)
        assert type(v) is int and v >= 0, (name, v)
    back = RequestResult.from_record(orjson.loads(orjson.dumps(res.to_record())))
    assert (back.ok, back.error_class, back.output_tokens) == (res.ok, res.error_class, res.output_tokens)


# -- (a) splits change nothing ---------------------------------------------------------------------------------
def _examples(name: str) -> int:
    """Examples per case: fewer for the long cases (up to 3 MB), so the module stays well under a minute."""
    size = sum(len(b) for _, b in case_writes(name))
    return 12 if size < 30_000 else 4 if size < 400_000 else 2


def test_the_framings_give_the_same_record() -> None:
    """Unsplit, close-delimited, chunked and Content-Length bodies of every case give the same record (a cut
    case's detail names its framing: the chunked or length-framed body is truncated, the close-delimited one
    merely has no finish_reason)."""
    for name in SSE_CASES:
        close = reference(name, "close")
        for framing in ("chunked", "length"):
            other = reference(name, framing)
            assert other[1:] == close[1:], (name, framing)
            drop = {"error_detail"} if name in CUT_CASES else set()
            assert {k: v for k, v in other[0].items() if k not in drop} == {
                k: v for k, v in close[0].items() if k not in drop}, (name, framing)


def record_json(res: RequestResult, drop: frozenset[str] = frozenset()) -> bytes:
    """The record's JSON (keys sorted), without the fields in ``drop``: what "byte-identical" compares."""
    return orjson.dumps(fields(res, drop), option=orjson.OPT_SORT_KEYS)


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_both_paths_give_byte_identical_records_on_every_public_case(path_name: str) -> None:
    """Every public case, in every framing, read one write at a time, in 1-, 7- and 1448-byte reads: the path's
    record is byte for byte the pure-Python path's (every field, times included), and so is its text."""
    path = chunk_path(path_name)
    for name in SSE_CASES:
        for framing in FRAMINGS:
            framed = frame(case_writes(name), framing, cut=name in CUT_CASES)
            size = len(framed.raw)
            splits = [framed.writes] + [split_reads(framed, list(range(0, size, step))) for step in (7, 1448)]
            if size < 30_000:
                splits.append(split_reads(framed, list(range(size))))
            for reads in splits:
                ref, ref_tr = run(framed, reads, case_max_tokens(name), PYTHON)
                res, tr = run(framed, reads, case_max_tokens(name), path)
                assert record_json(res) == record_json(ref), (name, framing)
                assert (tr.answer, tr.reasoning) == (ref_tr.answer, ref_tr.reasoning), (name, framing)


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("name", SSE_CASES)
def test_any_split_of_a_case_gives_the_same_record(name: str, path_name: str) -> None:
    """Random framings and splits through ``path_name``'s stream path give the pure path's unsplit record (JSON
    compared byte for byte)."""
    path = chunk_path(path_name)
    writes, max_tokens = case_writes(name), case_max_tokens(name)

    @fuzz(_examples(name))
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        framing = data.draw(st.sampled_from(FRAMINGS), label="framing")
        body_len = sum(len(b) for _, b in writes)
        chunk_cuts = data.draw(st.lists(st.integers(1, max(1, body_len - 1)), max_size=20), label="chunk cuts")
        framed = frame(writes, framing, cut=name in CUT_CASES, chunk_cuts=chunk_cuts,
                       upper=data.draw(st.booleans()), ext=data.draw(st.booleans()))
        raw = framed.raw
        cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=40), label="cuts")
        special = interesting_cuts(raw)
        if special:
            cuts += data.draw(st.lists(st.sampled_from(special), max_size=40), label="special cuts")
        if data.draw(st.booleans(), label="a run of 1-byte reads"):
            start = data.draw(st.integers(0, len(raw)))
            cuts += range(start, min(len(raw), start + data.draw(st.integers(1, 600))))
        refine = data.draw(st.booleans(), label="reads refine the writes")
        if refine:
            ends = [0]
            for _, b in framed.writes:
                ends.append(ends[-1] + len(b))
            cuts += ends
        with within(30, f"{name} ({framing})"):
            res, tr = run(framed, split_reads(framed, cuts), max_tokens, path)
        ref, answer, reasoning = reference(name, framing)
        assert (tr.answer_text, tr.reasoning_text) == (answer, reasoning)
        drop = frozenset() if refine else TIME_FIELDS
        assert fields(res, drop) == {k: v for k, v in ref.items() if k not in drop}
        assert record_json(res, drop) == orjson.dumps(
            {k: v for k, v in ref.items() if k not in drop}, option=orjson.OPT_SORT_KEYS)

    check()


# -- decoder-level properties ------------------------------------------------------------------------------------
#: SSE-shaped pieces: field names, line ends of every kind, a comment, an error field, a multi-byte character cut
#: in two, NUL, invalid UTF-8.
SSE_TOKENS = [
    b"data:", b"data: ", b"data", b"\r", b"\n", b"\r\n", b"\n\n", b": ping", b":", b"error: x", b"id: 1",
    b"event: e", b"retry: 5", b"[DONE]", b'{"choices":[{"delta":{"content":"', b'"}}]}', b"\xe4\xb8", b"\x96",
    b"\x00", b"\xff\xfe", b"\xc0\x80", b"x", b" ",
]
sse_soup = st.one_of(
    st.lists(st.sampled_from(SSE_TOKENS), max_size=80).map(b"".join),
    st.binary(max_size=600),
)


@fuzz(300)
@given(stream=sse_soup, cuts=st.lists(st.integers(0, 5000), max_size=30))
@example(stream=b"data: a\r\ndata: b\n\n", cuts=[8, 8])  # an empty read between CR and LF: two line ends
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_sse_decoder_is_split_invariant_on_any_bytes(stream: bytes, cuts: list[int], path_name: str) -> None:
    """Any bytes, any split (empty pieces included): the same payloads, comments and error field as the pure
    decoder given the whole stream."""
    whole = SSEDecoder()
    expect = whole.feed(stream)
    d = chunk_path(path_name).decoder()
    got: list[bytes] = []
    points = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    with within(10):
        for a, b in pairwise(points):
            got += d.feed(stream[a:b])
    assert got == expect
    assert (d.comments, d.error_field, d.events) == (whole.comments, whole.error_field, whole.events)


@fuzz(4)
@given(size=st.integers(1 << 20, 16 << 20), piece=st.integers(512, 4096), ended=st.booleans())
@example(size=16 << 20, piece=1448, ended=True)  # was quadratic: a 16 MiB line in 1448-byte reads took 29 s
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_sse_decoder_huge_line_in_small_reads_does_not_hang(size: int, piece: int, ended: bool, path_name: str
                                                            ) -> None:
    line = b"data: " + b"x" * size + (b"\n\n" if ended else b"")
    d = chunk_path(path_name).decoder(32 << 20)  # over the default limit (MAX_LINE_BYTES): test_sse tests that
    out: list[bytes] = []
    with within(10, "a huge line"):
        for i in range(0, len(line), piece):
            out += d.feed(line[i : i + piece])
    assert [len(p) for p in out] == ([size] if ended else [])


BAD_SIZES = [b"-6", b"-1", b"zz", b"1_0", b"+4", b"0x10", b"f" * 20, b"", b" ", b"-0", b"\xff", b"1 2", b"4\x00"]


@fuzz(150)
@given(
    prefix=st.lists(st.binary(min_size=1, max_size=20), max_size=4),
    bad=st.sampled_from(BAD_SIZES),
    tail=st.binary(max_size=64),
    cuts=st.lists(st.integers(0, 400), max_size=10),
)
@example(prefix=[b"x"], bad=b"-6", tail=b"abc", cuts=[])  # looped forever: "-6" moved the parser back to a CRLF
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_chunked_decoder_rejects_bad_chunk_sizes(
    prefix: list[bytes], bad: bytes, tail: bytes, cuts: list[int], path_name: str
) -> None:
    """A chunk-size token that is not 1*HEXDIG is a ProtocolError, whatever came before and after it, in any
    split; never a hang."""
    stream = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in prefix) + bad + b"\r\n" + tail
    d = chunk_path(path_name).chunked()
    points = [0, *sorted(c % (len(stream) + 1) for c in cuts), len(stream)]
    with within(5, "the chunked decoder"), pytest.raises(ProtocolError, match="bad chunk size"):
        for a, b in pairwise(points):
            d.feed(stream[a:b])


# -- (b) hostile bytes end in a classified record --------------------------------------------------------------
SMALL_CASES = [n for n in SSE_CASES if sum(len(b) for _, b in case_writes(n)) < 30_000]
#: JSON values of every type, for chunk-shaped objects with the wrong types in their fields.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
CHUNK_KEYS = ["choices", "delta", "content", "reasoning_content", "reasoning", "reasoning_details", "text",
              "finish_reason", "usage", "completion_tokens", "prompt_tokens", "completion_tokens_details",
              "reasoning_tokens", "prompt_tokens_details", "cached_tokens", "error", "object", "code", "tool_calls"]
chunk_like = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(CHUNK_KEYS), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def json_events(draw: st.DrawFn) -> bytes:
    """``data:`` events of chunk-shaped JSON with random value types, then maybe a valid end."""
    objs = draw(st.lists(chunk_like, min_size=1, max_size=6))
    out = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)
    if draw(st.booleans()):
        out += b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    return out


@st.composite
def mutated_case(draw: st.DrawFn) -> bytes:
    """A public case's body truncated at any byte and/or with garbage inserted anywhere."""
    body = b"".join(b for _, b in case_writes(draw(st.sampled_from(SMALL_CASES))))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(body)))
        body = body[:at] + draw(st.sampled_from(SSE_TOKENS) | st.binary(max_size=16)) + body[at:]
    if draw(st.booleans()):
        body = body[: draw(st.integers(0, len(body)))]
    return body


@st.composite
def huge(draw: st.DrawFn) -> bytes:
    """A line of megabytes: a huge content string, or bytes with no line end at all."""
    size = draw(st.integers(1 << 20, 6 << 20))
    if draw(st.booleans()):
        return b'data: {"choices":[{"delta":{"content":"' + b"y" * size + b'"},"finish_reason":"stop"}]}\n\n'
    return b"data: " + bytes([draw(st.integers(0, 255))]) * size


hostile_body = st.one_of(mutated_case(), json_events(), sse_soup, huge())


@st.composite
def hostile_framed(draw: st.DrawFn, body: bytes) -> Framed:
    """``body`` framed at random: close-delimited, chunked (maybe cut, maybe with a bad size or a wrong size), or
    with a Content-Length that may be short or long."""
    framing = draw(st.sampled_from(FRAMINGS))
    cut = draw(st.booleans())
    n = len(body)
    chunk_cuts = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=8))
    framed = frame([(0.0, body)], framing, cut=cut, chunk_cuts=chunk_cuts)
    if framing == "length":
        framed.length = draw(st.integers(0, n + 8))
    elif framing == "chunked" and draw(st.booleans()):
        raw = framed.raw
        lines = [m.end() for m in re.finditer(rb"\r\n", raw)]
        at = draw(st.sampled_from([0, *lines]))
        end = raw.find(b"\r\n", at)
        end = len(raw) if end < 0 else end
        bad = draw(st.sampled_from(BAD_SIZES) | st.integers(0, 1 << 20).map(lambda v: b"%x" % v))
        framed.writes = [(0.0, raw[:at] + bad + raw[end:])]
    return framed


@fuzz(120)
@given(data=st.data(), body=hostile_body)
@example(data=None, body=b'data: {"choices":"x"}\n\n')  # each of these raised out of on_payload
@example(data=None, body=b'data: {"choices":[{"delta":{"content":5}}]}\n\n')
@example(data=None, body=b'data: {"choices":[{"finish_reason":["stop"]}]}\n\n')
@example(data=None, body=b'data: {"choices":[{"delta":{"reasoning_details":[{"text":5}]}}]}\n\n')
@example(data=None, body=b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}],'
         b'"usage":{"completion_tokens":-3}}\n\n')  # recorded -3 output tokens, ok
@example(data=None, body=b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}],'
         b'"usage":{"completion_tokens":true}}\n\n')  # recorded `true` output tokens
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_hostile_bytes_end_in_a_classified_record(data: st.DataObject | None, body: bytes, path_name: str) -> None:
    """Hostile bytes in hostile framings end in a classified record, byte for byte the pure path's."""
    path = chunk_path(path_name)
    framed = frame([(0.0, body)], "close") if data is None else data.draw(hostile_framed(body), label="framed")
    raw = framed.raw
    cuts = [] if data is None else data.draw(st.lists(st.integers(0, len(raw)), max_size=30), label="cuts")
    reads = [(i * 1e-3, r) for i, (_, r) in enumerate(split_reads(framed, cuts))]
    with within(20, "the stream path"):
        res, _ = run(framed, reads, 50, path)
    assert_classified(res)
    if path is not PYTHON:
        assert record_json(res) == record_json(run(framed, reads, 50, PYTHON)[0])


# -- over a loopback socket, through the real client -------------------------------------------------------------
class ScriptServer:
    """A loopback HTTP server answering each request with the next queued script: a response head and body
    pieces, written with the given delays (s), then the connection closed."""

    def __init__(self) -> None:
        self.scripts: list[tuple[bytes, list[tuple[float, bytes]]]] = []
        self.server = StreamServer(("127.0.0.1", 0), self._handle)

    def __enter__(self) -> ScriptServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(timeout=1)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def _handle(self, sock: Any, addr: Any) -> None:
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                got = sock.recv(65536)
                if not got:
                    return
                buf += got
            head, pieces = self.scripts.pop(0)
            sock.sendall(head)
            for delay, piece in pieces:
                if delay:
                    gevent.sleep(delay)
                sock.sendall(piece)
        except OSError:
            pass
        finally:
            sock.close()


def _head(framed: Framed) -> bytes:
    h = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    if framed.chunked:
        h += b"Transfer-Encoding: chunked\r\n"
    elif framed.length is not None:
        h += b"Content-Length: %d\r\n" % framed.length
    else:
        h += b"Connection: close\r\n"
    return h + b"\r\n"


#: Client timeouts of the loopback properties: a hostile stream ends within ``total`` whatever it sends.
FUZZ_TIMEOUTS = Timeouts(connect=2, first_byte=3, first_token=4, idle=4, total=6)


def _over_loopback(srv: ScriptServer, framed: Framed, pieces: list[tuple[float, bytes]], max_tokens: int | None,
                   path: ChunkPath = PYTHON) -> RequestResult:
    srv.scripts.append((_head(framed), pieces))
    client = ChatClient(srv.url, timeouts=FUZZ_TIMEOUTS, chunk_path=path)
    payload: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    if max_tokens is not None:
        payload["max_tokens"] = max_tokens
    t0 = time.monotonic()
    try:
        res = client.stream_chat(payload, RequestIdentity("fuzz"), keep_chunk_times=True)
    finally:
        client.close()
    assert time.monotonic() - t0 < FUZZ_TIMEOUTS.total + 2, "the client outlived its total timeout"
    return res


def _pieces(data: st.DataObject, raw: bytes, max_pieces: int = 25) -> list[tuple[float, bytes]]:
    """``raw`` cut at random points (inside CRLF, UTF-8 and chunk-size lines too) with delays of 0-3 ms."""
    special = interesting_cuts(raw)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=max_pieces // 2), label="cuts")
    if special:
        cuts += data.draw(st.lists(st.sampled_from(special), max_size=max_pieces // 2), label="special cuts")
    points = [0, *sorted(set(cuts)), len(raw)]
    out = []
    for a, b in pairwise(points):
        if b > a:
            out.append((data.draw(st.sampled_from([0.0, 0.0, 0.0005, 0.001, 0.003]), label="delay"), raw[a:b]))
    return out


@fuzz(30)
@given(data=st.data(), name=st.sampled_from(SMALL_CASES), framing=st.sampled_from(FRAMINGS))
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_any_split_over_loopback_gives_the_same_record(data: st.DataObject, name: str, framing: str, path_name: str
                                                       ) -> None:
    """A case written in random pieces with random delays and read by the client (either stream path): the record
    of the pure one-write-at-a-time reading, but for the times (the loopback's) and the fields the client sets."""
    path = chunk_path(path_name)
    framed = frame(case_writes(name), framing, cut=name in CUT_CASES)
    with ScriptServer() as srv:
        res = _over_loopback(srv, framed, _pieces(data, framed.raw), case_max_tokens(name), path)
    ref = reference(name, framing)[0]
    drop = TIME_FIELDS | CLIENT_FIELDS
    assert fields(res, drop) == {k: v for k, v in ref.items() if k not in drop}


@fuzz(30)
@given(data=st.data(), body=st.one_of(mutated_case(), json_events(), sse_soup))
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_hostile_bytes_over_loopback_end_in_a_classified_record(data: st.DataObject, body: bytes, path_name: str
                                                                ) -> None:
    path = chunk_path(path_name)
    framed = data.draw(hostile_framed(body), label="framed")
    with ScriptServer() as srv:
        res = _over_loopback(srv, framed, _pieces(data, framed.raw, 12), 50, path)
    assert res.http_status == 200
    assert_classified(res)



# -- response heads ------------------------------------------------------------------------------------------------
HEAD_TOKENS = [
    b"HTTP/1.1 ", b"HTTP/1.0 ", b"200", b"429", b"2", b"\xb2", b"\xb9", b" OK", b"\r\n", b"Content-Length: ",
    b"Transfer-Encoding: chunked", b"Retry-After: ", b"Connection: close", b"-1", b"1_0", b"abc", b":", b"\x00",
    b"\xff", b"Wed, 21 Oct 2015 07:28:00 GMT", b"Wed, 21 Oct 99999 07:28:00 GMT", b"1e999", b"nan", b" ",
]


@fuzz(300)
@given(head=st.lists(st.sampled_from(HEAD_TOKENS), max_size=30).map(b"".join) | st.binary(max_size=200))
@example(head=b"HTTP/1.1 2\xb2\xb2 OK")  # "²" passed isdigit() and int() raised ValueError out of the client
@example(head=b"HTTP/1.1 200 OK\r\nContent-Length: 1_0")  # int() read it as 10: a body framed by a typo
def test_any_response_head_parses_or_is_a_protocol_error(head: bytes) -> None:
    """parse_head: a ResponseHead or ProtocolError; its framing, keep-alive and Retry-After: a value or
    ProtocolError, never another exception."""
    try:
        h = parse_head(head)
        assert 0 <= h.status
        retry = parse_retry_after(h.headers.get("retry-after"))
        assert retry is None or retry >= 0.0
        length = h.headers.get("content-length")
        framing = h.framing()
        assert isinstance(h.keep_alive, bool)
        if length is not None and not h.chunked:  # accepted: digits only, the framing of exactly that length
            assert length.isascii() and length.isdigit()
            n = int(length)
            assert framing.feed(b"x" * min(n + 1, 100_000)) == b"x" * min(n, 100_000)
            assert framing.done is (n < 100_000)
    except ProtocolError:
        pass


@fuzz(15)
@given(data=st.data(), head=st.lists(st.sampled_from(HEAD_TOKENS), max_size=20).map(b"".join))
@example(data=None, head=b"HTTP/1.1 2\xb2\xb2 OK\r\n")
def test_a_hostile_head_over_loopback_ends_in_a_classified_record(data: st.DataObject | None, head: bytes) -> None:
    """Whatever head (and then a valid stream) the server sends, the client returns a classified record."""
    body = b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    pieces = [(0.0, head + b"\r\n\r\n" + body)] if data is None else _pieces(data, head + b"\r\n\r\n" + body, 8)
    with ScriptServer() as srv:
        srv.scripts.append((b"", pieces))
        client = ChatClient(srv.url, timeouts=FUZZ_TIMEOUTS)
        try:
            res = client.stream_chat({"model": "m", "messages": []}, RequestIdentity("fuzz"))
        finally:
            client.close()
    assert_classified(res)


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_a_server_that_never_ends_its_line_fails_at_the_limit_not_the_total_timeout(chunked: bool,
                                                                                    path_name: str) -> None:
    """A 2xx event stream that sends data without a line end fails the request with ``protocol_error`` naming
    the SSE line limit as soon as more than MAX_LINE_BYTES arrived, well before the total timeout; its tokens so
    far are kept."""
    path = chunk_path(path_name)
    first = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    endless = b"data: " + b"x" * (MAX_LINE_BYTES + 1000)
    pieces = [first, *(endless[i : i + 60_000] for i in range(0, len(endless), 60_000))]
    if chunked:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        pieces = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]
    else:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
    with ScriptServer() as srv:
        srv.scripts.append((head, [(0.0, p) for p in pieces] + [(FUZZ_TIMEOUTS.total + 1, b"\n\n")]))
        client = ChatClient(srv.url, timeouts=FUZZ_TIMEOUTS, chunk_path=path)
        t0 = time.monotonic()
        try:
            res = client.stream_chat({"model": "m", "messages": []}, RequestIdentity("limit"))
        finally:
            client.close()
        took = time.monotonic() - t0
    assert res.error_class == "protocol_error" and not res.ok
    assert res.error_detail is not None
    assert f"SSE line longer than the limit of {MAX_LINE_BYTES} bytes" in res.error_detail
    assert res.chunks == 1
    assert took < FUZZ_TIMEOUTS.total / 2, f"it took {took:.1f} s: the limit did not end it"
