"""End to end: a run's keys appear in no file, log, web-UI page or download, and no Prometheus metric.

A loopback server (:mod:`tests.integration.secret_server`) requires three distinctive keys (``api-key`` from
``target.headers_env``, the API key as ``Authorization: Bearer`` from ``target.api_key_env``, ``x-api-key``
written in ``target.headers``) and echoes all three in a 401 error body for every third request; a fourth is a
query parameter of the base URL. The test greps every file under the run directory, the captured stdout and
stderr, every web-UI page and download, and every Prometheus scrape taken during the run: no key anywhere, and
the marker where the keys would have been.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask, jsonify

from harness.redact import MARKER
from harness.webui import routes
from harness.webui.downloads import FILES
from harness.webui.runs import RunDirs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
AZ_KEY = "azkey-Q7x9Zr2LmN4pW8vT"
BEARER_KEY = "bearerkey-H3k8Jd5Fs1Ga6"
HDR_KEY = "hdrkey-Y2u7Ic4Oe9Pb3"
QUERY_KEY = "querykey-M5n1Bv6Cx8Za"
KEYS = (AZ_KEY, BEARER_KEY, HDR_KEY, QUERY_KEY)

PROFILE = """
name: secrets
target:
  base_url: "%(url)s/v1?api-version=2024-02-01&api-key=%(qkey)s"
  model: m
  api_key_env: LLMLOAD_SECRET_TEST_BEARER
  headers: {x-api-key: %(hdr)s, X-Trace: plain}
  headers_env: {api-key: LLMLOAD_SECRET_TEST_AZ}
prompts:
  - {id: short, text: "Say hello", max_tokens: 32}
warmup: {max_tokens: 16, timeout: 20}
single_stream: {duration: 1}
steps: {concurrency: [2], duration: 2}
timeouts: {connect: 5, first_byte: 10, first_token: 10, idle: 5, total: 20}
output: {dir: %(out)s}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _hits(text: str) -> list[str]:
    return [k for k in KEYS if k in text]


class _FakeWebUI:
    """What the routes use of ``locust.web.WebUI``: the Flask app and the auth decorator (no auth)."""

    def __init__(self) -> None:
        self.app = Flask("secrets")
        self.template_args: dict[str, Any] = {}

        @self.app.route("/stats/requests")
        def stats() -> Any:
            return jsonify({"stats": []})

    def auth_required_if_enabled(self, view: Any) -> Any:
        return view


@pytest.fixture
def server() -> Any:
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("secret_server.py")),
                             AZ_KEY, BEARER_KEY, HDR_KEY], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_keys_appear_in_no_file_log_page_or_metric(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "runs"
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE % {"url": server, "qkey": QUERY_KEY, "hdr": HDR_KEY, "out": out})
    env = {**os.environ, "LLMLOAD_SECRET_TEST_AZ": AZ_KEY, "LLMLOAD_SECRET_TEST_BEARER": BEARER_KEY,
           "PYTHONUNBUFFERED": "1"}
    port = _free_port()
    stdout, stderr = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    scrapes: list[str] = []
    with stdout.open("w") as so, stderr.open("w") as se:
        proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
             "--profile", str(prof), "--metrics-port", str(port), "--metrics-linger", "0", "--loglevel", "DEBUG"],
            cwd=tmp_path, env=env, stdout=so, stderr=se)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    scrapes.append(r.read().decode())
            except OSError:
                pass
            time.sleep(0.3)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    logs = stdout.read_text() + stderr.read_text()
    assert proc.returncode in (0, 1), logs[-3000:]  # 1: some requests failed (the 401s), as intended

    # -- every file under the run directory ----------------------------------------------------------------
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"run.json", "records.jsonl", "report.json", "report.md"} <= {p.name for p in files}
    for p in files:
        assert _hits(p.read_bytes().decode("utf-8", "replace")) == [], p.name
    records = (run_dir / "records.jsonl").read_text()
    assert '"http_4xx"' in records or "401" in records  # the server did echo keys into error bodies...
    assert f"api-key {MARKER}" in records and f"Bearer {MARKER}" in records  # ...and they were redacted
    run_json = (run_dir / "run.json").read_text()
    assert f"api-key={MARKER}" in run_json and f'"x-api-key": "{MARKER}"' in run_json
    assert "LLMLOAD_SECRET_TEST_AZ" in run_json  # the variable's name is kept, its value is not

    # -- the captured stdout / stderr (logs) ---------------------------------------------------------------
    assert _hits(logs) == []
    assert MARKER in logs  # the base URL's query key, shown redacted in the start-up line

    # -- Prometheus exposition -----------------------------------------------------------------------------
    assert scrapes, "no scrape of the exporter succeeded during the run"
    assert any("llmload_run_info" in s for s in scrapes)
    for s in scrapes:
        assert _hits(s) == []
    assert any(MARKER in s for s in scrapes if "llmload_run_info" in s)

    # -- the web UI's pages, JSON and downloads --------------------------------------------------------------
    monkeypatch.setattr(routes, "run_dirs", lambda: RunDirs(None, (run_dir,), "finished"))
    ui = _FakeWebUI()
    routes.install_routes(SimpleNamespace(parsed_options=SimpleNamespace(web_base_path=None), runner=None), ui)
    client = ui.app.test_client()
    pages = {"/llm/": client.get("/llm/"), "/llm/data.json": client.get("/llm/data.json"),
             f"/llm/data.json?run={run_dir.name}": client.get(f"/llm/data.json?run={run_dir.name}")}
    for name in (*FILES, "figures.zip"):
        pages[name] = client.get(f"/llm/download/{run_dir.name}/{name}")
    assert pages["/llm/data.json"].status_code == 200 and pages["records.jsonl"].status_code == 200
    for url, resp in pages.items():
        assert _hits(resp.get_data().decode("utf-8", "replace")) == [], url
    assert MARKER in pages["records.jsonl"].get_data(as_text=True)


def test_a_rejected_model_lookup_shows_the_servers_error_without_the_keys(tmp_path: Path, server: str) -> None:
    """The server's 401 body (echoing what it was sent) is in the start-up error, with every key redacted."""
    wrong = "wrongbearer-Tq4Rw8Es2"
    prof = tmp_path / "p.yaml"
    text = PROFILE % {"url": server, "qkey": QUERY_KEY, "hdr": HDR_KEY, "out": tmp_path / "runs"}
    prof.write_text(text.replace("  model: m\n", ""))
    env = {**os.environ, "LLMLOAD_SECRET_TEST_AZ": AZ_KEY, "LLMLOAD_SECRET_TEST_BEARER": wrong}
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
         "--profile", str(prof), "--no-metrics"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    logs = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "GET /v1/models failed" in logs and "401" in logs, logs[-2000:]
    assert [k for k in (*KEYS, wrong) if k in logs] == []
    assert f"api-key {MARKER}" in logs and f"Bearer {MARKER}" in logs
