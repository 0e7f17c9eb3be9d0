"""harness.report.load: phases and their labels (a step repeated at one concurrency gets its own label)."""

from __future__ import annotations

from pathlib import Path

from harness.report.build import build_report
from harness.report.load import Phase, mark_repeated
from tests.report.rundir import phase, rec, run_end, write_run


def test_repeated_concurrency_labels_name_the_step() -> None:
    ps = [Phase("warmup", -1, 1, 0, 1), Phase("single", 0, 1, 1, 2), Phase("step", 1, 4, 2, 3),
          Phase("step", 2, 8, 3, 4), Phase("step", 3, 4, 4, 5), Phase("step", 4, 8, 5, 6, setting="thinking=on")]
    mark_repeated(ps)
    assert [p.label for p in ps] == ["warmup", "single", "C=4 (step 1)", "C=8", "C=4 (step 3)", "C=8 (thinking=on)"]
    twice = [Phase("step", 1, 8, 0, 1, setting="a=1"), Phase("step", 2, 8, 1, 2, setting="a=1")]
    mark_repeated(twice)
    assert [p.label for p in twice] == ["C=8 (a=1, step 1)", "C=8 (a=1, step 2)"]


def _two_c4_steps(root: Path, with_phases: bool) -> Path:
    records = [rec(f"u{u}", s, 40.0 * (s - 1) + t, 5.0, concurrency=4)
               for s in (1, 2) for u in range(4) for t in range(0, 35, 5)]
    events = [phase("step", 1, 4, 0, 40), phase("step", 2, 4, 40, 40), run_end(80)] if with_phases else []
    return write_run(root, records, events)


def test_a_run_with_two_steps_at_one_concurrency_reports_two_distinct_rows(tmp_path: Path) -> None:
    """``steps.concurrency: [4, 4]`` (e.g. a step held again to compare with the one before it) gave two rows both
    labelled C=4 on every surface; each now names its step, from phases.jsonl or inferred from the records."""
    for with_phases in (True, False):
        rep = build_report(_two_c4_steps(tmp_path / f"run-{with_phases}", with_phases))
        assert [s["label"] for s in rep["steps"]] == ["C=4 (step 1)", "C=4 (step 2)"], with_phases
