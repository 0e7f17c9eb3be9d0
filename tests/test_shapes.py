"""The sweep shape without Locust: ``plan_stages`` from a profile, then ``ReasoningSweepShape.tick`` driven by a
fake clock and a fake runner through warm-up, single stream, the steps and the drain."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness import shapes
from harness.client import Timeouts
from harness.config import Profile, load_profile
from harness.result import RequestIdentity, RequestResult
from harness.runtime import MSG_PHASE, PhaseState, RunContext, current
from harness.shapes import ReasoningSweepShape, Stage, plan_stages

PROFILES = Path(__file__).resolve().parent.parent / "profiles"
#: Perf-counter origin of the fake clock (any value: the shape only uses differences).
T0 = 1000.0
WALL0 = 1_700_000_000.0


class FakeClock:
    """Stands in for the ``time`` module inside :mod:`harness.shapes`; moves only when told."""

    def __init__(self) -> None:
        self.now = T0

    def perf_counter(self) -> float:
        return self.now

    def time(self) -> float:
        return WALL0 + (self.now - T0)

    def at(self, t: float) -> None:
        """Move to ``T0 + t`` seconds (never backwards)."""
        assert T0 + t >= self.now
        self.now = T0 + t


class FakeRunner:
    """The part of a Locust runner the shape touches: stop timeout, live user count, custom messages."""

    def __init__(self, stop_timeout: float | None) -> None:
        self.environment = SimpleNamespace(stop_timeout=stop_timeout, llmload=current())
        self.user_count = 0
        self.messages: list[tuple[str, dict[str, Any]]] = []

    def send_message(self, msg_type: str, data: dict[str, Any]) -> None:
        self.messages.append((msg_type, data))


@dataclass
class FakeRunDir:
    """Collects what the shape writes to ``phases.jsonl`` and ``records.jsonl``: the phase events in ``phases``,
    the process's CPU samples (``client_cpu``, harness.selfcert) apart in ``cpu``."""

    phases: list[dict[str, Any]] = field(default_factory=list)
    records: list[RequestResult] = field(default_factory=list)
    cpu: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False

    def write_phase(self, event: dict[str, Any]) -> None:
        (self.cpu if event.get("event") == "client_cpu" else self.phases).append(event)

    def write_record(self, record: RequestResult) -> None:
        self.records.append(record)


def make_profile(**over: Any) -> Profile:
    """A small valid profile; ``over`` replaces top-level sections. Warm-up off unless given."""
    data: dict[str, Any] = {
        "name": "shape-test",
        "prompts": [{"id": "p", "text": "hi"}],
        "warmup": {"enabled": False},
        "single_stream": {"duration": 5},
        "steps": {"concurrency": [2, 4], "duration": 10, "drain_timeout": 30},
    }
    data.update(over)
    return Profile.model_validate(data)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    c = FakeClock()
    monkeypatch.setattr(shapes, "time", c)
    return c


@pytest.fixture(autouse=True)
def _no_context_left() -> Iterator[None]:
    """The context a test installs with :func:`install` is removed after it."""
    yield
    current().ctx = None


def install(profile: Profile) -> tuple[RunContext, FakeRunDir]:
    """Install a local-run context for ``profile`` writing to a :class:`FakeRunDir`."""
    run_dir = FakeRunDir()
    ctx = RunContext(profile, "http://127.0.0.1:9/v1", "m", "local", run_dir=run_dir)  # type: ignore[arg-type]
    current().ctx = ctx
    return ctx, run_dir


def new_shape(runner: FakeRunner | None) -> ReasoningSweepShape:
    shape = ReasoningSweepShape()
    shape.runner = runner  # type: ignore[assignment]
    return shape


# -- plan_stages ---------------------------------------------------------------------------------------------


