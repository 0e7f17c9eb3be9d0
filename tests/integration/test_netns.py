"""End to end over a real (virtual) network: the simulator, the Locust master and two workers each in a network
namespace of their own, joined by veth pairs to one bridge (:class:`tests.netns.Lan`), instead of one loopback.

1. a two-step sweep: the records, run.json and report.json count exactly what the server served;
2. a worker's link cut mid-step (``ip link set eth0 down`` in its namespace): the master records it lost as it
   records a killed worker, and the run finishes and writes its report;
3. a worker's link cut for 7 s and brought back: the worker is recorded lost then back, every request the server
   finished is recorded once, and the step it stalled in is not steady (:func:`harness.report.lost.stalled_outages`);
4. 50 ms of one-way latency between one worker and the server (:mod:`tests.delay_relay`: this kernel has no
   ``netem``) shows in that worker's TTFT and not in the other's.

Skipped, with one line naming what is missing, where namespaces cannot be made (not root, no ``ip``);
``LLMLOAD_REQUIRE_NETNS=1`` (CI) makes that a failure. Bounded: steps of a few seconds, subprocess timeouts.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_locust_run import ROOT
from tests.integration.test_prometheus import completions_in
from tests.netns import Lan, missing
from tests.procs import records

pytestmark = pytest.mark.slow

REQUIRE_ENV = "LLMLOAD_REQUIRE_NETNS"
HOSTS = ["srv", "mst", "w1", "w2"]
SIM_PORT = 8000
RPC_PORT = 5557
LOCUSTFILE = str(ROOT / "locustfiles" / "k26.py")
#: A second address of the server, which the delay relay on w2 connects to (w2's own lo holds the first).
SRV_ALIAS = "10.213.0.11"


@pytest.fixture
def lan() -> Iterator[Lan]:
    """The four hosts' LAN; deleted (and whatever still runs in it killed) after the test, pass or fail."""
    reason = missing()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    with Lan(HOSTS) as net:
        yield net


#: A prompt of short replies: ~50 ms requests, TTFT ~8 ms on the simulator at time scale 0.25.
SHORT = '{id: short, text: "Explain X briefly", max_tokens: 60}'
#: A prompt of long replies: ~2 s requests on the simulator at time scale 0.5.
LONG = '{id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 300}'


def profile_text(out: Path, concurrency: list[int], duration: float, prompt: str = SHORT) -> str:
    """A profile of one prompt, a warm-up, no single-stream phase, and the given steps."""
    return f"""
name: netns
request: {{thinking: true}}
prompts:
  - {prompt}
warmup: {{max_tokens: 8, timeout: 30}}
single_stream: {{duration: 0}}
steps: {{concurrency: {concurrency}, duration: {duration}, drain_timeout: 20}}
timeouts: {{connect: 5, first_byte: 15, first_token: 15, idle: 10, total: 30}}
output: {{dir: {out}}}
"""


@dataclass
class Sweep:
    """What one run on the LAN left: its run directory, the server's completions, the processes' logs, and
    ``worker_ids``: the Locust client id of each worker host (``w1``, ``w2``), from run.json."""

    run: Path
    served: int
    log: str
    worker_ids: dict[str, str]

    def meta(self) -> dict[str, Any]:
        return dict(json.loads((self.run / "run.json").read_text()))

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in (self.run / "phases.jsonl").read_text().splitlines()]

    def of_worker(self, host: str) -> list[dict[str, Any]]:
        """``host``'s records: a user id is the worker's client id's last 12 characters, ``:``, a sequence."""
        short = self.worker_ids[host][-12:]
        return [r for r in records(self.run) if r["user"].split(":")[0] == short]


