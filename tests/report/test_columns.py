"""The report (computed by the columnar engine) equals the differential-test oracle (:mod:`tests.report.oracle`,
one RequestResult per record) on the same records, whole report dict included (steps with goodput, soak slices and
drift, warm-up, totals, per-prompt rows, notes): a recorded demo run (schema 1), generated runs (schema 2) and
hand-made edge cases (schema 1 and 2). Exact for counts, strings and flags; 1e-9 relative for floats (sums are
added in a different order); percentiles by the same rule (linear between closest ranks).

``LLMLOAD_FRAME_RUNS=dir1:dir2`` adds run directories of your own to the comparison.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report
from harness.report.build import SOAK_GOODPUT_ROW_KEYS, _sub, _time_scale
from harness.report.columns import (
    REPORT_COLUMNS,
    gap_histogram,
    load_frame_run,
    run_totals,
    steady_windows,
    step_rows,
    warmup_summary,
)
from harness.report.cost import usd_per_hour
from harness.report.frame import RECORD_SCHEMA, read_frame
from harness.report.model import ReportModel
from harness.result import RECORD_SCHEMA as RESULT_SCHEMA
from harness.result import RequestResult
from tests.benchmarks import load_benchmark
from tests.report.oracle import load_run, oracle_report, steady_window
from tests.report.rundir import T0, phase, rec, run_end, write_run
from tests.report.test_frame import demo_run, raw_records

HOURS_N = [100_000, 900_000]




def assert_same(ref: Any, got: Any, path: str = "") -> None:
    """``got`` equals ``ref``: same keys in the same order, same types, exact but for floats (1e-9 relative). A
    typed section (a report model, e.g. a builder's ``CostFigures``) is compared as its JSON form (``as_dict``)."""
    ref, got = (x.as_dict() if isinstance(x, ReportModel) else x for x in (ref, got))
    if isinstance(ref, dict):
        assert isinstance(got, dict), path
        assert list(got) == list(ref), path
        for k in ref:
            assert_same(ref[k], got[k], f"{path}.{k}")
    elif isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), path
        for i, (r, g) in enumerate(zip(ref, got, strict=True)):
            assert_same(r, g, f"{path}[{i}]")
    elif isinstance(ref, float):
        assert isinstance(got, float), (path, ref, got)
        assert math.isclose(got, ref, rel_tol=1e-9, abs_tol=0.0), (path, ref, got)
    else:
        assert type(got) is type(ref) and got == ref, (path, ref, got)


def compare(run_dir: Path, n: list[int] | None = None) -> list[dict[str, Any]]:
    """Assert the frame's phases, windows, rows, totals, warm-up and whole report equal the oracle's; return the
    report's rows."""
    from harness.report.frame import record_files, torn_last_line

    hours_n = n or HOURS_N
    rep = build_report(run_dir, hours_n).as_dict()
    # the note on a torn last line is newer than the (frozen) oracle: checked here, then left out
    torn = [f"{f.name} ends in an incomplete line (the run was killed while writing it): that record was skipped."
            for f in record_files(run_dir) if torn_last_line(f)]
    assert [x for x in rep["notes"] if "ends in an incomplete line" in x] == torn
    rep["notes"] = [x for x in rep["notes"] if x not in torn]
    assert [x for x in rep["input_notes"] if x in torn] == torn  # the run directory's notes, said in the terminal
    rep["input_notes"] = [x for x in rep["input_notes"] if x not in torn]
    assert_same(oracle_report(run_dir, hours_n), rep, "report")
    run = load_run(run_dir)
    fr = load_frame_run(run_dir)
    fr.problems = [x for x in fr.problems if x not in torn]
    assert [vars(p) for p in fr.phases] == [vars(p) for p in run.phases]
    assert (fr.has_run_end, fr.phases_inferred, fr.meta, fr.problems) == (
        run.has_run_end, run.phases_inferred, run.meta, run.problems)
    assert steady_windows(fr.frame, run.phases) == [steady_window(p, run.records) for p in run.phases]
    rows = step_rows(fr, hours_n, _time_scale(run.meta)[0], usd_per_hour(_sub(run.meta, "profile"))[0])
    # goodput, soak slices and drift are added after step_rows (build.run_figures)
    assert all(k in r for r in rep["steps"] for k in SOAK_GOODPUT_ROW_KEYS)
    ref = [{k: v for k, v in r.items() if k not in SOAK_GOODPUT_ROW_KEYS} for r in rep["steps"]]
    assert_same(ref, rows, "steps")
    totals = run_totals(fr)
    unplaced = totals.pop("unplaced")
    assert_same(rep["totals"], totals, "totals")
    assert_same(rep["warmup"], warmup_summary(fr), "warmup")
    placed = {p.step for p in run.phases if p.label != "warmup"}
    main = [r for r in run.records if not (r.phase == "warmup" or r.step < 0)]
    assert unplaced == sum(1 for r in main if r.step not in placed)
    return rep["steps"]


