"""The terminal summary (:mod:`harness.report.summary`) at the terminal's width and with compressed time."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.build import write_report
from harness.report.catalogue import FIGURES, hours_text
from harness.report.fmt import MAX_WIDTH
from harness.report.summary import DROP_ORDER, MIN_WIDTH, render_summary, summary_width
from tests.report.test_html import _scenario


@pytest.mark.parametrize("cols", [100, 90, 80])
def test_every_line_fits_the_width_and_the_answer_stays(tmp_path: Path, cols: int) -> None:
    rep, _ = write_report(_scenario(tmp_path / "run"))
    out = render_summary(rep, None, width=cols)
    lines = out.splitlines()
    assert max(len(x) for x in lines) <= cols, [x for x in lines if len(x) > cols]
    assert "hours to" in out and "N=" in out
    for row in rep.steps:  # the answer of every step is on the terminal
        assert hours_text(row.hours[0]) in out
    wide = render_summary(rep, None, width=120)
    assert FIGURES["per_stream_tps"].short[0] in wide and "Left out" not in wide
    if cols < 120:
        left = next(x for x in lines if x.startswith("(Left out at"))
        assert FIGURES[DROP_ORDER[0]].label in left


def test_the_width_follows_the_terminal_within_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    for cols, want in ((100, 100), (200, MAX_WIDTH), (40, MIN_WIDTH)):
        monkeypatch.setenv("COLUMNS", str(cols))
        assert summary_width() == want


def test_compressed_time_shows_the_real_time_hours_as_report_md(tmp_path: Path) -> None:
    rep, md = write_report(_scenario(tmp_path / "run", {"simulator": {"time_scale": 0.5}}))
    out = render_summary(rep, None, width=120)
    assert out.count("COMPRESSED TIME") == 1 and "real-time equivalents" in out and "hours to (real time)" in out
    for row in rep.steps:
        assert row.real_time is not None
        real, compressed = hours_text(row.real_time.hours[0]), hours_text(row.hours[0])
        assert real in out and real in md  # the same text as report.md's real-time table
        if compressed != real:
            assert compressed not in out
    single = rep.steps[0]
    assert single.real_time is not None and single.real_time.output_tps == pytest.approx(single.output_tps * 0.5)
