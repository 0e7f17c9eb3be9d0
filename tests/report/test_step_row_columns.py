"""The step rows copy only :data:`harness.report.columns._ROW_COLUMNS` of a step's records (the memory of a
million-record report): the rows equal those computed from copies of every column, on a generated run with errors,
truncations and chunk times and on the recorded demo run; and a column a row reads that is not listed fails loudly
instead of reading as missing. The two-pass read merges each step's gap histogram at load and drops the
``gap_hist`` column: the rows' gap percentiles are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import harness.report.columns as columns_mod
from harness.report.build import load_report_run, report_settings
from harness.report.columns import FrameRun, load_frame_run, step_gap_histograms, step_rows
from harness.report.exprs import ends_in
from tests.benchmarks import load_benchmark
from tests.report.test_frame import demo_run


@pytest.fixture(scope="module")
def gen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated run (errors with messages and HTTP status, truncations, schema-3 chunk times), two steps."""
    gen = load_benchmark("records_gen")
    out = tmp_path_factory.mktemp("row-columns") / "gen"
    gen.generate(out, gen.GenSpec(1500, [4, 16], seed=5, chunk_times="compact"))
    return out


def _rows(run: FrameRun, monkeypatch: pytest.MonkeyPatch, every: bool) -> list[dict[str, object]]:
    s = report_settings(run.meta)
    with monkeypatch.context() as m:
        if every:
            m.setattr(columns_mod, "_ROW_COLUMNS", tuple(run.main.columns))
        return step_rows(run, s.hours_n, s.time_scale, s.usd_per_hour)


@pytest.mark.parametrize("which", ["generated", "demo"])
def test_rows_from_narrow_copies_equal_rows_from_every_column(which: str, gen_run: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = gen_run if which == "generated" else demo_run(tmp_path / "demo")
    run = load_report_run(run_dir)
    narrow = _rows(run, monkeypatch, every=False)
    wide = _rows(run, monkeypatch, every=True)
    assert len(narrow) >= 2
    assert json.dumps(narrow, sort_keys=True, default=str) == json.dumps(wide, sort_keys=True, default=str)
    if which == "generated":  # the failure table (error_detail, http_status) was exercised
        assert any(r["failures"] for r in narrow)


def test_a_row_column_left_out_fails_loudly(gen_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_report_run(gen_run)
    monkeypatch.setattr(columns_mod, "_ROW_COLUMNS", tuple(c for c in columns_mod._ROW_COLUMNS if c != "ttft"))
    s = report_settings(run.meta)
    with pytest.raises(pl.exceptions.ColumnNotFoundError):
        step_rows(run, s.hours_n, s.time_scale, s.usd_per_hour)


def test_ends_in_reads_two_columns_only() -> None:
    frame = pl.DataFrame({"_end": [1.0, 2.0, 3.0, 4.0], "_usable": [True, False, True, True],
                          "big": ["x" * 10] * 4})
    assert ends_in(frame, "_usable", 1.0, 4.0).to_list() == [3.0]


def test_two_pass_read_merges_the_gaps_then_drops_the_column(gen_run: Path) -> None:
    two = load_report_run(gen_run)
    assert "gap_hist" not in two.frame.columns and two.gaps
    one = load_frame_run(gen_run)  # one pass: the column kept, the rows merge it themselves
    assert "gap_hist" in one.frame.columns and not one.gaps
    as_json = {k: v.to_json() for k, v in two.gaps.items()}
    assert {k: v.to_json() for k, v in step_gap_histograms(one).items()} == as_json
    s = report_settings(two.meta)
    got = step_rows(two, s.hours_n, s.time_scale, s.usd_per_hour)
    want = step_rows(one, s.hours_n, s.time_scale, s.usd_per_hour)
    keys = ("gap_n", "gap_p50_s", "gap_p95_s", "gap_p99_s")
    assert [[r[k] for k in keys] for r in got] == [[r[k] for k in keys] for r in want]
    assert all(r["gap_n"] for r in got)
    two.gaps.clear()  # a window whose histogram was not kept, and no column to merge: an error, not empty gaps
    with pytest.raises(ValueError, match="gap histogram was not merged"):
        step_rows(two, s.hours_n, s.time_scale, s.usd_per_hour)