def test_demo_run_every_figure_equal(tmp_path: Path) -> None:
    rows = compare(demo_run(tmp_path / "demo"))
    assert [r["label"] for r in rows] == ["single", "C=8", "C=16", "C=32", "C=64"]
    assert all(r["steady"] for r in rows) and rows[-1]["end_source"] == "load_end"
    assert rows[-1]["gap_n"] > 10_000 and rows[-1]["output_tps"] > rows[1]["output_tps"]


@pytest.mark.parametrize(("records", "conc", "seed"), [(3000, "8,16,32", 0), (1500, "4,64", 7), (400, "2", 3)])
def test_generated_runs_every_figure_equal(tmp_path: Path, records: int, conc: str, seed: int) -> None:
    gen = load_benchmark("records_gen")
    out = tmp_path / "gen"
    got = gen.generate(out, gen.GenSpec(records, [int(c) for c in conc.split(",")], seed=seed))
    assert got["records"] == records
    rows = compare(out)
    assert sum(r["requests"] for r in rows) == records - 1  # all but the warm-up request
    assert any(r["errors"] for r in rows) or records < 1000


def test_generated_records_are_as_to_record_writes_them(tmp_path: Path) -> None:
    gen = load_benchmark("records_gen")
    out = tmp_path / "gen"
    gen.generate(out, gen.GenSpec(6000, [8, 16], seed=5))
    raw = raw_records(out)
    assert len(raw) == 6000
    for r in raw:
        again = RequestResult.from_record(r).to_record()
        assert list(again) == list(r) and again == r
    assert {r["schema"] for r in raw} == {RESULT_SCHEMA}
    assert any(r["retry_after_s"] is not None for r in raw) and any(r["error_code"] is not None for r in raw)
    assert {r["usable_reason"] for r in raw} == {None, "error", "truncated", "min_answer_tokens", "regex", "json"}
    assert 0 < sum(r["hidden_reasoning"] for r in raw) < len(raw)
    frame = read_frame(out, ["schema", "retry_after_s", "error_code", "usable_reason", "hidden_reasoning"])
    for col in ("retry_after_s", "error_code", "usable_reason", "hidden_reasoning"):
        assert frame.get_column(col).to_list() == [r[col] for r in raw], col
    rows = compare(out)
    assert all(r["hidden_reasoning"] and r["cost"] is not None for r in rows)
    assert any(r["by_finish_reason"]["length"]["requests"] for r in rows)


def test_chunk_times_compact_and_float_forms_give_the_same_report(tmp_path: Path) -> None:
    """A generated run with demo-like chunk times (one token a chunk) in the schema-2 float form and in the schema-3
    compact form (integer µs deltas): each equals the oracle, the compact file is under half the size, and the two
    whole reports are the same (1e-9 relative) but for the run id: the chunks at TTFT, TTFAT and the last token
    read back exactly, so no token moves across the reasoning/answer split or a window edge."""
    gen = load_benchmark("records_gen")
    reps = {}
    for form in ("float", "compact"):
        out = tmp_path / form
        gen.generate(out, gen.GenSpec(1500, [4, 16], seed=11, chunk_times=form))
        raw = raw_records(out)
        assert {r["schema"] for r in raw} == {2 if form == "float" else RESULT_SCHEMA}
        assert sum(bool(r.get("chunk_times")) for r in raw) > 1400
        rows = compare(out)
        assert all(r["tokens_by"] == "chunks" for r in rows if r["window_output_tokens"])
        reps[form] = build_report(out, HOURS_N).as_dict()
        reps[form].pop("run_id")
        reps[form].pop("run_dir", None)
    assert (tmp_path / "compact" / "records.jsonl").stat().st_size < 0.5 * (
        tmp_path / "float" / "records.jsonl").stat().st_size
    assert_same(reps["float"], reps["compact"], "report")


