"""End to end: a real Prometheus evaluates prometheus/alerts.yml, time-compressed, against simulator runs.

Every duration of the rules (windows, offsets, ``for:``) is divided by :data:`FACTOR` (5 minutes -> 5 s) and so are
their request-count floors, in a copy the test Prometheus loads (1 s scrape and evaluation interval). A clean
closed-loop run fires no alert (its normal end does not fire LlmloadNoData either); a run whose server fails 30 %
of the requests (HTTP 503) and whose open-loop step asks for far more than the server can serve fires
LlmloadErrorRate and LlmloadOpenLoopTargetMissed; a worker killed on a master with 2 workers fires LlmloadWorkerLost.
Not here: the drift alerts (docs/guides/alerts.md says why; promtool tests cover their rules). Bounded: small
profiles, subprocess time-outs, 127.0.0.1 only.
Skips without ``prometheus`` unless ``LLMLOAD_REQUIRE_PROMETHEUS=1`` (CI).
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from harness.sim import launch
from tests.integration.test_prometheus import SIM_ARGS, Prometheus, run_locust
from tests.procs import free_port, process_groups

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "prometheus" / "alerts.yml"
#: Real seconds of the shipped rules per second of the test's: 5m -> 5s, 1h -> 60s.
FACTOR = 60

_UNIT = {"s": 1, "m": 60, "h": 3600}


def scaled_rules(text: str, factor: float) -> str:
    """The rules file ``text`` with every duration (``[10m]``, ``offset 1h``, ``for: 5m``) divided by ``factor``
    (whole seconds, at least 1 s) and every request-count floor (``>= 1000``) divided too (rounded up)."""

    def dur(m: re.Match[str]) -> str:
        seconds = int(m.group(2)) * _UNIT[m.group(3)] / factor
        return f"{m.group(1)}{max(1, round(seconds))}s"

    out = re.sub(r"(\[|offset |for: )(\d+)([smh])\b", dur, text)
    return re.sub(r">= (\d+)\)", lambda m: f">= {math.ceil(int(m.group(1)) / factor)})", out)


def test_scaled_rules() -> None:
    text = scaled_rules(RULES.read_text(), FACTOR)
    assert "[5s]" in text and "offset 60s" in text and "[70s]" in text and "for: 10s" in text
    assert ">= 17)" in text and ">= 2)" in text and not re.search(r"(\[|offset |for: )\d+[mh]\b", text)


PROFILE = """
name: atest
simulator: {preset: demo}
prompts:
  - {id: short, text: "Explain quantum entanglement to a university student.", max_tokens: 40}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: 2}
steps: {concurrency: [2, 4], duration: %(step)s, drain_timeout: 30}
%(rate)s
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def fired(prom: Prometheus, start: float, end: float) -> set[str]:
    """Names of the alerts that were firing at some evaluation in [start, end]."""
    res = prom.query_range('ALERTS{alertstate="firing"}', start, end)
    return {s["metric"]["alertname"] for s in res}


def run_with_rules(tmp: Path, sim_args: list[str], profile: str) -> tuple[set[str], set[str]]:
    """One run against the simulator under a Prometheus with the scaled rules: (alerts fired, alerts pending)."""
    rules = tmp / "alerts.yml"
    rules.write_text(scaled_rules(RULES.read_text(), FACTOR))
    port = free_port()
    with launch(preset="demo", time_scale=0.25, seed=3, extra_args=[*SIM_ARGS, *sim_args]) as sim:
        prom = Prometheus(tmp, f"127.0.0.1:{port}", sim.url.split("//", 1)[1], rules=[rules])
        try:
            assert len(prom.api("rules")["groups"][0]["rules"]) == 8
            run = run_locust(tmp, "local", sim.url, port, profile % {"out": tmp / "runs"}, timeout=120,
                             final_scrape=False)  # fmt: skip
            time.sleep(8)  # the exporter is gone: LlmloadNoData would be pending now after an abnormal end
            t1 = time.time()
            firing = fired(prom, run.t_start, t1)
            pending = {s["metric"]["alertname"] for s in prom.query_range('ALERTS{alertstate="pending"}',
                                                                          run.t_start, t1)}  # fmt: skip
            return firing, pending
        finally:
            prom.stop()


