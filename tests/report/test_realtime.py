"""Real-time equivalents of a compressed-time row (:mod:`harness.report.realtime`) agree with report.md's
real-time table (:attr:`harness.report.model.StepRow.real_time`) wherever that table has the figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.build import write_report
from harness.report.realtime import in_real_time
from tests.report.test_html import _scenario


def test_every_clock_figure_scaled_as_the_real_time_table(tmp_path: Path) -> None:
    rep, _ = write_report(_scenario(tmp_path / "run", {"simulator": {"time_scale": 0.25}}))
    for row in rep.steps:
        real = in_real_time(row, 0.25)
        rt = row.real_time
        assert rt is not None
        for key in ("window_s", "output_tps", "request_rate", "per_stream_tps", "ttft_p50_s", "ttfat_p50_s",
                    "e2e_p50_s", "tpot_mean_s", "e2e_mean_s"):
            assert getattr(real, key) == pytest.approx(getattr(rt, key)), key
        for mine, theirs in zip(real.hours, rt.hours, strict=True):
            for key in ("hours", "hours_low", "hours_high"):
                assert getattr(mine, key) == pytest.approx(getattr(theirs, key)), key
        # the figures the real-time table leaves out follow the same rule; counts do not move
        if row.ttft_p99_s is not None:
            assert real.ttft_p99_s == pytest.approx(row.ttft_p99_s / 0.25)
        assert (real.completed, real.errors, real.truncated_pct) == (row.completed, row.errors, row.truncated_pct)
        if row.hours and row.hours[0].samples_per_hour is not None:
            assert real.hours[0].samples_per_hour == pytest.approx(row.hours[0].samples_per_hour * 0.25)
    assert in_real_time(rep.steps[0], 1.0) is rep.steps[0]


def test_slices_and_history_points_follow_the_same_rule_and_keep_their_timestamps() -> None:
    """A soak slice's and a live-history point's figures in real time (the web view's chart dots and live line
    were in compressed time beside real-time bars); wall timestamps and counts as measured."""
    from harness.report.model import SliceRow, StepRow
    from harness.report.realtime import values_in_real_time

    sl = SliceRow(start_wall=100.0, end_wall=110.0, output_tps=50.0, ttft_p50_s=0.02, ended=7, error_rate=0.1)
    row = StepRow(label="C=8", step=1, concurrency=8, slices=[sl])
    got = in_real_time(row, 0.25).slices[0]
    assert (got.start_wall, got.end_wall, got.ended, got.error_rate) == (100.0, 110.0, 7, 0.1)
    assert got.output_tps == pytest.approx(12.5) and got.ttft_p50_s == pytest.approx(0.08)
    point = {"t": 1234.5, "label": "C=8", "output_tps": 40.0, "ttfat_p99_s": 1.0, "completed": 3, "window_s": 5.0}
    assert values_in_real_time(point, 0.5) == {"t": 1234.5, "label": "C=8", "output_tps": 20.0,
                                               "ttfat_p99_s": 2.0, "completed": 3, "window_s": 10.0}
    assert values_in_real_time(point, 1.0) is point


def test_the_self_certification_figures_stay_in_wall_time() -> None:
    """The client's own figures (CPU, read lag, chunks/s, error bounds) describe the load generator, in wall time:
    not scaled, so the self-certification line reads against its wall-time calibration on every surface."""
    from harness.report.model import StepRow

    row = StepRow(label="C=8", step=1, concurrency=8, ttft_p50_s=0.02, client_read_lag_p99_s=0.004,
                  client_read_lag_p50_s=0.001, client_cpu_share_max=0.3, client_chunks_per_s_proc=1200.0,
                  client_ttft_error_bound_s=0.0003, client_itl_error_bound_s=0.0001)
    got = in_real_time(row, 0.25)
    assert got.ttft_p50_s == pytest.approx(0.08)
    keys = ("client_read_lag_p99_s", "client_read_lag_p50_s", "client_cpu_share_max", "client_chunks_per_s_proc",
            "client_ttft_error_bound_s", "client_itl_error_bound_s")
    assert [getattr(got, k) for k in keys] == [getattr(row, k) for k in keys]