def test_generated_run_with_short_steps_is_not_steady(tmp_path: Path) -> None:
    gen = load_benchmark("records_gen")
    out = tmp_path / "gen"
    gen.generate(out, gen.GenSpec(300, [16, 32], step_s=3.0, seed=1))
    rows = compare(out)
    assert not all(r["steady"] for r in rows)


def _edge_records() -> list[dict[str, Any]]:
    gap = {"n": 3, "sum": 0.3, "min": 0.09, "max": 0.11, "buckets": {"11400": 1, "11420": 2}}
    return [
        rec("w", -1, 1, 12, tokens=10),  # warm-up still in flight when the single-stream phase starts
        rec("u1", 0, 10, 10, ttft=1, tokens=90, gap_hist={**gap, "n": 100}),  # before the window
        rec("u1", 0, 20, 10, ttft=None, tokens=90, gap_hist=gap),  # no TTFT: decode from start
        rec("u1", 0, 30, 15, ttft=1, tokens=140, gap_hist={}),
        rec("u1", 1, 45, 20, ttft=2, tokens=180, concurrency=2, read_lag_max=0.5),
        rec("u1", 1, 65, 20, ttft=2, tokens=0, concurrency=2, read_lag_max=0.01),  # no tokens
        rec("u1", 1, 85, 2, ttft=2, tokens=5, concurrency=2),  # e2e == ttft: zero-length decode
        rec("u2", 1, 41, 20, ttft=1, tokens=190, concurrency=2, token_source="estimate"),
        rec("u2", 1, 61, 19, ttft=1, tokens=180, truncated=True, in_reasoning=True, concurrency=2),
        rec("u2", 1, 80, 10, ttft=1, tokens=50, ok=False, concurrency=2, error_class=None),
        rec("u2", 1, 82, 3, ttft=1, tokens=50, ok=False, concurrency=2, error_class=""),
        rec("u2", 1, 85, 3, ttft=1, tokens=50, ok=False, concurrency=2, error_class="http_5xx"),
        rec("u2", 1, 90, 8, ttft=2, tokens=60, truncated=True, concurrency=2, suspect_truncation=True),
        {**rec("u3", 1, 92, 3, ttft=1, tokens=60, concurrency=2), "e2e": None, "t_last_token": 2.5},  # no e2e
        {**rec("u3", 1, 93, 3, ttft=1, tokens=60, concurrency=2), "e2e": None, "t_last_token": None},
        {**rec("u4", 1, 94, 3, ttft=1, tokens=60, concurrency=2), "start_wall": None},
        rec("u3", 7, 93, 3, ttft=1, tokens=60, concurrency=2),  # a step no phase names
    ]


def _edge_phases() -> list[dict[str, Any]]:
    return [phase("warmup", -1, 1, 0), phase("single", 0, 1, 10, 30), phase("step", 1, 2, 40, 60), run_end(100)]


def test_edge_cases_every_figure_equal(tmp_path: Path) -> None:
    root = write_run(tmp_path / "run", _edge_records(), _edge_phases())
    rows = compare(root)
    assert rows[1]["step_errors_by_class"] == {"http_5xx": 1, "unknown": 2}
    assert rows[0]["gap_n"] == 3


def test_current_records_among_schema_1_records(tmp_path: Path) -> None:
    records = _edge_records()
    for i, r in enumerate(records):  # every other record as the harness writes it now, with the newer fields
        if i % 2:
            r["retry_after_s"], r["error_code"] = (2.0, "overloaded") if not r["ok"] else (None, None)
            records[i] = RequestResult.from_record(r).to_record()
    assert {r.get("schema", 1) for r in records} == {1, RESULT_SCHEMA}
    rows = compare(write_run(tmp_path / "run", records, _edge_phases()))
    assert rows[1]["step_errors_by_class"] == {"http_5xx": 1, "unknown": 2}


def test_older_records_without_newer_fields(tmp_path: Path) -> None:
    records = _edge_records()
    for i, r in enumerate(records):
        for k in ("read_lag_max", "ttfat", "gap_hist", "token_source", "suspect_truncation", "tpot"):
            r.pop(k, None)
        if i % 3 == 0:
            r.pop("usable", None)
    compare(write_run(tmp_path / "run", records, _edge_phases()))


