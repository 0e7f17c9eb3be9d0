"""benchmarks/side_by_side.py: its table and error arithmetic on canned inputs, and (slow) its llmload part for a
few requests against the simulator."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

sbs = load_benchmark("side_by_side")


def _run(client: str, c: int, cpu: float, chunks: int, rate: float, ttft99: float | None,
         itl99: float | None) -> object:
    return sbs.RunResult(client, c, cpu, chunks, rate, (0.5, ttft99), (0.1, itl99))


def test_quantile_interpolates_and_error_is_client_minus_truth_in_ms() -> None:
    assert sbs.quantile([3.0, 1.0, 2.0, 4.0], 0.5) == pytest.approx(2.5)
    assert sbs.quantile([1.0, 2.0], 0.99) == pytest.approx(1.99)
    assert sbs.quantile([], 0.5) is None
    assert sbs.quantile_error_ms([0.012, 0.014], [0.010, 0.012], 0.5) == pytest.approx(2.0)
    assert sbs.quantile_error_ms([0.01], [], 0.5) is None


def test_marginal_cpu_per_chunk_removes_startup_cost() -> None:
    short = _run("x", 32, 3.0, 10_000, 1.0, 0.1, 0.1)
    long = _run("x", 32, 4.5, 60_000, 1.0, 0.1, 0.1)
    assert sbs.marginal_us_per_chunk(short, long) == pytest.approx(30.0)  # 1.5 s over 50,000 chunks
    assert sbs.marginal_us_per_chunk(long, short) is None


def test_max_rate_within_bound_ignores_runs_over_it_or_unknown() -> None:
    runs = {32: _run("x", 32, 1, 1, 16_000, 0.4, 0.9), 128: _run("x", 128, 1, 1, 60_000, 0.2, 1.5),
            256: _run("x", 256, 1, 1, 90_000, None, 0.1)}
    assert sbs.max_rate_within(runs) == 16_000
    assert sbs.max_rate_within({128: runs[128]}) is None


def test_build_table_rows_skips_and_ratios() -> None:
    ours = sbs.ClientSummary("llmload", 20.0, {32: _run("llmload", 32, 1, 1, 16_000, 0.3, 0.2)})
    peer = sbs.ClientSummary("vllm", 40.0, {32: _run("vllm", 32, 1, 1, 8_000, 0.9, 0.5)})
    gone = sbs.ClientSummary("aiperf", skipped="no aiperf at /x/bin/aiperf")
    text = sbs.build_table([ours, peer, gone], [32, 128])
    lines = text.splitlines()
    assert lines[0].startswith("| client | CPU µs/chunk | TTFT err p50/p99 ms C=32")
    assert lines[2] == "| llmload | 20.0 | +0.50 / +0.30 | +0.10 / +0.20 | 16000 | — | — | — | 16000 |"
    assert lines[3] == "| vllm | 40.0 | +0.50 / +0.90 | +0.10 / +0.50 | 8000 | — | — | — | 8000 |"
    assert "aiperf: skipped — no aiperf at /x/bin/aiperf" in lines
    assert "llmload ÷ vllm: CPU per chunk 0.50, max chunks/s within bound 2.00" in lines
    assert not any("÷ aiperf" in line for line in lines)


def test_truth_sample_keeps_measured_requests_and_rejects_empty_logs(tmp_path: Path) -> None:
    chunks = [[0.001 + 0.002 * i, 100.0 + 0.001 + 0.002 * i, 1, "r"] for i in range(sbs.MIN_CHUNKS)]
    req = {"type": "request", "received_epoch": 100.0, "end_at": chunks[-1][0], "chunks": chunks}
    warm = {"type": "request", "received_epoch": 99.0, "end_at": 0.01, "chunks": chunks[:5]}
    path = tmp_path / "truth.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in ({"type": "server"}, warm, req)) + "\n")
    sample, n, rate = sbs.truth_sample(path)
    assert n == sbs.MIN_CHUNKS and sample.ttfts == [pytest.approx(0.001)]
    assert len(sample.itls) == sbs.MIN_CHUNKS - 1 and all(g == pytest.approx(0.002) for g in sample.itls)
    assert rate == pytest.approx(sbs.MIN_CHUNKS / chunks[-1][0])
    path.write_text(json.dumps({"type": "server"}) + "\n" + json.dumps(warm) + "\n")
    with pytest.raises(ValueError, match=r"truth\.jsonl: no request"):
        sbs.truth_sample(path)


def test_truth_sample_with_itl_means_gives_one_mean_gap_per_request(tmp_path: Path) -> None:
    n = sbs.MIN_CHUNKS
    chunks = [[0.001 + 0.002 * i + (0.010 if i == n - 1 else 0.0), 0.0, 1, "a"] for i in range(n)]
    req = {"type": "request", "received_epoch": 100.0, "end_at": chunks[-1][0], "chunks": chunks}
    path = tmp_path / "truth.jsonl"
    path.write_text(json.dumps(req) + "\n")
    sample, chunks_n, _rate = sbs.truth_sample(path, itl_means=True)
    assert chunks_n == n and sample.itl_means
    # (last - first) / (n - 1): 2 ms per gap plus the 10 ms late last chunk spread over n - 1 gaps
    assert sample.itls == [pytest.approx(0.002 + 0.010 / (n - 1))]


def _guidellm_request(start: float, first: float | None, last: float, iterations: int) -> dict[str, object]:
    return {"info": {"timings": {"request_start": start, "first_token_iteration": first,
                                 "last_token_iteration": last, "token_iterations": iterations}}}


def test_guidellm_sample_reads_ttft_and_mean_gap_per_successful_request(tmp_path: Path) -> None:
    n = sbs.MIN_CHUNKS
    doc = {"benchmarks": [{"requests": {
        "successful": [_guidellm_request(10.0, 10.004, 10.004 + 0.002 * (n - 1), n),
                       _guidellm_request(11.0, 11.001, 11.5, 5),  # a warm-up-sized request: left out
                       _guidellm_request(12.0, None, 12.5, n)],  # no first token: left out
        "errored": [_guidellm_request(13.0, 13.5, 14.0, n)]}}]}  # errored: not read
    path = tmp_path / "guidellm.json"
    path.write_text(json.dumps(doc))
    got = sbs.guidellm_sample(path)
    assert got.itl_means
    assert got.ttfts == [pytest.approx(0.004)]
    assert got.itls == [pytest.approx(0.002)]


def test_guidellm_sample_rejects_other_files_naming_file_and_key(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"results": []}))
    with pytest.raises(ValueError, match=r"other\.json: no 'benchmarks' list"):
        sbs.guidellm_sample(path)
    path.write_text(json.dumps({"benchmarks": [{"requests": {"successful": [{"info": {}}]}}]}))
    with pytest.raises(ValueError, match=r"other\.json: a successful request has no 'info.timings'"):
        sbs.guidellm_sample(path)


def test_run_result_compares_mean_gaps_with_the_truths_means_and_table_marks_them(tmp_path: Path) -> None:
    n = sbs.MIN_CHUNKS
    chunks = [[0.001 + 0.002 * i, 0.0, 1, "r"] for i in range(n)]
    req = {"type": "request", "received_epoch": 100.0, "end_at": chunks[-1][0], "chunks": chunks}
    path = tmp_path / "truth.jsonl"
    path.write_text(json.dumps(req) + "\n")
    got = sbs.Sample([0.003], [0.0025], itl_means=True)
    res = sbs.run_result("guidellm", 32, 1.0, got, path)
    assert res.itl_means and res.ttft_err_ms[0] == pytest.approx(2.0)
    assert res.itl_err_ms[0] == pytest.approx(0.5) and res.itl_err_ms[1] == pytest.approx(0.5)
    text = sbs.build_table([sbs.ClientSummary("guidellm", 70.0, {32: res})], [32])
    assert "| +0.50 / +0.50 † |" in text
    assert text.splitlines()[-1].startswith("† ITL error of per-request mean gaps")
    plain = sbs.run_result("x", 32, 1.0, sbs.Sample([0.003], [0.0025]), path)
    assert "†" not in sbs.build_table([sbs.ClientSummary("x", 70.0, {32: plain})], [32])


def test_cpu_level_must_be_one_of_the_levels(capsys: pytest.CaptureFixture[str]) -> None:
    def never(url: str, c: int, d: float, w: Path) -> tuple[float, object]:
        raise AssertionError("no run may start")

    with pytest.raises(ValueError, match="--cpu-level 8 is not one of --levels 32,128"):
        sbs.measure("x", never, [32, 128], 1.0, 0.5, None, cpu_level=8)
    with pytest.raises(SystemExit):
        sbs.main(["--clients", "llmload", "--levels", "32,128", "--cpu-level", "8"])
    assert "--cpu-level 8 is not one of --levels 32,128" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a run shorter than llmload's shape tick is refused before anything starts
        sbs.main(["--clients", "llmload", "--levels", "2", "--short", "0.5"])
    assert "--short 0.5: must be at least 1 s (the load shape's tick)" in capsys.readouterr().err


def test_aiperf_sample_reads_profiling_records_in_ms_and_names_bad_lines(tmp_path: Path) -> None:
    gaps = [2.0] * (sbs.MIN_CHUNKS - 1)

    def rec(phase: str, ttft: float, n_gaps: int) -> str:
        return json.dumps({"metadata": {"benchmark_phase": phase},
                           "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"},
                                       "inter_chunk_latency": {"value": gaps[:n_gaps], "unit": "ms"}}})

    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([rec("warmup", 9.0, len(gaps)), rec("profiling", 4.0, len(gaps)),
                               rec("profiling", 5.0, 3)]) + "\n")
    got = sbs.aiperf_sample(path)
    assert got.ttfts == [pytest.approx(0.004)] and not got.itl_means
    assert len(got.itls) == len(gaps) and all(g == pytest.approx(0.002) for g in got.itls)
    path.write_text(rec("profiling", 4.0, len(gaps)) + "\n[1, 2]\n")
    with pytest.raises(ValueError, match=r"profile_export\.jsonl:2: not a JSON object"):
        sbs.aiperf_sample(path)


def test_median_summary_takes_each_figures_median_over_the_rounds_that_ran() -> None:
    rounds = [sbs.ClientSummary("x", 10.0, {32: _run("x", 32, 1.0, 100, 900.0, 0.4, 2.0)}),
              sbs.ClientSummary("x", 30.0, {32: _run("x", 32, 3.0, 300, 1_100.0, None, 0.8),
                                            128: _run("x", 128, 5.0, 500, 5_000.0, 3.0, 3.0)}),
              sbs.ClientSummary("x", 20.0, {32: _run("x", 32, 2.0, 200, 1_000.0, 0.6, 0.9)}),
              sbs.ClientSummary("x", skipped="simulator did not start")]
    m = sbs.median_summary(rounds)
    assert m.skipped is None and m.cpu_us_per_chunk == 20.0
    r = m.runs[32]
    assert (r.cpu_s, r.chunks, r.chunks_per_s) == (2.0, 200, 1_000.0)
    assert r.ttft_err_ms == (0.5, pytest.approx(0.5)) and r.itl_err_ms == (pytest.approx(0.1), 0.9)
    assert m.runs[128].chunks_per_s == 5_000.0  # one round ran it: its own figures
    assert sbs.max_rate_within(m.runs) == 1_000.0  # medians 0.5 and 0.9 ms: within 1 ms
    gone = sbs.ClientSummary("y", skipped="no venv")
    assert sbs.median_summary([gone, gone]) is gone
    with pytest.raises(ValueError, match="no rounds"):
        sbs.median_summary([])


@pytest.mark.slow
def test_llmload_part_runs_a_few_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One short and one long llmload run at C=2 (1 s and 2 s of load: a step is at least the shape's 1 s tick; every
    process bounded by a timeout)."""
    assert sbs.main(["--clients", "llmload", "--levels", "2", "--duration", "2", "--short", "1",
                     "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| llmload |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # marginal CPU µs per chunk measured (a number: a difference of two runs' CPU, which at 1 s − 0.5 s of load on
    # a loaded machine can come out negative; the benchmark's own runs are longer)
    assert math.isfinite(float(cells[1]))
    assert float(cells[4]) > 100  # chunks/s at C=2: ~1,000 with 2 ms per token
