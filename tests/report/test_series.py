"""harness.report.series: the columnar engine's definitions applied to many windows at once. Each binned value is
checked against the one-window definition it vectorises (tokens.window_tokens, columns._step_sample through the
report rows), on records that hit every branch of the aggregate tok/s rule."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from harness.report import build_report
from harness.report.columns import load_frame_run
from harness.report.series import (
    SERIES_COLUMNS,
    main_frame,
    output_tokens_binned,
    row_latency_sample,
    row_sample,
    time_bin_s,
    ttft_by_start_bin,
)
from harness.report.stats import percentile
from harness.report.tokens import window_tokens as _window_tokens
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _mixed_records(seed: int) -> list[dict[str, Any]]:
    """Records of every kind the tok/s rule tells apart: pro rata (with and without TTFT, hidden reasoning,
    zero-length decode), chunk arrivals without usage, with usage short of output_tokens (the rest at the end),
    with usage above it (scaled), with usage of the wrong length (ignored), failed and token-less requests; chunk
    arrivals on whole seconds so some fall exactly on bin boundaries."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = [rec("w", -1, 0, 3, tokens=30, chunk_times=[1.0, 2.0])]  # warm-up: excluded
    for i in range(240):
        start = rng.uniform(0, 100)
        e2e = rng.choice([0.0, 0.5, 3.0, 7.25, 20.0])
        ttft = None if i % 17 == 0 else min(e2e, rng.uniform(0.0, 2.0))
        kind = i % 8
        tokens = rng.randint(0, 3) if i % 29 == 0 else rng.randint(5, 60)
        extra: dict[str, Any] = {}
        if kind in (1, 2, 3, 4):
            start = float(round(start))  # whole seconds + whole-second arrivals: on the 1 s / 5 s bin boundaries
            k = rng.randint(1, 6)
            times = sorted(min(e2e, float(round(rng.uniform(0.0, e2e), rng.choice([0, 2])))) for _ in range(k))
            extra["chunk_times"] = times
            if kind == 2:
                extra["chunk_tokens"] = [rng.randint(1, 4) for _ in times]  # sums below tokens: rest at the end
            elif kind == 3:
                extra["chunk_tokens"] = [tokens for _ in times]  # sums above tokens: scaled
            elif kind == 4:
                extra["chunk_tokens"] = [1] * (k + 1)  # wrong length: split evenly
        elif kind == 5:
            extra["hidden_reasoning"] = True
        elif kind == 6:
            extra["chunk_times"] = []  # empty: pro rata
        out.append(rec(f"u{i % 9}", 1 + i % 2, start, e2e, ttft=ttft, tokens=tokens, ok=i % 11 != 0,
                       concurrency=4, **extra))
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    root = tmp_path_factory.mktemp("series") / "run"
    write_run(root, _mixed_records(7), [phase("warmup", -1, 1, 0), phase("step", 1, 4, 0.5),
                                        phase("step", 2, 4, 50), run_end(130)])
    return main_frame(load_frame_run(root))


@pytest.mark.parametrize(("t0", "width"), [(T0, 1.0), (T0 - 3.0, 5.0), (T0 + 0.37, 2.5), (T0 + 10.0, 30.0)])
def test_each_bin_is_the_window_rule_on_that_bin(mixed: pl.DataFrame, t0: float, width: float) -> None:
    n = math.ceil((T0 + 125.0 - t0) / width)
    bins = output_tokens_binned(mixed, t0, width, n)
    assert len(bins) == n
    for i, got in enumerate(bins):
        want = _window_tokens(mixed, t0 + i * width, t0 + (i + 1) * width)[0]
        assert got == pytest.approx(want, rel=1e-12, abs=1e-9), i
    # tiling: the bins add up to the rule over their union (nothing lost or counted twice at a boundary)
    assert sum(bins) == pytest.approx(_window_tokens(mixed, t0, t0 + n * width)[0], rel=1e-12)


def test_bins_cover_every_successful_token(mixed: pl.DataFrame) -> None:
    bins = output_tokens_binned(mixed, T0 - 10.0, 10.0, 15)
    total = mixed.filter(pl.col("_ok")).get_column("output_tokens").sum()
    assert sum(bins) == pytest.approx(total)
    assert min(bins) >= 0.0


def test_tokens_outside_the_bins_are_not_counted(mixed: pl.DataFrame) -> None:
    inner = output_tokens_binned(mixed, T0 + 40.0, 5.0, 4)
    assert sum(inner) == pytest.approx(_window_tokens(mixed, T0 + 40.0, T0 + 60.0)[0])
    assert output_tokens_binned(mixed, T0 + 1000.0, 5.0, 3) == [0.0, 0.0, 0.0]
    assert output_tokens_binned(mixed, T0, 5.0, 0) == []
    with pytest.raises(ValueError, match="positive"):
        output_tokens_binned(mixed, T0, 0.0, 3)


def test_main_frame_drops_the_warm_up_and_keeps_record_order(mixed: pl.DataFrame) -> None:
    assert mixed.columns == list(SERIES_COLUMNS)
    assert mixed.height == 240 and (mixed.get_column("_step") >= 1).all()


def test_ttft_p50_per_start_bin(mixed: pl.DataFrame) -> None:
    ok = mixed.filter(pl.col("_ok"))
    got = ttft_by_start_bin(ok, T0, 10.0)
    by: dict[int, list[float]] = {}
    for s, t in ok.select("_start", "ttft").iter_rows():
        if t is not None:
            by.setdefault(math.floor((s - T0) / 10.0), []).append(t)
    assert [b for b, _ in got] == sorted(by)
    for b, v in got:
        assert v == pytest.approx(percentile(by[b], 50))


def test_row_sample_is_the_rows_sample(tmp_path: Path) -> None:
    records = [rec("w", -1, 0, 4, tokens=20)]
    for u, e2e in (("u1", 6.0), ("u2", 7.5)):
        t = 5.0
        for i in range(int(60 // e2e)):
            records.append(rec(u, 1, t, e2e, ttft=0.4 + 0.02 * i, tokens=150 + 5 * i, ok=not (u == "u2" and i == 3),
                               concurrency=2))
            t += e2e
    for j in range(3):  # NOT steady: every first request ends after the step end
        records.append(rec(f"u{j + 1}", 2, 66 + 0.1 * j, 25, tokens=200, concurrency=3))
    root = write_run(tmp_path / "run", records, [phase("warmup", -1, 1, 0), phase("step", 1, 2, 5, 60),
                                                  phase("step", 2, 3, 66, 5), run_end(85)])
    rep = build_report(root)
    main = main_frame(load_frame_run(root))
    steady, burst = rep["steps"]
    assert steady["steady"] and not burst["steady"]
    for row in rep["steps"]:
        assert row_sample(main, row).height == row["sample_requests"]
        lat = row_latency_sample(main, row)
        assert lat.height == row["latency_n"] == row["completed"]
        assert lat.select(pl.col("ttft").quantile(0.99, interpolation="linear")).item() \
            == pytest.approx(row["ttft_p99_s"])
    assert set(row_sample(main, burst).get_column("_step").to_list()) == {2}


def test_time_bins() -> None:
    assert time_bin_s(100) == 1.0
    assert time_bin_s(151) == 2.0
    assert time_bin_s(3 * 3600) == 120.0
    assert time_bin_s(10**6) == 3600.0
