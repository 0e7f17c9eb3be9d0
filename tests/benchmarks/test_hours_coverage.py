"""benchmarks/hours_coverage.py: the coverage bookkeeping (leave-one-out truth, covered counts, the exit rule) on
made-up step results, and (slow) a small demo sweep repeated 3 times end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

hc = load_benchmark("hours_coverage")


def _step(repeat: int, rate: float, half: float | None, c: int = 8, ts: float = 1.0) -> object:
    lo, hi = (rate - half, rate + half) if half is not None else (None, None)
    return hc.StepResult("demo", repeat, c, True, 20.0, rate, lo, hi, half / rate if half else None, None,
                         "batch_means", time_scale=ts)


def test_leave_one_out_truth_and_covered_count() -> None:
    # rates 1.0 x 9 and 2.0: the 2.0 run's truth is 1.0 (others), outside 2.0 ± 0.5; each 1.0 run's truth is
    # (8 x 1.0 + 2.0) / 9 = 1.111, inside 1.0 ± 0.2 but not inside 1.0 ± 0.1
    steps = [_step(i, 1.0, 0.2) for i in range(9)] + [_step(9, 2.0, 0.5)]
    [cell] = hc.cells(steps, {"demo": "demo"})
    assert (cell.runs, cell.with_interval, cell.covered) == (10, 10, 9)
    assert cell.misses == [{"repeat": 9, "rate": 2.0, "low": 1.5, "high": 2.5, "truth": 1.0,
                            "starved": None}]
    assert cell.truth_per_h == pytest.approx(1.1 * 3600)
    assert cell.median_rel_halfwidth == pytest.approx(0.2)
    assert hc.failing([cell]) == []
    narrow = [_step(i, 1.0, 0.1) for i in range(9)] + [_step(9, 2.0, 0.5)]
    [bad] = hc.cells(narrow, {"demo": "demo"})
    assert bad.covered == 0 and hc.failing([bad]) == [bad]


def test_not_starved_count_excludes_the_starved_steps_from_runs_and_truth() -> None:
    steps = [_step(i, 1.0, 0.2) for i in range(9)] + [_step(9, 2.0, 0.5)]
    steps[9].starved = True  # the outlier was client-bound: without it every run covers the others' mean 1.0
    [cell] = hc.cells(steps, {"demo": "demo"})
    assert (cell.covered, cell.runs, cell.starved) == (9, 10, 1)
    assert (cell.clean_covered, cell.clean_runs) == (9, 9)


def test_a_run_without_an_interval_counts_as_not_covered() -> None:
    steps = [_step(i, 1.0, 0.2) for i in range(9)] + [_step(9, 1.0, None)]
    [cell] = hc.cells(steps, {"demo": "demo"})
    assert (cell.with_interval, cell.covered) == (9, 9)
    assert hc.failing([cell]) == []  # 9/10 is enough
    steps[0] = _step(0, 1.0, None)
    [cell] = hc.cells(steps, {"demo": "demo"})
    assert cell.covered == 8 and hc.failing([cell]) == [cell]


def test_rates_shown_per_real_hour() -> None:
    # at time scale 0.05 one wall second is 20 simulated seconds: 2 usable per wall s = 0.1 per real s = 360 / h
    [cell] = hc.cells([_step(i, 2.0, 0.2, ts=0.05) for i in range(3)], {"demo": "demo"})
    assert cell.truth_per_h == pytest.approx(360.0)


def test_below_c8_never_fails() -> None:
    [cell] = hc.cells([_step(i, 2.0**i, 0.01, c=1) for i in range(3)], {"demo": "demo"})
    assert cell.covered == 0 and hc.failing([cell]) == []


@pytest.mark.slow
def test_small_demo_sweep_has_an_interval_on_every_step(tmp_path: Path) -> None:
    """3 repeats of a short demo sweep (C = 16, 32; 20 s steps): every step has an interval, the report agrees
    when it carries renewal-reward, and the table is written; coverage itself is not asserted on 3 runs."""
    rc = hc.main(["--profile", "demo", "--repeats", "3", "--step-duration", "20", "--single-stream-duration", "0",
                  "--steps", "16,32", "--out", str(tmp_path), "--timeout", "240"])
    summary = json.loads((tmp_path / "coverage.json").read_text())
    assert summary["problems"] == []  # every run finished, and no disagreement with the report
    assert rc in (0, 1)
    assert [(c["concurrency"], c["runs"]) for c in summary["cells"]] == [(16, 3), (32, 3)]
    for c in summary["cells"]:
        assert c["with_interval"] == 3, c
        assert 0 <= c["covered"] <= 3
        assert 0 < c["median_rel_halfwidth"] < 1
        assert c["truth_per_h"] > 0
    assert rc == (1 if summary["failing"] else 0)
