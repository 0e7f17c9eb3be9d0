"""Workers lost mid-run in the report (harness.report.lost), and the Little's-law note of a small sample."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, render_markdown
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _lost(since: float, users: int | None = 2, in_flight: int | None = 2, state: str = "missing") -> dict[str, Any]:
    return {"event": "worker_lost", "wall": T0 + since + 3.0, "since_wall": T0 + since, "worker": "w2",
            "state": state, "users": users, "in_flight": in_flight}


def _run(tmp_path: Path, lost: dict[str, Any] | None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """C=4 over [0, 100), C=8 over [100, 200): 10 s requests back to back. With ``lost``, users w2:1 and w2:2 send
    nothing after +``at`` s (their worker died; default 50); C=8 runs on the live worker."""
    at = float((lost or {}).pop("at", 50.0))
    recs = []
    for u in ("w1:1", "w1:2", "w2:1", "w2:2"):
        off = 0.5 * len(recs) / 10
        stop = at if lost is not None and u.startswith("w2") else 100
        recs += [rec(u, 1, off + 10 * j, 10, concurrency=4) for j in range(10) if off + 10 * j + 10 <= stop]
    recs += [rec(f"w1:{k}", 2, 100 + 0.1 * k + 10 * j, 10, concurrency=8) for k in range(3, 11) for j in range(9)]
    events = [phase("step", 1, 4, 0), phase("step", 2, 8, 100)]
    if lost is not None:
        events.append(_lost(at, **lost))
    events.append(run_end(200))
    return build_report(write_run(tmp_path / "run", recs, events, meta))


def test_a_step_that_lost_a_worker_is_not_steady_and_the_note_names_it(tmp_path: Path) -> None:
    rep = _run(tmp_path, {}, {"cut_off": 2})
    c4, c8 = rep["steps"]
    assert c4["steady"] is False and "worker w2 stopped answering" in c4["not_steady_reason"]
    assert "+50.0 s into the step" in c4["not_steady_reason"] and "2 users lost" in c4["not_steady_reason"]
    assert "fewer than C=4 users" in c4["not_steady_reason"]
    assert c8["steady"] is True  # Locust gave the 8 users of the next step to the live worker
    clock = time.strftime("%H:%M:%S", time.gmtime(T0 + 50))
    note = (f"WORKER LOST: worker w2 stopped answering at {clock} UTC during C=4 (+50.0 s into it): its 2 users "
            "stopped; 2 of its requests in flight were cut off (never recorded). Fewer users than the target ran "
            "until the next step (C=8) started")
    assert any(n.startswith(note) for n in rep["notes"]), rep["notes"]
    assert any(n.startswith("C=4: NOT steady, worker w2") for n in rep["notes"])
    assert not any(n.startswith("CUT OFF") for n in rep["notes"])  # the 2 cut off are the lost worker's
    assert not any(n.startswith("Requests cut off when the run stopped") for n in rep["notes"])
    assert "WORKER LOST" in render_markdown(rep)


def test_unknown_counts_say_unknown_and_a_stop_timeout_cut_off_keeps_its_note(tmp_path: Path) -> None:
    rep = _run(tmp_path, {"users": None, "in_flight": None, "at": 30.0}, {"cut_off": 3})
    assert any("until +63 s (Locust then gave its users to the live workers)" in n for n in rep["notes"])
    assert any("its an unknown number of users stopped; an unknown number of its requests in flight were cut off"
               in n for n in rep["notes"]), rep["notes"]
    assert "(unknown users lost, requests in flight not recorded: unknown)" in rep["steps"][0]["not_steady_reason"]
    assert any(n.startswith("CUT OFF: 3 request(s)") for n in rep["notes"])


def test_without_a_loss_both_steps_are_steady(tmp_path: Path) -> None:
    rep = _run(tmp_path, None)
    assert [r["steady"] for r in rep["steps"]] == [True, True]
    assert not any("WORKER LOST" in n for n in rep["notes"])


def test_littles_law_mismatch_of_a_small_sample_is_a_note_saying_low_confidence(tmp_path: Path) -> None:
    """C=4, every user idles 10 s between 10 s requests, a 60 s step: few requests in the window (low confidence)
    and about 2 in flight, not 4: the note is there, saying the sample is small."""
    recs = [rec(f"u{i}", 1, 5 * i + 20 * j, 10, concurrency=4) for i in range(4) for j in range(3)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 4, 0), run_end(60)]))
    (row,) = rep["steps"]
    n = sum(1 for i in range(4) for j in range(3) if 25 < 5 * i + 20 * j + 10 < 60)
    assert row["sample_requests"] == n and row["littles_law_c"] == pytest.approx(n / 35 * 10)
    assert row["littles_law_ok"] is False and row["low_confidence"]
    want = (f"C=4: Little's law does not hold: completions/s × mean E2E = {n / 3.5:.2f} in flight, target C=4 "
            f"({100 * (n / 3.5 / 4 - 1):+.0f} %) (low confidence: {n} requests over 35.0 s; a short window "
            "misreads it)")
    assert any(x.startswith(want) for x in rep["notes"]), rep["notes"]


def test_a_worker_back_after_a_stall_leaves_the_step_not_steady(tmp_path: Path) -> None:
    """A worker cut off by the network comes back too, but its users were stalled: none of its requests completed
    while it was missing. The step is not steady until the last of its requests in flight at the cut ended (here a
    timeout at +48 s, after its worker_back at +34 s); the other worker's records alone do not make it steady."""
    w1 = [rec("w1:1", 1, 0.5 + 10 * j, 10, concurrency=2) for j in range(9)]
    w2 = [rec("w2:1", 1, 10 * j, 10, concurrency=2) for j in range(3)]  # ends at +10, +20, +30 (before the cut)
    w2 += [rec("w2:1", 1, 30.0, 18.0, ok=False, concurrency=2)]  # in flight at the cut: timed out at +48
    w2 += [rec("w2:1", 1, 48.0 + 10 * j, 10, concurrency=2) for j in range(4)]
    events = [phase("step", 1, 2, 0), _lost(31, users=1, in_flight=1),
              {"event": "worker_back", "wall": T0 + 38, "worker": "w2"}, run_end(100)]
    rep = build_report(write_run(tmp_path / "run", w1 + w2, events))
    row = rep["steps"][0]
    assert row["steady"] is False, row
    assert "worker w2 was missing for 17.0 s (no heartbeat, then back)" in row["not_steady_reason"], row
    assert "none of its requests completed while the master heard nothing (1 users stalled)" in row["not_steady_reason"]
    assert "fewer than C=2 users ran then" in row["not_steady_reason"]
    assert not any("WORKER LOST" in n for n in rep["notes"])  # it came back: no lost worker, no cut-off count


