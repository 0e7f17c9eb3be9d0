"""Data files: every format read back, and one test per kind of bad input (one line: file, line, problem)."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest

from harness.config import ProfileError
from harness.profile_check import load_checked_profile
from harness.prompts.files import DataFileError, open_dataset


def _jsonl(tmp_path: Path, rows: list[object], name: str = "d.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    return p


def _msg(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_jsonl_rows_read_back_with_max_tokens_weight_and_extra_body(tmp_path: Path) -> None:
    p = _jsonl(
        tmp_path,
        [
            {"messages": _msg("a"), "max_tokens": 7, "weight": 2, "extra_body": {"top_k": 3}},
            {"messages": _msg("b")},
        ],
    )
    ix = open_dataset(p)
    assert ix.format == "jsonl" and len(ix) == 2
    assert ix.weights is not None and list(ix.weights) == [2.0, 1.0]
    r0, r1 = ix.row(0), ix.row(1)
    assert (r0.line, r0.messages, r0.max_tokens, r0.extra_body) == (1, _msg("a"), 7, {"top_k": 3})
    assert (r1.line, r1.messages, r1.max_tokens, r1.extra_body) == (2, _msg("b"), None, {})


def test_blank_lines_skipped_and_line_numbers_kept(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(b"\n" + orjson.dumps({"messages": _msg("x")}) + b"\n  \n" + orjson.dumps({"messages": _msg("y")}))
    ix = open_dataset(p)
    assert len(ix) == 2 and ix.weights is None
    assert [ix.row(i).line for i in range(2)] == [2, 4]
    assert ix.row(1).messages == _msg("y")  # last line without a newline


def test_sharegpt_takes_system_and_first_human_turn(tmp_path: Path) -> None:
    conv = [{"from": "system", "value": "S"}, {"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]
    p = _jsonl(tmp_path, [{"conversations": conv, "max_tokens": 5}])
    ix = open_dataset(p)
    assert ix.format == "sharegpt"
    r = ix.row(0)
    assert r.messages == [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}] and r.max_tokens == 5


def test_text_one_prompt_per_line(tmp_path: Path) -> None:
    p = tmp_path / "p.txt"
    p.write_text("first prompt\r\n\nsecond é\n", encoding="utf-8")
    ix = open_dataset(p)
    assert ix.format == "text" and len(ix) == 2
    assert ix.row(0).messages == _msg("first prompt") and ix.row(1).messages == _msg("second é")
    assert ix.row(1).line == 3


def test_csv_and_parquet_columns(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text('prompt,w,max_tokens\n"hello, world",2,10\nbye,1.5,\n', encoding="utf-8")
    ix = open_dataset(p, weight_column="w")
    assert ix.format == "csv" and len(ix) == 2 and list(ix.weights or []) == [2.0, 1.5]
    assert ix.row(0).messages == _msg("hello, world") and ix.row(0).max_tokens == 10 and ix.row(0).line == 2
    assert ix.row(1).max_tokens is None
    q = tmp_path / "p.parquet"
    pl.DataFrame({"text": ["x", "y", "z"], "max_tokens": [1, 2, 3]}).write_parquet(q)
    iq = open_dataset(q, column="text")
    assert iq.format == "parquet" and len(iq) == 3 and iq.weights is None
    assert iq.row(2).messages == _msg("z") and iq.row(2).max_tokens == 3 and iq.row(2).line == 3


def _bad(path: Path, expect: str, **kw: str) -> str:
    with pytest.raises(DataFileError) as ei:
        open_dataset(path, **kw)
    msg = str(ei.value)
    assert "\n" not in msg, msg
    assert msg.startswith(str(path.absolute())), msg
    assert expect in msg, msg
    return msg


def test_bad_missing_file(tmp_path: Path) -> None:
    _bad(tmp_path / "nope.jsonl", ": no such file")


def test_bad_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"")
    _bad(p, ": empty: no prompt")


def test_bad_only_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "e.txt"
    p.write_text("\n \n\n")
    _bad(p, ": empty: no prompt")


def test_bad_json_line(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(orjson.dumps({"messages": _msg("a")}) + b"\n{not json\n")
    _bad(p, "d.jsonl:2: not valid JSON")


def test_bad_json_not_an_object(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a")}, [1, 2]])
    _bad(p, "d.jsonl:2: expected a JSON object, got list")


def test_bad_jsonl_without_messages(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a")}, {"messages": _msg("b")}, {"prompt": "c"}])
    _bad(p, "d.jsonl:3: no 'messages'", fmt="jsonl")


def test_bad_jsonl_message_without_content(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": [{"role": "user"}]}])
    _bad(p, "d.jsonl:1: messages[0] needs 'role' and 'content'")


def test_bad_sharegpt_without_conversations(tmp_path: Path) -> None:
    conv = [{"from": "human", "value": "Q"}]
    p = _jsonl(tmp_path, [{"conversations": conv}, {"messages": _msg("x")}])
    _bad(p, "d.jsonl:2: no 'conversations'")  # auto: the first row says ShareGPT


def test_bad_sharegpt_without_human_turn(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"conversations": [{"from": "gpt", "value": "A"}]}])
    _bad(p, "d.jsonl:1: no 'human'")


def test_bad_csv_without_the_column(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("text,weight\nhello,1\n")
    _bad(p, "p.csv:1: no column 'prompt' (columns: text, weight)")


def test_bad_csv_empty_prompt(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text('prompt\nhello\n""\nx\n')
    _bad(p, "p.csv:3: empty prompt")


def test_bad_non_positive_weight_jsonl(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a"), "weight": 1}, {"messages": _msg("b"), "weight": 0}])
    _bad(p, "d.jsonl:2: 'weight' must be a number > 0, got 0")


def test_bad_non_positive_weight_csv(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("prompt,weight\na,1\nb,-2\n")
    _bad(p, "p.csv:3: weight column 'weight' must be a number > 0")


def test_bad_max_tokens_jsonl(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a"), "max_tokens": "lots"}])
    _bad(p, "d.jsonl:1: 'max_tokens' must be an integer > 0, got 'lots'")


def test_bad_max_tokens_csv(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("prompt,max_tokens\na,10\nb,2.5\n")
    _bad(p, "p.csv:3: column 'max_tokens' must be an integer > 0")


def test_bad_extra_body(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a"), "extra_body": [1]}])
    _bad(p, "d.jsonl:1: 'extra_body' must be an object")


def test_bad_unknown_extension(tmp_path: Path) -> None:
    p = tmp_path / "p.xml"
    p.write_text("<a/>")
    _bad(p, "cannot tell the format from the extension '.xml'")


def test_bad_unknown_format(tmp_path: Path) -> None:
    p = _jsonl(tmp_path, [{"messages": _msg("a")}])
    _bad(p, "unknown format 'yaml'", fmt="yaml")


def test_bad_json_array_file(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    p.write_bytes(orjson.dumps([{"messages": _msg("a")}]))
    _bad(p, "d.json:1: a JSON array, not JSON lines")


def test_bad_text_not_utf8(tmp_path: Path) -> None:
    p = tmp_path / "p.txt"
    p.write_bytes(b"ok\n\xff\xfe\n")
    _bad(p, "p.txt:2: not UTF-8")


def test_bad_parquet_not_parquet(tmp_path: Path) -> None:
    p = tmp_path / "p.parquet"
    p.write_text("not parquet")
    _bad(p, "not a readable PARQUET file")


def test_profile_names_the_data_file_line_and_problem(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    _jsonl(data, [{"messages": _msg("a")}, {"messages": _msg("b"), "max_tokens": 0}])
    prof = tmp_path / "p.yaml"
    prof.write_text("name: t\ndataset: {path: data/d.jsonl}\n")  # relative to the profile's directory
    with pytest.raises(ProfileError) as ei:
        load_checked_profile(prof)
    msg = str(ei.value)
    assert msg == f"{prof}: dataset.path: {data / 'd.jsonl'}:2: 'max_tokens' must be an integer > 0, got 0"


def test_profile_missing_data_file(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: t\ndataset: {path: none.jsonl}\n")
    with pytest.raises(ProfileError, match=r"p.yaml: dataset.path: .*none.jsonl: no such file$"):
        load_checked_profile(prof)


def test_bad_csv_without_the_named_weight_column(tmp_path: Path) -> None:
    p = tmp_path / "p.csv"
    p.write_text("prompt,weight\nhello,1\n")
    _bad(p, "p.csv:1: no weight column 'w'", weight_column="w")
