"""The steps' gap histograms merged in one read of the bucket texts (``harness.report.columns.gap_histograms``,
compiled ``harness._fastrecords.merge_buckets``): equal to the polars merge of each step (``gap_histogram``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import harness.report.columns as columns
from harness.histogram import LogHistogram
from harness.report.columns import OK, gap_histogram, gap_histograms, step_windows
from harness.report.exprs import in_sample
from harness.report.frame import HIST_DTYPE
from tests.benchmarks import load_benchmark
from tests.chunk_paths import compiled


def _merge():  # type: ignore[no-untyped-def]
    """The compiled merge; skips when it was not built (fails under ``LLMLOAD_REQUIRE_NATIVE=1``, as CI sets)."""
    return compiled(columns._MERGE, "the compiled merge (harness._fastrecords.merge_buckets)")


def _same(a: LogHistogram, b: LogHistogram) -> None:
    assert (a.n, a.total, a.min, a.max) == (b.n, b.total, b.min, b.max)
    assert a.counts == {k: v for k, v in b.counts.items() if v}


def _texts(rows: list[str | None]) -> pl.Series:
    return pl.Series("buckets", rows, dtype=pl.String)


@pytest.mark.parametrize(("text", "want"), [
    ('{"937": 12}', {937: 12}),
    ('{"1":2,"3":4}', {1: 2, 3: 4}),
    (' { "5" : 1 ,\t"5": 2 , "7":0 }\n', {5: 3}),
    ("{}", {}),
    ("{ }", {}),
    (None, {}),
    ('{"131071": 999999999999999999}', {131071: 999999999999999999}),
])
def test_merge_reads_the_bucket_texts(text: str | None, want: dict[int, int]) -> None:
    merge = _merge()
    got = merge(_texts([text, '{"5": 1}']), np.array([0, 1], dtype=np.int64), 2)
    assert got.shape == (2, 1 << 17)
    nz = np.flatnonzero(got[0])
    assert dict(zip(nz.tolist(), got[0][nz].tolist(), strict=True)) == {k: v for k, v in want.items() if v}
    assert got[1][5] == 1 and got[1].sum() == 1


@pytest.mark.parametrize("text", [
    '{"-1": 2}', '{"1": -2}', '{"1": 2.5}', '{"a": 1}', '{1: 2}', '{"1": 2', '{"1": 2,}', '["1", 2]',
    '{"131072": 1}', '{"1": 1234567890123456789}', '{"1": {"2": 3}}', '{"1": 2} x', "",
])
def test_merge_declines_what_it_does_not_read(text: str) -> None:
    merge = _merge()
    assert merge(_texts([text]), np.array([0], dtype=np.int64), 1) is None
    assert merge(_texts([text]), np.array([-1], dtype=np.int64), 1) is not None  # a row not counted is not read


def test_merge_refuses_groups_that_do_not_fit() -> None:
    merge = _merge()
    with pytest.raises(ValueError, match="2 rows, not the 3 groups"):
        merge(_texts(["{}", "{}"]), np.array([0, 0, 0], dtype=np.int64), 1)
    with pytest.raises(ValueError, match="String"):
        merge(pl.Series([1, 2]), np.array([0, 0], dtype=np.int64), 1)


@pytest.fixture(scope="module")
def frame_and_wheres(tmp_path_factory: pytest.TempPathFactory) -> tuple[pl.DataFrame, list[pl.Expr]]:
    """A generated run's frame (steps of 4 and 16 users) and the steps' sample selections, as the report takes
    them."""
    from harness.report.columns import load_frame_run

    gen = load_benchmark("records_gen")
    out = tmp_path_factory.mktemp("gaps") / "gen"
    gen.generate(out, gen.GenSpec(1500, [4, 16], seed=5))
    run = load_frame_run(out)
    steps, windows = step_windows(run)
    wheres = []
    for p, w in zip(steps, windows, strict=True):
        w0, w1 = (w.start, w.end) if w.steady else (p.start, p.end)
        wheres.append(in_sample(p.step, w.steady, w0, w1) & pl.col(OK))
    assert len(wheres) >= 2
    return run.main, wheres


@pytest.fixture(params=["compiled", "polars"])
def merge_form(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "polars":
        monkeypatch.setattr(columns, "_MERGE", None)
    else:
        _merge()
    yield request.param


def test_the_steps_merged_at_once_equal_each_merged_alone(
        frame_and_wheres: tuple[pl.DataFrame, list[pl.Expr]], merge_form: str) -> None:
    main, wheres = frame_and_wheres
    got = gap_histograms(main, wheres)
    assert len(got) == len(wheres) and all(h.n > 0 for h in got)
    for h, w in zip(got, wheres, strict=True):
        _same(h, gap_histogram(main, where=w))
    # selections that overlap (a row in two) are merged one by one: still equal
    both = [wheres[0], wheres[0] | wheres[1], pl.lit(None, pl.Boolean)]
    for h, w in zip(gap_histograms(main, both), both, strict=True):
        _same(h, gap_histogram(main, where=w))


def test_a_text_the_merge_does_not_read_goes_to_polars(
        frame_and_wheres: tuple[pl.DataFrame, list[pl.Expr]], merge_form: str) -> None:
    main, wheres = frame_and_wheres
    hist = pl.col("gap_hist")
    big = main.with_columns(hist.struct.with_fields(  # a count of 19 digits: polars reads it, the compiled merge not
        pl.field("buckets").str.replace(r"\}$", ', "3": 0000000000000000001}')))
    got = gap_histograms(big, wheres)
    for h, w in zip(got, wheres, strict=True):
        _same(h, gap_histogram(big, where=w))
        assert h.counts[3] > 0
    broken = main.with_columns(pl.when(pl.int_range(pl.len()) == 3).then(
        pl.struct(n=pl.lit(1), sum=pl.lit(0.1), min=pl.lit(0.1), max=pl.lit(0.1), buckets=pl.lit('{"1": "x"}'))
    ).otherwise(hist).cast(HIST_DTYPE).alias("gap_hist"))
    with pytest.raises(ValueError, match="gap_hist buckets must map integer bucket indices to integer counts"):
        gap_histograms(broken, [pl.lit(True)])


def test_a_run_without_gap_histograms_merges_to_empty(merge_form: str) -> None:
    frame = pl.DataFrame({"gap_hist": [None, None], "x": [1, 2]},
                         schema={"gap_hist": HIST_DTYPE, "x": pl.Int64})
    for h in gap_histograms(frame, [pl.col("x") == 1, pl.col("x") == 2]):
        assert h.n == 0 and h.counts == {} and h.min is None
    assert gap_histograms(frame.drop("gap_hist"), [pl.lit(True)])[0].n == 0
    assert gap_histograms(frame, []) == []
    assert json.dumps(gap_histograms(frame.head(0), [pl.lit(True)])[0].to_json())


def test_the_report_reads_its_step_gaps_through_the_one_merge(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The two-pass read keeps every step's merged histogram (FrameRun.gaps) from :func:`gap_histograms`."""
    from harness.report.build import load_report_run

    gen = load_benchmark("records_gen")
    gen.generate(tmp_path / "gen", gen.GenSpec(400, [4], seed=3, chunk_times="compact"))
    calls: list[int] = []
    real = columns.gap_histograms
    monkeypatch.setattr(columns, "gap_histograms", lambda s, w: calls.append(len(w)) or real(s, w))
    run = load_report_run(tmp_path / "gen")
    assert calls == [len(run.gaps)] and run.gaps
    for key, h in run.gaps.items():
        assert h.n >= 0 and key[0] in {p.step for p in run.phases}
