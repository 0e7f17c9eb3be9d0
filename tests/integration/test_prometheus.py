"""End to end: the Prometheus exporter in local, ``--processes 2`` and master + 2 workers runs, and the Grafana
dashboard's PromQL against a real Prometheus (Debian's ``prometheus`` package, scripts/setup_prometheus.sh).

Every run is bounded (tiny profile, time-scaled simulator started by the test, subprocess time-outs) and on
127.0.0.1 only. The Prometheus tests skip when the ``prometheus`` binary is missing, unless
``LLMLOAD_REQUIRE_PROMETHEUS=1`` (CI) makes them fail.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.sim import SimProcess, launch
from tests.procs import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py")]
DASHBOARD = ROOT / "grafana" / "dashboards" / "llmload.json"
PROM_CONFIG = ROOT / "prometheus" / "prometheus.yml"
REQUIRE_ENV = "LLMLOAD_REQUIRE_PROMETHEUS"
MARKER = "llmload: records and report in"

#: A tiny profile with every outcome: usable, truncated ("guide" hits max_tokens while reasoning) and failed
#: ("huge" asks for more tokens than the simulator's --max-model-len: HTTP 400, class http_4xx).
PROFILE = """
name: ptest
simulator: {preset: demo}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: short, text: "Explain quantum entanglement to a university student.", max_tokens: 400, weight: 3}
  - {id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 150, weight: 1}
  - {id: huge, text: "Explain quantum entanglement to a university student, in depth.", max_tokens: 4000, weight: 1.5}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: %(single)s}
steps: {concurrency: [2, 4], duration: %(step)s, drain_timeout: 30}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
report: {hours_to_n: [1000, 100000]}
output: {dir: %(out)s}
"""
SIM_ARGS = ["--max-model-len", "2048"]


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return str(r.read().decode())


def prometheus_tool(name: str) -> str:
    """Path of Debian's prometheus package's ``name`` (``prometheus``, ``promtool``); skips (or fails with
    LLMLOAD_REQUIRE_PROMETHEUS=1) when it is missing."""
    path = shutil.which(name)
    if path is None:
        msg = f"{name} not installed (bash scripts/setup_prometheus.sh)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {msg}", pytrace=False)
        pytest.skip(msg)
    return path


def prometheus_binary() -> str:
    """Path of ``prometheus`` (:func:`prometheus_tool`)."""
    return prometheus_tool("prometheus")


# -- a Locust run in one of three modes, its exporter scraped throughout -------------------------------------
@dataclass
class LocustRun:
    """Result of :func:`run_locust`: the exporter's last scrape (after the run), the run directory, logs."""

    final: str
    run_dir: Path
    stdout: str
    logs: str
    scrapes: int
    t_start: float
    t_end: float
    live: list[str] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (self.run_dir / "records.jsonl").read_text().splitlines() if x.strip()]

    def report(self) -> dict[str, Any]:
        return dict(json.loads((self.run_dir / "report.json").read_text()))


def profile_text(out: Path, single: float = 2, step: float = 3) -> str:
    """:data:`PROFILE` with its phase durations (seconds) and output directory."""
    return PROFILE % {"out": out, "single": single, "step": step}


def run_locust(
    tmp: Path,
    mode: str,
    host: str,
    metrics_port: int,
    profile: str | None = None,
    timeout: float = 90,
    final_scrape: bool = True,
) -> LocustRun:
    """Run the sweep in ``mode`` (local | processes | distributed, headless; webui-login) against ``host``;
    scrape the exporter every 0.5 s while it runs and, with ``final_scrape``, once more after the run ended
    (the exporter lingers for that scrape; without it the exporter waits for another scraper, e.g. Prometheus).
    ``profile`` is the profile's text (default: :func:`profile_text`); its output dir must be ``tmp/runs``."""
    out = tmp / "runs"
    prof = tmp / "p.yaml"
    prof.write_text(profile or profile_text(out))
    common = ["--profile", str(prof), "--host", host, "--exit-code-on-error", "0"]
    metrics = ["--metrics-port", str(metrics_port), "--metrics-linger", "20"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if mode == "webui-login":  # --web-login needs its user and password (harness.webui.auth)
        env.update(LLMLOAD_WEB_USER="test", LLMLOAD_WEB_PASSWORD="test-password")
    rpc = str(free_port())
    if mode == "local":
        cmds = [[*LOCUST, "--headless", *common, *metrics]]
    elif mode == "webui-login":  # the web UI with --web-login: the exporter is not behind it
        web = ["--web-host", "127.0.0.1", "--web-port", str(free_port()), "--web-login", "--autostart"]
        cmds = [[*LOCUST, *web, "--autoquit", "1", *common, *metrics]]
    elif mode == "processes":
        cmds = [
            [
                *LOCUST,
                "--headless",
                "--processes",
                "2",
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                rpc,
                "--master-port",
                rpc,
                *common,
                *metrics,
            ]
        ]
    elif mode == "distributed":
        master = [
            *LOCUST,
            "--headless",
            "--master",
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            rpc,
            "--expect-workers",
            "2",
            *common,
            *metrics,
        ]
        worker = [*LOCUST, "--worker", "--master-host", "127.0.0.1", "--master-port", rpc]
        cmds = [master, worker, worker]
    else:  # pragma: no cover
        raise ValueError(mode)
    logs = [tmp / f"proc{i}.log" for i in range(len(cmds))]
    procs: list[subprocess.Popen[str]] = []
    lines: list[str] = []
    done = threading.Event()
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    t_start = time.time()
    try:
        for i, cmd in enumerate(cmds):
            procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=tmp,
                    env=env,
                    text=True,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
                    stderr=logs[i].open("w"),
                )
            )

        def read() -> None:
            assert procs[0].stdout is not None
            for line in procs[0].stdout:
                lines.append(line)
                if MARKER in line:
                    done.set()
            done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        scrapes, live = 0, []
        while not done.is_set() and time.monotonic() < deadline:
            try:
                live.append(http_get(url, timeout=2))
                scrapes += 1
            except (OSError, urllib.error.URLError):
                pass
            done.wait(0.5)
        # The run printed its end marker in time (its exit code is checked below). Not "still running": with a
        # scraper as fast as Prometheus here (0.25 s), the exporter's linger ends and the process may exit while
        # this loop was still inside a scrape, which made the check flaky.
        assert done.is_set() and any(MARKER in ln for ln in lines), f"run did not end in time: {''.join(lines)[-2000:]}"
        t_end = time.time()
        final = http_get(url) if final_scrape else live[-1]  # after the marker: the final state
        for p in procs:
            p.wait(timeout=30)
        reader.join(5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in logs)
    for p in procs:
        assert p.returncode == 0, f"exit {p.returncode}\n{log_text[-4000:]}"
    dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return LocustRun(final, dirs[0], "".join(lines), log_text, scrapes, t_start, t_end, live)


