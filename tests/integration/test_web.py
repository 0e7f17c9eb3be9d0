"""End to end in web-UI mode: ``locust -f locustfiles/k26.py`` without ``--headless``, driven over HTTP as the
web UI drives it (``POST /swarm`` with the start form's fields, ``POST /stop``, SIGINT for Ctrl-C).

Every count is checked against the simulator's ground truth (``--truth-log``): records = requests the simulator
saw, all of them completed (nothing cut off, nothing lost on Stop or Ctrl-C). Loopback only; each run is bounded
(short phases, a time-scaled simulator, timeouts on every wait).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.procs import free_port, records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCUSTFILE = str(ROOT / "locustfiles" / "k26.py")

PROFILE = """
name: web
simulator: {preset: demo, time_scale: 0.25, seed: 7, args: ["--truth-log", "%(truth)s"]}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: short, text: "Explain X briefly", max_tokens: 300, weight: 2}
  - {id: guide, text: "Write a comprehensive guide to Y", max_tokens: 150, weight: 1}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: 2}
steps: {concurrency: [2, 3], duration: %(step)s, drain_timeout: 30}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 120}
output: {dir: %(out)s}
"""


class WebLocust:
    """One ``locust`` process (web UI on 127.0.0.1) and its log files."""

    def __init__(self, cwd: Path, args: list[str], port: int, env: dict[str, str]) -> None:
        self.port = port
        self.stdout: IO[bytes] = open(cwd / f"locust-{port}.out", "wb")
        self.stderr_path = cwd / f"locust-{port}.err"
        self.stderr: IO[bytes] = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--no-metrics", *args],
            cwd=cwd, env=env, stdout=self.stdout, stderr=self.stderr,
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def err(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_ready(self, workers: int = 0, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.err()[-3000:]
            try:
                if workers:
                    n = json.loads(self.get("/worker-count")).get("worker_count", 0)
                    if n >= workers:
                        return
                else:
                    self.get("/")
                    return
            except OSError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"web UI not ready in {timeout} s:\n{self.err()[-3000:]}")

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return str(r.read().decode())

    def post(self, path: str, form: dict[str, Any] | None = None, timeout: float = 120.0) -> dict[str, Any]:
        data = urllib.parse.urlencode({k: str(v) for k, v in (form or {}).items()}).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            out = json.loads(r.read().decode())
        assert isinstance(out, dict)
        return out

    def start(self, **form: Any) -> dict[str, Any]:
        """POST /swarm with the start form's fields (Locust's and llmload's)."""
        base = {"user_count": 1, "spawn_rate": 1, "host": "", "mode": "sweep"}
        return self.post("/swarm", {**base, **form})

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.stdout.close()
        self.stderr.close()


@pytest.fixture
def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONUNBUFFERED"] = "1"
    return e


@pytest.fixture
def launched(tmp_path: Path, env: dict[str, str]) -> Iterator[list[WebLocust]]:
    procs: list[WebLocust] = []
    yield procs
    for p in reversed(procs):
        p.close()


def write_profile(tmp_path: Path, step: float) -> tuple[Path, Path, Path]:
    out, truth = tmp_path / "runs", tmp_path / "truth.jsonl"
    prof = tmp_path / "web.yaml"
    prof.write_text(PROFILE % {"out": out, "truth": truth, "step": step})
    return prof, out, truth


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in out.iterdir() if p.is_dir()) if out.exists() else []


def meta(run: Path) -> dict[str, Any]:
    m = json.loads((run / "run.json").read_text())
    assert isinstance(m, dict)
    return m


def phases(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines() if x.strip()]


def truth_requests(truth: Path) -> list[dict[str, Any]]:
    if not truth.exists():
        return []
    lines = [json.loads(x) for x in truth.read_text().splitlines() if x.strip()]
    return [t for t in lines if t.get("type") == "request"]


