"""Client read lag: is the load generator keeping up with the server it measures?

A request's read lag (``read_lag_max`` in its record, seconds; see :class:`harness.result.RequestResult`) is the
largest, over its response's reads, of (wall time this process read the bytes - the kernel's receive time of those
bytes, ``SO_TIMESTAMPNS``). Chunk arrivals stay kernel-stamped whatever the lag, but a lagging client starts each
user's next request late (and may send it late after stamping "request sent"), so a step's throughput then
measures the client and its latencies include client delays. Found against vLLM's CPU build sharing 2 cores with
Locust: the Locust process got 2-5 % of a core, read lags of 0.15-0.5 s, TTFT p50 0.27 s instead of 0.01 s, and
C=4 measured below C=2.

The same two thresholds are used live (:class:`LagWatch`, a log warning) and by the report
(``harness.report.figures.client_lag``, a note and ``client_starved`` per step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.result import RequestResult

__all__ = ["CLIENT_LAG_LIMIT_S", "CLIENT_STARVED_PCT", "SEVERE_LAG_S", "LagWatch"]

#: A request whose client read lag exceeds this many seconds was read late by a busy client.
CLIENT_LAG_LIMIT_S = 0.1
#: A step with more than this percentage of its (kernel-stamped) requests read late is client-starved.
CLIENT_STARVED_PCT = 10.0
#: One request read this many seconds late is enough for the live warning, however few requests the step has
#: (a single-stream phase of minute-long requests has only a handful).
SEVERE_LAG_S = 1.0


class LagWatch:
    """Counts read lag per step as records arrive; says once per step when the client falls behind.

    It warns when more than :data:`CLIENT_STARVED_PCT` % of a step's stamped requests lagged more than
    :data:`CLIENT_LAG_LIMIT_S` once the step has ``min_requests`` of them, or at once when a request lagged
    :data:`SEVERE_LAG_S` or more. A warning is attributed to the step the request started in.

    Args:
        min_requests: stamped requests a step needs before the share rule applies (one slow read among the
            first few requests must not raise the alarm).
    """

    def __init__(self, min_requests: int = 5) -> None:
        self.min_requests = min_requests
        self._steps: dict[tuple[str, int], list[float]] = {}  # (phase, step) -> [stamped, late, max lag]
        self._warned: set[tuple[str, int]] = set()

    def observe(self, rec: RequestResult | Mapping[str, Any]) -> str | None:
        """Count one request (a result, or its ``records.jsonl`` dict); return a warning the first time its step
        is starved.

        Warm-up records and records without ``read_lag_max`` (TLS, non-Linux) are ignored.

        Raises:
            ValueError: a record of a schema version this harness cannot read.
        """
        res = rec if isinstance(rec, RequestResult) else RequestResult.from_record(rec)
        lag = res.read_lag_max
        if lag is None or res.phase == "warmup":
            return None
        key = (res.phase, res.step)
        s = self._steps.setdefault(key, [0.0, 0.0, 0.0])
        s[0] += 1
        if lag > CLIENT_LAG_LIMIT_S:
            s[1] += 1
        s[2] = max(s[2], lag)
        if key in self._warned:
            return None
        share_rule = s[0] >= self.min_requests and 100.0 * s[1] / s[0] > CLIENT_STARVED_PCT
        if not share_rule and lag < SEVERE_LAG_S:
            return None
        self._warned.add(key)
        return (
            f"llmload: the LOAD GENERATOR IS FALLING BEHIND at C={res.concurrency}: {int(s[1])} of "
            f"{int(s[0])} requests so far were read more than {CLIENT_LAG_LIMIT_S:g} s after their bytes arrived "
            f"(max {s[2]:.2f} s), so this step's throughput will be the client's limit, not the server's. Run "
            "Locust on other CPUs than the server, or use more worker processes (--processes N)."
        )
