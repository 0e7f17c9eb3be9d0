"""A recording reverse proxy on 127.0.0.1 for tests: forwards every request to an upstream server and keeps its
JSON body, so a test can see the request bodies the harness really sent. Pure standard library.

    with RecordingProxy("http://127.0.0.1:8123") as proxy:
        ...  # point the load generator at proxy.base_url; proxy.bodies("/v1/chat/completions") afterwards

Responses are relayed as they arrive (``read1`` pieces, re-sent with chunked transfer encoding), so a streamed
completion stays a stream; the proxy adds a little latency and is meant for checks of what was sent and
counted, not for timing.
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

#: Response headers not copied from upstream (the proxy sets its own framing).
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}
#: Seconds allowed for the upstream connection and each read.
UPSTREAM_TIMEOUT = 120.0


class RecordingProxy:
    """A threaded HTTP/1.1 reverse proxy to ``upstream`` (``http://host:port``) that records request bodies.

    Attributes:
        upstream: the upstream server's root URL (no trailing slash).
        requests: ``(method, path, body)`` of every request received, in arrival order; ``body`` is the parsed
            JSON body, or None when the request had none or it was not JSON.
    """

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The proxy's root URL, e.g. ``http://127.0.0.1:41234``.

        Raises:
            RuntimeError: not started.
        """
        if self._server is None:
            raise RuntimeError("proxy not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def bodies(self, path: str) -> list[Any]:
        """The JSON bodies of the POST requests to ``path`` (e.g. ``/v1/chat/completions``), in arrival order."""
        with self._lock:
            return [b for m, p, b in self.requests if m == "POST" and p == path]

    def _record(self, method: str, path: str, body: Any) -> None:
        with self._lock:
            self.requests.append((method, path, body))

    def start(self) -> RecordingProxy:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread; return ``self``."""
        up = urlsplit(self.upstream)
        up_host, up_port = up.hostname or "127.0.0.1", up.port or 80
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                proxy._record(self.command, urlsplit(self.path).path, body)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS | {"host"}}
                conn = http.client.HTTPConnection(up_host, up_port, timeout=UPSTREAM_TIMEOUT)
                try:
                    conn.request(self.command, self.path, body=raw or None, headers=headers)
                    resp = conn.getresponse()
                    self.send_response(resp.status, resp.reason)
                    for k, v in resp.getheaders():
                        if k.lower() not in _HOP_HEADERS:
                            self.send_header(k, v)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    while piece := resp.read1(65536):
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                finally:
                    conn.close()

            do_GET = _relay
            do_POST = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (safe to call twice)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5.0)
            self._thread = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
