"""Parquet parts of records.jsonl: written during a run, used by the report only while valid, never a change of
what the report reads (the oracle is always the pure-JSON parse, ``read_frame(..., sidecar=False)``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import harness.records as records_mod
import harness.report.frame as frame_mod
from harness.records import RunDir, read_records
from harness.report.frame import PART_COLUMNS, RECORD_SCHEMA, SIDECAR_KEY, read_frame, sidecar_path
from harness.report.parts import part_path, parts_dir, valid_chain, write_part
from harness.report.parts_writer import convert_ready, next_range, watch
from tests.report.rundir import rec
from tests.report.test_frame import demo_run

PART = 100_000  # bytes per part in these tests: the demo run's 875 kB make 8 parts and a tail
ALL = list(PART_COLUMNS)  # every column a part holds (all but itl_hist)
PART_SCHEMA = {c: RECORD_SCHEMA[c] for c in PART_COLUMNS}


def _json(root: Path, columns: list[str] | None = None) -> pl.DataFrame:
    return read_frame(root, columns, sidecar=False)


def _canon(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each histogram's ``buckets`` text in one key order: polars writes a JSON object read as a String
    in its hash map's order, which differs between processes (a part written by the converter process vs a parse
    in this one); the object is the same."""
    for col in ("gap_hist", "itl_hist"):
        if col in df.columns:
            df = df.with_columns(pl.col(col).struct.with_fields(
                pl.field("buckets").map_elements(lambda t: json.dumps(json.loads(t), sort_keys=True),
                                                 return_dtype=pl.String)))
    return df


def _same(got: pl.DataFrame, expected: pl.DataFrame) -> bool:
    return _canon(got).equals(_canon(expected))


def _parts(root: Path) -> list[str]:
    return sorted(p.name for p in parts_dir(root / "records.jsonl").glob("*.parquet"))


def _no_json(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> Any:
        raise AssertionError("parsed the JSON")
    monkeypatch.setattr(frame_mod, "_json_frames", boom)


def _json_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte offsets the reads parse the JSON from, from now on (each ``_json_frames`` call's start)."""
    starts: list[int] = []
    json_frames = frame_mod._json_frames

    def spy(*a: Any, **k: Any) -> Any:
        starts.append(a[5] if len(a) > 5 else k.get("start", 0))
        return json_frames(*a, **k)
    monkeypatch.setattr(frame_mod, "_json_frames", spy)
    return starts


def _running(root: Path) -> Path:
    (root / "run.json").write_text(json.dumps({"status": "running"}))
    return root


def _converted(tmp_path: Path, status: str = "finished") -> tuple[Path, int]:
    """A demo run whose records are converted into parts (``PART`` bytes each) up to the returned offset."""
    root = demo_run(tmp_path / "demo")
    status_run = json.loads((root / "run.json").read_text())
    status_run["status"] = status
    (root / "run.json").write_text(json.dumps(status_run))
    end = convert_ready(root / "records.jsonl", 0, PART)
    return root, end


def test_parts_cover_whole_lines_and_equal_the_json_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, end = _converted(tmp_path, "running")
    path = root / "records.jsonl"
    size = path.stat().st_size
    assert 0 < size - end < PART + 10_000  # the rest is shorter than a part: left to the report
    chain = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)
    assert len(chain) == len(_parts(root)) == size // PART
    data = path.read_bytes()
    for p in chain:
        assert data[p.end - 1:p.end] == b"\n" and (p.start == 0 or data[p.start - 1:p.start] == b"\n")
    expected = _json(root, ALL)
    parsed_from = _json_starts(monkeypatch)
    got = read_frame(root, ALL)
    assert parsed_from == [end]  # only the JSON after the parts was parsed
    assert _same(got, expected)
    assert _parts(root) == [p.path.name for p in chain]  # a running run: the tail is not written as a part
    assert not sidecar_path(path).exists()
    sub = read_frame(root, ["step", "schema", "gap_hist", "chunk_times"])
    assert _same(sub, expected.select(sub.columns))


def test_ended_run_writes_its_tail_as_a_part_then_reads_parts_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, end = _converted(tmp_path)
    expected = _json(root, ALL)
    assert _same(read_frame(root, ALL), expected)
    size = (root / "records.jsonl").stat().st_size
    assert _parts(root)[-1] == part_path(root / "records.jsonl", end, size).name
    assert not sidecar_path(root / "records.jsonl").exists()  # the parts are the cache: no whole sidecar too
    _no_json(monkeypatch)
    assert _same(read_frame(root, ALL), expected)


def test_parts_are_written_uncompressed_and_lz4_parts_of_earlier_versions_still_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, end = _converted(tmp_path, "running")
    path = root / "records.jsonl"
    expected = _json(root, ALL)
    chain = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)
    assert chain
    for p in chain:  # rewritten as an earlier version wrote them: lz4, same columns and stamp
        meta = pl.read_parquet_metadata(p.path)
        df = pl.read_parquet(p.path)
        before = p.path.stat().st_size
        df.write_parquet(p.path, compression="lz4", metadata=meta)
        assert p.path.stat().st_size < before  # it was written uncompressed
    assert [q.path for q in valid_chain(path, SIDECAR_KEY, PART_SCHEMA)] == [p.path for p in chain]
    parsed_from = _json_starts(monkeypatch)
    assert _same(read_frame(root, ALL), expected)
    assert parsed_from == [end]  # the lz4 parts were used, only the JSON after them parsed


