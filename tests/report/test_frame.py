"""The columnar record reader: schema from RequestResult, tolerance like read_records, chunking invisible."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import os
import random
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import harness.report.frame as frame_mod
from harness.jsonl import read_jsonl
from harness.records import read_records
from harness.report.frame import (
    DEFAULT_CHUNK_BYTES,
    DEFAULT_COLUMNS,
    LAZY_COLUMNS,
    NULL_READS_AS,
    RECORD_SCHEMA,
    ROW,
    SIDECAR_KEY,
    iter_frames,
    read_frame,
    sidecar_path,
    torn_last_line,
)
from harness.result import RECORD_FIELDS, RequestResult
from tests.report.rundir import rec

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run"
#: One real record of a demo run written before records carried ``schema`` (schema 1).
SCHEMA1 = Path(__file__).resolve().parents[1] / "data" / "record-schema1.jsonl"


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


def raw_records(root: Path) -> list[dict[str, Any]]:
    """The record dicts of a run directory as written (JSON objects of every ``records*.jsonl``, file order)."""
    return [r for p in sorted(root.glob("records*.jsonl")) for r in read_jsonl(p) if isinstance(r, dict)]


def _assert_matches_records(frame: pl.DataFrame, records: list[dict[str, Any]]) -> None:
    """Every column of every row equals the attribute of ``RequestResult.from_record`` of the same record
    (``schema``: the record's ``schema``, 1 when absent)."""
    assert frame.height == len(records)
    assert frame.get_column(ROW).to_list() == list(range(len(records)))
    results = [RequestResult.from_record(r) for r in records]
    hist = {"gap_hist", "itl_hist"}
    for col in frame.columns:
        if col == ROW:
            continue
        got = frame.get_column(col).to_list()
        for i, (g, raw, res) in enumerate(zip(got, records, results, strict=True)):
            want = raw.get("schema", 1) if col == "schema" else getattr(res, col)
            if col in hist and want is not None:
                assert g is not None
                stats = ("n", "sum", "min", "max")
                assert {k: g[k] for k in stats} == {k: want.get(k) for k in stats}, (col, i)
                assert {int(k): v for k, v in json.loads(g["buckets"]).items()} == {
                    int(k): v for k, v in want["buckets"].items()}, (col, i)
            else:
                assert _same(g, want), (col, i, g, want)


def _assert_matches_read_records(frame: pl.DataFrame, root: Path) -> None:
    """The frame equals, column by column, the run's records as :func:`read_records` reads them."""
    records = raw_records(root)
    assert [RequestResult.from_record(r) for r in records] == read_records(root)
    _assert_matches_records(frame, records)


def test_schema_has_one_dtype_per_request_result_field_in_order() -> None:
    fields = [f.name for f in dataclasses.fields(RequestResult) if f.name != "extra"]
    assert list(RECORD_SCHEMA) == ["schema", *fields] == [f.name for f in RECORD_FIELDS if f.name != "extra"]
    assert {"retry_after_s", "error_code"} <= set(RECORD_SCHEMA)
    assert set(DEFAULT_COLUMNS) == set(RECORD_SCHEMA) - LAZY_COLUMNS
    assert LAZY_COLUMNS <= set(fields)


def test_null_reads_as_the_defaults_of_non_nullable_fields() -> None:
    not_null = {f.name for f in RECORD_FIELDS if not f.nullable and f.name != "extra"}
    assert set(NULL_READS_AS) == not_null
    bare = RequestResult.from_record({})
    assert all(NULL_READS_AS[k] == getattr(bare, k) for k in not_null - {"schema"})
    assert NULL_READS_AS["schema"] == 1 and NULL_READS_AS["token_source"] == "estimate"


def test_full_record_round_trips_with_typed_columns(tmp_path: Path) -> None:
    full = RequestResult(prompt_id="p", prompt_class="c", user="u1", phase="step", step=2, concurrency=8,
                         max_tokens=1024, start_wall=1.7e9, ttft=0.25, e2e=3.5, chunks=3,
                         gap_hist={"n": 2, "sum": 0.5, "min": 0.2, "max": 0.3, "buckets": {"1200": 1, "1240": 1}},
                         itl_hist={"n": 1, "sum": 0.1, "min": 0.1, "max": 0.1, "buckets": {"1150": 1}},
                         chunk_times=[0.25, 0.5, 3.5], chunk_tokens=[1, 2, 3], output_tokens=6, ok=True,
                         usable=True, tpot=0.65, retry_after_s=2.5,
                         error_code="rate_limited", extra={"anything": [1, {"x": 2}]}).to_record()
    bare = RequestResult(prompt_id="q").to_record()  # to_record omits itl_hist / chunk_* when unset
    root = _write(tmp_path / "run", _lines([full, bare]))
    df = read_frame(root, list(RECORD_SCHEMA))
    assert dict(df.schema) == {**RECORD_SCHEMA, ROW: pl.Int64()}
    _assert_matches_read_records(df, root)
    assert df.get_column("chunk_times").to_list() == [[0.25, 0.5, 3.5], None]
    assert df.get_column("schema").to_list() == [3, 3]
    assert df.get_column("retry_after_s").to_list() == [2.5, None]
    assert df.get_column("error_code").to_list() == ["rate_limited", None]
    assert "extra" not in df.columns
    assert read_frame(root).get_column("schema").to_list() == [3, 3]  # a default column


def test_lazy_columns_only_when_asked(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([RequestResult(prompt_id="p", chunk_times=[1.0]).to_record()]))
    assert not LAZY_COLUMNS & set(read_frame(root).columns)
    assert read_frame(root, ["step", "chunk_times"]).columns == ["step", "chunk_times", ROW]
    with pytest.raises(KeyError, match="not a record field: bogus"):
        read_frame(root, ["step", "bogus"])


def test_older_records_without_newer_fields_read_as_from_record(tmp_path: Path) -> None:
    old = rec("u1", 1, 10, 5)
    for k in ("read_lag_max", "time_source", "ttfat", "gap_hist", "suspect_truncation", "usable", "tpot",
              "token_source", "phase"):
        old.pop(k, None)
    nulls = {**rec("u2", 1, 10, 5), "ok": None, "user": None, "concurrency": None, "start_wall": None}
    root = _write(tmp_path / "run", _lines([old, nulls]))
    df = read_frame(root, list(RECORD_SCHEMA))
    row = df.row(0, named=True)
    # nullable fields missing -> null; non-nullable ones -> their RequestResult default
    assert row["read_lag_max"] is None and row["gap_hist"] is None and row["ttfat"] is None
    assert row["usable"] is False and row["suspect_truncation"] is False and row["time_source"] == "read"
    assert row["token_source"] == "estimate" and row["phase"] == "step" and row["schema"] == 1
    assert row["retry_after_s"] is None and row["error_code"] is None
    assert row["output_tokens"] == 100 and row["step"] == 1
    row = df.row(1, named=True)
    assert (row["ok"], row["user"], row["concurrency"], row["start_wall"]) == (False, "", 1, 0.0)
    _assert_matches_read_records(df, root)


def test_schema_1_record_of_a_real_run_reads_like_from_record(tmp_path: Path) -> None:
    line = SCHEMA1.read_text()
    assert '"schema"' not in line
    root = _write(tmp_path / "run", line + _lines([RequestResult.from_record(json.loads(line)).to_record()]))
    df = read_frame(root, list(RECORD_SCHEMA))
    assert df.get_column("schema").to_list() == [1, 3]
    _assert_matches_read_records(df, root)
    one, two = (df.drop("schema", ROW).row(i) for i in (0, 1))
    assert one == two  # the same request as schema 1 and as schema 2


def test_unreadable_schema_is_refused_like_read_records(tmp_path: Path) -> None:
    ok = RequestResult(prompt_id="p").to_record()
    root = _write(tmp_path / "run", _lines([ok] * 30 + [{**ok, "schema": 4}] + [ok] * 30))
    with pytest.raises(ValueError, match=r"record schema 4 is not readable by this harness \(reads \[1, 2, 3\]\)"):
        read_records(root)
    for cols in (None, ["step"], list(RECORD_SCHEMA)):
        for size in (700, DEFAULT_CHUNK_BYTES):
            with pytest.raises(ValueError, match=r"records\.jsonl: record schema 4 is not readable by this harness"):
                read_frame(root, cols, chunk_bytes=size)


def test_torn_last_line_blank_lines_and_non_objects_like_read_records(tmp_path: Path) -> None:
    recs = [rec(f"u{i}", 1, i, 2.0) for i in range(5)]
    text = "\n" + json.dumps(recs[0]) + "\n\n" + json.dumps(recs[1]) + "\n[1, 2]\n" + _lines(recs[2:])
    root = _write(tmp_path / "run", text + '{"prompt_id": "p", "user": "u9", "st')
    assert len(read_records(root)) == 5  # the JSON array and the torn last line are skipped
    _assert_matches_read_records(read_frame(root), root)


def test_torn_last_line_followed_by_blank_lines_is_dropped(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("u1", 1, 0, 1.0)]) + '  {"prompt_id": "p", "st\n\n  \n')
    assert read_frame(root).height == 1
    assert torn_last_line(root / "records.jsonl")


