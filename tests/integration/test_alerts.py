"""End to end: a real Prometheus evaluates prometheus/alerts.yml, time-compressed, against simulator runs.

Every duration of the rules (windows, offsets, ``for:``) is divided by :data:`FACTOR` (5 minutes -> 5 s) and so are
their request-count floors, in a copy the test Prometheus loads (1 s scrape and evaluation interval). A clean
closed-loop run fires no alert (its normal end does not fire LlmloadNoData either); a run whose server fails 30 %
of the requests (HTTP 503) and whose open-loop step asks for far more than the server can serve fires
LlmloadErrorRate and LlmloadOpenLoopTargetMissed; a worker killed on a master with 2 workers fires LlmloadWorkerLost;
a simulator that drifts (``--drift-per-hour 0.4`` at time scale 1/60, so its simulated hour is the rules' compressed
hour) fires LlmloadThroughputDrift and LlmloadTTFTDrift, and the same run without drift fires none. Bounded: small
profiles, subprocess time-outs, 127.0.0.1 only.
Skips without ``prometheus`` unless ``LLMLOAD_REQUIRE_PROMETHEUS=1`` (CI).
"""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.catalogue import PERCENTILE_WINDOWS
from harness.report.soak import drift_test
from harness.sim import launch
from harness.sim.engine import HOUR
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


@dataclass
class AlertRun:
    """Result of :func:`run_with_rules`: the alerts that fired and were pending during the run, the series of
    ``exprs`` over it (name -> ``[(unix time, value), ...]``), and the run's start and end (unix seconds)."""

    firing: set[str]
    pending: set[str]
    series: dict[str, list[tuple[float, float]]]
    t_start: float
    t_end: float
    run_dir: Path


def run_with_rules(
    tmp: Path,
    sim_args: list[str],
    profile: str,
    time_scale: float = 0.25,
    rules_text: str | None = None,
    exprs: dict[str, str] | None = None,
    timeout: float = 120,
) -> AlertRun:
    """One run against the simulator (demo preset at ``time_scale``, plus ``sim_args``) under a Prometheus with
    ``rules_text`` (default: the rules scaled by :data:`FACTOR`); ``exprs`` (name -> PromQL) are read over the run
    at 1 s steps."""
    rules = tmp / "alerts.yml"
    rules.write_text(rules_text or scaled_rules(RULES.read_text(), FACTOR))
    port = free_port()
    with launch(preset="demo", time_scale=time_scale, seed=3, extra_args=[*SIM_ARGS, *sim_args]) as sim:
        prom = Prometheus(tmp, f"127.0.0.1:{port}", sim.url.split("//", 1)[1], rules=[rules])
        try:
            assert len(prom.api("rules")["groups"][0]["rules"]) == 8
            run = run_locust(tmp, "local", sim.url, port, profile % {"out": tmp / "runs"}, timeout=timeout,
                             final_scrape=False)  # fmt: skip
            time.sleep(8)  # the exporter is gone: LlmloadNoData would be pending now after an abnormal end
            t1 = time.time()
            firing = fired(prom, run.t_start, t1)
            pending = {s["metric"]["alertname"] for s in prom.query_range('ALERTS{alertstate="pending"}',
                                                                          run.t_start, t1)}  # fmt: skip
            series = {}
            for name, expr in (exprs or {}).items():
                res = prom.query_range(expr, run.t_start, t1)
                series[name] = [(float(t), float(v)) for t, v in res[0]["values"]] if res else []
            return AlertRun(firing, pending, series, run.t_start, run.t_end, run.run_dir)
        finally:
            prom.stop()


def test_a_clean_run_fires_no_alert(tmp_path: Path) -> None:
    run = run_with_rules(tmp_path, [], PROFILE % {"step": 12, "rate": "", "out": "%(out)s"})
    print(f"clean run: firing {sorted(run.firing)}, pending {sorted(run.pending)}")
    assert run.firing == set(), run.firing


def test_faults_and_an_unreachable_rate_fire_their_alerts(tmp_path: Path) -> None:
    """30 % HTTP 503 after the first 5 requests (the warm-up passes), and one open-loop step of 50 requests/s with
    at most 2 in flight: the error-rate and the open-loop alerts fire, and nothing about the run itself."""
    rate = "rate: {arrival: constant, rates: [50], max_concurrency: 2}"
    profile = PROFILE.replace("steps: {concurrency: [2, 4], ", "steps: {")
    profile = profile % {"step": 25, "rate": rate, "out": "%(out)s"}
    run = run_with_rules(tmp_path, ["--fault-503", "0.3", "--fault-grace", "5"], profile)
    print(f"faulty run: firing {sorted(run.firing)}, pending {sorted(run.pending)}")
    assert {"LlmloadErrorRate", "LlmloadOpenLoopTargetMissed"} <= run.firing, run.firing
    assert not run.firing & {"LlmloadNoData", "LlmloadNoCompletions", "LlmloadWorkerLost"}, run.firing