def test_plan_stages_of_the_demo_profile() -> None:
    ctx = SimpleNamespace(profile=load_profile(PROFILES / "demo.yaml"))
    assert plan_stages(ctx) == [  # type: ignore[arg-type]
        Stage("single", 0, 1, 15.0),
        Stage("step", 1, 8, 30.0),
        Stage("step", 2, 16, 30.0),
        Stage("step", 3, 32, 30.0),
        Stage("step", 4, 64, 30.0),
    ]


def test_plan_stages_without_a_single_stream_phase() -> None:
    profile = make_profile(single_stream={"duration": 0}, steps={"concurrency": [3], "duration": 7.5})
    ctx = SimpleNamespace(profile=profile)
    assert plan_stages(ctx) == [Stage("step", 1, 3, 7.5)]  # type: ignore[arg-type]


def test_plan_stages_single_stream_only() -> None:
    ctx = SimpleNamespace(profile=make_profile(single_stream={"duration": 12}, steps={"concurrency": []}))
    assert plan_stages(ctx) == [Stage("single", 0, 1, 12.0)]  # type: ignore[arg-type]


def test_plan_stages_uses_the_profiles_default_steps() -> None:
    p = Profile.model_validate({"name": "defaults", "prompts": [{"id": "p", "text": "hi"}]})
    stages = plan_stages(SimpleNamespace(profile=p))  # type: ignore[arg-type]
    assert [(s.phase, s.step, s.users, s.duration) for s in stages] == [
        ("single", 0, 1, 120.0), ("step", 1, 8, 600.0), ("step", 2, 16, 600.0), ("step", 3, 32, 600.0),
        ("step", 4, 64, 600.0),
    ]  # fmt: skip


# -- tick: the stage sequence --------------------------------------------------------------------------------


def test_tick_walks_the_stages_and_announces_each_phase_once(clock: FakeClock) -> None:
    ctx, run_dir = install(make_profile())
    runner = FakeRunner(stop_timeout=30.0)
    shape = new_shape(runner)

    expected = [  # (time since start s, (users, spawn rate), phase state)
        (0.0, (1, 1.0), PhaseState("single", 0, 1)),
        (4.99, (1, 1.0), PhaseState("single", 0, 1)),
        (5.0, (2, 2.0), PhaseState("step", 1, 2)),
        (14.9, (2, 2.0), PhaseState("step", 1, 2)),
        (15.0, (4, 4.0), PhaseState("step", 2, 4)),
        (24.999, (4, 4.0), PhaseState("step", 2, 4)),
    ]
    for t, ret, state in expected:
        clock.at(t)
        assert shape.tick() == ret, t
        assert ctx.state == state, t
    assert not ctx.finished

    starts = [e for e in run_dir.phases if e["event"] == "phase_start"]
    assert [(e["phase"], e["step"], e["concurrency"], e["planned_duration"]) for e in starts] == [
        ("single", 0, 1, 5.0), ("step", 1, 2, 10.0), ("step", 2, 4, 10.0),
    ]  # fmt: skip
    assert [e["wall"] for e in starts] == [WALL0, WALL0 + 5.0, WALL0 + 15.0]
    # one llmload_phase message per phase start, carrying the phase the workers' users are about to start in
    assert [m[0] for m in runner.messages] == [MSG_PHASE] * 3
    assert [(m[1]["phase"], m[1]["step"], m[1]["concurrency"]) for m in runner.messages] == [
        ("single", 0, 1), ("step", 1, 2), ("step", 2, 4),
    ]  # fmt: skip
    assert all(m[1]["model"] == "m" and m[1]["base_url"] == "http://127.0.0.1:9/v1" for m in runner.messages)
    assert run_dir.records == []  # no warm-up


def test_stages_are_picked_by_elapsed_time_even_when_ticks_skip_a_stage(clock: FakeClock) -> None:
    """A late tick (a busy master) lands in the stage its time belongs to; a skipped stage is never announced."""
    _, run_dir = install(make_profile())
    shape = new_shape(FakeRunner(stop_timeout=30.0))
    assert shape.tick() == (1, 1.0)
    clock.at(16.0)
    assert shape.tick() == (4, 4.0)
    assert [(e["phase"], e["step"]) for e in run_dir.phases] == [("single", 0), ("step", 2)]