@pytest.mark.parametrize("last", ["garbage", "not json", "]", '"p", "st'])
def test_an_invalid_last_line_that_is_not_torn_is_an_error_like_read_records(tmp_path: Path, last: str) -> None:
    # a kill mid-write leaves the start of a record ("{..."); anything else at the end is corrupt, not torn
    root = _write(tmp_path / "run", _lines([rec("u1", 1, 0, 1.0)]) + last + "\n\n")
    assert not torn_last_line(root / "records.jsonl")
    with pytest.raises(ValueError, match=r"records\.jsonl:2: not valid JSON") as got:
        read_frame(root)
    with pytest.raises(ValueError) as want:
        read_records(root)
    assert str(got.value) == str(want.value)


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
    with pytest.raises(ValueError, match=r"records.jsonl:2: field step: expected an integer, got \"two\""):
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
    _assert_matches_read_records(whole, root)


def test_row_column_is_chunked_like_the_others(tmp_path: Path) -> None:
    """A frame read in many pieces keeps every column (``_row`` too) in the same chunks: a column chunked
    unlike the others makes polars copy the whole frame at the next expression."""
    root = demo_run(tmp_path / "demo")
    whole = read_frame(root, sidecar=False)
    pieces = read_frame(root, chunk_bytes=4096, sidecar=False)
    assert pieces.equals(whole)
    chunks = set(pieces.n_chunks("all"))
    assert len(chunks) == 1 and chunks.pop() > 10
    assert pieces.get_column(ROW).to_list() == list(range(pieces.height))
    # and over several record files: the rows go on counting, still one chunk layout
    shutil.copy(root / "records.jsonl", root / "records-2.jsonl")
    two = read_frame(root, chunk_bytes=4096, sidecar=False)
    assert len(set(two.n_chunks("all"))) == 1
    assert two.get_column(ROW).to_list() == list(range(2 * whole.height))


