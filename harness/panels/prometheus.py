"""Prometheus' HTTP API: range queries (``/api/v1/query_range``), its ``global.scrape_interval``, and the two ways
a query fails (:class:`QueryError`, :class:`PrometheusUnavailable`)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from harness.panels.times import parse_duration

#: ``query(expr, start, end, step)`` → Prometheus' ``data.result`` of a range query (a list of
#: ``{"metric": {...}, "values": [[t, "v"], ...]}``); times and step in seconds. Raises :class:`QueryError`
#: for an expression Prometheus rejects.
QueryFn = Callable[[str, float, float, float], list[dict[str, Any]]]


class QueryError(Exception):
    """Prometheus rejected an expression (HTTP 4xx/5xx or ``status: error``); the message is Prometheus' own."""


class PrometheusUnavailable(OSError):
    """Prometheus could not be reached at all (connection refused, time-out)."""


def prometheus_get(url: str, data: dict[str, str] | None, timeout: float) -> Any:
    """The ``data`` of a Prometheus API answer: a GET of ``url``, or a form POST of ``data`` when given.
    Raises :class:`QueryError` when Prometheus answers with an error, :class:`PrometheusUnavailable` when it
    cannot be reached."""
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body)
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            doc = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        raw = e.read().decode(errors="replace")
        try:
            msg = json.loads(raw).get("error") or raw
        except ValueError:
            msg = raw
        raise QueryError(f"HTTP {e.code}: {msg}".strip()) from None
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusUnavailable(f"Prometheus at {url.split('/api/', 1)[0]}: {e}") from None
    if doc.get("status") != "success":
        raise QueryError(str(doc.get("error") or doc))
    return doc["data"]


def prometheus_query_range(prometheus_url: str, timeout: float = 30.0) -> QueryFn:
    """A :data:`QueryFn` that POSTs to ``prometheus_url``'s ``/api/v1/query_range``."""
    base = prometheus_url.rstrip("/")

    def query(expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = prometheus_get(base + "/api/v1/query_range", params, timeout)
        return list(data.get("result") or [])

    return query


def prometheus_scrape_interval(prometheus_url: str, timeout: float = 10.0) -> float | None:
    """``global.scrape_interval`` (seconds) of the Prometheus at ``prometheus_url``, from its loaded config."""
    import yaml

    try:
        data = prometheus_get(prometheus_url.rstrip("/") + "/api/v1/status/config", None, timeout)
        cfg = yaml.safe_load(data["yaml"])
        return parse_duration(str(cfg["global"]["scrape_interval"]))
    except (QueryError, KeyError, TypeError, ValueError):
        return None
