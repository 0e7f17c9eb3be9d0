"""The rate mode at run time (:mod:`harness.rate`), its profile section and its stages in the shape."""

from __future__ import annotations

from locust.runners import MasterRunner

import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gevent
import pytest

from harness import rate
from harness.config import Profile, ProfileError, load_profile
from harness.rate import Arrival, ArrivalSchedule
from harness.runtime import current
from harness.shapes import Stage, plan_stages
from tests.test_shapes import FakeRunner, install, make_profile, new_shape

PROFILES = Path(__file__).resolve().parent.parent / "profiles"


@pytest.fixture(autouse=True)
def _no_schedule_left() -> Iterator[None]:
    """Each test its own process run's dispatcher (what the shape and the users reach), halted after it."""
    saved = current().dispatch
    current().dispatch = rate.Dispatcher()
    yield
    rate.end_schedule(D())
    current().dispatch = saved


def D() -> rate.Dispatcher:
    """The dispatcher of this test's process run."""
    return current().dispatch


def env(client_id: str) -> Any:
    """A stand-in worker environment whose run holds :func:`D`."""
    return SimpleNamespace(runner=SimpleNamespace(client_id=client_id), llmload=current())


def user(run_id: str = "r", step: int = 1, phase: str = "step", rate_mode: bool = True) -> Any:
    """A stand-in user: its context's run id, phase state and whether the profile has ``rate:``; its environment's
    run holds :func:`D`."""
    profile = SimpleNamespace(rate=object() if rate_mode else None)
    state = SimpleNamespace(phase=phase, step=step)
    return SimpleNamespace(ctx=SimpleNamespace(run_id=run_id, profile=profile, state=state),
                           environment=SimpleNamespace(llmload=current()))


# -- the schedule ------------------------------------------------------------------------------------------


def test_schedule_takes_this_process_share_in_order() -> None:
    s = ArrivalSchedule(2, 4.0, "constant", 1.0, 0, t0_wall=100.0, slot=1, slots=2, run_id="r")
    got = [s.take() for _ in range(3)]
    assert got == [Arrival(2, 1, 100.25), Arrival(2, 3, 100.75), Arrival(2, 5, 101.25)]
    assert s.taken == 3


def test_each_step_has_its_own_sequence_and_every_worker_the_same_one() -> None:
    a = [ArrivalSchedule(1, 5.0, "poisson", 1.0, 9, 0.0).take().wall for _ in range(1)]
    s1, s2 = ArrivalSchedule(1, 5.0, "poisson", 1.0, 9, 0.0), ArrivalSchedule(2, 5.0, "poisson", 1.0, 9, 0.0)
    w1 = [s1.take().wall for _ in range(5)]
    assert w1 != [s2.take().wall for _ in range(5)]
    assert a[0] == w1[0] == 0.0
    again = ArrivalSchedule(1, 5.0, "poisson", 1.0, 9, 0.0)
    assert [again.take().wall for _ in range(5)] == w1


def test_dispatcher_hands_arrivals_at_their_time_to_the_last_idle_user() -> None:
    t0 = time.time() + 0.05
    rate.begin_step(D(), ArrivalSchedule(1, 20.0, "constant", 1.0, 0, t0, run_id="r"))
    u1, u2 = user(), user()
    g1 = gevent.spawn(rate.arrival_wait, u1)
    gevent.sleep(0.001)
    g2 = gevent.spawn(rate.arrival_wait, u2)  # idle after u1: it gets the first arrival
    g2.join(timeout=2)
    assert g2.value == 0.0 and u2._llmload_arrival == Arrival(1, 0, t0)
    assert time.time() >= t0 - 1e-3
    g1.join(timeout=2)
    assert u1._llmload_arrival == Arrival(1, 1, t0 + 0.05)
    assert rate.take_arrival(u1) == (True, Arrival(1, 1, t0 + 0.05))
    assert u1._llmload_arrival is None


def test_arrivals_no_user_was_idle_for_wait_and_go_oldest_first() -> None:
    t0 = time.time()
    rate.begin_step(D(), ArrivalSchedule(1, 100.0, "constant", 1.0, 0, t0, run_id="r"))
    gevent.sleep(0.1)  # ~10 arrivals due, no user idle (all busy: the cap)
    assert rate.pending(D()) >= 5
    u = user()
    before = time.time()
    rate.arrival_wait(u)
    assert time.time() - before < 0.01  # taken at once, late
    assert u._llmload_arrival == Arrival(1, 0, t0)
    rate.end_schedule(D())
    assert rate.pending(D()) == 0


