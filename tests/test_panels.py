"""harness.panels: the dashboard renderer, against fake Prometheus answers (an injected query function, and a tiny
Prometheus HTTP API on 127.0.0.1 for the command line). The real Prometheus check is in
tests/integration/test_prometheus.py (test_dashboard_queries_against_real_prometheus)."""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness import panels
from harness.panels import (
    QueryError,
    format_duration,
    format_value,
    legend_name,
    parse_duration,
    parse_time,
    render_dashboard,
    resolve_variables,
    substitute,
    tick_labels,
)

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = json.loads((ROOT / "grafana" / "dashboards" / "llmload.json").read_text())
T0 = 1_800_000_000.0
T1 = T0 + 120


# -- variables, legends, units, times --------------------------------------------------------------------------
def test_substitute_every_variable_form() -> None:
    v = {"model": "m1", "window": "30s", "__rate_interval": "4s"}
    assert substitute('rate(x{model=~"$model"}[$window])', v) == 'rate(x{model=~"m1"}[30s])'
    assert substitute("${model} [[window]] ${model:regex} $__rate_interval", v) == "m1 30s m1 4s"
    assert substitute("$windowed $unknown", v) == "$windowed $unknown"  # whole names only; unknown left alone


def test_resolve_variables_from_caller_dashboard_and_all_value() -> None:
    got = resolve_variables(DASHBOARD, {})
    assert got == {"model": ".*", "window": "5m"}  # model: includeAll's allValue; window: its current value
    assert resolve_variables(DASHBOARD, {"$model": "k26", "window": "30s"}) == {"model": "k26", "window": "30s"}
    dash = {"templating": {"list": [{"name": "x", "type": "custom", "current": {}}]}}
    with pytest.raises(ValueError, match="x"):
        resolve_variables(dash, {})


def test_legend_format_substitution() -> None:
    metric = {"__name__": "llmload_x", "n": "1000", "concurrency": "8"}
    assert legend_name("N={{n}} at C={{ concurrency }}", metric) == "N=1000 at C=8"
    assert legend_name("{{error_class}}", metric) == ""  # a label the series lacks: empty, as in Grafana
    assert legend_name("", metric) == 'llmload_x{concurrency="8", n="1000"}'
    assert legend_name("__auto", {}, "sum(rate(x[5m]))") == "sum(rate(x[5m]))"


@pytest.mark.parametrize(
    ("value", "unit", "decimals", "want"),
    [
        (1548.1, "short", None, "1.55 K"),
        (613.2, "short", None, "613"),
        (2_300_000, "short", None, "2.30 Mil"),
        (0.025, "s", None, "25.0 ms"),
        (2.5, "s", None, "2.50 s"),
        (90, "s", None, "1.50 min"),
        (0, "s", None, "0 s"),
        (250, "ms", None, "250 ms"),
        (10.34, "h", 1, "10.3 hour"),
        (80, "h", 1, "3.3 day"),
        (0.5, "h", 0, "30 min"),
        (0.353, "percentunit", 1, "35.3%"),
        (4, "reqps", None, "4.00 req/s"),
        (12.5, "percent", 0, "12%"),
        (2048, "bytes", 0, "2 KiB"),
        (7, "suffix: tok/s", 0, "7 tok/s"),
        (7, "tok/s", 0, "7 tok/s"),
        (float("nan"), "s", None, "NaN"),
    ],
)
def test_format_value_units(value: float, unit: str, decimals: int | None, want: str) -> None:
    assert format_value(value, unit, decimals) == want


def test_tick_labels_fewest_distinct_decimals() -> None:
    assert tick_labels([0, 0.01, 0.02, 0.03], "s") == ["0 s", "10 ms", "20 ms", "30 ms"]
    assert tick_labels([0, 1000, 2000, 3000], "short") == ["0", "1 K", "2 K", "3 K"]
    assert tick_labels([0, 0.5, 1, 1.5], "reqps") == ["0 req/s", "0.5 req/s", "1.0 req/s", "1.5 req/s"]
    assert tick_labels([0, 0.2, 0.4], "percentunit") == ["0%", "20%", "40%"]


