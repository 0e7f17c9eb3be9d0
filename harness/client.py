"""Streaming OpenAI-compatible chat client: one request in, one classified :class:`RequestResult` out.

The request is POSTed to ``{base}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage``; the body is read with :mod:`harness.http`, decoded with
:class:`~harness.sse.SSEDecoder` and interpreted with :class:`~harness.interpret.StreamInterpreter`.
There are no retries of any kind: a failed request is reported as failed, with its error class.

Timing anchor: ``t = 0`` is taken immediately before the request bytes are written to an already open
connection; opening a new connection is timed separately (``RequestResult.connect``). On Linux over plain HTTP a
chunk's time is the kernel's receive time of the bytes that completed it (``SO_TIMESTAMPNS``), so a busy client
process does not delay its timestamps; elsewhere it is the time the bytes were read
(``RequestResult.time_source``).
"""

from __future__ import annotations

import select
import time
from dataclasses import dataclass
from typing import Any

from orjson import dumps as _dumps
from orjson import loads as _loads

from harness import __version__
from harness.http import ChunkedDecoder, Connection, HTTPError, HTTPTimeout, Origin
from harness.interpret import StreamInterpreter
from harness.result import RequestIdentity, RequestResult
from harness.sse import SSEDecoder

__all__ = ["ChatClient", "Timeouts"]