def test_take_arrival_outside_and_inside_a_rate_step() -> None:
    for closed in (user(rate_mode=False), user(phase="single", step=0)):  # closed loop: send now, no wait
        assert rate.arrival_wait(closed) == 0.0 and rate.take_arrival(closed) == (True, None)
    u = user(step=3)
    rate.begin_step(D(), ArrivalSchedule(3, 1.0, "constant", 1.0, 0, time.time() + 60, run_id="r"))
    assert rate.take_arrival(u) == (False, None)  # the first task of a rate step: wait for an arrival first
    u._llmload_arrival = Arrival(2, 7, 0.0)  # an arrival of an ended step is dropped
    assert rate.take_arrival(u) == (False, None)
    u._llmload_arrival = Arrival(3, 0, 0.0)
    assert rate.take_arrival(u) == (True, Arrival(3, 0, 0.0))
    other = user("another-run", step=3)  # a schedule of another run is not its schedule: it waits for its own
    other._llmload_arrival = Arrival(3, 0, 0.0)
    assert rate.schedule(D(), "another-run") is None and rate.take_arrival(other) == (False, None)


def test_a_user_in_a_rate_step_before_its_schedule_waits_for_it() -> None:
    """A worker gets the phase message, then the rate message: a user finishing a closed-loop request in between
    must not send closed-loop in the rate step; it waits and gets the step's first arrival."""
    rate.begin_step(D(), ArrivalSchedule(1, 50.0, "constant", 1.0, 0, time.time() - 10, run_id="r"))
    rate.end_schedule(D())  # step 1 over
    u = user(step=2)
    assert rate.take_arrival(u) == (False, None)
    g = gevent.spawn(rate.arrival_wait, u)
    gevent.sleep(0.05)
    assert not g.dead  # no schedule of step 2 yet
    t0 = time.time()
    rate.begin_step(D(), ArrivalSchedule(2, 50.0, "constant", 1.0, 0, t0, run_id="r"))
    g.join(timeout=1)
    assert u._llmload_arrival == Arrival(2, 0, t0) and rate.take_arrival(u) == (True, Arrival(2, 0, t0))


def test_a_user_killed_while_waiting_leaves_no_idle_slot() -> None:
    rate.begin_step(D(), ArrivalSchedule(1, 1.0, "constant", 1.0, 0, time.time() + 60, run_id="r"))
    g = gevent.spawn(rate.arrival_wait, user())
    gevent.sleep(0.01)
    assert len(D().idle) == 1
    g.kill()
    assert D().idle == []


def test_after_the_load_ends_waiting_users_get_nothing() -> None:
    t0 = time.time() + 0.05
    rate.begin_step(D(), ArrivalSchedule(1, 100.0, "constant", 1.0, 0, t0, run_id="r"))
    rate.end_schedule(D())
    g = gevent.spawn(rate.arrival_wait, user())
    g.join(timeout=0.2)
    assert not g.dead  # still waiting (Locust kills it when it stops the user)
    g.kill()


def test_a_step_announced_closed_loop_releases_waiting_users_and_sends_closed_loop() -> None:
    """The web UI's fixed mode of a rate profile: the phase message, then a closed-loop rate message. A worker's
    user that entered the step in between waits, then is released and sends closed-loop."""
    u = user(step=1)
    g = gevent.spawn(rate.arrival_wait, u)
    gevent.sleep(0.01)
    assert not g.dead  # a rate profile's load step, no schedule yet: it waits
    rate._on_rate(env("w"), SimpleNamespace(data={"step": 1, "rate": None, "closed": True, "run_id": "r"}))
    g.join(timeout=1)
    assert g.value == 0.0 and u._llmload_arrival is None
    assert rate.take_arrival(u) == (True, None) and rate.arrival_wait(u) == 0.0
    assert rate.take_arrival(user(step=2)) == (False, None)  # another step of the run is not closed-loop


def test_the_load_end_does_not_release_waiting_users() -> None:
    u = user(step=1)
    rate.begin_step(D(), ArrivalSchedule(1, 1.0, "constant", 1.0, 0, time.time() + 60, run_id="r"))
    g = gevent.spawn(rate.arrival_wait, u)
    gevent.sleep(0.01)
    rate.broadcast_step(None, D(), -1, None, None, time.time(), "r")
    g.join(timeout=0.1)
    assert not g.dead  # Locust stops it; no closed-loop request after the load end
    g.kill()