def wait_ended(out: Path, n: int, timeout: float = 120.0) -> list[Path]:
    """The run directories once ``n`` of them have ended with their report written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = run_dirs(out)
        if len(dirs) >= n and all(meta(d)["status"] != "running" and (d / "report.html").exists() for d in dirs):
            return dirs
        time.sleep(0.3)
    raise AssertionError(f"{n} ended runs not seen in {timeout} s: {[(d.name, meta(d)['status']) for d in dirs]}")


def assert_nothing_lost(dirs: list[Path], truth: Path) -> None:
    """Every request the simulator saw is recorded, and every one of them completed (none cut off)."""
    recs = [r for d in dirs for r in records(d)]
    seen = truth_requests(truth)
    assert len(recs) == len(seen) > 0, (len(recs), len(seen))
    assert {t["outcome"] for t in seen} == {"completed"}
    assert all(r["ok"] for r in recs)
    assert all(meta(d).get("cut_off") is None for d in dirs)
    assert sum(meta(d)["records"] for d in dirs) == len(recs)


def assert_window_ends_at_the_stop(run: Path, t_stop: float, t_answer: float) -> None:
    """``load_end`` was written once, as the stop began (between ``t_stop`` and ``t_answer`` + 0.5 s), before
    the requests then in flight drained, and the report's last step ends there (its tok/s excludes the drain)."""
    ph = phases(run)
    kinds = [p["event"] for p in ph]
    assert kinds.count("load_end") == 1 and kinds[-2:] == ["load_end", "run_end"], kinds
    load_end = ph[-2]["wall"]
    assert t_stop - 0.1 <= load_end <= t_answer + 0.5, (t_stop, load_end, t_answer)
    assert load_end < ph[-1]["wall"]  # (whether a request was in flight then depends on the machine's timing)
    rep = json.loads((run / "report.json").read_text())
    assert rep["steps"][-1]["end_source"] == "load_end"


def test_each_start_is_a_run_sweep_then_fixed(tmp_path: Path, env: dict[str, str], launched: list[WebLocust]) -> None:
    """Two Starts -> two run directories, each with its report written at its end (not at exit) and a duration
    that is the run's; the fixed mode holds Locust's user count for its run time; bad form values and a
    second Start during a run are refused with a message and send nothing."""
    prof, out, truth = write_profile(tmp_path, step=2)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    page = web.get("/")
    for field in ("web_profile", "mode", "prompt_mix", "max_tokens", "thinking", "steps", "step_duration"):
        assert f'"{field}"' in page, field
    assert '"short:2,guide:1"' in page and '"2,3"' in page  # the profile's values are the form's defaults

    bad = web.start(steps="2,x")
    assert bad["success"] is False and "steps" in bad["message"]
    bad = web.start(mode="fixed", user_count="many")
    assert bad["success"] is False and "Number of users" in bad["message"]
    bad = web.start(host="http://127.0.0.1:1")
    assert bad["success"] is False and "127.0.0.1:1" in bad["message"]
    assert run_dirs(out) == [] and truth_requests(truth) == []  # nothing sent, no run directory

    t_start = time.time()
    ok = web.start(mode="sweep")
    assert ok["success"] is True and ok["host"].startswith("http://127.0.0.1:"), ok
    busy = web.start(mode="sweep")
    assert busy["success"] is False and "Stop it" in busy["message"]
    [first] = wait_ended(out, 1)
    m1 = meta(first)
    assert m1["status"] == "finished" and m1["mode"] == "sweep" and m1["start_wall"] >= t_start - 1
    rep1 = json.loads((first / "report.json").read_text())
    assert rep1["duration_s"] == pytest.approx(m1["end_wall"] - m1["start_wall"], abs=0.01)
    assert rep1["duration_s"] < time.time() - t_start + 1  # the run's, not the process's (it started earlier)
    steps1 = [(p["phase"], p["concurrency"]) for p in phases(first) if p["event"] == "phase_start"]
    assert steps1 == [("warmup", 1), ("single", 1), ("step", 2), ("step", 3)]
    assert web.proc.poll() is None  # the report was written while the process runs on

    ok = web.start(mode="fixed", user_count=3, spawn_rate=3, run_time="3s", max_tokens=100)
    assert ok["success"] is True, ok
    dirs = wait_ended(out, 2)
    second = dirs[1]
    m2 = meta(second)
    assert m2["status"] == "finished" and m2["mode"] == "fixed" and m2["fixed"] == {
        "users": 3, "spawn_rate": 3.0, "run_time_s": 3.0}  # fmt: skip
    assert m2["form"]["user_count"] == "3" and m2["form"]["max_tokens"] == "100"
    assert m2["profile"]["prompts"][0]["max_tokens"] == 100 and m2["knobs"] == {"max_tokens": "100"}
    ph = phases(second)
    step = next(p for p in ph if p["event"] == "phase_start" and p["phase"] == "step")
    end = next(p for p in ph if p["event"] == "load_end")
    assert step["concurrency"] == 3 and step["planned_duration"] == 3.0
    assert 3.0 <= end["wall"] - step["wall"] < 3.5  # the run time honoured (Locust ticks once a second)
    main = [r for r in records(second) if r["phase"] != "warmup"]
    assert main and {r["concurrency"] for r in main} == {3} and len({r["user"] for r in main}) == 3
    assert all(r["max_tokens"] == 100 for r in main)
    assert_nothing_lost(dirs, truth)
    for d in dirs:
        for f in ("report.md", "report.json", "report.html"):
            assert (d / f).exists(), (d, f)
    web.proc.send_signal(signal.SIGINT)
    assert web.proc.wait(60) == 0
    assert "Traceback" not in web.err()
    assert len(run_dirs(out)) == 2  # Ctrl-C between runs opens no run