def phase_start(out: Path, step: int) -> tuple[Path, float] | None:
    """The run directory under ``out`` and the wall time its load step ``step`` started, once it has."""
    dirs = [p for p in out.iterdir() if p.is_dir()] if out.exists() else []
    if not dirs or not (dirs[0] / "phases.jsonl").exists():
        return None
    for line in (dirs[0] / "phases.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev.get("event") == "phase_start" and ev.get("phase") == "step" and ev.get("step") == step:
            return dirs[0], float(ev["wall"])
    return None


def wait_step(out: Path, step: int, deadline: float) -> tuple[Path, float]:
    """Poll until load step ``step`` started (AssertionError at ``deadline``, monotonic seconds)."""
    while time.monotonic() < deadline:
        if (got := phase_start(out, step)) is not None:
            return got
        time.sleep(0.1)
    raise AssertionError(f"the run did not reach step {step} in time")


def _wait_line(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"no {text!r} from {proc.args!r}: {path.read_text(errors='replace')[-2000:]}")


def sweep(lan: Lan, tmp: Path, profile: str, during: Callable[[Path], None] | None = None,
          relay_on_w2: bool = False, time_scale: float = 0.25, timeout: float = 80) -> Sweep:
    """Run ``profile`` (its output dir ``tmp/runs``) with the simulator on ``srv``, the master on ``mst`` and one
    worker on each of ``w1``, ``w2``; ``during(out)`` runs while the load runs (a fault). With ``relay_on_w2``,
    w2 reaches the server through :mod:`tests.delay_relay` (its delay off until SIGUSR1: see
    :func:`relay_pid`). Everything started here is killed at the end, pass or fail."""
    out = tmp / "runs"
    (tmp / "p.yaml").write_text(profile)
    srv = f"http://{lan.addr('srv')}:{SIM_PORT}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs: list[subprocess.Popen[bytes]] = []
    logs: list[Path] = []
    stuck: list[str] = []

    def start(host: str, cmd: list[str], name: str, hostname: str | None = None) -> subprocess.Popen[bytes]:
        log = tmp / f"{name}.log"
        logs.append(log)
        with log.open("wb") as f:
            p = subprocess.Popen(lan.argv(host, cmd, hostname), cwd=tmp, env=env, stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        procs.append(p)
        return p

    try:
        sim = start("srv", [sys.executable, "-m", "harness.sim", "serve", "--host", "0.0.0.0", "--port",
                            str(SIM_PORT), "--preset", "demo", "--time-scale", str(time_scale), "--seed", "7"], "sim")
        _wait_line(tmp / "sim.log", "READY ", sim, 20)
        if relay_on_w2:
            lan.add_alias("srv", SRV_ALIAS)
            lan.add_local_address("w2", lan.addr("srv"))
            relay = start("w2", [sys.executable, str(ROOT / "tests" / "delay_relay.py"), "--listen",
                                 f"{lan.addr('srv')}:{SIM_PORT}", "--to", f"{SRV_ALIAS}:{SIM_PORT}",
                                 "--delay", str(DELAY_S)], "relay")
            _wait_line(tmp / "relay.log", "relay ready", relay, 20)
        master = start("mst", [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--master",
                               "--master-bind-host", lan.addr("mst"), "--master-bind-port", str(RPC_PORT),
                               "--expect-workers", "2", "--profile", str(tmp / "p.yaml"), "--host", srv,
                               "--no-metrics", "--exit-code-on-error", "0"], "master")
        workers = [
            start(w, [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--worker", "--master-host", lan.addr("mst"),
                      "--master-port", str(RPC_PORT)], w, hostname=w)
            for w in ("w1", "w2")
        ]
        t0 = time.monotonic()
        if during is not None:
            during(out)
        master.wait(timeout=max(1.0, timeout - (time.monotonic() - t0)))
        for host, w in zip(("w1", "w2"), workers, strict=True):  # a cut-off worker never hears its master quit
            if host not in lan.down:
                try:
                    w.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    stuck.append(host)
        served = completions_in(lan.http_get("srv", f"http://127.0.0.1:{SIM_PORT}/metrics"))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)
    assert not stuck, f"worker(s) {stuck} did not quit with the master\n{log_text}"
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, log_text
    meta = json.loads((dirs[0] / "run.json").read_text())
    ids = {w.split("_")[0]: w for w in meta.get("workers", [])}
    assert set(ids) == {"w1", "w2"}, (meta.get("workers"), log_text)
    return Sweep(dirs[0], served, log_text, ids)


#: One-way latency added between w2 and the server in test 3, seconds.
DELAY_S = 0.05


def relay_pid(lan: Lan) -> int:
    """The pid of the delay relay running in w2's namespace."""
    out = subprocess.run(["ip", "netns", "pids", lan.ns("w2")], capture_output=True, text=True, check=True)
    for pid in out.stdout.split():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"delay_relay.py" in cmd:
            return int(pid)
    raise AssertionError("no delay relay in w2's namespace")


def test_a_sweep_over_the_lan_counts_what_the_server_served(lan: Lan, tmp_path: Path) -> None:
    sw = sweep(lan, tmp_path, profile_text(tmp_path / "runs", [2, 4], 4))
    recs = records(sw.run)
    meta = sw.meta()
    rep = json.loads((sw.run / "report.json").read_text())
    ok = [r for r in recs if r["ok"]]
    per_worker = {w: len(sw.of_worker(w)) for w in ("w1", "w2")}
    print(f"{len(recs)} records ({len(ok)} ok), server served {sw.served}, per worker {per_worker}")
    assert meta["status"] == "finished", sw.log
    assert len(ok) == len(recs) == sw.served, sw.log  # every request the server finished, recorded once
    assert meta["records"] == len(recs)
    assert not meta.get("workers_lost") and not meta.get("cut_off")
    # both workers sent load over their own links; the warm-up request is the master's choice of one of them
    assert per_worker["w1"] > 5 and per_worker["w2"] > 5, per_worker
    assert sum(per_worker.values()) + sum(r["user"] == "warmup" for r in recs) == len(recs), per_worker
    # report.json counts the same requests: the warm-up, the totals and each step's
    assert rep["warmup"]["requests"] + rep["totals"]["requests"] == len(recs), (rep["warmup"], rep["totals"])
    assert rep["totals"]["completed"] == rep["totals"]["requests"] and rep["totals"]["errors"] == 0
    steps = {r["label"]: r for r in rep["steps"]}
    assert set(steps) == {"C=2", "C=4"}, list(steps)
    for label, row in steps.items():
        in_step = [r for r in recs if r["phase"] == "step" and r["concurrency"] == int(label[2:])]
        assert row["requests"] == len(in_step), (label, row["requests"], len(in_step))
    assert sum(row["requests"] for row in steps.values()) == rep["totals"]["requests"]


def test_a_worker_cut_off_mid_step_is_recorded_lost_and_the_run_finishes(lan: Lan, tmp_path: Path) -> None:
    cut: dict[str, float] = {}

    def cut_w2(out: Path) -> None:  # 3 s into C=4: w2's link goes down, its 2 users and their requests cut off
        _run, t1 = wait_step(out, 1, time.monotonic() + 60)
        time.sleep(max(0.0, t1 + 3.0 - time.time()))
        cut["wall"] = time.time()
        lan.cut("w2")

    t0 = time.monotonic()
    sw = sweep(lan, tmp_path, profile_text(tmp_path / "runs", [4, 6], 8, LONG), cut_w2, time_scale=0.5)
    took = time.monotonic() - t0
    meta, recs = sw.meta(), records(sw.run)
    ok = [r for r in recs if r["ok"]]
    lost = [e for e in sw.events() if e["event"] == "worker_lost"]
    w2_after = [r for r in sw.of_worker("w2") if r["start_wall"] > cut["wall"]]
    print(f"run took {took:.1f} s; lost {lost}; {len(ok)} ok records of {len(recs)}, server finished {sw.served}, "
          f"cut_off {meta.get('cut_off')}, w2 records started after the cut {len(w2_after)}")
    # The run went on: finished, report written, the master did not hang on the cut-off worker.
    assert meta["status"] == "finished", sw.log
    assert (sw.run / "report.json").exists() and (sw.run / "report.md").exists(), sw.log
    # The master recorded the loss as it does for a killed worker: once, w2, missing, its 2 users, after the cut.
    assert len(lost) == 1, sw.log
    ev = lost[0]
    assert ev["worker"] == sw.worker_ids["w2"] and ev["state"] == "missing" and ev["users"] == 2, ev
    assert ev["wall"] > cut["wall"] and cut["wall"] - 2.0 <= ev["since_wall"] <= cut["wall"] + 0.1, (ev, cut)
    assert ev["in_flight"] is not None and 0 <= ev["in_flight"] <= 2, ev
    assert [w["worker"] for w in meta["workers_lost"]] == [ev["worker"]]
    assert (meta.get("cut_off") or 0) >= ev["in_flight"]
    assert not w2_after, w2_after  # nothing of w2's after the cut reached the master
    # What the server finished but nobody recorded: w2's requests in flight at the cut and its records not yet sent
    # (a worker sends its records every 0.5 s; these requests take ~2 s): at most 2 per user.
    assert 0 <= sw.served - len(ok) <= 2 * ev["users"], (sw.served, len(ok), sw.log)
    assert len(ok) == len(recs), sw.log  # no request of the live worker failed
    rep = json.loads((sw.run / "report.json").read_text())
    row = next(r for r in rep["steps"] if r["label"] == "C=4")
    assert row["steady"] is False and ev["worker"] in row["not_steady_reason"], row["not_steady_reason"]
    md = (sw.run / "report.md").read_text()
    assert f"WORKER LOST: worker {ev['worker']}" in md and "2 users stopped" in md, md


def test_a_worker_whose_link_comes_back_is_recorded_back_and_its_stall_leaves_the_step_not_steady(
        lan: Lan, tmp_path: Path) -> None:
    cut: dict[str, float] = {}

    def cut_and_restore_w2(out: Path) -> None:  # 3 s into C=4, w2's link goes down for 7 s, then comes back
        _run, t1 = wait_step(out, 1, time.monotonic() + 60)
        time.sleep(max(0.0, t1 + 3.0 - time.time()))
        cut["wall"] = time.time()
        lan.cut("w2")
        time.sleep(7.0)
        lan.restore("w2")
        cut["back"] = time.time()

    sw = sweep(lan, tmp_path, profile_text(tmp_path / "runs", [4, 6], 14, LONG), cut_and_restore_w2, time_scale=0.5,
               timeout=120)
    meta, recs, events = sw.meta(), records(sw.run), sw.events()
    lost = [e for e in events if e["event"] == "worker_lost"]
    back = [e for e in events if e["event"] == "worker_back"]
    ids = [r["id"] for r in recs if r.get("id")]
    print(f"cut {cut}; lost {lost}; back {back}; {len(recs)} records, server finished {sw.served}, "
          f"cut_off {meta.get('cut_off')}")
    assert meta["status"] == "finished", sw.log
    # Lost once (no heartbeat) and back once, the same worker; its loss withdrawn, so nothing counted cut off.
    assert [e["worker"] for e in lost] == [e["worker"] for e in back] == [sw.worker_ids["w2"]], (lost, back)
    assert cut["wall"] < lost[0]["wall"] < cut["back"] < back[0]["wall"], (cut, lost, back)
    assert [w.get("back_wall") for w in meta["workers_lost"]] == [back[0]["wall"]]
    assert not meta.get("cut_off")
    # Every request the server finished is recorded once, nothing was sent twice. w2's requests in flight across the
    # cut end one of two honest ways, by where TCP's retransmission backoff falls against the 10 s idle timeout: in
    # a timeout (recorded, failed) or completed after the link came back, with a gap spanning the cut. Either way
    # they are recorded, and no request of w1 failed.
    assert len(recs) == sw.served and len(ids) == len(set(ids)), (len(recs), sw.served, sw.log)
    w2 = sw.of_worker("w2")
    across = [r for r in w2 if r["start_wall"] < cut["wall"] < r["start_wall"] + (r["e2e"] or 0.0)]
    assert across, [(r["start_wall"], r["e2e"], r["ok"]) for r in w2]
    for r in across:
        if r["ok"]:
            assert r["start_wall"] + r["e2e"] > cut["back"], r
        else:
            assert r["error_class"] in {"timeout_idle", "timeout_total", "stream_truncated"}, r
    failed = [r for r in recs if not r["ok"]]
    assert {r["user"].split(":")[0] for r in failed} <= {sw.worker_ids["w2"][-12:]}, failed
    # The report: C=4 not steady, naming w2's stall; w2 ran users again in C=6.
    rep = json.loads((sw.run / "report.json").read_text())
    rows = {r["label"]: r for r in rep["steps"]}
    reason = rows["C=4"]["not_steady_reason"] or ""
    assert rows["C=4"]["steady"] is False and f"worker {sw.worker_ids['w2']} was missing for" in reason, reason
    assert any(r["step"] == 2 and r["ok"] for r in sw.of_worker("w2")), "w2 sent no load after its link came back"


def _median_ttft(recs: list[dict[str, Any]]) -> float:
    return statistics.median(r["ttft"] for r in recs if r["ok"] and r["ttft"] is not None)


def test_latency_between_one_worker_and_the_server_shows_in_its_ttft_only(lan: Lan, tmp_path: Path) -> None:
    on: dict[str, float] = {}

    def delay_w2(out: Path) -> None:  # at the start of the second C=4 step, w2's requests arrive 50 ms late
        _run, _t2 = wait_step(out, 2, time.monotonic() + 60)
        os.kill(relay_pid(lan), signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while "relay delay on" not in (tmp_path / "relay.log").read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        on["wall"] = time.time()

    sw = sweep(lan, tmp_path, profile_text(tmp_path / "runs", [4, 4], 5), delay_w2, relay_on_w2=True)
    assert sw.meta()["status"] == "finished", sw.log
    ttft: dict[str, tuple[float, float]] = {}
    for w in ("w1", "w2"):
        recs = [r for r in sw.of_worker(w) if r["phase"] == "step"]
        before = [r for r in recs if r["step"] == 1]
        after = [r for r in recs if r["step"] == 2 and r["start_wall"] > on["wall"]]
        assert len(before) >= 20 and len(after) >= 20, (w, len(before), len(after))
        ttft[w] = (_median_ttft(before), _median_ttft(after))
    d1, d2 = (ttft[w][1] - ttft[w][0] for w in ("w1", "w2"))
    print("median TTFT ms before -> after the delay: "
          + ", ".join(f"{w} {a * 1e3:.1f} -> {b * 1e3:.1f}" for w, (a, b) in ttft.items())
          + f"; delta w1 {d1 * 1e3:+.1f} ms, w2 {d2 * 1e3:+.1f} ms (delay {DELAY_S * 1e3:.0f} ms)")
    # w2's TTFT grew by the delay (its request bytes reach the server DELAY_S later); w1's did not move.
    assert 0.8 * DELAY_S <= d2 <= 1.6 * DELAY_S, ttft
    assert abs(d1) <= 0.2 * DELAY_S, ttft
