"""Fake Prometheus answers for the harness.panels tests: the shipped dashboard, a fixed time range, and a query
function answering the dashboard's expressions like a Prometheus of a short run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.panels import QueryError

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "grafana" / "dashboards" / "llmload.json").read_text())
T0 = 1_800_000_000.0
T1 = T0 + 120


def series(metric: dict[str, str], values: list[float], start: float = T0, step: float = 1.0) -> dict[str, Any]:
    return {"metric": metric, "values": [[start + i * step, str(v)] for i, v in enumerate(values)]}


class FakePrometheus:
    """Answers the dashboard's expressions like a Prometheus of a short run would: by-label expressions get a
    series per label value, the step-marker annotation two marks, KV-cache and error-class queries nothing."""

    def __init__(self, fail: str | None = None) -> None:
        self.calls: list[tuple[str, float, float, float]] = []
        self.fail = fail

    def __call__(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        self.calls.append((expr, start, end, step))
        n = int((end - start) / step) + 1
        ramp = [i * 10.0 for i in range(n)]
        if self.fail and self.fail in expr:
            raise QueryError('HTTP 400: parse error: unexpected "}"')
        if "kv_cache" in expr or "error_class" in expr:
            return []
        if "llmload_step_start_time_seconds" in expr:
            return [
                series({"phase": "step", "step": "1", "concurrency": "8"}, [(T0 + 10) * 1000] * n),
                series({"phase": "step", "step": "2", "concurrency": "16"}, [(T0 + 60) * 1000] * (n - 60), T0 + 60),
            ]
        if "by (outcome)" in expr:
            return [series({"outcome": "usable"}, ramp), series({"outcome": "truncated"}, ramp[::-1])]
        if "by (concurrency)" in expr:
            return [series({"concurrency": c}, ramp) for c in ("16", "8", "1")]
        if "llmload_estimated_time_to_samples_seconds" in expr:
            return [series({"n": "1000", "concurrency": "8"}, [36.0, 20.0, 10.5])]
        if "histogram_quantile" in expr or "_percentile_seconds" in expr:  # NaN where there were no requests yet
            return [series({}, [float("nan")] * 5 + [0.02 + 0.001 * i for i in range(n - 5)])]
        return [series({}, ramp)]
