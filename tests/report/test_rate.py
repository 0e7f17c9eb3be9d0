"""The rate figures of the report (:mod:`harness.report.rate`) over hand-made records, read as a record frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.rate import LEAD_S
from harness.report.build import build_report
from harness.report.model import StepRow
from harness.report.rate import add_rate, rate_figures, rate_notes, rate_table_rows
from harness.report.rundata import PhaseStart, parse_event
from harness.result import RequestResult
from tests.report.rundir import frame_of

S = 1_800_000_000.0  # step start (epoch s)
A = S + LEAD_S  # first arrival



def _typed(rows: list[dict[str, Any]]) -> list[StepRow]:
    """Step rows as the report holds them (rate_notes reads the typed report)."""
    return [StepRow.model_validate(r) for r in rows]


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
    f = rate_figures(PhaseStart.model_validate(ev()), 0, S, end, frame_of(recs))
    assert f.scheduled == 100 and f.scheduled_rate == pytest.approx(100 / 9.95)
    assert f.sent == 20 and f.achieved_rate == pytest.approx(20 / 9.95) and f.shortfall == pytest.approx(0.8)
    delays = [0.4 * i for i in range(20)]
    assert f.dispatch_delay_p50_s == pytest.approx((delays[9] + delays[10]) / 2)
    assert f.dispatch_delay_max_s == pytest.approx(7.6)
    assert f.late == 19 and f.late_share == pytest.approx(0.95)  # all but the first
    assert f.e2e_p50_s == pytest.approx(0.5) and f.ttft_p50_s == pytest.approx(0.05)
    assert f.sched_e2e_p50_s == pytest.approx(0.5 + 3.8) and f.sched_e2e_mean_s == pytest.approx(0.5 + 3.8)
    assert 7.0 < f.sched_ttft_p99_s < 7.7 and f.sched_ttft_p50_s == pytest.approx(0.05 + 3.8)
    rows = [{"step": 1, "phase": "step", "label": "C=1", "start_wall": S, "end_wall": end}]
    add_rate(rows, [parse_event(ev())], frame_of(recs), {"rate": {"seed": 0}})
    assert rows[0]["label"] == "10 req/s" and rows[0]["rate"].sent == 20
    notes = rate_notes(_typed(rows))
    assert len(notes) == 2
    assert "TARGET RATE NOT ACHIEVED: 20 of 100 scheduled" in notes[0] and "80 % short" in notes[0]
    assert "95 % of requests waited for a free user (the cap of 1 in flight)" in notes[1]
    assert "coordinated omission" in notes[1]
    (cells,) = rate_table_rows(_typed(rows))
    assert cells[:6] == ["10 req/s", "10", "10.1", "2.01", "80.0", "95.0"]


def test_an_on_time_client_gets_no_warning_and_failed_requests_count_as_sent() -> None:
    recs = [rec(A + 0.25 * i, A + 0.25 * i + 0.001, ok=i % 5 != 0) for i in range(40)]
    rows = [{"step": 1, "phase": "step", "label": "C=64", "start_wall": S, "end_wall": A + 9.99}]
    add_rate(rows, [parse_event(ev(rate=4.0, cap=None))], frame_of(recs), {})
    f = rows[0]["rate"]
    assert f.sent == f.scheduled == 40 and f.shortfall == 0 and f.late == 0
    assert f.sched_e2e_p50_s == pytest.approx(0.501)
    assert rate_notes(_typed(rows)) == []


def test_closed_loop_rows_have_no_rate_figures() -> None:
    rows = [{"step": 0, "phase": "single", "label": "single", "start_wall": S, "end_wall": S + 5},
            {"step": 1, "phase": "step", "label": "C=8", "start_wall": S + 5, "end_wall": S + 10}]
    closed = {"event": "phase_start", "phase": "step", "step": 1, "concurrency": 8, "wall": S + 5}
    add_rate(rows, [parse_event(closed)], frame_of([]), {})
    assert [r["rate"] for r in rows] == [None, None] and rows[1]["label"] == "C=8"
    assert rate_notes(_typed(rows)) == [] and rate_table_rows(_typed(rows)) == []


def test_pool_wait_is_named_as_the_pool() -> None:
    # 0.5 s each at 10/s: after the first 5 (on time) every scheduled time finds the pool of 5 users all busy,
    # and each such arrival is sent 60 ms late
    recs = [rec(A + 0.1 * i, A + 0.1 * i + (0.06 if i >= 5 else 0.001)) for i in range(50)]
    rows = [{"step": 1, "phase": "step", "label": "x", "start_wall": S, "end_wall": A + 4.97}]
    e = ev(cap=None)
    e["concurrency"] = 5
    add_rate(rows, [parse_event(e)], frame_of(recs), {})
    assert rows[0]["rate"].late == 45 and rows[0]["rate"].late_free_user == 0
    (note,) = rate_notes(_typed(rows))  # all sent (late): no shortfall warning, a wait warning
    assert "waited for a free user (the pool of 5 users (rate.pool))" in note


def test_late_with_a_user_free_is_the_client_not_the_cap() -> None:
    """Seen against vLLM: at 2 req/s with a cap of 8, one request sent 0.25 s late while 7 users were idle (two
    in flight); the report said it "waited for a free user (the cap of 8 in flight)". With a user free at
    the scheduled time the client itself was late: said so, not blamed on the cap."""
    recs = [rec(A + 0.5 * i, A + 0.5 * i + (0.25 if i == 3 else 0.001), e2e=1.2) for i in range(12)]
    for i, r in enumerate(recs):
        r.user = f"local:{7 + i % 2}"
    rows = [{"step": 1, "phase": "step", "label": "x", "start_wall": S, "end_wall": A + 5.99}]
    add_rate(rows, [parse_event({**ev(rate=2.0, cap=8), "concurrency": 8})], frame_of(recs), {})
    f = rows[0]["rate"]
    assert f.late == 1 and f.late_free_user == 1 and f.sent == f.scheduled == 12
    (note,) = rate_notes(_typed(rows))
    assert "8 % of requests were sent late (over 0.05 s) although a user was free" in note
    assert "fell behind its schedule" in note and "waited for a free user" not in note
    # the same lateness with every user busy (a cap of 2, both in flight: 1.2 s requests every 0.5 s) is a wait
    rows = [{"step": 1, "phase": "step", "label": "x", "start_wall": S, "end_wall": A + 5.99}]
    add_rate(rows, [parse_event({**ev(rate=2.0, cap=2), "concurrency": 2})], frame_of(recs), {})
    assert rows[0]["rate"].late_free_user == 0
    (note,) = rate_notes(_typed(rows))
    assert "8 % of requests waited for a free user (the cap of 2 in flight)" in note


def test_workers_count_their_own_users_in_flight() -> None:
    """Two processes of 1 user each (2 users): a late arrival of worker a while a's user is busy waited for it,
    even though worker b's user was free."""
    recs = [rec(A, A + 0.001, e2e=1.0), rec(A + 0.5, A + 1.001, e2e=0.3), rec(A + 0.25, A + 0.251, e2e=0.1)]
    recs[0].user, recs[1].user, recs[2].user = "a:1", "a:1", "b:1"
    rows = [{"step": 1, "phase": "step", "label": "x", "start_wall": S, "end_wall": A + 2}]
    add_rate(rows, [parse_event({**ev(rate=2.0, cap=2), "concurrency": 2})], frame_of(recs), {})
    assert rows[0]["rate"].late == 1 and rows[0]["rate"].late_free_user == 0