# -- master / worker ---------------------------------------------------------------------------------------


class _Node(SimpleNamespace):
    pass


def _fake_master(ids: list[str]) -> Any:
    m = MasterRunner.__new__(MasterRunner)
    m.greenlet = None  # (Runner.__del__ reads it)
    m.clients = {i: _Node(id=i, state="running") for i in ids}  # type: ignore[assignment]
    sent: list[tuple[str, Any]] = []
    m.send_message = lambda t, d, client_id=None: sent.append((t, d))  # type: ignore[method-assign]
    m.sent = sent  # type: ignore[attr-defined]
    return m


def test_master_sends_the_schedule_with_the_workers_in_slot_order_and_dispatches_nothing() -> None:
    spec = SimpleNamespace(arrival="gamma", burstiness=2.0, seed=5)
    m = _fake_master(["w-b", "w-a"])
    rate.broadcast_step(m, D(), 2, 7.5, spec, 1000.0, "run1")
    assert m.sent == [(rate.MSG_RATE, {"step": 2, "rate": 7.5, "arrival": "gamma", "burstiness": 2.0, "seed": 5,
                                       "t0_wall": 1000.0 + rate.LEAD_S, "workers": ["w-a", "w-b"],
                                       "run_id": "run1"})]
    assert rate.schedule(D(), "run1") is None
    rate.broadcast_step(m, D(), -1, None, spec, 1010.0, "run1")
    assert m.sent[-1] == (rate.MSG_RATE, {"step": -1, "rate": None, "closed": False, "run_id": "run1"})


def test_each_worker_takes_its_slot_and_together_they_take_every_arrival_once() -> None:
    spec = SimpleNamespace(arrival="poisson", burstiness=1.0, seed=5)
    m = _fake_master(["w-0", "w-1", "w-2"])
    rate.broadcast_step(m, D(), 1, 9.0, spec, 1000.0, "run1")
    data = m.sent[0][1]
    taken = []
    for wid in ("w-0", "w-1", "w-2"):
        rate._on_rate(env(wid), SimpleNamespace(data=data))
        s = rate.schedule(D(), "run1")
        assert s is not None and s.slots == 3 and s.slot == int(wid[-1])
        rate.end_schedule(D())
        taken += [s.take() for _ in range(20)]
    whole = ArrivalSchedule(1, 9.0, "poisson", 1.0, 5, 1000.0 + rate.LEAD_S)
    assert sorted(taken, key=lambda a: a.index) == [whole.take() for _ in range(60)]


def test_a_worker_missing_from_the_split_sends_nothing(caplog: pytest.LogCaptureFixture) -> None:
    data = {"step": 1, "rate": 2.0, "arrival": "poisson", "burstiness": 1.0, "seed": 0, "t0_wall": 0.0,
            "workers": ["w-0"], "run_id": "r"}
    rate._on_rate(env("late-joiner"), SimpleNamespace(data=data))
    assert D().greenlet is None and "not in the master's rate split" in caplog.text


# -- profile and stages ------------------------------------------------------------------------------------


def rate_profile(**rate_over: Any) -> Profile:
    r = {"rates": [2, 5.5], "max_concurrency": 3, **rate_over}
    return make_profile(steps={"duration": 10, "drain_timeout": 5}, rate=r)


def test_rate_stages_follow_the_single_stream_phase() -> None:
    p = rate_profile()
    assert plan_stages(SimpleNamespace(profile=p)) == [  # type: ignore[arg-type]
        Stage("single", 0, 1, 5.0), Stage("step", 1, 3, 10.0, rate=2.0), Stage("step", 2, 3, 10.0, rate=5.5)]
    assert rate_profile(max_concurrency=None, pool=40).rate.users == 40  # type: ignore[union-attr]


def test_rate_profile_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompts: [{id: p, text: hi}]\nsteps: {concurrency: [2]}\nrate: {rates: [1]}\n")
    with pytest.raises(ProfileError, match=r"give either rate\.rates or steps\.concurrency"):
        load_profile(bad)
    bad.write_text("prompts: [{id: p, text: hi}]\nrate: {rates: [1, 0], arrival: bursty}\n")
    with pytest.raises(ProfileError) as e:
        load_profile(bad)
    assert "rate.rates: every rate must be > 0" in str(e.value) and "rate.arrival:" in str(e.value)