def test_hidden_reasoning_usable_reasons_and_finish_reasons(tmp_path: Path) -> None:
    records = _edge_records()
    hidden = {"hidden_reasoning": True, "reasoning_chunks": 0, "t_first_reasoning": None}
    changes: dict[int, dict[str, Any]] = {
        1: hidden,  # single stream, before the window
        3: {**hidden, "usable_reason": None},
        4: {**hidden, "answer_tokens": 0},  # hidden, no answer token streamed: no per-stream tokens
        5: {**hidden, "ttft": None, "finish_reason": "tool_calls"},  # hidden without TTFT
        6: {**hidden, "usable": False, "usable_reason": "min_answer_tokens"},
        7: {"usable": False, "usable_reason": "", "finish_reason": ""},  # empty reason: from ok / truncated
        8: {"usable_reason": "truncated", "finish_reason": None},
        9: {"usable_reason": "error"},
        10: hidden,  # failed: not counted as a hidden-reasoning request
        13: {"usable": False, "usable_reason": "json", "hidden_reasoning": None},
        14: {"usable": False, "usable_reason": None, "finish_reason": "content_filter"},  # no reason recorded
        15: {"usable": False, "usable_reason": "regex"},
    }
    for i, change in changes.items():
        records[i].update(change)
    rows = compare(write_run(tmp_path / "run", records, _edge_phases()))
    # one sample per step: every hidden-reasoning request ended outside the steady windows (they still overlap
    # them, so their tokens count, spread from the request start)
    assert rows[0]["hidden_reasoning"] == 0 and rows[1]["hidden_reasoning"] == 0
    assert rows[0]["tokens_by"] == "pro_rata" and rows[0]["window_output_tokens"] > 0
    # a step too short for steady state: its sample (and finish-reason split) is every request of the step
    short = [*_edge_phases()[:-1], run_end(50)]
    rows = compare(write_run(tmp_path / "short", records, short))
    assert not rows[1]["steady"]
    assert rows[1]["hidden_reasoning"] == 3  # records 4, 5, 6; the failed one (10) is not counted
    assert rows[1]["usable_reasons"] == {"error": 3, "json": 1, "min_answer_tokens": 1, "regex": 1,
                                         "truncated": 2, "unknown": 2}
    assert list(rows[1]["by_finish_reason"]) == ["stop", "length", "tool_calls", "none", "content_filter"]


def test_records_without_user_ids_use_the_first_c_requests(tmp_path: Path) -> None:
    records = _edge_records()
    for r in records:
        r["user"] = "" if r["step"] == 1 else r["user"]
    rows = compare(write_run(tmp_path / "run", records, _edge_phases()))
    assert rows[1]["first_wave_method"] == "first_c_requests"


def test_short_step_not_steady_and_compressed_time(tmp_path: Path) -> None:
    phases = [phase("warmup", -1, 1, 0), phase("single", 0, 1, 10, 30), phase("step", 1, 2, 40, 60),
              phase("step", 2, 4, 90, 60), run_end(95)]
    meta = {"simulator": {"time_scale": 0.25}, "target": {"simulator": True}}
    rows = compare(write_run(tmp_path / "run", _edge_records(), phases, meta))
    assert not rows[1]["steady"] and rows[0]["real_time"] is not None
    assert rows[2]["not_steady_reason"] == "no request of this step was recorded"


@pytest.mark.parametrize("case", ["no_phases", "no_run_end", "load_end", "torn_tail", "only_warmup"])
def test_phase_boundaries(tmp_path: Path, case: str) -> None:
    records, phases = _edge_records(), _edge_phases()
    torn = None
    if case == "no_phases":
        phases = []
    elif case == "no_run_end":
        phases = phases[:-1]
    elif case == "load_end":
        phases = [*phases[:-1], {"event": "load_end", "wall": T0 + 90}, run_end(100)]
    elif case == "torn_tail":
        torn = '{"prompt_id": "p", "user": "u9", "st'
    elif case == "only_warmup":
        records = records[:1]
    compare(write_run(tmp_path / "run", records, phases, torn_tail=torn))


def test_gap_histogram_equals_merging_log_histograms(tmp_path: Path) -> None:
    from harness.histogram import LogHistogram

    root = demo_run(tmp_path / "demo")
    frame = read_frame(root, ["gap_hist"])
    merged = LogHistogram()
    for r in load_run(root).records:
        if r.gap_hist:
            merged.merge(LogHistogram.from_json(r.gap_hist))
    for batch in (7, 100_000):
        h = gap_histogram(frame, batch_rows=batch)
        assert (h.counts, h.n, h.min, h.max) == (merged.counts, merged.n, merged.min, merged.max)
        assert math.isclose(h.total, merged.total, rel_tol=1e-12)
        assert [h.quantile(q) for q in (0.0, 0.5, 0.9, 0.99, 1.0)] == [merged.quantile(q) for q in
                                                                      (0.0, 0.5, 0.9, 0.99, 1.0)]


