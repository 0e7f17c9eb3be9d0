"""run.json and phases.jsonl typed and read by one reader each (:mod:`harness.report.rundata`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from harness.report.load import read_meta
from harness.report.rundata import (
    ClientCpu,
    LoadEnd,
    OtherEvent,
    PhaseStart,
    RunEnd,
    RunMeta,
    SearchEvent,
    WorkerLost,
    parse_event,
    read_events,
    read_run_meta,
)
from tests.report.test_frame import demo_run


def test_the_demo_runs_files_read_typed_and_back_unchanged(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    problems: list[str] = []
    meta = read_run_meta(root, problems)
    raw = json.loads((root / "run.json").read_text())
    assert problems == [] and isinstance(meta, RunMeta) and meta.run_id == raw["run_id"] == "20261201-135255-demo"
    assert meta.status == "finished" and meta.profile["name"] == "demo" and meta.as_dict() == raw
    assert read_meta(root, []) == meta  # the report reads run.json through it
    events = read_events(root, problems)
    lines = [json.loads(x) for x in (root / "phases.jsonl").read_text().splitlines()]
    assert [e.as_dict() for e in events] == lines and problems == []
    starts = [e for e in events if isinstance(e, PhaseStart)]
    assert [(e.phase, e.step) for e in starts[:3]] == [("warmup", -1), ("single", 0), ("step", 1)]
    assert starts[2].concurrency == 8 and starts[2].planned_duration == 30.0
    assert isinstance(events[-1], RunEnd | LoadEnd)


def test_every_event_kind_and_an_unknown_one() -> None:
    result = {"axis": "rate", "low": 1.0, "high": 8.0, "tolerance": 0.5, "highest_pass": None, "lowest_fail": None,
              "converged": False, "verdict": "v", "probes": []}
    kinds = [
        ({"event": "load_end", "wall": 5.0}, LoadEnd),
        ({"event": "worker_lost", "wall": 6.0, "worker": "w1", "state": "missing", "users": 4, "in_flight": None},
         WorkerLost),
        ({"event": "search", "wall": 7.0, "result": result}, SearchEvent),
        ({"event": "from_the_future", "wall": 8.0, "x": 1}, OtherEvent),
    ]
    for raw, cls in kinds:
        ev = parse_event(raw)
        assert type(ev) is cls and ev.as_dict() == raw
    ev = parse_event(kinds[2][0])
    assert isinstance(ev, SearchEvent) and ev.result is not None and ev.result.axis == "rate"


def test_a_key_of_the_wrong_type_is_dropped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "start_wall": "yesterday", "cut_off": 3}))
    problems: list[str] = []
    meta = read_run_meta(tmp_path, problems)
    assert meta.run_id == "r" and meta.start_wall is None and meta.cut_off == 3
    assert problems == ["run.json: start_wall of the wrong type; ignored."]
    notes: list[str] = []
    ev = parse_event({"event": "phase_start", "phase": "step", "step": "two", "wall": 1.0}, notes)
    assert isinstance(ev, PhaseStart) and ev.step == 0 and "step" not in ev.as_dict()
    assert notes == ["phases.jsonl phase_start event: step of the wrong type; ignored."]


def test_a_malformed_client_cpu_event_is_left_out_with_one_warning_naming_file_and_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = [{"event": "phase_start", "phase": "step", "step": 1, "wall": 1.0},
             {"event": "client_cpu", "wall": 1.0, "process": "w1", "cpu_s": 0.5},
             {"event": "client_cpu", "wall": 2.0, "process": "w1"},
             {"event": "client_cpu", "wall": 3.0, "process": "w1", "cpu_s": "lots"},
             {"event": "client_cpu", "wall": 4.0, "process": "w1", "cpu_s": 2.5}]
    (tmp_path / "phases.jsonl").write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    problems: list[str] = []
    with caplog.at_level(logging.WARNING, logger="harness.report.rundata"):
        events = read_events(tmp_path, problems)
    cpus = [e for e in events if isinstance(e, ClientCpu)]
    assert [(e.wall, e.cpu_s) for e in cpus] == [(1.0, 0.5), (4.0, 2.5)]
    want = (f"{tmp_path / 'phases.jsonl'}:3: a malformed client_cpu event (cpu_s is missing); 2 malformed "
            "client_cpu events in all; left out of the client CPU share (self-certification).")
    assert problems == [want]
    assert [r.getMessage() for r in caplog.records] == [want]


def test_missing_unreadable_or_not_an_object(tmp_path: Path) -> None:
    problems: list[str] = []
    assert read_run_meta(tmp_path, problems) == RunMeta() and "run.json is missing" in problems[0]
    (tmp_path / "run.json").write_text("{")
    assert read_run_meta(tmp_path, problems).as_dict() == {} and "unreadable" in problems[1]
    (tmp_path / "run.json").write_text("[1]")
    assert read_run_meta(tmp_path, problems).as_dict() == {} and len(problems) == 2
    assert read_events(tmp_path) == []  # no phases.jsonl: no events
