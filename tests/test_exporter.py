"""harness.exporter: metric families, naming conventions, the HTTP server, linger."""

from __future__ import annotations

import logging
import math
import os
import random
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import gevent
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.catalogue import TIME_BUCKETS
from harness.exporter import Exporter, RunCollector, run_info
from harness.histogram import LogHistogram
from harness.metrics import RunMetrics

ROOT = Path(__file__).resolve().parents[1]
MODEL = "kimi-k2"


def record(**kw: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "prompt_id": "quicksort", "user": "w:1", "phase": "step", "step": 1, "concurrency": 8,
        "start_wall": 1000.0, "ttft": 0.8, "ttfat": 40.0, "e2e": 120.0, "tpot": 0.04,
        "gap_hist": LogHistogram.of([0.03, 0.04, 0.05]).to_json(), "output_tokens": 3000,
        "reasoning_tokens": 2300, "answer_tokens": 700, "prompt_tokens": 25, "ok": True, "error_class": None,
        "finish_reason": "stop", "truncated": False, "truncated_in_reasoning": False, "usable": True,
        "read_lag_max": 0.0002,
    }  # fmt: skip
    r.update(kw)
    return r


def collector(now: float = 1200.0) -> RunCollector:
    m = RunMetrics(MODEL)
    m.on_phase({"event": "phase_start", "phase": "warmup", "step": -1, "concurrency": 1, "wall": 990.0})
    m.observe(record(phase="warmup", step=-1, concurrency=1, prompt_id="warmup", user="warmup", e2e=1.0))
    m.on_phase({"event": "phase_start", "phase": "step", "step": 1, "concurrency": 2, "rate": 0.02, "wall": 1000.0})
    for u, t, e2e in (("a", 1000.0, 120.0), ("b", 1000.0, 120.0), ("a", 1120.0, 50.0), ("b", 1120.0, 51.0)):
        m.observe(record(user=u, start_wall=t, e2e=e2e, concurrency=2))
    m.observe(record(ok=False, usable=False, error_class="timeout_idle", finish_reason=None, ttfat=None))
    m.observe(record(finish_reason="length", truncated=True, usable=False, truncated_in_reasoning=True, ttfat=None))
    for proc, wall, cpu_s in (("w1", 1000.0, 3.0), ("w1", 1005.0, 4.5), ("w1", 1010.0, 6.0), ("w2", 1000.0, 1.0)):
        m.on_phase({"event": "client_cpu", "process": proc, "wall": wall, "cpu_s": cpu_s})
    m.until_halfwidth = 0.0731  # the load shape's live half-width (steps.until)
    info = run_info("k26", "http://gpu:30000", "20261129-120000-k26")
    return RunCollector(m, info, 100_000, users=lambda: 8, in_flight=lambda: 7, clock=lambda: now)