def test_a_clean_run_fires_no_alert(tmp_path: Path) -> None:
    firing, pending = run_with_rules(tmp_path, [], PROFILE % {"step": 12, "rate": "", "out": "%(out)s"})
    print(f"clean run: firing {sorted(firing)}, pending {sorted(pending)}")
    assert firing == set(), firing


def test_faults_and_an_unreachable_rate_fire_their_alerts(tmp_path: Path) -> None:
    """30 % HTTP 503 after the first 5 requests (the warm-up passes), and one open-loop step of 50 requests/s with
    at most 2 in flight: the error-rate and the open-loop alerts fire, and nothing about the run itself."""
    rate = "rate: {arrival: constant, rates: [50], max_concurrency: 2}"
    profile = PROFILE.replace("steps: {concurrency: [2, 4], ", "steps: {")
    profile = profile % {"step": 25, "rate": rate, "out": "%(out)s"}
    firing, pending = run_with_rules(tmp_path, ["--fault-503", "0.3", "--fault-grace", "5"], profile)
    print(f"faulty run: firing {sorted(firing)}, pending {sorted(pending)}")
    assert {"LlmloadErrorRate", "LlmloadOpenLoopTargetMissed"} <= firing, firing
    assert not firing & {"LlmloadNoData", "LlmloadNoCompletions", "LlmloadWorkerLost"}, firing


def test_a_killed_worker_fires_worker_lost(tmp_path: Path) -> None:
    """Master + 2 workers under a Prometheus with the scaled rules: ``kill -9`` of a worker 3 s into the C=4 step
    fires LlmloadWorkerLost (the master sees it missing after ~3 s of missed heartbeats, then ``for:`` 1 s); before
    the kill it is not firing."""
    import os
    import signal
    import sys

    from tests.integration.test_worker_lost import _wait_phase

    rules = tmp_path / "alerts.yml"
    rules.write_text(scaled_rules(RULES.read_text(), FACTOR))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rpc, port = str(free_port()), free_port()
    prof, out = tmp_path / "p.yaml", tmp_path / "runs"
    prof.write_text((PROFILE % {"step": 15, "rate": "", "out": out}).replace("max_tokens: 40", "max_tokens: 300"))
    locust = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py")]
    with launch(preset="demo", time_scale=0.25, seed=7, extra_args=SIM_ARGS) as sim:
        prom = Prometheus(tmp_path, f"127.0.0.1:{port}", sim.url.split("//", 1)[1], rules=[rules])
        common = ["--profile", str(prof), "--host", sim.url, "--metrics-port", str(port), "--metrics-linger", "5"]
        master = [*locust, "--headless", "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc,
                  "--expect-workers", "2", *common]  # fmt: skip
        worker = [*locust, "--worker", "--master-host", "127.0.0.1", "--master-port", rpc]
        logs = [tmp_path / f"proc{i}.log" for i in range(3)]
        with process_groups([master, worker, worker], logs, tmp_path, env) as procs:
            deadline = time.monotonic() + 120
            _run, t4 = _wait_phase(out, 4, deadline)
            time.sleep(max(0.0, t4 + 3.0 - time.time()))
            before = prom.query('ALERTS{alertname="LlmloadWorkerLost"}')
            os.kill(procs[2].pid, signal.SIGKILL)
            t_kill, seen = time.time(), []
            while time.time() < t_kill + 15 and not seen:
                time.sleep(0.5)
                seen = prom.query('ALERTS{alertname="LlmloadWorkerLost",alertstate="firing"}')
            t_fire = time.time()
            lost = prom.query("llmload_workers_lost")
            procs[0].send_signal(signal.SIGINT)
            procs[0].wait(timeout=60)
            prom.stop()
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    print(f"worker killed: LlmloadWorkerLost firing {t_fire - t_kill:.1f} s after the kill; lost gauge {lost}")
    assert before == [], before
    assert len(seen) == 1 and seen[0]["metric"]["severity"] == "critical", log_text
    assert [float(s["value"][1]) for s in lost] == [1.0], lost
