"""A minimal HTTP/1.1 client for one streamed request at a time, built for exact timing under gevent.

Why our own: the hot path of the harness is "bytes arrive -> timestamp -> decode", and the libraries in
reach either buffer (geventhttpclient's ``iter_content``/``iter_lines`` block until 1 KiB / 4 KiB arrive,
which skews TTFT), hide timeouts (httpx/openai retries and a single read timeout), or cost ~10x the CPU per
chunk (the openai SDK's pydantic models). This module does only what a streaming benchmark needs: one
keep-alive connection, a request written in one ``sendall``, the status line and headers (:func:`parse_head`),
and the body framing (:class:`BodyFraming`: ``Content-Length``, ``Transfer-Encoding: chunked`` or
close-delimited), each read with the timeout the caller gives. TLS uses :mod:`ssl` (``https://`` base URLs).

Every read returns as soon as the kernel has bytes: the caller timestamps the read, so an SSE event's time
is the arrival of the bytes that completed it. On plain HTTP (Linux) reads also carry the kernel's receive time
(:mod:`harness.kstamp`).

Reads on readiness (plain HTTP on a gevent socket, as under Locust): a read that came back short drained the
kernel's buffer, so the next one first waits for the socket to be readable (the socket's own gevent io watcher)
and then reads once, non-blocking, on the raw socket: no read that finds nothing, no ``BlockingIOError`` built and
caught per chunk, no ``gevent.Timeout`` per read. The read deadline is one timer per connection, armed for the
earliest deadline asked and left running across reads; when it fires before the current read's deadline (the
deadline moved later, as an idle deadline does with every chunk) the wait re-arms it for the rest. TLS and
sockets that are not gevent's (no monkey patching) read through the socket's blocking ``recv`` with a timeout.

Failures are typed, as httpx draws them (:class:`TransportError` and its subclasses); this module raises
:class:`ConnectError`, :class:`ConnectTimeout`, :class:`WriteTimeout`, :class:`ReadTimeout`,
:class:`TruncatedStream` and :class:`ProtocolError`. :class:`FirstByteTimeout`, :class:`FirstTokenTimeout`,
:class:`IdleTimeout` and :class:`TotalTimeout` are the request phases' timeouts, raised by the client that knows
which deadline a read or write was given (:mod:`harness.client` maps every class to an error class).
"""

from __future__ import annotations

import ipaddress
import math
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from gevent import socket as gsocket
from gevent.hub import Waiter

from harness import kstamp

__all__ = [
    "BodyFraming",
    "ChunkedDecoder",
    "ConnectError",
    "ConnectTimeout",
    "Connection",
    "FirstByteTimeout",
    "FirstTokenTimeout",
    "IdleTimeout",
    "Origin",
    "ProtocolError",
    "ReadTimeout",
    "ResponseHead",
    "TotalTimeout",
    "TransportError",
    "TransportTimeout",
    "TruncatedStream",
    "WriteTimeout",
    "parse_head",
    "parse_retry_after",
]

_RECV = 65536
#: Largest accepted response head (status line + headers), bytes.
MAX_HEAD_BYTES = 65536
_recv_stamped = kstamp.recv_stamped
#: A chunk-size token (RFC 9112 section 7.1: 1*HEXDIG; at most 16 digits, 2**64 - 1 bytes).
_HEX_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_perf = time.perf_counter
#: What the deadline timer switches into a waiting reader (the io watcher switches in the waiter itself).
_DEADLINE = object()


