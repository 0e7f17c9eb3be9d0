"""Fault injection: which fault (if any) a request gets, and its parameters.

Faults come from two sources:

* **rates** per run (``--fault-429 0.05`` ...): one seeded draw per chat request picks at most one fault,
  each with its own probability (the rates must sum to at most 1); the first ``--fault-grace`` requests are
  never faulted (so a warm-up request is not);
* **per request**, deterministically, for tests: the request body's ``sim_fault`` field or the
  ``x-sim-fault`` header.  Either a fault name (``"drop"``) or, for the field, an object
  ``{"type": "drop", "after_tokens": 5, "seconds": 2.0, "retry_after": 3}``; the header takes
  ``drop; after_tokens=5; seconds=2``.  A per-request fault wins over the rates; ``"none"`` disables them.

Fault types (``FAULT_TYPES``) and what the client sees:

=================  ==============================================================================
``http_429``       HTTP 429 with ``Retry-After`` and a JSON error body, before any stream
``http_503``       HTTP 503 with ``Retry-After`` and a JSON error body
``error_event``    after ``after_tokens`` tokens, an in-band ``{"error": ...}`` event, then ``[DONE]``
``drop``           after ``after_tokens`` tokens, the connection is closed mid-body (no terminating chunk)
``abort``          after ``after_tokens`` tokens, ``finish_reason: "abort"`` (then usage, ``[DONE]``)
``malformed``      the chunk carrying token ``after_tokens`` is cut mid-JSON (the stream then goes on)
``stall_first``    the first token comes ``seconds`` late (the sequence holds its slot meanwhile)
``stall_chunk``    after ``after_tokens`` tokens the sequence leaves the batch for ``seconds``
``slow_headers``   the response status line and headers are sent ``seconds`` late
``restart``        after ``after_tokens`` tokens the whole server restarts (see ``--restart-downtime``)
=================  ==============================================================================

``seconds`` are simulated seconds (multiplied by the time scale).  ``after_tokens`` counts completion
tokens (hidden reasoning included); when not given it is drawn uniformly in ``[1, total]``
(``[1, total - 1]`` for ``stall_chunk``).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

#: Every fault type, in the order the rate draw tests them.
FAULT_TYPES = (
    "http_429",
    "http_503",
    "error_event",
    "drop",
    "abort",
    "malformed",
    "stall_first",
    "stall_chunk",
    "slow_headers",
    "restart",
)
#: Faults that fire at a token position.
MID_STREAM = frozenset({"error_event", "drop", "abort", "malformed", "stall_chunk", "restart"})
#: Accepted spellings of fault names (``-`` or ``_``; short forms).
#: Fault names as written in ``--fault-NAME RATE`` options and per-request specs -> fault type.
OPTION_NAMES = {
    "429": "http_429",
    "503": "http_503",
    "error-event": "error_event",
    "drop": "drop",
    "abort": "abort",
    "malformed": "malformed",
    "stall-first": "stall_first",
    "stall-chunk": "stall_chunk",
    "slow-headers": "slow_headers",
}
_ALIASES = {**OPTION_NAMES, "error": "error_event"}


class FaultError(ValueError):
    """An unusable fault specification."""


@dataclass
class Fault:
    """One injected fault.  ``seconds`` are simulated seconds; ``after_tokens`` completion tokens."""

    type: str
    after_tokens: int | None = None
    seconds: float | None = None
    retry_after: int | None = None
    #: "rate" (drawn) or "request" (asked for by the request).
    source: str = "rate"
    #: Whether the fault actually happened (a mid-stream fault past the end of the stream does not).
    fired: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (for the ground-truth log)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def canonical(name: str) -> str:
    """Canonical fault type for ``name``; raises :class:`FaultError`."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key.replace("-", "_"))
    if key not in FAULT_TYPES and key != "none":
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(FAULT_TYPES)}")
    return key


