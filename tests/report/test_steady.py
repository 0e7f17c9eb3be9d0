"""The steady-state window: start at the end of the first wave, carried-over requests, too-short steps."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import build_report
from harness.report.columns import load_frame_run, steady_windows
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _windows(root: Path) -> dict[int, object]:
    run = load_frame_run(root)
    return {p.step: w for p, w in zip(run.phases, steady_windows(run.frame, run.phases), strict=True)}


def test_window_starts_after_first_wave_including_carried_over_request(tmp_path: Path) -> None:
    records = [
        # step 1 (C=2): users a and b
        rec("a", 1, 0, 30, concurrency=2),   # ends 30
        rec("a", 1, 30, 40, concurrency=2),  # ends 70: in flight at step 2's start (50), carried over
        rec("b", 1, 1, 45, concurrency=2),   # ends 46
        rec("b", 1, 46, 10, concurrency=2),  # ends 56, in flight at 50; b sends nothing in step 2
        # step 2 (C=3)
        rec("a", 2, 70, 30, concurrency=3),  # ends 100
        rec("c", 2, 52, 10, concurrency=3),  # ends 62
        rec("c", 2, 62, 10, concurrency=3),
        rec("d", 2, 55, 12, concurrency=3),  # ends 67
    ]
    root = write_run(tmp_path / "run", records,
                     [phase("step", 1, 2, 0), phase("step", 2, 3, 50), run_end(200)])
    w = _windows(root)
    w1, w2 = w[1], w[2]
    # step 1: first ends after 0 are a: 30, b: 46 -> window [46, 50): 4 s, less than half the mean E2E of the
    # step's requests (31.25 s): a step shorter than its requests, NOT steady, naming the duration it needs
    assert not w1.steady and w1.start == pytest.approx(T0 + 46) and w1.end == pytest.approx(T0 + 50)
    assert w1.users == 2
    assert w1.reason == ("step shorter than its requests: the window after the first wave (+46.0 s) lasted 4.0 s, "
                         "less than 0.5 × the mean E2E (31.2 s) of the step's requests; a steady window needs a "
                         "step of ≥ 109 s (first wave + 2 × mean E2E 31.2 s)")
    # step 2: a's carried-over request (ends 70) is the last of the first wave (b: 56, c: 62, d: 67)
    assert w2.steady and w2.start == pytest.approx(T0 + 70) and w2.end == pytest.approx(T0 + 200)
    assert w2.users == 4  # a, b (in flight at 50 only), c, d
    rep = build_report(root)
    assert [r["first_wave_end_s"] for r in rep["steps"]] == pytest.approx([46.0, 20.0])
    assert [r["window_s"] for r in rep["steps"]] == pytest.approx([50.0, 130.0])  # not steady: the whole step


def test_warmup_request_in_flight_delays_single_stream_window(tmp_path: Path) -> None:
    records = [
        rec("w", -1, 5, 20),  # warm-up request ends at 25, after the single phase started at 10
        rec("u1", 0, 10, 10),  # ends 20
        rec("u1", 0, 20, 10),
    ]
    root = write_run(tmp_path / "run", records,
                     [phase("warmup", -1, 1, 0), phase("single", 0, 1, 10), run_end(60)])
    w = _windows(root)
    assert w[0].start == pytest.approx(T0 + 25)


def test_step_too_short_is_flagged_with_burst_figures(tmp_path: Path) -> None:
    # one request spans the whole single-stream phase [0, 30): the first wave ends at +40 s
    records = [rec("u1", 0, 0, 40, ttft=0.0, tokens=400)]
    root = write_run(tmp_path / "run", records, [phase("single", 0, 1, 0), run_end(30)])
    rep = build_report(root)
    (row,) = rep["steps"]
    assert row["steady"] is False
    assert row["not_steady_reason"] == (
        "step too short for steady state: first wave ended at +40.0 s, step lasted 30.0 s; a steady window needs "
        "a step of ≥ 120 s (first wave + 2 × mean E2E 40.0 s)"
    )
    # burst figures over the whole step: 200 reasoning tokens over [0, 0.5] and 200 answer tokens over [0.5, 40],
    # 29.5 s of it inside [0, 30)
    assert row["window_s"] == pytest.approx(30.0)
    assert row["output_tps"] == pytest.approx((200 + 200 * 29.5 / 39.5) / 30)
    assert row["latency_n"] == 1
    assert any("NOT steady" in n for n in rep["notes"])
    from harness.report import render_markdown

    md = render_markdown(rep)
    assert "single †" in md and "NOT steady" in md and "first wave ended at +40.0 s, step lasted 30.0 s" in md


def test_records_without_user_ids_use_first_c_requests(tmp_path: Path) -> None:
    records = [
        rec("", 1, 0, 10, concurrency=2),   # ends 10
        rec("", 1, 1, 15, concurrency=2),   # ends 16
        rec("", 1, 10, 10, concurrency=2),  # ends 20 (third request: not in the first wave)
        rec("", 1, 16, 10, concurrency=2),
    ]
    root = write_run(tmp_path / "run", records, [phase("step", 1, 2, 0), run_end(40)])
    w = _windows(root)[1]
    assert w.method == "first_c_requests"
    assert w.start == pytest.approx(T0 + 16)
    assert any("no user id" in n for n in build_report(root)["notes"])


def test_a_step_shorter_than_its_requests_is_not_steady_and_names_the_duration_needed(tmp_path: Path) -> None:
    """The issue-16 case: a 2.5 s step (it lasted 3.1 s on the wall) of 3 s requests: 8 users' first requests end
    at +3.00..3.07 s, a 0.03 s window holds no completion. Before: steady, "completed 0 … ∞ (no usable
    completions)", ‡ only. Now NOT steady (†) on every surface, its 8 successful requests counted over the whole
    step, and the note names the step duration needed: first wave (3.07 s) + 2 × mean E2E (3 s) = 10 s."""
    from harness.report import render_markdown
    from harness.report.html import render_html
    from harness.report.summary import render_summary

    records = [rec(f"u{i}", 1, 0.01 * i, 3.0, concurrency=8) for i in range(8)]
    root = write_run(tmp_path / "run", records, [phase("step", 1, 8, 0, 2.5), run_end(3.1)])
    rep = build_report(root)
    (row,) = rep.steps
    assert row.steady is False and row.sample == "started_in_step" and row.completed == 8
    reason = ("step shorter than its requests: the window after the first wave (+3.1 s) lasted 0.0 s, less than "
              "0.5 × the mean E2E (3.0 s) of the step's requests; a steady window needs a step of ≥ 10 s (first "
              "wave + 2 × mean E2E 3.0 s)")
    assert row.not_steady_reason == reason
    assert row.low_confidence is None  # the † flag, not ‡
    note = f"C=8: NOT steady, {reason}"
    assert any(n.startswith(note) for n in rep.notes)
    md = " ".join(render_markdown(rep).split())  # notes are wrapped
    assert "C=8 †" in md and f"† C=8: NOT steady, {reason}" in md
    term = " ".join(render_summary(rep).split())
    assert "C=8 †" in term and f"† C=8: NOT steady, {reason}" in term
    assert "NOT steady" in render_html(rep, []) and "a steady window needs a step of ≥ 10 s" in render_html(rep, [])
