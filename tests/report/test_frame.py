"""The columnar record reader: schema from RequestResult, tolerance like read_records, chunking invisible."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from harness.records import read_records
from harness.report.frame import (
    DEFAULT_COLUMNS,
    LAZY_COLUMNS,
    RECORD_SCHEMA,
    ROW,
    iter_frames,
    read_frame,
)
from harness.result import RequestResult
from tests.report.rundir import rec

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run"


def demo_run(dest: Path) -> Path:
    """A copy of the recorded demo run (``locust -f locustfiles/k26.py --headless``) in ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("run.json", "phases.jsonl"):
        shutil.copy(DEMO / name, dest / name)
    with gzip.open(DEMO / "records.jsonl.gz", "rb") as f:
        (dest / "records.jsonl").write_bytes(f.read())
    return dest


def _write(root: Path, text: str, name: str = "records.jsonl") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(text)
    return root


def _lines(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def _same(value: Any, expected: Any) -> bool:
    if isinstance(expected, float) and isinstance(value, float):
        return value == expected or (math.isnan(value) and math.isnan(expected))
    return bool(value == expected)


def _assert_matches_dicts(frame: pl.DataFrame, records: list[dict[str, Any]]) -> None:
    """Every column of every row equals the dict reader's value (JSON null or absent -> None)."""
    assert frame.height == len(records)
    assert frame.get_column(ROW).to_list() == list(range(len(records)))
    hist = {"gap_hist", "itl_hist"}
    for col in frame.columns:
        if col == ROW:
            continue
        got = frame.get_column(col).to_list()
        for i, (g, r) in enumerate(zip(got, records, strict=True)):
            want = r.get(col)
            if col in hist and want is not None:
                assert g is not None
                stats = ("n", "sum", "min", "max")
                assert {k: g[k] for k in stats} == {k: want.get(k) for k in stats}, (col, i)
                assert {int(k): v for k, v in json.loads(g["buckets"]).items()} == {
                    int(k): v for k, v in want["buckets"].items()}, (col, i)
            else:
                assert _same(g, want), (col, i, g, want)


def test_schema_has_one_dtype_per_request_result_field_in_order() -> None:
    fields = [f.name for f in dataclasses.fields(RequestResult) if f.name != "extra"]
    assert list(RECORD_SCHEMA) == fields
    assert set(DEFAULT_COLUMNS) == set(fields) - LAZY_COLUMNS
    assert LAZY_COLUMNS <= set(fields)


def test_full_record_round_trips_with_typed_columns(tmp_path: Path) -> None:
    full = RequestResult(prompt_id="p", prompt_class="c", user="u1", phase="step", step=2, concurrency=8,
                         max_tokens=1024, start_wall=1.7e9, ttft=0.25, e2e=3.5, chunks=3,
                         gap_hist={"n": 2, "sum": 0.5, "min": 0.2, "max": 0.3, "buckets": {"1200": 1, "1240": 1}},
                         itl_hist={"n": 1, "sum": 0.1, "min": 0.1, "max": 0.1, "buckets": {"1150": 1}},
                         chunk_times=[0.25, 0.5, 3.5], chunk_tokens=[1, 2, 3], output_tokens=6, ok=True,
                         usable=True, tpot=0.65, extra={"anything": [1, {"x": 2}]}).to_record()
    bare = RequestResult(prompt_id="q").to_record()  # to_record omits itl_hist / chunk_* when unset
    root = _write(tmp_path / "run", _lines([full, bare]))
    df = read_frame(root, list(RECORD_SCHEMA))
    assert dict(df.schema) == {**RECORD_SCHEMA, ROW: pl.Int64()}
    _assert_matches_dicts(df, [full, bare])
    assert df.get_column("chunk_times").to_list() == [[0.25, 0.5, 3.5], None]
    assert "extra" not in df.columns


def test_lazy_columns_only_when_asked(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([RequestResult(prompt_id="p", chunk_times=[1.0]).to_record()]))
    assert not LAZY_COLUMNS & set(read_frame(root).columns)
    assert read_frame(root, ["step", "chunk_times"]).columns == ["step", "chunk_times", ROW]
    with pytest.raises(KeyError, match="not a record field: bogus"):
        read_frame(root, ["step", "bogus"])


def test_older_records_without_newer_fields_are_null(tmp_path: Path) -> None:
    old = rec("u1", 1, 10, 5)
    for k in ("read_lag_max", "time_source", "ttfat", "gap_hist", "suspect_truncation", "usable", "tpot"):
        old.pop(k, None)
    root = _write(tmp_path / "run", _lines([old]))
    row = read_frame(root).row(0, named=True)
    assert row["read_lag_max"] is None and row["usable"] is None and row["gap_hist"] is None
    assert row["output_tokens"] == 100 and row["step"] == 1


def test_torn_last_line_blank_lines_and_non_objects_like_read_records(tmp_path: Path) -> None:
    recs = [rec(f"u{i}", 1, i, 2.0) for i in range(5)]
    text = "\n" + json.dumps(recs[0]) + "\n\n" + json.dumps(recs[1]) + "\n[1, 2]\n" + _lines(recs[2:])
    root = _write(tmp_path / "run", text + '{"prompt_id": "p", "user": "u9", "st')
    expected = read_records(root)
    assert len(expected) == 6  # read_records keeps the JSON array; the report drops non-objects
    _assert_matches_dicts(read_frame(root), [r for r in expected if isinstance(r, dict)])


def test_invalid_last_line_followed_by_blank_lines_is_dropped(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("u1", 1, 0, 1.0)]) + "garbage\n\n  \n")
    assert read_frame(root).height == 1