def test_times_and_durations() -> None:
    assert parse_duration("90") == 90 and parse_duration("15m") == 900 and parse_duration("1h30m") == 5400
    assert parse_duration("15 minutes") == 900 and parse_duration("500ms") == 0.5
    with pytest.raises(ValueError):
        parse_duration("soon")
    assert format_duration(4) == "4s" and format_duration(90) == "1m30s" and format_duration(0.25) == "250ms"
    now = 1_800_000_000.0
    assert parse_time("1764450000", now) == 1764450000
    assert parse_time("now", now) == now and parse_time("now-15m", now) == now - 900
    assert parse_time("last 10 minutes", now) == now - 600 and parse_time("2 hours ago", now) == now - 7200
    assert parse_time("2027-01-15T08:00:00Z") == parse_time("2027-01-15T08:00:00") == 1_800_000_000
    with pytest.raises(ValueError):
        parse_time("yesterday-ish", now)


# -- rendering the shipped dashboard from fake answers ------------------------------------------------------------
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
        if "histogram_quantile" in expr:  # NaN where there were no requests, as Prometheus answers
            return [series({}, [float("nan")] * 5 + [0.02 + 0.001 * i for i in range(n - 5)])]
        return [series({}, ramp)]


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
    fake = FakePrometheus(fail="llmload_time_per_output_token_seconds")
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


# -- the command line against a tiny Prometheus HTTP API on 127.0.0.1 -----------------------------------------
class _Handler(BaseHTTPRequestHandler):
    fake = FakePrometheus()

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/api/v1/status/config":
            self._send(200, {"status": "success", "data": {"yaml": "global:\n  scrape_interval: 2s\n"}})
        elif path == "/api/v1/label/model/values":
            self._send(200, {"status": "success", "data": ["sim-reasoner"]})
        else:
            self._send(404, {"status": "error", "error": "not found"})

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        expr = form["query"][0]
        if "llmload_time_per_output_token_seconds" in expr:
            self._send(400, {"status": "error", "errorType": "bad_data", "error": "parse error: bad"})
            return
        res = self.fake(expr, float(form["start"][0]), float(form["end"][0]), float(form["step"][0]))
        self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": res}})


@pytest.fixture
def fake_prometheus() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_cli_against_a_prometheus_http_api(
    tmp_path: Path, fake_prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    out = tmp_path / "png"
    rc = main(["panels", "--prometheus", fake_prometheus, "--start", str(T0), "--end", str(T1), "--window", "1m",
               "--out", str(out), "--json", "--dashboard", str(ROOT / "grafana/dashboards/llmload.json")])  # fmt: skip
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    # The model is the only one llmload_run_info has; the scrape interval is Prometheus' own (2 s): the step is
    # the scrape interval (120 s / 800 points is less) and $__rate_interval = max(2 s + 2 s, 4 x 2 s).
    assert doc["variables"]["model"] == "sim-reasoner" and doc["variables"]["window"] == "1m"
    assert doc["scrape_interval"] == 2 and doc["step"] == 2 and doc["variables"]["__rate_interval"] == "8s"
    tpot = next(p for p in doc["panels"] if p["title"] == "TPOT")
    assert [t["error"] for t in tpot["targets"]] == ["HTTP 400: parse error: bad"] * 3
    assert sorted(p.name for p in out.iterdir()) == [Path(p).name for p in doc["images"]]
    # --require-data: exit 1 when a target had no data.
    rc = main(["panels", "--prometheus", fake_prometheus, "--last", "2m", "--out", str(out), "--require-data"])
    text = capsys.readouterr().out
    assert rc == 1 and re.search(r"Server: KV-cache use\s+0/1 targets with data  NO DATA", text), text
    assert "annotation Steps:" in text and "wrote " in text


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = panels.main(["--prometheus", "http://127.0.0.1:9", "--last", "5m", "--model", "m", "--out", str(tmp_path)])
    assert rc == 2 and "Prometheus at http://127.0.0.1:9" in capsys.readouterr().err
    rc = panels.main(["--start", "yesterday-ish", "--out", str(tmp_path)])
    assert rc == 2 and "not a time" in capsys.readouterr().err