# -- errors ---------------------------------------------------------------------------------------------------
class TransportError(Exception):
    """The exchange failed below HTTP semantics (connection, timing or framing). ``detail``: text for humans."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ConnectError(TransportError):
    """The TCP/TLS connection was refused, reset or failed before the request was completely sent."""


class ProtocolError(TransportError):
    """The server broke HTTP framing: a malformed status line, header, ``Content-Length`` or chunk."""


class TruncatedStream(TransportError):
    """The peer closed or reset the connection before the response (head or body) was complete."""


class TransportTimeout(TransportError):
    """Base of every timeout: something did not complete within the seconds it was given."""


class ConnectTimeout(TransportTimeout):
    """The connection (TCP, then TLS) was not established within the connect timeout."""


class WriteTimeout(TransportTimeout):
    """Writing the request did not complete within the seconds given to :meth:`Connection.send`."""


class ReadTimeout(TransportTimeout):
    """Nothing arrived within the seconds given to :meth:`Connection.recv` (or the deadline had passed)."""


class FirstByteTimeout(TransportTimeout):
    """Raised by the client: no response head within ``timeouts.first_byte`` of the request being sent."""


class FirstTokenTimeout(TransportTimeout):
    """Raised by the client: no token-bearing chunk within ``timeouts.first_token`` of the request being sent."""


class IdleTimeout(TransportTimeout):
    """Raised by the client: a gap after a token-bearing chunk exceeded ``timeouts.idle``."""


class TotalTimeout(TransportTimeout):
    """Raised by the client: the request exceeded ``timeouts.total`` end to end."""


# -- URLs, heads, headers ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host, port and the URL's path (``base_path``, no trailing slash; may be "").

    Raises:
        ValueError: when the URL has no host or an unsupported scheme.
    """

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Origin:
        """Parse ``http(s)://host[:port][/path]``; the port defaults to 80 / 443."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {url!r}: expected http://host[:port][/path] or https://...")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.path.rstrip("/"))

    @property
    def host_header(self) -> str:
        """The ``Host`` header value."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(slots=True)
class ResponseHead:
    """Status line and headers of a response. Header names are lower-cased; of a repeated header the last wins."""

    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def chunked(self) -> bool:
        """True when the body uses ``Transfer-Encoding: chunked``."""
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def content_length(self) -> int | None:
        """The ``Content-Length`` in bytes, or None when absent or overridden by chunked encoding.

        Raises:
            ProtocolError: the value is not a non-negative integer.
        """
        value = self.headers.get("content-length")
        if value is None or self.chunked:
            return None
        if not (value.isascii() and value.isdigit()):  # 1*DIGIT: int() also takes "+5", "1_0", "²"
            raise ProtocolError(f"bad content-length {value[:40]!r}")
        return int(value)

    @property
    def content_type(self) -> str:
        """The ``Content-Type`` header, lower-cased ("" when absent)."""
        return self.headers.get("content-type", "").lower()

    @property
    def keep_alive(self) -> bool:
        """True when the connection may carry another request once this body is read to its end: the body is
        framed (chunked or Content-Length) and the server did not say ``Connection: close``.

        Raises:
            ProtocolError: as :attr:`content_length`.
        """
        framed = self.chunked or self.content_length is not None
        return framed and self.headers.get("connection", "").lower() != "close"

    def framing(self) -> BodyFraming:
        """A fresh :class:`BodyFraming` for this response's body.

        Raises:
            ProtocolError: as :attr:`content_length`.
        """
        return BodyFraming(self.chunked, self.content_length)