def test_stop_and_ctrl_c_lose_nothing(tmp_path: Path, env: dict[str, str], launched: list[WebLocust]) -> None:
    """Stop mid-step and Ctrl-C mid-run: in-flight requests finish and are recorded (records = requests the
    simulator completed), both runs interrupted with their reports, no traceback."""
    prof, out, truth = write_profile(tmp_path, step=60)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    assert web.start(mode="sweep")["success"] is True
    time.sleep(5)  # in the first step: requests in flight
    t_stop = time.time()
    assert web.post("/stop")["success"] is True
    t_answer = time.time()
    [first] = wait_ended(out, 1)
    assert meta(first)["status"] == "interrupted" and meta(first)["stop_cause"] == "stop"
    assert_nothing_lost([first], truth)
    assert_window_ends_at_the_stop(first, t_stop, t_answer)

    assert web.start(mode="fixed", user_count=4, spawn_rate=4, run_time="")["success"] is True
    time.sleep(4)
    t_sig = time.time()
    web.proc.send_signal(signal.SIGINT)
    assert web.proc.wait(90) == 0, web.err()[-3000:]
    dirs = wait_ended(out, 2, timeout=5)
    assert meta(dirs[1])["status"] == "interrupted" and meta(dirs[1])["mode"] == "fixed"
    assert meta(dirs[1])["stop_cause"] == "sigint"
    assert_nothing_lost(dirs, truth)
    assert_window_ends_at_the_stop(dirs[1], t_sig, t_sig)
    err = web.err()
    assert "Traceback" not in err and "run directory is closed" not in err
    assert "step 1: 4 users until stopped" in err and "for inf s" not in err  # a fixed run without run time


def test_host_field_routes_to_another_server(tmp_path: Path, env: dict[str, str], launched: list[WebLocust]) -> None:
    """The Host field is the target measured: a second simulator given there gets every request (and the
    answer's host shows it); the built-in one gets none."""
    from harness.sim import launch

    prof, out, truth = write_profile(tmp_path, step=2)
    other_truth = tmp_path / "other.jsonl"
    other = launch(time_scale=0.25, seed=3, model="other-model", extra_args=["--truth-log", str(other_truth)])
    try:
        port = free_port()
        args = ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)]
        web = WebLocust(tmp_path, args, port, env)
        launched.append(web)
        web.wait_ready()
        ok = web.start(mode="fixed", user_count=2, spawn_rate=2, run_time="2s", host=other.url)
        assert ok["success"] is True and ok["host"] == other.url, ok
        [run] = wait_ended(out, 1)
        m = meta(run)
        assert m["target"] == {"base_url": other.url, "model": "other-model", "simulator": False}
        assert m["simulator"] is None
        assert_nothing_lost([run], other_truth)
        assert truth_requests(truth) == []

        # The profile picker: profiles/demo.yaml (its own simulator settings: the built-in simulator restarts).
        ok = web.start(mode="fixed", user_count=2, spawn_rate=2, run_time="2s", web_profile="demo", max_tokens=40)
        assert ok["success"] is True and ok["host"] != other.url, ok
        dirs = wait_ended(out, 2)
        m = meta(dirs[1])
        assert m["status"] == "finished" and m["profile"]["name"] == "demo"
        assert m["profile_path"].endswith("profiles/demo.yaml") and m["target"]["simulator"] is True
        assert m["simulator"]["time_scale"] == 1.0 and m["profile"]["output"]["dir"] == "runs"
        assert {r["max_tokens"] for r in records(dirs[1])} == {16, 40}  # warm-up, then the form's max_tokens
    finally:
        other.stop()


