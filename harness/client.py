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
from typing import Any

from orjson import dumps as _dumps
from orjson import loads as _loads

from harness import __version__
from harness.chunkpath import ChunkPath
from harness.chunkpath import active as _active_path
from harness.failures import is_html
from harness.http import (
    ConnectError,
    Connection,
    ConnectTimeout,
    FirstByteTimeout,
    FirstTokenTimeout,
    IdleTimeout,
    Origin,
    ProtocolError,
    ReadTimeout,
    ResponseHead,
    TotalTimeout,
    TransportError,
    TransportTimeout,
    TruncatedStream,
    WriteTimeout,
    parse_retry_after,
)
from harness.interpret import StreamInterpreter, Transcript
from harness.result import RequestIdentity, RequestResult
from harness.sse import SSEDecoder
from harness.timeouts import Timeouts
from harness.usable import UsableRule

__all__ = ["ChatClient", "ClientError", "NotOpenAIServer", "Timeouts"]

_USER_AGENT = f"llmload/{__version__}"
#: A kernel receive stamp older than this (seconds) is not trusted (e.g. the wall clock stepped).
_MAX_STAMP_LAG_S = 60.0
#: Seconds allowed for reading the body of a non-stream answer (an error message) once its head has arrived.
_NON_STREAM_BODY_S = 10.0


#: The error class (a key of :data:`harness.result.ERROR_CLASSES`) of every transport failure a request can end
#: in. ``ReadTimeout`` and ``WriteTimeout`` never leave this module: they become the timeout of the phase whose
#: deadline the read or write was given (:func:`_phase_timeout`).
_ERROR_CLASS: dict[type[TransportError], str] = {
    ConnectError: "connect_error",
    ConnectTimeout: "timeout_connect",
    FirstByteTimeout: "timeout_first_byte",
    FirstTokenTimeout: "timeout_first_token",
    IdleTimeout: "timeout_idle",
    TotalTimeout: "timeout_total",
    TruncatedStream: "stream_truncated",
    ProtocolError: "protocol_error",
}

#: The timeout of each phase of a request; the key is also the :class:`Timeouts` field that bounds the phase.
_PHASE_TIMEOUT: dict[str, type[TransportTimeout]] = {
    "first_byte": FirstByteTimeout,
    "first_token": FirstTokenTimeout,
    "idle": IdleTimeout,
    "total": TotalTimeout,
}


def _phase_timeout(phase: str, to: Timeouts, total_deadline: float) -> TransportTimeout:
    """The timeout of ``phase`` (a key of :data:`_PHASE_TIMEOUT`), or :class:`TotalTimeout` once the total
    deadline (``time.perf_counter`` seconds) has passed."""
    if time.perf_counter() >= total_deadline - 1e-4:
        phase = "total"
    return _PHASE_TIMEOUT[phase](f"timeouts.{phase} = {getattr(to, phase)} s exceeded")


def _status_class(status: int) -> str:
    if status == 429:
        return "http_429"
    if 400 <= status < 500:
        return "http_4xx"
    if 500 <= status < 600:
        return "http_5xx"
    return "http_other"


def _api_base(path: str) -> str:
    """The API's base path from a base URL's path: ``/v1`` is appended unless the path ends in it."""
    return path if path.endswith("/v1") else f"{path}/v1"


class ClientError(Exception):
    """A request outside the measured stream (:meth:`ChatClient.list_models`) failed.

    Attributes:
        error_class: a key of :data:`harness.result.ERROR_CLASSES` (``connect_error``, ``timeout_connect``,
            ``http_4xx``...).
        detail: what happened, for humans.
        status: the HTTP status of a non-2xx answer, else None.

    ``str()`` is ``"<error_class>: <detail>"``.
    """

    def __init__(self, error_class: str, detail: str, status: int | None = None) -> None:
        super().__init__(f"{error_class}: {detail}")
        self.error_class = error_class
        self.detail = detail
        self.status = status


