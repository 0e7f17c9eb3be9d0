"""One sample per step (requests ENDING in the steady window), tokens by chunk arrival, Little's law, the batch-means
hours interval in a report row, and the notes that go with them: exact figures on synthetic records."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, render_markdown
from harness.report.hours import batch_means, hours_interval
from harness.report.interval import RateEstimate
from harness.report.tokens import window_tokens
from harness.result import RequestResult
from tests.report.rundir import T0, frame_of, phase, rec, run_end, write_run


def load_end(wall: float) -> dict[str, Any]:
    """A ``load_end`` event at ``T0 + wall``: the last step ends here, in-flight requests then drain."""
    return {"event": "load_end", "wall": T0 + wall}


def _two_steps(root: Path) -> Path:
    """C=2 [0, 100) and C=2 [100, 200), load_end at 200, run_end at 210.

    Regular requests: 10 s, ttft 1 s, 100 tokens (per-stream 100 / 9 tok/s). Straddlers started in step 1 run on
    into step 2 slowly (a 90 -> 104, b 91 -> 101, 50 tokens); a's last request runs in the drain, fast
    (194 -> 202, 100 tokens in 7 s of decode). None of them belongs to any sample.
    """
    recs = [rec("a", 1, 10 * i, 10, concurrency=2) for i in range(9)]
    recs += [rec("b", 1, 1 + 10 * i, 10, concurrency=2) for i in range(9)]
    recs += [rec("a", 1, 90, 14, tokens=50, concurrency=2), rec("b", 1, 91, 10, ttft=4, tokens=50, concurrency=2)]
    recs += [rec("a", 2, 104 + 10 * i, 10, concurrency=2) for i in range(9)]
    recs += [rec("b", 2, 101 + 10 * i, 10, concurrency=2) for i in range(9)]
    recs += [rec("a", 2, 194, 8, tokens=100, concurrency=2), rec("b", 2, 191, 10, concurrency=2)]
    phases = [phase("step", 1, 2, 0), phase("step", 2, 2, 100), load_end(200), run_end(210)]
    return write_run(root, recs, phases)


def test_sample_excludes_the_next_step_and_the_drain(tmp_path: Path) -> None:
    s1, s2 = build_report(_two_steps(tmp_path / "run"))["steps"]
    # step 1: window (11, 100): a's 20..90 and b's 21..91 ends; the straddlers end in step 2
    assert s1["window_start_s"] == pytest.approx(11) and s1["sample"] == "ended_in_window"
    assert (s1["sample_requests"], s1["completed"], s1["requests"]) == (16, 16, 20)
    # step 2: the window opens at a's straddler end (104); b's 101 is before it; a's drain request ends at 202 and
    # b's last at 201, after load_end
    assert s2["end_source"] == "load_end" and s2["window_start_s"] == pytest.approx(4)
    assert (s2["sample_requests"], s2["completed"], s2["requests"]) == (18, 18, 20)
    for row in (s1, s2):
        assert row["per_stream_tps"] == pytest.approx(100 / 9)  # no straddler, no drain request
        assert row["e2e_p50_s"] == pytest.approx(10) and row["mean_output_tokens"] == pytest.approx(100)
        assert row["tpot_mean_s"] == pytest.approx(9 / 99)
        assert row["littles_law_c"] == pytest.approx(row["sample_requests"] / row["window_s"] * 10)
    assert s2["request_rate"] == pytest.approx(18 / 96)
    assert s2["tokens_by"] == "pro_rata"


def test_every_count_is_over_the_same_sample(tmp_path: Path) -> None:
    """C=2 [0, 60), run end 60: the first wave ends at 10; inside the window a failure, a truncation and a usable
    request end; a truncated request that started in the window ends after it and counts in no column."""
    recs = [
        rec("a", 1, 0, 10, concurrency=2), rec("b", 1, 0, 8, concurrency=2),
        rec("a", 1, 10, 10, concurrency=2),  # ends 20: usable
        rec("b", 1, 8, 12, ok=False, tokens=5, concurrency=2),  # ends 20: failure
        rec("a", 1, 20, 30, tokens=4096, truncated=True, concurrency=2),  # ends 50: truncated
        rec("b", 1, 20, 45, tokens=4096, truncated=True, in_reasoning=True, concurrency=2),  # ends 65: after e
    ]
    (row,) = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0), run_end(60)]))["steps"]
    assert (row["sample_requests"], row["completed"], row["errors"], row["usable"]) == (3, 2, 1, 1)
    assert (row["requests"], row["step_completed"], row["step_errors"]) == (6, 5, 1)
    assert row["truncated_pct"] == pytest.approx(50.0) and row["truncated_in_reasoning"] == 0
    assert row["usable_share"] == pytest.approx(0.5) and row["error_rate"] == pytest.approx(1 / 3)
    assert row["mean_output_tokens"] == pytest.approx((100 + 4096) / 2)
    assert row["window_usable_completions"] == 1 and row["request_rate"] == pytest.approx(1 / 50)
    assert row["errors_by_class"] == {"timeout_idle": 1} and row["step_errors_by_class"] == {"timeout_idle": 1}


def _chunked(**kw: Any) -> RequestResult:
    base: dict[str, Any] = {"prompt_id": "p", "start_wall": 100.0, "ttft": 1.0, "e2e": 5.0, "ok": True,
                            "output_tokens": 12, "chunk_times": [1.0, 2.0, 3.0, 4.0], "chunk_tokens": [1, 2, 3, 4]}
    base.update(kw)
    return RequestResult(**base)


def record_tokens_in(r: RequestResult, w0: float, w1: float) -> tuple[float, str]:
    """Output tokens of one request inside ``[w0, w1)`` by the report's rule (:func:`window_tokens` over a frame of
    it alone) and how they were placed (``chunks`` / ``pro_rata``; ``none`` when it is not counted)."""
    return window_tokens(frame_of([r]), w0, w1)


def test_tokens_by_chunk_arrival() -> None:
    r = _chunked()  # chunks at 101..104 with 1, 2, 3, 4 tokens; 2 usage tokens beyond them arrive at the end (105)
    assert record_tokens_in(r, 102.5, 105.0) == (7.0, "chunks")
    assert record_tokens_in(r, 102.5, 106.0) == (9.0, "chunks")
    assert record_tokens_in(r, 102.0, 103.0) == (2.0, "chunks")  # half-open: the chunk at 103 is the next window's
    assert record_tokens_in(r, 90.0, 110.0) == (12.0, "chunks")
    # no per-chunk usage (zeros): output tokens split evenly over the chunks
    assert record_tokens_in(_chunked(chunk_tokens=[0, 0, 0, 0]), 102.5, 110.0) == (6.0, "chunks")
    assert record_tokens_in(_chunked(chunk_tokens=None), 102.5, 110.0) == (6.0, "chunks")
    # chunks carrying more than the usage total: scaled to it
    assert record_tokens_in(_chunked(output_tokens=8), 102.5, 110.0)[0] == pytest.approx(7 * 8 / 10)
    # failed requests give nothing; without chunk times the decode interval [101, 105] is counted pro rata
    assert record_tokens_in(_chunked(ok=False), 90.0, 110.0) == (0.0, "none")
    assert record_tokens_in(_chunked(chunk_times=None), 103.0, 110.0) == (6.0, "pro_rata")
    assert window_tokens(frame_of([_chunked(), _chunked(start_wall=101.0)]), 102.5, 106.0) == (9.0 + 9.0, "chunks")
    assert window_tokens(frame_of([_chunked(), _chunked(chunk_times=None)]), 103.0, 110.0) == (9.0 + 6.0, "mixed")
    assert window_tokens(frame_of([_chunked(chunk_times=None)]), 103.0, 110.0) == (6.0, "pro_rata")
    assert window_tokens(frame_of([_chunked()]), 200.0, 210.0) == (0.0, "none")


def test_chunked_records_in_a_report(tmp_path: Path) -> None:
    """Two users of 10 s requests, 9 one-token chunks at +1..+9 s and one usage token at the end: 10 tokens each."""
    recs = [
        rec(u, 1, 10 * i + off, 10, tokens=10, concurrency=2, chunk_times=[float(t) for t in range(1, 10)],
            chunk_tokens=[1] * 9)
        for u, off in (("a", 0.0), ("b", 0.5)) for i in range(10)
    ]
    (row,) = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0), run_end(100)]))["steps"]
    assert row["tokens_by"] == "chunks"
    # window [10.5, 100): a's chunks at 10 i + 1..9 inside it and its usage tokens at the ends 20..90; b's chunks
    # at 10 i + 1.5..9.5 and its usage tokens at 10.5..90.5 (a time window, half-open: 10.5 is in it)
    a = sum(1 for i in range(10) for t in range(1, 10) if 10.5 <= 10 * i + t < 100) + 8
    b = sum(1 for i in range(10) for t in range(1, 10) if 10.5 <= 10 * i + 0.5 + t < 100) + 9
    assert row["window_output_tokens"] == pytest.approx(a + b)
    assert row["output_tps"] == pytest.approx((a + b) / 89.5)


def test_littles_law_mismatch_is_a_note(tmp_path: Path) -> None:
    """C=4 but every user idles 10 s between 10 s requests: 2 requests in flight on average, not 4."""
    recs = [rec(f"u{i}", 1, 5 * i + 20 * j, 10, concurrency=4) for i in range(4) for j in range(20)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 4, 0), run_end(400)]))
    (row,) = rep["steps"]
    ends = [5 * i + 20 * j + 10 for i in range(4) for j in range(20)]
    n = sum(1 for t in ends if 25 < t < 400)
    assert n == 74 and row["littles_law_c"] == pytest.approx(n / 375 * 10)
    assert row["littles_law_ok"] is False and row["low_confidence"] is None
    assert any(x.startswith("C=4: Little's law does not hold: completions/s × mean E2E = 1.97 in flight, target C=4 "
                            "(-51 %)") for x in rep["notes"])


def test_row_hours_are_renewal_reward_over_the_window(tmp_path: Path) -> None:
    """Two users of 10 s requests (b's first one 5 s) in [0, 1000): window (10, 1000); the interval is
    renewal-reward over the 197 cycles ending in it (every cycle 10 s, all usable: V = 0, SE = sqrt(C / 4) / W),
    batch means (10 batches of 99 s) its cross-check."""
    recs = [rec("a", 1, 10 * i, 10, concurrency=2) for i in range(100)]
    recs += [rec("b", 1, 0, 5, concurrency=2)] + [rec("b", 1, 5 + 10 * i, 10, concurrency=2) for i in range(99)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 2, 0), run_end(1000)],
                                 {"profile": {"name": "x", "report": {"hours_to_n": [1000, 10**7]}}}))
    (row,) = rep["steps"]
    ends = [T0 + 10 * i + 10 for i in range(100)] + [T0 + 5 + 10 * i + 10 for i in range(99)] + [T0 + 5]
    bm = batch_means(ends, T0 + 10, T0 + 1000, row["e2e_mean_s"])
    assert bm.events == 197 and bm.batches == 10 and bm.batch_s == pytest.approx(99)
    iv = row["hours_interval"]
    assert iv["method"] == "renewal_reward" and iv["cycles"] == 197 and iv["streams"] == 2 and iv["dof"] == 196
    assert iv["batches"] == 0 and iv["reason"] is None and iv["bandwidth"] == 6  # max(C, ceil(197^(1/3)))
    assert iv["rate"] == pytest.approx(197 / 990) and iv["inflation"] == pytest.approx(1.0)
    assert iv["rate_se"] == pytest.approx(math.sqrt(2 / 4) / 990, rel=1e-6) and iv["sigma2"] == pytest.approx(0.0)
    rr = RateEstimate(iv["rate"], 197, 990.0, iv["rate_se"], iv["sigma2"], iv["t"])
    cc = iv["cross_check"]
    assert (cc["method"], cc["batches"], cc["batch_s"]) == ("batch_means", 10, pytest.approx(99))
    assert (cc["rate_low"], cc["rate_high"]) == pytest.approx(bm.rate_bounds()) and cc["agree"] is True
    for h, n in zip(row["hours"], (1000, 10**7), strict=True):
        want = hours_interval(n, rr)
        assert {k: h[k] for k in want} == pytest.approx(want)
        assert h["hours_low"] < h["hours"] < h["hours_high"]
        assert h["token_check"] == "inside"
    assert iv["rel_halfwidth"] < 0.10 and iv["needed_window_s"] is None
    assert not any("interval is ±" in n for n in rep["notes"])


def test_wide_interval_names_the_duration_needed(tmp_path: Path) -> None:
    """Single stream: bursts of 2 s requests between 60 s ones make batch counts vary: the interval is wide and
    the note says how long single_stream.duration should be."""
    durations = ([2.0] * 15 + [60.0]) * 8
    recs, t = [], 0.0
    for d in durations:
        recs.append(rec("u1", 0, t, d))
        t += d
    rep = build_report(write_run(tmp_path / "run", recs, [phase("single", 0, 1, 0), run_end(t - 1)]))
    (row,) = rep["steps"]
    iv = row["hours_interval"]
    assert iv["method"] == "renewal_reward" and iv["streams"] == 1 and iv["inflation"] >= 1.0
    assert iv["rel_halfwidth"] > 0.10 and iv["duration_key"] == "single_stream.duration"
    need = row["window_s"] * (iv["rel_halfwidth"] / 0.10) ** 2
    assert iv["needed_window_s"] == pytest.approx(need)
    assert iv["needed_duration_s"] == pytest.approx(need + row["window_start_s"])
    note = (f"single: the hours-to-N interval is ±{100 * iv['rel_halfwidth']:.0f} % (renewal-reward, "
            f"{iv['cycles']} requests of 1 stream); for ±10 % the window would need ~{math.ceil(need):,} s: set "
            f"single_stream.duration to ≥ {math.ceil(need + row['window_start_s']):,} s.")  # least durations rounded up
    assert note in rep["notes"]


def test_token_cross_check_outside_the_interval_is_a_note(tmp_path: Path) -> None:
    """Regular completions of users a and b (a narrow interval), while user c's second request,
    20,000 tokens from 10 to 1100, straddles the window end: its tokens inflate tok/s, so the token-based hours
    fall below the request-based interval."""
    recs = [rec(u, 1, 10 * i, 10, concurrency=3) for u in ("a", "b") for i in range(100)]
    recs += [rec("c", 1, 0, 10, concurrency=3), rec("c", 1, 10, 1090, ttft=0.0, tokens=20_000, concurrency=3)]
    rep = build_report(write_run(tmp_path / "run", recs, [phase("step", 1, 3, 0), phase("step", 2, 3, 1000),
                                                          run_end(1300)]))
    row = rep["steps"][0]
    assert row["steady"] and row["window_start_s"] == pytest.approx(10)
    h = row["hours"][0]
    assert row["window_usable_completions"] == 196 and row["hours_interval"]["cross_check"]["batches"] == 10
    # a's and b's 99 requests each, decoding inside [10, 1000), and c's 20,000 tokens pro rata: 10,000 reasoning
    # over [10, 10.5], 10,000 answer over [10.5, 1100]
    assert row["window_output_tokens"] == pytest.approx(198 * 100 + 10_000 + 10_000 * 989.5 / 1089.5)
    assert h["token_hours"] < h["hours_low"] and h["token_check"] == "outside"
    assert any(n.startswith("C=3 (step 1): the token-based cross-check") and "OUTSIDE" in n for n in rep["notes"])
    assert "⚠ outside" in render_markdown(rep)