# -- what the exporter should say, computed independently from the records ----------------------------------
Key = tuple[str, frozenset[tuple[str, str]]]

_HIST_FIELDS = {
    "llmload_time_to_first_token_seconds": "ttft",
    "llmload_time_to_first_answer_token_seconds": "ttfat",
    "llmload_time_per_output_token_seconds": "tpot",
    "llmload_request_duration_seconds": "e2e",
    "llmload_request_output_tokens": "output_tokens",
    "llmload_client_read_lag_seconds": "read_lag_max",
}


def parse_exposition(text: str) -> dict[Key, float]:
    """Every sample of a text exposition: (sample name, label set) -> value."""
    out: dict[Key, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return out


def expected_from_records(recs: list[dict[str, Any]], model: str) -> dict[Key, float]:
    """Counter values and histogram counts/sums/buckets the exporter must show for these records."""
    exp: dict[Key, float] = Counter()  # type: ignore[assignment]

    def add(name: str, labels: dict[str, str], v: float) -> None:
        exp[(name, frozenset(labels.items()))] += v  # type: ignore[index]

    bounds: dict[str, list[float]] = {}
    for r in recs:
        base = {"model": model, "phase": r["phase"], "concurrency": str(r["concurrency"]), "prompt": r["prompt_id"]}
        outcome = "error" if not r["ok"] else ("truncated" if r["truncated"] else "usable")
        add("llmload_requests_total", {**base, "outcome": outcome, "finish_reason": r["finish_reason"] or "none"}, 1)
        if not r["ok"]:
            add("llmload_request_errors_total", {**base, "error_class": r["error_class"]}, 1)
        if r["truncated"]:
            kind = "reasoning" if r["truncated_in_reasoning"] else "answer"
            add("llmload_truncated_requests_total", {**base, "kind": kind}, 1)
        add("llmload_output_tokens_total", {**base, "outcome": outcome, "kind": "reasoning"}, r["reasoning_tokens"])
        add("llmload_output_tokens_total", {**base, "outcome": outcome, "kind": "answer"}, r["answer_tokens"])
        add("llmload_prompt_tokens_total", {**base, "outcome": outcome}, r["prompt_tokens"] or 0)
        hl = {k: v for k, v in base.items() if k != "prompt"} | {"outcome": outcome}  # histograms: no prompt
        for name, fld in _HIST_FIELDS.items():
            v = r.get(fld)
            if v is None:
                continue
            add(name + "_count", hl, 1)
            add(name + "_sum", hl, v)
            bounds.setdefault(name, [])
            for b in _bounds(name):
                if v <= b:
                    add(name + "_bucket", {**hl, "le": _le(b)}, 1)
            add(name + "_bucket", {**hl, "le": "+Inf"}, 1)
        gh = r.get("gap_hist")
        if gh and gh["n"]:
            add("llmload_inter_chunk_latency_seconds_count", hl, gh["n"])
            add("llmload_inter_chunk_latency_seconds_sum", hl, gh["sum"])
    return dict(exp)


def _bounds(name: str) -> list[float]:
    if name == "llmload_request_output_tokens":
        return [float(2**i) for i in range(18)]
    from harness.catalogue import LAG_BUCKETS, TIME_BUCKETS

    if name == "llmload_client_read_lag_seconds":
        return list(LAG_BUCKETS)

    return list(TIME_BUCKETS)


def _le(b: float) -> str:
    from prometheus_client.utils import floatToGoString

    return str(floatToGoString(b))


def assert_totals_equal(run: LocustRun, model: str) -> dict[Key, float]:
    """The exporter's final counters and histograms equal the records' exactly; return the parsed samples."""
    recs = run.records()
    got = parse_exposition(run.final)
    exp = expected_from_records(recs, model)
    checked = 0
    for key, v in exp.items():
        name = key[0]
        if name.endswith("_bucket") and name.startswith("llmload_inter_chunk"):
            continue
        assert key in got, f"missing {key}"
        if name.endswith("_sum") and not name.endswith("tokens_sum"):
            assert got[key] == pytest.approx(v, rel=1e-9, abs=1e-12), key
        else:
            assert got[key] == v, (key, got[key], v)
        checked += 1
    # Nothing more than the records either: every counter / count series the exporter shows is expected
    # (except the exporter's own scrape counters, which count scrapes, not requests).
    for key, v in got.items():
        name = key[0]
        if name.endswith(("_total", "_count")) and not name.startswith("llmload_exporter_"):
            if v:
                assert key in exp, f"unexpected {key} = {v}"
    # The inter-chunk histogram: cumulative, ending at the exact number of gaps.
    for key, v in got.items():
        if key[0] == "llmload_inter_chunk_latency_seconds_bucket" and ("le", "+Inf") in key[1]:
            labels = frozenset(kv for kv in key[1] if kv[0] != "le")
            assert v == exp[("llmload_inter_chunk_latency_seconds_count", labels)]
    total = sum(v for (n, _), v in got.items() if n == "llmload_requests_total")
    assert total == len(recs) and checked > 100
    assert sum(v for (n, _), v in got.items() if n == "llmload_output_tokens_total") == sum(
        r["output_tokens"] for r in recs
    )
    return got


def gauge(samples: dict[Key, float], name: str) -> float:
    vals = [v for (n, _), v in samples.items() if n == name]
    assert len(vals) == 1, (name, vals)
    return vals[0]


def server_completions(sim: SimProcess) -> int:
    """Requests the simulator finished (stop or length), from its own /metrics."""
    return completions_in(http_get(sim.url + "/metrics"))


def completions_in(metrics: str) -> int:
    """Requests finished (stop or length) in a simulator's (or vLLM's) /metrics page ``metrics``."""
    total = 0.0
    for fam in text_string_to_metric_families(metrics):
        for s in fam.samples:
            if s.name == "vllm:request_success_total" and s.labels.get("finished_reason") in ("stop", "length"):
                total += s.value
    return int(total)


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    with launch(preset="demo", time_scale=0.25, seed=3, extra_args=SIM_ARGS) as proc:
        yield proc


@pytest.mark.parametrize("mode", ["local", "processes", "distributed", "webui-login"])
def test_exported_totals_equal_records(tmp_path: Path, sim: SimProcess, mode: str) -> None:
    run = run_locust(tmp_path, mode, sim.url, free_port())
    recs = run.records()
    meta = json.loads((run.run_dir / "run.json").read_text())
    assert meta["status"] == "finished" and meta["records"] == len(recs)
    outcomes = Counter("error" if not r["ok"] else ("truncated" if r["truncated"] else "usable") for r in recs)
    assert outcomes["usable"] and outcomes["truncated"] and outcomes["error"], outcomes
    # No record lost: every request the server completed (warm-up included) has its record, in every mode (the
    # workers' last records arrive after the master's test_stop).
    assert sum(1 for r in recs if r["ok"]) == server_completions(sim)
    got = assert_totals_equal(run, sim.model)
    print(
        f"{mode}: {len(recs)} records {dict(outcomes)}, {sum(r['output_tokens'] for r in recs)} output tokens, "
        f"{run.scrapes} live scrapes: exporter totals == records"
    )
    assert {dict(k[1])["phase"] for k in got if k[0] == "llmload_requests_total"} == {"warmup", "single", "step"}
    # End-of-run gauges: nothing running, nothing in flight, no target.
    assert gauge(got, "llmload_users") == 0
    assert gauge(got, "llmload_requests_in_flight") == 0
    assert gauge(got, "llmload_target_users") == 0
    assert gauge(got, "llmload_step") == 2
    info = [dict(k[1]) for k in got if k[0] == "llmload_run_info"]
    assert info == [info[0]] and info[0]["profile"] == "ptest" and info[0]["host"] == sim.url
    assert info[0]["run"] == run.run_dir.name and info[0]["model"] == sim.model and info[0]["version"]
    # While it ran, the exporter showed users and requests in flight (from the workers' reports when distributed).
    # Pages scraped before the run's collector is attached are empty by design (the port is bound first); after
    # the first non-empty page, none is empty again.
    pages = [parse_exposition(t) for t in run.live]
    first = next(i for i, s in enumerate(pages) if s)
    live = pages[first:]
    assert all(live), "an empty page after the collector was attached"
    assert max(gauge(s, "llmload_users") for s in live) == 4
    assert max(gauge(s, "llmload_requests_in_flight") for s in live) >= 2
    assert max(gauge(s, "llmload_target_users") for s in live) == 4
    # Counters never go backwards between scrapes.
    prev = 0.0
    for s in live:
        n = sum(v for (k, _), v in s.items() if k == "llmload_requests_total")
        assert n >= prev
        prev = n


# -- a real Prometheus scraping the exporter and the target -------------------------------------------------
class Prometheus:
    """A ``prometheus`` process on 127.0.0.1 with the shipped config, retargeted and with a 1 s (or
    ``interval``) scrape and evaluation interval. ``rules``: the rule files it loads (default none: the dashboard
    tests see no ``ALERTS`` series; tests/integration/test_alerts.py passes a time-scaled copy of
    prometheus/alerts.yml)."""

    def __init__(
        self, tmp: Path, exporter: str, server: str, interval: str = "1s", rules: list[Path] | None = None
    ) -> None:
        self.binary = prometheus_binary()
        cfg = yaml.safe_load(PROM_CONFIG.read_text())
        assert cfg["rule_files"] == ["alerts.yml"], cfg.get("rule_files")  # the shipped config loads the alerts
        cfg["rule_files"] = [str(p) for p in rules or []]
        cfg["global"].update(scrape_interval=interval, evaluation_interval=interval, scrape_timeout=interval)
        jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
        assert set(jobs) == {"llmload", "llm-server"}, jobs
        jobs["llmload"]["static_configs"] = [{"targets": [exporter]}]
        jobs["llm-server"]["static_configs"] = [{"targets": [server]}]
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(cfg))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [
                self.binary,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={tmp / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                http_get(self.url + "/-/ready", timeout=1)
                # Ready is not scraping yet: the scrape manager takes its targets from discovery up to ~5 s
                # later. Wait for the first scrape of both jobs (up == 0 while nothing listens), so a run
                # started now is scraped from its first second.
                if len(self.query("up")) == 2:
                    return
            except (OSError, urllib.error.URLError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"prometheus did not start scraping:\n{self.log.read_text()[-3000:]}") from None
            time.sleep(0.2)

    def api(self, path: str, **params: Any) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            body = json.loads(http_get(url, 10))
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{params}: HTTP {e.code}: {e.read().decode()}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return list(self.api("query", **params)["result"])

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict[str, Any]]:
        return list(self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=step)["result"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD.read_text()))