def test_demo_run_matches_read_records_column_by_column(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    assert len(read_records(root)) > 400
    _assert_matches_read_records(read_frame(root, list(RECORD_SCHEMA)), root)


def test_several_record_files_in_name_order_and_empty_runs(tmp_path: Path) -> None:
    root = _write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0), rec("b", 1, 1, 1.0)]), "records.jsonl")
    _write(root, _lines([rec("c", 1, 2, 1.0)]), "records-w1.jsonl")
    df = read_frame(root)
    assert df.get_column("user").to_list() == [r.user for r in read_records(root)] == ["c", "a", "b"]
    assert df.get_column(ROW).to_list() == [0, 1, 2]
    empty = _write(tmp_path / "empty", "\n\n")
    for d in (empty, tmp_path / "nothing"):
        e = read_frame(d, ["step", "ok"])
        assert e.height == 0 and dict(e.schema) == {"step": pl.Int64(), "ok": pl.Boolean(), ROW: pl.Int64()}


# ------------------------------------------------------------------------------------------- Parquet sidecar


def _ended(root: Path, status: str = "finished") -> Path:
    (root / "run.json").write_text(json.dumps({"status": status}))
    return root


def _no_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any JSON parse fail, so a read that succeeds came from a sidecar."""
    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("parsed the JSON")
    monkeypatch.setattr(frame_mod, "_json_frames", boom)


def test_sidecar_written_for_an_ended_run_and_read_instead_of_the_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = demo_run(tmp_path / "demo")  # its run.json says finished
    (root / "records-w1.jsonl").write_text(_lines([rec("z", 1, 9, 1.0)]))
    json_read = read_frame(root, list(RECORD_SCHEMA), sidecar=False)
    assert not list(root.glob("*.parquet"))  # sidecar=False writes none
    first = read_frame(root, list(RECORD_SCHEMA))
    assert first.equals(json_read)
    assert sorted(p.name for p in root.glob("*.parquet")) == ["records-w1.parquet", "records.parquet"]
    assert sidecar_path(root / "records.jsonl") == root / "records.parquet"
    _no_json(monkeypatch)
    assert read_frame(root, list(RECORD_SCHEMA)).equals(json_read)
    sub = read_frame(root, ["step", "schema", "gap_hist"])  # any subset, in the JSON read's column order
    assert sub.columns == ["schema", "step", "gap_hist", ROW]
    assert sub.equals(json_read.select(sub.columns))
    _assert_matches_read_records(read_frame(root, list(RECORD_SCHEMA)), root)


def test_sidecar_not_written_while_running_or_without_run_json(tmp_path: Path) -> None:
    lines = _lines([rec("a", 1, 0, 1.0)])
    for name, status in (("running", "running"), ("bare", None)):
        root = _write(tmp_path / name, lines)
        if status:
            _ended(root, status)
        assert read_frame(root).height == 1
        assert not list(root.glob("*.parquet")), name


def test_stale_sidecar_is_ignored_and_rewritten(tmp_path: Path) -> None:
    root = _ended(_write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0)])))
    read_frame(root)
    assert (root / "records.parquet").exists()
    with open(root / "records.jsonl", "a") as f:  # appended after the sidecar was written
        f.write(_lines([rec("b", 1, 1, 1.0)]))
    assert read_frame(root).get_column("user").to_list() == ["a", "b"]
    (root / "records.parquet").write_bytes(b"not parquet")  # unreadable: the JSON is the source
    os.utime(root / "records.parquet", ns=(2 * 10**18, 2 * 10**18))
    assert read_frame(root).get_column("user").to_list() == ["a", "b"]


def test_same_size_edit_with_the_mtime_restored_is_not_hidden_by_the_sidecar(tmp_path: Path) -> None:
    """An in-place edit that keeps the file's size, its mtime set back (``touch -r``, a ``cp -p``): the inode change
    time still differs, so the sidecar is stale and the figures are the JSON's."""
    path = _ended(_write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0), rec("b", 1, 1, 1.0)]))) / "records.jsonl"
    read_frame(path.parent)
    assert sidecar_path(path).exists()
    st = path.stat()
    text = path.read_text()
    assert '"user": "b"' in text or '"user":"b"' in text
    path.write_text(text.replace('"b"', '"c"'))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert read_frame(path.parent).get_column("user").to_list() == ["a", "c"]


