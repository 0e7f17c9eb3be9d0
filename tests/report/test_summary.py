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


def test_the_calibration_provenance_is_said_once_not_on_every_step(tmp_path: Path) -> None:
    """Every certified step's line repeated "calibrated against the simulator's truth, ..."; the terminal says it
    once, in the self-certification heading, and each step keeps its bound and calibrated range."""
    from harness.report.selfcert import CALIBRATION_SOURCE

    rep, _ = write_report(_scenario(tmp_path / "run"))
    cert = {"client_selfcert": "certified", "client_ttft_error_bound_s": 0.0003, "client_itl_error_bound_s": 0.0001,
            "client_selfcert_range": {"chunks_per_s": 1000.0, "read_lag_p99_s": 0.004}}
    rep = rep.model_copy(update={"steps": [r.model_copy(update=cert) for r in rep.steps]})
    assert len(rep.steps) >= 2
    out = " ".join(render_summary(rep, None, width=120).split())  # lines wrapped at the width, joined
    assert out.count(CALIBRATION_SOURCE) == 1, out
    assert f"per step; error bounds {CALIBRATION_SOURCE}):" in out
    assert out.count("calibrated up to") == len(rep.steps)
    # no certified step: nothing to source
    plain, _ = write_report(_scenario(tmp_path / "run2"))
    assert all(r.client_selfcert != "certified" for r in plain.steps)
    assert CALIBRATION_SOURCE not in render_summary(plain, None, width=120)


def test_the_run_directorys_damage_is_said_in_the_terminal_not_only_in_report_md(tmp_path: Path) -> None:
    """A torn last records line, a missing phases.jsonl, an unreadable run.json and an empty records file change
    what the figures mean: each note is a '!' line under the header (report.json: ``input_notes``)."""
    import json
    import shutil

    from tests.report.test_frame import demo_run

    root = demo_run(tmp_path / "demo")
    clean, _ = write_report(root)
    assert clean.input_notes == [] and clean.as_dict()["input_notes"] == []
    assert not [ln for ln in render_summary(clean, width=100).splitlines() if ln.startswith("! ")]
    with open(root / "records.jsonl", "rb+") as f:
        f.truncate((root / "records.jsonl").stat().st_size - 300)
    (root / "phases.jsonl").unlink()
    (root / "run.json").write_text('{"run_id": ')
    for cache in ("records.parquet", "records.parts"):
        shutil.rmtree(root / cache, ignore_errors=True) if (root / cache).is_dir() else (root / cache).unlink(
            missing_ok=True)
    rep, _ = write_report(root)
    bang = [ln for ln in render_summary(rep, width=100).splitlines() if ln.startswith("! ")]
    assert [b.split(" ")[1] for b in bang] == ["run.json", "records.jsonl", "phases.jsonl"]
    assert rep.input_notes == rep.notes[:3] and json.loads((root / "report.json").read_text())["input_notes"]
    (root / "records.jsonl").write_text("")
    empty, _ = write_report(root)
    assert any(n.startswith("records.jsonl holds no records") for n in empty.input_notes)
    assert "! records.jsonl holds no records" in render_summary(empty, width=100)


def test_a_fixed_runs_advice_names_its_run_time_not_steps_duration(tmp_path: Path) -> None:
    """A fixed-mode run (--mode fixed, or the web UI's) is as long as its run time: the rows' advice says so."""
    import json

    from harness.report.build import build_report
    from harness.report.columns import FIXED_RUN_TIME
    from tests.report.test_frame import demo_run

    root = demo_run(tmp_path / "demo")
    sweep = build_report(root)
    assert any("steps.duration" in (r.low_confidence_fix or "") for r in sweep.steps)
    meta = json.loads((root / "run.json").read_text())
    (root / "run.json").write_text(json.dumps({**meta, "mode": "fixed"}))
    fixed = build_report(root)
    fixes = [r.low_confidence_fix or "" for r in fixed.steps]
    assert any(FIXED_RUN_TIME in f for f in fixes) and not any("steps.duration" in f for f in fixes)
    assert all(r.hours_interval.duration_key != "steps.duration" for r in fixed.steps)
