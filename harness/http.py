"""A minimal HTTP/1.1 client for one streamed request at a time, built for exact timing under gevent.

Why our own: the hot path of the harness is "bytes arrive -> timestamp -> decode", and the libraries in
reach either buffer (geventhttpclient's ``iter_content``/``iter_lines`` block until 1 KiB / 4 KiB arrive,
which skews TTFT), hide timeouts (httpx/openai retries and a single read timeout), or cost ~10x the CPU per
chunk (the openai SDK's pydantic models). This module does only what a streaming benchmark needs: one
keep-alive connection, a request written in one ``sendall``, the status line and headers, and the body
decoded from ``Content-Length``, ``Transfer-Encoding: chunked`` or close-delimited framing, each read with
the timeout the caller gives. TLS uses :mod:`ssl` (``https://`` base URLs).

Every read returns as soon as the kernel has bytes: the caller timestamps the read, so an SSE event's time
is the arrival of the bytes that completed it.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["ChunkedDecoder", "Connection", "HTTPError", "HTTPTimeout", "Origin", "ResponseHead"]

_RECV = 65536

# Kernel receive timestamps (Linux SO_TIMESTAMPNS): the time a packet reached the socket, not the time this
# process got round to reading it. At C=64 a burst of chunks lands at once and a single process reads them one
# after another; read-time stamps are then late by up to the burst's processing time (measured p99 3.5-8 ms vs
# 0.2 ms with kernel stamps). The kernel enables stamping lazily and turns it off again when no socket asks
# for it, so one socket with the option stays open for the life of the process.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS
_CMSG_SPACE = 64
_keeper: socket.socket | None = None


def _enable_kernel_timestamps(sock: socket.socket) -> bool:
    """Turn on kernel receive timestamps on ``sock``; False where the platform has none."""
    global _keeper
    if _SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        if _keeper is None:
            _keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            _keeper.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        return True
    except OSError:
        return False


class HTTPError(Exception):
    """The connection failed or the server broke HTTP framing. ``kind`` is an error class of the harness."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


class HTTPTimeout(Exception):
    """A read or connect did not complete within the timeout the caller gave."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where requests go: scheme, host, port and the base path (e.g. ``/v1``) of an OpenAI-compatible API.

    Raises:
        ValueError: when the URL has no host or an unsupported scheme.
    """

    scheme: str
    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, url: str) -> Origin:
        """Parse ``http(s)://host[:port][/base]``; a base path without ``/v1`` gets ``/v1`` appended."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL {url!r}: expected http://host[:port][/path] or https://...")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = parts.path.rstrip("/")
        if not path.endswith("/v1"):
            path += "/v1"
        return cls(parts.scheme, parts.hostname, port, path)

    @property
    def host_header(self) -> str:
        """The ``Host`` header value."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


