"""The simulator's HTTP server: routes, authentication, response streaming, faults and the ground-truth log.

A raw ``gevent.server.StreamServer`` (one greenlet per connection) speaking HTTP/1.1 via
:mod:`harness.sim.httpwire`; responses to streaming requests use ``Transfer-Encoding: chunked`` with
one HTTP chunk per SSE event, written as soon as the engine produces the tokens.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``, ``GET /metrics``.
"""

from __future__ import annotations

import bisect
import logging
import select
import socket
import time
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import gevent
import orjson
from gevent.server import StreamServer

from harness.sim import protocol
from harness.sim.engine import DEFAULT_MAX_LAG, DEFAULT_SPEC_OVERHEAD, Engine, Sequence, clock
from harness.sim.faults import Fault, FaultConfig, FaultError, FaultPlanner, parse_request_fault
from harness.sim.httpwire import Connection, HttpError, Request, enable_rx_timestamps
from harness.sim.lengths import LengthModel, estimate_prompt_tokens
from harness.sim.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from harness.sim.metrics import SimMetrics
from harness.sim.prefix import PrefixCache
from harness.sim.presets import Preset, get_preset
from harness.sim.protocol import ApiError, ChatRequest, StreamFormatter
from harness.sim.truth import RequestTruth, TruthLog, prompt_hash

log = logging.getLogger("harness.sim")

_JSON = "application/json"
_SSE = "text/event-stream; charset=utf-8"
#: llama-server's content type (no charset parameter).
_SSE_LLAMACPP = "text/event-stream"
#: Idle keep-alive timeout between requests on one connection, seconds.
KEEPALIVE_TIMEOUT = 75.0
#: Socket send timeout while writing a response, seconds.
WRITE_TIMEOUT = 300.0
#: Default SSE keep-alive interval of the llama.cpp flavour, simulated seconds (llama-server's default).
LLAMACPP_PING_INTERVAL = 30.0
#: Faults that end the stream at a token position.
_CUT_FAULTS = frozenset({"error_event", "drop", "abort", "restart"})


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
    max_lag: float = DEFAULT_MAX_LAG
    backlog: int = 2048
    #: Speculative decoding: draft tokens per step (0 = off), acceptance probability, step overhead per draft.
    spec_tokens: int = 0
    spec_acceptance: float = 0.7
    spec_overhead: float = DEFAULT_SPEC_OVERHEAD
    #: SSE ``:`` keep-alive comment after this many silent simulated seconds (None = the flavour's default:
    #: 30 for llamacpp, off for the others; 0 = off).
    sse_ping_interval: float | None = None
    #: Ground-truth JSON-lines log path (None = off).
    truth_log: str | None = None
    #: Fault injection (None = no rate-based faults; per-request faults always work).
    faults: FaultConfig | None = None
    #: Prefix cache capacity, tokens (0 = no prefix cache; see :mod:`harness.sim.prefix`).
    prefix_cache_tokens: int = 0
    #: Drift: the fraction in [0, 1) by which decode speed falls per simulated hour since the server was created
    #: (every step and prefill lengthens by ``1 / (1 - F)`` per hour; :meth:`harness.sim.engine.Engine.slowdown`);
    #: 0 = off.
    drift_per_hour: float = 0.0
    #: Command line, recorded in the truth log.
    argv: list[str] = field(default_factory=list)

    def resolved_preset(self) -> Preset:
        """The preset (default ``demo``) with ``max_num_seqs`` applied."""
        preset = self.preset or get_preset("demo")
        if self.max_num_seqs is not None:
            preset = preset.with_overrides(max_num_seqs=self.max_num_seqs)
        return preset