def test_a_stalled_workers_requests_completing_when_its_link_returns_do_not_make_it_late(tmp_path: Path) -> None:
    """CI's case: w2's link is cut at +31.5 s (last heartbeat +31, lost at +34), comes back at +38; its request in
    flight completes OK at +38.2, before its worker_back at +39 (TCP delivered the buffered stream first). A
    completion at +31.3, before the cut, is not progress either. Still a stall: C=2 NOT steady."""
    w1 = [rec("w1:1", 1, 0.5 + 10 * j, 10, concurrency=2) for j in range(9)]
    w2 = [rec("w2:1", 1, 1.3 + 10 * j, 10, concurrency=2) for j in range(3)]  # ends +11.3, +21.3, +31.3
    w2 += [rec("w2:1", 1, 31.3, 6.9, concurrency=2)]  # in flight at the cut, completed OK when the link came back
    w2 += [rec("w2:1", 1, 39.0 + 10 * j, 10, concurrency=2) for j in range(5)]
    events = [phase("step", 1, 2, 0), _lost(31, users=1, in_flight=1),
              {"event": "worker_back", "wall": T0 + 39, "worker": "w2"}, run_end(100)]
    rep = build_report(write_run(tmp_path / "run", w1 + w2, events))
    row = rep["steps"][0]
    assert row["steady"] is False, row
    assert "worker w2 was missing for 8.0 s (no heartbeat, then back)" in row["not_steady_reason"], row


def test_a_worker_back_withdraws_its_loss(tmp_path: Path) -> None:
    """A worker_back of the same worker after its worker_lost: it was late, not dead (one of its requests completed
    at +30.5 s, after one heartbeat interval past its last heartbeat at +29 s and before the master called it lost
    at +32 s: its users kept running)."""
    recs = [rec(u, 1, 0.5 * k + 10 * j, 10, concurrency=2) for k, u in enumerate(("w1:1", "w2:1")) for j in range(9)]
    events = [phase("step", 1, 2, 0), _lost(29, users=1, in_flight=1),
              {"event": "worker_back", "wall": T0 + 34, "worker": "w2"}, run_end(100)]
    rep = build_report(write_run(tmp_path / "run", recs, events))
    assert rep["steps"][0]["steady"] is True
    assert not any("WORKER LOST" in n for n in rep["notes"])


def test_the_simulators_extra_options_are_a_note_naming_where_each_came_from(tmp_path: Path) -> None:
    recs = [rec("w1:1", 1, 10 * j, 10, concurrency=1) for j in range(5)]
    meta = {"simulator": {"preset": "demo", "args": ["--prefix-cache-tokens", "9"],
                          "env_args": ["--drift-per-hour", "0.5"]}}
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 1, 0), run_end(50)], meta))
    assert ("SIMULATOR OPTIONS: the built-in simulator ran with --prefix-cache-tokens 9 (simulator.args); "
            "--drift-per-hour 0.5 ($LLMLOAD_SIM_ARGS); what they set") in "\n".join(rep.notes)
    plain = build_report(write_run(tmp_path / "run2", recs, [phase("step", 1, 1, 0), run_end(50)]))
    assert not any("SIMULATOR OPTIONS" in n for n in plain.notes)
