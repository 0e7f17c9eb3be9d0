"""Hypothesis profiles of the property-based (fuzz) tests, and a watchdog that turns a hang into a failure.

Two profiles, chosen by the environment variable ``LLMLOAD_FUZZ``:

* ``ci`` (the default): derandomized (the same examples on every run, so CI is reproducible), no example
  database, each test's example count as written (the whole of ``tests/test_fuzz_stream.py`` in well under 60 s);
* ``deep``: random examples on every run (Hypothesis prints the seed and a ``@reproduce_failure`` blob on a
  failure), the example database on (``.hypothesis/``: a failure found once is replayed first next time), and
  ``LLMLOAD_FUZZ_SCALE`` (default 25) times as many examples per test.

``LLMLOAD_FUZZ=deep .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_fuzz_stream.py`` runs the deep one
(docs/development/tests.md, "Fuzz tests").
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

__all__ = ["DEEP", "Hang", "fuzz", "within"]

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

settings.register_profile(
    "llmload-ci", derandomize=True, database=None, deadline=10_000, print_blob=True, suppress_health_check=_SLOW_OK
)
settings.register_profile("llmload-deep", deadline=30_000, print_blob=True, suppress_health_check=_SLOW_OK)

#: True when ``LLMLOAD_FUZZ=deep``.
DEEP = os.environ.get("LLMLOAD_FUZZ", "ci") == "deep"
_PROFILE = settings.get_profile("llmload-deep" if DEEP else "llmload-ci")
_SCALE = int(os.environ.get("LLMLOAD_FUZZ_SCALE", "25")) if DEEP else 1

F = TypeVar("F", bound=Callable[..., Any])


def fuzz(examples: int) -> Callable[[F], F]:
    """The ``@settings`` of one property: the profile's, with ``examples`` examples (times the deep scale)."""
    return settings(_PROFILE, max_examples=max(1, examples * _SCALE))


class Hang(Exception):
    """Raised by :func:`within` when the code under test ran past its time bound."""


@contextmanager
def within(seconds: float, what: str = "the decoder") -> Iterator[None]:
    """Fail with :class:`Hang` when the block runs longer than ``seconds`` (a real interval timer, so it also
    interrupts a pure-Python busy loop; main thread only, like every pytest test here)."""

    def _alarm(signum: int, frame: object) -> None:
        raise Hang(f"{what} did not return within {seconds} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