def exposition(c: RunCollector) -> str:
    reg = CollectorRegistry()
    reg.register(c)  # type: ignore[arg-type]
    return generate_latest(reg).decode()


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metric_names_types_and_labels_follow_the_conventions() -> None:
    """One prefix, base units, _total counters, bounded labels (no user, no prompt text), no _created."""
    text = exposition(collector())
    fams = families(text)
    types = {name: f.type for name, f in fams.items()}
    assert types == {
        "llmload_requests": "counter",
        "llmload_request_errors": "counter",
        "llmload_truncated_requests": "counter",
        "llmload_output_tokens": "counter",
        "llmload_prompt_tokens": "counter",
        "llmload_time_to_first_token_seconds": "histogram",
        "llmload_time_to_first_answer_token_seconds": "histogram",
        "llmload_inter_chunk_latency_seconds": "histogram",
        "llmload_time_per_output_token_seconds": "histogram",
        "llmload_request_duration_seconds": "histogram",
        "llmload_request_output_tokens": "histogram",
        "llmload_client_read_lag_seconds": "histogram",
        "llmload_time_to_first_token_percentile_seconds": "gauge",
        "llmload_time_to_first_answer_token_percentile_seconds": "gauge",
        "llmload_inter_chunk_latency_percentile_seconds": "gauge",
        "llmload_time_per_output_token_percentile_seconds": "gauge",
        "llmload_request_duration_percentile_seconds": "gauge",
        "llmload_users": "gauge",
        "llmload_requests_in_flight": "gauge",
        "llmload_target_users": "gauge",
        "llmload_target_requests_per_second": "gauge",
        "llmload_workers_lost": "gauge",
        "llmload_client_cpu_share": "gauge",
        "llmload_step": "gauge",
        "llmload_step_start_time_seconds": "gauge",
        "llmload_step_rate_halfwidth_ratio": "gauge",
        "llmload_estimated_time_to_samples_seconds": "gauge",
        "llmload_run_info": "gauge",  # an info metric, exposed as a gauge of value 1 in the text format
        "llmload_exporter_scrapes": "counter",
        "llmload_exporter_scrape_cpu_seconds": "counter",
    }
    allowed = {"model", "phase", "concurrency", "prompt", "outcome", "finish_reason", "error_class", "kind", "le",
               "step", "n", "profile", "host", "hostname", "run", "time_scale", "version", "locust_version", "window",
               "percentile", "process"}  # fmt: skip
    for f in fams.values():
        for s in f.samples:
            assert s.labels["model"] == MODEL, s
            assert set(s.labels) <= allowed, s
            assert not s.name.endswith("_created"), s
            if f.type == "counter":
                assert s.name.endswith("_total")
    assert "# TYPE llmload_requests_total counter" in text  # Prometheus text format names counters with _total
    # Histogram buckets: 1 ms ... 2 h for times, 1 ... 131072 for tokens, then +Inf.
    les = [s.labels["le"] for s in fams["llmload_request_duration_seconds"].samples if s.name.endswith("_bucket")]
    assert les[:3] == ["0.001", "0.0015", "0.002"] and les[42] == "+Inf" and les[41] == "7200.0"
    les = [s.labels["le"] for s in fams["llmload_request_output_tokens"].samples if s.name.endswith("_bucket")]
    assert les[0] == "1.0" and les[-2:] == ["131072.0", "+Inf"]
    # Client read lag: 0.1 ms ... 60 s, with 0.1 s (the starvation limit) a bucket bound.
    les = [s.labels["le"] for s in fams["llmload_client_read_lag_seconds"].samples if s.name.endswith("_bucket")]
    assert les[0] == "0.0001" and "0.1" in les and les[-2:] == ["60.0", "+Inf"]


def test_client_cpu_share_per_process_since_the_step_started() -> None:
    """w1 used 3 CPU s in the 10 wall s since the step's first sample: 0.3 of a core; w2 has one sample only (no
    share yet); a new phase_start clears the samples."""
    c = collector()
    assert sample(exposition(c), "llmload_client_cpu_share", process="w1") == pytest.approx(0.3)
    assert "process=\"w2\"" not in exposition(c)
    c.metrics.on_phase({"event": "phase_start", "phase": "step", "step": 2, "concurrency": 4, "wall": 1011.0})
    assert "llmload_client_cpu_share{" not in exposition(c)


def test_live_cpu_share_skips_a_malformed_event_with_one_warning_and_rebases_on_a_reset(
        caplog: pytest.LogCaptureFixture) -> None:
    """w3's counter goes 5 -> 6 (1 s), back to 0 (a restart: new baseline), then 0 -> 2 over 4 s: 3 CPU s in 5 wall
    s, not 0; malformed events (no cpu_s, a string wall) are skipped, warned about once."""
    c = collector()
    with caplog.at_level(logging.WARNING, logger="harness.metrics"):
        for wall, cpu_s in ((1000.0, 5.0), (1001.0, 6.0), (1002.0, 0.0), (1006.0, 2.0)):
            c.metrics.on_phase({"event": "client_cpu", "process": "w3", "wall": wall, "cpu_s": cpu_s})
        c.metrics.on_phase({"event": "client_cpu", "process": "w3", "wall": 1007.0})
        c.metrics.on_phase({"event": "client_cpu", "process": "w3", "wall": "later", "cpu_s": 9.0})
    assert sample(exposition(c), "llmload_client_cpu_share", process="w3") == pytest.approx(3.0 / 5.0)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "malformed client_cpu event (cpu_s is missing)" in warned[0]