@dataclass(slots=True)
class ResponseHead:
    """Status line and headers of a response. Header names are lower-cased."""

    status: int
    reason: str
    headers: dict[str, str] = field(default_factory=dict)


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
        """Consume raw bytes; return the body bytes they carried (possibly empty).

        Raises:
            HTTPError: ``protocol_error`` on a malformed chunk header.
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
                    raise HTTPError("protocol_error", "chunk data not followed by CRLF")
                i += 2
                state = self._SIZE
            elif state == self._SIZE:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    if n - i > 1024:
                        raise HTTPError("protocol_error", "chunk size line too long")
                    break
                try:
                    size = int(buf[i:j].split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise HTTPError("protocol_error", f"bad chunk size {buf[i:j][:40]!r}") from None
                i = j + 2
                if size == 0:
                    state = self._TRAILER
                else:
                    self._left = size
                    state = self._DATA
            else:  # trailer lines until an empty line
                j = buf.find(b"\r\n", i)
                if j < 0:
                    break
                if j == i:
                    self.done = True
                i = j + 2
        self._state = state
        self._buf = buf[i:]
        return b"".join(out) if len(out) != 1 else out[0]


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
    def is_open(self) -> bool:
        """True while a socket is open (it may still turn out to be closed by the peer)."""
        return self.sock is not None

    @property
    def is_stamped(self) -> bool:
        """True when reads on this connection carry kernel receive timestamps (see :attr:`rx_epoch`)."""
        return self._stamped

    def open(self, timeout_s: float) -> None:
        """Connect (TCP, then TLS for https) within ``timeout_s`` seconds.

        Raises:
            HTTPTimeout: the connection was not established in time.
            HTTPError: ``connect_error`` when it was refused or failed.
        """
        self.close()
        try:
            sock = self._connect(timeout_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            stamped = self.origin.scheme == "http" and _enable_kernel_timestamps(sock)
            if self.origin.scheme == "https":
                ctx = ssl.create_default_context()
                if not self.verify_tls:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                sock = ctx.wrap_socket(sock, server_hostname=self.origin.host)
        except TimeoutError as e:
            raise HTTPTimeout(str(e)) from None
        except OSError as e:
            raise HTTPError("connect_error", f"{self.origin.host}:{self.origin.port}: {e}") from None
        self.sock = sock
        self._buf = b""
        self._stamped = stamped

    def close(self) -> None:
        """Close the socket if open (idempotent)."""
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None
        self._buf = b""

    def send(self, data: bytes, timeout_s: float) -> None:
        """Write the whole request.

        Raises:
            HTTPTimeout / HTTPError(``connect_error``): on a stalled or broken connection.
        """
        assert self.sock is not None
        try:
            self.sock.settimeout(timeout_s)
            self.sock.sendall(data)
        except TimeoutError:
            raise HTTPTimeout("send") from None
        except OSError as e:
            raise HTTPError("connect_error", f"send failed: {e}") from None

    def recv(self, timeout_s: float) -> bytes:
        """Return the next bytes from the socket (buffered bytes first); ``b""`` at EOF.

        Raises:
            HTTPTimeout: nothing arrived within ``timeout_s`` seconds (<= 0 means already expired).
            HTTPError: ``stream_truncated`` when the connection was reset.
        """
        if self._buf:
            data, self._buf = self._buf, b""
            self.rx_epoch = self._buf_rx
            return data
        assert self.sock is not None
        if timeout_s <= 0:
            raise HTTPTimeout("deadline passed")
        try:
            self.sock.settimeout(timeout_s)
            if not self._stamped:
                self.rx_epoch = None
                return self.sock.recv(_RECV)
            data, anc, _, _ = self.sock.recvmsg(_RECV, _CMSG_SPACE)
            self.rx_epoch = None
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == _SCM_TIMESTAMPNS and len(payload) >= 16:
                    sec, nsec = struct.unpack_from("qq", payload)
                    self.rx_epoch = sec + nsec * 1e-9
            return data
        except TimeoutError:
            raise HTTPTimeout("recv") from None
        except OSError as e:
            raise HTTPError("stream_truncated", f"connection error while reading: {e}") from None

    def unread(self, data: bytes) -> None:
        """Push back bytes of the last :meth:`recv`, to be returned (with its :attr:`rx_epoch`) by the next one.

        A response head and the first events often arrive in one segment: the events keep that segment's kernel
        receive time instead of losing it (which made a whole request ``time_source: read``).
        """
        self._buf = data + self._buf
        self._buf_rx = self.rx_epoch

    def read_head(self, timeout_fn: Callable[[], float]) -> ResponseHead:
        """Read the status line and headers. ``timeout_fn()`` gives the seconds left for each read.

        Raises:
            HTTPTimeout, HTTPError: as :meth:`recv`; ``protocol_error`` on a malformed head;
            ``stream_truncated`` when the peer closed before sending a complete head.
        """
        buf = b""
        while True:
            data = self.recv(timeout_fn())
            if not data:
                raise HTTPError("stream_truncated", "connection closed before the response head")
            buf += data
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > 65536:
                raise HTTPError("protocol_error", "response head larger than 64 KiB")
        head, rest = buf[:end], buf[end + 4 :]
        if rest:
            self.unread(rest)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise HTTPError("protocol_error", f"bad status line {lines[0][:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise HTTPError("protocol_error", f"bad status line {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        return ResponseHead(status, parts[2] if len(parts) > 2 else "", headers)