def test_sidecar_older_than_the_json_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _ended(_write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0)])))
    read_frame(root)
    st = (root / "records.jsonl").stat()
    os.utime(root / "records.parquet", ns=(st.st_mtime_ns - 10**9, st.st_mtime_ns - 10**9))
    calls: list[Path] = []
    real = frame_mod._json_frames
    monkeypatch.setattr(frame_mod, "_json_frames", lambda path, *a, **k: calls.append(path) or real(path, *a, **k))
    assert read_frame(root).get_column("user").to_list() == ["a"]
    assert calls == [root / "records.jsonl"]


def test_sidecar_lacking_a_column_is_widened_not_flip_flopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _ended(_write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0), rec("b", 2, 1, 2.0)])))
    read_frame(root, ["step"])
    assert "ok" not in pl.read_parquet_schema(root / "records.parquet")
    both = read_frame(root, ["ok"])  # not in the sidecar: parsed, the sidecar now holds step and ok
    assert set(pl.read_parquet_schema(root / "records.parquet")) >= {"schema", "step", "ok"}
    _no_json(monkeypatch)
    assert read_frame(root, ["ok"]).equals(both)
    assert read_frame(root, ["step"]).get_column("step").to_list() == [1, 2]


def test_sidecar_of_another_reader_key_is_ignored(tmp_path: Path) -> None:
    root = _ended(_write(tmp_path / "run", _lines([rec("a", 1, 0, 1.0)])))
    read_frame(root, ["step", "user"])
    side = root / "records.parquet"
    meta = json.loads(pl.read_parquet_metadata(side)["llmload_sidecar"])
    assert meta["key"] == SIDECAR_KEY
    forged = pl.DataFrame({"schema": [2], "step": [7], "user": ["forged"]})
    forged.write_parquet(side, metadata={"llmload_sidecar": json.dumps({**meta, "key": "other"})})
    assert read_frame(root, ["step", "user"]).get_column("user").to_list() == ["a"]
    forged.write_parquet(side, metadata={"llmload_sidecar": json.dumps(meta)})  # same stamp: it is trusted
    assert read_frame(root, ["step", "user"]).get_column("user").to_list() == ["forged"]