def dashboard_exprs(dash: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, expr) of every PromQL expression: panel targets and annotations."""
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f"{p['title']} / {t.get('legendFormat')}", t["expr"]))
    for a in dash["annotations"]["list"]:
        if "expr" in a:
            out.append((f"annotation {a['name']}", a["expr"]))
    return out


#: The dashboard's $window in the tests: 1m, its shortest option (the default is 5m for real runs). The latency
#: percentile gauges exist for its options only; a test run is shorter, so its window holds the whole run.
WINDOW = "1m"


#: Grafana variables in the tests: $window (:data:`WINDOW`), $__rate_interval = 4 x the 1 s scrape interval.
def substitute(expr: str, model: str) -> str:
    return expr.replace("$__rate_interval", "4s").replace("$window", WINDOW).replace("$model", model)


def split_or(expr: str) -> list[str]:
    """The top-level ``or`` branches of an expression (outside parentheses, braces and strings)."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(expr):
        c = expr[i]
        if quote:
            quote = "" if c == quote and expr[i - 1] != "\\" else quote
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith(" or ", i):
            parts.append(expr[start:i])
            start = i + 4
            i += 3
        i += 1
    parts.append(expr[start:])
    return [p.strip() for p in parts]


def metric_names(expr: str) -> set[str]:
    """Metric names used in an expression (every selector in the dashboard has braces)."""
    return set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr))


