"""harness.jsonl: the one torn-line-tolerant JSON-lines reader (run directories and the simulator's truth log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.jsonl import read_jsonl


def test_torn_last_line_is_skipped_blank_lines_ignored(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n[2, 3]\n{"a": 4, "b\n\n')
    assert list(read_jsonl(p)) == [{"a": 1}, [2, 3]]
    p.write_text('{"a": 1}\n"s"\n')
    assert list(read_jsonl(p)) == [{"a": 1}, "s"]


def test_a_bad_line_before_the_last_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{nope\n{"a": 2}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl:3: not valid JSON"):
        list(read_jsonl(p))


def test_missing_file(tmp_path: Path) -> None:
    assert list(read_jsonl(tmp_path / "none.jsonl", missing_ok=True)) == []
    with pytest.raises(FileNotFoundError):
        list(read_jsonl(tmp_path / "none.jsonl"))
