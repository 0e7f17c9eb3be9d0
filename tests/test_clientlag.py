"""LagWatch: the live warning when the load generator falls behind (thresholds shared with the report)."""

from __future__ import annotations

from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S, LagWatch


def rec(lag: float | None, step: int = 1, phase: str = "step", c: int = 8) -> dict[str, Any]:
    return {"phase": phase, "step": step, "concurrency": c, "read_lag_max": lag}


def test_warns_once_per_step_when_more_than_10_percent_lag() -> None:
    w = LagWatch(min_requests=20)
    # 17 healthy + 3 late = 15 % late at the 20th request: the warning comes with that record, once.
    out = [w.observe(rec(0.0002)) for _ in range(17)] + [w.observe(rec(0.4)) for _ in range(2)]
    assert out == [None] * 19
    msg = w.observe(rec(0.7))
    assert msg is not None and "FALLING BEHIND at C=8" in msg and "3 of 20" in msg and "max 0.70 s" in msg
    assert all(w.observe(rec(0.9)) is None for _ in range(10))  # not again for this step
    # Another step starts from zero.
    assert all(w.observe(rec(0.9, step=2, c=16)) is None for _ in range(19))
    later = w.observe(rec(0.9, step=2, c=16))
    assert later is not None and "C=16" in later and "20 of 20" in later


def test_quiet_at_or_below_the_limits() -> None:
    w = LagWatch(min_requests=20)
    # Exactly 10 % late (not above), lags exactly at the limit (not above), warm-up and unstamped records ignored.
    recs = [rec(0.5)] * 2 + [rec(0.001)] * 18 + [rec(CLIENT_LAG_LIMIT_S)] * 50 + [rec(5.0, phase="warmup", step=-1)]
    recs += [rec(None)] * 100
    assert all(w.observe(r) is None for r in recs)
    # One more late request: 3 of 71 is < 10 %, still quiet. A step with fewer than min_requests stamped
    # requests stays quiet even when all of them are late.
    assert w.observe(rec(0.5)) is None
    assert all(w.observe(rec(2.0, step=3)) is None for _ in range(19))
