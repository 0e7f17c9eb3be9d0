"""Output tokens by phase (harness/report/tokens.py): reasoning + answer tokens in a window are the aggregate
total on every placement branch, a hand-computed case per branch, and the step row's reasoning / answer tok/s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, render_markdown
from harness.report.fmt import tps
from harness.report.tokens import phase_tokens_in_windows, tokens_in_windows, window_phase_tokens, window_tokens
from harness.result import RequestResult
from tests.report.rundir import frame_of, phase, rec, run_end, write_run


def _req(**kw: Any) -> RequestResult:
    """Start 100, TTFT 1, TTFAT 2, end 105; 12 output tokens, 4 of them reasoning; chunks at +1, +1.5 (reasoning:
    before TTFAT), +2, +3, +4 (answer)."""
    base: dict[str, Any] = {"prompt_id": "p", "start_wall": 100.0, "ttft": 1.0, "ttfat": 2.0, "e2e": 5.0,
                            "ok": True, "output_tokens": 12, "reasoning_tokens": 4, "answer_tokens": 8,
                            "chunk_times": [1.0, 1.5, 2.0, 3.0, 4.0]}
    base.update(kw)
    return RequestResult(**base)


BRANCHES: dict[str, dict[str, Any]] = {
    "chunks_even": {},
    "chunks_usage": {"chunk_tokens": [1, 3, 2, 2, 2]},  # 10 shown: 2 more at the end, as answer
    "chunks_usage_scaled": {"chunk_tokens": [4, 4, 4, 4, 4]},  # 20 shown > 12: scaled
    "chunks_no_ttfat": {"ttfat": None},  # every chunk is reasoning; the answer tokens over all chunks
    "chunks_hidden": {"hidden_reasoning": True, "ttft": 2.0, "chunk_times": [2.0, 3.0, 4.0]},  # no reasoning chunk
    "pro_rata": {"chunk_times": None},
    "pro_rata_no_ttfat": {"chunk_times": None, "ttfat": None},
    "pro_rata_no_ttft": {"chunk_times": None, "ttft": None},
    "pro_rata_hidden": {"chunk_times": None, "hidden_reasoning": True, "ttft": 3.0, "ttfat": 3.0},
    "pro_rata_ttfat_after_end": {"chunk_times": None, "ttfat": 6.0},
}


@pytest.mark.parametrize("branch", sorted(BRANCHES))
def test_reasoning_plus_answer_is_the_total_on_every_branch(branch: str) -> None:
    main = frame_of([_req(**BRANCHES[branch]), _req(start_wall=101.3, **BRANCHES[branch])])
    grid = [(99.0 + 0.25 * i, 99.25 + 0.25 * i) for i in range(40)]
    phases = phase_tokens_in_windows(main, grid)
    totals = tokens_in_windows(main, grid)
    assert [r + a for r, a in phases] == totals
    assert all(r >= 0 and a >= 0 for r, a in phases)
    for (w0, w1), (r, a) in zip(grid, phases, strict=True):
        one_r, one_a, _ = window_phase_tokens(main, w0, w1)
        assert (one_r, one_a) == pytest.approx((r, a), abs=1e-9)
        assert window_tokens(main, w0, w1)[0] == one_r + one_a
    # every token of both requests is placed once
    assert sum(totals) == pytest.approx(24.0)
    whole = window_phase_tokens(main, 90.0, 120.0)
    assert whole[0] + whole[1] == pytest.approx(24.0)


@pytest.mark.parametrize(("branch", "w0", "w1", "want"), [
    # reasoning chunks +1, +1.5 carry 4/2 each, answer chunks +2, +3, +4 carry 8/3 each
    ("chunks_even", 101.2, 103.5, (2.0, 16 / 3)),
    # per-chunk usage; the 2 tokens beyond the chunks arrive at the end (105), as answer
    ("chunks_usage", 101.2, 110.0, (3.0, 6.0 + 2.0)),
    ("chunks_usage_scaled", 100.0, 102.5, (8 * 12 / 20, 4 * 12 / 20)),
    # no TTFAT: every chunk a reasoning chunk (4/5 each); the answer tokens over all chunks (8/5 each)
    ("chunks_no_ttfat", 101.2, 103.5, (4 * 3 / 5, 8 * 3 / 5)),
    # hidden: no reasoning chunk, the reasoning tokens over all chunks (4/3 each), the answer's 8/3 each
    ("chunks_hidden", 102.5, 110.0, (4 * 2 / 3, 8 * 2 / 3)),
    # reasoning 4 over [101, 102], answer 8 over [102, 105]
    ("pro_rata", 101.5, 103.5, (2.0, 8 * 1.5 / 3)),
    # no TTFAT: both over the decode interval [101, 105]
    ("pro_rata_no_ttfat", 101.5, 103.5, (4 * 2 / 4, 8 * 2 / 4)),
    # no TTFT: reasoning over [100, 102]
    ("pro_rata_no_ttft", 100.5, 101.5, (4 * 1 / 2, 0.0)),
    # hidden: reasoning over [100, 103], answer over [103, 105]
    ("pro_rata_hidden", 102.0, 104.0, (4 / 3, 4.0)),
    # TTFAT past the end: reasoning over [101, 105], the answer at the end
    ("pro_rata_ttfat_after_end", 103.0, 106.0, (2.0, 8.0)),
])
def test_hand_computed(branch: str, w0: float, w1: float, want: tuple[float, float]) -> None:
    r, a, _ = window_phase_tokens(frame_of([_req(**BRANCHES[branch])]), w0, w1)
    assert (r, a) == pytest.approx(want, abs=1e-12)


def test_step_row_reasoning_and_answer_tps_sum_to_output_tps(tmp_path: Path) -> None:
    recs = [rec(u, 1, 10 * i, 10, concurrency=2) for u in ("a", "b") for i in range(20)]
    recs += [rec("c", 1, 3, 9, chunk_times=[1.0, 1.2, 1.5, 4.0, 8.0], concurrency=2)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0), run_end(200)]))
    (row,) = rep["steps"]
    assert row["output_tps_reasoning"] > 0 and row["output_tps_answer"] > 0
    assert row["output_tps_reasoning"] + row["output_tps_answer"] == pytest.approx(row["output_tps"], rel=1e-12)
    assert "output_tps_reasoning" in rep["definitions"]["output_tps_phase"]


def test_report_md_has_the_phase_table(tmp_path: Path) -> None:
    recs = [rec(u, 1, 10 * i, 10, concurrency=2) for u in ("a", "b") for i in range(20)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0), run_end(200)]))
    (row,) = rep["steps"]
    md = render_markdown(rep)
    line = f"- {row['label']}: {tps(row['output_tps'])} tok/s = reasoning {tps(row['output_tps_reasoning'])} + " \
           f"answer {tps(row['output_tps_answer'])}"
    assert line in md.splitlines()
