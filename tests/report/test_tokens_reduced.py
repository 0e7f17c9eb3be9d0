"""Reduced chunk lists (harness/report/tokens.py ``reduce_chunks``): tokens placed from the per-bin sums equal those
placed from the chunk lists on every placement branch, for any window made of whole bins; a window cutting a bin is
refused."""

from __future__ import annotations

import random
from typing import Any

import polars as pl
import pytest

from harness.report.tokens import (
    CHUNK_BIN_COLUMNS,
    CoarseChunkBins,
    is_reduced,
    phase_tokens_in_windows,
    reduce_chunks,
    window_phase_tokens,
)
from tests.report.rundir import frame_of
from tests.report.test_tokens_phase import BRANCHES, _req


def _flat(pairs: list[tuple[float, float]]) -> list[float]:
    return [x for p in pairs for x in p]


def _same(got: tuple[float, float, str], want: tuple[float, float, str]) -> None:
    assert got[:2] == pytest.approx(want[:2], rel=1e-12) and got[2] == want[2]


def _reduced(main: pl.DataFrame, edges: list[float]) -> pl.DataFrame:
    red = reduce_chunks(main.select("start_wall", "ttfat", "chunk_times", "chunk_tokens"), edges)
    return main.drop("chunk_times", "chunk_tokens").hstack(red)


@pytest.mark.parametrize("branch", sorted(BRANCHES))
def test_reduced_equals_lists_on_every_branch(branch: str) -> None:
    main = frame_of([_req(**BRANCHES[branch]), _req(start_wall=101.3, **BRANCHES[branch]),
                     _req(start_wall=100.5, ok=False, **BRANCHES[branch])])
    grid = [(99.0 + 0.25 * i, 99.25 + 0.25 * i) for i in range(40)]
    step = (100.75, 104.0)
    red = _reduced(main, [x for w in grid for x in w] + list(step))
    assert is_reduced(red) and not is_reduced(main)
    assert set(CHUNK_BIN_COLUMNS) <= set(red.columns)
    assert _flat(phase_tokens_in_windows(red, grid)) == pytest.approx(_flat(phase_tokens_in_windows(main, grid)),
                                                                     rel=1e-12)
    _same(window_phase_tokens(red, *step), window_phase_tokens(main, *step))
    # a window of several whole bins
    _same(window_phase_tokens(red, 100.0, 102.5), window_phase_tokens(main, 100.0, 102.5))


def test_reduced_equals_lists_on_random_records() -> None:
    rng = random.Random(7)
    recs: list[Any] = []
    for i in range(300):
        n = rng.randint(0, 12)
        times = sorted(rng.uniform(0.05, 6.0) for _ in range(n))
        kw: dict[str, Any] = {"start_wall": 1000.0 + rng.uniform(0, 60), "ttft": times[0] if times else None,
                              "ttfat": rng.choice([None, *times]) if times else None,
                              "e2e": (times[-1] if times else 1.0) + rng.uniform(0, 0.5),
                              "output_tokens": rng.randint(0, 40), "reasoning_tokens": rng.randint(0, 20),
                              "chunk_times": times or None, "ok": rng.random() > 0.1}
        if times and i % 3:
            kw["chunk_tokens"] = [rng.randint(0, 4) for _ in times] if i % 3 == 1 else [2] * n
        recs.append(_req(**kw))
    main = frame_of(recs)
    grid = [(1000.0 + 1.7 * i, 1000.0 + 1.7 * (i + 1)) for i in range(40)]
    steps = [(1003.1234567, 1031.5), (1031.5, 1066.25)]
    red = _reduced(main, [x for w in grid + steps for x in w])
    assert _flat(phase_tokens_in_windows(red, grid)) == pytest.approx(_flat(phase_tokens_in_windows(main, grid)),
                                                                     rel=1e-12)
    for w in steps:
        _same(window_phase_tokens(red, *w), window_phase_tokens(main, *w))


def test_window_cutting_a_bin_is_refused() -> None:
    main = frame_of([_req()])
    red = _reduced(main, [100.0, 103.0])
    with pytest.raises(CoarseChunkBins, match="cuts the chunk time bin"):
        window_phase_tokens(red, 101.2, 103.0)


def test_edges_must_be_finite() -> None:
    main = frame_of([_req()])
    with pytest.raises(ValueError, match="finite"):
        _reduced(main, [100.0, float("inf")])