def parse_head(head: bytes) -> ResponseHead:
    """Parse a response head: status line and header lines, without the blank line that ends them.

    Args:
        head: the bytes before ``\r\n\r\n``, decoded as latin-1. Lines without a colon are ignored.

    Raises:
        ProtocolError: on a malformed status line.
    """
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = -1
    # isascii: latin-1 has digits ("²", "¹") that isdigit() accepts and int() rejects (a ValueError escaped)
    if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isascii() and parts[1].isdigit():
        status = int(parts[1])
    if status < 0:
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return ResponseHead(status, parts[2] if len(parts) > 2 else "", headers)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait, from a ``Retry-After`` header value (RFC 9110 section 10.2.3).

    Args:
        value: the header value: delta-seconds (``"2"``; a decimal fraction is accepted too) or an HTTP-date
            (``"Wed, 21 Oct 2015 07:28:00 GMT"``); None when the header was absent.
        now: the wall-clock epoch time an HTTP-date is measured from (default: ``time.time()``).

    Returns:
        Seconds (>= 0; a date in the past gives 0.0), or None when absent or unparseable (negative, not finite,
        not a date).
    """
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0.0 and math.isfinite(seconds) else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" or no zone: HTTP-dates are GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


# -- body framing ---------------------------------------------------------------------------------------------
class ChunkedDecoder:
    """Incremental decoder of ``Transfer-Encoding: chunked`` bodies. ``done`` turns True at the last chunk."""

    __slots__ = ("_buf", "_left", "_state", "done")

    _SIZE, _DATA, _CRLF, _TRAILER = 0, 1, 2, 3

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0
        self._state = self._SIZE
        self.done = False

    def feed(self, data: bytes) -> bytes:
        """Consume raw bytes; return the body bytes they carried (possibly empty). Bytes after the last chunk's
        trailers are ignored.

        Raises:
            ProtocolError: on a malformed chunk header or chunk data not followed by CRLF.
        """
        buf = self._buf + data if self._buf else data
        i, n = 0, len(buf)
        out: list[bytes] = []
        state = self._state
        while i < n and not self.done:
            if state == self._DATA:
                take = min(self._left, n - i)
                out.append(buf[i : i + take])
                i += take
                self._left -= take
                if self._left:
                    break
                state = self._CRLF
            elif state == self._CRLF:
                if n - i < 2:
                    break
                if buf[i : i + 2] != b"\r\n":
                    raise ProtocolError("chunk data not followed by CRLF")
                i += 2
                state = self._SIZE
            elif state == self._SIZE:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    if n - i > 1024:
                        raise ProtocolError("chunk size line too long")
                    break
                token = buf[i:j].split(b";", 1)[0].strip()
                # 1*HEXDIG only: int(x, 16) alone also takes "-6", "+4", "1_0" and "0x10", and a negative size
                # moved the parser backwards (a chunk size of -6 looped forever on "\r\n-6\r\n").
                if not _HEX_SIZE.fullmatch(token):
                    raise ProtocolError(f"bad chunk size {buf[i:j][:40]!r}")
                size = int(token, 16)
                i = j + 2
                if size == 0:
                    state = self._TRAILER
                else:
                    self._left = size
                    state = self._DATA
            else:  # trailer lines until an empty line
                j = buf.find(b"\r\n", i)
                if j < 0:
                    if n - i > MAX_HEAD_BYTES:
                        raise ProtocolError("chunk trailer line too long")
                    break
                if j == i:
                    self.done = True
                i = j + 2
        self._state = state
        self._buf = buf[i:]
        return b"".join(out) if len(out) != 1 else out[0]


class BodyFraming:
    """Where a response body ends: chunked, ``Content-Length`` (bytes) or close-delimited (``length`` None and
    not chunked). Feed it the raw bytes as they arrive; ``done`` turns True at the end of the body.

    Args:
        chunked: the body uses ``Transfer-Encoding: chunked``.
        length: the ``Content-Length`` in bytes, or None.
    """

    __slots__ = ("_chunked", "_left", "done")

    def __init__(self, chunked: bool, length: int | None) -> None:
        self._chunked = ChunkedDecoder() if chunked else None
        self._left = None if chunked else length
        self.done = self._left == 0

    def feed(self, raw: bytes) -> bytes:
        """Body bytes carried by ``raw`` (framing removed); sets ``done`` at the end of the body. Bytes beyond
        the end of a ``Content-Length`` body are dropped.

        Raises:
            ProtocolError: on malformed chunked framing.
        """
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
    def close_delimited(self) -> bool:
        """True when the body ends only where the server closes the connection."""
        return self._chunked is None and self._left is None

    def end_of_input(self) -> None:
        """The connection was closed: a close-delimited body is then complete (``done``), any other one is not.

        Raises:
            TruncatedStream: when the body was framed and had not ended.
        """
        if self.done:
            return
        if not self.close_delimited:
            raise TruncatedStream("connection closed before the end of the body")
        self.done = True


# -- the connection -------------------------------------------------------------------------------------------
class Connection:
    """One keep-alive HTTP/1.1 connection to an :class:`Origin` (opened lazily, reused while clean).

    Args:
        origin: where to connect.
        verify_tls: verify the server certificate for ``https`` origins.
    """

    def __init__(self, origin: Origin, verify_tls: bool = True) -> None:
        self.origin = origin
        self.verify_tls = verify_tls
        self.sock: socket.socket | None = None
        self._buf = b""
        self._stamped = False
        self._addrs: list[tuple[int, tuple[Any, ...]]] | None = None
        #: Wall-clock (epoch) time at which the kernel received the bytes returned by the last :meth:`recv`, or
        #: None when unknown (TLS, no kernel stamps). Bytes pushed back with :meth:`unread` keep the stamp of the
        #: read that brought them.
        self.rx_epoch: float | None = None
        self._buf_rx: float | None = None  # rx_epoch of the read that brought the bytes in ``_buf``
        #: Bytes received from the socket since this object was made (every connection it opened; bytes pushed
        #: back with :meth:`unread` are counted once): a response's size is the difference across it.
        self.rx_bytes = 0
        #: Reads, :meth:`recv` calls that reached the socket (each one ``recv``/``recvmsg``), and the waits for
        #: readability before them, since this object was made (plain HTTP on a gevent socket counts both).
        self.reads = 0
        self.waits = 0
        # Readiness reading (see the module's docstring); None on the blocking path (TLS, a non-gevent socket).
        self._raw: Any = None  # the gevent socket's non-blocking OS socket (``sock._sock``)
        self._read_event: Any = None  # the gevent socket's io watcher for READ (closing the socket cancels it)
        self._hub: Any = None
        self._drained = True  # the last read came back short: wait for readability before the next one
        self._waiter: Any = None  # the Waiter of the wait in progress, else None
        self._timer: Any = None  # the deadline timer (one loop timer, not ref'd), armed for ``_timer_at``
        self._timer_at = 0.0  # perf_counter deadline the timer was armed for

    def _addresses(self) -> list[tuple[int, tuple[Any, ...]]]:
        """(family, sockaddr) candidates of the origin, in order: an IP literal as is, a host name resolved once
        per connection object (the one that last connected first).

        Resolving on every new connection put the resolver (gevent's thread pool) inside the timed connect and
        outside its timeout: a first connect was seen taking 10.6 s against a 5 s connect timeout.

        Raises:
            OSError: the host name does not resolve (``socket.gaierror``).
        """
        if self._addrs is None:
            host, port = self.origin.host, self.origin.port
            try:
                ip = ipaddress.ip_address(host)
            except ValueError:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                self._addrs = [(family, tuple(sockaddr)) for family, _, _, _, sockaddr in infos]
            else:
                v6 = ip.version == 6
                self._addrs = [(socket.AF_INET6, (host, port, 0, 0)) if v6 else (socket.AF_INET, (host, port))]
        return self._addrs

    def _connect(self, timeout_s: float) -> socket.socket:
        """A connected TCP socket: each candidate address in turn (as ``socket.create_connection``)."""
        addrs = self._addresses()
        err: OSError | None = None
        for i, (family, addr) in enumerate(addrs):
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout_s)
                sock.connect(addr)
            except OSError as e:
                sock.close()
                err = e
                continue
            if i:
                addrs.insert(0, addrs.pop(i))  # next time, the address that answered first
            return sock
        raise err if err is not None else OSError(f"{self.origin.host}: no address")

    @property
    def is_stamped(self) -> bool:
        """True when reads on this connection carry kernel receive timestamps (see :attr:`rx_epoch`)."""
        return self._stamped

    def open(self, timeout_s: float) -> None:
        """Connect (TCP, then TLS for https) within ``timeout_s`` seconds.

        Raises:
            ConnectTimeout: the connection was not established in time.
            ConnectError: it was refused or failed (also: the host name does not resolve).
        """
        self.close()
        try:
            sock = self._connect(timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stamped = self.origin.scheme == "http" and kstamp.enable(sock) and kstamp.keep_stamping_on()
            if self.origin.scheme == "https":
                ctx = ssl.create_default_context()
                if not self.verify_tls:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                sock = ctx.wrap_socket(sock, server_hostname=self.origin.host)
        except TimeoutError:
            raise ConnectTimeout(f"no connection within {timeout_s} s") from None
        except OSError as e:
            raise ConnectError(f"{self.origin.host}:{self.origin.port}: {e}") from None
        self.sock = sock
        self._buf = b""
        self._stamped = stamped
        self._drained = True
        if isinstance(sock, gsocket.socket) and not isinstance(sock, ssl.SSLSocket):
            self._raw, self._read_event, self._hub = sock._sock, sock._read_event, sock.hub

    def close(self) -> None:
        """Close the socket if open (idempotent). A read waiting on it in another greenlet then raises
        :class:`TruncatedStream` (gevent cancels the socket's watchers)."""
        self._disarm()
        self._raw = self._read_event = self._hub = None
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        self._buf = b""

    def send(self, data: bytes, timeout_s: float) -> None:
        """Write the whole request within ``timeout_s`` seconds.

        Raises:
            WriteTimeout: the write stalled.
            ConnectError: the connection broke.
        """
        assert self.sock is not None
        try:
            self.sock.settimeout(timeout_s)
            self.sock.sendall(data)
        except TimeoutError:
            raise WriteTimeout(f"request not written within {timeout_s} s") from None
        except OSError as e:
            raise ConnectError(f"send failed: {e}") from None

    def recv(self, timeout_s: float) -> bytes:
        """Return the next bytes from the socket (buffered bytes first); ``b""`` at EOF.

        Raises:
            ReadTimeout: nothing arrived within ``timeout_s`` seconds (<= 0 means already expired).
            TruncatedStream: the connection was reset, or closed by another greenlet during the wait.
        """
        if self._buf:
            data, self._buf = self._buf, b""
            self.rx_epoch = self._buf_rx
            return data
        assert self.sock is not None
        if timeout_s <= 0:
            raise ReadTimeout("deadline passed")
        raw = self._raw
        if raw is None:
            return self._recv_blocking(timeout_s)
        deadline = _perf() + timeout_s
        try:
            if self._drained:
                self._wait_readable(deadline)
            while True:
                self.reads += 1
                try:
                    if self._stamped:
                        data, self.rx_epoch = _recv_stamped(raw, _RECV)
                    else:
                        self.rx_epoch = None
                        data = raw.recv(_RECV)
                    break
                except BlockingIOError:  # readable, then nothing (rare): wait again, same deadline
                    self._wait_readable(deadline)
        except ReadTimeout:
            raise ReadTimeout(f"nothing received within {timeout_s:.3f} s") from None
        except OSError as e:
            raise TruncatedStream(f"connection error while reading: {e}") from None
        self._drained = len(data) < _RECV
        self.rx_bytes += len(data)
        return data

    def _recv_blocking(self, timeout_s: float) -> bytes:
        """:meth:`recv` on the blocking path (TLS, a socket that is not gevent's): the socket's ``recv`` with a
        timeout. Raises as :meth:`recv`."""
        assert self.sock is not None
        try:
            self.sock.settimeout(timeout_s)
            self.reads += 1
            if not self._stamped:
                self.rx_epoch = None
                data = self.sock.recv(_RECV)
            else:
                data, self.rx_epoch = _recv_stamped(self.sock, _RECV)
            self.rx_bytes += len(data)
            return data
        except TimeoutError:
            raise ReadTimeout(f"nothing received within {timeout_s:.3f} s") from None
        except OSError as e:
            raise TruncatedStream(f"connection error while reading: {e}") from None

    def _wait_readable(self, deadline: float) -> None:
        """Park this greenlet until the socket is readable or ``deadline`` (perf_counter seconds) passes.

        Raises:
            ReadTimeout: the deadline passed first.
            OSError: the socket was closed by another greenlet during the wait (gevent's cancel).
            BaseException: whatever is thrown into the greenlet (``GreenletExit`` from ``kill``); the io watcher
                and the deadline timer are stopped first.
        """
        self.waits += 1
        timer = self._timer
        if timer is None or not timer.active or self._timer_at > deadline:
            self._arm(deadline)
        event = self._read_event
        waiter = self._waiter = Waiter(self._hub)
        event.start(waiter.switch, waiter)
        try:
            while waiter.get() is not waiter:  # the deadline timer fired
                event.stop()
                if _perf() >= deadline:
                    raise ReadTimeout("deadline passed")
                self._arm(deadline)  # armed for an earlier deadline than this read's: sleep on
                waiter = self._waiter = Waiter(self._hub)
                event.start(waiter.switch, waiter)
        except BaseException:
            self._disarm()
            raise
        finally:
            event.stop()
            self._waiter = None

    def _arm(self, deadline: float) -> None:
        """(Re)start the deadline timer to fire at ``deadline`` (perf_counter seconds)."""
        self._disarm()
        timer = self._timer = self._hub.loop.timer(max(0.0, deadline - _perf()), ref=False)
        timer.start(self._on_deadline)
        self._timer_at = deadline

    def _disarm(self) -> None:
        """Stop the deadline timer, if any (idempotent)."""
        if self._timer is not None:
            self._timer.close()
            self._timer = None

    def _on_deadline(self) -> None:
        """The deadline timer's callback (in the hub): wake the reader waiting, if one is."""
        waiter = self._waiter
        if waiter is not None:
            waiter.switch(_DEADLINE)

    def unread(self, data: bytes) -> None:
        """Push back bytes of the last :meth:`recv`, to be returned (with its :attr:`rx_epoch`) by the next one.

        A response head and the first events often arrive in one segment: the events keep that segment's kernel
        receive time instead of losing it (which made a whole request ``time_source: read``).
        """
        self._buf = data + self._buf
        self._buf_rx = self.rx_epoch

    def read_head(self, timeout_fn: Callable[[], float]) -> ResponseHead:
        """Read the status line and headers. ``timeout_fn()`` gives the seconds left for each read. Body bytes
        that came with the head are pushed back (:meth:`unread`).

        Raises:
            ReadTimeout, TruncatedStream: as :meth:`recv`; TruncatedStream also when the peer closed before
            sending a complete head.
            ProtocolError: on a malformed head or one larger than 64 KiB.
        """
        buf = b""
        while True:
            data = self.recv(timeout_fn())
            if not data:
                raise TruncatedStream("connection closed before the response head")
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > MAX_HEAD_BYTES:
                raise ProtocolError("response head larger than 64 KiB")
        rest = buf[end + 4 :]
        if rest:
            self.unread(rest)
        return parse_head(buf[:end])

    def read_body(self, framing: BodyFraming, timeout_fn: Callable[[], float], limit: int = 65536) -> bytes:
        """Read a small whole body (an error message, a JSON answer), best effort.

        Args:
            framing: the body's framing (:meth:`ResponseHead.framing`).
            timeout_fn: seconds left for each read.
            limit: stop once this many body bytes have arrived.

        Returns:
            The body bytes read until its end, EOF, the limit, a timeout, a broken connection or bad framing,
            whichever came first (never raises :class:`TransportError`).
        """
        out = b""
        try:
            while not framing.done and len(out) < limit:
                raw = self.recv(timeout_fn())
                if not raw:
                    break
                out += framing.feed(raw)
        except TransportError:
            pass
        return out