def test_rate_steps_run_every_rate_of_every_axes_setting() -> None:
    p = make_profile(steps={"duration": 10, "drain_timeout": 5}, rate={"rates": [2, 4], "max_concurrency": 3},
                     axes={"thinking": [True, False]})
    stages = plan_stages(SimpleNamespace(profile=p))  # type: ignore[arg-type]
    labels = [s.label for s in p.settings()]
    assert [(s.step, s.setting, s.rate) for s in stages] == [
        (0, labels[0], None), (1, labels[0], 2.0), (2, labels[0], 4.0), (3, labels[1], 2.0), (4, labels[1], 4.0)]


def test_rate_profile_numbers_are_strict_and_finite(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    for section in ("{rates: [.inf]}", "{rates: [.nan]}", "{rates: ['5']}", "{rates: [1], burstiness: .inf}",
                 "{rates: [1], pool: '8'}"):
        bad.write_text(f"prompts: [{{id: p, text: hi}}]\nrate: {section}\n")
        with pytest.raises(ProfileError, match=r"rate\."):
            load_profile(bad)


def test_rate_with_conversations_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("prompts: [{id: p, text: hi}]\nrate: {rates: [1]}\nconversation: {turns: 2}\n")
    with pytest.raises(ProfileError, match="open-loop arrivals are single requests"):
        load_profile(bad)


def test_shipped_rate_sweep_profile_loads() -> None:
    p = load_profile(PROFILES / "rate-sweep.yaml")
    assert p.rate is not None and len(p.rate.rates) >= 2


def test_tick_writes_the_rate_and_starts_the_local_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import shapes
    from tests.test_shapes import FakeClock

    clock = FakeClock()
    monkeypatch.setattr(shapes, "time", clock)
    ctx, run_dir = install(rate_profile())
    ctx.run_id = "r"
    shape = new_shape(FakeRunner(stop_timeout=5))
    assert shape.tick() == (1, 1.0)  # single stream: closed loop
    assert rate.schedule(D(), "r") is None
    clock.at(5.0)
    assert shape.tick() == (3, 3.0)
    ev = run_dir.phases[-1]
    assert (ev["step"], ev["rate"], ev["arrival"], ev["max_concurrency"]) == (1, 2.0, "poisson", 3)
    s = rate.schedule(D(), "r")
    assert s is not None and (s.step, s.rate, s.t0_wall) == (1, 2.0, ev["wall"] + rate.LEAD_S)
    clock.at(25.0)
    assert shape.tick() == (0, 3.0)  # load end: the dispatcher stops
    assert D().greenlet is None


def test_an_arrival_taken_but_not_sent_goes_back_to_the_queue() -> None:
    t0 = time.time()
    rate.begin_step(D(), ArrivalSchedule(1, 1.0, "constant", 1.0, 0, t0, run_id="r"))
    gevent.sleep(0.01)  # arrival 0 due, nobody idle: queued
    u = user()
    rate.arrival_wait(u)
    assert u._llmload_arrival == Arrival(1, 0, t0)
    rate.give_back(u)  # the user stops before sending it (on_stop)
    assert u._llmload_arrival is None and rate.pending(D()) == 1
    other = user()
    rate.arrival_wait(other)
    assert other._llmload_arrival == Arrival(1, 0, t0)
    rate.end_schedule(D())
    rate.give_back(other)  # after the load end nothing is queued again
    assert rate.pending(D()) == 0


def test_a_user_killed_right_after_an_arrival_was_handed_to_it_gives_it_back() -> None:
    rate.begin_step(D(), ArrivalSchedule(1, 1.0, "constant", 1.0, 0, time.time() + 60, run_id="r"))
    u = user()
    g = gevent.spawn(rate.arrival_wait, u)
    gevent.sleep(0.01)
    ev = D().idle.pop()
    ev.set(Arrival(1, 0, 1.0))  # handed over (as the dispatcher does) ...
    g.kill()  # ... and the user is stopped before its task sends it
    rate.give_back(u)  # what its on_stop does (Locust calls on_stop when it kills a user)
    assert rate.pending(D()) == 1 and D().pending[0] == Arrival(1, 0, 1.0)