def required(expr: str, exposed: set[str]) -> bool:
    """Must return data: when one of its ``or`` branches uses only metrics that Prometheus has (a server's
    vLLM or SGLang names; spec-decoding metrics only with speculative decoding; llmload_request_errors_total
    only once a request failed). The tests check which expressions this lets off."""
    return any(metric_names(b) <= exposed for b in split_or(expr))


def has_data(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(v)) for s in result for _, v in s.get("values", [s.get("value", [0, "NaN"])]))


def check_dashboard(prom: Prometheus, model: str, start: float, end: float) -> dict[str, Any]:
    """Run every dashboard expression over [start, end]; return {"checked", "no_data", "skipped"} lists."""
    exposed = set(prom.api("label/__name__/values"))
    # The model variable: label_values(llmload_run_info, model).
    assert model in prom.api("label/model/values", **{"match[]": "llmload_run_info"})
    checked, no_data, skipped = [], [], []
    for where, expr in dashboard_exprs(dashboard()):
        q = substitute(expr, model)
        res = prom.query_range(q, start, end)  # also proves the expression parses (else status is "error")
        if not required(expr, exposed):
            skipped.append(where)
        elif has_data(res):
            checked.append(where)
        else:
            no_data.append(f"{where}: {q}")
    assert not no_data, "dashboard expressions without data:\n" + "\n".join(no_data)
    return {"checked": checked, "skipped": skipped}


def prometheus_samples(prom: Prometheus, names: set[str], at: float) -> dict[Key, float]:
    """The last value of every series of these metrics up to ``at`` (after the target went away)."""
    out: dict[Key, float] = {}
    for name in sorted(names):
        for s in prom.query(f"last_over_time({name}[10m])", at=at):
            labels = {k: v for k, v in s["metric"].items() if k not in ("job", "instance", "__name__")}
            out[(name, frozenset(labels.items()))] = float(s["value"][1])
    return out


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, "promtool missing (Debian's prometheus package ships it)"
    return subprocess.run([tool, *args], input=stdin, capture_output=True, text=True, timeout=30)


def assert_prometheus_has_final_totals(prom: Prometheus, recs: list[dict[str, Any]], model: str) -> None:
    """What Prometheus last scraped from the exporter equals the records (the exporter lingered for that scrape)."""
    exp = expected_from_records(recs, model)
    names = {k[0] for k in exp if not (k[0].startswith("llmload_inter_chunk") and k[0].endswith("_bucket"))}
    got = prometheus_samples(prom, names, at=time.time())
    for key, v in exp.items():
        if key[0] in names:
            assert got.get(key) == pytest.approx(v, rel=1e-9), key
    assert sum(v for (n, _), v in got.items() if n == "llmload_requests_total") == len(recs)


def sim_supports(flag: str) -> bool:
    """Whether this simulator has a command-line flag (e.g. speculative decoding, ``--spec-tokens``)."""
    proc = subprocess.run([sys.executable, "-m", "harness.sim", "serve", "--help"], capture_output=True, text=True)
    return flag in proc.stdout


def test_dashboard_queries_against_real_prometheus(tmp_path: Path) -> None:
    port = free_port()
    spec = ["--spec-tokens", "3"] if sim_supports("--spec-tokens") else []
    with launch(preset="demo", time_scale=0.25, seed=3, extra_args=[*SIM_ARGS, *spec]) as sim:
        prom = Prometheus(tmp_path, f"127.0.0.1:{port}", sim.url.split("//", 1)[1])
        try:
            profile = profile_text(tmp_path / "runs", single=3, step=8)
            run = run_locust(tmp_path, "local", sim.url, port, profile, final_scrape=False)
            time.sleep(1.5)  # Prometheus scraped the final state (the exporter waited for it), then saw it go
            check_sim_run(prom, run, sim.model, spec_decoding=bool(spec))
            # The README's images come from harness/panels/: from this Prometheus, with the variables of
            # substitute(), it renders every panel, and each expression check_dashboard found data for has data.
            from harness.panels import render_dashboard

            t0, t1 = run.t_start, run.t_end + 2
            checked = check_dashboard(prom, sim.model, t0, t1)["checked"]
            variables, png = {"model": sim.model, "window": WINDOW}, tmp_path / "panels"
            out = render_dashboard(dashboard(), prom.url, t0, t1, variables, png, 1.0, scrape_interval=1)
            assert len(out.images) == 5 and all(p.stat().st_size > 10_000 for p in out.images), out.images
            assert out.variables["__rate_interval"] == "4s"
            for where in checked:
                if where.startswith("annotation "):
                    assert out.annotations[where.removeprefix("annotation ")] >= 3, (where, out.annotations)
                else:
                    assert out.target(*where.rsplit(" / ", 1)).has_data, where
        finally:
            prom.stop()


