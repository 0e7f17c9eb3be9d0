"""The report's two-pass read (harness/report/build.py ``load_report_run``, harness/report/columns.py
``load_frame_run(chunk_edges=...)``, harness/report/frame.py ``iter_chunk_frames``): the chunk lists reduced while
read give the report the lists give, every figure; the second pass reads the same chunk lists from the JSON, a
sidecar or Parquet parts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

import harness.report.frame as frame_mod
from harness.report.build import _report_of, load_report_run, report_chunk_edges
from harness.report.columns import REPORT_COLUMNS, load_frame_run
from harness.report.frame import CHUNK_COLUMNS, iter_chunk_frames, read_frame
from harness.report.parts_writer import convert_ready
from harness.report.series import main_frame, output_tokens_binned, time_bin_s
from harness.report.tokens import CHUNK_BIN_COLUMNS, is_reduced
from tests.benchmarks import load_benchmark
from tests.report.test_columns import assert_same


@pytest.fixture(scope="module")
def gen_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated run with chunk times as the demo profile writes them (schema 3, compact), soak-length steps."""
    gen = load_benchmark("records_gen")
    out = tmp_path_factory.mktemp("two-pass") / "gen"
    gen.generate(out, gen.GenSpec(2500, [4, 16], seed=11, chunk_times="compact"))
    meta = json.loads((out / "run.json").read_text())
    meta.setdefault("profile", {}).setdefault("report", {})["slice_s"] = 20.0  # several soak slices a step
    (out / "run.json").write_text(json.dumps(meta))
    return out


def test_two_pass_report_equals_the_lists_report(gen_run: Path) -> None:
    two = load_report_run(gen_run)
    assert is_reduced(two.frame) and set(CHUNK_BIN_COLUMNS) <= set(two.frame.columns)
    full = load_frame_run(gen_run)
    assert not is_reduced(full.frame)
    reduced_report = _report_of(two, None)  # no fallback: a window cutting a bin would raise here
    lists_report = _report_of(full, None)
    assert any(r.slices for r in lists_report.steps)  # the soak slices' windows are among the edges
    assert_same(lists_report.as_dict(), reduced_report.as_dict())
    # the reduced frame holds no chunk list and fewer bytes than the lists
    assert "chunk_times" not in two.frame.columns
    assert two.frame.estimated_size() < full.frame.estimated_size()


def test_timeline_bins_from_the_reduced_frame(gen_run: Path) -> None:
    two, full = load_report_run(gen_run), load_frame_run(gen_run)
    rep = _report_of(full, None)
    t0 = float(rep.start_wall or 0.0)
    t1 = max([float(r.end_wall or 0.0) for r in rep.steps] + [float(full.main.get_column("_end").max())])
    width = time_bin_s(t1 - t0)
    n = max(1, math.ceil((t1 - t0) / width))
    got = output_tokens_binned(main_frame(two), t0, width, n)
    want = output_tokens_binned(main_frame(full), t0, width, n)
    assert got == pytest.approx(want, rel=1e-12) and sum(want) > 0
    edges = set(report_chunk_edges(two))
    assert t0 in edges and t0 + n * width in edges


def _chunks(root: Path) -> pl.DataFrame:
    return pl.concat(list(iter_chunk_frames(root, chunk_bytes=50_000, batch_rows=300)))


def test_second_pass_reads_the_same_chunks_from_json_sidecar_and_parts(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    gen = load_benchmark("records_gen")
    root = tmp_path / "gen"
    gen.generate(root, gen.GenSpec(600, [4], seed=2, chunk_times="compact"))
    want = read_frame(root, list(CHUNK_COLUMNS), sidecar=False)
    assert want.get_column("chunk_times").list.len().sum() > 0
    assert _chunks(root).equals(want.drop("row_nr"))
    read_frame(root, list(REPORT_COLUMNS))  # an ended run: writes a sidecar holding the chunk lists
    assert (root / "records.parquet").exists()
    calls: list[int] = []
    real = frame_mod._json_frames
    monkeypatch.setattr(frame_mod, "_json_frames", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert _chunks(root).equals(want.drop("row_nr")) and not calls  # from the sidecar
    (root / "records.parquet").unlink()
    meta = json.loads((root / "run.json").read_text())
    (root / "run.json").write_text(json.dumps({**meta, "status": "running"}))
    end = convert_ready(root / "records.jsonl", 0, 100_000)
    assert 0 < end < (root / "records.jsonl").stat().st_size
    calls.clear()  # the converter parsed the JSON it converted
    got = _chunks(root)
    assert got.equals(want.drop("row_nr")) and len(calls) == 1  # the parts, then the JSON after them


def test_records_appended_between_the_passes_read_the_run_again_in_one_pass(
        gen_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run still going (the web view reads it every few seconds) appends records between the passes: the run
    is read again in one pass (the chunk lists kept), consistent, instead of an error on the page (fresh-user
    finding: "the records changed while they were read (5 records, then 6 ...)" in the view's banner)."""
    real = frame_mod.iter_chunk_batches
    calls: list[int] = []

    def more(*a: object, **k: object):  # type: ignore[no-untyped-def]
        calls.append(1)
        for df, decoded in real(*a, **k):  # type: ignore[arg-type]
            yield pl.concat([df, df.head(1)]), decoded  # one record more than pass 1 saw
    monkeypatch.setattr("harness.report.columns.iter_chunk_batches", more)
    run = load_report_run(gen_run)
    assert calls == [1] and not is_reduced(run.frame)  # pass 2 once, then the one-pass read with the lists
    assert run.frame.height == load_frame_run(gen_run).frame.height
    assert set(CHUNK_COLUMNS) <= set(run.frame.columns)


def test_numpy_reduction_gives_the_polars_reduction_report(gen_run: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The report of the numpy reducer (harness/report/chunkbins.py) equals, exactly, the report when every batch is
    reduced by the polars reducer (tokens.reduce_chunks, the path taken for what numpy declines)."""
    import shutil

    from harness.report.chunkbins import reduce_chunks_flat
    from harness.report.frame import iter_chunk_batches

    run = tmp_path / "run"
    shutil.copytree(gen_run, run)
    edges = report_chunk_edges(load_frame_run(run, chunk_edges=lambda r: [0.0]))
    batches = list(iter_chunk_batches(run, chunk_bytes=50_000, batch_rows=300))
    assert batches and all(reduce_chunks_flat(b, edges, d) is not None for b, d in batches)  # numpy takes them all
    fast = _report_of(load_report_run(run), None).as_dict()
    monkeypatch.setattr("harness.report.columns.reduce_chunks_flat", lambda *a: None)
    slow = _report_of(load_report_run(run), None).as_dict()
    assert fast == slow  # bit-identical, every figure