def test_an_object_that_is_not_a_request_record_is_refused_by_line(tmp_path: Path) -> None:
    good = [rec("u1", 1, i, 1.0) for i in range(30)]
    text = _lines(good[:10]) + '{"schema": 2, "foo": 1}\n' + _lines(good[10:])
    root = _write(tmp_path / "run", text)
    lacks = r"records\.jsonl:11: not a request record \(missing step, start_wall, ok\)"
    for kw in ({}, {"chunk_bytes": 700}, {"sidecar": False}):  # in a piece polars parsed, at any piece
        with pytest.raises(ValueError, match=lacks):
            read_frame(root, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"records\.jsonl:11: not a request record"):
        list(iter_frames(root, ["ttft"]))  # columns asked do not matter: the rule is always checked
    with pytest.raises(ValueError, match=lacks):
        read_records(root)
    # one key missing, in a piece that also needs the careful parse (a non-object line)
    lacking_ok = {k: v for k, v in good[0].items() if k != "ok"}
    root2 = _write(tmp_path / "run2", _lines(good[:3]) + "[1, 2]\n" + _lines([lacking_ok]) + _lines(good[3:5]))
    with pytest.raises(ValueError, match=r"records\.jsonl:5: not a request record \(missing ok\)"):
        read_frame(root2)
    with pytest.raises(ValueError, match=r"records\.jsonl:5: not a request record \(missing ok\)"):
        read_records(root2)