def test_the_reports_rate_figures_equal_the_record_by_record_oracle(tmp_path: Path) -> None:
    from tests.report.oracle import oracle_report
    from tests.report.rundir import T0, phase, run_end, write_run
    from tests.report.rundir import rec as rrec
    from tests.report.test_columns import assert_same

    # single stream, then a gamma rate step at 4 req/s with a cap of 2, late and on-time arrivals, a failure,
    # a record without scheduled_wall (closed-loop), and a search event read through
    recs = [rrec("u0", 0, 0.5 + i, 0.8) for i in range(4)]
    for i in range(30):
        sched = 5.0 + LEAD_S + 0.25 * i
        recs.append(rrec(f"u{i % 2 + 1}", 1, sched + 0.02 * (i % 7), 0.4 + 0.01 * i, ok=i % 9 != 4,
                         concurrency=2, scheduled_wall=T0 + sched))
    recs.append(rrec("u3", 1, 6.0, 0.5, concurrency=2))
    ev = {**phase("step", 1, 2, 5.0, 10.0), "rate": 4.0, "arrival": "gamma", "burstiness": 2.0,
          "max_concurrency": 2}
    search = {"event": "search", "wall": T0 + 15.5, "result": {"axis": "rate", "verdict": "capacity 4 req/s"}}
    run = write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0.0, 5.0), ev, {"event": "load_end", "wall": T0 + 15},
                                           search, run_end(16.0)],
                    meta={"profile": {"name": "synthetic", "rate": {"seed": 3}}})
    rep = build_report(run).as_dict()
    assert_same(oracle_report(run), rep, "report")  # every figure, rate and search included
    rows = rep["steps"]
    f = rows[1]["rate"]
    assert rows[0]["rate"] is None and rows[1]["label"] == "4 req/s"
    assert f["requests"] == 30 and f["late"] > 0 and f["scheduled"] is not None
    assert rep["search"] == search["result"]