def test_an_edit_after_the_run_that_the_digests_cannot_see_unseals_the_parts(tmp_path: Path) -> None:
    """After the run the parts are sealed with records.jsonl's stamp; an in-place edit in the middle of a part's
    range that keeps the size and sets the mtime back (the range's end digests unchanged) is still seen: the parts
    are dropped and the figures are the JSON's (then cached as a sidecar)."""
    root = demo_run(tmp_path / "demo")  # its run.json says finished
    path = root / "records.jsonl"
    big = 400_000  # parts of 400 kB: their middles lie outside the 64 KiB digested at each end
    assert convert_ready(path, 0, big) > 0
    read_frame(root, ALL)  # the report after the run: the tail part and the seal
    assert (parts_dir(path) / "sealed.json").exists()
    data = bytearray(path.read_bytes())
    at = data.index(b'"ttft":', big // 2)  # inside the first part, far from both ends of its range
    assert 64 << 10 < at < big - (64 << 10)
    digit = at + len(b'"ttft":')
    assert chr(data[digit]) in "0123456789"
    data[digit] = ord("7") if data[digit] != ord("7") else ord("8")
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    expected = _json(root, ALL)
    got = read_frame(root, ALL)
    assert _same(got, expected)
    assert got.get_column("ttft").to_list() == expected.get_column("ttft").to_list()
    assert not parts_dir(path).exists() and sidecar_path(path).exists()
    assert _same(read_frame(root, ALL), expected)


def test_itl_hist_is_not_in_parts_and_is_read_from_the_json(tmp_path: Path) -> None:
    root, _ = _converted(tmp_path, "running")
    cols = ["step", "itl_hist"]
    assert _same(read_frame(root, cols), _json(root, cols))


@pytest.mark.parametrize("damage", ["rewritten_range", "corrupt_part", "truncated_records", "other_key",
                                    "renamed_part", "missing_column"])
def test_a_stale_or_corrupt_part_is_ignored(tmp_path: Path, damage: str) -> None:
    root, _ = _converted(tmp_path, "running")
    path = root / "records.jsonl"
    chain = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)
    third = chain[2]
    if damage == "rewritten_range":  # same length, other bytes in the third part's last line
        data = bytearray(path.read_bytes())
        at = data.rindex(b'"user":"', third.start, third.end) + len(b'"user":"')
        data[at] = ord("Z") if data[at] != ord("Z") else ord("Y")
        path.write_bytes(bytes(data))
    elif damage == "corrupt_part":
        third.path.write_bytes(b"PAR1 not really parquet PAR1")
    elif damage == "truncated_records":  # cut inside the third part: it and the later ones no longer apply
        with open(path, "r+b") as f:
            f.truncate(third.end - 10)
    elif damage == "other_key":
        df = pl.read_parquet(third.path)
        third.path.unlink()
        write_part(path, df, third.start, third.end, "another-reader")
    elif damage == "renamed_part":  # a part whose name does not match its stamp
        third.path.rename(part_path(path, third.start, third.end + 1))
    elif damage == "missing_column":
        df = pl.read_parquet(third.path).drop("ttft")
        third.path.unlink()
        write_part(path, df, third.start, third.end, SIDECAR_KEY)
    assert len(valid_chain(path, SIDECAR_KEY, PART_SCHEMA)) == 2  # the chain stops before the damaged part
    assert _same(read_frame(root, ALL), _json(root, ALL))


