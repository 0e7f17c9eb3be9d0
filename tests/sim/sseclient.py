"""Tiny loopback client for the simulator tests: plain ``http.client`` and raw sockets, timestamped SSE events."""

from __future__ import annotations

import http.client
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Event:
    """One SSE event: arrival time (perf_counter seconds) and its decoded ``data`` (dict or the string ``[DONE]``)."""

    t: float
    data: Any

    @property
    def delta(self) -> dict[str, Any]:
        choices = self.data.get("choices") or [{}]
        return choices[0].get("delta") or {}


@dataclass
class Reply:
    """A finished HTTP exchange."""

    status: int
    headers: dict[str, str]
    body: bytes = b""
    events: list[Event] = field(default_factory=list)
    t_sent: float = 0.0
    t_end: float = 0.0

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def chunks(self) -> list[Event]:
        """Events that are chat-completion chunks (not ``[DONE]``)."""
        return [e for e in self.events if isinstance(e.data, dict)]

    def token_events(self, field_name: str) -> list[Event]:
        """Chunks whose delta has non-empty ``field_name`` text."""
        return [e for e in self.chunks if e.delta.get(field_name)]

    def text(self, field_name: str) -> str:
        return "".join(e.delta[field_name] for e in self.token_events(field_name))


def hostport(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    return parts.hostname, parts.port


def connect(url: str, timeout: float = 20.0) -> http.client.HTTPConnection:
    host, port = hostport(url)
    return http.client.HTTPConnection(host, port, timeout=timeout)


def request(
    url: str,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    conn: http.client.HTTPConnection | None = None,
    timeout: float = 20.0,
) -> Reply:
    """Send one request; SSE responses are read line by line with arrival timestamps."""
    own = conn is None
    c = conn or connect(url, timeout)
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    payload = json.dumps(body).encode() if body is not None and not isinstance(body, bytes) else body
    t_sent = time.perf_counter()
    c.request(method, path, payload, hdrs)
    resp = c.getresponse()
    reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, t_sent=t_sent)
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        data_lines: list[str] = []
        while True:
            line = resp.readline()
            if not line:
                break
            text = line.decode().rstrip("\r\n")
            if text.startswith("data: "):
                data_lines.append(text[6:])
            elif text == "" and data_lines:
                joined = "\n".join(data_lines)
                data_lines = []
                reply.events.append(Event(time.perf_counter(), joined if joined == "[DONE]" else json.loads(joined)))
    else:
        reply.body = resp.read()
    reply.t_end = time.perf_counter()
    if own:
        c.close()
    return reply


def chat(url: str, body: dict[str, Any], **kw: Any) -> Reply:
    """POST /v1/chat/completions."""
    return request(url, "POST", "/v1/chat/completions", body, **kw)


def raw_exchange(sock: socket.socket, payload: bytes, timeout: float = 20.0) -> bytes:
    """Send one raw HTTP request on ``sock`` and read until the terminating zero-length chunk."""
    sock.settimeout(timeout)
    sock.sendall(payload)
    buf = b""
    while not buf.endswith(b"0\r\n\r\n"):
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"server closed the connection; got {buf[-200:]!r}")
        buf += data
    return buf


def raw_chat_request(body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%b" % (len(data), data)
    )
