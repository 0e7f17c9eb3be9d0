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