def test_gap_histogram_where_equals_the_filtered_sample(tmp_path: Path) -> None:
    import polars as pl

    root = demo_run(tmp_path / "demo")
    frame = read_frame(root, ["gap_hist", "step", "ok"])
    for where in (pl.col("step") == 2, (pl.col("step") >= 1) & pl.col("ok"), pl.lit(False)):
        want = gap_histogram(frame.filter(where))
        for batch in (7, 100_000):
            got = gap_histogram(frame, batch_rows=batch, where=where)
            assert (got.counts, got.n, got.min, got.max) == (want.counts, want.n, want.min, want.max), where
            assert math.isclose(got.total, want.total, rel_tol=1e-12) or got.total == want.total == 0.0
    assert gap_histogram(frame, where=pl.col("step") == 2).n > 0


def test_main_is_the_non_warmup_records_whether_or_not_warmup_comes_first(tmp_path: Path) -> None:
    """``FrameRun.main`` slices the frame when the warm-up records lead it (zero-copy) and filters otherwise;
    both are exactly ``frame.filter(~warm-up)``."""
    import dataclasses

    import polars as pl

    from harness.report.exprs import WARMUP

    run = load_frame_run(demo_run(tmp_path / "demo"))
    warm = run.frame.get_column(WARMUP)
    assert 0 < int(warm.sum()) < run.frame.height and bool(warm.head(int(warm.sum())).all())
    want = run.frame.filter(~pl.col(WARMUP))
    assert run.main.equals(want)
    # warm-up records after the first step records: the slice would be wrong, the filter is taken
    k = int(warm.sum())
    mixed = pl.concat([run.frame.slice(k, 5), run.frame.head(k), run.frame.slice(k + 5)])
    other = dataclasses.replace(run, frame=mixed)
    assert other.main.equals(mixed.filter(~pl.col(WARMUP)))
    assert other.main.height == want.height
    none = dataclasses.replace(run, frame=want)
    assert none.main.equals(want)


def test_report_columns_are_record_fields() -> None:
    assert set(REPORT_COLUMNS) <= set(RECORD_SCHEMA)


_EXTRA = [Path(p) for p in os.environ.get("LLMLOAD_FRAME_RUNS", "").split(os.pathsep) if p]


@pytest.mark.skipif(not _EXTRA, reason="LLMLOAD_FRAME_RUNS not set")
@pytest.mark.parametrize("run_dir", _EXTRA, ids=str)
def test_your_runs_every_figure_equal(run_dir: Path) -> None:
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    ns = (meta.get("profile") or {}).get("report", {}).get("hours_to_n")
    compare(run_dir, ns if isinstance(ns, list) and ns else None)


def test_tokens_by_chunk_arrival(tmp_path: Path) -> None:
    """Aggregate tokens by chunk arrival (``figures.record_tokens_in``), windows single [20, 40) and C=2
    (94.5, 100): per-chunk usage with the rest (EOS) at the end, inside and outside the window; usage counting
    more tokens than ``output_tokens`` (scaled); no per-chunk usage, a length mismatch or usage summing to 0 (an
    even split); an empty list (pro rata); chunk times exactly on ``w0 - start`` / ``w1 - start``."""
    records = _edge_records()
    variants: dict[int, dict[str, Any]] = {
        2: {"chunk_times": [0.0, 3.0, 9.9], "chunk_tokens": [10, 20, 30]},  # 60 of 90, ends inside: + 30
        3: {"chunk_times": [1.0, 5.0, 10.0, 14.9], "chunk_tokens": [40, 40, 40, 19]},  # 80; ends after: no rest
        12: {"chunk_times": [1.0, 4.5, 6.0, 7.9], "chunk_tokens": [50, 50, 50, 50]},  # 150 x 60 / 200
        13: {"chunk_times": [1.0, 2.5], "chunk_tokens": [1, 2, 3]},  # lengths differ: 60 x 1 / 2
        14: {"chunk_times": []},  # pro rata
        16: {"chunk_times": [0.5, 1.5, 2.5]},  # 60 x 2 / 3
        4: {"chunk_times": [1.0, 4.9, 5.0, 10.0], "chunk_tokens": [0, 0, 0, 0], "hidden_reasoning": True},
    }
    for i, v in variants.items():
        records[i].update(v)
    rows = compare(write_run(tmp_path / "run", records, _edge_phases()))
    assert [r["tokens_by"] for r in rows] == ["mixed", "mixed"]
    # 10..20 pro rata, ends on w0 (90 x 0: a point at w0 - its decode starts at 11, so 0 inside) + 90 + 80
    assert math.isclose(rows[0]["window_output_tokens"], 170.0)
    # every request with chunk times: "chunks"; a step without a steady window counts over [40, 50)
    for r in records:
        if not r.get("chunk_times"):
            r["chunk_times"] = [0.5]
    rows = compare(write_run(tmp_path / "all", records, [*_edge_phases()[:-1], run_end(50)]))
    assert {r["tokens_by"] for r in rows} == {"chunks"}