def _client_gone(sock: Any) -> bool:
    """Whether the peer has closed the connection (EOF pending), without blocking."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        return sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class SimServer:
    """OpenAI-compatible reasoning-model simulator bound to one TCP port."""

    def __init__(self, config: SimConfig) -> None:
        config.flavour = protocol.canonical_flavour(config.flavour)
        if config.time_scale < 0:
            raise ValueError("time_scale must be >= 0")
        if config.tokens_per_chunk < 1:
            raise ValueError("tokens_per_chunk must be >= 1")
        if config.spec_tokens < 0 or not 0.0 <= config.spec_acceptance <= 1.0:
            raise ValueError("spec_tokens must be >= 0 and spec_acceptance in [0, 1]")
        if not 0.0 <= config.drift_per_hour < 1.0:
            raise ValueError(f"drift_per_hour must be in [0, 1), got {config.drift_per_hour}")
        self.config = config
        #: perf_counter time the drift clock starts (the server's creation; a simulated restart keeps it).
        self.drift_origin = time.perf_counter()
        self.flavour = config.flavour
        self.preset = config.resolved_preset()
        self.scale = config.time_scale
        ping = config.sse_ping_interval
        if ping is None:
            ping = LLAMACPP_PING_INTERVAL if self.flavour == "llamacpp" else 0.0
        #: Real seconds of silence before an SSE keep-alive comment (None = never).
        self.ping_interval: float | None = ping * self.scale if ping > 0 else None
        self.metrics: SimMetrics
        self.engine: Engine
        self._build_engine()
        self.lengths = LengthModel(self.preset, config.seed)
        self.prefix_cache = PrefixCache(config.prefix_cache_tokens) if config.prefix_cache_tokens > 0 else None
        self.faults = FaultPlanner(config.faults or FaultConfig(rates={}, seed=config.seed))
        self._auth = f"Bearer {config.api_key}" if config.api_key else None
        self._scale_hdr = format(config.time_scale, "g")
        self._server: StreamServer | None = None
        self._port = config.port
        self._created = int(time.time())
        self._models_body = self._render_models()
        self._conn_ids = count(1)
        self._conns: set[Any] = set()
        self._handlers: set[gevent.Greenlet] = set()
        self._restarting = False
        self._stopping = False
        self._restart_loop: gevent.Greenlet | None = None
        self.restarts = 0
        self.truth: TruthLog | None = None
        self._ts_keeper: socket.socket | None = None
        if config.truth_log:
            self.truth = TruthLog(config.truth_log, self._server_info())
            # The kernel stamps incoming packets only while some socket wants timestamps, and switching that on
            # is deferred to a workqueue: a socket holding the option for the server's lifetime keeps every
            # request stamped, also the first ones on new connections and the reconnect burst after a restart.
            self._ts_keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            enable_rx_timestamps(self._ts_keeper)

    # -- lifecycle ----------------------------------------------------------------------------
    def _build_engine(self) -> None:
        cfg = self.config
        self.metrics = SimMetrics(cfg.model, spec_tokens=cfg.spec_tokens)
        self.engine = Engine(
            self.preset, cfg.time_scale, self.preset.max_num_seqs, self.metrics, max_lag=cfg.max_lag,
            spec_tokens=cfg.spec_tokens, spec_acceptance=cfg.spec_acceptance, spec_overhead=cfg.spec_overhead,
            seed=cfg.seed, drift_per_hour=cfg.drift_per_hour, drift_origin=self.drift_origin,
        )
        self.metrics.bind(self.engine)

    def _listen(self) -> None:
        self._server = StreamServer((self.config.host, self._port), self._handle, backlog=self.config.backlog)
        self._server.start()
        self._port = int(self._server.server_port)
        if self.truth is not None:  # the truth log wants the kernel's arrival time of every request
            enable_rx_timestamps(self._server.socket)

    def start(self) -> int:
        """Bind, start accepting and start the engine; returns the bound TCP port."""
        self.engine.start()
        self._listen()
        faults = self.config.faults
        if faults is not None and faults.restart_every and self._restart_loop is None:
            self._restart_loop = gevent.spawn(self._periodic_restarts, faults.restart_every, faults.restart_downtime)
        return self._port

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8000``."""
        if self._server is None:
            raise RuntimeError("server not started")
        host = self.config.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self._port}"

    def serve_forever(self) -> None:
        """Block until :meth:`stop` is called."""
        if self._server is None:
            self.start()
        assert self._server is not None
        self._server.serve_forever()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop accepting, end the requests in flight (logged with outcome ``server_stopped``), stop the engine and
        close the truth log; waits at most ``timeout`` seconds for the request greenlets to finish."""
        self._stopping = True
        if self._restart_loop is not None:
            self._restart_loop.kill(block=False)
            self._restart_loop = None
        if self._server is not None:
            self._server.close()
        gevent.killall(list(self._handlers), exception=_KilledExit, block=True, timeout=timeout)
        self.engine.stop()
        if self.truth is not None:
            self.truth.close()
        if self._ts_keeper is not None:
            self._ts_keeper.close()
            self._ts_keeper = None

    def _server_info(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "preset": self.preset.name,
            "flavour": self.flavour,
            "time_scale": cfg.time_scale,
            "seed": cfg.seed,
            "model": cfg.model,
            "spec_tokens": cfg.spec_tokens,
            "spec_acceptance": cfg.spec_acceptance,
            "tokens_per_chunk": cfg.tokens_per_chunk,
            "drift_per_hour": cfg.drift_per_hour,
            "faults": _faults_json(cfg.faults),
            "argv": cfg.argv,
        }

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
                "flavour": self.flavour,
                "time_scale": cfg.time_scale,
                "seed": cfg.seed,
                "max_num_seqs": self.preset.max_num_seqs,
                "tokens_per_chunk": cfg.tokens_per_chunk,
                "spec_tokens": cfg.spec_tokens,
                "spec_acceptance": cfg.spec_acceptance if cfg.spec_tokens else None,
                "drift_per_hour": cfg.drift_per_hour,
                "faults": _faults_json(cfg.faults),
                "truth_log": cfg.truth_log,
                "model": self.preset.describe(),
            },
        }
        return orjson.dumps({"object": "list", "data": [card]})

    # -- restarts -----------------------------------------------------------------------------
    def _periodic_restarts(self, every: float, downtime: float) -> None:
        while True:
            gevent.sleep(every * self.scale)
            self.restart(downtime * self.scale, "periodic")

    def restart(self, downtime: float, reason: str = "manual") -> None:
        """Simulate a server restart: every in-flight request fails (its connection is closed), the port stays
        closed for ``downtime`` real seconds, then a fresh engine and fresh metrics serve again on the same port.
        """
        if self._restarting or self._server is None:
            return
        self._restarting = True
        down_epoch = time.time()
        victims: list[gevent.Greenlet] = []
        killed = 0
        try:
            self._server.close()  # stop accepting: new connections are refused
            me = gevent.getcurrent()
            for sock in list(self._conns):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            victims = [g for g in self._handlers if g is not me]
            gevent.killall(victims, exception=_KilledExit, block=True, timeout=2.0)
            killed = self.engine.abort_all()
            self.engine.stop()
            self._build_engine()
            self.engine.start()
            self.restarts += 1
            log.warning("simulated restart (%s): %d connections and %d sequences killed, down for %.3f s",
                        reason, len(victims), killed, downtime)
            gevent.sleep(downtime)
            for attempt in range(100):  # the port can be briefly unavailable
                try:
                    self._listen()
                    break
                except OSError:
                    if attempt == 99:
                        raise
                    gevent.sleep(0.05)
        finally:
            self._restarting = False
        if self.truth is not None:
            self.truth.write({"type": "restart", "reason": reason, "down_epoch": down_epoch, "up_epoch": time.time(),
                              "killed_connections": len(victims), "killed_sequences": killed})

    # -- connection handling --------------------------------------------------------------------
    def _handle(self, sock: Any, addr: Any) -> None:
        me = gevent.getcurrent()
        self._handlers.add(me)
        self._conns.add(sock)
        conn_id = next(self._conn_ids)
        peer = f"{addr[0]}:{addr[1]}" if isinstance(addr, tuple) and len(addr) >= 2 else str(addr)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        conn = Connection(sock, rx_timestamps=self.truth is not None)
        seq_no = 0
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
                seq_no += 1
                now, wall = clock(), time.time()
                rx = conn.rx_epoch
                if rx is not None and 0.0 <= wall - rx < 60.0:
                    # the kernel's arrival time of the request's last bytes, on the perf_counter timeline
                    req.extra["t_recv"], req.extra["e_recv"], req.extra["rx_src"] = now - (wall - rx), rx, "kernel"
                else:
                    req.extra["t_recv"], req.extra["e_recv"], req.extra["rx_src"] = now, wall, "read"
                req.extra["conn"] = (conn_id, seq_no, peer)
                sock.settimeout(WRITE_TIMEOUT)
                if not self._dispatch(conn, req):
                    return
        except (OSError, TimeoutError, gevent.Timeout, _KilledExit):
            return  # client went away, idled out, or the server "restarted"
        except Exception:
            log.exception("request handling failed; closing the connection")
        finally:
            self._handlers.discard(me)
            self._conns.discard(sock)
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
            effort=chat.effort,
        )
        seq = Sequence(protocol.new_request_id(self.flavour), prompt_tokens, plan)
        if self.prefix_cache is not None:
            seq.cached_tokens = self.prefix_cache.lookup_insert(chat.messages, prompt_tokens)
        return seq

    def _cache_reply(self, chat: ChatRequest, seq: Sequence) -> None:
        """Hold the finished reply's blocks too (vLLM caches the generated tokens' blocks): the prompt plus an
        assistant message with the answer text streamed, as a client carrying the answer sends it next turn."""
        answer = "".join(protocol.token_text("a", i) for i in range(seq.plan.answer_tokens))
        assert self.prefix_cache is not None
        self.prefix_cache.insert([*chat.messages, {"role": "assistant", "content": answer}])

    def _cached(self, seq: Sequence) -> int | None:
        """The ``cached_tokens`` the usage reports: the sequence's, or None without a prefix cache."""
        return seq.cached_tokens if self.prefix_cache is not None else None

    @staticmethod
    def _requested_fault(chat: ChatRequest, req: Request) -> tuple[Fault | None, bool]:
        """The fault the request asks for (body ``sim_fault`` first, then header ``x-sim-fault``)."""
        raw = chat.sim_fault if chat.sim_fault is not None else req.headers.get("x-sim-fault")
        if raw is None:
            return None, False
        try:
            fault = parse_request_fault(raw)
        except FaultError as e:
            raise ApiError(400, f"sim_fault: {e}", param="sim_fault") from None
        return fault, fault is None

    def _cut_outcome(self) -> str:
        """The truth outcome of a request whose socket failed: the server's own stop or restart when one is under
        way (it shuts sockets down before it kills handlers), else the client went away."""
        if self._stopping:
            return "server_stopped"
        return "killed_by_restart" if self._restarting else "client_disconnected"

    def _new_truth(self, req: Request) -> RequestTruth | None:
        if self.truth is None:
            return None
        conn_id, seq_no, peer = req.extra["conn"]
        return RequestTruth(
            received_perf=req.extra["t_recv"], received_epoch=req.extra["e_recv"], conn=conn_id, conn_seq=seq_no,
            peer=peer, client_request_id=req.headers.get("x-request-id"), received_source=req.extra["rx_src"],
        )

    def _chat(self, conn: Connection, req: Request) -> bool:
        ka = req.keep_alive
        rt = self._new_truth(req)
        engine = self.engine
        seq: Sequence | None = None
        fault: Fault | None = None
        try:
            try:
                chat = protocol.parse_chat_request(req.body, self.config.model)
                requested, explicit_none = self._requested_fault(chat, req)
                seq = self._admit(chat)
            except ApiError as exc:
                conn.send_full(exc.status, exc.body(), _JSON, ka)
                if rt is not None:
                    rt.status, rt.outcome, rt.error = exc.status, "http_error", exc.message
                    rt.headers_at = clock() - rt.received_perf
                return ka
            fault = self.faults.choose(requested, explicit_none)
            if fault is not None:
                self.faults.finalize(fault, seq.total_tokens)
            if rt is not None:
                self._describe(rt, chat, seq)
            client_id = req.headers.get("x-request-id")
            headers = self._sim_headers(client_id or seq.request_id)
            if fault is not None:
                if fault.type in ("http_429", "http_503"):
                    return self._http_fault(conn, fault, headers, ka, rt)
                if fault.type == "slow_headers":
                    fault.fired = True
                    gevent.sleep((fault.seconds or 0.0) * self.scale)
                    if _client_gone(conn.sock):
                        if rt is not None:
                            rt.outcome = self._cut_outcome()
                        return False
                elif fault.type == "stall_first":
                    fault.fired = True
                    seq.extra_prefill = (fault.seconds or 0.0) * self.scale
                elif fault.type == "stall_chunk":
                    seq.stall_at = fault.after_tokens
                    seq.stall_for = (fault.seconds or 0.0) * self.scale
            engine.submit(seq)
            if chat.stream:
                return self._stream(conn, chat, seq, headers, ka, fault, rt)
            return self._unary(conn, seq, headers, ka, fault, rt)
        except _KilledExit:
            if rt is not None:
                rt.outcome = "server_stopped" if self._stopping else "killed_by_restart"
            raise
        except OSError:
            if rt is not None:
                # A restart shuts every socket down before it kills the handlers: a handler woken by that shutdown
                # sees the OSError first, and the request was cut by the restart, not by its client.
                rt.outcome = self._cut_outcome()
            raise
        finally:
            if seq is not None and not seq.finished:
                engine.abort(seq)
            if seq is not None and self.prefix_cache is not None and seq.finished and not seq.aborted:
                self._cache_reply(chat, seq)
            if fault is not None and fault.type == "stall_chunk" and seq is not None:
                fault.fired = seq.stalled_at is not None
            if rt is not None and self.truth is not None:
                rt.end_at = clock() - rt.received_perf
                if seq is not None and seq.first_token_at is not None:
                    rt.first_token_at = seq.first_token_at - rt.received_perf
                rt.fault = fault.to_json() if fault is not None else None
                self.truth.request(rt)

    @staticmethod
    def _describe(rt: RequestTruth, chat: ChatRequest, seq: Sequence) -> None:
        plan = seq.plan
        rt.id = seq.request_id
        rt.stream = chat.stream
        rt.prompt_tokens = seq.prompt_tokens
        rt.max_tokens = chat.max_tokens
        rt.prompt_class = str(plan.prompt_class)
        rt.prompt_hash = prompt_hash(chat.messages)
        rt.planned_tokens = plan.total_tokens
        rt.reasoning_tokens = plan.reasoning_tokens
        rt.answer_tokens = plan.answer_tokens

    def _http_fault(self, conn: Connection, fault: Fault, headers: list[tuple[str, str]], ka: bool,
                    rt: RequestTruth | None) -> bool:
        fault.fired = True
        status = 429 if fault.type == "http_429" else 503
        if status == 429:
            msg, typ = "Rate limit exceeded (simulated). Retry later.", "rate_limit_exceeded"
        else:
            msg, typ = "The server is overloaded or not ready yet (simulated).", "service_unavailable"
        body = orjson.dumps({"error": {"message": msg, "type": typ, "param": None, "code": status}})
        conn.send_full(status, body, _JSON, ka, [*headers, ("retry-after", str(fault.retry_after or 1))])
        if rt is not None:
            rt.status, rt.outcome = status, "http_error"
            rt.headers_at = clock() - rt.received_perf
        return ka

    def _wait_killed(self, fault: Fault) -> None:
        """Trigger a restart from this request and wait to be killed by it."""
        gevent.spawn(self.restart, (fault.seconds or 0.0) * self.scale, "request")
        gevent.sleep(3600.0)

    def _timings(self, seq: Sequence, completion: int) -> dict[str, Any]:
        """llama.cpp ``timings`` from the engine's real times (milliseconds as experienced)."""
        admitted = seq.admitted_at if seq.admitted_at is not None else seq.arrival
        first = seq.first_token_at if seq.first_token_at is not None else admitted
        end = seq.finished_at if seq.finished_at is not None else clock()
        return protocol.llamacpp_timings(seq.prompt_tokens, (first - admitted) * 1e3, completion,
                                         max(0.0, end - first) * 1e3)

    def _unary(self, conn: Connection, seq: Sequence, headers: list[tuple[str, str]], ka: bool,
               fault: Fault | None, rt: RequestTruth | None) -> bool:
        cut = fault.after_tokens if fault is not None and fault.type in (*_CUT_FAULTS, "malformed") else None
        while not seq.finished and (cut is None or seq.generated < cut):
            seq.event.wait()
            seq.event.clear()
        if seq.aborted:
            raise _KilledExit()
        plan = seq.plan
        generated = seq.generated
        reasoning = min(generated, plan.reasoning_tokens)
        finish = plan.finish_reason
        if cut is not None and fault is not None and generated >= cut:
            fault.fired = True
            generated = reasoning = 0
            if fault.type == "restart":
                self._wait_killed(fault)
            if fault.type == "drop":
                if rt is not None:
                    rt.outcome = "fault"
                return False
            if fault.type == "error_event":
                err = ApiError(500, "simulated engine failure", "InternalServerError")
                conn.send_full(500, err.body(), _JSON, ka, headers)
                if rt is not None:
                    rt.status, rt.outcome = 500, "fault"
                return ka
            generated = cut
            reasoning = min(cut, plan.reasoning_tokens)
            if fault.type == "abort":
                finish = "abort"
        cfg = self.config
        body = protocol.completion_body(
            self.flavour, seq.request_id, cfg.model, seq.prompt_tokens, reasoning, generated - reasoning, finish,
            timings=self._timings(seq, generated) if self.flavour == "llamacpp" else None,
            cached_tokens=self._cached(seq),
        )
        if fault is not None and fault.type == "malformed" and fault.fired:
            body = body[: len(body) // 2]
        conn.send_full(200, body, _JSON, ka, headers)
        if rt is not None:
            rt.status, rt.finish_reason = 200, finish
            rt.headers_at = clock() - rt.received_perf
            rt.sent_tokens = generated
            rt.outcome = "fault" if fault is not None and fault.fired and fault.type in _CUT_FAULTS else "completed"
        return ka

    @staticmethod
    def _chunk_end(sent: int, limit: int, closes: bool, per_chunk: int, marks: list[int] | None) -> int | None:
        """End (exclusive token index) of the next chunk that starts at ``sent``, or None to wait for tokens.

        ``limit`` is the last token index available for this chunk (tokens generated so far, cut at the phase
        end or a fault position); ``closes`` says that ``limit`` is a hard boundary (phase end, end of stream,
        fault), so a short last chunk is sent.  Without ``marks`` (one token per engine step) a chunk holds
        ``per_chunk`` tokens; with ``marks`` (speculative decoding: the engine's output boundaries) a chunk
        holds whole engine outputs until it has at least ``per_chunk`` tokens.
        """
        if marks is None:
            end = sent + per_chunk
            if end <= limit:
                return end
            return limit if limit > sent and closes else None
        i = bisect.bisect_right(marks, sent)
        n = len(marks)
        while i < n and marks[i] < limit:
            if marks[i] - sent >= per_chunk:
                return marks[i]
            i += 1
        if limit > sent and (closes or (i < n and marks[i] == limit and limit - sent >= per_chunk)):
            return limit
        return None

    def _stream(
        self, conn: Connection, chat: ChatRequest, seq: Sequence, headers: list[tuple[str, str]], ka: bool,
        fault: Fault | None, rt: RequestTruth | None,
    ) -> bool:
        cfg = self.config
        fmt = StreamFormatter(self.flavour, seq.request_id, cfg.model, seq.prompt_tokens, chat.continuous_usage,
                              include_usage=chat.include_usage, cached_tokens=self._cached(seq))
        send_usage = chat.include_usage or self.flavour == "llamacpp"
        hidden = fmt.hidden_reasoning
        t_write = clock()
        conn.start_chunked(200, _SSE_LLAMACPP if self.flavour == "llamacpp" else _SSE, ka, headers)
        t0 = rt.received_perf if rt is not None else 0.0
        if rt is not None:
            rt.status = 200
            rt.headers_at = t_write - t0
        plan = seq.plan
        n_reason = plan.reasoning_tokens
        total = plan.total_tokens
        per_chunk = cfg.tokens_per_chunk
        marks = seq.marks
        token_text = protocol.token_text
        cut = fault.after_tokens if fault is not None and fault.type in _CUT_FAULTS else None
        bad_at = fault.after_tokens if fault is not None and fault.type == "malformed" else None
        ping = self.ping_interval
        sent = 0
        seen = -1
        role_sent = False
        event = seq.event
        meta: list[tuple[int, str]] = []
        chunks = rt.chunks if rt is not None else None
        while True:
            if not seq.finished and seq.generated == seen:
                if ping is None:
                    event.wait()
                else:
                    left = t_write + ping - clock()
                    if left <= 0 or not event.wait(left):
                        t_write = clock()
                        conn.send_chunks([protocol.PING_EVENT])
                        if rt is not None:
                            rt.comments.append(t_write - t0)
                        continue
            event.clear()
            if seq.aborted:
                raise _KilledExit()
            generated = seen = seq.generated
            finished = seq.finished
            upto = generated
            cutting = cut is not None and generated >= cut
            if cutting:
                upto = cut  # type: ignore[assignment]
            events: list[bytes] = []
            meta.clear()
            while sent < upto:
                in_reasoning = sent < n_reason
                phase_end = n_reason if in_reasoning else total
                limit = min(upto, phase_end)
                closes = limit == phase_end or cutting or finished
                end = self._chunk_end(sent, limit, closes, per_chunk, marks)
                if end is None:
                    break
                k = end - sent
                if hidden and in_reasoning:
                    sent = end
                    if rt is not None:
                        rt.hidden_tokens += k
                    continue
                if not role_sent:
                    events.append(fmt.role_event())
                    role_sent = True
                first = sent if in_reasoning else sent - n_reason
                kind = "r" if in_reasoning else "a"
                if k == 1:
                    text = token_text(kind, first)
                else:
                    text = "".join([token_text(kind, i) for i in range(first, first + k)])
                ev = fmt.token_event(in_reasoning, text, end)
                if bad_at is not None and sent < bad_at <= end:
                    ev = fmt.malformed(ev)
                    kind = "x"
                    fault.fired = True  # type: ignore[union-attr]
                sent = end
                events.append(ev)
                meta.append((k, kind))
            if cutting and sent >= upto:
                assert fault is not None
                fault.fired = True
                if fault.type in ("drop", "restart"):
                    if events:
                        now = clock()
                        conn.send_chunks(events)
                        self._stamp(chunks, meta, t0, now)
                    if rt is not None:
                        rt.sent_tokens = sent
                        rt.outcome = "fault"
                    if fault.type == "restart":
                        self._wait_killed(fault)
                    return False  # the handler closes the socket mid-body
                if fault.type == "error_event":
                    events += [fmt.error_event(), protocol.DONE_EVENT]
                else:  # abort
                    if not role_sent:
                        events.append(fmt.role_event())
                    events.append(fmt.finish_event("abort", sent))
                    if send_usage:
                        events.append(fmt.usage_event(sent, min(sent, n_reason), self._timings(seq, sent)))
                    events.append(protocol.DONE_EVENT)
                    if rt is not None:
                        rt.finish_reason = "abort"
                now = clock()
                conn.send_chunks(events, last=True)
                self._stamp(chunks, meta, t0, now)
                if rt is not None:
                    rt.sent_tokens = sent
                    rt.outcome = "fault"
                return ka
            if finished and sent >= total:
                if not role_sent:
                    events.append(fmt.role_event())
                events.append(fmt.finish_event(plan.finish_reason, total))
                if send_usage:
                    timings = self._timings(seq, total) if self.flavour == "llamacpp" else None
                    events.append(fmt.usage_event(total, n_reason, timings))
                events.append(protocol.DONE_EVENT)
                now = clock()
                conn.send_chunks(events, last=True)
                self._stamp(chunks, meta, t0, now)
                if rt is not None:
                    rt.sent_tokens = sent
                    rt.finish_reason = plan.finish_reason
                    rt.outcome = "completed"  # a malformed chunk or a stall does not end the stream
                return ka
            if events:
                t_write = clock()
                conn.send_chunks(events)
                self._stamp(chunks, meta, t0, t_write)
            if rt is not None:
                rt.sent_tokens = sent

    @staticmethod
    def _stamp(chunks: list[tuple[float, int, str]] | None, meta: list[tuple[int, str]], t0: float,
               now: float) -> None:
        """Record the token-bearing events just sent, written at ``now`` (perf_counter, taken right before the
        ``send`` call: on loopback the client can read the bytes before ``send`` returns)."""
        if chunks is not None and meta:
            t = now - t0
            chunks.extend([(t, k, ch) for k, ch in meta])


class _KilledExit(Exception):
    """Raised in request greenlets killed by a simulated restart (and when their sequence was aborted)."""


def _faults_json(faults: FaultConfig | None) -> dict[str, Any] | None:
    if faults is None or not faults.active:
        return None
    return {
        "rates": {k: v for k, v in faults.rates.items() if v > 0},
        "stall_seconds": faults.stall_seconds,
        "slow_headers_seconds": faults.slow_headers_seconds,
        "retry_after": faults.retry_after,
        "restart_every": faults.restart_every,
        "restart_downtime": faults.restart_downtime,
        "grace": faults.grace,
        "seed": faults.seed,
    }