def test_a_gap_in_the_chain_ends_it(tmp_path: Path) -> None:
    root, _ = _converted(tmp_path, "running")
    path = root / "records.jsonl"
    chain = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)
    chain[0].path.unlink()
    assert valid_chain(path, SIDECAR_KEY, PART_SCHEMA) == []
    assert _same(read_frame(root, ALL), _json(root, ALL))


def test_records_appended_after_the_parts_and_a_torn_last_line(tmp_path: Path) -> None:
    root, _ = _converted(tmp_path, "running")
    with open(root / "records.jsonl", "a") as f:
        f.write(json.dumps(rec("late", 1, 9, 1.0)) + "\n" + '{"step": 1, "user": "torn", "st')
    got = read_frame(root, ALL)
    assert _same(got, _json(root, ALL))
    assert got.get_column("user")[-1] == "late"
    assert got.height == len(read_records(root))


def test_a_corrupt_line_after_the_parts_names_its_line(tmp_path: Path) -> None:
    root, _ = _converted(tmp_path, "running")
    lines = (root / "records.jsonl").read_bytes().count(b"\n")
    with open(root / "records.jsonl", "a") as f:
        f.write("{not json\n" + json.dumps(rec("after", 1, 9, 1.0)) + "\n")
    with pytest.raises(ValueError, match=rf"records\.jsonl:{lines + 1}: not valid JSON"):
        read_frame(root, ALL)


def test_next_range_takes_only_whole_flushed_lines(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"a" * 9 + b"\n" + b"b" * 9)  # a 10-byte line, then one still being written
    assert next_range(path, 0, 10) == 10
    assert next_range(path, 0, 5) == 10  # a range ends at the newline after its size
    assert next_range(path, 10, 5) is None  # the second line has no newline yet
    assert next_range(path, 0, 30) is None  # not enough bytes yet


def test_convert_ready_refuses_a_corrupt_line_and_the_report_reports_it(tmp_path: Path) -> None:
    root = tmp_path / "run"
    root.mkdir()
    _running(root)
    good = json.dumps(rec("a", 1, 0, 1.0)) + "\n"
    (root / "records.jsonl").write_text(good * 3 + "{broken\n" + good * 3)
    with pytest.raises(ValueError, match="not valid JSON"):
        convert_ready(root / "records.jsonl", 0, 100)
    with pytest.raises(ValueError, match=r"records\.jsonl:4: not valid JSON"):
        read_frame(root)


def test_watch_converts_while_running_and_stops_when_the_run_ends(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    (root / "run.json").write_text(json.dumps({"status": "finished"}))
    watch(root, None, poll_s=0.01, part_bytes=PART)  # ended: returns at once, converts nothing
    assert _parts(root) == []
    _running(root)
    sys_argv = [sys.executable, "-m", "harness.report.parts_writer", str(root), "--poll", "0.05",
                "--part-bytes", str(PART)]
    proc = subprocess.Popen(sys_argv, cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 60
        while len(_parts(root)) < 8 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_parts(root)) == 8
        (root / "run.json").write_text(json.dumps({"status": "finished"}))
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _same(read_frame(root, ALL), _json(root, ALL))


def _write_demo_records(rd: RunDir, records: list[dict[str, Any]]) -> None:
    for r in records:
        rd.write_record(r)


def _demo_records(tmp_path: Path) -> list[dict[str, Any]]:
    src = demo_run(tmp_path / "src")
    return [json.loads(line) for line in (src / "records.jsonl").read_text().splitlines() if line.strip()]


def _wait_for_parts(rd: RunDir, n: int) -> None:
    deadline = time.monotonic() + 60
    while len(_parts(rd.path)) < n and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_parts(rd.path)) >= n