def test_host_of_an_earlier_builtin_simulator_means_the_builtin_one(
    tmp_path: Path, env: dict[str, str], launched: list[WebLocust]
) -> None:
    """The Host field left as shown (the URL of a built-in simulator this process started, replaced since by one
    with other settings) means "the built-in simulator for the chosen profile": never a refused connection to
    the old port, and the answer's host is the target measured (run.json's)."""
    prof, out, _truth = write_profile(tmp_path, step=2)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    ok = web.start(mode="fixed", user_count=1, spawn_rate=1, run_time="1s")
    assert ok["success"] is True, ok
    [first] = wait_ended(out, 1)
    url1 = meta(first)["target"]["base_url"]
    assert meta(first)["target"]["simulator"] is True and ok["host"] == url1

    # demo's simulator settings differ: the built-in simulator is replaced (new port), the old URL in Host is it.
    ok = web.start(mode="fixed", user_count=1, spawn_rate=1, run_time="1s", web_profile="demo", max_tokens=16,
                   host=url1)
    assert ok["success"] is True, ok
    second = wait_ended(out, 2)[1]
    m = meta(second)
    assert m["status"] == "finished" and m["profile"]["name"] == "demo" and m["target"]["simulator"] is True
    url2 = m["target"]["base_url"]
    assert url2 != url1 and ok["host"] == url2 and m["records"] > 0

    # Back to the launch profile with the first (now stopped) simulator's URL still in Host: the built-in one again.
    ok = web.start(mode="fixed", user_count=1, spawn_rate=1, run_time="1s", web_profile="", host=url1)
    assert ok["success"] is True, ok
    third = wait_ended(out, 3)[2]
    m = meta(third)
    assert m["status"] == "finished" and m["profile"]["name"] == "web" and m["target"]["simulator"] is True
    assert m["target"]["base_url"] not in (url1, url2) and ok["host"] == m["target"]["base_url"]
    assert m["records"] > 0 and all(r["ok"] for r in records(third))


def test_master_and_two_workers(tmp_path: Path, env: dict[str, str], launched: list[WebLocust]) -> None:
    """--master with two --worker processes: the form's values reach the workers (through the phase messages),
    both workers send load, and a Stop mid-run loses nothing: each worker's in-flight requests are drained and
    their records reach the master before its report."""
    prof, out, truth = write_profile(tmp_path, step=60)
    port, mport = free_port(), free_port()
    master = WebLocust(
        tmp_path,
        ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(mport),
         "--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)],
        port, env,
    )  # fmt: skip
    launched.append(master)
    for _ in range(2):
        launched.append(WebLocust(tmp_path, ["--worker", "--master-port", str(mport)], free_port(), env))
    master.wait_ready(workers=2)
    ok = master.start(mode="fixed", user_count=4, spawn_rate=4, run_time="3s", max_tokens=120)
    assert ok["success"] is True, ok
    [first] = wait_ended(out, 1)
    assert meta(first)["status"] == "finished"
    main = [r for r in records(first) if r["phase"] != "warmup"]
    assert len({r["user"].split(":")[0] for r in main}) == 2  # both workers
    assert {r["max_tokens"] for r in main} == {120}  # the form's knob, on the workers

    assert master.start(mode="sweep", steps="4", step_duration=60)["success"] is True
    time.sleep(6)
    assert master.post("/stop")["success"] is True
    dirs = wait_ended(out, 2)
    assert meta(dirs[1])["status"] == "interrupted"
    assert {r["concurrency"] for r in records(dirs[1]) if r["phase"] == "step"} == {4}
    assert_nothing_lost(dirs, truth)
    master.proc.send_signal(signal.SIGINT)
    assert master.proc.wait(60) == 0
    assert "Traceback" not in master.err()