def sample(text: str, name: str, **labels: str) -> float:
    vals = [
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    return float(sum(vals))


def test_values() -> None:
    text = exposition(collector())
    assert sample(text, "llmload_requests_total") == 7
    assert sample(text, "llmload_requests_total", phase="warmup") == 1
    assert sample(text, "llmload_requests_total", outcome="error", finish_reason="none") == 1
    assert sample(text, "llmload_request_errors_total", error_class="timeout_idle") == 1
    assert sample(text, "llmload_truncated_requests_total", kind="reasoning") == 1
    assert sample(text, "llmload_output_tokens_total", kind="reasoning") == 7 * 2300
    assert sample(text, "llmload_output_tokens_total", kind="answer", outcome="usable") == 5 * 700
    assert sample(text, "llmload_request_duration_seconds_bucket", le="30.0") == 1  # the warm-up (1 s)
    assert sample(text, "llmload_request_duration_seconds_bucket", le="50.0") == 2  # + 50 s (le: <=)
    assert sample(text, "llmload_request_duration_seconds_bucket", le="75.0") == 3  # + 51 s
    assert sample(text, "llmload_request_duration_seconds_bucket", le="150.0") == 7
    assert sample(text, "llmload_inter_chunk_latency_seconds_count") == 21
    assert sample(text, "llmload_users") == 8 and sample(text, "llmload_requests_in_flight") == 7
    assert sample(text, "llmload_target_users") == 2 and sample(text, "llmload_step") == 1
    assert sample(text, "llmload_step_start_time_seconds", phase="step", step="1", concurrency="2") == 1000.0
    # First wave replaced at 1120 (a and b each ended a request then); 2 usable ends after it in (1120, 1200), the
    # first wave's own ends at 1120 not counted (as in the report): 80 s / 2.
    est = sample(text, "llmload_estimated_time_to_samples_seconds", n="100000", step="1", concurrency="2")
    assert est == pytest.approx(100_000 * 80 / 2)
    info = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name == "llmload_run_info"]
    assert len(info) == 1 and info[0].value == 1
    assert info[0].labels["profile"] == "k26" and info[0].labels["host"] == "http://gpu:30000"
    assert info[0].labels["run"] == "20261129-120000-k26" and info[0].labels["hostname"] == socket.gethostname()
    assert re.match(r"\d+\.\d+", info[0].labels["version"]) and info[0].labels["locust_version"] == "2.47.0"


def test_after_the_last_step_the_target_is_zero_and_estimates_are_frozen() -> None:
    c = collector(now=1200.0)
    c.metrics.on_phase({"event": "load_end", "wall": 1200.0})
    later = RunCollector(c.metrics, c.info, c.hours_to_n, clock=lambda: 5000.0)
    text = exposition(later)
    assert sample(text, "llmload_target_users") == 0 and sample(text, "llmload_step") == 1
    assert sample(text, "llmload_estimated_time_to_samples_seconds") == pytest.approx(100_000 * 80 / 2)
    assert "llmload_users{" not in text  # unknown user count: no sample
    # a compressed-time simulator run (time_scale 0.02) exports the real-time equivalent (wall s ÷ 0.02), labelled
    real = RunCollector(c.metrics, run_info("k26", "http://h", "r", 0.02), c.hours_to_n, clock=lambda: 5000.0,
                        time_scale=0.02)
    text = exposition(real)
    assert sample(text, "llmload_estimated_time_to_samples_seconds") == pytest.approx(100_000 * 80 / 2 / 0.02)
    assert 'time_scale="0.02"' in text


def test_empty_run_exposes_families_without_samples() -> None:
    c = RunCollector(RunMetrics(MODEL), run_info("p", "http://h", "r"), 1000)
    fams = families(exposition(c))
    assert not fams["llmload_requests"].samples and not fams["llmload_step"].samples
    assert [s.value for s in fams["llmload_requests_in_flight"].samples] == [0]


def test_promtool_accepts_the_exposition() -> None:
    tool = shutil.which("promtool")
    if tool is None:
        if os.environ.get("LLMLOAD_REQUIRE_PROMETHEUS") == "1":
            pytest.fail("LLMLOAD_REQUIRE_PROMETHEUS=1 but promtool is missing (scripts/setup_prometheus.sh)")
        pytest.skip("promtool not installed (bash scripts/setup_prometheus.sh)")
    proc = subprocess.run([tool, "check", "metrics"], input=exposition(collector()), capture_output=True, text=True)
    assert proc.returncode == 0 and not (proc.stdout + proc.stderr).strip(), proc.stdout + proc.stderr