def check_sim_run(prom: Prometheus, run: LocustRun, model: str, spec_decoding: bool) -> None:
    recs = run.records()
    report = run.report()
    assert_prometheus_has_final_totals(prom, recs, model)

    # Every PromQL expression of the dashboard returns data over the run (server ones when the target exposes
    # their metrics: the simulator has no KV-cache metric, and spec-decoding ones only with --spec-tokens).
    result = check_dashboard(prom, model, run.t_start, run.t_end + 2)
    assert len(result["checked"]) >= 30, result
    # The firing-alerts panel: this Prometheus loads no rules (tests/integration/test_alerts.py checks the alerts).
    skipped = ["Firing alerts / {{alertname}} ({{severity}})", "Server: KV-cache use / KV cache"]
    if not spec_decoding:
        skipped += ["Server: speculative decoding / acceptance rate", "Server: speculative decoding / tokens per step"]
    assert sorted(result["skipped"]) == skipped, result

    # rate(output tokens) over a step's steady window agrees with the report's output tok/s. The counter takes
    # a request's tokens when it ends; the report spreads them over its decode interval [TTFT, E2E]: the two
    # differ by at most the tokens of requests decoding across the window's edges (plus those ending between
    # an edge and the scrape Prometheus read for it).
    steady = [s for s in report["steps"] if s["phase"] == "step" and s["steady"]]
    assert steady, [(s["label"], s["not_steady_reason"]) for s in report["steps"]]
    step = steady[-1]  # C=4 unless a stalled machine kept it from reaching steady state
    c = step["concurrency"]
    w0, w1 = step["window_start_wall"], step["window_end_wall"]
    sel = f'llmload_output_tokens_total{{phase="step",concurrency="{c}",outcome!="error"}}'

    def at(t: float) -> tuple[float, float]:  # (counter value, time of the scrape it comes from) at t
        v = prom.query(f"sum({sel}) or vector(0)", at=t)  # no series yet: 0
        ts = prom.query("timestamp(llmload_run_info)", at=t)  # every series of a scrape has its time
        return float(v[0]["value"][1]), float(ts[0]["value"][1])

    (v0, s0), (v1, s1) = at(w0), at(w1)
    ok_c = [r for r in recs if r["ok"] and r["phase"] == "step" and r["concurrency"] == c]

    def end(r: dict[str, Any]) -> float:
        return float(r["start_wall"] + r["e2e"])

    # The counter's increase between the two scrapes is the tokens of the records that ended between them, up
    # to requests ending close to a scrape: a record is written a moment after its end, and Prometheus stamps
    # a sample with the time its scrape started, a moment before the exporter reads its state (more under load).
    between = sum(r["output_tokens"] for r in ok_c if s0 < end(r) <= s1)
    near = sum(r["output_tokens"] for r in ok_c if any(-1.0 <= t - end(r) <= 0.5 for t in (s0, s1)))
    assert abs((v1 - v0) - between) <= near, (v1 - v0, between, near)
    edge = 0.0
    for r in ok_c:
        a, e = r["start_wall"] + r["ttft"], end(r)
        crosses = any(a < w < e for w in (w0, w1))
        skew = any(min(w, s) < e <= max(w, s) for w, s in ((w0, s0), (w1, s1)))
        edge += r["output_tokens"] if crosses or skew else 0
    prom_tps, report_tps, tol = (v1 - v0) / (w1 - w0), step["output_tps"], (edge + near) / (w1 - w0)
    print(
        f"C={c} steady window {w1 - w0:.1f} s: Prometheus {prom_tps:.1f} tok/s, report {report_tps:.1f}, "
        f"edge tolerance {tol:.1f}; checked {len(result['checked'])}, skipped {result['skipped']}"
    )
    assert abs(prom_tps - report_tps) <= tol, (prom_tps, report_tps, tol)

    # The live hours-to-N of that step, as Prometheus last saw it, is the report's figure.
    live = prom.query(f'last_over_time(llmload_estimated_time_to_samples_seconds{{concurrency="{c}"}}[10m])')
    assert len(live) == 1 and live[0]["metric"]["n"] == "1000"
    hours = float(live[0]["value"][1]) / 3600
    print(f"hours to N=1000 at C={c}: live {hours:.4f}, report {step['hours'][0]['hours']:.4f}")
    assert hours == pytest.approx(step["hours"][0]["hours"], rel=1e-6), (hours, step["hours"][0])

    # promtool: the shipped and the test config, and the exporter's exposition.
    for cfg in (PROM_CONFIG, prom.config):
        chk = promtool("check", "config", str(cfg))
        assert chk.returncode == 0, chk.stdout + chk.stderr
    chk = promtool("check", "metrics", stdin=run.live[-1])
    assert chk.returncode == 0 and not chk.stdout.strip() and not chk.stderr.strip(), chk.stdout + chk.stderr


