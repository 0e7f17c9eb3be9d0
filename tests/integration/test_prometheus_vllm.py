"""The dashboard's server row against vLLM's own /metrics: a headless run against the real vLLM CPU server
(the scripted model of tests/real_vllm), with a real Prometheus scraping the exporter and vLLM.

Needs the vLLM venv (scripts/setup_vllm.sh) and the ``prometheus`` binary (scripts/setup_prometheus.sh): skipped
without them, unless LLMLOAD_REQUIRE_VLLM=1 / LLMLOAD_REQUIRE_PROMETHEUS=1 make them fail. This module starts
its own vLLM server (about 45 s with its warm-up) and stops it when its test is done.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.test_prometheus import (
    Prometheus,
    assert_prometheus_has_final_totals,
    check_dashboard,
    http_get,
    prometheus_binary,
    run_locust,
)
from tests.procs import free_port

pytestmark = [pytest.mark.slow, pytest.mark.real_vllm]

REAL_VLLM = Path(__file__).resolve().parents[1] / "real_vllm"

PROFILE = """
name: vllm-prom
target: {{model: {model}}}
request: {{continuous_usage_stats: true}}
prompts:
  - {{id: hello, text: "Say hello", max_tokens: 1024}}
  - {{id: explain, text: "Explain the scripted model", max_tokens: 1024, weight: 2}}
single_stream: {{duration: 3}}
steps: {{concurrency: [2, 4], duration: 6, drain_timeout: 60}}
timeouts: {{connect: 5, first_byte: 60, first_token: 60, idle: 30, total: 120}}
output: {{dir: "{out}"}}
"""


def _real_vllm_helpers() -> ModuleType:
    """tests/real_vllm/conftest.py, loaded by path for its helpers (its fixtures are not registered here)."""
    name = "_llmload_real_vllm_helpers"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REAL_VLLM / "conftest.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="module")
def vllm() -> Iterator[Any]:
    """A vLLM server serving the scripted model, for this module only."""
    h = _real_vllm_helpers()
    venv = Path(h.server_module.DEFAULT_VENV)
    reason = h._venv_missing_reason(venv)
    if reason is not None:
        if os.environ.get(h.REQUIRE_ENV) == "1":
            pytest.fail(f"{h.REQUIRE_ENV}=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    prometheus_binary()  # skip before paying for vLLM's start-up when there is no Prometheus
    model_dir, _ = h.build_scripted_model(venv, h.REASONING_TOKENS, h.ANSWER_TOKENS)
    log = h.MODEL_CACHE / f"vllm-prom-server-{os.getpid()}.log"
    server = h.server_module.VLLMServer(model_dir, h.SERVED_MODEL_NAME, venv=venv, log_path=log)
    try:
        server.start()
    except h.server_module.VLLMServerError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        h.warm_up(server.base_url, server.model)
        yield server
    finally:
        server.stop()


def server_counter(url: str, name: str) -> float:
    """Sum of a vLLM counter over its series, from its /metrics."""
    return sum(
        s.value for f in text_string_to_metric_families(http_get(url + "/metrics")) for s in f.samples if s.name == name
    )


def test_server_row_against_real_vllm(tmp_path: Path, vllm: Any) -> None:
    port = free_port()
    prom = Prometheus(tmp_path, f"127.0.0.1:{port}", vllm.base_url.split("//", 1)[1])
    try:
        gen0 = server_counter(vllm.base_url, "vllm:generation_tokens_total")
        ok0 = server_counter(vllm.base_url, "vllm:request_success_total")
        profile = PROFILE.format(model=vllm.model, out=tmp_path / "runs")
        run = run_locust(tmp_path, "local", vllm.base_url, port, profile, timeout=120, final_scrape=False)
        time.sleep(1.5)
        recs = run.records()
        assert len(recs) >= 20 and all(r["ok"] for r in recs)
        assert_prometheus_has_final_totals(prom, recs, vllm.model)
        # The server's own counters moved by exactly what the records say (usage = what vLLM generated).
        assert server_counter(vllm.base_url, "vllm:generation_tokens_total") - gen0 == sum(
            r["output_tokens"] for r in recs
        )
        assert server_counter(vllm.base_url, "vllm:request_success_total") - ok0 == len(recs)
        # Every dashboard expression returns data, the server row included (KV cache from vLLM), except the
        # speculative-decoding panel (this vLLM runs without a draft model) and errors by class (no error).
        result = check_dashboard(prom, vllm.model, run.t_start, run.t_end + 2)
        print(f"vLLM: checked {len(result['checked'])} expressions, no data (as expected): {result['skipped']}")
        assert any(w.startswith("Server: KV") for w in result["checked"]) and len(result["checked"]) >= 30
        assert sorted(result["skipped"]) == [
            "Errors/s by class / {{error_class}}",
            "Firing alerts / {{alertname}} ({{severity}})",  # no rules loaded (tests/integration/test_alerts.py)
            "Server: speculative decoding / acceptance rate",
            "Server: speculative decoding / tokens per step",
        ], result
    finally:
        prom.stop()