def test_corrupt_middle_line_names_file_and_line(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("u1", 1, 0, 1.0)]) + "{not json\n" + _lines([rec("u2", 1, 0, 1.0)]))
    with pytest.raises(ValueError, match=r"records\.jsonl:2: not valid JSON") as got:
        read_frame(root)
    with pytest.raises(ValueError) as want:
        read_records(root)
    assert str(got.value) == str(want.value)
    # the same line number when the bad line is far into a later chunk
    many = _lines([rec(f"u{i}", 1, i, 1.0) for i in range(40)])
    root2 = _write(tmp_path / "run2", many + "{bad\n" + many)
    with pytest.raises(ValueError, match=r"records\.jsonl:41: not valid JSON"):
        read_frame(root2, chunk_bytes=700)


def test_wrong_json_type_is_a_value_error(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("u1", 1, 0, 1.0), {**rec("u1", 1, 0, 1.0), "step": "two"}]))
    with pytest.raises(ValueError, match="wrong JSON type"):
        read_frame(root)


def test_chunking_is_invisible(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    with open(root / "records.jsonl", "ab") as f:  # blank lines then a torn record across chunk edges
        f.write(b"\n" * 50 + b'{"prompt_id": "p", "gap_hist": {"n": 3')
    whole = read_frame(root)
    for size in (1, 700, 4096, 100_000):
        parts = list(iter_frames(root, chunk_bytes=size))
        assert pl.concat(parts).equals(whole), size
    assert len(list(iter_frames(root, chunk_bytes=4096))) > 10
    _assert_matches_dicts(whole, read_records(root))


def test_demo_run_matches_read_records_column_by_column(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    records = read_records(root)
    assert len(records) > 400
    _assert_matches_dicts(read_frame(root, list(RECORD_SCHEMA)), records)


def test_several_record_files_in_name_order_and_empty_runs(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0), rec("b", 1, 1, 1.0)]), "records.jsonl")
    _write(root, _lines([rec("c", 1, 2, 1.0)]), "records-w1.jsonl")
    df = read_frame(root)
    assert df.get_column("user").to_list() == [r["user"] for r in read_records(root)] == ["c", "a", "b"]
    assert df.get_column(ROW).to_list() == [0, 1, 2]
    empty = _write(tmp_path / "empty", "\n\n")
    for d in (empty, tmp_path / "nothing"):
        e = read_frame(d, ["step", "ok"])
        assert e.height == 0 and dict(e.schema) == {"step": pl.Int64(), "ok": pl.Boolean(), ROW: pl.Int64()}