def test_requests_cut_off_by_the_stop_timeout_are_counted(
    tmp_path: Path, env: dict[str, str], launched: list[WebLocust]
) -> None:
    """A Stop whose drain (steps.drain_timeout 1 s) ends before long requests do: the requests cut off are
    counted in run.json and the report says how many; records + cut off = requests the simulator saw."""
    out, truth = tmp_path / "runs", tmp_path / "truth.jsonl"
    prof = tmp_path / "cut.yaml"
    text = PROFILE % {"out": out, "truth": truth, "step": 60}
    text = text.replace("time_scale: 0.25", "time_scale: 1.0").replace("drain_timeout: 30", "drain_timeout: 1")
    text = text.replace("max_tokens: 300", "max_tokens: 4000").replace("max_tokens: 150", "max_tokens: 4000")
    prof.write_text(text)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    assert web.start(mode="fixed", user_count=3, spawn_rate=3, run_time="", prompt_mix="guide")["success"] is True
    time.sleep(4)
    assert web.post("/stop")["success"] is True
    [run] = wait_ended(out, 1)
    m = meta(run)
    cut = m.get("cut_off")
    assert isinstance(cut, int) and cut >= 1
    deadline = time.monotonic() + 10  # the simulator logs a request when it ends (the client went away)
    while time.monotonic() < deadline and len(truth_requests(truth)) < len(records(run)) + cut:
        time.sleep(0.2)
    seen = truth_requests(truth)
    assert len(records(run)) + cut == len(seen)
    assert sum(1 for t in seen if t["outcome"] != "completed") == cut
    assert f"CUT OFF: {cut} request(s)" in (run / "report.md").read_text()
    assert "Traceback" not in web.err()


def _get_timed(web: WebLocust, path: str) -> tuple[float, dict[str, Any]]:
    t = time.monotonic()
    body = json.loads(web.get(path))
    return time.monotonic() - t, body


def test_stop_answers_at_once_and_the_view_shows_the_drain(
    tmp_path: Path, env: dict[str, str], launched: list[WebLocust]
) -> None:
    """Stop with long requests in flight: ``POST /stop`` answers at once (Locust's own handler answered after the
    drain and the report: 17.9 s in a try on this machine), the LLM view's JSON shows the run "stopping",
    ``draining`` then ``writing_report``, until the run is recorded; the UI keeps answering meanwhile (the report
    is drawn by a child process, not on the gevent loop); nothing is lost."""
    out, truth = tmp_path / "runs", tmp_path / "truth.jsonl"
    prof = tmp_path / "long.yaml"
    text = PROFILE % {"out": out, "truth": truth, "step": 60}
    text = text.replace("time_scale: 0.25", "time_scale: 1.0")
    text = text.replace("max_tokens: 300", "max_tokens: 3000").replace("max_tokens: 150", "max_tokens: 3000")
    prof.write_text(text)
    port = free_port()
    web = WebLocust(tmp_path, ["--web-host", "127.0.0.1", "--web-port", str(port), "--profile", str(prof)], port, env)
    launched.append(web)
    web.wait_ready()
    assert web.start(mode="fixed", user_count=3, spawn_rate=3, run_time="", prompt_mix="guide")["success"] is True
    time.sleep(5)  # 3 long requests in flight
    t_stop = time.time()
    ans = web.post("/stop", timeout=10)
    t_answer = time.time()
    assert ans["success"] is True and ans.get("stopping") is True, ans
    assert t_answer - t_stop < 2.0, t_answer - t_stop
    stages: list[str] = []
    slowest = 0.0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        _lat, data = _get_timed(web, "/llm/data.json")
        lat, _stats = _get_timed(web, "/stats/requests")
        slowest = max(slowest, lat)
        st = data.get("stopping")
        if st is None:
            if stages:
                break
        else:
            assert data["state"] == "stopping" and st["drain_timeout_s"] == 30.0, data["state"]
            if not stages or stages[-1] != st["stage"]:
                stages.append(st["stage"])
        time.sleep(0.1)
    assert stages == ["draining", "writing_report"], stages
    assert slowest < 2.0, slowest  # the UI answered throughout (the in-process report held the loop ~6 s)
    [run] = wait_ended(out, 1, timeout=5)
    assert data["state"] == "finished" and data["stopping"] is None  # a fixed run without run time: finished
    m = meta(run)
    assert m["status"] == "finished" and m["stop_cause"] == "stop"
    assert m["end_wall"] - t_stop > 3.0  # the drain took seconds: the answer did not wait for it
    assert_nothing_lost([run], truth)
    assert_window_ends_at_the_stop(run, t_stop, t_answer)
    assert json.loads((run / "report.json").read_text())["run_id"] == run.name
    web.proc.send_signal(signal.SIGINT)
    assert web.proc.wait(60) == 0
    assert "Traceback" not in web.err()
