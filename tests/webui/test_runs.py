"""The adapter onto the process's runs and workers (harness.webui.runs)."""

from __future__ import annotations

from types import SimpleNamespace

from harness import runtime
from harness.locust import webrun
from harness.webui.runs import RunDirs, stopping, workers


def _node(wid: str, state: str, users: int = 2) -> SimpleNamespace:
    return SimpleNamespace(id=wid, state=state, user_count=users, cpu_usage=12.5)


def test_workers_flag_missing_and_gone() -> None:
    clients = {"a": _node("a", "running"), "b": _node("b", "missing", 0)}
    runner = SimpleNamespace(clients=clients)
    seen: set[str] = set()
    first = {w.id: w for w in workers(runner, seen)}
    assert first["a"].state == "running" and not first["a"].dead and first["a"].users == 2
    assert first["b"].dead and first["b"].state == "missing"
    del clients["b"]  # Locust removed it
    second = {w.id: w for w in workers(runner, seen)}
    assert second["b"].state == "gone" and second["b"].dead and not second["a"].dead


def test_single_process_has_no_workers() -> None:
    assert workers(SimpleNamespace(), set()) == []


def test_rundirs_all_current_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cur, old = tmp_path / "b", tmp_path / "a"
    assert RunDirs(cur, (old,), "running").all() == [cur, old]
    assert RunDirs(None, (old,), "finished").all() == [old]


def test_stopping_reports_the_stop_in_progress(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert stopping(SimpleNamespace(user_count=3)) is None  # no stop in progress
    p = webrun.StopProgress("r1", "draining", 10.0, 9.5, 30.0)
    monkeypatch.setattr(runtime.current(), "progress", p)
    assert stopping(SimpleNamespace(user_count=2)) == {
        "run_id": "r1", "stage": "draining", "since_wall": 10.0, "stop_wall": 9.5, "drain_timeout_s": 30.0,
        "users_left": 2}
    assert stopping(SimpleNamespace())["users_left"] is None  # type: ignore[index]
