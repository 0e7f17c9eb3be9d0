"""A loopback HTTP server that replays the public stream cases byte for byte, at their offsets.

Each accepted request takes the next case name from :attr:`ReplayServer.queue` and writes that case's
bytes at ``t * scale`` seconds after the request was read, logging when each write actually ended
(:attr:`ReplayServer.write_log`, the ground truth for timing checks). Framing: ``"close"`` (no length, connection closed
after the last write, as the cases describe) or ``"chunked"`` (one HTTP chunk per write, then the final
zero-length chunk, except for a case that ends by dropping the connection; the connection is then kept open
for the next request).
"""

from __future__ import annotations

import collections
import socket
import time
from typing import Any

import gevent
from gevent.server import StreamServer

from tests.stream_cases import fixtures

CUT_CASES = {"C10/e_connection_closed_mid_stream"}


class ReplayServer:
    """Serve queued stream cases on 127.0.0.1 (port chosen by the OS). Use as a context manager."""

    def __init__(self, framing: str = "close", scale: float = 1.0, head_delay: float = 0.0) -> None:
        self.framing = framing
        self.scale = scale
        self.head_delay = head_delay
        self.queue: collections.deque[str] = collections.deque()
        self.requests: list[dict[str, Any]] = []
        #: per request: {scheduled offset t (unscaled): seconds after the request was read when that write began}
        self.write_log: list[dict[float, float]] = []
        self.connections = 0
        self.server = StreamServer(("127.0.0.1", 0), self._handle)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> ReplayServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(timeout=1)

    def _read_request(self, sock: Any, buf: bytes) -> tuple[bytes | None, bytes]:
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                return None, b""
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(rest) < length:
            rest += sock.recv(65536)
        self.requests.append({"head": head.decode("latin-1"), "body": rest[:length]})
        return head, rest[length:]

    def _handle(self, sock: Any, addr: Any) -> None:
        self.connections += 1
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as real servers do: no Nagle delay
        buf = b""
        try:
            while True:
                head, buf = self._read_request(sock, buf)
                if head is None:
                    return
                t0 = time.perf_counter()
                name = self.queue.popleft()
                if not self._serve(sock, name, t0):
                    return
        finally:
            sock.close()

    def _serve(self, sock: Any, name: str, t0: float) -> bool:
        """Write one case; return True when the connection may carry another request."""
        case = fixtures()[name]
        status = case["http_status"]
        headers = dict(case["headers"])
        if status != 200:
            body = b'{"error":{"message":"rate limited","type":"rate_limit"}}'
            hdr = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
            sock.sendall(f"HTTP/1.1 {status} Error\r\n{hdr}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            return True
        log: dict[float, float] = {}
        self.write_log.append(log)
        chunked = self.framing == "chunked"
        headers["Transfer-Encoding" if chunked else "Connection"] = "chunked" if chunked else "close"
        hdr = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        if self.head_delay:
            gevent.sleep(self.head_delay)
        sock.sendall(f"HTTP/1.1 200 OK\r\n{hdr}\r\n".encode())
        for w in case["writes"]:
            delay = t0 + w["t"] * self.scale - time.perf_counter()
            if delay > 0:
                gevent.sleep(delay)
            data = w["bytes"]
            # Logged just before the write: on loopback the client can receive the bytes before sendall returns.
            log[w["t"]] = time.perf_counter() - t0
            sock.sendall(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        if not chunked or name in CUT_CASES:
            return False
        sock.sendall(b"0\r\n\r\n")
        return True