def test_run_dir_starts_the_converter_and_close_stops_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records_mod, "PARTS_AFTER_BYTES", PART)
    records = _demo_records(tmp_path)
    rd = RunDir.create(tmp_path / "out", "t", {})
    _write_demo_records(rd, records[:30])  # ~55 kB: below PARTS_AFTER_BYTES, no converter yet
    assert rd._converter is None
    _write_demo_records(rd, records[30:])
    proc = rd._converter
    assert proc is not None and proc.poll() is None
    _wait_for_parts(rd, 2)
    rd.close()
    assert proc.returncode is not None  # stopped by close()
    assert read_records(rd.path) == read_records(tmp_path / "src")  # every record kept
    assert _same(read_frame(rd.path, ALL), _json(rd.path, ALL))


def test_run_dir_without_parts_never_starts_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records_mod, "PARTS_AFTER_BYTES", 1)
    rd = RunDir.create(tmp_path / "out", "t", {})
    rd.parts = False
    _write_demo_records(rd, _demo_records(tmp_path)[:5])
    assert rd._converter is None
    rd.close()
    assert not parts_dir(rd.path / "records.jsonl").exists()


def test_an_interrupted_run_keeps_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's process dies (SIGKILL of the converter mid-run, records still appended, no close): every record
    is read, parts and JSON together, as the pure-JSON parse reads them."""
    monkeypatch.setattr(records_mod, "PARTS_AFTER_BYTES", PART)
    records = _demo_records(tmp_path)
    rd = RunDir.create(tmp_path / "out", "t", {})
    _write_demo_records(rd, records[:300])
    _wait_for_parts(rd, 1)
    proc = rd._converter
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _write_demo_records(rd, records[300:])
    assert rd._records is not None
    rd._records.write(b'{"schema": 2, "step": 1, "user": "torn')  # killed mid-write
    rd._records.flush()
    assert len(read_records(rd.path)) == len(records)
    got = read_frame(rd.path, ALL)
    assert got.height == len(records)
    assert _same(got, _json(rd.path, ALL))
    rd.close("interrupted")


def test_parts_hold_chunk_times_packed_and_parts_written_before_still_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each record's chunk times are one Binary value in a part (harness.report.packed); a chain mixing such
    parts with parts of an earlier version (``List(Float64)``) reads the records the JSON holds, in one pass (the
    lists) and in the report's second pass (the chunk lists, batch by batch)."""
    from harness.report.frame import CHUNK_COLUMNS, iter_chunk_frames
    from harness.report.packed import unpacked
    from tests.benchmarks import load_benchmark

    gen = load_benchmark("records_gen")
    root = tmp_path / "gen"
    gen.generate(root, gen.GenSpec(600, [4], seed=2, chunk_times="compact"))  # as the demo profile writes them
    _running(root)
    path = root / "records.jsonl"
    end = convert_ready(path, 0, 100_000)
    expected = _json(root, ALL)
    assert expected.get_column("chunk_times").list.len().sum() > 0
    chain = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)
    assert len(chain) >= 4
    for p in chain:
        assert pl.read_parquet_schema(p.path)["chunk_times"] == pl.Binary
    for p in chain[::2]:  # every other part as an earlier version wrote it: the lists, same stamp
        meta = pl.read_parquet_metadata(p.path)
        unpacked(pl.read_parquet(p.path)).write_parquet(p.path, compression="uncompressed", metadata=meta)
        assert pl.read_parquet_schema(p.path)["chunk_times"] == pl.List(pl.Float64)
    assert [q.path for q in valid_chain(path, SIDECAR_KEY, PART_SCHEMA)] == [p.path for p in chain]
    parsed_from = _json_starts(monkeypatch)
    assert _same(read_frame(root, ALL), expected)
    assert parsed_from == [end]  # both kinds of part used, only the JSON after them parsed
    lists = pl.concat(list(iter_chunk_frames(root, chunk_bytes=50_000, batch_rows=300)))
    assert lists.equals(_json(root, list(CHUNK_COLUMNS)).drop("row_nr"))