class NotOpenAIServer(ClientError):
    """``GET /v1/models`` answered with an HTML page (any status): the host is a web server, not an
    OpenAI-compatible one. ``detail`` is the one-line explanation (never the page); ``error_class`` is
    ``not_openai``."""

    def __init__(self, detail: str, status: int) -> None:
        super().__init__("not_openai", detail, status)


class ChatClient:
    """A streaming chat-completions client holding one keep-alive connection (use one per Locust user).

    Args:
        base_url: ``http(s)://host:port[/path]``; requests go to ``{path}/v1/...`` (``/v1`` is not appended
            again when the path already ends in it).
        api_key: sent as ``Authorization: Bearer``; never logged or recorded.
        timeouts: see :class:`Timeouts`.
        headers: extra request headers.
        verify_tls: verify certificates for https.
        usable: the profile's usable-sample rule, applied to every result's ``usable`` / ``usable_reason``
            (None: usable = ok and not truncated). Answer text is kept (bounded) only when it has a text check.
        chunk_path: the per-read stream path (:mod:`harness.chunkpath`: compiled or pure Python; same records);
            None: the process's (:func:`harness.chunkpath.active`).

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
        usable: UsableRule | None = None,
        chunk_path: ChunkPath | None = None,
    ) -> None:
        self.origin = Origin.parse(base_url)
        #: the per-read stream path this client runs (``chunk_path.name``: ``native`` or ``python``)
        self.chunk_path = chunk_path or _active_path()
        self.usable = usable
        #: The API's base path (``/v1`` or ``/prefix/v1``).
        self.api_base = _api_base(self.origin.base_path)
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
        self._path = f"{self.api_base}/chat/completions"

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def _ensure_open(self, timeout_s: float) -> float:
        """Open the connection if needed (or if the server closed it while idle); return seconds spent.

        Raises:
            ConnectTimeout, ConnectError: as :meth:`Connection.open`.
        """
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
        conn.open(timeout_s)
        return time.perf_counter() - c0

    def _request_bytes(self, payload: dict[str, Any]) -> tuple[bytes, int | None]:
        """The whole POST for ``payload`` (``stream`` and ``stream_options.include_usage`` forced on) and the
        request's ``max_tokens`` (or ``max_completion_tokens``; None when unset)."""
        body = dict(payload)
        body["stream"] = True
        so = dict(body.get("stream_options") or {})
        so["include_usage"] = True
        body["stream_options"] = so
        data = _dumps(body)
        head = f"POST {self._path} HTTP/1.1\r\n{self._head}Content-Length: {len(data)}\r\n\r\n"
        return head.encode("latin-1") + data, body.get("max_tokens", body.get("max_completion_tokens"))

    def stream_chat(
        self,
        payload: dict[str, Any],
        identity: RequestIdentity,
        *,
        keep_chunk_times: bool = False,
        timeouts: Timeouts | None = None,
        transcript: Transcript | None = None,
    ) -> RequestResult:
        """Send one streamed chat completion and measure it. Never raises for server or network failures.

        Args:
            payload: the JSON body (``messages``, ``model``, ``max_tokens``...); ``stream`` and
                ``stream_options.include_usage`` are forced on.
            identity: who sends it and when in the run, copied into the result (the result's ``max_tokens`` is
                the payload's ``max_tokens``, else ``max_completion_tokens``).
            keep_chunk_times: keep every token-bearing chunk's arrival time in the result.
            timeouts: override the client's timeouts for this request (e.g. the warm-up's).
            transcript: when given, the reply's reasoning and answer text is appended to it (multi-turn
                conversations carry the answer into the next turn); the result never holds text.

        Returns:
            The classified result; ``ok`` False with ``error_class`` set when anything failed.
        """
        to = timeouts or self.timeouts
        req, max_tokens = self._request_bytes(payload)
        res = RequestResult.for_request(identity, max_tokens)
        interp: StreamInterpreter = self.chunk_path.interpreter(max_tokens, keep_chunk_times, self.usable, transcript)
        try:
            res.connect = self._ensure_open(to.connect)
        except TransportError as e:
            res.start_wall = time.time()
            res.error_class, res.error_detail = _ERROR_CLASS[type(e)], e.detail
            return interp.finish(res, 0.0)
        res.start_wall = time.time()
        t0 = time.perf_counter()
        dec: SSEDecoder = self.chunk_path.decoder()
        try:
            head = self._send_and_read_head(req, res, t0, to)
            if not 200 <= head.status < 300 or "json" in head.content_type:
                return self._finish_not_a_stream(head, res, interp, t0, to)
            e2e = self._read_stream(head, res, interp, dec, t0, to)
        except TransportError as e:
            self.conn.close()
            e2e, err, detail = time.perf_counter() - t0, _ERROR_CLASS[type(e)], e.detail
            return interp.finish(res, e2e, err, detail, dec.error_field, dec.comments)
        return interp.finish(res, e2e, None, None, dec.error_field, dec.comments)

    def _send_and_read_head(self, req: bytes, res: RequestResult, t0: float, to: Timeouts) -> ResponseHead:
        """Send ``req`` and read the response head; set ``res.t_headers`` (kernel arrival time when stamped),
        ``read_lag_max``, ``http_status`` and ``retry_after_s``. ``t0``: perf_counter time of "request sent".

        Raises:
            FirstByteTimeout / TotalTimeout: the head did not arrive in time.
            ConnectError, TruncatedStream, ProtocolError: as :class:`Connection`.
        """
        conn, perf = self.conn, time.perf_counter
        total_dl = t0 + to.total
        head_dl = min(t0 + to.first_byte, total_dl)
        try:
            conn.send(req, min(to.first_byte, to.total))
            head = conn.read_head(lambda: head_dl - perf())
        except (WriteTimeout, ReadTimeout):
            raise _phase_timeout("first_byte", to, total_dl) from None
        res.t_headers = perf() - t0
        if conn.rx_epoch is not None:  # the head's arrival, not its (possibly late) read
            lag = time.time() - conn.rx_epoch
            if lag >= 0.0:
                res.read_lag_max = lag
                if lag < _MAX_STAMP_LAG_S:
                    res.t_headers = max(res.t_headers - lag, 0.0)
        res.http_status = head.status
        res.retry_after_s = parse_retry_after(head.headers.get("retry-after"))
        return head

    def _finish_not_a_stream(
        self, head: ResponseHead, res: RequestResult, interp: StreamInterpreter, t0: float, to: Timeouts
    ) -> RequestResult:
        """Classify a non-2xx answer (``http_*``) or a 2xx JSON body (``not_sse``): read the body for the error
        detail (best effort, at most 10 s and within ``timeouts.total``) and close the connection.

        Raises:
            ProtocolError: on a malformed ``Content-Length``.
        """
        deadline = min(t0 + to.total, time.perf_counter() + _NON_STREAM_BODY_S)
        body = self.conn.read_body(head.framing(), lambda: deadline - time.perf_counter())
        text = body.decode("utf-8", "replace")
        self.conn.close()
        e2e = time.perf_counter() - t0
        if 200 <= head.status < 300:
            return interp.finish(res, e2e, "not_sse", f"content-type json: {text[:300]}")
        retry = head.headers.get("retry-after")
        res.error_class = _status_class(head.status)
        res.error_detail = f"HTTP {head.status}{f' retry-after={retry}' if retry else ''}: {text[:300]}"
        return interp.finish(res, e2e)

    def _read_stream(
        self,
        head: ResponseHead,
        res: RequestResult,
        interp: StreamInterpreter,
        dec: SSEDecoder,
        t0: float,
        to: Timeouts,
    ) -> float:
        """Read the event stream to its end, handing every SSE payload to ``interp`` with its arrival time; set
        ``res.time_source`` and ``res.read_lag_max``.

        Returns:
            Seconds from "request sent" (``t0``, perf_counter) to the arrival of the body's last bytes.

        Raises:
            FirstTokenTimeout / IdleTimeout / TotalTimeout: the phase's deadline passed.
            TruncatedStream: the connection closed or broke before the end of a framed body.
            ProtocolError: on malformed framing.
        """
        conn, perf, wall = self.conn, time.perf_counter, time.time
        path = self.chunk_path
        framing = path.framing(head.chunked, head.content_length)
        feed_read = path.feed_read
        keep_alive = head.keep_alive
        kernel_stamps = conn.is_stamped
        read_lag = -1.0 if res.read_lag_max is None else res.read_lag_max  # the largest read lag so far
        total_dl = t0 + to.total
        t = t_prev = res.t_headers or 0.0
        phase = "first_token"
        try:
            while True:
                if interp.ttft is None:
                    phase, dl = "first_token", t0 + to.first_token
                else:
                    phase, dl = "idle", t0 + interp.t_last + to.idle  # type: ignore[operator]
                if total_dl < dl:
                    dl, phase = total_dl, "total"
                raw = conn.recv(dl - perf())
                t = perf() - t0
                rx = conn.rx_epoch
                if rx is not None:  # when the kernel got the bytes, not when this process read them
                    lag = wall() - rx
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
                    framing.end_of_input()  # TruncatedStream unless the body was close-delimited
                    return t
                if feed_read(framing, dec, interp, t, raw):  # de-framing, SSE events, each payload interpreted
                    break
        except ReadTimeout:
            raise _phase_timeout(phase, to, total_dl) from None
        if not keep_alive:
            conn.close()
        res.time_source = "kernel" if kernel_stamps else "read"
        return t

    def model_entries(self) -> list[dict[str, Any]]:
        """``GET {base}/models`` and return its ``data`` entries (OpenAI: ``{"id", ...}``; vLLM adds
        ``max_model_len``, tokens) that have an ``id`` (uses its own short-lived connection; 30 s to answer).

        Raises:
            NotOpenAIServer: when the answer is an HTML page (any status): not an OpenAI-compatible server.
            ClientError: when the server cannot be reached, times out or answers with non-2xx.
            ValueError: when the answer is not JSON.
        """
        conn = Connection(self.origin, self.conn.verify_tls)
        try:
            conn.open(self.timeouts.connect)
            head_lines = self._head.replace("Accept: text/event-stream", "Accept: application/json")
            conn.send(f"GET {self.api_base}/models HTTP/1.1\r\n{head_lines}Connection: close\r\n\r\n".encode(), 30)
            dl = time.perf_counter() + 30
            head = conn.read_head(lambda: dl - time.perf_counter())
            text = conn.read_body(head.framing(), lambda: dl - time.perf_counter()).decode("utf-8", "replace")
        except (ReadTimeout, WriteTimeout) as e:
            raise ClientError("timeout_first_byte", f"GET /models: {e.detail}") from None
        except TransportError as e:
            raise ClientError(_ERROR_CLASS[type(e)], e.detail) from None
        finally:
            conn.close()
        if is_html(text):  # a web server, not an LLM server: say so in one line, never show the page
            raise NotOpenAIServer(
                f"not an OpenAI-compatible server: GET {self.api_base}/models returned an HTML page ({head.status})",
                head.status,
            )
        if not 200 <= head.status < 300:
            detail = f"GET /models: HTTP {head.status}: {text[:200]}"
            raise ClientError(_status_class(head.status), detail, head.status)
        obj = _loads(text)
        data = obj.get("data", []) if isinstance(obj, dict) else []
        return [m for m in data if isinstance(m, dict) and "id" in m]

    def list_models(self) -> list[str]:
        """The model ids of ``GET {base}/models`` (:meth:`model_entries`; same errors)."""
        return [str(m["id"]) for m in self.model_entries()]
