"""harness.panels.render: the dashboard renderer, against fake Prometheus answers (an injected query function).
The real Prometheus check is in tests/integration/test_prometheus.py
(test_dashboard_queries_against_real_prometheus)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.panels import render_dashboard
from tests.panels.fake_prometheus import DASHBOARD, T0, T1, FakePrometheus, series


def test_render_shipped_dashboard_from_fake_answers(tmp_path: Path) -> None:
    fake = FakePrometheus()
    res = render_dashboard(
        DASHBOARD, "http://127.0.0.1:9", T0, T1, {"model": "sim-reasoner", "window": "30s"}, tmp_path,
        step=1.0, scrape_interval=1.0, query=fake, caption="fake run",
    )  # fmt: skip
    non_rows = [p for p in DASHBOARD["panels"] if p["type"] != "row"]
    assert [p.title for p in res.panels] == [p["title"] for p in sorted(non_rows, key=lambda p: (
        p["gridPos"]["y"], p["gridPos"]["x"]))]  # fmt: skip
    rows = [p["title"] for p in DASHBOARD["panels"] if p["type"] == "row"]
    assert len(res.images) == len(rows) and res.images[0].name == "01-throughput.png"
    for img in res.images:
        data = img.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and 20_000 < len(data) < 400_000, (img, len(data))
    # Every expression went out with its variables substituted: window, model and $__rate_interval (4 s).
    sent = [c[0] for c in fake.calls]
    assert sent and not [e for e in sent if "$" in e or "[[" in e]
    assert any("[30s]" in e for e in sent) and any("[4s]" in e for e in sent)
    assert all('model=~"sim-reasoner"' in e or 'model_name=~"sim-reasoner"' in e for e in sent)
    assert {c[1:] for c in fake.calls} == {(T0, T1, 1.0)}
    assert res.variables["__rate_interval"] == "4s" and res.variables["__interval"] == "1s"
    # Legends from legendFormat, series in natural order; panels without data reported as such.
    assert res.target("Requests/s by outcome", "{{outcome}}").series_names == ["truncated", "usable"]
    assert res.target("Output tokens/s by concurrency", "C={{concurrency}}").series_names == ["C=1", "C=8", "C=16"]
    assert res.target("Hours to N usable samples (live)", "N={{n}} at C={{concurrency}}").series_names == [
        "N=1000 at C=8"
    ]
    assert res.without_data() == ["Errors/s by class / {{error_class}}", "Server: KV-cache use / KV cache"]
    kv = next(p for p in res.panels if p.title == "Server: KV-cache use")
    assert not kv.has_data and kv.targets[0].series == 0 and kv.targets[0].error is None
    assert res.annotations == {"Steps": 2}
    assert res.to_dict()["panels"][0]["has_data"] is True


def test_a_rejected_query_is_reported_and_drawn(tmp_path: Path) -> None:
    fake = FakePrometheus(fail="llmload_time_per_output_token_")  # the TPOT panel: histogram and percentile gauge
    res = render_dashboard(DASHBOARD, "http://x", T0, T1, {"model": "m"}, tmp_path, 2.0, scrape_interval=5, query=fake)
    tpot = next(p for p in res.panels if p.title == "TPOT")
    assert not tpot.has_data and all(t.error and "parse error" in t.error for t in tpot.targets)
    assert res.variables["__rate_interval"] == "20s"  # max(2 s + 5 s, 4 x 5 s)
    assert all(p.has_data for p in res.panels if p.title not in ("TPOT", "Errors/s by class", "Server: KV-cache use"))


def test_small_dashboard_units_overrides_and_stat(tmp_path: Path) -> None:
    dash = {
        "title": "t",
        "templating": {"list": []},
        "annotations": {"list": []},
        "panels": [
            {"type": "timeseries", "title": "before any row", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 6},
             "fieldConfig": {"defaults": {"unit": "percentunit", "custom": {"spanNulls": False}}, "overrides": [
                 {"matcher": {"id": "byName", "options": "b"}, "properties": [
                     {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
                     {"id": "custom.lineInterpolation", "value": "stepAfter"},
                     {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}}]}]},
             "targets": [{"refId": "A", "expr": "a", "legendFormat": "a"}, {"refId": "B", "expr": "b",
                                                                             "legendFormat": "b"}]},
            {"type": "row", "title": "Second row", "gridPos": {"x": 0, "y": 6, "w": 24, "h": 1}},
            {"type": "stat", "title": "stat", "gridPos": {"x": 0, "y": 7, "w": 8, "h": 4},
             "fieldConfig": {"defaults": {"unit": "s"}}, "options": {"reduceOptions": {"calcs": ["max"]}},
             "targets": [{"refId": "A", "expr": "c", "legendFormat": "{{x}}"}]},
            {"type": "table", "title": "unsupported", "gridPos": {"x": 8, "y": 7, "w": 8, "h": 4},
             "targets": [{"refId": "A", "expr": "a"}]},
            {"type": "timeseries", "title": "empty", "gridPos": {"x": 16, "y": 7, "w": 8, "h": 4},
             "targets": [{"refId": "A", "expr": "nothing"}]},
        ],
    }  # fmt: skip

    def query(expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        if expr == "nothing":
            return []
        vals = [0.1, 0.2, 0.5, 0.3]
        if expr == "c":
            return [series({"x": "one"}, vals), series({"x": "two"}, [float("nan")] * 4)]
        return [{"metric": {}, "values": [[T0, "0.1"], [T0 + 1, "0.4"], [T0 + 30, "0.2"]]}]  # a gap: spanNulls off

    res = render_dashboard(dash, "http://x", T0, T0 + 60, {}, tmp_path, 1.0, scrape_interval=1, query=query)
    assert [p.name for p in res.images] == ["01-t.png", "02-second-row.png"]
    assert [(p.title, p.row, p.has_data) for p in res.panels] == [
        ("before any row", "t", True),
        ("stat", "Second row", True),
        ("unsupported", "Second row", True),
        ("empty", "Second row", False),
    ]
    stat = res.target("stat", "{{x}}")
    assert stat.series_names == ["one", "two"] and stat.has_data
    assert res.without_data() == ["empty / "]


def test_empty_time_range_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty time range"):
        render_dashboard(DASHBOARD, "http://x", T1, T0, {}, tmp_path, query=FakePrometheus())


def test_a_long_range_stays_within_prometheus_points_limit(tmp_path: Path) -> None:
    """Over 3 days every query, the step-marker annotation's included (its own step is 10 s: 25,920 points),
    asks for at most 11,000 points per series, which is all Prometheus answers."""
    fake = FakePrometheus()
    end = T0 + 3 * 86400
    render_dashboard(
        DASHBOARD, "http://127.0.0.1:9", T0, end, {"model": "sim-reasoner", "window": "5m"}, tmp_path,
        scrape_interval=5.0, query=fake, caption="long range",
    )  # fmt: skip
    assert fake.calls
    assert all((e - s) / st + 1 <= 11_000 for _, s, e, st in fake.calls), max(
        (e - s) / st for _, s, e, st in fake.calls
    )
