"""The self-certification (harness.report.selfcert): CPU share per process from client_cpu samples, chunks/s per
process, the calibrated error bound or its refusal, and the one line per step on the report's surfaces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from harness.report import build_report, render_markdown
from harness.report.catalogue import FIGURES
from harness.report.selfcert import CalPoint, chunk_rates, cpu_shares, error_bound, selfcert_text
from harness.report.summary import render_summary
from harness.selfcert import CpuShare, cpu_event_problem
from tests.report.rundir import T0, phase, rec, run_end, write_run

POINTS = (CalPoint(8, 1000.0, 0.005, 0.0003, 0.0001), CalPoint(64, 5000.0, 0.05, 0.002, 0.008),
          CalPoint(64, 5000.0, 0.2, 0.04, 0.03))


def cpu(process: str, wall: float, cpu_s: float) -> dict[str, Any]:
    """A ``client_cpu`` event at ``T0 + wall``."""
    return {"event": "client_cpu", "wall": T0 + wall, "process": process, "cpu_s": cpu_s}


def test_cpu_share_per_process_between_its_first_and_last_sample_in_the_step() -> None:
    events = [cpu("a", 9.0, 0.0), cpu("a", 10.0, 1.0), cpu("a", 15.0, 3.0), cpu("a", 20.2, 4.0),  # 20.2: slack
              cpu("b", 10.01, 5.0), cpu("b", 10.5, 5.2),  # 0.49 s apart: too short to be a share
              cpu("c", 10.0, 0.0), cpu("c", 20.0, 9.0), cpu("c", 21.0, 100.0)]  # 21.0: the next step's
    shares = cpu_shares(events, T0 + 10.0, T0 + 20.0)
    assert shares == {"a": pytest.approx(3.0 / 10.2), "c": pytest.approx(0.9)}


def test_a_cpu_counter_that_goes_down_starts_a_new_baseline() -> None:
    """A restarted process (its counter from 40 s back to 0.5 s) is not a 0 % share: 2 CPU s in the 4 wall s before
    the reset and 1.5 CPU s in the 5 after, the 1 s across the reset in neither sum: 3.5 ÷ 9."""
    events = [cpu("a", 10.0, 38.0), cpu("a", 14.0, 40.0), cpu("a", 15.0, 0.5), cpu("a", 20.0, 2.0)]
    assert cpu_shares(events, T0 + 10.0, T0 + 20.0) == {"a": pytest.approx(3.5 / 9.0)}
    # a reset right after the first sample: the share is the new baseline's alone
    assert cpu_shares([cpu("b", 10.0, 50.0), cpu("b", 11.0, 0.0), cpu("b", 20.0, 4.5)], T0 + 10.0, T0 + 20.0) == {
        "b": pytest.approx(0.5)}


def test_a_cpu_share_accumulates_pairs_and_skips_resets() -> None:
    acc = CpuShare()
    assert acc.share(1.0) is None
    for wall, c in ((0.0, 1.0), (2.0, 2.0), (3.0, 0.0), (5.0, 1.0)):
        acc.add(wall, c)
    assert (acc.cpu_s, acc.wall_s, acc.resets) == (2.0, 4.0, 1) and acc.share(1.0) == 0.5
    assert acc.share(4.5) is None  # under the minimum span summed


@pytest.mark.parametrize(("event", "why"), [
    ({"wall": 1.0, "process": "w1", "cpu_s": 2.0}, None),
    ({"wall": 1.0, "cpu_s": 2.0}, "process is missing"),
    ({"wall": 1.0, "process": "", "cpu_s": 2.0}, "process is not a non-empty string: ''"),
    ({"wall": 1.0, "process": "w1"}, "cpu_s is missing"),
    ({"wall": "noon", "process": "w1", "cpu_s": 2.0}, "wall is not a number: 'noon'"),
    ({"wall": 1.0, "process": "w1", "cpu_s": float("nan")}, "cpu_s is not a number: nan"),
    ({"wall": 1.0, "process": "w1", "cpu_s": True}, "cpu_s is not a number: True"),
    ({"wall": 1.0, "process": "w1", "cpu_s": -1.0}, "cpu_s is negative: -1.0"),
])  # fmt: skip
def test_cpu_event_problem_names_what_is_wrong(event: dict[str, Any], why: str | None) -> None:
    assert cpu_event_problem({"event": "client_cpu", **event}) == why


def test_chunk_rate_per_process_is_its_chunks_over_the_step_length() -> None:
    recs = pl.DataFrame({"user": ["w1:1", "w1:2", "w2:1", "local:7"], "chunks": [100, 50, 30, None]})
    assert chunk_rates(recs, 10.0) == {"w1": 15.0, "w2": 3.0, "local": 0.0}
    assert chunk_rates(recs, 0.0) == {}


def test_error_bound_is_the_smallest_envelope_of_the_points_that_dominate_the_load() -> None:
    b = error_bound(800.0, 0.004, POINTS)
    assert b is not None and (b.ttft_err_p99_s, b.itl_err_p99_s, b.chunks_per_s) == (0.0003, 0.0001, 1000.0)
    b = error_bound(3000.0, 0.01, POINTS)  # only the two C=64 points cover it: the smaller errors of the two
    assert b is not None and (b.ttft_err_p99_s, b.itl_err_p99_s) == (0.002, 0.008)
    b = error_bound(3000.0, 0.1, POINTS)
    assert b is not None and b.ttft_err_p99_s == 0.04
    assert error_bound(6000.0, 0.001, POINTS) is None  # more chunks/s than calibrated
    assert error_bound(100.0, 0.5, POINTS) is None  # more read lag than calibrated


def test_error_bound_is_never_below_an_error_measured_at_this_load_or_a_lighter_one() -> None:
    """The shipped calibration is not monotone (a shared machine's load, not only the client's, sets the error): a
    light C=8 point measured 54.9 ms, a heavier C=48 point 13.5 ms. At the C=8 load the bound must be 54.9 ms,
    not the heavier point's 13.5; likewise 0.26 ms measured at C=8 bounds a C=32 load that measured 0.09 ms."""
    pts = (CalPoint(8, 1349.0, 0.102, 0.0549, 0.016), CalPoint(48, 4300.0, 0.159, 0.0135, 0.0162),
           CalPoint(8, 1382.0, 0.0034, 0.00026, 0.00003), CalPoint(32, 3534.0, 0.026, 0.00009, 0.00002))
    b = error_bound(1349.0, 0.1019, pts)
    assert b is not None and (b.ttft_err_p99_s, b.itl_err_p99_s) == (0.0549, 0.016)  # C=8's own envelope
    b = error_bound(3000.0, 0.02, pts)  # covered by C=32 (and C=48): C=32's envelope holds the C=8 0.26 ms
    assert b is not None and b.ttft_err_p99_s == 0.00026 and b.concurrency == 32
    for p in pts:  # at every calibrated load, the bound is at least what was measured there
        got = error_bound(p.chunks_per_s, p.read_lag_p99_s, pts)
        assert got is not None and got.ttft_err_p99_s >= p.ttft_err_p99_s and got.itl_err_p99_s >= p.itl_err_p99_s


