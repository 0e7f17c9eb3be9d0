"""The simulator's HTTP server: routes, authentication and response streaming.

A raw ``gevent.server.StreamServer`` (one greenlet per connection) speaking HTTP/1.1 via
:mod:`harness.sim.httpwire`; responses to streaming requests use ``Transfer-Encoding: chunked`` with
one HTTP chunk per SSE event, written as soon as the engine produces the tokens.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``, ``GET /metrics``.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

import gevent
import orjson
from gevent.server import StreamServer

from harness.sim import protocol
from harness.sim.engine import Engine, Sequence
from harness.sim.httpwire import Connection, HttpError, Request
from harness.sim.lengths import LengthModel, estimate_prompt_tokens
from harness.sim.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from harness.sim.metrics import SimMetrics
from harness.sim.presets import Preset, get_preset
from harness.sim.protocol import ApiError, ChatRequest, StreamFormatter

log = logging.getLogger("harness.sim")

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
#: Idle keep-alive timeout between requests on one connection, seconds.
KEEPALIVE_TIMEOUT = 75.0
#: Socket send timeout while writing a response, seconds.
WRITE_TIMEOUT = 300.0


@dataclass
class SimConfig:
    """Configuration of one simulator process (durations in simulated seconds, lengths in tokens)."""

    host: str = "127.0.0.1"
    port: int = 0
    preset: Preset | None = None
    flavour: str = "vllm"
    time_scale: float = 1.0
    seed: int = 0
    model: str = "sim-reasoner"
    max_num_seqs: int | None = None
    api_key: str | None = None
    #: Tokens per SSE event (like vLLM ``--stream-interval``); phase changes always split events.
    tokens_per_chunk: int = 1
    #: Seconds of engine lateness caught up with shorter steps before re-synchronising (real seconds).
    max_lag: float = 0.05
    backlog: int = 2048

    def resolved_preset(self) -> Preset:
        """The preset (default ``demo``) with ``max_num_seqs`` applied."""
        preset = self.preset or get_preset("demo")
        if self.max_num_seqs is not None:
            preset = preset.with_overrides(max_num_seqs=self.max_num_seqs)
        return preset


class SimServer:
    """OpenAI-compatible reasoning-model simulator bound to one TCP port."""

    def __init__(self, config: SimConfig) -> None:
        if config.flavour not in protocol.FLAVOURS:
            raise ValueError(f"unknown flavour {config.flavour!r}; known: {protocol.FLAVOURS}")
        if config.time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        if config.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        self.config = config
        self.preset = config.resolved_preset()
        self.metrics = SimMetrics(config.model)
        self.engine = Engine(self.preset, config.time_scale, self.preset.max_num_seqs, self.metrics,
                             max_lag=config.max_lag)
        self.metrics.bind(self.engine)
        self.lengths = LengthModel(self.preset, config.seed)
        self._auth = f"Bearer {config.api_key}" if config.api_key else None
        self._scale_hdr = format(config.time_scale, "g")
        self._server: StreamServer | None = None
        self._created = int(time.time())
        self._models_body = self._render_models()

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> int:
        """Bind, start accepting and start the engine; returns the bound TCP port."""
        self.engine.start()
        self._server = StreamServer((self.config.host, self.config.port), self._handle, backlog=self.config.backlog)
        self._server.start()
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8000``."""
        if self._server is None:
            raise RuntimeError("server not started")
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self._server.server_port}"

    def serve_forever(self) -> None:
        """Block until :meth:`stop` is called."""
        if self._server is None:
            self.start()
        assert self._server is not None
        self._server.serve_forever()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop accepting, stop the engine, close open connections after ``timeout`` seconds."""
        if self._server is not None:
            self._server.stop(timeout=timeout)
        self.engine.stop()

    def _render_models(self) -> bytes:
        cfg = self.config
        card = {
            "id": cfg.model,
            "object": "model",
            "created": self._created,
            "owned_by": "vllm",
            "root": cfg.model,
            "parent": None,
            "max_model_len": self.preset.max_model_len,
            "permission": [],
            "sim": {
                "preset": self.preset.name,
                "flavour": cfg.flavour,
                "time_scale": cfg.time_scale,
                "seed": cfg.seed,
                "max_num_seqs": self.preset.max_num_seqs,
                "tokens_per_chunk": cfg.tokens_per_chunk,
                "model": self.preset.describe(),
            },
        }
        return orjson.dumps({"object": "list", "data": [card]})

    # -- connection handling --------------------------------------------------------------------
    def _handle(self, sock: Any, _addr: Any) -> None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        conn = Connection(sock)
        try:
            while True:
                sock.settimeout(KEEPALIVE_TIMEOUT)
                try:
                    req = conn.read_request()
                except HttpError as exc:
                    body = orjson.dumps({"detail": str(exc)})
                    conn.send_full(exc.status, body, _JSON, keep_alive=False)
                    return
                if req is None:
                    return
                sock.settimeout(WRITE_TIMEOUT)
                if not self._dispatch(conn, req):
                    return
        except (OSError, TimeoutError, gevent.Timeout):
            return  # client went away or idled out
        except Exception:
            log.exception("request handling failed; closing the connection")
        finally:
            try:
                sock.close()
            except OSError:
                pass

    def _dispatch(self, conn: Connection, req: Request) -> bool:
        """Answer one request; returns whether the connection stays open."""
        ka = req.keep_alive
        path = req.path
        method = req.method
        if path.startswith("/v1/") and self._auth is not None and req.headers.get("authorization") != self._auth:
            conn.send_full(401, b'{"error":"Unauthorized"}', _JSON, ka)
            return ka
        if path == "/v1/chat/completions":
            if method != "POST":
                return self._detail(conn, 405, "Method Not Allowed", ka)
            return self._chat(conn, req)
        if method not in ("GET", "HEAD"):
            known = path in ("/v1/models", "/health", "/metrics")
            return self._detail(conn, 405 if known else 404, "Method Not Allowed" if known else "Not Found", ka)
        head = method == "HEAD"
        if path == "/v1/models":
            conn.send_full(200, self._models_body, _JSON, ka, head_only=head)
        elif path == "/health":
            conn.send_full(200, b"", _JSON, ka, head_only=head)
        elif path == "/metrics":
            conn.send_full(200, self.metrics.render(), METRICS_CONTENT_TYPE, ka, head_only=head)
        else:
            return self._detail(conn, 404, "Not Found", ka)
        return ka

    @staticmethod
    def _detail(conn: Connection, status: int, detail: str, ka: bool) -> bool:
        conn.send_full(status, orjson.dumps({"detail": detail}), _JSON, ka)
        return ka

    def _sim_headers(self, request_id: str) -> list[tuple[str, str]]:
        return [
            ("x-request-id", request_id),
            ("x-sim-time-scale", self._scale_hdr),
            ("x-sim-preset", self.preset.name),
        ]

    # -- chat completions -------------------------------------------------------------------
    def _admit(self, chat: ChatRequest) -> Sequence:
        """Validate lengths against the context and create the engine sequence."""
        prompt_tokens = estimate_prompt_tokens(chat.messages)
        limit = self.preset.max_model_len
        if prompt_tokens >= limit:
            raise ApiError(
                400,
                f"This model's maximum context length is {limit} tokens. However, your request has "
                f"{prompt_tokens} input tokens. Please reduce the length of the input messages.",
            )
        max_tokens = chat.max_tokens if chat.max_tokens is not None else limit - prompt_tokens
        if max_tokens > limit - prompt_tokens:
            raise ApiError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum "
                f"context length is {limit} tokens and your request has {prompt_tokens} input tokens "
                f"({max_tokens} > {limit} - {prompt_tokens}).",
                param="max_tokens",
            )
        plan = self.lengths.plan(
            chat.messages,
            max_tokens,
            thinking=chat.thinking,
            request_seed=chat.seed,
            ignore_eos=chat.ignore_eos,
            min_tokens=min(chat.min_tokens, max_tokens),
        )
        return Sequence(protocol.new_request_id(), prompt_tokens, plan)

    def _chat(self, conn: Connection, req: Request) -> bool:
        ka = req.keep_alive
        try:
            chat = protocol.parse_chat_request(req.body, self.config.model)
            seq = self._admit(chat)
        except ApiError as exc:
            conn.send_full(exc.status, exc.body(), _JSON, ka)
            return ka
        headers = self._sim_headers(seq.request_id)
        self.engine.submit(seq)
        try:
            if chat.stream:
                self._stream(conn, chat, seq, headers, ka)
            else:
                self._unary(conn, seq, headers, ka)
        except BaseException:
            self.engine.abort(seq)
            raise
        return ka

    def _unary(self, conn: Connection, seq: Sequence, headers: list[tuple[str, str]], ka: bool) -> None:
        while not seq.finished:
            seq.event.wait()
            seq.event.clear()
        plan = seq.plan
        body = protocol.completion_body(
            self.config.flavour, seq.request_id, self.config.model, seq.prompt_tokens,
            plan.reasoning_tokens, plan.answer_tokens, plan.finish_reason,
        )
        conn.send_full(200, body, _JSON, ka, headers)

    def _stream(
        self, conn: Connection, chat: ChatRequest, seq: Sequence, headers: list[tuple[str, str]], ka: bool
    ) -> None:
        fmt = StreamFormatter(self.config.flavour, seq.request_id, self.config.model, seq.prompt_tokens,
                              chat.continuous_usage)
        conn.start_chunked(200, _SSE, ka, headers)
        plan = seq.plan
        n_reason = plan.reasoning_tokens
        total = plan.total_tokens
        per_chunk = self.config.tokens_per_chunk
        token_text = protocol.token_text
        sent = 0
        seen = 0
        role_sent = False
        event = seq.event
        while True:
            if not seq.finished and seq.generated == seen:
                event.wait()
            event.clear()
            if seq.aborted:
                return
            generated = seen = seq.generated
            finished = seq.finished
            events: list[bytes] = []
            if not role_sent and (generated > 0 or finished):
                events.append(fmt.role_event())
                role_sent = True
            while sent < generated:
                in_reasoning = sent < n_reason
                phase_end = n_reason if in_reasoning else total
                k = min(per_chunk, phase_end - sent, generated - sent)
                if k < per_chunk and sent + k < phase_end and not finished:
                    break  # wait until the chunk is full (stream interval)
                first = sent if in_reasoning else sent - n_reason
                kind = "r" if in_reasoning else "a"
                if k == 1:
                    text = token_text(kind, first)
                else:
                    text = "".join([token_text(kind, i) for i in range(first, first + k)])
                sent += k
                events.append(fmt.token_event(in_reasoning, text, sent))
            if finished and sent >= total:
                events.append(fmt.finish_event(plan.finish_reason, total))
                if chat.include_usage:
                    events.append(fmt.usage_event(total, n_reason))
                events.append(protocol.DONE_EVENT)
                conn.send_chunks(events, last=True)
                return
            if events:
                conn.send_chunks(events)
