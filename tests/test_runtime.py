"""harness.runtime: the master's setup of a run, the process's Run holding the context, the lag watch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import harness.runtime as runtime


def test_model_discovery_uses_the_profiles_tls_and_header_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET /v1/models goes through a client built like the users' (verify_tls: false was ignored there, so a
    self-signed server failed discovery while the chat requests would have worked)."""
    seen: list[dict[str, Any]] = []

    class FakeClient:
        def __init__(self, base_url: str, **kw: Any) -> None:
            seen.append({"base_url": base_url, **kw})

        def list_models(self) -> list[str]:
            return ["m1"]

    monkeypatch.setattr(runtime, "ChatClient", FakeClient)
    prof = tmp_path / "p.yaml"
    prof.write_text(
        """
name: tls
target: {base_url: "https://127.0.0.1:8443", verify_tls: false, headers: {X-Team: bench}}
prompts: [{id: a, text: hi}]
output: {dir: "%s"}
"""
        % (tmp_path / "runs")
    )
    ctx = runtime.setup_master(str(prof), None, "local")
    try:
        assert ctx.model == "m1"
        assert seen and seen[0]["verify_tls"] is False and seen[0]["headers"] == {"X-Team": "bench"}
    finally:
        assert ctx.run_dir is not None
        ctx.run_dir.close()



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
        ctx.record({**late, "read_lag_max": 0.001})
        assert "FALLING BEHIND" not in caplog.text
        ctx.record(late)
        ctx.run_dir.write_record(late)  # warned once per step
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
