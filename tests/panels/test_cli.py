"""harness.panels.cli: ``llmload panels`` against a tiny Prometheus HTTP API on 127.0.0.1 (fake answers)."""

from __future__ import annotations

import contextlib
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
from tests.panels.fake_prometheus import ROOT, T0, T1, FakePrometheus


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
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, urllib.parse.parse_qs(url.query)
        if path == "/api/v1/status/config":
            self._send(200, {"status": "success", "data": {"yaml": "global:\n  scrape_interval: 2s\n"}})
        elif path == "/api/v1/query" and query.get("query") == ["1"]:
            self._send(200, {"status": "success", "data": {"resultType": "scalar", "result": [T0, "1"]}})
        elif path == "/api/v1/label/model/values":  # a run in this century only
            assert query["match[]"] == ["llmload_run_info"]
            models = ["sim-reasoner"] if float(query["end"][0]) > 1e9 else []
            self._send(200, {"status": "success", "data": models})
        else:
            self._send(404, {"status": "error", "error": "not found"})

    def do_POST(self) -> None:
        form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        expr = form["query"][0]
        if "llmload_time_per_output_token_" in expr:  # the TPOT panel: its histogram and its percentile gauge
            self._send(400, {"status": "error", "errorType": "bad_data", "error": "parse error: bad"})
            return
        res = self.fake(expr, float(form["start"][0]), float(form["end"][0]), float(form["step"][0]))
        self._send(200, {"status": "success", "data": {"resultType": "matrix", "result": res}})


class _NotPrometheusHandler(_Handler):
    """An LLM server (FastAPI-like): 404 on everything under /api/v1/."""

    def do_GET(self) -> None:
        self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        self._send(404, {"detail": "Not Found"})


