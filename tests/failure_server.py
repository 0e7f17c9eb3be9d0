"""A loopback HTTP server that fails the way real servers do, one behaviour per path prefix.

``/<case>/v1/chat/completions`` and ``/<case>/v1/models`` answer as case ``<case>`` of :data:`CASES`: a status, headers
and a body (JSON error bodies as vLLM and OpenAI send them, an HTML page as a web server sends it). Bounded: it
answers each request once and closes the connection. Use as a context manager; :attr:`FailureServer.url` is the base.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Fake key the 401 case echoes in its body (must never reach a report or Locust's failure text).
ECHOED_KEY = "sk-test-ECHOED0123456789abcdef"

HTML_PAGE = "<!DOCTYPE html><html><head><title>Not Found</title></head><body><h1>Not Found</h1>" + "x" * 400 + \
    "</body></html>"

#: case -> (status, extra headers, body, content type)
CASES: dict[str, tuple[int, dict[str, str], str, str]] = {
    "auth": (401, {}, '{"error":{"message":"Incorrect API key provided: ' + ECHOED_KEY + '.","type":'
             '"invalid_request_error","code":"invalid_api_key"}}', "application/json"),
    "context": (400, {}, '{"object":"error","message":"This model\'s maximum context length is 32768 tokens. However, '
                'you requested 40960 tokens (8192 in the messages, 32768 in the completion). Please reduce the '
                'length of the messages or completion.","type":"BadRequestError","param":null,"code":400}',
                "application/json"),
    "throttle": (429, {"Retry-After": "3"}, '{"error":{"message":"Rate limit reached for requests","type":'
                 '"requests","code":"rate_limit_exceeded"}}', "application/json"),
    "html404": (404, {}, HTML_PAGE, "text/html"),
    "html200": (200, {}, HTML_PAGE, "text/html"),
    "server": (503, {}, '{"detail":"Service Unavailable: engine dead (request 9f8e7d6c5b4a3f2e)"}',
               "application/json"),
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        case = self.path.strip("/").split("/", 1)[0]
        status, headers, body, ctype = CASES.get(case, (404, {}, "no such case", "text/plain"))
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    do_GET = _answer
    do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read results, not the server's access log."""


class FailureServer:
    """Serve :data:`CASES` on 127.0.0.1 (port chosen by the OS) from a daemon thread."""

    def __init__(self) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, case: str) -> str:
        """The OpenAI base URL (``…/v1``) of ``case``."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{case}/v1"

    def __enter__(self) -> FailureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