def get(url: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def test_http_server_and_linger() -> None:
    exp = Exporter("127.0.0.1", 0)
    exp.start()
    try:
        assert exp.port > 0 and exp.url == f"http://127.0.0.1:{exp.port}/metrics"
        assert exp.linger(5) is False  # nothing attached
        status, _, body = get(exp.url)
        assert status == 200 and "llmload_" not in body  # serving before the run is set up: empty
        c = collector()
        exp.attach(c)
        assert exp.linger(5) is False  # never scraped since: nobody waits for the final totals
        status, ctype, body = get(exp.url)
        assert status == 200 and ctype.startswith("text/plain") and "llmload_requests_total" in body
        assert c.scrapes == 1
        # A scrape after linger() started ends it (plus 0.5 s for the response); none: the timeout.
        t0 = time.monotonic()
        assert exp.linger(0.5) is False and 0.45 < time.monotonic() - t0 < 2
        scraper = threading.Timer(0.3, get, args=(exp.url,))
        scraper.start()
        t0 = time.monotonic()
        assert exp.linger(10) is True
        assert 0.7 < time.monotonic() - t0 < 5
        scraper.join()
    finally:
        exp.stop()
    with pytest.raises(OSError):
        get(exp.url)


def test_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(OSError):
            Exporter("127.0.0.1", port).start()


def test_gevent_cooperative_serving() -> None:
    """Under gevent (as in Locust) the server greenlet answers while the main greenlet only sleeps."""
    exp = Exporter("127.0.0.1", 0, collector())
    exp.start()
    try:
        g = gevent.spawn(get, exp.url)
        gevent.sleep(0.5)
        assert g.ready() and g.value[0] == 200
    finally:
        exp.stop()


def test_time_buckets_cover_reasoning_runs() -> None:
    assert TIME_BUCKETS[0] == 0.001 and TIME_BUCKETS[-1] >= 7200  # 1 ms ... 2 h (vLLM's TTFT stops at 2560 s)


def test_self_monitoring_counts_scrapes_and_their_cpu_time() -> None:
    """Over HTTP: the scrape counter goes 1 -> 2, the CPU seconds (thread time, this scrape included) are > 0
    and increase. No bound on their size (not a timing test)."""
    exp = Exporter("127.0.0.1", 0, collector())
    exp.start()
    try:
        first, second = get(exp.url)[2], get(exp.url)[2]
    finally:
        exp.stop()
    assert sample(first, "llmload_exporter_scrapes_total", model=MODEL) == 1
    assert sample(second, "llmload_exporter_scrapes_total", model=MODEL) == 2
    cpu1 = sample(first, "llmload_exporter_scrape_cpu_seconds_total", model=MODEL)
    cpu2 = sample(second, "llmload_exporter_scrape_cpu_seconds_total", model=MODEL)
    assert 0 < cpu1 < cpu2
    assert exp.scrape_cpu_seconds() >= cpu2  # both scrapes finished: their whole cost


# -- percentile gauges: the records' percentiles over the dashboard's windows --------------------------------------
def test_percentile_gauges_are_the_records_percentiles_over_each_window() -> None:
    """Successful non-warm-up requests ending over 40 minutes, the exporter read every 110 s: every percentile
    gauge is within 0.5 % of the report's percentile (harness.report.stats.percentile) of the records that ended
    in its window, inter-chunk gaps equal to the report's merged LogHistogram quantile; failed and warm-up
    requests never count, and an empty window is NaN."""
    from harness.catalogue import PERCENTILE_GAUGES, PERCENTILE_WINDOWS, PERCENTILES
    from harness.quantiles import SLICES
    from harness.report.stats import percentile

    rng = random.Random(4)
    t0 = 1_700_000_000.0
    clock = [t0]
    m = RunMetrics(MODEL, clock=lambda: clock[0])
    c = RunCollector(m, run_info("p", "http://h", "r"), 1000, clock=lambda: clock[0])
    recs: list[dict[str, Any]] = []
    end = t0
    worst: dict[str, float] = {}
    reads = 0
    while end < t0 + 2400:
        end += rng.expovariate(1.0)  # ~1 completion/s
        e2e = rng.lognormvariate(math.log(30), 0.5)
        kind = rng.random()
        r = record(
            start_wall=end - e2e, e2e=e2e, ttft=rng.lognormvariate(math.log(0.2), 0.6),
            ttfat=rng.lognormvariate(math.log(8), 0.7), tpot=rng.lognormvariate(math.log(0.03), 0.3),
            gap_hist=LogHistogram.of(rng.lognormvariate(math.log(0.012), 0.4) for _ in range(50)).to_json(),
        )  # fmt: skip
        if kind < 0.05:
            r.update(ok=False, usable=False, error_class="timeout_idle", finish_reason=None, ttfat=None)
        elif kind < 0.08:
            r.update(phase="warmup", user="warmup")
        elif kind < 0.2:
            r.update(truncated=True, usable=False, finish_reason="length", ttfat=None)  # successful: counted
        clock[0] = end + 0.01  # the record is written just after the request's end
        m.observe(r)
        recs.append(r)
        if clock[0] >= t0 + 110 * (reads + 1):
            reads += 1
            now = clock[0]
            got = {(s.name, s.labels["window"], s.labels["percentile"]): s.value
                   for f in text_string_to_metric_families(exposition(c)) for s in f.samples
                   if s.name in PERCENTILE_GAUGES}  # fmt: skip
            assert len(got) == len(PERCENTILE_GAUGES) * len(PERCENTILE_WINDOWS) * len(PERCENTILES)
            for w, length in PERCENTILE_WINDOWS.items():
                width = length / SLICES
                inside = [
                    x for x in recs
                    if x["ok"] and x["phase"] != "warmup"
                    and math.floor(now / width) - SLICES < math.floor((x["start_wall"] + x["e2e"]) / width)
                ]  # fmt: skip
                gaps = LogHistogram()
                for x in inside:
                    gaps.merge(LogHistogram.from_json(x["gap_hist"]))
                for name, fld in PERCENTILE_GAUGES.items():
                    for p in PERCENTILES:
                        v = got[(name, w, str(p))]
                        if fld == "gap_hist":
                            assert v == gaps.quantile(p / 100), (name, w, p)
                            continue
                        exact = percentile([x[fld] for x in inside if x[fld] is not None], p)
                        assert exact is not None, (name, w)
                        err = abs(v - exact) / exact
                        worst[name] = max(worst.get(name, 0.0), err)
    assert reads >= 20
    assert max(worst.values()) <= 0.005, worst
    # An hour later nothing is in any window: every gauge is NaN, and still served.
    clock[0] = end + 3600
    vals = [s.value for f in text_string_to_metric_families(exposition(c)) for s in f.samples
            if s.name in PERCENTILE_GAUGES]  # fmt: skip
    assert len(vals) == 100 and all(math.isnan(v) for v in vals)


def test_the_live_halfwidth_gauge_shows_the_until_checks_value_and_nothing_without_one() -> None:
    """``llmload_step_rate_halfwidth_ratio``: the load shape's last live half-width (``steps.until``), no sample
    while there is none or after the load ended."""
    c = collector()
    (s,) = families(exposition(c))["llmload_step_rate_halfwidth_ratio"].samples
    assert s.value == 0.0731 and s.labels == {"model": MODEL}
    c.metrics.on_phase({"event": "load_end", "wall": 1300.0})
    assert families(exposition(c))["llmload_step_rate_halfwidth_ratio"].samples == []
    c = collector()
    c.metrics.until_halfwidth = None
    assert families(exposition(c))["llmload_step_rate_halfwidth_ratio"].samples == []


def test_open_loop_target_rate_and_lost_workers() -> None:
    """The target request rate is the current rate step's ``rate`` (absent closed-loop and after the last step); the
    lost-worker gauge counts ``worker_lost`` events less ``worker_back`` ones, 0 when none."""
    c = collector()
    text = exposition(c)
    assert sample(text, "llmload_target_requests_per_second") == 0.02  # collector()'s step 1 is a rate step
    assert sample(text, "llmload_workers_lost") == 0 and "llmload_workers_lost{" in text
    m = c.metrics
    m.on_phase({"event": "phase_start", "phase": "step", "step": 2, "concurrency": 4, "wall": 1250.0})
    assert "llmload_target_requests_per_second{" not in exposition(c)  # a closed-loop step: no target rate
    m.on_phase({"event": "phase_start", "phase": "step", "step": 3, "concurrency": 64, "rate": 2.5, "wall": 1300.0})
    m.on_phase({"event": "worker_lost", "wall": 1310.0, "worker": "w1", "state": "missing"})
    m.on_phase({"event": "worker_lost", "wall": 1311.0, "worker": "w2", "state": "gone"})
    text = exposition(c)
    assert sample(text, "llmload_target_requests_per_second") == 2.5
    assert sample(text, "llmload_workers_lost") == 2
    m.on_phase({"event": "worker_back", "wall": 1312.0, "worker": "w1"})
    m.on_phase({"event": "worker_lost", "wall": 1313.0, "worker": "w2", "state": "gone"})  # a repeat: one worker
    assert sample(exposition(c), "llmload_workers_lost") == 1
    m.on_phase({"event": "load_end", "wall": 1400.0})
    text = exposition(c)
    assert "llmload_target_requests_per_second{" not in text and sample(text, "llmload_workers_lost") == 1