# -- tick: load end and drain --------------------------------------------------------------------------------


def _run_to_load_end(clock: FakeClock, shape: ReasoningSweepShape, runner: FakeRunner) -> None:
    """Tick through the profile of :func:`make_profile` (ends at +25 s) with the last step's 4 users running."""
    for t in (0.0, 5.0, 15.0):
        clock.at(t)
        shape.tick()
    runner.user_count = 4


def test_load_end_asks_for_zero_users_and_is_written_once(clock: FakeClock) -> None:
    ctx, run_dir = install(make_profile())
    runner = FakeRunner(stop_timeout=30.0)
    shape = new_shape(runner)
    _run_to_load_end(clock, shape, runner)

    clock.at(25.0)
    assert shape.tick() == (0, 4.0)  # 0 users, stopped at the last step's rate
    assert ctx.finished
    assert run_dir.phases[-1] == {"event": "load_end", "wall": WALL0 + 25.0}
    clock.at(26.0)
    assert shape.tick() == (0, 4.0)
    assert [e["event"] for e in run_dir.phases].count("load_end") == 1
    # a CPU sample after each phase start and after the load's end (harness.selfcert)
    assert len(run_dir.cpu) == len(run_dir.phases) and all(e["process"] == "local" for e in run_dir.cpu)
    assert len(runner.messages) == 3  # the drain announces no phase


def test_drain_ends_a_settle_second_after_the_last_user_is_gone(clock: FakeClock) -> None:
    install(make_profile())
    runner = FakeRunner(stop_timeout=30.0)
    shape = new_shape(runner)
    _run_to_load_end(clock, shape, runner)
    clock.at(25.0)
    assert shape.tick() == (0, 4.0)

    clock.at(30.0)
    runner.user_count = 0
    assert shape.tick() == (0, 4.0)  # idle from now: records still arriving
    clock.at(30.0 + shapes._SETTLE_S / 2)
    assert shape.tick() == (0, 4.0)
    clock.at(30.0 + shapes._SETTLE_S)
    assert shape.tick() is None  # every user done and settled: stop the test


def test_drain_idle_time_restarts_when_a_user_reappears(clock: FakeClock) -> None:
    install(make_profile())
    runner = FakeRunner(stop_timeout=30.0)
    shape = new_shape(runner)
    _run_to_load_end(clock, shape, runner)
    clock.at(25.0)
    shape.tick()

    runner.user_count = 0
    clock.at(26.0)
    assert shape.tick() == (0, 4.0)
    runner.user_count = 1  # e.g. a worker's user count caught up late
    clock.at(26.8)
    assert shape.tick() == (0, 4.0)
    runner.user_count = 0
    clock.at(27.2)  # 1.2 s after the first idle tick, but idle again only since now
    assert shape.tick() == (0, 4.0)
    clock.at(27.2 + shapes._SETTLE_S)
    assert shape.tick() is None


@pytest.mark.parametrize(("stop_timeout", "wait"), [(30.0, 30.0), (None, 0.0), (0.0, 0.0)])
def test_drain_gives_up_after_the_stop_timeout_and_its_margin(
    stop_timeout: float | None, wait: float, clock: FakeClock
) -> None:
    install(make_profile())
    runner = FakeRunner(stop_timeout=stop_timeout)
    shape = new_shape(runner)
    _run_to_load_end(clock, shape, runner)
    clock.at(25.0)
    assert shape.tick() == (0, 4.0)

    deadline = 25.0 + wait + shapes._DRAIN_MARGIN_S
    clock.at(deadline - 0.5)
    assert shape.tick() == (0, 4.0)  # users still in flight: keep draining
    clock.at(deadline)
    assert shape.tick() == (0, 4.0)
    clock.at(deadline + 0.01)
    assert shape.tick() is None  # a user stuck past the deadline: stop anyway


