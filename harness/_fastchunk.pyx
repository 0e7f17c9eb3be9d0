# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled per-read stream path: HTTP body framing, SSE splitting and the chunk interpreter's per-payload step.

The native twin of the pure-Python path (:class:`harness.http.ChunkedDecoder` / :class:`harness.http.BodyFraming`,
:class:`harness.sse.SSEDecoder`, :meth:`harness.interpret.StreamInterpreter.on_payload`), selected by
:mod:`harness.chunkpath`. Each piece is a line-for-line port of its Python original with the same semantics (the
stream-case and fuzz tests run both paths and compare every record field byte for byte); only the interpreter
overhead differs. One call per read: :func:`feed_read`.

Built by ``setup.py`` as an optional extension: without a C compiler the install still succeeds and the
pure-Python path runs (``harness.chunkpath.CLIENT_PATH``).
"""

from libc.math cimport log

from orjson import JSONDecodeError as _JSONError
from orjson import loads as _loads

from harness.histogram import LogHistogram as _LogHistogram
from harness.interpret import StreamInterpreter as _PyInterpreter

_py_finish = _PyInterpreter.finish

cdef bytes _DONE = b"[DONE]"
cdef Py_ssize_t _MAX_HEAD_BYTES = 65536
from harness.sse import MAX_LINE_BYTES as _PY_MAX_LINE_BYTES
cdef Py_ssize_t _MAX_LINE_BYTES = _PY_MAX_LINE_BYTES
cdef int _SIZE = 0, _DATA = 1, _CRLF = 2, _TRAILER = 3


cdef _protocol_error(str detail):
    from harness.http import ProtocolError
    return ProtocolError(detail)


cdef _line_too_long(str what, Py_ssize_t size, Py_ssize_t limit):
    from harness.sse import line_too_long
    return line_too_long(what, size, limit)


cdef _truncated(str detail):
    from harness.http import TruncatedStream
    return TruncatedStream(detail)


cdef bint _is_hex_size(bytes token):
    """``re.fullmatch(rb"[0-9A-Fa-f]{1,16}", token)``."""
    cdef Py_ssize_t n = len(token), k
    cdef unsigned char c
    if n < 1 or n > 16:
        return False
    for k in range(n):
        c = token[k]
        if not ((48 <= c <= 57) or (65 <= c <= 70) or (97 <= c <= 102)):
            return False
    return True


cdef class ChunkedDecoder:
    """Native :class:`harness.http.ChunkedDecoder` (same API and errors)."""

    cdef bytes _buf
    cdef unsigned long long _left  # 16 hex digits at most: always fits
    cdef int _state
    cdef public bint done

    def __init__(self):
        self._buf = b""
        self._left = 0
        self._state = _SIZE
        self.done = False

    cpdef bytes feed(self, bytes data):
        """Consume raw bytes; return the body bytes they carried (possibly empty).

        Raises:
            ProtocolError: on a malformed chunk header or chunk data not followed by CRLF.
        """
        cdef bytes buf = self._buf + data if self._buf else data
        cdef Py_ssize_t i = 0, n = len(buf), j, take
        cdef unsigned long long size
        cdef list out = []
        cdef int state = self._state
        cdef bytes token
        while i < n and not self.done:
            if state == _DATA:
                take = <Py_ssize_t>min(self._left, <unsigned long long>(n - i))
                out.append(buf[i : i + take])
                i += take
                self._left -= take
                if self._left:
                    break
                state = _CRLF
            elif state == _CRLF:
                if n - i < 2:
                    break
                if buf[i] != 13 or buf[i + 1] != 10:
                    raise _protocol_error("chunk data not followed by CRLF")
                i += 2
                state = _SIZE
            elif state == _SIZE:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    if n - i > 1024:
                        raise _protocol_error("chunk size line too long")
                    break
                token = buf[i:j].split(b";", 1)[0].strip()
                if not _is_hex_size(token):
                    raise _protocol_error(f"bad chunk size {buf[i:j][:40]!r}")
                size = int(token, 16)
                i = j + 2
                if size == 0:
                    state = _TRAILER
                else:
                    self._left = size
                    state = _DATA
            else:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    if n - i > _MAX_HEAD_BYTES:
                        raise _protocol_error("chunk trailer line too long")
                    break
                if j == i:
                    self.done = True
                i = j + 2
        self._state = state
        self._buf = buf[i:]
        return b"".join(out) if len(out) != 1 else out[0]


cdef class BodyFraming:
    """Native :class:`harness.http.BodyFraming` (same API and errors)."""

    cdef ChunkedDecoder _chunked
    cdef object _left  # int or None
    cdef public bint done

    def __init__(self, bint chunked, length):
        self._chunked = ChunkedDecoder() if chunked else None
        self._left = None if chunked else length
        self.done = self._left == 0

    cpdef bytes feed(self, bytes raw):
        """Body bytes carried by ``raw`` (framing removed); sets ``done`` at the end of the body."""
        cdef bytes out
        if self._chunked is not None:
            out = self._chunked.feed(raw)
            self.done = self._chunked.done
            return out
        if self._left is not None:
            out = raw[: self._left]
            self._left -= len(out)
            self.done = self._left == 0
            return out
        return raw

    @property
    def close_delimited(self):
        """True when the body ends only where the server closes the connection."""
        return self._chunked is None and self._left is None

    def end_of_input(self):
        """The connection was closed. Raises TruncatedStream when the body was framed and had not ended."""
        if self.done:
            return
        if not self.close_delimited:
            raise _truncated("connection closed before the end of the body")
        self.done = True


cdef class SSEDecoder:
    """Native :class:`harness.sse.SSEDecoder` (same API, attributes, payloads and line/event limit)."""

    cdef list _partial
    cdef Py_ssize_t _partial_size
    cdef list _data
    cdef Py_ssize_t _data_size
    cdef bint _pending_cr
    cdef public Py_ssize_t comments
    cdef public object error_field
    cdef public Py_ssize_t events
    cdef public Py_ssize_t max_line

    def __init__(self, Py_ssize_t max_line=_MAX_LINE_BYTES):
        self._partial = []
        self._partial_size = 0
        self._data = []
        self._data_size = 0
        self._pending_cr = False
        self.comments = 0
        self.error_field = None
        self.events = 0
        self.max_line = max_line

    cpdef list feed(self, bytes piece):
        """Consume ``piece`` and return the data payloads of the events it completed (possibly none).

        Raises:
            ProtocolError: a line or an event's data is longer than ``max_line`` bytes (as the pure path).
        """
        cdef bytes tail, line, value, last
        cdef list lines, out, data
        cdef unsigned char first
        cdef Py_ssize_t limit = self.max_line, size
        if not piece:
            return []
        if self._pending_cr:
            self._pending_cr = False
            if piece[:1] == b"\n":
                piece = piece[1:]
        if b"\r" in piece:
            tail = b""
            if piece.endswith(b"\r"):
                self._pending_cr = True
                piece, tail = piece[:-1], b"\n"
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        if b"\n" not in piece:
            if piece:
                self._partial_size += len(piece)
                if self._partial_size > limit:
                    raise _line_too_long("line", self._partial_size, limit)
                self._partial.append(piece)
            return []
        lines = piece.split(b"\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
        if self._partial_size + len(piece) > limit:
            for line in lines:
                if len(line) > limit:
                    raise _line_too_long("line", len(line), limit)
        last = lines.pop()
        self._partial = [last] if last else []
        self._partial_size = len(last)
        out = []
        data = self._data
        size = self._data_size
        for line in lines:
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data = self._data = []
                    size = 0
                continue
            first = line[0]
            if first == 100 and line.startswith(b"data:"):
                value = line[5:]
                if value[:1] == b" ":
                    value = value[1:]
                data.append(value)
                size += len(value) + 1
                if size > limit + 1:
                    raise _line_too_long("event", size - 1, limit)
            elif first == 58:
                self.comments += 1
            elif line.startswith(b"error:"):
                value = line[6:]
                if value[:1] == b" ":
                    value = value[1:]
                self.error_field = value.decode("utf-8", "replace")
            elif line == b"data":
                data.append(b"")
                size += 1
                if size > limit + 1:
                    raise _line_too_long("event", size - 1, limit)
        self._data_size = size
        self.events += len(out)
        return out


cdef double _BASE_S = 1e-6
cdef double _INV_LOG_GROWTH = 1.0 / log(1.01)


cdef inline void _hist_add(h, double value_s) except *:
    """:meth:`harness.histogram.LogHistogram.add` on ``h`` (same bucket rule as :func:`harness.histogram.bucket_of`,
    same state), without a Python frame."""
    cdef long k = 0 if value_s <= _BASE_S else <long>(log(value_s / _BASE_S) * _INV_LOG_GROWTH)
    c = h.counts
    c[k] = c.get(k, 0) + 1
    h.n += 1
    h.total += value_s
    lo = h.min
    if lo is None or value_s < lo:
        h.min = value_s
    hi = h.max
    if hi is None or value_s > hi:
        h.max = value_s


cdef inline bint _is_count(value):
    return type(value) is int and value >= 0


cdef _reasoning_text(dict delta):
    """:func:`harness.interpret._reasoning_text`."""
    r = delta.get("reasoning_content") or delta.get("reasoning")
    if r:
        return r if isinstance(r, str) else None
    details = delta.get("reasoning_details")
    if details and isinstance(details, list):
        text = "".join([t for d in details if isinstance(d, dict) and isinstance(t := d.get("text"), str)])
        return text or None
    return None


cdef inline Py_ssize_t _utf8_len(str s):
    return len(s) if s.isascii() else len(s.encode("utf-8"))


cdef class StreamInterpreter:
    """Native :class:`harness.interpret.StreamInterpreter`: same constructor, attributes and results; the
    per-payload step (:meth:`on_payload`) compiled over typed fields, :meth:`finish` the pure one's (one
    definition of every figure)."""

    cdef public object max_tokens, transcript, ttft, ttfat, t_first_reasoning, t_last, gaps, itl, usable_rule
    cdef public object answer_buf, answer_room, finish_reason, usage, cum_tokens, cum_at_last_reasoning
    cdef public object error_class, error_detail, error_code
    cdef public list chunk_times, chunk_tokens
    cdef public bint keep, done_seen
    cdef public Py_ssize_t chunks, reasoning_chunks, answer_chunks, reasoning_chars, answer_chars, text_bytes
    cdef public Py_ssize_t mixed_chunks

    def __init__(self, max_tokens=None, keep_chunk_times=False, usable=None, transcript=None):
        self.max_tokens = max_tokens
        self.transcript = transcript
        self.keep = keep_chunk_times
        self.ttft = self.ttfat = self.t_first_reasoning = self.t_last = None
        self.chunks = self.reasoning_chunks = self.answer_chunks = 0
        self.gaps = _LogHistogram()
        self.itl = _LogHistogram()
        self.reasoning_chars = self.answer_chars = self.text_bytes = 0
        self.usable_rule = usable
        self.answer_buf = [] if usable is not None and usable.needs_text else None
        self.answer_room = usable.buffer_chars if usable is not None else 0
        self.finish_reason = None
        self.usage = None
        self.cum_tokens = None
        self.cum_at_last_reasoning = None
        self.mixed_chunks = 0
        self.done_seen = False
        self.error_class = self.error_detail = self.error_code = None
        self.chunk_times = [] if keep_chunk_times else None
        self.chunk_tokens = [] if keep_chunk_times else None

    @property
    def answer_text(self):
        """:attr:`harness.interpret.StreamInterpreter.answer_text`."""
        return None if self.answer_buf is None else "".join(self.answer_buf)

    def _malformed(self, payload):
        """:meth:`harness.interpret.StreamInterpreter._malformed`."""
        if self.error_class is None:
            self.error_class = "malformed_chunk"
            self.error_detail = payload[:200].decode("utf-8", "replace")

    def finish(self, result, e2e, transport_error=None, transport_detail=None, error_field=None, comments=0):
        """:meth:`harness.interpret.StreamInterpreter.finish` (the same function, run on this object)."""
        return _py_finish(self, result, e2e, transport_error, transport_detail, error_field, comments)

    cpdef on_payload(self, double t, bytes payload):
        """:meth:`harness.interpret.StreamInterpreter.on_payload`, compiled (same state changes)."""
        cdef bint token_bearing = False, is_reasoning = False
        cdef double gap
        n_tok = 0  # a Python int, as the pure path (a server may send any integer)
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
            err = e if isinstance(e, dict) else obj
            if self.error_class in (None, "malformed_chunk"):
                code = err.get("code")
                self.error_class = "server_error_event"
                self.error_code = None if code is None else str(code)
                self.error_detail = f"code={code} type={err.get('type')} message={err.get('message')}"
            return
        usage = obj.get("usage")
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
                self._malformed(payload)
                return
            if delta:
                reasoning = _reasoning_text(delta)
                if reasoning:
                    is_reasoning = True
                    token_bearing = True
                    self.reasoning_chars += len(reasoning)
                    self.text_bytes += _utf8_len(reasoning)
                    self.reasoning_chunks += 1
                    if self.transcript is not None:
                        self.transcript.reasoning.append(reasoning)
                    if self.t_first_reasoning is None:
                        self.t_first_reasoning = t
                if content:
                    if reasoning:
                        self.mixed_chunks += 1
                    token_bearing = True
                    is_reasoning = False
                    self.answer_chars += len(content)
                    self.text_bytes += _utf8_len(content)
                    answer_buf = self.answer_buf
                    if answer_buf is not None and self.answer_room > 0:
                        part = content[: self.answer_room]
                        answer_buf.append(part)
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
                gap = t - <double>self.t_last
                _hist_add(self.gaps, gap)
                if n_tok > 0:
                    _hist_add(self.itl, gap / n_tok)
            self.t_last = t
            self.chunks += 1
            if is_reasoning and self.cum_tokens is not None:
                self.cum_at_last_reasoning = self.cum_tokens
            if self.keep:
                self.chunk_times.append(t)
                self.chunk_tokens.append(n_tok)


cpdef bint feed_read(framing, SSEDecoder dec, StreamInterpreter interp, double t, bytes raw) except -1:
    """One read: de-frame ``raw`` with ``framing``, split its SSE events with ``dec`` and interpret every payload at
    time ``t``; return ``framing.done``.

    Raises:
        ProtocolError: on malformed framing (as the pure path).
    """
    cdef bytes body = framing.feed(raw)
    cdef bytes p
    if body:
        for p in dec.feed(body):
            interp.on_payload(t, p)
    return framing.done
