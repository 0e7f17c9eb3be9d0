"""The rate figures of the report (:mod:`harness.report.rate`) over hand-made records."""

from __future__ import annotations

import pytest

from harness.rate import LEAD_S
from harness.report.rate import add_rate, rate_figures, rate_notes, rate_table_rows
from harness.result import RequestResult

S = 1_800_000_000.0  # step start (epoch s)
A = S + LEAD_S  # first arrival


def rec(sched: float, sent: float, e2e: float = 0.5, ttft: float = 0.05, ok: bool = True) -> RequestResult:
    return RequestResult("p", "p", "u", "step", 1, 1, None, start_wall=sent, scheduled_wall=sched, ttft=ttft,
                         e2e=e2e, ok=ok)


def ev(rate: float = 10.0, cap: int | None = 1) -> dict:
    return {"event": "phase_start", "phase": "step", "step": 1, "concurrency": 1, "wall": S, "rate": rate,
            "arrival": "constant", "burstiness": 1.0, "max_concurrency": cap}


def test_a_client_behind_its_schedule() -> None:
    # constant 10/s for ~10 s: 100 arrivals; cap 1, 500 ms service: one sent every 0.5 s, later and later
    end = A + 9.95
    recs = [rec(A + 0.1 * i, A + 0.5 * i) for i in range(20)]
    f = rate_figures(ev(), 0, S, end, recs)
    assert f["scheduled"] == 100 and f["scheduled_rate"] == pytest.approx(100 / 9.95)
    assert f["sent"] == 20 and f["achieved_rate"] == pytest.approx(20 / 9.95) and f["shortfall"] == pytest.approx(0.8)
    delays = [0.4 * i for i in range(20)]
    assert f["dispatch_delay_p50_s"] == pytest.approx((delays[9] + delays[10]) / 2)
    assert f["dispatch_delay_max_s"] == pytest.approx(7.6)
    assert f["late"] == 19 and f["late_share"] == pytest.approx(0.95)  # all but the first
    assert f["e2e_p50_s"] == pytest.approx(0.5) and f["ttft_p50_s"] == pytest.approx(0.05)
    assert f["sched_e2e_p50_s"] == pytest.approx(0.5 + 3.8) and f["sched_e2e_mean_s"] == pytest.approx(0.5 + 3.8)
    assert 7.0 < f["sched_ttft_p99_s"] < 7.7 and f["sched_ttft_p50_s"] == pytest.approx(0.05 + 3.8)
    rows = [{"step": 1, "phase": "step", "label": "C=1", "start_wall": S, "end_wall": end}]
    add_rate(rows, [ev()], recs, {"rate": {"seed": 0}})
    assert rows[0]["label"] == "10 req/s" and rows[0]["rate"]["sent"] == 20
    notes = rate_notes(rows)
    assert len(notes) == 2
    assert "TARGET RATE NOT ACHIEVED: 20 of 100 scheduled" in notes[0] and "80 % short" in notes[0]
    assert "95 % of requests waited for a free user (the cap of 1 in flight)" in notes[1]
    assert "coordinated omission" in notes[1]
    (cells,) = rate_table_rows(rows)
    assert cells[:6] == ["10 req/s", "10", "10.1", "2.01", "80.0", "95.0"]


def test_an_on_time_client_gets_no_warning_and_failed_requests_count_as_sent() -> None:
    recs = [rec(A + 0.25 * i, A + 0.25 * i + 0.001, ok=i % 5 != 0) for i in range(40)]
    rows = [{"step": 1, "phase": "step", "label": "C=64", "start_wall": S, "end_wall": A + 9.99}]
    add_rate(rows, [ev(rate=4.0, cap=None)], recs, {})
    f = rows[0]["rate"]
    assert f["sent"] == f["scheduled"] == 40 and f["shortfall"] == 0 and f["late"] == 0
    assert f["sched_e2e_p50_s"] == pytest.approx(0.501)
    assert rate_notes(rows) == []


def test_closed_loop_rows_have_no_rate_figures() -> None:
    rows = [{"step": 0, "phase": "single", "label": "single", "start_wall": S, "end_wall": S + 5},
            {"step": 1, "phase": "step", "label": "C=8", "start_wall": S + 5, "end_wall": S + 10}]
    add_rate(rows, [{"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": S + 5}], [], {})
    assert [r["rate"] for r in rows] == [None, None] and rows[1]["label"] == "C=8"
    assert rate_notes(rows) == [] and rate_table_rows(rows) == []


def test_pool_wait_is_named_as_the_pool() -> None:
    recs = [rec(A + 0.1 * i, A + 0.1 * i + 0.06) for i in range(50)]  # each 60 ms late
    rows = [{"step": 1, "phase": "step", "label": "x", "start_wall": S, "end_wall": A + 4.97}]
    e = ev(cap=None)
    e["concurrency"] = 256
    add_rate(rows, [e], recs, {})
    (note,) = rate_notes(rows)  # all sent (late): no shortfall warning, a wait warning
    assert "the pool of 256 users (rate.pool)" in note