def parse_request_fault(value: Any, source: str = "request") -> Fault | None:
    """A fault from a ``sim_fault`` body value (string or object) or an ``x-sim-fault`` header string.

    Returns None for ``"none"``; raises :class:`FaultError` for anything unusable.
    """
    if value is None:
        return None
    params: dict[str, Any]
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(";") if p.strip()]
        if not parts:
            raise FaultError("empty fault")
        params = {"type": parts[0]}
        for p in parts[1:]:
            k, sep, v = p.partition("=")
            if not sep:
                raise FaultError(f"bad fault parameter {p!r} (want key=value)")
            params[k.strip()] = v.strip()
    elif isinstance(value, dict):
        params = dict(value)
    else:
        raise FaultError("sim_fault must be a string or an object")
    name = params.pop("type", None)
    if not isinstance(name, str):
        raise FaultError("sim_fault needs a 'type'")
    kind = canonical(name)
    if kind == "none":
        return None
    fault = Fault(kind, source=source)
    try:
        if params.get("after_tokens") is not None:
            fault.after_tokens = int(params.pop("after_tokens"))
            if fault.after_tokens < 1:
                raise FaultError("after_tokens must be >= 1")
        if params.get("seconds") is not None:
            fault.seconds = float(params.pop("seconds"))
            if fault.seconds < 0:
                raise FaultError("seconds must be >= 0")
        if params.get("retry_after") is not None:
            fault.retry_after = int(params.pop("retry_after"))
    except (TypeError, ValueError) as e:
        if isinstance(e, FaultError):
            raise
        raise FaultError(f"bad fault parameter: {e}") from None
    params.pop("after_tokens", None)
    params.pop("seconds", None)
    params.pop("retry_after", None)
    if params:
        raise FaultError(f"unknown fault parameter(s): {sorted(params)}")
    return fault


@dataclass
class FaultConfig:
    """Run-wide fault settings (rates are probabilities per chat request, durations simulated seconds)."""

    rates: dict[str, float]
    #: Default duration of ``stall_first`` / ``stall_chunk`` faults, simulated seconds.
    stall_seconds: float = 10.0
    #: Default delay of ``slow_headers``, simulated seconds.
    slow_headers_seconds: float = 10.0
    #: ``Retry-After`` of 429/503 answers, whole seconds (an HTTP header: not time-scaled).
    retry_after: int = 1
    #: Restart the server every this many simulated seconds (None = never).
    restart_every: float | None = None
    #: How long a restart keeps the port closed, simulated seconds.
    restart_downtime: float = 2.0
    #: The first N chat requests are never faulted by the rates.
    grace: int = 0
    seed: int = 0

    def __post_init__(self) -> None:
        for k, v in self.rates.items():
            if k not in FAULT_TYPES or k == "restart":
                raise FaultError(f"no rate for fault {k!r}")
            if not 0.0 <= v <= 1.0:
                raise FaultError(f"rate of {k} must be in [0, 1], got {v}")
        if sum(self.rates.values()) > 1.0 + 1e-9:
            raise FaultError(f"fault rates sum to {sum(self.rates.values()):.3f} > 1")

    @property
    def active(self) -> bool:
        """Whether any rate-based fault or periodic restart is configured."""
        return any(v > 0 for v in self.rates.values()) or self.restart_every is not None


class FaultPlanner:
    """Decides each request's fault (per-request spec first, then the seeded rate draw) and fills defaults."""

    def __init__(self, config: FaultConfig) -> None:
        self.config = config
        self._rng = random.Random(f"faults|{config.seed}")
        self._order = [(k, config.rates.get(k, 0.0)) for k in FAULT_TYPES if config.rates.get(k, 0.0) > 0]
        self._seen = 0

    def choose(self, requested: Fault | None, explicit_none: bool = False) -> Fault | None:
        """The fault of the next chat request: ``requested`` if given, else one drawn from the rates.

        ``explicit_none`` (the request asked for ``"none"``) skips the draw.  One random number is drawn per
        request whatever happens, so the sequence of drawn faults does not depend on per-request overrides.
        """
        self._seen += 1
        u = self._rng.random()
        if requested is not None:
            return requested
        if explicit_none or self._seen <= self.config.grace or not self._order:
            return None
        acc = 0.0
        for kind, rate in self._order:
            acc += rate
            if u < acc:
                return Fault(kind)
        return None

    def finalize(self, fault: Fault, total_tokens: int) -> Fault:
        """Fill ``after_tokens`` / ``seconds`` / ``retry_after`` defaults for a request of ``total_tokens``."""
        cfg = self.config
        if fault.type in MID_STREAM and fault.after_tokens is None:
            hi = total_tokens - 1 if fault.type == "stall_chunk" else total_tokens
            fault.after_tokens = self._rng.randint(1, max(1, hi))
        if fault.seconds is None:
            if fault.type in ("stall_first", "stall_chunk"):
                fault.seconds = cfg.stall_seconds
            elif fault.type == "slow_headers":
                fault.seconds = cfg.slow_headers_seconds
            elif fault.type == "restart":
                fault.seconds = cfg.restart_downtime
        if fault.type in ("http_429", "http_503") and fault.retry_after is None:
            fault.retry_after = cfg.retry_after
        return fault
