"""Torn records, interrupted runs, missing phases, and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report import NoRecordsError, build_report, write_report
from harness.report.cli import main
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _simple(root: Path, **kw: object) -> Path:
    records = [rec("u1", 0, 0, 10), rec("u1", 0, 10, 10), rec("u1", 0, 20, 10)]
    return write_run(root, records, [phase("single", 0, 1, 0), run_end(30)], **kw)  # type: ignore[arg-type]


def test_torn_last_line_tolerated(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run", torn_tail='{"prompt_id": "p", "user": "u9", "st')
    rep = build_report(root)
    assert rep["totals"]["requests"] == 3


def test_a_garbage_last_line_is_an_error_not_a_torn_line(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run")
    with open(root / "records.jsonl", "a") as f:
        f.write("not json\n")
    with pytest.raises(ValueError, match=r"records\.jsonl:4: not valid JSON"):
        build_report(root)
    assert main([str(root), "--quiet"]) == 2


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run")
    text = (root / "records.jsonl").read_text().splitlines()
    text.insert(1, "{nope")
    (root / "records.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"records\.jsonl:2"):
        build_report(root)
    assert main([str(root), "--quiet"]) == 2


def test_interrupted_run_without_run_end(tmp_path: Path) -> None:
    records = [
        rec("u1", 0, 0, 10), rec("u1", 0, 10, 10),
        rec("a", 1, 20, 15, concurrency=2), rec("b", 1, 21, 14, concurrency=2),
        rec("a", 1, 35, 20, concurrency=2),  # latest end: 55
        rec("b", 1, 35, 10, concurrency=2),
    ]
    root = write_run(tmp_path / "run", records, [phase("single", 0, 1, 0), phase("step", 1, 2, 20)],
                     {"status": "interrupted"})
    rep = build_report(root)
    assert rep["interrupted"] is True and rep["status"] == "interrupted"
    c2 = rep["steps"][1]
    assert c2["end_source"] == "last_record"
    assert c2["end_wall"] == pytest.approx(T0 + 55)
    assert c2["window_start_wall"] == pytest.approx(T0 + 35)
    assert any("INTERRUPTED" in n for n in rep["notes"])


def test_missing_phases_are_inferred(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run")
    (root / "phases.jsonl").unlink()
    rep = build_report(root)
    (row,) = rep["steps"]
    assert row["end_source"] == "records" and row["requests"] == 3
    assert any("phases.jsonl is missing" in n for n in rep["notes"])


def test_hours_to_n_from_profile_and_override(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run", meta={"profile": {"name": "x", "report": {"hours_to_n": [1000]}}})
    assert build_report(root)["hours_to_n"] == [1000]
    assert build_report(root, n=[5, 7])["hours_to_n"] == [5, 7]


def test_missing_directory_raises_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(NoRecordsError, match="nowhere"):
        build_report(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoRecordsError, match=r"records\.jsonl"):
        build_report(tmp_path / "empty")


def test_write_report_writes_both_files(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run")
    rep, md = write_report(root)
    assert json.loads((root / "report.json").read_text()) == rep.as_dict()
    assert (root / "report.md").read_text() == md


def test_cli_writes_files_and_prints_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple(tmp_path / "run")
    assert main([str(root), "--n", "100000", "900000"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Load report:")  # stdout is not a TTY under pytest: raw Markdown
    assert (root / "report.md").exists() and (root / "report.json").exists()
    assert json.loads((root / "report.json").read_text())["hours_to_n"] == [100000, 900000]


def test_cli_json_and_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple(tmp_path / "run")
    assert main([str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "llmload-report/1"
    assert main([str(root), "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_cli_missing_dir_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-run"
    assert main([str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert str(tmp_path / "empty" / "records.jsonl") in capsys.readouterr().err


def test_python_m_entry_point(tmp_path: Path) -> None:
    root = _simple(tmp_path / "run")
    cwd = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "harness.report", str(root)], cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "# Load report:" in done.stdout and (root / "report.md").exists()
    bad = subprocess.run([sys.executable, "-m", "harness.report", str(tmp_path / "missing")], cwd=cwd,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "missing" in bad.stderr


def test_last_step_ends_at_load_end_not_after_drain(tmp_path: Path) -> None:
    records = [rec("u1", 0, 0, 10), rec("u1", 0, 10, 10), rec("u1", 0, 20, 15)]  # the last one drains to 35
    events = [phase("single", 0, 1, 0), {"event": "load_end", "wall": T0 + 30}, run_end(36)]
    root = write_run(tmp_path / "run", records, events)
    (row,) = build_report(root)["steps"]
    assert row["end_source"] == "load_end" and row["end_wall"] == pytest.approx(T0 + 30)
    assert row["window_s"] == pytest.approx(20.0)  # [10, 30)


def test_profile_simulator_section_does_not_mean_simulated(tmp_path: Path) -> None:
    meta = {"profile": {"name": "x", "simulator": {"time_scale": 0.1}}, "simulator": None,
            "target": {"base_url": "http://gpu:8000/v1", "model": "m", "simulator": False}}
    rep = build_report(_simple(tmp_path / "run", meta=meta))
    assert rep["time_scale"] == 1.0 and rep["simulated"] is False
    meta["simulator"] = {"preset": "demo", "time_scale": 0.25}
    rep = build_report(_simple(tmp_path / "run2", meta=meta))
    assert rep["time_scale"] == 0.25 and rep["simulated"] is True


def _stopped_notes(root: Path, meta: dict[str, object] | None = None, failed: bool = False) -> list[str]:
    """The notes of a run stopped in its single-stream phase with no load_end: the last step ends at run_end."""
    records = [rec("u1", 0, 0, 10), rec("u1", 0, 10, 10), rec("u1", 0, 20, 10, ok=not failed)]
    rep = build_report(write_run(root, records, [phase("single", 0, 1, 0), run_end(31)], meta=meta))
    return [str(n) for n in rep["notes"]]


def test_cut_off_note_only_when_something_was_cut_off_or_failed(tmp_path: Path) -> None:
    note = "Requests cut off when the run stopped"
    assert not any(note in n for n in _stopped_notes(tmp_path / "a"))  # records = every request sent
    assert any(note in n for n in _stopped_notes(tmp_path / "b", failed=True))
    cut = _stopped_notes(tmp_path / "c", meta={"cut_off": 2})
    assert any(note in n for n in cut) and any("raise steps.drain_timeout" in n for n in cut)


def test_cut_off_after_sigterm_says_its_drain_is_fixed(tmp_path: Path) -> None:
    notes = _stopped_notes(tmp_path / "run", meta={"cut_off": 1, "stop_cause": "sigterm"})
    (cut,) = [n for n in notes if n.startswith("CUT OFF")]
    assert "SIGTERM" in cut and "fixed 3 s" in cut and "drain_timeout" not in cut


def test_an_object_that_is_not_a_record_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple(tmp_path / "run")
    text = (root / "records.jsonl").read_text().splitlines()
    text.insert(1, '{"schema": 2, "foo": 1}')
    (root / "records.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(ValueError, match=r"records\.jsonl:2: not a request record \(missing step, start_wall, ok\)"):
        build_report(root)
    assert main([str(root), "--quiet"]) == 2
    assert "records.jsonl:2: not a request record (missing step, start_wall, ok)" in capsys.readouterr().err


def test_a_file_given_for_the_run_directory_is_named_as_a_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = _simple(tmp_path / "run")
    assert main([str(root / "run.json"), "--quiet"]) == 2
    assert f"{root / 'run.json'}: a file, not a run directory (give the directory that holds it: {root})" in \
        capsys.readouterr().err
