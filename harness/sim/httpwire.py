"""Minimal HTTP/1.1 server-side wire handling on a gevent socket.

Enough for an OpenAI-compatible endpoint driven by load-test clients: request line + headers,
``Content-Length`` or chunked request bodies, ``Expect: 100-continue``, keep-alive (HTTP/1.1
default, ``Connection: close`` honoured, HTTP/1.0 closes unless ``keep-alive``), pipelined
requests, and responses with either ``Content-Length`` or ``Transfer-Encoding: chunked``.

With ``rx_timestamps`` (Linux), request bytes are read with :func:`harness.kstamp.recv_stamped` and the kernel's
receive timestamp (``SO_TIMESTAMPNS``, wall-clock epoch) of the last segment read is kept in
``Connection.rx_epoch``: the moment the request really arrived, however late the event loop got to it (the
ground-truth log uses it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from harness.kstamp import enable as enable_rx_timestamps
from harness.kstamp import recv_stamped

#: Largest accepted request head (request line + headers), bytes.
MAX_HEAD_BYTES = 64 * 1024
#: Largest accepted request body, bytes.
MAX_BODY_BYTES = 64 * 1024 * 1024
_RECV = 65536

__all__ = ["Connection", "HttpError", "Request", "enable_rx_timestamps", "encode_chunks", "http_date", "send_all"]

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class HttpError(Exception):
    """Malformed request: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    """One parsed HTTP request (header names lower-cased)."""

    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes = b""
    keep_alive: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> str:
        """Target without query string."""
        return self.target.split("?", 1)[0]


_date_cache: dict[int, bytes] = {}


def http_date() -> bytes:
    """RFC 7231 date, cached per second."""
    now = int(time.time())
    cached = _date_cache.get(now)
    if cached is None:
        _date_cache.clear()
        cached = _date_cache[now] = formatdate(now, usegmt=True).encode()
    return cached


def send_all(sock: Any, data: bytes) -> None:
    """Write all of ``data`` with plain ``send`` calls.

    gevent's ``sendall`` issues a ``getsockopt(SO_SNDBUF)`` syscall on every call; a streaming
    server writes once per token, so this loop saves a syscall per chunk.
    """
    sent = sock.send(data)
    if sent < len(data):
        view = memoryview(data)
        while sent < len(data):
            sent += sock.send(view[sent:])


