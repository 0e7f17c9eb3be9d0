"""harness.locust.drain: the master asks its workers to stop and waits for their last records (bounded)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import gevent
import pytest

from harness.locust import drain
from harness.runtime import MSG_STOP, MSG_STOPPED, Run


class Clients(dict[str, Any]):
    """Locust's master ``runner.clients``: ``.all`` and ``in`` by client id."""

    @property
    def all(self) -> list[Any]:
        return list(self.values())


def master(ids: list[str], stop_timeout: float, answer: set[str]) -> SimpleNamespace:
    """A master runner whose workers in ``answer`` reply MSG_STOPPED 0.2 s after MSG_STOP (``answered``: when)."""
    sent: list[tuple[str, Any, str]] = []
    answered: dict[str, float] = {}

    def reply(client_id: str) -> None:
        gevent.sleep(0.2)
        answered[client_id] = time.monotonic()
        drain.on_worker_stopped(SimpleNamespace(), SimpleNamespace(node_id=client_id, data={}))

    def send_message(kind: str, data: Any, client_id: str) -> None:
        sent.append((kind, data, client_id))
        if client_id in answer:
            gevent.spawn(reply, client_id)

    return SimpleNamespace(
        clients=Clients({i: SimpleNamespace(id=i) for i in ids}),
        environment=SimpleNamespace(stop_timeout=stop_timeout),
        send_message=send_message,
        sent=sent,
        answered=answered,
    )


def test_master_waits_for_every_worker_then_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run()
    monkeypatch.setattr(drain, "of", lambda _env: run)
    runner = master(["a", "b"], stop_timeout=5.0, answer={"a", "b"})
    t0 = time.monotonic()
    drain.stop_workers(run, runner)
    done = time.monotonic()
    assert set(runner.answered) == {"a", "b"} and max(runner.answered.values()) <= done < t0 + 2.0
    assert sorted(runner.sent, key=lambda s: s[2]) == [(MSG_STOP, {"stop_timeout": 5.0}, "a"),
                                                       (MSG_STOP, {"stop_timeout": 5.0}, "b")]  # fmt: skip
    assert run.workers.stopped == {"a", "b"}


def test_a_silent_worker_is_waited_for_at_most_the_stop_timeout_plus_margin(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    run = Run()
    monkeypatch.setattr(drain, "of", lambda _env: run)
    monkeypatch.setattr(drain, "STOP_MARGIN_S", 0.3)
    runner = master(["a", "silent"], stop_timeout=0.2, answer={"a"})
    t0 = time.monotonic()
    drain.stop_workers(run, runner)
    assert 0.45 < time.monotonic() - t0 < 2.0
    assert "no final records from worker(s) ['silent']" in caplog.text


def test_worker_stops_once_and_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """MSG_STOP on a worker: users stopped with the master's timeout, records flushed, MSG_STOPPED sent; a second
    request (its own Ctrl-C meanwhile) waits for the same stop instead of starting another."""
    run = Run()
    monkeypatch.setattr(drain, "of", lambda _env: run)
    stops: list[float] = []
    answers: list[str] = []
    env = SimpleNamespace(stop_timeout=0.0)

    def stop() -> None:
        stops.append(env.stop_timeout)
        gevent.sleep(0.1)

    runner = SimpleNamespace(environment=env, stop=stop, send_message=lambda kind, data: answers.append(kind))
    env.runner = runner
    drain.on_stop_request(env, SimpleNamespace(data={"stop_timeout": 42.0}))
    drain.worker_stop_gracefully(run, runner, 1.0)
    assert stops == [42.0] and answers == [MSG_STOPPED]


def test_a_missing_worker_is_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker Locust shows missing (killed: no heartbeat) cannot answer: the stop waits for the live one only,
    not the stop timeout + margin (F4: a dead worker made every stop wait 40 s)."""
    run = Run()
    monkeypatch.setattr(drain, "of", lambda _env: run)
    runner = master(["a", "dead"], stop_timeout=30.0, answer={"a"})
    runner.clients["dead"].state = "missing"
    t0 = time.monotonic()
    drain.stop_workers(run, runner)
    assert time.monotonic() - t0 < 2.0
    assert [s[2] for s in runner.sent] == ["a"] and run.workers.stopped == {"a"}


def test_a_worker_going_missing_during_the_wait_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run()
    monkeypatch.setattr(drain, "of", lambda _env: run)
    runner = master(["a", "b"], stop_timeout=30.0, answer={"a"})

    def die() -> None:
        gevent.sleep(0.5)
        runner.clients["b"].state = "missing"

    gevent.spawn(die)
    t0 = time.monotonic()
    drain.stop_workers(run, runner)
    assert 0.4 < time.monotonic() - t0 < 2.0 and run.workers.stopped == {"a"}


def test_a_worker_quitting_on_its_own_ctrl_c_drops_spawn_messages_only() -> None:
    """After the worker's own Ctrl-C (it drains, then quits) the master's spawn messages for the next step are not
    followed (no new user, no new request); before it, and for every other message, Locust's handling runs."""
    run = Run()
    handled: list[str] = []
    runner = SimpleNamespace(handle_message=lambda msg: handled.append(msg.type))
    drain.refuse_spawns_while_quitting(run, runner)
    spawn = SimpleNamespace(type="spawn", data={"user_classes_count": {"ReasoningChatUser": 6}})
    runner.handle_message(spawn)
    run.signals.first_sigint = time.monotonic()
    runner.handle_message(spawn)
    runner.handle_message(SimpleNamespace(type="quit", data=None))
    runner.handle_message(SimpleNamespace(type=MSG_STOP, data={"stop_timeout": 3.0}))
    assert handled == ["spawn", "quit", MSG_STOP]


def test_refusing_spawns_needs_locusts_handle_message() -> None:
    with pytest.raises(TypeError, match="has no handle_message"):
        drain.refuse_spawns_while_quitting(Run(), SimpleNamespace())