@contextlib.contextmanager
def _serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fake_prometheus() -> Iterator[str]:
    with _serve(_Handler) as url:
        yield url


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """The command's stderr: one line starting ``llmload panels: `` (no traceback) holding every needle."""
    err = capsys.readouterr().err
    assert err.startswith("llmload panels: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_cli_against_a_prometheus_http_api(
    tmp_path: Path, fake_prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    out = tmp_path / "png"
    rc = main(["panels", "--prometheus", fake_prometheus, "--start", str(T0), "--end", str(T1), "--window", "1m",
               "--out", str(out), "--json", "--dashboard", str(ROOT / "grafana/dashboards/llmload.json")])  # fmt: skip
    # Prometheus rejected TPOT's queries: drawn with the error, exit 1 and a summary naming the panel.
    assert rc == 1
    captured = capsys.readouterr()
    assert (
        captured.err == "llmload panels: Prometheus rejected the queries of 1 panel(s) (drawn with the error): TPOT\n"
    )
    doc = json.loads(captured.out)
    # The model is the only one llmload_run_info has; the scrape interval is Prometheus' own (2 s): the step is
    # the scrape interval (120 s / 800 points is less) and $__rate_interval = max(2 s + 2 s, 4 x 2 s).
    assert doc["variables"]["model"] == "sim-reasoner" and doc["variables"]["window"] == "1m"
    assert doc["scrape_interval"] == 2 and doc["step"] == 2 and doc["variables"]["__rate_interval"] == "8s"
    tpot = next(p for p in doc["panels"] if p["title"] == "TPOT")
    assert [t["error"] for t in tpot["targets"]] == ["HTTP 400: parse error: bad"] * 3
    assert sorted(p.name for p in out.iterdir()) == [Path(p).name for p in doc["images"]]
    # --require-data: exit 1 when a target had no data. "5 minutes": the window as Prometheus writes it, 5m.
    rc = main(["panels", "--prometheus", fake_prometheus, "--last", "2m", "--out", str(out), "--require-data",
               "--window", "5 minutes", "--caption", "c"])  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 1 and re.search(r"Server: KV-cache use\s+0/1 targets with data  NO DATA", text), text
    assert "annotation Steps:" in text and "wrote " in text
    assert any("[5m]" in c[0] for c in _Handler.fake.calls)


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = panels.main(["--prometheus", "http://127.0.0.1:9", "--last", "5m", "--model", "m", "--out", str(tmp_path)])
    assert rc == 2 and "Prometheus at http://127.0.0.1:9" in capsys.readouterr().err
    rc = panels.main(["--start", "yesterday-ish", "--out", str(tmp_path)])
    assert rc == 2
    _one_line_error(capsys, "--start: not a time")


def test_not_a_prometheus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An LLM server answering 404 on /api/v1/...: exit 2 before drawing anything (it used to draw "NO DATA"
    # 18 times and exit 0).
    with _serve(_NotPrometheusHandler) as url:
        rc = panels.main(["--prometheus", url, "--last", "5m", "--out", str(tmp_path / "png")])
    assert rc == 2 and not (tmp_path / "png").exists()
    _one_line_error(capsys, f"not a Prometheus HTTP API at {url}: ", "HTTP 404", "Not Found")
    rc = panels.main(["--prometheus", "127.0.0.1:9090", "--last", "5m", "--out", str(tmp_path)])
    assert rc == 2
    _one_line_error(capsys, "--prometheus 127.0.0.1:9090: expected an http:// or https:// URL")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--window", "abc"], ["--window: not a duration: 'abc'"]),
        (["--window", "0s"], ["--window: '0s' is not a positive duration"]),
        (["--var", "window=soon"], ["--var window: not a duration: 'soon'"]),
        (["--step", "0"], ["--step: '0' is not a positive duration"]),
        (
            ["--step", "0.001"],
            ["--step 0.001: 7,200,000 points per series over the 2h range", "11,000", "use --step 655ms or more"],
        ),
        (["--scrape-interval", "0"], ["--scrape-interval: '0' is not a positive duration"]),
        (["--last", "0s"], ["--last: '0s' is not a positive duration"]),
        (["--var", "foo"], ["--var 'foo': --var expects NAME=VALUE"]),
        (["--var", "=x"], ["--var '=x': --var expects NAME=VALUE"]),
        (
            ["--start", "1764450000000", "--end", "now"],
            ["--start: 1764450000000 looks like milliseconds; give seconds"],
        ),
        (["--start", "now-1h", "--end", "1764450000000.5"], ["--end: 1764450000000.5 looks like milliseconds"]),
        (["--start", "now-1h"], ["--last conflicts with --start/--end"]),
        (["--end", "now"], ["--last conflicts with --start/--end"]),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    args: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Checked before Prometheus is asked anything (port 9 refuses connections) and before anything is drawn.
    argv = ["--prometheus", "http://127.0.0.1:9", "--out", str(tmp_path / "png"), *args]
    if "--last" not in args and ("--start" not in args or "--end" not in args):
        argv += ["--last", "2h"]
    assert panels.main(argv) == 2 and not (tmp_path / "png").exists()
    _one_line_error(capsys, *needles)


def test_start_after_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = panels.main(
        ["--prometheus", "http://127.0.0.1:9", "--start", str(T1), "--end", str(T0), "--out", str(tmp_path)]
    )
    assert rc == 2
    _one_line_error(
        capsys, "--start/--end: empty time range: 2027-01-15 08:02:00 UTC is not before 2027-01-15 08:00:00"
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            '{"panels": [\n  {"type": "timeseries",}\n]}',
            "not valid JSON: Expecting property name enclosed in double quotes at line 2 column 25",
        ),
        ("[1, 2]", "expected a JSON object (a Grafana dashboard), got an array"),
        ('"dashboard"', "expected a JSON object (a Grafana dashboard), got a string"),
        ("{}", "no panels"),
        ('{"panels": []}', "no panels"),
        ('{"panels": [{"type": "row", "title": "A"}]}', "no panels"),
        ('{"panels": {"a": 1}}', '"panels" is not a list of panel objects'),
    ],
)
def test_bad_dashboard_files(text: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dash = tmp_path / "dash.json"
    dash.write_text(text)
    rc = panels.main(["--prometheus", "http://127.0.0.1:9", "--dashboard", str(dash), "--last", "5m"])
    assert rc == 2
    _one_line_error(capsys, f"{dash}: {needle}")
    rc = panels.main(["--prometheus", "http://127.0.0.1:9", "--dashboard", str(tmp_path / "none.json")])
    assert rc == 2
    _one_line_error(capsys, f"--dashboard {tmp_path / 'none.json'}: cannot read it: No such file or directory")


def test_model_not_in_llmload_run_info(
    tmp_path: Path, fake_prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--prometheus", fake_prometheus, "--out", str(tmp_path / "png"), "--start", str(T0), "--end", str(T1)]
    assert panels.main([*base, "--model", "nonexistent"]) == 2
    _one_line_error(capsys, "--model nonexistent: no such model in llmload_run_info over 2027-01-15 08:00:00 UTC",
                    "there: sim-reasoner")  # fmt: skip
    assert panels.main([*base, "--var", "model=other"]) == 2
    _one_line_error(capsys, "--var model other: no such model", "there: sim-reasoner")
    # A range without any run (the fake Prometheus has none before 2001).
    past = ["--prometheus", fake_prometheus, "--out", str(tmp_path / "png"), "--start", "900000000"]
    assert panels.main([*past, "--end", "900000600", "--model", "sim-reasoner"]) == 2
    _one_line_error(capsys, "--model sim-reasoner: no llmload_run_info series (no llmload run) in Prometheus over "
                    "1998-07-09 16:00:00 UTC – 1998-07-09 16:10:00 UTC: check --start/--end/--last")  # fmt: skip
    assert not (tmp_path / "png").exists()


def test_default_dashboard_is_the_projects_from_any_directory(
    tmp_path: Path, fake_prometheus: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.panels import cli

    assert cli.shipped_dashboard() == ROOT / "grafana" / "dashboards" / "llmload.json"
    monkeypatch.chdir(tmp_path)  # no grafana/ here
    rc = panels.main(["--prometheus", fake_prometheus, "--start", str(T0), "--end", str(T1), "--out", "png", "--json"])
    captured = capsys.readouterr()
    assert rc == 1 and "rejected the queries of 1 panel(s)" in captured.err  # the fake rejects TPOT's queries
    assert len(json.loads(captured.out)["images"]) == 5 and len(list((tmp_path / "png").iterdir())) == 5
    # An install without the source tree (no grafana/ next to the package): say so, exit 2.
    monkeypatch.setattr(cli, "shipped_dashboard", lambda: tmp_path / "site-packages" / "grafana" / "llmload.json")
    assert panels.main(["--prometheus", fake_prometheus, "--last", "5m", "--out", "png"]) == 2
    _one_line_error(capsys, "no --dashboard given and the project's dashboard is not at ", "pass --dashboard FILE")
