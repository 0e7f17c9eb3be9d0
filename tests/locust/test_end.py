"""harness.locust.end: the one end of a run (headless and web UI): status, run.json, report, exit code."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.config import load_profile
from harness.locust import end
from harness.records import RunDir
from harness.result import RequestResult
from harness.runtime import FixedLoad, Run, RunContext

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, web: bool = False, fixed: FixedLoad | None = None) -> tuple[Run, RunContext]:
    """A single-process run begun with an open run directory (no records yet)."""
    profile = load_profile(ROOT / "profiles" / "demo.yaml")
    ctx = RunContext(profile=profile, base_url="http://127.0.0.1:1/v1", model="m", role="local", fixed=fixed)
    ctx.run_dir = RunDir.create(tmp_path, profile.name, {})
    ctx.run_id = ctx.run_dir.path.name
    run = Run(web=web)
    run.begin(ctx)
    return run, ctx


def _env(warmup_error: str | None = None, exit_code_on_error: int = 1) -> Any:
    return SimpleNamespace(runner=None, stop_timeout=30.0, process_exit_code=None,
                           shape_class=SimpleNamespace(warmup_error=warmup_error),
                           parsed_options=SimpleNamespace(exit_code_on_error=exit_code_on_error))  # fmt: skip


@pytest.fixture
def reports(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, bool]]:
    """The reports end_run asks for, (run directory, in a child process), each answered with a summary."""
    asked: list[tuple[Path, bool]] = []

    def write(run_dir: Path, child: bool) -> str:
        assert json.loads((run_dir / "run.json").read_text())["status"] != "running"  # closed first
        asked.append((run_dir, child))
        return f"summary of {run_dir.name}"

    monkeypatch.setattr(end, "_write_report", write)
    return asked


def _meta(ctx: RunContext) -> dict[str, Any]:
    assert ctx.run_dir is not None
    meta: dict[str, Any] = json.loads((ctx.run_dir.path / "run.json").read_text())
    return meta


def _phases(ctx: RunContext) -> list[str]:
    assert ctx.run_dir is not None
    return [json.loads(x)["event"] for x in (ctx.run_dir.path / "phases.jsonl").read_text().splitlines() if x]


def test_a_finished_headless_run_is_closed_reported_in_process_and_listed(tmp_path: Path,
                                                                         reports: list[tuple[Path, bool]]) -> None:
    run, ctx = _run(tmp_path)
    ctx.finished = True
    ctx.end_load()
    env = _env()
    end.begin_stop(run, env)
    assert run.state == "stopping" and run.progress is not None and run.progress.stage == "draining"
    end.end_run(run, env)
    assert ctx.run_dir is not None and ctx.run_dir.closed and _meta(ctx)["status"] == "finished"
    assert reports == [(ctx.run_dir.path, False)] and run.report_summary == f"summary of {ctx.run_id}"
    assert run.state == "finished" and run.ended == [ctx.run_dir.path] and run.progress is None
    assert _phases(ctx).count("load_end") == 1
    end.end_run(run, env)  # a second end (quitting after test_stop) does nothing
    assert len(reports) == 1
    end.stop_for_quit(run, env)
    end.set_exit_code(run, env)
    assert env.process_exit_code is None and len(reports) == 1


def test_a_web_run_is_reported_by_a_child_process(tmp_path: Path, reports: list[tuple[Path, bool]]) -> None:
    run, ctx = _run(tmp_path, web=True)
    end.end_run(run, _env())
    assert reports == [(ctx.run_dir.path, True)] and _meta(ctx)["status"] == "interrupted"  # type: ignore[union-attr]
    assert run.state == "interrupted"


def test_status_of_each_end() -> None:
    run = Run()
    ctx = SimpleNamespace(finished=False, fixed=None)
    assert end.run_status(run, ctx, None) == "interrupted"  # type: ignore[arg-type]
    assert end.run_status(run, ctx, "every warm-up request failed") == "warmup_failed"  # type: ignore[arg-type]
    ctx.finished = True
    assert end.run_status(run, ctx, None) == "finished"  # type: ignore[arg-type]
    open_ended = SimpleNamespace(finished=False, fixed=FixedLoad(4, 4.0, None), web=True)
    assert end.run_status(run, open_ended, None) == "finished"  # type: ignore[arg-type]  # fixed, ended by Stop
    run.signals.interrupted = True
    assert end.run_status(run, open_ended, None) == "interrupted"  # type: ignore[arg-type]  # ... by Ctrl-C
    headless = SimpleNamespace(finished=False, fixed=FixedLoad(4, 4.0, None), web=False)  # --mode fixed, no -t
    assert end.run_status(run, headless, None) == "finished"  # type: ignore[arg-type]  # Ctrl-C: its only end
    timed = SimpleNamespace(finished=False, fixed=FixedLoad(4, 4.0, 60.0))
    run.signals.interrupted = False
    assert end.run_status(run, timed, None) == "interrupted"  # type: ignore[arg-type]


def test_a_failed_warm_up_exits_3_headless_and_writes_no_load_end(tmp_path: Path,
                                                                   reports: list[tuple[Path, bool]]) -> None:
    for web, code in ((False, 3), (True, None)):
        run, ctx = _run(tmp_path / str(web), web=web)
        env = _env("every warm-up request failed")
        end.end_run(run, env)
        end.set_exit_code(run, env)
        assert _meta(ctx)["status"] == "warmup_failed" and "load_end" not in _phases(ctx)
        assert env.process_exit_code == code


def test_a_failed_request_sets_locusts_exit_code_on_error_unless_set(tmp_path: Path,
                                                                      reports: list[tuple[Path, bool]]) -> None:
    run, ctx = _run(tmp_path)
    ctx.record(RequestResult(prompt_id="p", phase="step", step=1, ok=False, error_class="http_5xx", e2e=0.1))
    env = _env(exit_code_on_error=7)
    end.end_run(run, env)
    assert run.any_failed
    end.set_exit_code(run, env)
    assert env.process_exit_code == 7
    env.process_exit_code = 5  # something set it already (Locust's rule): kept
    end.set_exit_code(run, env)
    assert env.process_exit_code == 5


def test_cut_off_requests_are_counted_and_those_of_lost_workers_not_logged_twice(
        tmp_path: Path, reports: list[tuple[Path, bool]], caplog: pytest.LogCaptureFixture) -> None:
    run, ctx = _run(tmp_path)
    ctx.cut_off = 5
    assert ctx.run_dir is not None
    ctx.run_dir.meta["workers_lost"] = [{"id": "w1", "in_flight": 2}, {"id": "w2", "in_flight": 9, "back_wall": 1.0}]
    end.end_run(run, _env())
    assert _meta(ctx)["cut_off"] == 5
    assert "3 request(s) cut off by the stop timeout" in caplog.text
