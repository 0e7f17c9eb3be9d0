"""benchmarks/soak.py: its bookkeeping (moments, record counting, the table) on made-up samples, and (slow) the
whole soak machinery at a tiny size: master + 2 workers + simulator, a few hundred requests, bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

sb = load_benchmark("soak", "soak_bench")


def _s(t: float, n: int, rss: int = 100, series: int = 50) -> object:
    return sb.Sample(t, n, series, {"master": rss, "sim": 10})


def test_moments_are_the_first_loaded_the_warm_and_middle_fractions_and_the_last() -> None:
    samples = [_s(0, 0), _s(0.5, 1), _s(1, 15), _s(2, 100), _s(3, 480), _s(4, 520), _s(5, 1000)]
    m = sb._pick(samples, 1000, 0.1)
    assert [m[k].t for k in sb.MOMENTS] == [1, 2, 4, 5]  # start: 1 % of the requests (the warm-up's 1 is not)
    assert sb._pick([_s(0, 0)], 1000, 0.1) == {}
    short = sb._pick([_s(1, 5), _s(2, 30)], 1000, 0.1)  # capped early: no warm or middle sample
    assert set(short) == {"start", "end"} and short["start"].requests == short["end"].requests == 30


def test_count_records_counts_lines_and_ok_ones(tmp_path: Path) -> None:
    p = tmp_path / "records.jsonl"
    p.write_text('{"ok":true}\n{"ok":false}\n{"ok":true}\n{"ok":true}')  # the last line without its newline
    assert sb.count_records(p) == (4, 3)


def test_table_shows_every_moment_growth_and_the_equality() -> None:
    res = sb.SoakResult(1000, 2, 8, 8, 0.0, records=1001, records_ok=1001, records_equal_server=True,
                        server={"length": 1001}, series_constant=True, report_s=1.5, report_peak_rss=200_000_000)
    res.moments = sb._pick([_s(1, 5), _s(2, 100), _s(3, 500), _s(4, 1000, rss=102)], 1000, 0.1)
    res.rss_growth_pct = {"master": 2.0}  # sim: no growth figure (no RSS at warm)
    text = sb.table(res)
    assert "| warm (2 s) | 100 | 50 | 0.0 | 0.0 |" in text and "| +2.00 % | n/a |" in text
    assert "| growth middle→end | | | n/a | n/a |" in text  # no second-half figure given
    assert sb.growth(_s(1, 5, rss=100), _s(2, 9, rss=103)) == {"master": 3.0, "sim": 0.0}
    assert "equal: True" in text and "series constant from warm to end: True" in text and "peak RSS 200 MB" in text


@pytest.mark.slow
def test_a_tiny_soak_runs_end_to_end(tmp_path: Path) -> None:
    """The quick mode's machinery at 300 requests: records = the server's completions, every process sampled, the
    series count read, the report timed; bounded by the time cap and the processes' timeouts."""
    res = sb.soak(300, tmp_path, workers=2, concurrency=4, every=0.5, time_cap=60, log=lambda _m: None)
    assert not res.capped and res.records >= 300 and res.records_equal_server, sb.table(res)
    assert res.status == "interrupted" and res.run_json_records == res.records
    end = res.moments["end"]
    assert {"master", "master_children", "worker1", "worker2", "sim"} <= set(end.rss)
    assert all(end.rss[k] > 10_000_000 for k in ("master", "worker1", "worker2", "sim")), end.rss
    assert end.series > 0 and res.report_rc == 0 and res.report_s and res.report_peak_rss, sb.table(res)


@pytest.mark.slow
def test_a_traced_soak_writes_the_masters_memory_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--trace``: the master (only) appends its RSS, malloc figures, gc objects and window cells to master.tsv
    at each look, and with tracemalloc on writes the lines that grew most; records still equal the server's."""
    # each look (a tracemalloc snapshot and diff, gc's object list) blocks the master's loop: every 0.3 s kept a
    # loaded CI machine's exporter from answering for 120 s; 1.5 s still gives several looks
    monkeypatch.setenv("LLMLOAD_TRACE_EVERY", "1.5")
    monkeypatch.setenv("LLMLOAD_TRACE_FRAMES", "1")
    monkeypatch.setenv("LLMLOAD_TRACE_TRIM", "1")
    trace = tmp_path / "trace"
    # tracemalloc slows the master several-fold: few requests and a wide time cap (a loaded CI machine took > 60 s)
    # and paced requests: the bench preset replies at once, and its ~2,000 requests/s from 2 workers were more than
    # a traced master could take on a loaded CI machine (its exporter went silent for 120 s, twice in CI; reproduced
    # with a CI run beside it). 10 ms a token x 8 tokens: ~80 ms a request, ~50 requests/s from 4 users.
    res = sb.soak(300, tmp_path, workers=2, concurrency=2, time_scale=1.0, every=0.5, time_cap=180, report=False,
                  log=lambda _m: None, trace=trace, sim_args=("--decode-base", "0.01"))
    assert not res.capped, sb.table(res)
    assert res.records_equal_server, sb.table(res)
    head, *rows = [line.split("\t") for line in (trace / "master.tsv").read_text().splitlines()]
    assert head == ["t_s", "rss", "traced", "gc_objects", "arena", "hblkhd", "uordblks", "fordblks", "window_cells"]
    assert len(rows) >= 2 and all(len(r) == len(head) for r in rows)
    assert all(int(r[1]) > 10_000_000 and int(r[2]) > 0 and int(r[3]) > 1000 for r in rows), rows
    assert int(rows[-1][8]) > 0, rows  # the exporter's windows hold the requests' values
    tops = sorted(trace.glob("top-*.txt"))
    assert tops and "grew most since the first look:" in tops[-1].read_text()
