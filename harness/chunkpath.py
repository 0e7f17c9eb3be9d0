"""Which per-read stream path the client runs: the compiled one (``harness._fastchunk``) or the pure-Python one.

Both do the same work per read — HTTP body de-framing, SSE event splitting, the chunk interpreter's per-payload
step — and give byte-identical records (the stream-case and fuzz tests run every case through both). The compiled
path is an optional extension built by ``pip install -e .`` (``setup.py``); it is used when it imported and the
environment variable ``LLMLOAD_PURE_PYTHON`` does not force the pure path (:func:`pure_forced`). :data:`CLIENT_PATH`
says which runs (``llmload`` prints it at start, and ``run.json`` records it as ``client_path``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from harness.http import BodyFraming, ChunkedDecoder
from harness.interpret import StreamInterpreter
from harness.sse import SSEDecoder

__all__ = ["CLIENT_PATH", "PATHS", "ChunkPath", "active", "native_available", "native_records", "pure_forced"]

log = logging.getLogger("llmload.chunkpath")

#: The environment variable that forces the pure-Python path (``1``, ``true``, ``yes``, ``on``).
PURE_ENV = "LLMLOAD_PURE_PYTHON"


def _feed_read_python(framing: Any, dec: Any, interp: StreamInterpreter, t: float, raw: bytes) -> bool:
    """One read through the pure-Python path: de-frame ``raw``, split its SSE events, interpret every payload at
    ``t`` (seconds since the request was sent); return True when the body has ended.

    Raises:
        ProtocolError: on malformed framing.
    """
    body = framing.feed(raw)
    if body:
        on_payload = interp.on_payload
        for p in dec.feed(body):
            on_payload(t, p)
    return bool(framing.done)


@dataclass(frozen=True)
class ChunkPath:
    """One implementation of the per-read stream path.

    Attributes:
        name: ``native`` or ``python``.
        framing: ``framing(chunked, length)`` → a body framing (:class:`harness.http.BodyFraming` API).
        chunked: the chunked-transfer decoder class (:class:`harness.http.ChunkedDecoder` API).
        decoder: the SSE decoder class (:class:`harness.sse.SSEDecoder` API).
        interpreter: the chunk interpreter class (:class:`harness.interpret.StreamInterpreter` API; the native
            one runs the same ``finish``).
        feed_read: ``feed_read(framing, decoder, interp, t, raw) -> done``: one read, all its payloads
            interpreted at ``t``.
    """

    name: str
    framing: Any
    chunked: Any
    decoder: Any
    interpreter: Any
    feed_read: Any


PYTHON = ChunkPath("python", BodyFraming, ChunkedDecoder, SSEDecoder, StreamInterpreter, _feed_read_python)


def _load_native() -> ChunkPath | None:
    try:
        from harness import _fastchunk  # type: ignore[attr-defined]
    except ImportError:
        return None
    return ChunkPath("native", _fastchunk.BodyFraming, _fastchunk.ChunkedDecoder, _fastchunk.SSEDecoder,
                     _fastchunk.StreamInterpreter, _fastchunk.feed_read)


NATIVE = _load_native()
#: Every available path by name (``python`` always; ``native`` when the extension was built).
PATHS: dict[str, ChunkPath] = {"python": PYTHON, **({"native": NATIVE} if NATIVE is not None else {})}


def native_available() -> bool:
    """True when the compiled extension imported (whether or not :envvar:`LLMLOAD_PURE_PYTHON` disables it)."""
    return NATIVE is not None


#: Values of :data:`PURE_ENV` (stripped, any case) that force the pure path, and those that leave the choice alone.
PURE_ON = frozenset({"1", "true", "yes", "on"})
PURE_OFF = frozenset({"", "0", "false", "no", "off"})
_WARNED: set[str] = set()


def native_records(*names: str) -> tuple[Any, ...] | None:
    """The functions ``names`` of the report's compiled module ``harness._fastrecords`` (docs/development/native.md),
    in that order; None when it is not built or ``LLMLOAD_PURE_PYTHON`` forces the pure paths (:func:`pure_forced`),
    and the caller then runs its numpy / polars twin."""
    if pure_forced():
        return None
    try:
        from harness import _fastrecords  # type: ignore[attr-defined]
    except ImportError:
        return None
    return tuple(getattr(_fastrecords, n) for n in names)


def pure_forced() -> bool:
    """Whether ``LLMLOAD_PURE_PYTHON`` forces the pure-Python path: ``1``/``true``/``yes``/``on`` (any case) do,
    unset or ``0``/``false``/``no``/``off`` do not; any other value forces it too (the safe reading) with a
    warning naming the variable and the values it takes."""
    raw = os.environ.get(PURE_ENV, "")
    value = raw.strip().lower()
    if value in PURE_ON:
        return True
    if value in PURE_OFF:
        return False
    if raw not in _WARNED:  # said once per process and value, not at every look
        _WARNED.add(raw)
        log.warning("%s=%r is not one of 1/true/yes/on or 0/false/no/off: the pure-Python stream path runs",
                    PURE_ENV, raw)
    return True


def active() -> ChunkPath:
    """The path the client uses: native when built and not forced off by ``LLMLOAD_PURE_PYTHON``
    (:func:`pure_forced`), else python."""
    if NATIVE is not None and not pure_forced():
        return NATIVE
    return PYTHON


#: ``native`` or ``python``: the per-read path this process runs (decided at import).
CLIENT_PATH = active().name
