"""Pooling repeated runs (:mod:`harness.report.pool`, ``llmload report --pool``): the pooled rate and its within-run
interval, the run-to-run t interval, hours to N from both, the disagreement flag, on hand-computed reports."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from harness.report.cli import main as report_main
from harness.report.pool import PoolError, build_pool, render_pool_markdown
from harness.stats.intervals import t_quantile_975

N = 3600


def _run(root: Path, run_id: str, steps: list[tuple[str, float, float | None, float | None, float]],
         profile: str = "p") -> Path:
    """A run directory holding only ``report.json``: per step (label, rate, rate_low, rate_high, window_s), rates in
    usable samples/s, hours to N = 3,600."""
    rows = []
    for label, rate, lo, hi, w in steps:
        h = {"n": N, "hours": N / (rate * 3600), "samples_per_hour": rate * 3600, "rate_low": lo, "rate_high": hi,
             "hours_low": N / (hi * 3600) if hi else None, "hours_high": N / (lo * 3600) if lo else None}
        rows.append({"label": label, "concurrency": int(label.split("=")[1]), "window_s": w, "hours": [h]})
    d = root / run_id
    d.mkdir(parents=True)
    rep = {"schema": "llmload-report/1", "run_id": run_id, "profile_name": profile, "hours_to_n": [N], "steps": rows}
    (d / "report.json").write_text(json.dumps(rep))
    return d


def test_pooled_rate_within_run_and_run_to_run_intervals(tmp_path: Path) -> None:
    # three runs of C=8: rates 1.0, 1.2, 1.1 usable/s, each ±0.1 (h_i = 0.1), windows 100, 100, 200 s
    a = _run(tmp_path, "a", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.2, 1.1, 1.3, 100.0)])
    c = _run(tmp_path, "c", [("C=8", 1.1, 1.0, 1.2, 200.0)])
    pool = build_pool([a, b, c])
    (row,) = pool.steps
    assert row.runs == 3 and row.key == "C=8"
    assert row.request_rate == pytest.approx((1.0 * 100 + 1.2 * 100 + 1.1 * 200) / 400)  # 1.1: pooled counts
    half = math.sqrt((0.25 * 0.1) ** 2 * 2 + (0.5 * 0.1) ** 2)  # √Σ (W_i/W)² h_i²
    assert (row.within_low, row.within_high) == (pytest.approx(1.1 - half), pytest.approx(1.1 + half))
    sd = math.sqrt(((1.0 - 1.1) ** 2 + (1.2 - 1.1) ** 2 + 0) / 2)  # 0.1
    t = t_quantile_975(2)  # 4.303
    assert row.run_mean == pytest.approx(1.1) and row.run_rate_sd == pytest.approx(sd) and row.t == pytest.approx(t)
    assert (row.run_low, row.run_high) == (pytest.approx(1.1 - t * sd / math.sqrt(3)),
                                           pytest.approx(1.1 + t * sd / math.sqrt(3)))
    (h,) = row.hours
    assert h.hours == pytest.approx(1 / 1.1) and h.hours_low == pytest.approx(1 / (1.1 + half))
    assert h.run_hours_low == pytest.approx(1 / (1.1 + t * sd / math.sqrt(3)))
    assert h.run_hours_high == pytest.approx(1 / (1.1 - t * sd / math.sqrt(3)))
    assert row.disagree == []  # [0.9, 1.1] and [1.1, 1.3] touch: they overlap
    assert not any("disagree" in n for n in pool.notes)


def test_runs_within_their_intervals_do_not_disagree_and_two_runs_say_the_t_interval_is_wide(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [("C=8", 1.0, 0.8, 1.2, 100.0), ("C=16", 2.0, 1.8, 2.2, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.1, 0.9, 1.3, 100.0), ("C=32", 3.0, 2.8, 3.2, 100.0)])
    pool = build_pool([a, b])
    (row,) = pool.steps
    assert row.disagree == [] and row.t == pytest.approx(12.706, abs=1e-3)
    assert pool.unmatched == ["C=16", "C=32"]
    assert any("Two runs" in n and "wide" in n for n in pool.notes)
    assert not any("disagree" in n for n in pool.notes)


def test_a_run_without_bounds_gives_no_pooled_within_run_interval(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [("C=8", 1.0, None, None, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    pool = build_pool([a, b])
    (row,) = pool.steps
    assert row.request_rate == pytest.approx(1.0) and row.run_rate_sd == pytest.approx(0.0)
    assert (row.within_low, row.within_high) == (None, None)
    assert any(n.startswith("C=8: a run has no within-run interval") for n in pool.notes)
    md = render_pool_markdown(pool)
    assert "| C=8 | 2 | 1.00 | – | 1.00 | 1.00–1.00 |" in md


def test_a_run_without_a_usable_rate_at_a_step_is_named_and_left_out(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.2, 1.1, 1.3, 100.0)])
    c = _run(tmp_path, "c", [("C=8", 1.0, 0.9, 1.1, 0.0)])  # no steady window
    pool = build_pool([a, b, c])
    (row,) = pool.steps
    assert row.runs == 2 and row.request_rate == pytest.approx(1.1)
    assert "C=8: run C had no usable rate there (no usable completion or no steady window): pooled over 2 of 3 " \
        "runs." in pool.notes


def test_pool_command_writes_pool_md_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, "a", [("C=8", 1.0, 0.95, 1.05, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.5, 1.45, 1.55, 100.0)])
    out = tmp_path / "out"
    assert report_main(["--pool", str(a), str(b), "--out", str(out)]) == 0
    md = capsys.readouterr().out
    assert md == (out / "pool.md").read_text()
    data: dict[str, Any] = json.loads((out / "pool.json").read_text())
    assert data["schema"] == "llmload-pool/1" and data["steps"][0]["disagree"] == ["A–B"]
    assert "| C=8 | 2 | 1.25 | " in md and "runs A–B beyond their intervals" in md
    assert "hours to N=3,600 (95 %)" in md
    assert report_main(["--pool", str(a), str(tmp_path / "missing")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_one_run_the_same_run_twice_and_different_profiles_are_refused(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.0, 0.9, 1.1, 100.0)], profile="q")
    c = _run(tmp_path, "c", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    with pytest.raises(PoolError, match=r"at least 2 run directories \(got 0\)"):
        build_pool([])
    with pytest.raises(PoolError, match=r"at least 2 run directories \(got 1\)"):
        build_pool([a])
    with pytest.raises(PoolError, match=r"the same run is given more than once \(a\)"):
        build_pool([a, c, a])
    with pytest.raises(PoolError, match=r"different profiles \(A p .*, B q .*\).*llmload compare"):
        build_pool([a, b])


def test_a_run_to_run_lower_bound_at_or_below_zero_is_no_bound(tmp_path: Path) -> None:
    """Two runs far apart (0.1 and 1.0 usable/s): mean − t(1)·s/√2 < 0; a rate is >= 0, so the lower bound is
    None and hours to N have no upper bound (fresh-user finding: the pool printed −0.102–0.497 req/s)."""
    a = _run(tmp_path, "a", [("C=8", 0.1, 0.05, 0.15, 100.0)])
    b = _run(tmp_path, "b", [("C=8", 1.0, 0.9, 1.1, 100.0)])
    (row,) = build_pool([a, b]).steps
    assert row.run_low is None and row.run_high is not None and row.run_high > 1.0
    (h,) = row.hours
    assert h.run_hours_high is None and h.run_hours_low is not None
