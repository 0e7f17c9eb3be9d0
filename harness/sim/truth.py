"""Ground-truth log (``--truth-log PATH``): what the simulator really did, per request, as JSON lines.

The first line describes the server::

    {"type": "server", "epoch": ..., "perf": ..., "preset": "demo", "flavour": "vllm", "time_scale": 0.5,
     "seed": 0, "model": "sim-reasoner", "spec_tokens": 0, "argv": [...]}

then one line per chat request, written when the request ends (completed, failed by a fault, client gone,
killed by a restart)::

    {"type": "request", "id": "chatcmpl-...", "client_request_id": null, "conn": 3, "conn_seq": 2,
     "peer": "127.0.0.1:50312", "received_epoch": 1760000000.123456, "received_perf": 1234.567890,
     "received_source": "kernel",
     "status": 200, "stream": true, "headers_at": 0.000041, "chunks": [[t, epoch, tokens, channel], ...],
     "comments": [t, ...], "finish_reason": "stop", "outcome": "completed", "fault": {...} | null,
     "prompt_tokens": 12, "max_tokens": 1024, "prompt_class": "normal", "prompt_hash": "3f2a...",
     "planned_tokens": 310, "reasoning_tokens": 250, "answer_tokens": 60, "sent_tokens": 310,
     "end_at": 4.1234, "first_token_at": 0.0213}

and one line per server restart: ``{"type": "restart", "down_epoch": ..., "up_epoch": ..., "killed": N}``.

Times: ``received_epoch`` is when the whole request (head and body) had arrived: the kernel's receive
timestamp of its last bytes (``SO_TIMESTAMPNS``, Linux), so a busy event loop reading it late does not shift
it (``received_source: "kernel"``); elsewhere ``time.time()`` once it had been read (``"read"``).
``received_perf`` is the same moment on the ``time.perf_counter()`` timeline; every other time
(``headers_at``, each chunk's ``t``, ``end_at``, engine ``first_token_at``) is seconds after
``received_perf`` (a perf_counter offset), and each chunk also carries its epoch time
(``received_epoch + t``).  A chunk's time is taken right before its bytes are handed to the kernel (on
loopback the client can read them before ``send`` returns).  ``chunks`` lists token-bearing SSE events only:
``tokens`` = completion tokens the event carried, ``channel`` = ``"r"`` (reasoning text), ``"a"`` (answer
text) or ``"x"`` (a malformed event that carried tokens).  Hidden reasoning (flavour ``openai``) writes no
chunk for its reasoning tokens; they count in ``sent_tokens`` and ``hidden_tokens``.  All times are wall
seconds as experienced (already time-scaled).

``prompt_hash`` is :func:`prompt_hash` of the request's messages (first 16 hex digits of a BLAKE2b over the
canonical JSON of the messages), so a harness record can be tied to its prompt without storing text.
``outcome`` is one of ``completed``, ``http_error`` (a 4xx/5xx answer, fault or not), ``fault`` (the fault
ended the stream: drop / error event / abort), ``client_disconnected`` (a write failed: the client went
away, e.g. after its own timeout), ``killed_by_restart``, ``server_stopped`` (still in flight when the
simulator was stopped).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson

from harness.jsonl import read_jsonl


def prompt_hash(messages: Any) -> str:
    """Stable 16-hex-digit hash of a ``messages`` list (canonical JSON, sorted keys)."""
    data = orjson.dumps(messages, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(data, digest_size=8).hexdigest()


@dataclass
class RequestTruth:
    """What happened to one request; times are perf_counter offsets (seconds) from ``received_perf``."""

    received_perf: float
    received_epoch: float
    conn: int
    conn_seq: int
    peer: str
    client_request_id: str | None = None
    #: "kernel" (SO_TIMESTAMPNS arrival time) or "read" (when the request had been read).
    received_source: str = "read"
    id: str | None = None
    status: int | None = None
    stream: bool = False
    headers_at: float | None = None
    first_token_at: float | None = None
    chunks: list[tuple[float, int, str]] = field(default_factory=list)
    comments: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    outcome: str = "unknown"
    fault: dict[str, Any] | None = None
    prompt_tokens: int | None = None
    max_tokens: int | None = None
    prompt_class: str | None = None
    prompt_hash: str | None = None
    planned_tokens: int | None = None
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    sent_tokens: int = 0
    hidden_tokens: int = 0
    end_at: float | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON line of this request (see the module docstring)."""
        e0 = self.received_epoch
        return {
            "type": "request",
            "id": self.id,
            "client_request_id": self.client_request_id,
            "conn": self.conn,
            "conn_seq": self.conn_seq,
            "peer": self.peer,
            "received_epoch": e0,
            "received_perf": self.received_perf,
            "received_source": self.received_source,
            "status": self.status,
            "stream": self.stream,
            "headers_at": self.headers_at,
            "first_token_at": self.first_token_at,
            "chunks": [[t, e0 + t, n, ch] for t, n, ch in self.chunks],
            "comments": self.comments,
            "finish_reason": self.finish_reason,
            "outcome": self.outcome,
            "fault": self.fault,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "prompt_class": self.prompt_class,
            "prompt_hash": self.prompt_hash,
            "planned_tokens": self.planned_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "answer_tokens": self.answer_tokens,
            "sent_tokens": self.sent_tokens,
            "hidden_tokens": self.hidden_tokens,
            "end_at": self.end_at,
            "error": self.error,
        }


class TruthLog:
    """Appends ground-truth JSON lines to a file; every line is flushed when written."""

    def __init__(self, path: str | Path, server_info: dict[str, Any]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[bytes] | None = open(self.path, "ab")  # closed by close()
        self._lock = threading.Lock()
        self.write({"type": "server", "epoch": time.time(), "perf": time.perf_counter(), **server_info})

    def write(self, obj: dict[str, Any]) -> None:
        """Append one JSON line and flush."""
        line = orjson.dumps(obj) + b"\n"
        with self._lock:
            if self._f is None:
                return
            self._f.write(line)
            self._f.flush()

    def request(self, rt: RequestTruth) -> None:
        """Append one request's line."""
        self.write(rt.to_json())

    def close(self) -> None:
        """Flush and close (idempotent)."""
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None


def read_truth(path: str | Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]]]:
    """Read a truth log: ``(server line or None, request lines, restart lines)``; a torn last line is skipped.

    Raises:
        ValueError: a line before the last is not valid JSON (names the file and line).
        OSError: the file cannot be read.
    """
    server: dict[str, Any] | None = None
    requests: list[dict[str, Any]] = []
    restarts: list[dict[str, Any]] = []
    for obj in read_jsonl(path):
        if not isinstance(obj, dict):
            continue
        kind = obj.get("type")
        if kind == "server":
            server = server or obj
        elif kind == "request":
            requests.append(obj)
        elif kind == "restart":
            restarts.append(obj)
    return server, requests, restarts
