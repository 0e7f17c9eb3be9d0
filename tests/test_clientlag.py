"""LagWatch: the live warning when the load generator falls behind (thresholds shared with the report)."""

from __future__ import annotations

from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S, SEVERE_LAG_S, LagWatch


def rec(lag: float | None, step: int = 1, phase: str = "step", c: int = 8) -> dict[str, Any]:
    return {"phase": phase, "step": step, "concurrency": c, "read_lag_max": lag}


def test_warns_once_per_step_when_more_than_10_percent_lag() -> None:
    w = LagWatch(min_requests=20)
    # 18 healthy + 1 late = 5 % at the 19th request; the 20th late one makes 2 of 20 = 10 % (not above); the
    # 21st makes 3 of 21 = 14 %: the warning comes with that record, once.
    out = [w.observe(rec(0.0002)) for _ in range(18)] + [w.observe(rec(0.4)) for _ in range(2)]
    assert out == [None] * 20
    msg = w.observe(rec(0.7))
    assert msg is not None and "FALLING BEHIND at C=8" in msg and "3 of 21" in msg and "max 0.70 s" in msg
    assert all(w.observe(rec(0.9)) is None for _ in range(10))  # not again for this step
    # Another step starts from zero: below min_requests the share rule waits.
    assert all(w.observe(rec(0.9, step=2, c=16)) is None for _ in range(19))
    later = w.observe(rec(0.9, step=2, c=16))
    assert later is not None and "C=16" in later and "20 of 20" in later


def test_one_severe_lag_warns_at_once() -> None:
    """A single-stream phase of minute-long requests has a handful of them: one read >= 1 s late is enough."""
    w = LagWatch()
    assert w.observe(rec(0.9, step=0, phase="single", c=1)) is None  # 1 of 1 late but below min_requests
    msg = w.observe(rec(SEVERE_LAG_S, step=0, phase="single", c=1))
    assert msg is not None and "C=1" in msg and "2 of 2" in msg and "max 1.00 s" in msg


def test_quiet_at_or_below_the_limits() -> None:
    w = LagWatch(min_requests=20)
    # Exactly 10 % late (not above), lags exactly at the limit (not above), warm-up and unstamped records ignored.
    recs = [rec(0.5)] * 2 + [rec(0.001)] * 18 + [rec(CLIENT_LAG_LIMIT_S)] * 50 + [rec(5.0, phase="warmup", step=-1)]
    recs += [rec(None)] * 100
    assert all(w.observe(r) is None for r in recs)
    # One more late request: 3 of 71 is < 10 %, still quiet. A step with fewer than min_requests stamped
    # requests, all late but under the severe lag, stays quiet.
    assert w.observe(rec(0.5)) is None
    assert all(w.observe(rec(0.9, step=3)) is None for _ in range(19))