#: The drift run's simulator: a simulated hour is the rules' compressed hour (60 real s at FACTOR 60).
DRIFT_SCALE = 1 / FACTOR
#: Injected drift: decode speed -40 % per simulated hour, so output tok/s x 0.6 and TTFT x 1/0.6 (+66.7 %) per hour.
DRIFT = 0.4
#: A slow server in simulated seconds, ordinary in real ones at DRIFT_SCALE: 0.6 s steps (10 ms real, 100 tok/s per
#: stream) and 6 s prefills (100 ms real TTFT, so the few undrifted ms of the HTTP path barely dilute the TTFT drift).
SLOW_SERVER_ARGS = ["--decode-base", "0.6", "--decode-per-seq", "0", "--prefill-base", "6", "--prefill-per-token", "0"]
#: The two drift rules' left-hand sides (before ``abs(...) - 1 > threshold``), compressed like the test's rules.
DRIFT_RATIOS = {
    "throughput": 'sum(rate(llmload_output_tokens_total{phase!="warmup",outcome!="error"}[10s])) / '
                  'sum(rate(llmload_output_tokens_total{phase!="warmup",outcome!="error"}[10s] offset 60s))',
    "ttft": 'max(llmload_time_to_first_token_percentile_seconds{window="1m",percentile="50"}) / '
            'max(llmload_time_to_first_token_percentile_seconds{window="1m",percentile="50"} offset 60s)',
}  # fmt: skip


DRIFT_ALERTS = ("LlmloadThroughputDrift", "LlmloadTTFTDrift")


def drift_rules(text: str) -> str:
    """The rules scaled by :data:`FACTOR`, with the TTFT drift rule's percentile gauge read from the exporter's
    smallest window, ``1m`` (its ``10m`` window cannot shrink: the exporter's windows are fixed real durations).
    At 60x a 1-minute window stands for an hour: the rule then compares the median of the last compressed hour
    with the median of the hour before, which for a steady drift moves by the same factor per hour."""
    out = scaled_rules(text, FACTOR)
    assert out.count('window="10m"') == 4, "the TTFT drift rule reads the 10m gauge four times (ratio, floor)"
    return out.replace('window="10m"', 'window="1m"')


def test_drift_rules_read_the_smallest_window() -> None:
    text = drift_rules(RULES.read_text())
    assert text.count('window="1m"') == 4 and 'window="10m"' not in text
    assert "1m" in PERCENTILE_WINDOWS and min(PERCENTILE_WINDOWS.values()) == PERCENTILE_WINDOWS["1m"] == FACTOR


def report_drift(run_dir: Path, drift: float) -> dict[str, tuple[float, float, bool]]:
    """The run's report (report.json, 10 s soak slices): per drift figure (tok/s, TTFT p50) of its one step,
    (measured slope, model slope, flagged), slopes in % of the mean per wall hour. The model slope is the same
    least-squares fit (:func:`harness.report.soak.drift_test`) over the slices' mid-times of the simulator's own
    law: tok/s x (1 - F) and TTFT x 1 / (1 - F) per simulated hour (``3600 * DRIFT_SCALE`` wall seconds)."""
    steps = json.loads((run_dir / "report.json").read_text())["steps"]
    (row,) = [r for r in steps if r["phase"] == "step"]
    mids = [0.5 * (sl["start_wall"] + sl["end_wall"]) for sl in row["slices"]]
    span = row["slices"][-1]["end_wall"] - row["slices"][0]["start_wall"]
    k = math.log1p(-drift) / (HOUR * DRIFT_SCALE)  # ln of the speed factor per wall second
    out = {}
    for key, sign in (("output_tps", 1), ("ttft_p50_s", -1)):
        model = drift_test(mids, [math.exp(sign * k * (t - mids[0])) for t in mids], span)
        fit = row["drift"][key]
        assert fit is not None and model is not None, row["drift"]
        out[key] = (fit["slope_pct_per_h"], model["slope_pct_per_h"], fit["flagged"])
    print(f"report drift (% of the mean per wall hour, x {DRIFT_SCALE:.4f} per simulated hour) over "
          f"{len(mids)} slices: " + ", ".join(f"{k} {m:+.0f} (model {e:+.0f}, flagged {f})"
                                              for k, (m, e, f) in out.items()))  # fmt: skip
    return out


