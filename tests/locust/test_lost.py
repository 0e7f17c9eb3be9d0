"""harness.locust.lost: the master records a worker lost while the load runs (phases.jsonl and run.json)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.config import Profile
from harness.locust.lost import WorkerWatch
from harness.records import RunDir
from harness.runtime import PhaseState, Run, RunContext


class Clients(dict[str, Any]):
    @property
    def all(self) -> list[Any]:
        return list(self.values())


def node(cid: str, users: int, state: str = "running") -> SimpleNamespace:
    return SimpleNamespace(id=cid, user_count=users, state=state)


def setup(tmp_path: Path) -> tuple[Run, RunContext, SimpleNamespace]:
    profile = Profile.model_validate({"name": "t", "prompts": [{"id": "p", "text": "x"}]})
    ctx = RunContext(profile=profile, base_url="http://127.0.0.1:1/v1", model="m", role="master")
    ctx.run_dir = RunDir.create(tmp_path, "t", {})
    ctx.run_id = ctx.run_dir.path.name
    ctx.state = PhaseState("step", 1, 4)
    run = Run()
    run.ctx = ctx
    return run, ctx, SimpleNamespace(clients=Clients(a=node("a", 2), b=node("b", 2), c=node("c", 1)))


def events(ctx: RunContext) -> list[dict[str, Any]]:
    assert ctx.run_dir is not None
    return [json.loads(x) for x in (ctx.run_dir.path / "phases.jsonl").read_text().splitlines()]


def test_a_missing_worker_and_one_that_quit_are_recorded_once(tmp_path: Path) -> None:
    run, ctx, runner = setup(tmp_path)
    watch = WorkerWatch()
    watch.on_heartbeat(client_id="a", timestamp=1000.0)
    run.workers.in_flight.update(a=2, b=1)
    assert watch.poll(run, runner) == []
    runner.clients["a"].state = "missing"  # Locust also empties its user count then
    runner.clients["a"].user_count = 0
    del runner.clients["b"]  # it quit
    runner.clients["c"].state = "missing"  # never reported: its in-flight count is unknown
    out = watch.poll(run, runner)
    assert watch.poll(run, runner) == []  # once each
    assert [(e["worker"], e["state"], e["users"], e["in_flight"]) for e in out] == [
        ("a", "missing", 2, 2), ("b", "gone", 2, 0), ("c", "missing", 1, None)]
    assert out[0]["since_wall"] == 1000.0 and out[0]["wall"] > 1000.0
    assert events(ctx) == out
    assert ctx.cut_off == 2  # a's 2 requests in flight; b let its own finish
    assert ctx.run_dir is not None
    meta = json.loads((ctx.run_dir.path / "run.json").read_text())
    assert meta["cut_off"] == 2 and meta["cut_off_unknown"] == ["c"] and meta["workers"] == ["a", "b", "c"]
    assert [w["worker"] for w in meta["workers_lost"]] == ["a", "b", "c"]


def test_nothing_is_recorded_after_the_load_ended(tmp_path: Path) -> None:
    run, ctx, runner = setup(tmp_path)
    watch = WorkerWatch()
    watch.poll(run, runner)
    ctx.end_load("stop")
    runner.clients.clear()  # the workers quit at the end of the run
    assert watch.poll(run, runner) == []
    assert [e["event"] for e in events(ctx)] == ["load_end"]


def test_a_missing_worker_that_answers_again_has_its_loss_withdrawn(tmp_path: Path) -> None:
    """Locust's "self-healed": a busy worker's heartbeats were late; its users kept running."""
    run, ctx, runner = setup(tmp_path)
    watch = WorkerWatch()
    run.workers.in_flight.update(a=2)
    watch.poll(run, runner)
    runner.clients["a"].state = "missing"
    assert [e["event"] for e in watch.poll(run, runner)] == ["worker_lost"] and ctx.cut_off == 2
    runner.clients["a"].state = "running"
    assert [e["event"] for e in watch.poll(run, runner)] == ["worker_back"]
    assert ctx.cut_off == 0
    assert ctx.run_dir is not None
    meta = json.loads((ctx.run_dir.path / "run.json").read_text())
    assert "cut_off" not in meta and meta["workers_lost"][0]["back_wall"] > 0


def test_cut_off_by_the_stop_timeout_leaves_out_the_lost_workers_requests(tmp_path: Path) -> None:
    """webrun logs ``cut_off`` minus the lost workers' in-flight requests as "cut off by the stop timeout"."""
    from harness.locust.webrun import cut_off_by_timeout

    run, ctx, runner = setup(tmp_path)
    watch = WorkerWatch()
    run.workers.in_flight.update(a=2, b=3)
    watch.poll(run, runner)
    runner.clients["a"].state = "missing"
    watch.poll(run, runner)
    assert ctx.run_dir is not None and ctx.cut_off == 2
    meta = ctx.run_dir.meta
    assert cut_off_by_timeout(ctx.cut_off, meta) == 0  # all lost with worker a
    assert cut_off_by_timeout(ctx.cut_off + 4, meta) == 4  # 4 more cut off at the stop
    runner.clients["b"].state = "missing"
    watch.poll(run, runner)
    assert ctx.cut_off == 5 and cut_off_by_timeout(ctx.cut_off + 1, meta) == 1
    runner.clients["a"].state = "running"  # a answers again: its 2 leave cut_off and the lost count
    watch.poll(run, runner)
    assert ctx.cut_off == 3 and cut_off_by_timeout(ctx.cut_off, meta) == 0
    assert cut_off_by_timeout(0, {}) == 0 and cut_off_by_timeout(7, {}) == 7
