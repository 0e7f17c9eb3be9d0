"""harness.jsonl: the one torn-line-tolerant JSON-lines reader (run directories and the simulator's truth log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.jsonl import is_torn_line, read_jsonl


def test_torn_last_line_is_skipped_blank_lines_ignored(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n[2, 3]\n{"a": 4, "b\n\n')
    assert list(read_jsonl(p)) == [{"a": 1}, [2, 3]]
    p.write_text('{"a": 1}\n"s"\n')
    assert list(read_jsonl(p)) == [{"a": 1}, "s"]


@pytest.mark.parametrize("last", ["not json", "garbage", "]", "tru", '"a": 4}'])
def test_an_invalid_last_line_that_is_not_torn_is_an_error(tmp_path: Path, last: str) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n' + last + "\n\n")
    assert not is_torn_line(last.encode())
    with pytest.raises(ValueError, match=r"x\.jsonl:2: not valid JSON"):
        list(read_jsonl(p))


def test_is_torn_line() -> None:
    assert is_torn_line(b'{"a": 4, "b')
    assert is_torn_line(b'  \t{')
    assert not is_torn_line(b"")
    assert not is_torn_line(b"not json")


def test_a_bad_line_before_the_last_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"a": 1}\n\n{nope\n{"a": 2}\n')
    with pytest.raises(ValueError, match=r"x\.jsonl:3: not valid JSON"):
        list(read_jsonl(p))


def test_missing_file(tmp_path: Path) -> None:
    assert list(read_jsonl(tmp_path / "none.jsonl", missing_ok=True)) == []
    with pytest.raises(FileNotFoundError):
        list(read_jsonl(tmp_path / "none.jsonl"))
