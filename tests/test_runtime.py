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
