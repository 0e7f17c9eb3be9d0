"""End to end: ``locust -f locustfiles/k26.py --headless`` against the built-in simulator, as a user runs it.

Each run is bounded: short phases, a time-scaled simulator, a subprocess timeout.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from harness.chunkpath import CLIENT_PATH
from harness.report import render_summary
from harness.report.packed import unpacked
from tests.procs import process_groups, records

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOCUST = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless"]
SECRET = "sk-llmload-test-secret-4242"

PROFILE = """
name: itest
target: {api_key_env: LLMLOAD_TEST_KEY}
simulator: {preset: demo, time_scale: 0.25, seed: 7}
request: {thinking: true, continuous_usage_stats: true}
prompts:
  - {id: short, text: "Explain X briefly", max_tokens: 400, weight: 2}
  - {id: guide, text: "Write a comprehensive guide to Y", max_tokens: 150, weight: 1}
warmup: {max_tokens: 16, timeout: 60}
single_stream: {duration: 3}
steps: {concurrency: [2, 4], duration: %(step)s}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 120}
output: {dir: %(out)s}
"""


def run_dir_of(out: Path) -> Path:
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.fixture
def env() -> dict[str, str]:
    e = dict(os.environ)
    e["LLMLOAD_TEST_KEY"] = SECRET
    e["PYTHONUNBUFFERED"] = "1"
    return e


def test_headless_sweep_on_the_simulator(tmp_path: Path, env: dict[str, str]) -> None:
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(PROFILE % {"out": out, "step": 4})
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof), "--json-file", str(tmp_path / "locust")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = run_dir_of(out)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "finished"
    assert meta["target"]["simulator"] is True and meta["simulator"]["time_scale"] == 0.25
    assert meta["client_path"] == CLIENT_PATH  # the per-read stream path the Locust process ran (harness.chunkpath)
    recs = records(run)
    assert meta["records"] == len(recs)
    phases = [
        (p["phase"], p["step"], p["concurrency"])
        for p in map(json.loads, (run / "phases.jsonl").read_text().splitlines())
        if p["event"] == "phase_start"
    ]
    assert phases == [("warmup", -1, 1), ("single", 0, 1), ("step", 1, 2), ("step", 2, 4)]
    warm = [r for r in recs if r["phase"] == "warmup"]
    assert len(warm) == 1 and warm[0]["ok"] and warm[0]["max_tokens"] == 16
    assert {(r["phase"], r["step"], r["concurrency"]) for r in recs} == set(phases)
    assert all(r["ok"] for r in recs), [r["error_class"] for r in recs if not r["ok"]]
    assert any(r["truncated"] for r in recs) and all(r["token_source"] == "usage" for r in recs)
    assert len({r["user"] for r in recs if r["phase"] == "step" and r["step"] == 2}) == 4

    # Locust's own stats (--json-file holds the final figures; its CSV is refreshed once a second and can
    # miss the last requests): one entry per prompt id, response_time = E2E (ms), response_length = the bytes
    # received (exact count: tests/test_users.py), so the size column is bytes, not tokens.
    entries = {e["name"]: e for e in json.loads((tmp_path / "locust.json").read_text())}
    for pid in ("short", "guide"):
        mine = [r for r in recs if r["prompt_id"] == pid]
        e = entries[pid]
        assert e["method"] == "chat" and e["num_requests"] == len(mine) and e["num_failures"] == 0
        assert e["total_response_time"] == pytest.approx(1000 * sum(r["e2e"] for r in mine), rel=1e-9)
        assert e["total_content_length"] >= 50 * sum(r["output_tokens"] for r in mine) > 0  # SSE bytes per token
    assert "warmup" not in entries  # excluded from Locust's figures too

    # The report is printed and written.
    assert (run / "report.md").exists() and (run / "report.json").exists()
    assert (run / "report.html").exists() and (run / "figures" / "throughput.png").exists()
    assert "Hours to N" in proc.stdout or "hours" in proc.stdout.lower()
    # ... as the compact terminal summary of report.json (the full tables stay in the files), within 120 columns
    summary = render_summary(json.loads((run / "report.json").read_text()))
    assert summary in proc.stdout and "## Per step" not in proc.stdout
    assert max(len(line) for line in summary.splitlines()) <= 120
    # The API key never appears in records, run metadata, reports or logs (figures/ holds only PNG images).
    for p in [*run.iterdir(), *run.glob("records.parts/*.parquet")]:
        if p.is_file():  # records.parquet / parts (the report's caches of records.jsonl) are compressed: read values
            # (a part's chunk times are packed float64s, harness.report.packed: read back as the lists they are)
            text = unpacked(pl.read_parquet(p)).write_ndjson() if p.suffix == ".parquet" else p.read_text()
            assert SECRET not in text, p
    assert SECRET not in proc.stdout and SECRET not in proc.stderr


def test_bad_profile_fails_before_any_load(tmp_path: Path, env: dict[str, str]) -> None:
    prof = tmp_path / "bad.yaml"
    prof.write_text("name: bad\nprompts:\n  - {id: a, text: x, max_tokens: 0}\n")
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert f"{prof}: prompts.0.max_tokens: Input should be greater than 0" in proc.stderr
    assert not (tmp_path / "runs").exists()


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job of a non-interactive shell starts


@pytest.mark.parametrize(
    ("sig", "ignored", "group"),
    [
        (signal.SIGINT, False, False),
        (signal.SIGTERM, False, False),
        (signal.SIGINT, True, False),
        (signal.SIGTERM, True, False),
        (signal.SIGINT, False, True),
        (signal.SIGTERM, False, True),
    ],
    ids=[
        "ctrl-c", "sigterm", "ctrl-c-sigint-ignored-at-start", "sigterm-sigint-ignored-at-start",
        "ctrl-c-to-the-process-group", "sigterm-to-the-process-group",
    ],
)
def test_interrupt_keeps_records_and_still_reports(
    tmp_path: Path, env: dict[str, str], sig: int, ignored: bool, group: bool
) -> None:
    """Ctrl-C and SIGTERM stop the sweep with records and report, also when the process started with SIGINT
    ignored (``cmd &`` in a script: Python then installs no KeyboardInterrupt handler, and both were ignored).

    ``group``: the signal goes to the whole process group, as a terminal's Ctrl-C and GNU ``timeout`` send it. The
    built-in simulator used to be in that group and died with it, so every request in flight failed
    (``stream_truncated``) and the run exited 1; it now has its own session, keeps serving while the harness
    drains, and every in-flight request (~1 s here, within the 3 s SIGTERM drain) finishes."""
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(PROFILE % {"out": out, "step": 60})
    proc = subprocess.Popen(
        [*LOCUST, "--profile", str(prof)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignore_sigint if ignored else None,
        start_new_session=group,
    )
    try:
        deadline = time.monotonic() + 60
        seen = 0
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if out.exists() and any(out.iterdir()):
                rec = run_dir_of(out) / "records.jsonl"
                seen = (
                    sum(1 for line in rec.read_text().splitlines() if '"phase":"step"' in line) if rec.exists() else 0
                )
                if seen >= 10:
                    break
        assert seen >= 10, "the run did not reach the steps in time"
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
        stdout, _stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    run = run_dir_of(out)
    recs = records(run)
    assert len([r for r in recs if r["phase"] == "step"]) >= seen  # nothing already written was lost
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["records"] == len(recs)
    assert (run / "report.md").exists()
    if group:
        failed = [(r["step"], r["error_class"]) for r in recs if not r["ok"]]
        assert failed == [] and proc.returncode == 0, (failed, proc.returncode)
    assert str(run) in stdout


def test_unreachable_host_fails_before_any_load_with_a_clear_message(tmp_path: Path, env: dict[str, str]) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE % {"out": tmp_path / "runs", "step": 4})
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof), "--host", f"http://user:pw-secret@127.0.0.1:{port}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 2
    assert f"http://***@127.0.0.1:{port}: GET /v1/models failed: connect_error" in proc.stderr
    assert "is the server up and the URL right?" in proc.stderr
    assert "pw-secret" not in proc.stderr + proc.stdout


def test_failed_warmup_stops_the_run_and_simulator_args_reach_the_simulator(
    tmp_path: Path, env: dict[str, str]
) -> None:
    out = tmp_path / "runs"
    prof = tmp_path / "p.yaml"
    text = PROFILE % {"out": out, "step": 4}
    text = text.replace("simulator: {preset: demo, time_scale: 0.25, seed: 7}",
                        'simulator: {preset: demo, time_scale: 0.25, seed: 7, args: ["--fault-429", "1.0"]}')
    prof.write_text(text)
    proc = subprocess.run(
        [*LOCUST, "--profile", str(prof)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    run = run_dir_of(out)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "warmup_failed" and meta["simulator"]["args"] == ["--fault-429", "1.0"]
    recs = records(run)
    assert [(r["phase"], r["error_class"]) for r in recs] == [("warmup", "http_429")]
    assert "every warm-up request failed" in proc.stderr


@pytest.mark.parametrize("mode", ["master", "processes-group"])
def test_ctrl_c_in_master_worker_mode_keeps_every_finished_request(
    tmp_path: Path, env: dict[str, str], mode: str
) -> None:
    """Ctrl-C in the middle of a step, with requests of several seconds in flight, on a master with 2 workers
    (SIGINT to the master only) or on ``--processes 2`` from a terminal (SIGINT to the whole process group, the
    workers too): the workers' users finish the request in flight (up to the drain timeout), the master waits
    for their last records, then writes the report. Every request the server finished is in records.jsonl (the
    simulator counts them), the ones in flight at Ctrl-C included (Locust alone quits 0.5 s after telling the
    workers to, and a worker's own SIGINT kills its users: both lost them)."""
    from harness.sim import launch
    from tests.integration.test_prometheus import server_completions
    from tests.procs import free_port

    rpc = str(free_port())
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(
        f"""
name: ctrl-c
request: {{thinking: true}}
prompts:
  - {{id: guide, text: "Write a comprehensive guide to Redis data structures.", max_tokens: 300}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [4], duration: 120, drain_timeout: 30}}
output: {{dir: {out}}}
"""
    )
    with launch(preset="demo", time_scale=1.0, seed=7) as sim:  # requests of ~3-4 s
        common = ["--profile", str(prof), "--host", sim.url, "--no-metrics"]
        master = [*LOCUST, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]
        master += ["--expect-workers", "2", *common]
        worker = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--worker"]
        worker += ["--master-host", "127.0.0.1", "--master-port", rpc]
        cmds = [master, worker, worker]
        if mode == "processes-group":
            cmds = [[*LOCUST, "--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc]]
            cmds[0] += ["--master-port", rpc, *common]
        logs = [tmp_path / f"proc{i}.log" for i in range(len(cmds))]
        with process_groups(cmds, logs, tmp_path, env) as procs:
            deadline = time.monotonic() + 90
            seen = 0
            while time.monotonic() < deadline and seen < 6:
                time.sleep(0.5)
                rec = next(out.glob("*/records.jsonl"), None) if out.exists() else None
                seen = sum('"phase":"step"' in x for x in rec.read_text().splitlines()) if rec else 0
            assert seen >= 6, "the run did not reach the steps in time"
            t_sig = time.time()
            if mode == "processes-group":
                os.killpg(procs[0].pid, signal.SIGINT)  # a terminal's Ctrl-C: master and forked workers
            else:
                procs[0].send_signal(signal.SIGINT)
            for p in procs:
                p.wait(timeout=60)
        served = server_completions(sim)
    log_text = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)
    run = run_dir_of(out)
    recs = records(run)
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["records"] == len(recs), log_text
    ok = [r for r in recs if r["ok"]]
    print(f"{len(recs)} records ({len(ok)} ok, {seen} step records at Ctrl-C), server finished {served}")
    assert len(ok) == served, log_text  # warm-up included on both sides
    # The requests in flight at Ctrl-C finished (3-4 s requests: well after the signal) and were recorded.
    assert any(r["start_wall"] + r["e2e"] > t_sig + 0.5 for r in ok if r["phase"] == "step"), log_text
    assert all(p.returncode is not None for p in procs)
    assert (run / "report.md").exists()


def _two_sigints_in_a_step(
    tmp_path: Path, env: dict[str, str], prompt: str, max_tokens: int, settle_s: float, gap_s: float, wait_s: float
) -> tuple[int, str, float, Path]:
    """A 2-user step against the demo simulator: ``settle_s`` into it (requests in flight), SIGINT, ``gap_s``
    later SIGINT again. Returns (exit code, stderr, seconds from the second SIGINT to exit, output dir)."""
    from harness.sim import launch

    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    prof.write_text(
        f"""
name: sigints
request: {{thinking: true}}
prompts:
  - {{id: p, text: "{prompt}", max_tokens: {max_tokens}}}
warmup: {{max_tokens: 16, timeout: 60}}
single_stream: {{duration: 1}}
steps: {{concurrency: [2], duration: 120, drain_timeout: 60}}
output: {{dir: {out}}}
"""
    )
    with launch(preset="demo", time_scale=1.0, seed=3) as sim:
        proc = subprocess.Popen(
            [*LOCUST, "--profile", str(prof), "--host", sim.url, "--no-metrics"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list(out.glob("*/phases.jsonl")):
                time.sleep(0.2)
            time.sleep(settle_s)
            proc.send_signal(signal.SIGINT)
            time.sleep(gap_s)
            t = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=wait_s)
            took = time.monotonic() - t
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return proc.returncode, stderr, took, out


def test_second_ctrl_c_aborts_at_once(tmp_path: Path, env: dict[str, str]) -> None:
    """A second Ctrl-C while the first waits for in-flight requests: exit 130 at once, no report, the records
    written so far intact (run.json says "aborted", the message names the run directory; llmload report rebuilds
    the report, marked interrupted)."""
    # Requests of ~20 s: in flight at both Ctrl-Cs.
    code, stderr, took, out = _two_sigints_in_a_step(
        tmp_path, env, "Write a comprehensive guide to Redis data structures.", 2000, 4, 1, 30
    )
    assert code == 130 and took < 5, (code, took, stderr[-2000:])
    assert "second Ctrl-C: aborting now" in stderr
    run = run_dir_of(out)
    assert f"records kept: llmload report {run}" in stderr
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "aborted" and meta["end_wall"] > meta["start_wall"]
    assert not (run / "report.md").exists()
    recs = records(run)  # whatever finished before is there, every line whole
    assert recs and all(r["phase"] in ("warmup", "single", "step") for r in recs)
    from harness.report.build import build_report

    rep = build_report(run)
    assert rep.status == "aborted" and rep.interrupted


def test_a_ctrl_c_delivered_twice_is_one_ctrl_c(tmp_path: Path, env: dict[str, str]) -> None:
    """GNU timeout forwards the SIGINT a terminal's Ctrl-C also delivers to the whole process group: two SIGINTs
    0.05 s apart are one Ctrl-C (drain, report, status interrupted), not an abort."""
    code, stderr, _, out = _two_sigints_in_a_step(tmp_path, env, "Say hello.", 300, 3, 0.05, 90)
    assert code != 130 and "second Ctrl-C" not in stderr, stderr[-2000:]
    assert "Ctrl-C: stopping" in stderr
    run = run_dir_of(out)
    assert json.loads((run / "run.json").read_text())["status"] == "interrupted"
    assert (run / "report.md").exists()


def test_ctrl_c_mid_step_ends_the_last_window_when_the_stop_begins(tmp_path: Path, env: dict[str, str]) -> None:
    """A Ctrl-C mid-step writes ``load_end`` at once, before the drain: the last step's window ends there (not at
    ``run_end``, after the drain, which counted the drain's falling concurrency: -8.6 % at C=8), so its aggregate
    tok/s matches that of the same concurrency held uninterrupted (the step before it)."""
    prof = tmp_path / "p.yaml"
    out = tmp_path / "runs"
    # two steps of C=4: the first runs its 8 s, the second is stopped about 4 s in; max_tokens 400 at time_scale
    # 0.25 is ~1 s a request, so the drain is ~1 s: a window that ran to run_end would be ~10 % low.
    prof.write_text((PROFILE % {"out": out, "step": 8}).replace("concurrency: [2, 4]", "concurrency: [4, 4]"))
    proc = subprocess.Popen(
        [*LOCUST, "--profile", str(prof)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        started = None
        while time.monotonic() < deadline and started is None:
            time.sleep(0.2)
            if out.exists() and any(out.iterdir()) and (run_dir_of(out) / "phases.jsonl").exists():
                evs = [json.loads(x) for x in (run_dir_of(out) / "phases.jsonl").read_text().splitlines() if x]
                started = next((e["wall"] for e in evs if e.get("step") == 2), None)
        assert started is not None, "the run did not reach step 2 in time"
        time.sleep(max(0.0, started + 4.0 - time.time()))
        t_sig = time.time()
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    run = run_dir_of(out)
    events = [json.loads(x) for x in (run / "phases.jsonl").read_text().splitlines() if x]
    kinds = [e["event"] for e in events]
    assert kinds.count("load_end") == 1 and kinds[-2:] == ["load_end", "run_end"], kinds
    load_end, run_end = events[-2]["wall"], events[-1]["wall"]
    assert t_sig - 0.1 <= load_end < t_sig + 0.5 and load_end < run_end  # at the signal
    drained = [r for r in records(run) if r["start_wall"] < load_end < r["start_wall"] + r["e2e"]]
    assert drained and all(r["ok"] for r in drained)  # ... before the drain: requests in flight then finished
    meta = json.loads((run / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["stop_cause"] == "sigint"
    rep = json.loads((run / "report.json").read_text())
    first, last = rep["steps"][-2], rep["steps"][-1]
    assert (first["concurrency"], last["concurrency"]) == (4, 4)
    assert first["end_source"] == "next_phase" and last["end_source"] == "load_end"
    assert last["output_tps"] == pytest.approx(first["output_tps"], rel=0.05), (first["output_tps"],
                                                                                  last["output_tps"])