@pytest.mark.parametrize("drift", [DRIFT, 0.0], ids=["drift", "steady"])
def test_drift_alerts_fire_on_a_drifting_server_only(tmp_path: Path, drift: float) -> None:
    """One closed-loop step of 4 users for 90 s (1.5 compressed hours) against a simulator whose decode speed falls
    by 40 % per simulated hour: LlmloadThroughputDrift and LlmloadTTFTDrift fire (the step must run 70 s unchanged,
    then the condition must hold for the compressed ``for:`` of 10 s), and no other alert about the server or the
    run (LlmloadClientStarved, the load generator's host, is left out). Over the step's last
    10 s the throughput ratio an hour apart is the injected 0.6. The TTFT ratio is ~1.4, not 1/0.6: at the step's
    end the earlier 1-minute window reaches back to the run's start, so the two windows' medians are ~42 s apart,
    not 60 (1.667 ** 0.7 = 1.43), and the HTTP path adds a few undrifted ms.

    The control, the same run without drift (``steady``), fires no alert, and over the step's last 10 s both ratios
    are within their thresholds of 1 (the clean run above is too short for the drift rules to evaluate at all).
    The report's soak drift (:func:`report_drift`) flags tok/s and TTFT in the drifting run, at the model's slope
    within 15 %, and neither in the control."""
    profile = PROFILE.replace("steps: {concurrency: [2, 4], ", "steps: {concurrency: [4], ")
    profile = profile % {"step": 90, "rate": "", "out": "%(out)s"} + "report: {slice_s: 10}\n"
    sim_args = [*SLOW_SERVER_ARGS, "--drift-per-hour", str(drift)]
    run = run_with_rules(tmp_path, sim_args, profile, time_scale=DRIFT_SCALE,
                         rules_text=drift_rules(RULES.read_text()),
                         exprs={**DRIFT_RATIOS, **{a: f'ALERTS{{alertname="{a}",alertstate="firing"}}'
                                                   for a in DRIFT_ALERTS},
                                "users": "max(llmload_target_users)"}, timeout=200)  # fmt: skip
    step_start = min(t for t, users in run.series["users"] if users == 4)
    step_end = max(t for t, users in run.series["users"] if users == 4)  # the last scrape of the step's 4 users
    first = {a: min((t for t, _ in run.series[a]), default=math.nan) - step_start for a in DRIFT_ALERTS}
    late = {name: [v for t, v in run.series[name] if step_end - 10 <= t <= step_end - 1 and math.isfinite(v)]
            for name in DRIFT_RATIOS}  # fmt: skip
    print(f"drift {drift}: firing {sorted(run.firing)}, pending {sorted(run.pending)}; ratios an hour apart over the "
          f"step's last 10 s: " + ", ".join(f"{k} {min(v, default=math.nan):.3f}..{max(v, default=math.nan):.3f}"
                                            for k, v in late.items())
          + "; first firing " + ", ".join(f"{a} {t:.0f} s" for a, t in first.items()) + " into the step")  # fmt: skip
    assert late["throughput"] and late["ttft"], late
    # LlmloadClientStarved is about the host, not the server: a loaded CI machine may starve Locust for a while
    others = run.firing - set(DRIFT_ALERTS) - {"LlmloadClientStarved"}
    assert others == set(), run.firing
    fits = report_drift(run.run_dir, drift)
    if drift:
        for key, (measured, model, flagged) in fits.items():  # the report's soak drift finds the injected drift
            assert flagged and abs(measured - model) < 0.15 * abs(model), (key, fits)
    else:
        assert not any(flagged for _, _, flagged in fits.values()), fits
    if drift:
        assert set(DRIFT_ALERTS) <= run.firing, run.firing
        assert all(0.5 < v < 0.7 for v in late["throughput"]), late  # injected: 0.6
        assert all(1.25 < v < 1.7 for v in late["ttft"]), late  # model: ~1.43 (docstring)
    else:
        assert not run.firing & set(DRIFT_ALERTS), run.firing
        assert all(0.9 < v < 1.1 for v in late["throughput"]), late  # the threshold: 10 % off 1
        assert all(0.8 < v < 1.2 for v in late["ttft"]), late  # the threshold: 20 % off 1


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
