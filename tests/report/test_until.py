"""The report's figures of ``steps.until`` (harness/report/until.py): from each step's until event to every
surface (report.json row keys, report.md section, notes, terminal summary)."""

from __future__ import annotations

from pathlib import Path

from harness.report import build_report, render_markdown, render_summary
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _run(root: Path) -> Path:
    recs = [rec(f"u{u}", 1, 0.5 * i, 0.5, concurrency=2) for u in range(2) for i in range(20)]
    recs += [rec(f"u{u}", 2, 10.0 + 0.5 * i, 0.5, concurrency=2) for u in range(2) for i in range(40)]
    events = [phase("step", 1, 2, 0.0),
              {"event": "until", "step": 1, "wall": T0 + 10.0, "reached": True, "at_s": 10.0, "halfwidth": 0.042,
               "margin": 0.05, "window_s": 9.5, "requests": 38},
              phase("step", 2, 2, 10.0),
              {"event": "until", "step": 2, "wall": T0 + 30.0, "reached": False, "at_s": 20.0, "halfwidth": 0.131,
               "margin": 0.05, "window_s": 19.5, "requests": 78},
              run_end(30.0)]
    return write_run(root, recs, events)


def test_each_step_says_whether_and_when_its_margin_was_reached(tmp_path: Path) -> None:
    rep = build_report(_run(tmp_path / "run"))
    a, b = rep.steps
    assert (a.until_reached, a.margin_reached_s, a.margin_halfwidth, a.until_margin) == (True, 10.0, 0.042, 0.05)
    assert (b.until_reached, b.margin_reached_s, b.margin_halfwidth, b.until_at_s) == (False, None, 0.131, 20.0)
    assert "steps.until: C=2 (step 1): margin ±5.0 % reached at 10.0 s (rate ±4.2 %)." in rep.notes
    assert "steps.until: C=2 (step 2): margin ±5.0 % NOT reached in its 20.0 s (rate ±13.1 %)." in rep.notes
    md = render_markdown(rep)
    assert "## Steps until the margin (steps.until: ±5.0 %)" in md
    assert "| C=2 (step 1) | yes | 10.0 | 4.2 |" in md
    assert "| C=2 (step 2) | NOT reached (ended at its max) | – | 13.1 |" in md
    summary = render_summary(rep)
    assert "margin ±5.0 % reached at 10.0 s" in summary and "NOT reached in its 20.0 s" in summary


def test_a_run_without_until_has_none_of_it(tmp_path: Path) -> None:
    recs = [rec(f"u{u}", 1, 0.5 * i, 0.5, concurrency=2) for u in range(2) for i in range(20)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0.0), run_end(10.0)]))
    (row,) = rep.steps
    assert row.until_reached is None and row.margin_reached_s is None and row.margin_halfwidth is None
    assert not [n for n in rep.notes if n.startswith("steps.until")]
    assert "Steps until the margin" not in render_markdown(rep)


def test_a_step_held_by_until_is_told_to_raise_until_max_not_steps_duration(tmp_path: Path) -> None:
    """steps.until bounds a step by ``until.max`` (steps.duration is unused): the no-interval note names it."""
    recs = [rec(f"u{u}", 1, 2.0 * i, 2.0, concurrency=2) for u in range(2) for i in range(4)]
    events = [phase("step", 1, 2, 0.0),
              {"event": "until", "step": 1, "wall": T0 + 8.0, "reached": False, "at_s": 8.0, "halfwidth": None,
               "margin": 0.05, "window_s": 6.0, "requests": 6},
              run_end(8.0)]
    rep = build_report(write_run(tmp_path / "run", recs, events))
    (note,) = [n for n in rep.notes if "hours to N has no interval" in n]
    assert "lengthen steps.until.max to ≥" in note and "steps.duration" not in note


def test_low_confidence_advice_under_until_names_until_not_steps_duration(tmp_path: Path) -> None:
    """A low-confidence step held by until (the margin reached early) is told to raise steps.until.min; one that
    ended at its max, steps.until.max (fresh-user finding: it said 'lengthen steps.duration', unused with until)."""
    recs = [rec(f"u{u}", 1, 4.0 * i, 4.0, concurrency=8) for u in range(8) for i in range(3)]
    recs += [rec(f"u{u}", 2, 12.0 + 4.0 * i, 4.0, concurrency=8) for u in range(8) for i in range(3)]
    events = [phase("step", 1, 8, 0.0),
              {"event": "until", "step": 1, "wall": T0 + 12.0, "reached": True, "at_s": 12.0, "halfwidth": 0.04,
               "margin": 0.05, "window_s": 8.0, "requests": 16},
              phase("step", 2, 8, 12.0),
              {"event": "until", "step": 2, "wall": T0 + 24.0, "reached": False, "at_s": 12.0, "halfwidth": 0.3,
               "margin": 0.05, "window_s": 8.0, "requests": 16},
              run_end(24.0)]
    a, b = build_report(write_run(tmp_path / "run", recs, events)).steps
    assert a.low_confidence and b.low_confidence
    assert a.low_confidence_fix is not None and "raise steps.until.min" in a.low_confidence_fix
    assert b.low_confidence_fix is not None and "raise steps.until.max" in b.low_confidence_fix
    assert "steps.duration" not in a.low_confidence_fix + b.low_confidence_fix