def test_a_part_whose_chunk_list_holds_a_null_keeps_the_lists(tmp_path: Path) -> None:
    """A hand-edited record with a null inside its chunk times cannot be packed: its part holds the lists."""
    root = tmp_path / "run"
    root.mkdir()
    lines = [rec("u1", 1, float(i), 2.0, chunk_times=[0.5, 1.0 + i], chunk_tokens=[1, 1]) for i in range(40)]
    lines[7]["chunk_times"] = [0.5, None]
    (root / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    _running(root)
    end = convert_ready(root / "records.jsonl", 0, 2_000)
    assert end > 0
    chain = valid_chain(root / "records.jsonl", SIDECAR_KEY, PART_SCHEMA)
    kinds = [pl.read_parquet_schema(p.path)["chunk_times"] for p in chain]
    assert pl.List(pl.Float64) in kinds and pl.Binary in kinds  # the null's part keeps the lists, others packed
    assert _same(read_frame(root, ALL), _json(root, ALL))


def test_a_part_whose_packed_chunk_times_are_broken_is_not_used(tmp_path: Path) -> None:
    """A packed value that is not whole float64s (a part damaged after it was written, its stamp intact): the
    one-pass read does not use the parts, the JSON is the source."""
    from tests.benchmarks import load_benchmark

    gen = load_benchmark("records_gen")
    root = tmp_path / "gen"
    gen.generate(root, gen.GenSpec(300, [4], seed=4, chunk_times="compact"))
    _running(root)
    path = root / "records.jsonl"
    assert convert_ready(path, 0, 100_000) > 0
    part = valid_chain(path, SIDECAR_KEY, PART_SCHEMA)[0].path
    meta = pl.read_parquet_metadata(part)
    df = pl.read_parquet(part)
    broken = df.with_columns(pl.when(pl.int_range(pl.len()) == 1).then(pl.lit(b"\x00" * 12))
                             .otherwise(pl.col("chunk_times")).alias("chunk_times"))
    broken.write_parquet(part, compression="uncompressed", metadata=meta)
    assert valid_chain(path, SIDECAR_KEY, PART_SCHEMA)  # its stamp still says it is valid
    assert _same(read_frame(root, ALL), _json(root, ALL))


def test_a_copied_run_gets_its_parts_written_again_by_the_report(tmp_path: Path) -> None:
    """A run directory copied elsewhere (a new inode: its seal no longer matches) is read from its JSON; the
    report's own read (``parts=True``) then writes the whole file as parts again, as for a run without parts (no
    whole-file sidecar); a plain read caches a sidecar as before."""
    import shutil

    root = demo_run(tmp_path / "demo")
    path = root / "records.jsonl"
    assert convert_ready(path, 0, PART) > 0
    read_frame(root, ALL, parts=True)  # the report after the run: the tail part and the seal
    assert (parts_dir(path) / "sealed.json").exists()
    copy = Path(shutil.copytree(root, tmp_path / "copy"))
    expected = _json(copy, ALL)
    assert _same(read_frame(copy, ALL, parts=True), expected)
    assert _parts(copy) and (parts_dir(copy / "records.jsonl") / "sealed.json").exists()
    assert not sidecar_path(copy / "records.jsonl").exists()
    again = Path(shutil.copytree(root, tmp_path / "again"))
    assert _same(read_frame(again, ALL), expected)  # a plain read: the JSON, then a sidecar
    assert not parts_dir(again / "records.jsonl").exists() and sidecar_path(again / "records.jsonl").exists()