class Connection:
    """Reads requests from and writes responses to one client socket.

    ``rx_epoch`` is the kernel receive time (epoch seconds) of the last bytes read, when ``rx_timestamps``
    was asked for and the platform supports it; else None.
    """

    def __init__(self, sock: Any, rx_timestamps: bool = False) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.rx_epoch: float | None = None
        self._ts = rx_timestamps and enable_rx_timestamps(sock)

    def _fill(self) -> bool:
        if self._ts:
            # never a stale time: no control message means no timestamp (None)
            data, self.rx_epoch = recv_stamped(self.sock, _RECV)
        else:
            data = self.sock.recv(_RECV)
        if not data:
            return False
        self.buf += data
        return True

    def _read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise HttpError(400, "connection closed inside body")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def _read_line(self) -> bytes:
        while True:
            idx = self.buf.find(b"\r\n")
            if idx >= 0:
                line = bytes(self.buf[:idx])
                del self.buf[: idx + 2]
                return line
            if len(self.buf) > MAX_HEAD_BYTES:
                raise HttpError(431, "line too long")
            if not self._fill():
                raise HttpError(400, "connection closed inside chunked body")

    def read_request(self) -> Request | None:
        """Next request, or ``None`` when the client closed the connection cleanly between requests."""
        while True:
            idx = self.buf.find(b"\r\n\r\n")
            if idx >= 0:
                break
            if len(self.buf) > MAX_HEAD_BYTES:
                raise HttpError(431, "request head too large")
            if not self._fill():
                if self.buf.strip():
                    raise HttpError(400, "connection closed inside request head")
                return None
        head = bytes(self.buf[:idx]).decode("latin-1")
        del self.buf[: idx + 4]
        lines = head.split("\r\n")
        while lines and not lines[0]:  # tolerate stray CRLF between requests
            lines.pop(0)
        try:
            method, target, version = lines[0].split(" ", 2)
        except (ValueError, IndexError):
            raise HttpError(400, "bad request line") from None
        if not version.startswith("HTTP/1."):
            raise HttpError(400, "unsupported HTTP version")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise HttpError(400, "bad header line")
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        conn_hdr = headers.get("connection", "").lower()
        if version == "HTTP/1.0":
            keep_alive = "keep-alive" in conn_hdr
        else:
            keep_alive = "close" not in conn_hdr
        req = Request(method.upper(), target, version, headers, keep_alive=keep_alive)
        if headers.get("expect", "").lower() == "100-continue":
            send_all(self.sock, b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            req.body = self._read_chunked()
        else:
            length_s = headers.get("content-length", "0") or "0"
            try:
                length = int(length_s)
            except ValueError:
                raise HttpError(400, "bad content-length") from None
            if length < 0:
                raise HttpError(400, "bad content-length")
            if length > MAX_BODY_BYTES:
                raise HttpError(413, "request body too large")
            req.body = self._read_exact(length) if length else b""
        return req

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = self._read_line().split(b";", 1)[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise HttpError(400, "bad chunk size") from None
            if size == 0:
                while self._read_line():  # trailers
                    pass
                return b"".join(parts)
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError(413, "request body too large")
            parts.append(self._read_exact(size))
            self._read_exact(2)

    # -- responses --------------------------------------------------------------------------
    @staticmethod
    def head_bytes(status: int, headers: list[tuple[str, str]], keep_alive: bool) -> bytes:
        """Status line + headers + blank line (adds ``date``, ``server`` and ``connection: close``)."""
        out = [b"HTTP/1.1 %d %s\r\n" % (status, REASONS.get(status, "Unknown").encode())]
        out.append(b"date: " + http_date() + b"\r\nserver: harness-sim\r\n")
        for name, value in headers:
            out.append(f"{name}: {value}\r\n".encode("latin-1"))
        if not keep_alive:
            out.append(b"connection: close\r\n")
        out.append(b"\r\n")
        return b"".join(out)

    def send_full(
        self, status: int, body: bytes, content_type: str, keep_alive: bool,
        headers: list[tuple[str, str]] | None = None, head_only: bool = False,
    ) -> None:
        """Send a complete response with ``Content-Length``."""
        hdrs = [("content-type", content_type), ("content-length", str(len(body)))]
        if headers:
            hdrs.extend(headers)
        send_all(self.sock, self.head_bytes(status, hdrs, keep_alive) + (b"" if head_only else body))

    def start_chunked(self, status: int, content_type: str, keep_alive: bool,
                      headers: list[tuple[str, str]] | None = None, first: bytes = b"") -> None:
        """Send the head of a ``Transfer-Encoding: chunked`` response (plus optional first chunk data)."""
        hdrs = [("content-type", content_type), ("transfer-encoding", "chunked")]
        if headers:
            hdrs.extend(headers)
        head = self.head_bytes(status, hdrs, keep_alive)
        send_all(self.sock, head + (encode_chunks([first]) if first else b""))

    def send_chunks(self, payloads: list[bytes], last: bool = False) -> None:
        """Send each payload as one HTTP chunk in a single write; ``last`` appends the terminating chunk."""
        if len(payloads) == 1 and not last:
            p = payloads[0]
            data = b"%x\r\n%b\r\n" % (len(p), p)
        else:
            data = encode_chunks(payloads)
            if last:
                data += b"0\r\n\r\n"
        send_all(self.sock, data)


def encode_chunks(payloads: list[bytes]) -> bytes:
    """HTTP/1.1 chunked framing of each non-empty payload."""
    return b"".join([b"%x\r\n%b\r\n" % (len(p), p) for p in payloads if p])