def test_without_a_runner_the_test_stops_at_load_end(clock: FakeClock) -> None:
    ctx, run_dir = install(make_profile())
    shape = new_shape(None)
    assert shape.tick() == (1, 1.0)
    clock.at(25.0)
    assert shape.tick() is None
    assert ctx.finished and run_dir.phases[-1]["event"] == "load_end"


def test_drain_rate_is_at_least_one_user_per_second(clock: FakeClock) -> None:
    """A single-stream-only profile ends with 1 user; the drain's spawn rate is never 0."""
    install(make_profile(single_stream={"duration": 5}, steps={"concurrency": []}))
    runner = FakeRunner(stop_timeout=10.0)
    shape = new_shape(runner)
    assert shape.tick() == (1, 1.0)
    runner.user_count = 1
    clock.at(5.0)
    assert shape.tick() == (0, 1.0)


# -- warm-up -------------------------------------------------------------------------------------------------


class FakeClient:
    """Answers each warm-up request with the next outcome, taking ``seconds`` of fake time."""

    def __init__(self, clock: FakeClock, outcomes: list[bool], seconds: float) -> None:
        self.clock, self.outcomes, self.seconds = clock, list(outcomes), seconds
        self.bodies: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []
        self.closed = False

    def stream_chat(self, body: dict[str, Any], identity: RequestIdentity, **kw: Any) -> RequestResult:
        self.bodies.append(body)
        self.calls.append({"identity": identity, **kw})
        self.clock.now += self.seconds
        ok = self.outcomes.pop(0)
        res = RequestResult.for_request(identity, body.get("max_tokens"))
        res.e2e, res.ok, res.output_tokens = self.seconds, ok, 3 if ok else 0
        res.error_class, res.finish_reason = (None, "stop") if ok else ("connect_error", None)
        return res

    def close(self) -> None:
        self.closed = True


def _with_fake_client(monkeypatch: pytest.MonkeyPatch, ctx: RunContext, client: FakeClient) -> list[Timeouts | None]:
    asked: list[Timeouts | None] = []

    def new_client(timeouts: Timeouts | None = None) -> FakeClient:
        asked.append(timeouts)
        return client

    monkeypatch.setattr(ctx, "new_client", new_client)
    return asked


