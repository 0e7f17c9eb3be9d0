"""harness.runtime: the process's Run holding the context, and the lag watch listening to its run directory."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.runtime as runtime
from harness.result import RequestResult


def test_the_lag_watch_listens_to_the_run_directory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Records written to the held context's run directory (a local user's or a worker's batch on the master)
    go through the client lag watch: one warning for the starved step."""
    from harness.config import PROFILES_DIR, load_profile
    from harness.records import RunDir

    ctx = runtime.RunContext(load_profile(PROFILES_DIR / "demo.yaml"), "http://127.0.0.1:1/v1", "m", "local")
    ctx.run_dir = RunDir.create(tmp_path, "lag", {})
    run = runtime.Run()
    run.hold(ctx)
    assert run.ctx is ctx
    late = {"phase": "step", "step": 2, "concurrency": 16, "read_lag_max": 1.5}
    with caplog.at_level("WARNING", logger="llmload"):
        ctx.record(RequestResult.from_record({**late, "read_lag_max": 0.001}))
        assert "FALLING BEHIND" not in caplog.text
        ctx.record(RequestResult.from_record(late))
        ctx.run_dir.write_record(late)  # a worker's record dict; warned once per step
    ctx.run_dir.close()
    assert caplog.text.count("FALLING BEHIND at C=16") == 1


def test_context_is_held_by_the_process_run() -> None:
    run = runtime.current()
    assert runtime.current() is run
    saved = run.ctx
    try:
        run.ctx = None
        with pytest.raises(RuntimeError, match="not set up yet"):
            runtime.context()
    finally:
        run.ctx = saved


def test_runs_snapshot_follows_the_runs(tmp_path: Path) -> None:
    """runs(): idle -> running (current directory, id, mode, start) -> ended (listed newest first, state of the
    last one) -> the next run; the master's workers with the dead ones flagged."""
    from types import SimpleNamespace

    from harness.config import PROFILES_DIR, load_profile
    from harness.records import RunDir

    run = runtime.Run()
    r = runtime.runs(run)
    assert (r.state, r.current, r.finished, r.last, r.run_id, r.workers) == ("idle", None, (), None, None, ())
    profile = load_profile(PROFILES_DIR / "demo.yaml")
    dirs = []
    for i, status in enumerate(["interrupted", "finished"]):
        ctx = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "local", mode="fixed" if i else "sweep")
        ctx.run_dir = RunDir.create(tmp_path, f"r{i}", {})
        ctx.run_id = ctx.run_dir.path.name
        run.begin(ctx)
        r = runtime.runs(run)
        assert r.state == "running" and r.current == ctx.run_dir.path and r.last == r.current
        assert r.run_id == ctx.run_id and r.mode == ctx.mode and r.started_wall is not None
        assert r.finished == tuple(reversed(dirs))
        run.state = "stopping"
        assert runtime.runs(run).current == ctx.run_dir.path
        ctx.run_dir.close(status)
        run.ended_run(ctx.run_dir.path, status)
        dirs.append(ctx.run_dir.path)
        r = runtime.runs(run)
        assert r.state == status and r.current is None and r.run_id is None and r.started_wall is None
        assert r.finished == tuple(reversed(dirs)) and r.last == ctx.run_dir.path
    assert runtime.RUN_STATES == ("idle", "running", "stopping", "finished", "interrupted")

    node = SimpleNamespace
    run.runner = SimpleNamespace(clients=SimpleNamespace(all=[node(id="w1", state="running"),
                                                              node(id="w2", state="missing")]))  # fmt: skip
    run.workers.seen.update({"w1": 10.0, "w2": 9.0, "w0": 5.0})  # w0 quit
    run.workers.in_flight.update({"w1": 3})
    ws = runtime.runs(run).workers
    assert [(w.id, w.state, w.in_flight, w.last_report_wall, w.dead) for w in ws] == [
        ("w0", "gone", 0, 5.0, True), ("w1", "running", 3, 10.0, False), ("w2", "missing", 0, 9.0, True)]
    assert [w.id for w in runtime.runs(run).dead_workers] == ["w0", "w2"]


def test_the_run_secrets_are_known_in_the_context_and_workers_get_the_headers_to_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RunContext.secrets gathers every secret value (API key, headers_env, secret headers, base-URL query keys);
    the phase message keeps secret header values (a worker must send them), unlike run.json's public form."""
    from harness.config import PROFILES_DIR, Profile, load_profile

    monkeypatch.setenv("LLMLOAD_RT_AZ", "azk-runtime-1234")
    monkeypatch.setenv("LLMLOAD_RT_KEY", "sk-runtime-5678")
    data = load_profile(PROFILES_DIR / "demo.yaml").model_dump(mode="json", by_alias=True)
    data["target"].update(api_key_env="LLMLOAD_RT_KEY", headers={"x-api-key": "hdr-runtime-9"},
                          headers_env={"api-key": "LLMLOAD_RT_AZ"})
    ctx = runtime.RunContext(Profile.model_validate(data), "http://127.0.0.1:1/v1?token=tok-runtime-0", "m", "local")
    assert set(ctx.secrets) == {"azk-runtime-1234", "sk-runtime-5678", "hdr-runtime-9", "tok-runtime-0"}
    sent = Profile.model_validate(ctx.phase_message()["profile"])
    assert sent.target.all_headers() == {"x-api-key": "hdr-runtime-9", "api-key": "azk-runtime-1234"}
    assert ctx.profile.public_dict()["target"]["headers"] == {"x-api-key": "[redacted]"}


def test_cpu_samples_are_written_locally_and_sent_to_the_master_by_a_worker(tmp_path: Path) -> None:
    """A single process writes its client_cpu samples to phases.jsonl; a worker queues them and sends them with
    MSG_CPU after its records (the master's handler writes them); a master takes none."""
    from types import SimpleNamespace

    from harness.config import PROFILES_DIR, load_profile
    from harness.locust.listeners import _on_cpu
    from harness.records import RunDir, read_phases
    from harness.selfcert import MSG_CPU

    profile = load_profile(PROFILES_DIR / "demo.yaml")
    local = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "local")
    local.run_dir = RunDir.create(tmp_path / "local", "cpu", {})
    local.sample_cpu()
    local.end_load()  # the load's end takes one too
    local.run_dir.close()
    samples = [e for e in read_phases(local.run_dir.path) if e["event"] == "client_cpu"]
    assert [e["process"] for e in samples] == ["local", "local"] and samples[0]["cpu_s"] <= samples[1]["cpu_s"]

    sent: list[tuple[str, object]] = []
    worker = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "worker", worker_id="w1")
    worker._runner = SimpleNamespace(send_message=lambda kind, data: sent.append((kind, data)))
    worker.record(RequestResult.from_record({"phase": "step", "step": 1, "user": "w1:1"}))
    worker.sample_cpu()
    worker.flush()
    assert [k for k, _ in sent] == [runtime.MSG_RECORDS, MSG_CPU]
    (sample,) = sent[1][1]  # type: ignore[misc]
    assert sample["process"] == "w1" and sample["event"] == "client_cpu"

    master = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "master")
    master.run_dir = RunDir.create(tmp_path / "master", "cpu", {})
    master.sample_cpu()  # runs no users: no sample of its own
    run = runtime.Run()
    run.hold(master)
    _on_cpu(SimpleNamespace(llmload=run), SimpleNamespace(data=[sample, {"event": "other"}]))
    master.run_dir.close()
    got = [e for e in read_phases(master.run_dir.path) if e["event"] == "client_cpu"]
    assert got == [sample]