# -- the shipped files, checked without Prometheus or Grafana -------------------------------------------------
def test_dashboard_json_is_provisionable() -> None:
    """Raw dashboard JSON (no exported ${DS_...} inputs), a datasource and a model variable, every llmload
    metric it queries is one the exporter exports, every query filters on $model, panels do not overlap."""
    from harness.catalogue import FAMILIES

    text = DASHBOARD.read_text()
    dash = json.loads(text)
    assert "__inputs" not in dash and "${DS_" not in text and dash["uid"] == "llmload-long-run"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["model"]["definition"] == "label_values(llmload_run_info, model)"
    assert variables["model"]["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert variables["window"]["type"] == "interval"
    exported = {name for f in FAMILIES.values() for name in f.samples}
    exprs = dashboard_exprs(dash)
    assert len(exprs) >= 40
    used: set[str] = set()
    for where, expr in exprs:
        names = metric_names(expr)
        assert names, where
        used |= {n for n in names if n.startswith("llmload_")}
        assert all(n in exported for n in names if n.startswith("llmload_")), (where, names - exported)
        for n in names:  # every selector filters on the model variable
            assert re.search(re.escape(n) + r'\{[^}]*model(_name)?=~"\$model"', expr), (where, n)
    assert used >= {
        "llmload_output_tokens_total",
        "llmload_requests_total",
        "llmload_request_errors_total",
        "llmload_truncated_requests_total",
        "llmload_time_to_first_token_percentile_seconds",
        "llmload_time_to_first_answer_token_percentile_seconds",
        "llmload_inter_chunk_latency_percentile_seconds",
        "llmload_time_per_output_token_percentile_seconds",
        "llmload_request_duration_percentile_seconds",
        "llmload_inter_chunk_latency_seconds_sum",
        "llmload_time_per_output_token_seconds_count",
        "llmload_request_output_tokens_bucket",
        "llmload_client_read_lag_seconds_bucket",
        "llmload_users",
        "llmload_requests_in_flight",
        "llmload_target_users",
        "llmload_step_start_time_seconds",
        "llmload_estimated_time_to_samples_seconds",
    }, used
    ids: set[int] = set()
    cells: set[tuple[int, int]] = set()
    for p in dash["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        if p["type"] != "row":
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert all(t["datasource"] == p["datasource"] for t in p["targets"]), p["title"]
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, p["title"]
        cells |= mine
    titles = " ".join(p["title"] for p in dash["panels"])
    for want in ("Output tokens/s", "Requests/s", "TTFT", "TTFAT", "Inter-chunk", "E2E", "Users", "Error",
                 "Hours to N", "Server: running", "KV-cache", "Server vs client TTFT", "generation throughput",
                 "speculative decoding"):  # fmt: skip
        assert want in titles, want


def test_provisioning_and_compose_agree() -> None:
    """Datasource, dashboard provider, docker-compose mounts and the Prometheus config fit together."""
    ds = yaml.safe_load((ROOT / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["access"] == "proxy" and source["url"] == "http://127.0.0.1:9090"
    prom = yaml.safe_load(PROM_CONFIG.read_text())
    assert source["jsonData"]["timeInterval"] == prom["global"]["scrape_interval"]
    assert {j["job_name"]: j["static_configs"][0]["targets"] for j in prom["scrape_configs"]} == {
        "llmload": ["127.0.0.1:9646"],
        "llm-server": ["127.0.0.1:8000"],
    }
    prov = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/llmload.yaml").read_text())
    (provider,) = prov["providers"]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = {m.split(":")[1]: m.split(":")[0] for svc in compose["services"].values() for m in svc.get("volumes", [])}
    assert mounts[provider["options"]["path"]] == "./grafana/dashboards"
    assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    assert mounts["/etc/prometheus/prometheus.yml"] == "./prometheus/prometheus.yml"
    # The alerting rules sit beside the config in the container, where its relative rule_files entry points.
    assert prom["rule_files"] == ["alerts.yml"]
    assert mounts["/etc/prometheus/alerts.yml"] == "./prometheus/alerts.yml"
    for host_path in mounts.values():
        if host_path.startswith("./"):
            assert (ROOT / host_path).exists(), host_path
    assert "--web.listen-address=127.0.0.1:9090" in compose["services"]["prometheus"]["command"]
    assert all(svc["network_mode"] == "host" for svc in compose["services"].values())


# -- bounded memory: thousands of requests over thousands of distinct prompts, a constant number of series ----
def series_of(exposition: str) -> dict[str, set[str]]:
    """Sample keys (name + labels) by metric family name."""
    out: dict[str, set[str]] = {}
    for fam in text_string_to_metric_families(exposition):
        for s in fam.samples:
            out.setdefault(fam.name, set()).add(s.name + str(sorted(s.labels.items())))
    return out


def test_series_count_does_not_grow_with_requests_or_distinct_prompts(tmp_path: Path) -> None:
    """A 16-user step over a mix of 2,000 distinct prompts, half of them in two classes (``short``, ``long``) and
    half without a class (every request truncated at 4 tokens, so no new outcome appears late): the ``prompt``
    label holds the two classes and ``other`` (and ``warmup``); from a quarter of the step on, the exporter's
    series stay the same set up to the last scrape, and every request is counted."""
    n_prompts = 2000
    prompts = "\n".join(
        f"  - {{id: p{i:04d}, text: 'Explain topic {i} to a student.'"
        + (f", class: {('short', 'long')[i % 2]}}}" if i < n_prompts // 2 else "}")
        for i in range(n_prompts)
    )
    profile = f"""
name: many-prompts
simulator: {{preset: demo, time_scale: 0.02}}
request: {{thinking: true, max_tokens: 4}}
prompts:
{prompts}
warmup: {{max_tokens: 4, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [16], duration: 12, drain_timeout: 30}}
output: {{dir: {tmp_path / "runs"}}}
"""
    port = free_port()
    with launch(preset="demo", time_scale=0.02, seed=5) as sim:
        run = run_locust(tmp_path, "local", sim.url, port, profile, timeout=120)
    recs = [r for r in run.records() if r["phase"] != "warmup"]
    step_recs = [r for r in recs if r["phase"] == "step"]
    distinct = {r["prompt_id"] for r in recs}
    print(f"{len(recs)} records, {len(distinct)} distinct prompts, {run.scrapes} scrapes")
    assert len(step_recs) >= 2000 and len(distinct) >= 1000, (len(step_recs), len(distinct))
    assert all(r["finish_reason"] == "length" for r in step_recs)
    assert {r["prompt_class"] for r in recs if int(r["prompt_id"][1:]) < n_prompts // 2} == {"short", "long"}
    assert all(r["prompt_class"] == r["prompt_id"] for r in recs if int(r["prompt_id"][1:]) >= n_prompts // 2)
    assert "1002 prompt classes: the Prometheus 'prompt' label shows ['long', 'short']" in run.logs

    def step_requests(text: str) -> float:
        return sum(
            s.value
            for fam in text_string_to_metric_families(text)
            if fam.name == "llmload_requests"
            for s in fam.samples
            if s.name == "llmload_requests_total" and s.labels["phase"] == "step"
        )

    # The first live scrape with a quarter of the step's requests in, against the final one: the same series.
    mid = next(t for t in run.live if step_requests(t) >= len(step_recs) / 4)
    assert step_requests(mid) < len(step_recs) / 2  # really from the middle of the step
    first, last = series_of(mid), series_of(run.final)
    # One series per load-generating process (not per request or prompt): absent until a process has two CPU
    # samples >= 1 s apart in the step (a single process samples at phase starts and the load's end).
    per_process = "llmload_client_cpu_share"
    assert len(first.get(per_process, ())) <= len(last.get(per_process, ())) <= 1, (first.get(per_process),
                                                                                  last.get(per_process))
    changed = {n for n in first.keys() | last.keys() if first.get(n) != last.get(n)} - {per_process}
    assert not changed, {n: (len(first.get(n, ())), len(last.get(n, ()))) for n in changed}
    n_series = sum(len(v) for v in last.values())
    prompts_exposed = {
        s.labels["prompt"]
        for fam in text_string_to_metric_families(run.final)
        for s in fam.samples
        if "prompt" in s.labels
    }
    print(f"series {n_series}, exposition {len(run.final)} bytes, prompt labels {sorted(prompts_exposed)}")
    assert prompts_exposed == {"short", "long", "other", "warmup"}
    assert step_requests(run.final) == len(step_recs)  # relabelled, never dropped


# -- rate() over the steady window against the records ---------------------------------------------------------
def test_prometheus_rate_over_the_steady_window_matches_the_records(tmp_path: Path) -> None:
    """PromQL ``rate(llmload_output_tokens_total[W])`` over a step's steady window (as the report defines it)
    agrees within 5 % with the output tokens of the records that ended inside that window, divided by its
    length: in total and for reasoning and answer tokens separately.

    The counter takes a request's tokens when it ends, so the records' side counts by end time too. rate()
    extrapolates from the first and last scrape inside the window to its edges: with a 0.25 s scrape interval,
    ~25 completions/s and a window of ~20 s, the tokens of the edge slices it estimates are ~1 % of the total."""
    profile = f"""
name: rate
simulator: {{preset: demo}}
request: {{thinking: true}}
prompts:
  - {{id: short, text: "Explain quantum entanglement to a university student.", max_tokens: 300, weight: 3}}
  - {{id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 120, weight: 1}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [8], duration: 24, drain_timeout: 30}}
output: {{dir: {tmp_path / "runs"}}}
"""
    port = free_port()
    with launch(preset="demo", time_scale=0.05, seed=11) as sim:
        prom = Prometheus(tmp_path, f"127.0.0.1:{port}", sim.url.split("//", 1)[1], interval="250ms")
        try:
            run = run_locust(tmp_path, "local", sim.url, port, profile, timeout=120, final_scrape=False)
            time.sleep(1.0)
            (step,) = [s for s in run.report()["steps"] if s["phase"] == "step"]
            assert step["steady"], step["not_steady_reason"]
            w0, w1 = step["window_start_wall"], step["window_end_wall"]
            recs = [r for r in run.records() if r["ok"] and r["phase"] == "step"]
            ended = [r for r in recs if w0 < r["start_wall"] + r["e2e"] <= w1]
            assert len(ended) >= 200, len(ended)  # enough completions for a 5 % comparison to mean something
            rng = f"{round((w1 - w0) * 1000)}ms"
            for kind, want in (
                ("", sum(r["output_tokens"] for r in ended)),
                ("reasoning", sum(r["reasoning_tokens"] for r in ended)),
                ("answer", sum(r["output_tokens"] - r["reasoning_tokens"] for r in ended)),
            ):
                sel = 'phase="step",outcome!="error"' + (f',kind="{kind}"' if kind else "")
                res = prom.query(f"sum(rate(llmload_output_tokens_total{{{sel}}}[{rng}]))", at=w1)
                got, expect = float(res[0]["value"][1]), want / (w1 - w0)
                print(f"{kind or 'total'}: Prometheus rate {got:.1f} tok/s, records {expect:.1f} tok/s over {rng}")
                assert expect > 0 and abs(got - expect) <= 0.05 * expect, (kind, got, expect)
        finally:
            prom.stop()


# -- the dashboard's latency percentiles against the records' exact ones -------------------------------------
def records_percentile(recs: list[dict[str, Any]], fld: str, p: int) -> float | None:
    """The report's percentile of ``fld`` over these records: :func:`harness.report.stats.percentile` of the
    values, or for ``gap_hist`` the quantile of the merged gap histograms (as the report computes both)."""
    from harness.histogram import LogHistogram
    from harness.report.stats import percentile

    if fld == "gap_hist":
        gaps = LogHistogram()
        for r in recs:
            gaps.merge(LogHistogram.from_json(r.get("gap_hist")))
        return gaps.quantile(p / 100)
    return percentile([r[fld] for r in recs if r.get(fld) is not None], p)


#: Requests ending this close (seconds) to a scrape's time may or may not be in it.
AMBIGUOUS_S = 0.25


def test_dashboard_latency_percentiles_match_the_records(tmp_path: Path) -> None:
    """Every TTFT, TTFAT, inter-chunk, TPOT and E2E percentile panel target of the dashboard, as Grafana sends it
    ($window = 1m, longer than the run: the window holds every request so far), evaluated by a real Prometheus
    over the run and at its end, is within 2 % of the records' exact percentile over the same requests (the
    successful non-warm-up ones that had ended by the scrape Prometheus read). Points where a request ended
    within 0.25 s of the scrape may or may not have been in yet: the value must be the percentile of one of
    those sets (requests in end order). Prints the largest
    relative error per metric, and the one ``histogram_quantile()`` over the histograms had for the same
    requests at the end."""
    from harness.catalogue import PERCENTILE_GAUGES

    port = free_port()
    with launch(preset="demo", time_scale=0.25, seed=7, extra_args=SIM_ARGS) as sim:
        prom = Prometheus(tmp_path, f"127.0.0.1:{port}", sim.url.split("//", 1)[1])
        try:
            profile = profile_text(tmp_path / "runs", single=3, step=10)
            run = run_locust(tmp_path, "local", sim.url, port, profile, final_scrape=False)
            time.sleep(1.5)  # Prometheus scraped the final state (the exporter waited for it)
            recs = [r for r in run.records() if r["ok"] and r["phase"] != "warmup"]
            assert len(recs) >= 40, len(recs)
            by_end = sorted(recs, key=lambda r: float(r["start_wall"] + r["e2e"]))
            span = (by_end[-1]["start_wall"] + by_end[-1]["e2e"]) - (by_end[0]["start_wall"] + by_end[0]["e2e"])
            assert span < 50, "the run must fit in the 1m window"
            targets = []
            for where, expr in dashboard_exprs(dashboard()):
                names = metric_names(expr) & set(PERCENTILE_GAUGES)
                if names:
                    (name,) = names
                    m = re.search(r'percentile="(\d+)"', expr)
                    assert m, (where, expr)
                    targets.append((where, name, int(m.group(1)), substitute(expr, sim.model)))
            assert {t[1] for t in targets} == set(PERCENTILE_GAUGES) and len(targets) >= 13, targets
            worst: dict[str, float] = {}
            points = 0
            t_final = time.time()
            for where, name, p, q in targets:
                fld = PERCENTILE_GAUGES[name]
                # Over the run: each point's value with the time of the scrape it comes from.
                values = prom.query_range(q, run.t_start, run.t_end + 1)
                stamps = prom.query_range(f"timestamp({q})", run.t_start, run.t_end + 1)
                assert len(values) == len(stamps) == 1, (where, values)
                at = {t: float(s) for t, s in stamps[0]["values"]}
                for t, v in values[0]["values"]:
                    s, got = at[t], float(v)
                    # The requests in by the scrape: those ended before it, up to the ones ending within
                    # AMBIGUOUS_S of its time (written a moment after their end, read a moment after s): the
                    # value must be one of these sets' exact percentile.
                    sure = [r for r in by_end if r["start_wall"] + r["e2e"] < s - AMBIGUOUS_S]
                    maybe = [r for r in by_end if abs(r["start_wall"] + r["e2e"] - s) <= AMBIGUOUS_S]
                    wants = [records_percentile(sure + maybe[:i], fld, p) for i in range(len(maybe) + 1)]
                    if math.isnan(got):  # the empty set's value: valid only if one of the sets is empty
                        assert any(w is None for w in wants), (where, s, got, wants)
                        continue
                    assert any(w is not None for w in wants), (where, s, got, wants)  # no request yet: NaN
                    err = min(abs(got - w) / w for w in wants if w is not None)
                    worst[name] = max(worst.get(name, 0.0), err)
                    assert err <= 0.02, (where, s, got, wants)
                    points += 1
                # At the end (the exporter has gone: its series are stale, so their last value): every request.
                (final,) = prom.query(f"last_over_time({q}[10m])", at=t_final)
                got, want = float(final["value"][1]), records_percentile(recs, fld, p)
                assert want is not None and abs(got - want) <= 0.02 * want, (where, got, want)
                worst[name] = max(worst[name], abs(got - want) / want)
            assert points >= 10 * len(targets), points
            # The histograms' estimate of the same percentiles at the end, for comparison (not asserted).
            hist_worst: dict[str, float] = {}
            for _, name, p, _ in targets:
                hist = name.removesuffix("_percentile_seconds") + "_seconds_bucket"
                sel = f'{hist}{{model="{sim.model}",phase!="warmup",outcome!="error"}}'
                res = prom.query(f"histogram_quantile({p / 100}, sum by (le) (last_over_time({sel}[10m])))", t_final)
                want = records_percentile(recs, PERCENTILE_GAUGES[name], p)
                assert want is not None
                err = abs(float(res[0]["value"][1]) - want) / want
                hist_worst[name] = max(hist_worst.get(name, 0.0), err)
            print(f"{len(recs)} requests, {points} points compared over the run")
            for name in PERCENTILE_GAUGES:
                old = 100 * hist_worst[name]
                print(f"{name}: max error {100 * worst[name]:.3f} % (histogram_quantile: {old:.1f} %)")
        finally:
            prom.stop()