_USER_AGENT = f"llmload/{__version__}"
#: A kernel receive stamp older than this (seconds) is not trusted (e.g. the wall clock stepped).
_MAX_STAMP_LAG_S = 60.0


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Per-request timeouts in seconds. Each one that fires fails the request with its own error class.

    Attributes:
        connect: opening the TCP (and TLS) connection.
        first_byte: request sent -> response status line and headers.
        first_token: request sent -> first token-bearing chunk (SSE comments and role-only chunks do not count,
            so keep-alive pings cannot hide a stalled prefill).
        idle: largest allowed gap after a token-bearing chunk before the next one (or the end of the stream).
        total: request sent -> end of the stream.
    """

    connect: float = 10.0
    first_byte: float = 300.0
    first_token: float = 600.0
    idle: float = 120.0
    total: float = 3600.0


def _status_class(status: int) -> str:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    if 500 <= status < 600:
        return "http_5xx"
    return "http_other"


class ChatClient:
    """A streaming chat-completions client holding one keep-alive connection (use one per Locust user).

    Args:
        base_url: ``http(s)://host:port[/v1]``.
        api_key: sent as ``Authorization: Bearer``; never logged or recorded.
        timeouts: see :class:`Timeouts`.
        headers: extra request headers.
        verify_tls: verify certificates for https.

    Raises:
        ValueError: on an unusable base URL.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
        headers: dict[str, str] | None = None,
        verify_tls: bool = True,
    ) -> None:
        self.origin = Origin.parse(base_url)
        self.timeouts = timeouts or Timeouts()
        self.conn = Connection(self.origin, verify_tls=verify_tls)
        head = {
            "Host": self.origin.host_header,
            "User-Agent": _USER_AGENT,
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if api_key:
            head["Authorization"] = f"Bearer {api_key}"
        head.update(headers or {})
        self._head = "".join(f"{k}: {v}\r\n" for k, v in head.items())
        self._path = f"{self.origin.base_path}/chat/completions"

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def _ensure_open(self) -> float:
        """Open the connection if needed (or if the server closed it while idle); return seconds spent."""
        conn = self.conn
        if conn.sock is not None:
            try:
                readable, _, _ = select.select([conn.sock], [], [], 0)
            except (OSError, ValueError):
                readable = [conn.sock]
            if not readable:
                return 0.0
            conn.close()  # readable while idle means EOF or garbage: never reuse it
        c0 = time.perf_counter()
        conn.open(self.timeouts.connect)
        return time.perf_counter() - c0

    def stream_chat(
        self,
        payload: dict[str, Any],
        identity: RequestIdentity,
        *,
        keep_chunk_times: bool = False,
        timeouts: Timeouts | None = None,
    ) -> RequestResult:
        """Send one streamed chat completion and measure it. Never raises for server or network failures.

        Args:
            payload: the JSON body (``messages``, ``model``, ``max_tokens``...); ``stream`` and
                ``stream_options.include_usage`` are forced on.
            identity: who sends it and when in the run, copied into the result (the result's ``max_tokens`` is
                the payload's ``max_tokens``, else ``max_completion_tokens``).
            keep_chunk_times: keep every token-bearing chunk's arrival time in the result.
            timeouts: override the client's timeouts for this request (e.g. the warm-up's).

        Returns:
            The classified result; ``ok`` False with ``error_class`` set when anything failed.
        """
        to = timeouts or self.timeouts
        body = dict(payload)
        body["stream"] = True
        so = dict(body.get("stream_options") or {})
        so["include_usage"] = True
        body["stream_options"] = so
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        data = _dumps(body)
        req = f"POST {self._path} HTTP/1.1\r\n{self._head}Content-Length: {len(data)}\r\n\r\n".encode("latin-1") + data
        res = RequestResult.for_request(identity, max_tokens)
        interp = StreamInterpreter(max_tokens, keep_chunk_times)
        perf = time.perf_counter
        try:
            res.connect = self._ensure_open()
        except HTTPTimeout:
            res.start_wall = time.time()
            res.error_class, res.error_detail = "timeout_connect", f"no connection within {to.connect} s"
            return interp.finish(res, 0.0)
        except HTTPError as e:
            res.start_wall = time.time()
            res.error_class, res.error_detail = e.kind, e.detail
            return interp.finish(res, 0.0)
        res.start_wall = time.time()
        t0 = perf()
        conn = self.conn
        total_dl = t0 + to.total
        phase_name = "first_byte"
        try:
            conn.send(req, min(to.first_byte, to.total))
            head_dl = min(t0 + to.first_byte, total_dl)
            head = conn.read_head(lambda: head_dl - perf())
            res.t_headers = perf() - t0
            read_lag = -1.0  # the largest read lag so far (see RequestResult.read_lag_max)
            if conn.rx_epoch is not None:  # the head's arrival, not its (possibly late) read
                lag = time.time() - conn.rx_epoch
                if lag >= 0.0:
                    res.read_lag_max = read_lag = lag
                    if lag < _MAX_STAMP_LAG_S:
                        res.t_headers = max(res.t_headers - lag, 0.0)
            res.http_status = head.status
            hdrs = head.headers
            chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
            length = int(hdrs["content-length"]) if "content-length" in hdrs and not chunked else None
            if not 200 <= head.status < 300:
                text = self._read_error_body(conn, chunked, length, min(total_dl, perf() + 10.0))
                res.error_class = _status_class(head.status)
                retry = hdrs.get("retry-after")
                res.error_detail = f"HTTP {head.status}{f' retry-after={retry}' if retry else ''}: {text[:300]}"
                conn.close()
                return interp.finish(res, perf() - t0)
            if "json" in hdrs.get("content-type", ""):
                text = self._read_error_body(conn, chunked, length, min(total_dl, perf() + 10.0))
                conn.close()
                return interp.finish(res, perf() - t0, "not_sse", f"content-type json: {text[:300]}")
            keep_alive = (chunked or length is not None) and hdrs.get("connection", "").lower() != "close"
            dechunk = _Dechunk(chunked, length)
            kernel_stamps = conn.is_stamped
            t_prev = res.t_headers
            dec = SSEDecoder()
            feed, on_payload = dec.feed, interp.on_payload
            t = res.t_headers
            while True:
                if interp.ttft is None:
                    phase_name = "first_token"
                    dl = t0 + to.first_token
                else:
                    phase_name = "idle"
                    dl = t0 + interp.t_last + to.idle  # type: ignore[operator]
                if total_dl < dl:
                    dl, phase_name = total_dl, "total"
                raw = conn.recv(dl - perf())
                t = perf() - t0
                rx = conn.rx_epoch
                if rx is not None:  # when the kernel got the bytes, not when this process read them
                    lag = time.time() - rx
                    if lag > read_lag:  # a lag too large to trust as a stamp still says the client was late
                        res.read_lag_max = read_lag = lag
                    if 0.0 <= lag < _MAX_STAMP_LAG_S:
                        # Never earlier than the previous read's time: TCP may coalesce later bytes into an
                        # earlier segment, which keeps that segment's (earlier) stamp.
                        t = max(t - lag, t_prev)
                    else:
                        kernel_stamps = False
                elif raw:
                    kernel_stamps = False
                t_prev = t
                if not raw:
                    conn.close()
                    res.time_source = "kernel" if kernel_stamps else "read"
                    err = None if dechunk.complete_on_eof() else "stream_truncated"
                    return interp.finish(
                        res,
                        t,
                        err,
                        "connection closed before the end of the body" if err else None,
                        dec.error_field,
                        dec.comments,
                    )
                body_bytes = dechunk.feed(raw)
                if body_bytes:
                    for p in feed(body_bytes):
                        on_payload(t, p)
                if dechunk.done:
                    break
            if not keep_alive:
                conn.close()
            res.time_source = "kernel" if kernel_stamps else "read"
            return interp.finish(res, t, None, None, dec.error_field, dec.comments)
        except HTTPTimeout:
            conn.close()
            now = perf()
            if now >= total_dl - 1e-4:
                phase_name = "total"
            limit = {"first_byte": to.first_byte, "first_token": to.first_token, "idle": to.idle, "total": to.total}
            return interp.finish(
                res, now - t0, f"timeout_{phase_name}", f"timeouts.{phase_name} = {limit[phase_name]} s exceeded"
            )
        except HTTPError as e:
            conn.close()
            return interp.finish(res, perf() - t0, e.kind, e.detail)

    @staticmethod
    def _read_error_body(conn: Connection, chunked: bool, length: int | None, deadline: float) -> str:
        """Read a (small) non-stream body for an error message; best effort, at most 64 KiB."""
        dechunk = _Dechunk(chunked, length)
        out = b""
        try:
            while not dechunk.done and len(out) < 65536:
                raw = conn.recv(deadline - time.perf_counter())
                if not raw:
                    break
                out += dechunk.feed(raw)
        except (HTTPTimeout, HTTPError):
            pass
        return out.decode("utf-8", "replace")

    def list_models(self) -> list[str]:
        """``GET {base}/models`` and return the model ids (uses its own short-lived connection).

        Raises:
            HTTPError / HTTPTimeout: when the server cannot be reached or answers with non-2xx.
        """
        conn = Connection(self.origin, self.conn.verify_tls)
        try:
            conn.open(self.timeouts.connect)
            head_lines = self._head.replace("Accept: text/event-stream", "Accept: application/json")
            conn.send(
                f"GET {self.origin.base_path}/models HTTP/1.1\r\n{head_lines}Connection: close\r\n\r\n".encode(), 30
            )
            dl = time.perf_counter() + 30
            head = conn.read_head(lambda: dl - time.perf_counter())
            hdrs = head.headers
            chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
            length = int(hdrs["content-length"]) if "content-length" in hdrs and not chunked else None
            text = self._read_error_body(conn, chunked, length, dl)
        finally:
            conn.close()
        if not 200 <= head.status < 300:
            raise HTTPError(_status_class(head.status), f"GET /models: HTTP {head.status}: {text[:200]}")
        obj = _loads(text)
        return [m["id"] for m in obj.get("data", []) if isinstance(m, dict) and "id" in m]


class _Dechunk:
    """Body framing: chunked, Content-Length, or close-delimited; ``done`` when the body is complete."""

    __slots__ = ("_chunked", "_left", "done")

    def __init__(self, chunked: bool, length: int | None) -> None:
        self._chunked = ChunkedDecoder() if chunked else None
        self._left = length
        self.done = length == 0

    def feed(self, raw: bytes) -> bytes:
        """Body bytes carried by ``raw`` (framing removed); sets ``done`` at the end of the body."""
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

    def complete_on_eof(self) -> bool:
        """True when EOF is a legitimate end of this body (close-delimited framing)."""
        return self._chunked is None and self._left is None
