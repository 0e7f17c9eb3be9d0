"""Fixtures: simulator subprocesses on loopback (started through the public launcher)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.sim import SimProcess, launch

#: Functional tests run 20x faster than real time.
FAST = 0.05


@pytest.fixture(scope="session")
def sim() -> Iterator[SimProcess]:
    """Default simulator: demo preset, vLLM flavour, time scale 0.05, seed 1."""
    with launch(preset="demo", time_scale=FAST, seed=1) as proc:
        yield proc


@pytest.fixture
def launch_sim() -> Iterator[Callable[..., SimProcess]]:
    """Factory that starts extra simulators and stops them after the test."""
    started: list[SimProcess] = []

    def start(**kw: Any) -> SimProcess:
        kw.setdefault("time_scale", FAST)
        proc = launch(**kw)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()