@pytest.mark.parametrize("slice_s", [2.0, 7.5])
def test_generated_run_with_soak_slices_and_slos_every_figure_equal(tmp_path: Path, slice_s: float) -> None:
    """Soak slices (many per step), drift, goodput and SLO capacity of a generated run equal the oracle's."""
    gen = load_benchmark("records_gen")
    out = tmp_path / "gen"
    gen.generate(out, gen.GenSpec(3000, [8, 16, 32], seed=2))
    meta = json.loads((out / "run.json").read_text())
    meta["profile"]["report"]["slice_s"] = slice_s
    meta["profile"]["slo"] = {"ttft_s": 1.0, "e2e_s": 30.0, "target_share": 0.5}
    (out / "run.json").write_text(json.dumps(meta))
    rows = compare(out)
    assert all(len(r["slices"]) >= 3 for r in rows if r["steady"]) and any(r["steady"] for r in rows)
    assert any(r["slo_met"] for r in rows) and any(r["drift"]["output_tps"] for r in rows if r["slices"])


def test_chunked_records_in_soak_slices(tmp_path: Path) -> None:
    """Chunk arrivals (per-chunk usage, even splits, scaled usage) and pro rata records placed in 2 s slices."""
    records = _edge_records()
    records[2].update({"chunk_times": [0.0, 3.0, 9.9], "chunk_tokens": [10, 20, 30]})
    records[3].update({"chunk_times": [1.0, 5.0, 10.0, 14.9], "chunk_tokens": [40, 40, 40, 19]})
    records[4].update({"chunk_times": [1.0, 4.9, 5.0, 10.0]})
    records[12].update({"chunk_times": [1.0, 4.5, 6.0, 7.9], "chunk_tokens": [50, 50, 50, 50]})
    rows = compare(write_run(tmp_path / "run", records, _edge_phases(), {"profile": {"report": {"slice_s": 2.0}}}))
    assert len(rows[0]["slices"]) == 10 and sum(s["output_tokens"] for s in rows[0]["slices"]) > 0


def test_a_torn_last_line_is_skipped_and_said(tmp_path: Path) -> None:
    from harness.report.frame import torn_last_line

    root = demo_run(tmp_path / "demo")
    path = root / "records.jsonl"
    whole = build_report(root).as_dict()
    assert not torn_last_line(path) and not [n for n in whole["notes"] if "incomplete line" in n]
    with open(path, "ab") as f:
        f.write(b'{"schema": 2, "prompt_id": "p", "step": 1, "gap_hist": {"n": 3')
    assert torn_last_line(path)
    rep = build_report(root).as_dict()
    assert rep["totals"]["requests"] == whole["totals"]["requests"]
    assert [n for n in rep["notes"] if "incomplete line" in n] == [
        "records.jsonl ends in an incomplete line (the run was killed while writing it): that record was skipped."]
    # the same with a newline after it (a line cut by hand or by a crash between writes): skipped AND said (the
    # note was missing: fresh-user finding)
    with open(path, "ab") as f:
        f.write(b"\n")
    assert torn_last_line(path)
    rep = build_report(root).as_dict()
    assert rep["totals"]["requests"] == whole["totals"]["requests"]
    assert len([n for n in rep["notes"] if "incomplete line" in n]) == 1
    # a complete last record without its newline is read, not torn; blank tails are not torn either
    for tail in (b"\n\n  ", b""):
        (tmp_path / "x.jsonl").write_bytes(b'{"a": 1}\n' + tail)
        assert not torn_last_line(tmp_path / "x.jsonl")
    (tmp_path / "y.jsonl").write_bytes(b'{"a": 1}\n{"b": 2}')
    assert not torn_last_line(tmp_path / "y.jsonl") and not torn_last_line(tmp_path / "missing.jsonl")
