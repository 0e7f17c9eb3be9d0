"""Per-step figures on a hand-computed run: one sample per step (the requests ending in the steady window),
pro-rata and chunk-arrival tokens, request rate, counts, latencies, Little's law, hours to N, warm-up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.histogram import LogHistogram
from harness.report import build_report, render_markdown
from harness.result import RequestResult
from tests.report.rundir import T0, phase, rec, run_end, write_run


def _scenario(root: Path, meta: dict[str, Any] | None = None) -> Path:
    """Warm-up [0, 10), single stream [10, 40), C=2 [40, 100); times relative to T0.

    Single stream (u1): A 10->20, B 20->30, C 30->45 (carried into C=2). Window [20, 40).
    C=2: u1 D 45->65, E 65->85, F 85->105; u2 G 41->61, H 61->80 (truncated in reasoning),
    I 80->90 (error), J 90->98 (truncated). First wave: u1's C (45), u2's G (61) -> window [61, 100).
    Samples (requests ending in the window after its start): single B; C=2 D, E, H, I, J (G opened the window,
    F ends after it).
    """
    records = [
        rec("w", -1, 1, 5, tokens=5000),
        rec("w", -1, 6, 2, ok=False),
        rec("u1", 0, 10, 10, ttft=1, tokens=90),   # A decode [11, 20]
        rec("u1", 0, 20, 10, ttft=1, tokens=90),   # B decode [21, 30]
        rec("u1", 0, 30, 15, ttft=1, tokens=140),  # C decode [31, 45]
        rec("u1", 1, 45, 20, ttft=2, tokens=180, concurrency=2),  # D decode [47, 65]
        rec("u1", 1, 65, 20, ttft=2, tokens=180, concurrency=2),  # E decode [67, 85]
        rec("u1", 1, 85, 20, ttft=2, tokens=180, concurrency=2),  # F decode [87, 105]
        rec("u2", 1, 41, 20, ttft=1, tokens=190, concurrency=2),  # G decode [42, 61]
        rec("u2", 1, 61, 19, ttft=1, tokens=180, truncated=True, in_reasoning=True, concurrency=2),  # H [62, 80]
        rec("u2", 1, 80, 10, ttft=1, tokens=50, ok=False, concurrency=2),  # I error
        rec("u2", 1, 90, 8, ttft=2, tokens=60, truncated=True, concurrency=2),  # J decode [92, 98]
    ]
    phases = [phase("warmup", -1, 1, 0), phase("single", 0, 1, 10, 30), phase("step", 1, 2, 40, 60), run_end(100)]
    return write_run(root, records, phases, meta)


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    return build_report(_scenario(tmp_path / "run")).as_dict()


def test_steps_and_windows(report: dict[str, Any]) -> None:
    single, c2 = report["steps"]
    assert (single["label"], single["concurrency"], c2["label"], c2["concurrency"]) == ("single", 1, "C=2", 2)
    assert single["steady"] and c2["steady"]
    assert single["window_start_wall"] == pytest.approx(T0 + 20) and single["window_s"] == pytest.approx(20)
    assert c2["window_start_wall"] == pytest.approx(T0 + 61) and c2["window_s"] == pytest.approx(39)
    assert c2["first_wave_end_s"] == pytest.approx(21)
    assert c2["end_source"] == "run_end" and single["end_source"] == "next_phase"


#: Tokens of the C=2 window [61, 100). Each record has half its tokens reasoning, over [ttft, ttfat = ttft + 0.5],
#: and half answer, over [ttfat, end] (rundir.rec): D's answer 90 * 4/17.5, E 180, F's reasoning 90 and answer
#: 90 * 12.5/17.5, G 0, H 180 (truncated in reasoning: no TTFAT, all over [62, 80]), J 60, I (error) not counted.
C2_TOKENS = 90 * 4 / 17.5 + 180 + 90 + 90 * 12.5 / 17.5 + 180 + 60


def test_pro_rata_tokens_at_window_edges(report: dict[str, Any]) -> None:
    single, c2 = report["steps"]
    # single [20, 40): A 0, B 90, C's reasoning 70 over [31, 31.5] and answer 70 * 8.5/13.5 over [31.5, 45]
    single_tokens = 90 + 70 + 70 * 8.5 / 13.5
    assert single["window_output_tokens"] == pytest.approx(single_tokens)
    assert single["output_tps"] == pytest.approx(single_tokens / 20)
    assert single["output_tps_reasoning"] == pytest.approx((45 + 70) / 20)
    assert single["output_tps_answer"] == pytest.approx((45 + 70 * 8.5 / 13.5) / 20)
    assert c2["window_output_tokens"] == pytest.approx(C2_TOKENS)
    assert c2["output_tps"] == pytest.approx(C2_TOKENS / 39)


def test_request_rate_counts_usable_ends_in_window(report: dict[str, Any]) -> None:
    single, c2 = report["steps"]
    # B; A ends at 20 = the window start: the first wave's last request, which opened the window, is not counted
    assert single["window_usable_completions"] == 1
    assert single["request_rate"] == pytest.approx(1 / 20)
    # D (65), E (85); G (61) opened the window, H and J truncated, I failed, F ends after the window
    assert c2["window_usable_completions"] == 2
    assert c2["request_rate"] == pytest.approx(2 / 39)


def test_counts_errors_truncation_over_the_sample(report: dict[str, Any]) -> None:
    single, c2 = report["steps"]
    assert single["sample"] == "ended_in_window" and single["sample_requests"] == 1
    assert (single["completed"], single["errors"], single["truncated_pct"]) == (1, 0, 0.0)
    # whole step (requests started in it), kept for the record
    assert (single["requests"], single["step_completed"], single["step_errors"]) == (3, 3, 0)
    assert (c2["requests"], c2["step_completed"], c2["step_errors"]) == (7, 6, 1)
    # sample D, E, H, I, J: every count over the same set
    assert (c2["sample_requests"], c2["completed"], c2["errors"], c2["usable"]) == (5, 4, 1, 2)  # usable: D, E
    assert c2["errors_by_class"] == {"timeout_idle": 1}
    assert c2["error_rate"] == pytest.approx(1 / 5)
    assert c2["truncated"] == 2 and c2["truncated_pct"] == pytest.approx(100 * 2 / 4)  # H, J
    assert c2["truncated_in_reasoning"] == 1 and c2["truncated_in_reasoning_pct"] == pytest.approx(100 / 4)


def test_latency_over_the_successes_of_the_sample(report: dict[str, Any]) -> None:
    single, c2 = report["steps"]
    assert single["latency_n"] == 1  # B (C ends in the next step)
    assert single["e2e_p50_s"] == pytest.approx(10)
    assert single["mean_output_tokens"] == pytest.approx(90)
    # C=2 sample successes: D (65), H (80), E (85), J (98); I failed
    assert c2["latency_n"] == 4
    assert c2["e2e_p50_s"] == pytest.approx(19.5)  # [8, 19, 20, 20]
    assert c2["ttfat_n"] == 3  # H has no answer token
    assert c2["mean_output_tokens"] == pytest.approx(150)
    assert c2["mean_output_tokens_usable"] == pytest.approx(180)
    assert c2["usable_share"] == pytest.approx(0.5)
    assert c2["tokens_per_usable"] == pytest.approx(300)
    # per-stream tok/s: Σ tokens / Σ (e2e - ttft), a ratio of sums
    assert c2["per_stream_tps"] == pytest.approx((180 * 3 + 60) / (18 * 3 + 6))


def test_littles_law(report: dict[str, Any]) -> None:
    c2 = report["steps"][1]
    # 5 requests ended in 39 s, mean E2E (20 + 20 + 19 + 10 + 8) / 5 = 15.4 s -> 1.97 in flight for C=2
    assert c2["completion_rate"] == pytest.approx(5 / 39)
    assert c2["e2e_mean_s"] == pytest.approx(15.4)
    assert c2["littles_law_c"] == pytest.approx(5 / 39 * 15.4)
    assert c2["littles_law_ok"] is True
    assert not any(n.startswith("C=2: Little's law") for n in report["notes"])
    # single: 1 request in a 20 s window (0.50 in flight for C=1): a note, saying the sample is small
    assert any(n.startswith("single: Little's law does not hold: completions/s × mean E2E = 0.50 in flight, target "
                            "C=1 (-50 %) (low confidence: 1 requests over 20.0 s") for n in report["notes"])


def test_hours_rows(report: dict[str, Any]) -> None:
    c2 = report["steps"][1]
    assert report["hours_to_n"] == [100_000, 200_000, 500_000, 900_000]
    assert c2["usable_criterion"] == "usable = success, not truncated, passing the profile's usable checks"
    h = c2["hours"][0]
    assert h["n"] == 100_000
    assert h["hours"] == pytest.approx(100_000 * 39 / 2 / 3600)
    # 5 requests (2 usable) of 2 streams ended in the 39 s window: renewal-reward needs 10 (5 usable): no interval
    iv = c2["hours_interval"]
    assert iv["method"] == "renewal_reward" and iv["cycles"] == 5 and iv["streams"] == 2
    assert iv["reason"] == ("5 requests (2 usable) ended in the 39.0 s window: an interval needs at least 10 "
                            "(5 usable)") and iv["duration_key"] == "steps.duration"
    assert h["hours_low"] is None and h["hours_high"] is None and h["token_check"] is None
    # the least window that gives one: 10 cycles of 2 streams at the mean E2E (15.4 s), and 5 usable ones at the
    # usable share (0.5): max(10 x 15.4 / 2, 5 x 15.4 / (2 x 0.5)) = 77 s; + the first wave (21 s)
    assert c2["usable_share"] == pytest.approx(0.5) and c2["e2e_mean_s"] == pytest.approx(15.4)
    assert iv["needed_window_s"] == pytest.approx(77) and iv["needed_duration_s"] == pytest.approx(98)
    # batch means is the cross-check: 39 s < 5 batches x 2 x mean E2E (15.4 s), no interval either
    assert iv["cross_check"]["method"] == "batch_means" and iv["cross_check"]["reason"].endswith("no interval")
    assert iv["cross_check"]["agree"] is None
    assert any(n.startswith("C=2: hours to N has no interval (5 requests (2 usable)")
               and n.endswith("lengthen steps.duration to ≥ 98 s.") for n in report["notes"])
    assert h["token_hours"] == pytest.approx(100_000 * 150 / 0.5 / (C2_TOKENS / 39) / 3600)
    # what-ifs: hours per 1,000 output tokens per usable sample (usable mean 180), usable = success (4 in 39 s)
    assert h["what_if"]["hours_per_1k_output_tokens"] == pytest.approx(h["hours"] * 1000 / 180)
    assert h["what_if"]["usable_is_success"]["hours"] == pytest.approx(100_000 * 39 / 4 / 3600)


def test_warmup_excluded(report: dict[str, Any]) -> None:
    w = report["warmup"]
    assert (w["requests"], w["completed"], w["errors"]) == (2, 1, 1)
    assert w["errors_by_class"] == {"timeout_idle": 1}
    assert w["e2e_p50_s"] == pytest.approx(3.5) and w["e2e_max_s"] == pytest.approx(5)
    assert report["totals"]["requests"] == 10 and report["totals"]["completed"] == 9
    assert all(r["step"] >= 0 for r in report["steps"])
    md = render_markdown(report)
    assert "Warm-up (excluded from every figure): 2 requests, 1 ok" in md


def test_percentiles_and_gap_histograms(tmp_path: Path) -> None:
    # C=10: ten users; first requests all end at +10 -> window [10, 20); second requests carry the figures
    gaps = LogHistogram.of([0.02] * 9 + [0.5]).to_json()
    records = []
    for i in range(10):
        u = f"u{i}"
        records.append(rec(u, 1, 0, 10, ttft=5.0, concurrency=10))
        records.append(rec(u, 1, 10, 5, ttft=0.1 * (i + 1), concurrency=10, gap_hist=gaps))
    root = write_run(tmp_path / "run", records, [phase("step", 1, 10, 0), run_end(20)])
    (row,) = build_report(root).as_dict()["steps"]
    assert row["window_start_s"] == pytest.approx(10)
    assert row["latency_n"] == 10
    assert row["ttft_p50_s"] == pytest.approx(0.55)
    assert row["ttft_p90_s"] == pytest.approx(0.91)
    assert row["ttft_p99_s"] == pytest.approx(0.991)
    assert row["gap_n"] == 100
    assert row["gap_p50_s"] == pytest.approx(0.02, rel=0.005)
    assert row["gap_p99_s"] == pytest.approx(0.5, rel=0.005)


def test_seed_figures_reproduced_from_a_step(tmp_path: Path) -> None:
    """32 users each streaming 2965-token requests back to back at 577.8/32 tok/s -> 577.8 tok/s, 142.5 h."""
    d = 32 * 2965 / 577.8  # seconds per request so that 32 streams sum to 577.8 tok/s
    records = []
    for i in range(32):
        t = i * d / 32  # users ramp up over one request duration: completions evenly spread
        while t < 12 * d:
            records.append(rec(f"u{i}", 1, t, d, ttft=0.0, tokens=2965, concurrency=32))
            t += d
    root = write_run(tmp_path / "run", records, [phase("step", 1, 32, 0), run_end(10 * d)],
                     {"profile": {"name": "seed", "report": {"hours_to_n": [100_000]}}})
    rep = build_report(root).as_dict()
    (row,) = rep["steps"]
    assert row["steady"]
    assert row["output_tps"] == pytest.approx(577.8, rel=1e-9)
    assert row["mean_output_tokens"] == pytest.approx(2965)
    assert rep["hours_to_n"] == [100_000]
    assert row["hours"][0]["token_hours"] == pytest.approx(142.5, abs=0.1)
    # request-based figure agrees within the count's granularity
    assert row["hours"][0]["hours"] == pytest.approx(142.5, rel=0.05)


def test_time_scale_compressed_time(tmp_path: Path) -> None:
    root = _scenario(tmp_path / "run", {"simulator": {"preset": "demo", "time_scale": 0.1}})
    rep = build_report(root).as_dict()
    assert rep["simulated"] and rep["time_scale"] == 0.1
    c2 = rep["steps"][1]
    rt = c2["real_time"]
    assert rt["output_tps"] == pytest.approx(c2["output_tps"] * 0.1)
    assert rt["e2e_p50_s"] == pytest.approx(c2["e2e_p50_s"] / 0.1)
    assert rt["hours"][0]["hours"] == pytest.approx(c2["hours"][0]["hours"] / 0.1)
    assert any("COMPRESSED TIME" in n for n in rep["notes"])
    md = render_markdown(rep)
    assert "COMPRESSED TIME" in md and "Real-time equivalents" in md


def test_real_server_has_no_real_time_block(report: dict[str, Any]) -> None:
    assert report["time_scale"] == 1.0 and report["simulated"] is False
    assert all(r["real_time"] is None for r in report["steps"])


def test_estimated_tokens_and_suspect_truncation_notes(tmp_path: Path) -> None:
    records = [
        rec("u1", 0, 0, 10),  # opens the window: not in the sample
        rec("u1", 0, 10, 10, token_source="estimate"),
        rec("u1", 0, 20, 10, truncated=True, suspect_truncation=True),
        rec("u1", 0, 30, 10),
    ]
    root = write_run(tmp_path / "run", records, [phase("single", 0, 1, 0), run_end(40)])
    rep = build_report(root).as_dict()
    assert rep["totals"]["estimated_tokens"] == 1
    assert rep["totals"]["estimated_tokens_share"] == pytest.approx(0.25)
    # of the sample: the 2nd and 3rd requests (the 1st opened the window, the 4th ends at the step end, e = 40)
    assert rep["steps"][0]["estimated_tokens_share"] == pytest.approx(0.5)
    assert rep["totals"]["suspect_truncations"] == 1
    notes = " ".join(rep["notes"])
    assert "client-estimated" in notes and "suspect truncation" in notes


def test_report_is_json_ready_and_markdown_has_tables(report: dict[str, Any]) -> None:
    json.dumps(report, allow_nan=False)
    md = render_markdown(report)
    assert md.startswith(f"# Load report: {report['run_id']}")
    assert "k2-test" in md and "http://127.0.0.1:8000/v1" in md
    assert "| step | C | started (whole step) | completed | errors | req/s | output tok/s | per-stream tok/s |" in md
    assert "| C=2 ‡ | 2 | 7 | 4 | 1 |" in md  # a handful of synthetic completions: flagged low-confidence
    assert "‡ C=2: low confidence," in md
    assert "N=100,000" in md and "## Formulas" in md and "## Notes" in md
    assert "Errors at C=2: timeout_idle ×1 of the requests started in the step; timeout_idle ×1 in the sample" in md


def test_per_stream_rate_is_a_ratio_of_sums_robust_to_burst_delivery() -> None:
    from harness.report.exprs import per_stream_parts
    from tests.report.rundir import frame_of

    def _per_stream_tps(sample: list[RequestResult]) -> float | None:
        tok, sec = frame_of(sample).select(*per_stream_parts()).row(0)
        return tok / sec if sec else None

    normal = RequestResult("p", ttft=0.1, e2e=10.1, output_tokens=100)  # 10 tok/s
    burst = RequestResult("p", ttft=5.0, e2e=5.0001, output_tokens=100)  # all tokens in one read: 1e6 tok/s alone
    assert _per_stream_tps([normal, burst]) == pytest.approx(200 / 10.0001)
    assert _per_stream_tps([RequestResult("p", ttft=None, e2e=1.0, output_tokens=5)]) is None


def test_short_or_empty_steady_window_is_low_confidence() -> None:
    from harness.report.figures import low_confidence

    base = {"steady": True, "window_s": 20.0, "e2e_p50_s": 5.0, "window_usable_completions": 40}
    assert low_confidence(base) is None
    short = {**base, "window_s": 10.0}
    assert "window 10.0 s < 3 × median E2E (5.0 s)" in (low_confidence(short) or "")
    empty = {**base, "window_usable_completions": 3}
    assert "3 usable completions in the window (< 10)" in (low_confidence(empty) or "")
    assert low_confidence({**short, "steady": False}) is None  # not steady is flagged separately (†)


def test_failing_step_is_called_out_in_the_notes(tmp_path: Path) -> None:
    from harness.report import build_report
    from tests.report.rundir import phase, rec, run_end, write_run

    recs = [rec("u1", 0, 0.0, 2.0)] + [
        rec(f"u{i % 4}", 1, 10.0 + 0.01 * i, 0.001, ttft=None, tokens=0, ok=False, concurrency=4) for i in range(300)
    ]
    run = write_run(tmp_path / "run", recs, [phase("single", 0, 1, 0.0), phase("step", 1, 4, 10.0), run_end(20.0)])
    rep = build_report(run).as_dict()
    notes = " ".join(rep["notes"])
    assert "C=4: 100.0 % of requests FAILED (timeout_idle 296)" in notes  # the 4 of the first wave excepted


def test_client_read_lag_and_starved_steps(tmp_path: Path) -> None:
    """Single stream healthy (lags 0.1-0.3 ms); C=2 with 3 of 10 requests read > 0.1 s late: STARVED (30 % > 10 %).
    A step whose records carry no read lag (TLS) has no figures and is not called starved."""
    single = [rec("u1", 0, 10 + 3 * i, 3, read_lag_max=0.0001 * (1 + i % 3)) for i in range(10)]
    lags = [0.0002, 0.0003, 0.05, 0.1, 0.4, 0.0002, 0.25, 0.0001, 0.6, 0.0004]  # 0.1 itself is not "above"
    step = [rec(f"u{1 + i % 2}", 1, 41 + 3 * (i // 2), 3, concurrency=2, read_lag_max=v) for i, v in enumerate(lags)]
    tls = [rec(f"u{1 + i % 2}", 2, 71 + 3 * (i // 2), 3, concurrency=2) for i in range(6)]
    phases = [phase("single", 0, 1, 10, 30), phase("step", 1, 2, 40, 30), phase("step", 2, 2, 70, 30), run_end(100)]
    rep = build_report(write_run(tmp_path / "run", single + step + tls, phases)).as_dict()
    s0, s1, s2 = rep["steps"]
    assert s0["client_lag_requests"] == 10 and s0["client_lagged_pct"] == 0 and not s0["client_starved"]
    assert s0["client_read_lag_max_s"] == pytest.approx(0.0003)
    assert s1["client_lag_requests"] == 10 and s1["client_lagged_pct"] == pytest.approx(30.0)
    assert s1["client_starved"] and s1["client_read_lag_max_s"] == 0.6
    assert s1["client_read_lag_p50_s"] == pytest.approx(0.0252)  # (0.0004 + 0.05) / 2
    assert s2["client_lag_requests"] == 0 and s2["client_read_lag_p99_s"] is None and not s2["client_starved"]
    starved = [n for n in rep["notes"] if "LOAD GENERATOR WAS STARVED" in n]
    assert len(starved) == 1 and starved[0].startswith(s1["label"]) and "30 %" in starved[0]
    md = render_markdown(rep)
    assert f"Client STARVED at {s1['label']}: 30 % of requests read > 0.1 s late (max 0.60 s)" in md
    assert "client_read_lag" in rep["definitions"]


def test_notes_for_missing_users_unmeasured_lag_and_errors_of_a_starved_client(tmp_path: Path) -> None:
    """C=4 with only 2 users sending (a dead worker) is called out; steps without read-lag figures (TLS) say the
    check was not possible (client_starved None, not False); failures in a starved step are not blamed on the
    server alone."""
    half = [rec(f"u{1 + i % 2}", 1, 11 + 2 * (i // 2), 2, concurrency=4) for i in range(16)]
    starved = [
        rec(f"v{1 + i % 2}", 2, 31 + 2 * (i // 2), 2, concurrency=2, read_lag_max=0.5, ok=i % 3 != 0)
        for i in range(16)
    ]
    phases = [phase("step", 1, 4, 10, 20), phase("step", 2, 2, 30, 20), run_end(50)]
    rep = build_report(write_run(tmp_path / "run", half + starved, phases)).as_dict()
    s1, s2 = rep["steps"]
    assert s1["users_seen"] == 2 and s1["client_starved"] is None and s2["client_starved"] is True
    notes = "\n".join(rep["notes"])
    assert f"{s1['label']}: only 2 distinct users sent requests in this step (target 4)" in notes
    assert f"Client read lag was not measured at {s1['label']} " in notes
    assert f"{s2['label']}: " in notes and "while the load generator was starved" in notes
    assert "describe a failing server" not in notes
