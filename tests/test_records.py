"""Run directories: records flushed as written, torn last lines tolerated, secrets kept out of argv."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.records import RunDir, _clean_argv, read_phases, read_records
from harness.result import RequestResult


def test_records_are_on_disk_before_close(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "demo", {"profile": {"name": "demo"}})
    res = RequestResult("p", user="u1", step=2, ok=True, e2e=1.5)
    rd.write_record(res.to_record())
    rd.write_phase({"event": "phase_start", "phase": "single"})
    # Another reader sees the record immediately: nothing waits for close().
    assert read_records(rd.path) == [res]
    meta = json.loads((rd.path / "run.json").read_text())
    assert meta["status"] == "running" and meta["profile"] == {"name": "demo"} and "versions" in meta
    rd.close("interrupted")
    meta = json.loads((rd.path / "run.json").read_text())
    assert meta["status"] == "interrupted" and meta["records"] == 1 and meta["end_wall"] >= meta["start_wall"]
    assert [p["event"] for p in read_phases(rd.path)] == ["phase_start", "run_end"]
    with pytest.raises(ValueError, match="closed"):
        rd.write_record(res.to_record())


def test_unique_directories(tmp_path: Path) -> None:
    a = RunDir.create(tmp_path, "x", {})
    b = RunDir.create(tmp_path, "x", {})
    assert a.path != b.path


def test_torn_last_line_is_skipped_but_a_bad_middle_line_is_an_error(tmp_path: Path) -> None:
    r = '"step": 1, "start_wall": 0.0, "ok": true'  # the keys every request record has
    (tmp_path / "records.jsonl").write_text(
        f'{{"prompt_id": "a", {r}}}\n{{"prompt_id": "b", {r}}}\n{{"prompt_id": "c", "b"')
    assert [r.prompt_id for r in read_records(tmp_path)] == ["a", "b"]
    (tmp_path / "records.jsonl").write_text(f'{{"prompt_id": "a", {r}}}\nnot json\n{{"prompt_id": "c", {r}}}\n')
    with pytest.raises(ValueError, match=r"records.jsonl:2"):
        read_records(tmp_path)


def test_records_of_a_newer_schema_are_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "records.jsonl").write_text('{"schema": 99, "prompt_id": "a"}\n')
    with pytest.raises(ValueError, match="record schema 99"):
        read_records(tmp_path)


def test_argv_secrets_removed() -> None:
    argv = ["locust", "--api-key", "sk-1", "--token=abc", "--host", "http://x"]
    assert _clean_argv(argv) == ["locust", "--api-key", "***", "--token=***", "--host", "http://x"]


def test_url_credentials_are_redacted() -> None:
    from harness.records import redact_url

    assert redact_url("http://user:pw123@10.0.0.1:8000/v1") == "http://***@10.0.0.1:8000/v1"
    assert _clean_argv(["locust", "--host", "https://u:p@h"]) == ["locust", "--host", "https://***@h"]
    assert redact_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"


def test_listeners_see_every_record_and_phase_event_after_it_is_on_disk(tmp_path: Path) -> None:
    """RunDir announces each line it wrote (Locust EventHook style), in order, records typed; close() announces
    run_end. A worker's record dict and a local result reach listeners as equal typed records."""
    rd = RunDir.create(tmp_path, "x", {})
    seen: list[tuple[str, object, int]] = []

    @rd.on_record.add_listener
    def on_record(rec: RequestResult) -> None:
        seen.append(("record", rec, len(read_records(rd.path))))  # already written and flushed

    rd.on_phase.add_listener(lambda ev: seen.append(("phase", ev, len(read_phases(rd.path)))))
    rd.write_phase({"event": "phase_start", "step": 1})
    local = RequestResult(prompt_id="a", user="local:1", e2e=1.5, output_tokens=7)
    rd.write_record(local)
    rd.write_record(RequestResult(prompt_id="b", user="w1:1").to_record())  # a worker's batch: a dict
    rd.on_record.remove_listener(on_record)
    rd.write_record(RequestResult(prompt_id="c").to_record())  # no longer listened to
    rd.close()
    assert [(k, e.prompt_id if isinstance(e, RequestResult) else e["event"], n) for k, e, n in seen] == [
        ("phase", "phase_start", 1),
        ("record", "a", 1),
        ("record", "b", 2),
        ("phase", "run_end", 2),
    ]
    assert seen[1][1] is local and isinstance(seen[2][1], RequestResult)
    assert read_records(rd.path)[0] == local
    with pytest.raises(ValueError):
        rd.on_record.remove_listener(on_record)


def test_a_failing_listener_propagates_after_the_record_is_written(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "x", {})
    later: list[object] = []

    def boom(rec: RequestResult) -> None:
        raise RuntimeError("listener failed")

    rd.on_record.add_listener(boom)
    rd.on_record.add_listener(later.append)
    with pytest.raises(RuntimeError, match="listener failed"):
        rd.write_record(RequestResult(prompt_id="a"))
    rd.close()
    assert [r.prompt_id for r in read_records(rd.path)] == ["a"] and rd.count == 1 and later == []


def test_failed_counts_failures_but_not_the_warm_up(tmp_path: Path) -> None:
    """RunDir.failed (the exit code's source) counts failed records of the measured phases only."""
    rd = RunDir.create(tmp_path, "x", {})
    rd.write_record(RequestResult(prompt_id="w", phase="warmup", step=-1, ok=False, error_class="connect_error"))
    rd.write_record(RequestResult(prompt_id="a", ok=True))
    assert rd.failed == 0
    rd.write_record(RequestResult(prompt_id="a", ok=False, error_class="http_5xx").to_record())
    rd.close()
    assert (rd.count, rd.failed) == (3, 1)


def test_secrets_are_redacted_in_run_json_and_records(tmp_path: Path) -> None:
    key = "azk-run-dir-secret-99"
    rd = RunDir.create(tmp_path, "s", {"profile": {"note": f"key {key}"}}, secrets=(key,))
    bad = RequestResult(prompt_id="p", step=0, start_wall=1.0, ok=False, error_class="http_4xx",
                        error_detail=f"HTTP 401: invalid api-key {key}; Authorization: Bearer tok.en-123")
    good = RequestResult(prompt_id="p", step=0, start_wall=2.0, ok=True)
    seen: list[RequestResult] = []
    rd.on_record.add_listener(seen.append)
    rd.write_record(bad)
    rd.write_record(good.to_record())
    rd.close()
    for f in rd.path.iterdir():
        assert key not in f.read_text(), f.name
        assert "tok.en-123" not in f.read_text(), f.name
    assert "[redacted]" in (rd.path / "run.json").read_text()
    assert read_records(rd.path)[0].error_detail == (
        "HTTP 401: invalid api-key [redacted]; Authorization: Bearer [redacted]")
    assert seen[0].error_detail is not None and key not in seen[0].error_detail
