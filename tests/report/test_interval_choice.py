"""Which interval a step's hours use (harness/report/figures.py rate_estimate / interval_info): renewal-reward for
closed loops with batch means as the cross-check; batch means with 20 fixed batches for open-loop (rate) steps that
kept up, renewal-reward when they fell behind or have too few completions, each saying why."""

from __future__ import annotations

import random

import polars as pl
import pytest

from harness.report.figures import OPEN_LOOP_SHORTFALL, interval_info, rate_estimate
from harness.report.hours import OPEN_LOOP_BATCHES, batch_means
from harness.report.interval import cycle_frame, renewal_reward
from harness.report.load import Phase


def _open_loop(rate: float, e2e: float, w: float, seed: int) -> pl.DataFrame:
    """Poisson arrivals at ``rate`` per second over [0, w), each served in ``e2e`` ± 20 % s, 90 % usable, each by
    a user of its own (an open loop: no user waits for another request)."""
    rng = random.Random(seed)
    rows, t, i = [], 0.0, 0
    while t < w:
        t += rng.expovariate(rate)
        rows.append((t, t + e2e * rng.uniform(0.8, 1.2), f"u{i}", rng.random() < 0.9))
        i += 1
    return pl.DataFrame(rows, schema=["s", "e", "u", "ok"], orient="row")


def _estimate(df: pl.DataFrame, w0: float, w1: float, shortfall: float | None, open_loop: bool):  # type: ignore[no-untyped-def]
    ends = df.filter(pl.col("ok")).get_column("e")
    rr = renewal_reward(cycle_frame(df, "s", "e", "u", "ok"), w0, w1)
    return rate_estimate(rr, ends, w0, w1, float(df.select((pl.col("e") - pl.col("s")).mean()).item()), shortfall,
                         open_loop)


def test_a_rate_step_that_kept_up_uses_twenty_fixed_batches_not_limited_by_the_e2e() -> None:
    """2 req/s of 30 s requests in a 60 s window: closed-loop batch means refuses (60 s < 5 x 2 x 30 s); the
    open-loop method has 20 batches of 3 s, and renewal-reward is its cross-check."""
    df = _open_loop(2.0, 30.0, 200.0, seed=1)
    est = _estimate(df, 100.0, 160.0, 0.01, True)
    fixed = batch_means(df.filter(pl.col("ok")).get_column("e"), 100.0, 160.0, None, batches=OPEN_LOOP_BATCHES)
    assert est.primary == fixed and fixed.batches == 20 and fixed.batch_s == pytest.approx(3.0)
    assert est.cross is not None and est.cross.reason is None  # renewal-reward over the same window
    iv = interval_info(est, Phase("step", 1, 64, 0.0, 200.0), 100.0, 30.0, 0.9)
    assert iv["method"] == "open_loop_batch_means" and iv["open_loop"] is True and iv["batches"] == 20
    assert iv["dof"] == 19 and iv["rate"] == fixed.rate and iv["rate_se"] == fixed.se and iv["reason"] is None
    assert iv["cross_check"]["method"] == "renewal_reward" and iv["cross_check"]["agree"] is True
    assert "target rate achieved" in iv["method_why"]
    closed = batch_means(df.filter(pl.col("ok")).get_column("e"), 100.0, 160.0, 30.0)
    assert closed.batches == 0  # what the closed-loop rule would have given: no interval


def test_a_rate_step_that_fell_behind_uses_renewal_reward_and_says_why() -> None:
    df = _open_loop(2.0, 30.0, 200.0, seed=2)
    est = _estimate(df, 100.0, 160.0, OPEN_LOOP_SHORTFALL + 0.05, True)
    assert est.primary.method == "renewal_reward" and est.cross is None  # type: ignore[union-attr]
    iv = interval_info(est, Phase("step", 1, 64, 0.0, 200.0), 100.0, 30.0, 0.9)
    assert iv["method"] == "renewal_reward" and iv["cross_check"] is None
    assert iv["method_why"].startswith("open loop, target rate NOT achieved (10 % short)")


def test_a_rate_step_with_fewer_usable_completions_than_batches_uses_renewal_reward() -> None:
    df = _open_loop(0.2, 5.0, 200.0, seed=3)  # ~12 completions in 60 s
    est = _estimate(df, 100.0, 160.0, 0.0, True)
    assert est.primary.method == "renewal_reward"  # type: ignore[union-attr]
    assert f"(< {OPEN_LOOP_BATCHES}, one per batch)" in est.why


def test_a_closed_loop_uses_renewal_reward_with_batch_means_beside_it() -> None:
    rng = random.Random(4)
    rows = []
    for u in range(8):
        t = rng.uniform(0, 10)
        while t < 600:
            x = rng.uniform(5, 15)
            rows.append((t, t + x, f"u{u}", True))
            t += x
    df = pl.DataFrame(rows, schema=["s", "e", "u", "ok"], orient="row")
    est = _estimate(df, 20.0, 520.0, None, False)
    assert est.primary.method == "renewal_reward" and not est.open_loop  # type: ignore[union-attr]
    assert est.cross is not None and est.cross.batches == 10  # type: ignore[union-attr]
    iv = interval_info(est, Phase("step", 1, 8, 0.0, 520.0), 20.0, 10.0, 1.0)
    assert (iv["cycles"], iv["streams"], iv["bandwidth"]) == (est.primary.cycles, 8, 8)  # type: ignore[union-attr]
    assert iv["cross_check"]["method"] == "batch_means" and iv["cross_check"]["batches"] == 10
    assert iv["cross_check"]["agree"] is True