def test_warmup_runs_before_the_first_stage_and_its_time_is_not_counted(
    clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = make_profile(warmup={"prompt": "Say OK", "max_tokens": 16, "timeout": 42, "requests": 2},
                           timeouts={"connect": 3})  # fmt: skip
    ctx, run_dir = install(profile)
    client = FakeClient(clock, [False, True], seconds=4.0)
    asked = _with_fake_client(monkeypatch, ctx, client)
    shape = new_shape(FakeRunner(stop_timeout=30.0))

    assert shape.tick() == (1, 1.0)  # warm-up (8 s of fake time) then the single-stream phase at once
    assert shape.warmup_error is None
    assert asked == [Timeouts(connect=3.0, first_byte=42.0, first_token=42.0, idle=42.0, total=42.0)]
    assert client.bodies == [{"model": "m", "messages": [{"role": "user", "content": "Say OK"}], "max_tokens": 16}] * 2
    warmup = RequestIdentity("warmup", None, user="warmup", phase="warmup", step=-1, concurrency=1)
    assert all(c == {"identity": warmup} for c in client.calls)
    assert client.closed
    assert [(r.phase, r.step, r.user, r.ok) for r in run_dir.records] == [
        ("warmup", -1, "warmup", False), ("warmup", -1, "warmup", True),
    ]  # fmt: skip
    assert [(e["phase"], e["step"], e["wall"]) for e in run_dir.phases] == [
        ("warmup", -1, WALL0), ("single", 0, WALL0 + 8.0),
    ]  # fmt: skip
    assert run_dir.phases[0]["planned_duration"] is None
    # the stage clock starts after the warm-up: the single stream still runs 4.9 s later
    clock.now += 4.9
    assert shape.tick() == (1, 1.0)
    clock.now += 0.1
    assert shape.tick() == (2, 2.0)
    assert len(client.bodies) == 2  # the warm-up ran once


def test_every_warmup_request_failing_stops_before_any_load(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, run_dir = install(make_profile(warmup={"requests": 2}))
    runner = FakeRunner(stop_timeout=30.0)
    _with_fake_client(monkeypatch, ctx, FakeClient(clock, [False, False], seconds=1.0))
    shape = new_shape(runner)

    assert shape.tick() is None
    assert shape.warmup_error and "every warm-up request failed" in shape.warmup_error
    assert [e["phase"] for e in run_dir.phases] == ["warmup"]
    assert ctx.state == PhaseState("warmup", -1, 1)
    assert runner.messages == []  # no phase was announced: the workers spawn nobody
    assert len(run_dir.records) == 2


def test_disabled_warmup_sends_nothing(clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, run_dir = install(make_profile(warmup={"enabled": False}))
    client = FakeClient(clock, [], seconds=1.0)
    asked = _with_fake_client(monkeypatch, ctx, client)
    assert new_shape(FakeRunner(stop_timeout=30.0)).tick() == (1, 1.0)
    assert asked == [] and client.bodies == [] and run_dir.records == []
    assert [e["phase"] for e in run_dir.phases] == ["single"]


# -- steps.until ---------------------------------------------------------------------------------------------


def test_until_ends_a_step_at_its_margin_and_the_next_at_max(clock: FakeClock) -> None:
    """Step 1's records put the usable rate within the margin: it ends at the first check after ``min`` and step 2
    starts then; step 2 gets no record (no interval) and ends at ``max``; each writes its until event."""
    from harness.records import EventHook

    prof = make_profile(single_stream={"duration": 0},
                        steps={"concurrency": [2, 4], "until": {"margin": 0.2, "min": 3, "max": 20, "check_every": 1}})
    ctx, run_dir = install(prof)
    run_dir.on_record = EventHook()  # type: ignore[attr-defined]
    runner = FakeRunner(stop_timeout=30.0)
    shape = new_shape(runner)
    clock.at(0.0)
    assert shape.tick() == (2, 2.0)
    for u in ("a", "b"):  # a closed loop of 2 users, 0.2 s requests, for 6 s
        for i in range(30):
            r = RequestResult(prompt_id="p", user=u, phase="step", step=1, concurrency=2)
            r.start_wall, r.e2e, r.ok, r.usable = WALL0 + 0.2 * i, 0.2, True, True
            run_dir.on_record.fire(r)  # type: ignore[attr-defined]
    clock.at(2.0)
    assert shape.tick() == (2, 2.0)  # under min: no end
    clock.at(6.0)
    assert shape.tick() == (4, 4.0) and ctx.state == PhaseState("step", 2, 4)  # margin reached: step 2 now
    until = [e for e in run_dir.phases if e["event"] == "until"]
    assert len(until) == 1 and until[0]["step"] == 1 and until[0]["reached"] is True and until[0]["at_s"] == 6.0
    assert until[0]["halfwidth"] is not None and until[0]["halfwidth"] <= 0.2 and until[0]["requests"] > 50
    starts = [e for e in run_dir.phases if e["event"] == "phase_start"]
    assert starts[1]["wall"] == WALL0 + 6.0 and starts[1]["until"]["margin"] == 0.2
    clock.at(25.0)
    assert shape.tick() == (4, 4.0)  # step 2's max (20 s) not yet over: it began at 6 s
    clock.at(26.0)
    assert shape.tick() == (0, 4.0) and ctx.finished
    until = [e for e in run_dir.phases if e["event"] == "until"]
    assert until[1]["step"] == 2 and until[1]["reached"] is False and until[1]["halfwidth"] is None
    assert until[1]["at_s"] == 20.0
