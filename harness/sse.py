"""Incremental Server-Sent Events decoder (bytes in, event payloads out).

A pure function of the bytes it is fed: no sockets, no clocks. It follows the WHATWG SSE parsing rules that
matter for OpenAI-compatible streams (see "token-bearing chunk" in :mod:`harness.terms`):

* lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a ``\\r\\n`` split across two reads is one line end;
* ``data:`` with or without the space after the colon; several ``data:`` lines in one event are joined with
  ``\\n``;
* a blank line dispatches the event; an event with no ``data`` dispatches nothing;
* lines starting with ``:`` are comments (keep-alive pings) and are counted, not dispatched;
* other fields (``id``, ``event``, ``retry``) are ignored, except a non-standard ``error:`` field (older
  llama-server), whose last value is kept in :attr:`SSEDecoder.error_field` so the caller can report it;
* an event not terminated by a blank line when the stream ends is discarded (the spec's rule);
* a line, or an event's joined data, longer than :data:`MAX_LINE_BYTES` (1 MiB) fails the stream with
  :class:`harness.http.ProtocolError` (error class ``protocol_error``) whose detail names the limit: the buffer of an
  unfinished line or event is bounded, so a server that never sends a line end cannot grow it until the total
  timeout.

Bytes are decoded to text only per complete event, so a UTF-8 character split across reads is never
corrupted.
"""

from __future__ import annotations

__all__ = ["MAX_LINE_BYTES", "SSEDecoder", "line_too_long"]

#: Longest SSE line, and longest event data (its ``data`` lines joined), in bytes, line ends excluded; longer fails
#: the request (``protocol_error``). An OpenAI chunk is well under 1 KiB; 1 MiB leaves room for large usage or
#: logprobs objects.
MAX_LINE_BYTES = 1 << 20


def line_too_long(what: str, size: int, limit: int) -> Exception:
    """The error for an SSE ``what`` (``line`` or ``event``) of at least ``size`` bytes over ``limit`` bytes: a
    :class:`harness.http.ProtocolError` whose detail names the limit (also raised by the compiled path)."""
    from harness.http import ProtocolError  # here, not at the top: this module stays free of sockets and gevent

    return ProtocolError(f"SSE {what} longer than the limit of {limit} bytes (MAX_LINE_BYTES; {size}+ bytes "
                         f"without a {'line end' if what == 'line' else 'blank line'})")


class SSEDecoder:
    """Turn a stream of byte pieces into complete SSE ``data`` payloads.

    Usage::

        dec = SSEDecoder()
        for piece in pieces:             # bytes, any split
            for payload in dec.feed(piece):
                ...                      # bytes: the event's data, lines joined with b"\\n"

    Attributes:
        comments: number of comment lines (``:...``) seen, e.g. keep-alive pings.
        error_field: the value of the last non-standard ``error:`` field, decoded as UTF-8, or None.
        events: number of events dispatched (each with a non-empty data buffer).
        max_line: the line and event limit in bytes (:data:`MAX_LINE_BYTES` unless given).
    """

    __slots__ = ("_data", "_data_size", "_partial", "_partial_size", "_pending_cr", "comments", "error_field",
                 "events", "max_line")

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self._partial: list[bytes] = []  # the pieces of the current, unfinished line (CRs already turned to LF)
        self._partial_size = 0  # bytes in _partial
        self._data: list[bytes] = []
        self._data_size = 0  # bytes of the pending event's payload if it were dispatched now, plus one
        self.max_line = max_line
        self._pending_cr = False
        self.comments = 0
        self.error_field: str | None = None
        self.events = 0

    def feed(self, piece: bytes) -> list[bytes]:
        """Consume ``piece`` and return the data payloads of the events it completed (possibly none).

        Linear in the bytes fed, whatever the split: a line arriving in many reads is joined once, when its end
        arrives (joining it on every read was quadratic: a 16 MiB line in 1448-byte reads took 29 s, now 0.1 s).

        Args:
            piece: the next bytes of the response body (transfer encoding already removed); may be empty.

        Returns:
            A list of payloads, each the raw bytes of one event's data (UTF-8 JSON for OpenAI streams, or
            ``b"[DONE]"``), in arrival order.

        Raises:
            ProtocolError: a line or an event's data is longer than :attr:`max_line` bytes (whatever the split).
        """
        if not piece:  # nothing to do; and a CR pending from the last piece must stay pending
            return []
        if self._pending_cr:
            # The previous piece ended in CR: it was a line end; drop a LF that completes a CRLF pair.
            self._pending_cr = False
            if piece[:1] == b"\n":
                piece = piece[1:]
        if b"\r" in piece:  # the line kept from earlier pieces has none: they were all turned to LF
            tail = b""
            if piece.endswith(b"\r"):  # may be the first half of a CRLF split across reads
                self._pending_cr = True
                piece, tail = piece[:-1], b"\n"
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + tail
        limit = self.max_line
        if b"\n" not in piece:
            if piece:
                self._partial_size += len(piece)
                if self._partial_size > limit:
                    raise line_too_long("line", self._partial_size, limit)
                self._partial.append(piece)
            return []
        lines = piece.split(b"\n")
        if self._partial:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
        if self._partial_size + len(piece) > limit:  # only then can a line be too long: check each (rare)
            for line in lines:
                if len(line) > limit:
                    raise line_too_long("line", len(line), limit)
        last = lines.pop()
        self._partial = [last] if last else []
        self._partial_size = len(last)
        out: list[bytes] = []
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
            if first == 100 and line.startswith(b"data:"):  # 100 == ord("d")
                value = line[5:]
                if value[:1] == b" ":
                    value = value[1:]
                data.append(value)
                size += len(value) + 1
                if size > limit + 1:
                    raise line_too_long("event", size - 1, limit)
            elif first == 58:  # 58 == ord(":"): a comment
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
                    raise line_too_long("event", size - 1, limit)
            # id, event, retry and unknown fields: ignored.
        self._data_size = size
        self.events += len(out)
        return out
