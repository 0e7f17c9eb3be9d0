"""harness.panels.cli: ``llmload panels`` against a tiny Prometheus HTTP API on 127.0.0.1 (fake answers)."""

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
