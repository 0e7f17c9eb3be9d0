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


@dataclass
class RawStream:
    """A streamed response read as raw bytes: the head, the de-chunked body and its SSE events (exact bytes)."""

    head: bytes
    body: bytes
    complete: bool

    @property
    def status(self) -> int:
        return int(self.head.split(b" ", 2)[1])

    @property
    def headers(self) -> dict[str, str]:
        lines = self.head.decode("latin-1").split("\r\n")[1:]
        return {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines if ln)}

    @property
    def events(self) -> list[bytes]:
        """Every SSE event (data events and comments) with its terminating blank line, in order."""
        parts = self.body.split(b"\n\n")
        return [p + b"\n\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

    @property
    def data(self) -> list[Any]:
        """Decoded ``data:`` payloads (dicts, or the string ``[DONE]``), comments skipped."""
        out: list[Any] = []
        for ev in self.events:
            if ev.startswith(b"data: "):
                payload = ev[6:].rstrip(b"\n")
                out.append("[DONE]" if payload == b"[DONE]" else json.loads(payload))
        return out


def raw_stream(url: str, body: dict[str, Any], headers: dict[str, str] | None = None,
               timeout: float = 20.0) -> RawStream:
    """POST a chat completion on a fresh connection (``Connection: close``) and read the raw response."""
    data = json.dumps(body).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items()).encode("latin-1")
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n" + extra
           + b"Content-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(data), data))
    with socket.create_connection(hostport(url), timeout=timeout) as s:
        s.sendall(req)
        raw = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return RawStream(head, rest, True)
    body_out = b""
    complete = False
    while rest:
        line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(line.split(b";")[0], 16)
        if size == 0:
            complete = True
            break
        body_out += rest[:size]
        rest = rest[size + 2:]
    return RawStream(head, body_out, complete)