def _run(tmp: Path, lags: list[float], burn: float) -> dict[str, Any]:
    """One step of C=2 on process "w1" (10 requests, 100 chunks each over a 30 s step) with these read lags, and
    the process's CPU samples at ``burn`` CPU seconds per wall second."""
    recs = [rec(f"w1:{1 + i % 2}", 1, 41 + 3 * (i // 2), 3, concurrency=2, read_lag_max=v) for i, v in enumerate(lags)]
    events = [phase("step", 1, 2, 40, 30), cpu("w1", 40.001, 1.0), cpu("w1", 45.0, 1.0 + 5 * burn),
              cpu("w1", 70.0, 1.0 + 30 * burn), run_end(70.0)]
    return build_report(write_run(tmp / "run", recs, events)).as_dict()


def test_a_healthy_step_is_certified_with_its_calibrated_bound(tmp_path: Path) -> None:
    from harness.report.selfcert import CALIBRATION

    rep = _run(tmp_path, [0.0002] * 10, burn=0.1)
    (s,) = rep["steps"]
    assert s["client_processes"] == 1 and s["client_cpu_share_max"] == pytest.approx(0.1, rel=1e-3)
    assert s["client_chunks_per_s_proc"] == pytest.approx(1000 / 30)
    assert s["client_selfcert"] == "certified"
    def envelope(p: CalPoint) -> float:  # the largest TTFT error at a calibrated load p dominates
        return max(q.ttft_err_p99_s for q in CALIBRATION
                   if q.chunks_per_s <= p.chunks_per_s and q.read_lag_p99_s <= p.read_lag_p99_s)

    want = min(envelope(p) for p in CALIBRATION if p.chunks_per_s >= 1000 / 30 and p.read_lag_p99_s >= 0.0002)
    assert s["client_ttft_error_bound_s"] == want
    line = selfcert_text(s)
    assert line.startswith("client CPU 10.0 % of a core (busiest of 1 process), read lag p50 0.000200 / p99 "
                           "0.000200 s, 33.3 chunks/s per process; TTFT/ITL error ≤ ")
    bound = FIGURES["client_ttft_error_bound_s"].text(want)
    assert f"TTFT/ITL error ≤ {bound} / " in line and " ms (p99) at this load (calibrated up to " in line
    assert f"- {s['label']}: client CPU 10.0 %" in render_markdown(rep)
    assert f"  {s['label']}: client CPU 10.0 %" in render_summary(rep, width=400)


def test_a_starved_client_gets_no_bound_and_its_line_says_starved(tmp_path: Path) -> None:
    """3 of 10 requests read > 0.1 s late (STARVED, as before); the process burnt 95 % of a core."""
    rep = _run(tmp_path, [0.0002, 0.0003, 0.4, 0.0002, 0.25, 0.0001, 0.6, 0.0004, 0.0002, 0.0003], burn=0.95)
    (s,) = rep["steps"]
    assert s["client_starved"] and s["client_selfcert"] == "starved"
    assert s["client_ttft_error_bound_s"] is None and s["client_cpu_share_max"] == pytest.approx(0.95, rel=1e-3)
    line = selfcert_text(s)
    assert "client CPU 95.0 % of a core" in line and line.endswith(
        "STARVED: no error bound, figures are the load generator's limit")


def test_beyond_the_calibrated_range_and_not_measured(tmp_path: Path) -> None:
    """1 of 10 requests read 0.5 s late: not STARVED (10 % is not above 10 %), but its read lag p99 (0.46 s) is
    above every calibrated one: no bound, and the line says so."""
    from harness.report.selfcert import CALIBRATION

    rep = _run(tmp_path, [0.0002] * 9 + [0.5], burn=0.5)
    (s,) = rep["steps"]
    assert not s["client_starved"] and s["client_read_lag_p99_s"] > max(p.read_lag_p99_s for p in CALIBRATION)
    assert s["client_selfcert"] == "beyond_calibration" and s["client_ttft_error_bound_s"] is None
    assert "; no error bound: beyond the calibrated range (calibrated up to " in selfcert_text(s)
    assert selfcert_text(s, ()).endswith("no error bound: beyond the calibrated range (no calibration)")
    tls = {**s, "client_selfcert": "not_measured", "client_read_lag_p50_s": None, "client_read_lag_p99_s": None}
    assert selfcert_text(tls).endswith("not measured (no kernel-stamped reads)") and "p99 – s" in selfcert_text(tls)


def test_a_step_without_cpu_samples_says_why_there_is_no_cpu_share() -> None:
    row = {"client_processes": 1, "client_cpu_share_max": None, "client_read_lag_p50_s": 0.001,
           "client_read_lag_p99_s": 0.002, "client_chunks_per_s_proc": 100.0, "client_selfcert": "not_measured"}
    line = selfcert_text(row)
    assert line.startswith("client CPU not sampled in this step (1 process; a share needs two samples of one process "
                           "≥ 1 s apart, taken every 5 s; runs of versions before sampling have none), read lag"), line
    assert "– %" not in line
    assert selfcert_text({**row, "client_cpu_share_max": 0.25}).startswith("client CPU 25.0 % of a core")


def test_a_multi_process_step_says_its_bound_is_a_one_process_calibration_applied_per_process(tmp_path: Path) -> None:
    """With --processes N the bound is read per process at its own load against a calibration of one process: the
    line says so, unless a calibration point of more than one process exists."""
    rep = _run(tmp_path, [0.0002] * 10, burn=0.1)
    (s,) = rep["steps"]
    assert s["client_selfcert"] == "certified"
    one = selfcert_text(s)
    assert "1-process calibration" not in one
    two = selfcert_text({**s, "client_processes": 2})
    assert two.startswith("client CPU 10.0 % of a core (busiest of 2 processes)")
    assert two.endswith("; the bound is a 1-process calibration applied to each of the 2 processes at its own "
                        "chunks/s and read lag (no multi-process calibration point)"), two
    multi = (CalPoint(8, 2000, 0.01, 0.001, 0.001, processes=2),)
    assert "1-process calibration" not in selfcert_text({**s, "client_processes": 2}, multi)
