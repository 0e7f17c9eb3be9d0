"""Prometheus' HTTP API: range queries (``/api/v1/query_range``), its ``global.scrape_interval``, label values,
a probe that the URL is a Prometheus at all (:func:`probe_prometheus`), and the ways a query fails
(:class:`QueryError`, :class:`PrometheusUnavailable`, :class:`NotPrometheus`)."""

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


class NotPrometheus(ValueError):
    """The URL answers, but not as a Prometheus HTTP API (e.g. an LLM server answering 404 on ``/api/v1/...``)."""


def _excerpt(text: str, limit: int = 160) -> str:
    """``text`` on one line, whitespace collapsed, cut at ``limit`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


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
            raw = r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        raw = e.read().decode(errors="replace")
        try:
            doc = json.loads(raw)
            msg = (doc.get("error") if isinstance(doc, dict) else None) or raw
        except ValueError:
            msg = raw
        raise QueryError(f"HTTP {e.code}: {msg}".strip()) from None
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusUnavailable(f"Prometheus at {url.split('/api/', 1)[0]}: {e}") from None
    try:
        doc = json.loads(raw)
    except ValueError:
        raise QueryError(f"not a JSON answer: {_excerpt(raw) or '(empty)'}") from None
    if not isinstance(doc, dict) or doc.get("status") != "success" or "data" not in doc:
        err = doc.get("error") if isinstance(doc, dict) else None
        raise QueryError(str(err) if err else f"not a Prometheus API answer: {_excerpt(raw)}")
    return doc["data"]


def probe_prometheus(prometheus_url: str, timeout: float = 10.0) -> None:
    """Check that ``prometheus_url`` is a Prometheus HTTP API: its ``/api/v1/query?query=1`` answers the scalar 1.
    Raises :class:`NotPrometheus` (with what came back) when it is not, :class:`PrometheusUnavailable` when it
    cannot be reached."""
    base = prometheus_url.rstrip("/")
    try:
        data = prometheus_get(base + "/api/v1/query?query=1", None, timeout)
    except QueryError as e:
        raise NotPrometheus(
            f"not a Prometheus HTTP API at {base}: GET /api/v1/query?query=1: {_excerpt(str(e))}"
        ) from None
    if not isinstance(data, dict) or data.get("resultType") != "scalar":
        got = _excerpt(json.dumps(data))
        raise NotPrometheus(f"not a Prometheus HTTP API at {base}: GET /api/v1/query?query=1 answered {got}")


def prometheus_label_values(
    prometheus_url: str, label: str, match: str, start: float, end: float, timeout: float = 10.0
) -> list[str]:
    """The values of ``label`` on the series matching ``match`` in [``start``, ``end``] (Grafana's
    ``label_values(match, label)``), sorted. Prometheus answers from whole TSDB blocks: values of series just
    outside the range may be included, none inside it left out."""
    params = urllib.parse.urlencode({"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
    data = prometheus_get(f"{prometheus_url.rstrip('/')}/api/v1/label/{label}/values?{params}", None, timeout)
    if not isinstance(data, list):
        raise QueryError(f"label values of {label}: not a list: {_excerpt(json.dumps(data))}")
    return sorted(str(v) for v in data)


def prometheus_query_range(prometheus_url: str, timeout: float = 30.0) -> QueryFn:
    """A :data:`QueryFn` that POSTs to ``prometheus_url``'s ``/api/v1/query_range``."""
    base = prometheus_url.rstrip("/")

    def query(expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = prometheus_get(base + "/api/v1/query_range", params, timeout)
        if not isinstance(data, dict):
            raise QueryError(f"not a range query answer: {_excerpt(json.dumps(data))}")
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