def test_unknown_keys_and_a_torn_last_line_stay_tolerated(tmp_path: Path) -> None:
    good = [{**rec("u1", 1, i, 1.0), "from_a_newer_writer": [1, 2]} for i in range(5)]
    root = _write(tmp_path / "run", _lines(good) + '{"schema": 2, "foo"')
    df = read_frame(root)
    assert df.height == 5
    _assert_matches_read_records(df, root)
    assert read_records(root)[0].extra == {"from_a_newer_writer": [1, 2]}


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("e2e", "abc", 'field e2e: expected a number, got "abc"'),
        ("ttft", True, "field ttft: expected a number, got true"),
        ("output_tokens", 1.5, "field output_tokens: expected an integer, got 1.5"),
        ("ok", 1, "field ok: expected a boolean, got 1"),
        ("gap_hist", {"n": "x"}, 'field gap_hist.n: expected an integer, got "x"'),
        ("gap_hist", [1], "field gap_hist: expected an object, got [1]"),
    ],
)
def test_wrong_json_type_names_the_line_and_the_field(tmp_path: Path, field: str, value: Any, needle: str) -> None:
    good = [rec("u1", 1, i, 1.0) for i in range(300)]
    good[200] = {**good[200], field: value}
    root = _write(tmp_path / "run", _lines(good))
    for kw in ({}, {"chunk_bytes": 5000}):
        with pytest.raises(ValueError) as e:
            read_frame(root, **kw)  # type: ignore[arg-type]
        assert str(e.value) == f"{root / 'records.jsonl'}:201: {needle}"


def test_compact_chunk_times_read_as_from_record_reads_them(tmp_path: Path) -> None:
    """Schema 3 (compact: integer µs deltas, one count for equal counts) and schema 2 (float seconds) records in one
    file: every column, chunk lists included, equals ``from_record``'s attribute, whatever columns are asked; the
    chunks at ttft, t_last_token and ttfat read back as those timings exactly; times within 0.5 µs otherwise."""
    rng = random.Random(7)
    lines, want = [], []
    for i in range(300):
        n = rng.randrange(0, 40)
        t, times = rng.uniform(0.001, 0.3), []
        for _ in range(n):
            times.append(t)
            t += rng.choice((0.0, rng.expovariate(100.0)))
        k = rng.randrange(n) if n else 0
        res = RequestResult("p", step=1, ok=True, start_wall=1.7e9 + i, chunks=n,
                            ttft=times[0] if n else None, t_last_token=times[-1] if n else None,
                            ttfat=times[k] if n and i % 3 else None, e2e=t + 0.01,
                            chunk_times=times or None,
                            chunk_tokens=([1] * n if i % 2 else [rng.randrange(3) for _ in range(n)]) or None)
        want.append(res)
        rec = res.to_record()
        if i % 5 == 0 and n:  # the schema-2 form of the same record: float seconds, one count per chunk
            rec.update(schema=2, chunk_times=times, chunk_tokens=res.chunk_tokens)
        lines.append(rec)
    root = _write(tmp_path / "run", _lines(lines))
    _assert_matches_read_records(read_frame(root, list(RECORD_SCHEMA), sidecar=False), root)
    for cols in (["chunk_tokens"], ["chunk_times"], ["chunk_tokens", "ttfat"]):
        df = read_frame(root, cols, sidecar=False)
        assert df.columns == [*cols, ROW]
        for col in cols:
            assert df.get_column(col).to_list() == [getattr(RequestResult.from_record(r), col) for r in lines]
    got = read_frame(root, ["chunk_times", "chunk_tokens", "ttft", "ttfat", "t_last_token"], sidecar=False)
    for row, res in zip(got.iter_rows(named=True), want, strict=True):
        assert row["chunk_tokens"] == res.chunk_tokens
        if not res.chunk_times:
            assert not row["chunk_times"]
            continue
        assert max(abs(a - b) for a, b in zip(row["chunk_times"], res.chunk_times, strict=True)) <= 0.5e-6 + 1e-12
        assert row["chunk_times"][0] == res.ttft and row["chunk_times"][-1] == res.t_last_token
        if res.ttfat is not None:
            assert res.ttfat in row["chunk_times"]
            assert [c < res.ttfat for c in row["chunk_times"]] == [c < res.ttfat for c in res.chunk_times]
