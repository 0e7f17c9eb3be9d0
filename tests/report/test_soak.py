"""Soak analysis: slices over the steady window, their figures, and the drift test (slope, t interval, flag)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.report import build_report
from harness.report.render import render_markdown
from harness.report.soak import (
    DRIFT_MIN_ABS_CHANGE,
    MIN_DRIFT_SLICES,
    drift_test,
    drift_text,
    linear_fit,
    slice_bounds,
    slice_figures,
    step_drift,
    t_quantile_975,
)
from harness.report.tokens import window_tokens
from harness.result import RequestResult
from tests.report import oracle
from tests.report.rundir import T0, frame_of, phase, rec, run_end, write_run
from tests.report.test_columns import assert_same

C = 4
CYCLE = 10.0  # each user's requests run back to back, 10 s each
STEP_S = 3610.0  # first wave ends at +10 s: a 3600 s steady window, 12 slices of 300 s
SLICE_S = 300.0


def soak_records(tokens_at: Any, seed: int = 0) -> list[dict[str, Any]]:
    """C users sending 10 s requests back to back over one step; ``tokens_at(t)`` = mean tokens of a request
    started at +t s (±10 % deterministic noise); ~5 % failures, ~5 % truncated, TTFT 0.5..1.5 s."""
    rng = random.Random(seed)
    out = []
    for u in range(C):
        t = 0.0
        while t < STEP_S:
            tokens = max(2, round(tokens_at(t) * rng.uniform(0.9, 1.1)))
            ok = rng.random() > 0.05
            out.append(rec(f"u{u}", 1, t, CYCLE, ttft=rng.uniform(0.5, 1.5), tokens=tokens, ok=ok,
                           truncated=ok and rng.random() < 0.05, concurrency=C))
            t += CYCLE
    return out


def soak_run(root: Path, tokens_at: Any, slice_s: float = SLICE_S) -> Path:
    meta = {"profile": {"name": "soak", "report": {"slice_s": slice_s}}}
    return write_run(root, soak_records(tokens_at), [phase("step", 1, C, 0.0, STEP_S), run_end(STEP_S)], meta)


def declining(t: float) -> float:
    return 1000.0 - 0.05 * t


# Throughput of `declining`: each user generates tokens_at(t) tokens per 10 s cycle, so tok/s(t) = C × tokens_at(t)
# ÷ 10 and its slope is C × (−0.05) ÷ 10 tok/s per second.
TRUE_SLOPE_PER_H = C * -0.05 / CYCLE * 3600.0


def test_t_quantile_matches_the_table() -> None:
    table = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 10: 2.228, 20: 2.086, 30: 2.042, 120: 1.980}
    for dof, q in table.items():
        assert t_quantile_975(dof) == pytest.approx(q, abs=1e-3)
    with pytest.raises(ValueError):
        t_quantile_975(0)


def test_linear_fit_matches_numpy_and_an_exact_line() -> None:
    xs = [0.0, 1.0, 2.0, 3.0, 4.0]
    ys = [1.0, 2.9, 5.2, 7.1, 8.8]
    b, se, a = linear_fit(xs, ys)
    nb, na = np.polyfit(xs, ys, 1)
    assert (b, a) == pytest.approx((nb, na))
    resid = np.array(ys) - (na + nb * np.array(xs))
    assert se == pytest.approx(np.sqrt(resid @ resid / 3 / np.sum((np.array(xs) - 2.0) ** 2)))
    assert linear_fit([0.0, 1.0, 2.0], [3.0, 5.0, 7.0]) == pytest.approx((2.0, 0.0, 3.0))
    with pytest.raises(ValueError):
        linear_fit([1.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError):
        linear_fit([0.0, 1.0], [1.0, 2.0])


def test_drift_flag_needs_a_clear_interval_and_a_large_change() -> None:
    times = [150.0 + 300.0 * i for i in range(12)]  # slice mid-times over one hour
    span = 3600.0
    falling = drift_test(times, [100.0 - 10.0 * t / 3600.0 for t in times], span)  # exact −10 /h, mean ~95
    assert falling is not None and falling["flagged"] and falling["significant"]
    assert falling["slope_per_h"] == pytest.approx(-10.0)
    assert falling["slope_low_per_h"] == pytest.approx(-10.0) == falling["slope_high_per_h"]
    assert falling["change_pct"] == pytest.approx(-10.0 / falling["mean"] * 100.0)
    # clearly non-zero but only 1 % over the step: significant, not called drift
    small = drift_test(times, [100.0 - 1.0 * t / 3600.0 + (0.01 if i % 2 else -0.01) for i, t in enumerate(times)],
                       span)
    assert small is not None and small["significant"] and not small["flagged"]
    # a large change whose interval includes 0: not flagged
    noisy = drift_test(times[:4], [100.0, 60.0, 140.0, 80.0], 1200.0)
    assert noisy is not None and noisy["slope_low_per_h"] < 0 < noisy["slope_high_per_h"] and not noisy["flagged"]
    # too few defined values; a zero mean has no percentages and is never flagged
    assert drift_test(times[:3], [1.0, None, 2.0], 900.0) is None
    zero = drift_test(times[:MIN_DRIFT_SLICES], [0.0, 0.0, 0.0], 900.0)
    assert zero is not None and zero["slope_pct_per_h"] is None and not zero["flagged"]
    assert drift_text("error_rate", zero) == "error rate 0 in every slice"


def test_ttft_drift_of_a_few_milliseconds_is_not_flagged() -> None:
    """A TTFT p50 of ~20 ms moving 2 ms over the step is +10 % of its mean (over the relative rule) but under the
    absolute floor, so it is not DRIFT; the same shape moved 10× (20 ms) is."""
    floor = DRIFT_MIN_ABS_CHANGE["ttft_p50_s"]
    assert floor == 0.005
    slices = [{"start_wall": 60.0 * i, "end_wall": 60.0 * (i + 1), "output_tps": 100.0, "error_rate": 0.0,
               "ttft_p50_s": 0.020 + 0.002 * i / 9} for i in range(10)]
    small = step_drift(slices)["ttft_p50_s"]
    assert small is not None and small["significant"] and abs(small["change_pct"]) > 5.0
    assert small["change_pct"] * small["mean"] / 100.0 == pytest.approx(0.002 * 10 / 9)
    assert not small["flagged"]
    big = step_drift([{**s, "ttft_p50_s": 0.020 + 0.020 * i / 9} for i, s in enumerate(slices)])["ttft_p50_s"]
    assert big is not None and big["flagged"]
    # the floor is on the figure's own unit: the same relative move of a 1 s TTFT is flagged
    secs = step_drift([{**s, "ttft_p50_s": 1.0 + 0.1 * i / 9} for i, s in enumerate(slices)])["ttft_p50_s"]
    assert secs is not None and secs["flagged"]
    # drift_test's floor argument: the 2 ms change passes without it
    direct = drift_test([30.0 + 60.0 * i for i in range(10)], [s["ttft_p50_s"] for s in slices], 600.0)
    assert direct is not None and direct["flagged"]
    assert not drift_test([30.0 + 60.0 * i for i in range(10)], [s["ttft_p50_s"] for s in slices], 600.0,
                          min_abs_change=floor)["flagged"]


def test_slice_bounds() -> None:
    assert slice_bounds(0.0, 599.0, 300.0) == []  # fewer than 2 whole slices
    assert slice_bounds(0.0, 600.0, 300.0) == [(0.0, 300.0), (300.0, 600.0)]
    assert slice_bounds(10.0, 1000.0, 300.0) == [(10.0, 310.0), (310.0, 610.0), (610.0, 910.0)]  # remainder left out
    with pytest.raises(ValueError):
        slice_bounds(0.0, 100.0, 0.0)


def test_declining_throughput_is_flagged_with_the_true_slope_inside(tmp_path: Path) -> None:
    rep = build_report(soak_run(tmp_path / "run", declining)).as_dict()
    row = rep["steps"][0]
    assert row["steady"] and row["window_s"] == pytest.approx(3600.0)
    assert rep["slice_s"] == SLICE_S and len(row["slices"]) == 12
    d = row["drift"]["output_tps"]
    assert d["n"] == 12 and d["flagged"]
    assert d["slope_low_per_h"] <= TRUE_SLOPE_PER_H <= d["slope_high_per_h"]
    assert d["slope_high_per_h"] < 0
    assert d["text"].startswith("tok/s fell ") and "%/h (95 % −" in d["text"]
    assert any(n.startswith("C=4: DRIFT: tok/s fell") for n in rep["notes"])
    # TTFT and errors do not drift in this run
    assert not row["drift"]["ttft_p50_s"]["flagged"] and not row["drift"]["error_rate"]["flagged"]
    md = render_markdown(rep)
    assert "## Soak" in md and "**DRIFT** tok/s fell" in md and "### Slices of C=4" in md


def test_flat_series_is_not_flagged(tmp_path: Path) -> None:
    rep = build_report(soak_run(tmp_path / "run", lambda t: 500.0)).as_dict()
    row = rep["steps"][0]
    assert len(row["slices"]) == 12
    assert all(d is not None and not d["flagged"] for d in row["drift"].values())
    assert abs(row["drift"]["output_tps"]["change_pct"]) < 5.0
    assert not any("DRIFT" in n for n in rep["notes"])
    assert "## Soak" in render_markdown(rep)


def test_slice_figures_equal_direct_computations(tmp_path: Path) -> None:
    run = soak_run(tmp_path / "run", declining)
    rep = build_report(run).as_dict()
    records = [RequestResult.from_record(r) for r in soak_records(declining)]
    main = frame_of(records)
    row = rep["steps"][0]
    slices = row["slices"]
    w0, w1 = T0 + CYCLE, T0 + STEP_S
    assert row["window_end_wall"] == w1 == slices[-1]["end_wall"]  # 12 whole slices: the last ends at w1
    for i, s in enumerate(slices):
        t0, t1 = w0 + i * SLICE_S, w0 + (i + 1) * SLICE_S
        assert (s["start_wall"], s["end_wall"], s["start_s"]) == (t0, t1, CYCLE + i * SLICE_S)
        # the step sample's rule: ended after t0, at or before t1, never at the window end w1
        ended = [r for r in records if t0 < r.start_wall + (r.e2e or 0.0) <= t1 and r.start_wall + (r.e2e or 0.0) < w1]
        ok = [r for r in ended if r.ok]
        assert (s["ended"], s["errors"], s["truncated"]) == (len(ended), len(ended) - len(ok),
                                                              sum(r.truncated for r in ok))
        assert s["output_tps"] == pytest.approx(window_tokens(main, t0, t1)[0] / SLICE_S)
        assert s["output_tps"] == pytest.approx(oracle.output_tokens_in(records, t0, t1) / SLICE_S)
        usable = sum(1 for r in ok if not r.truncated)
        assert s["request_rate"] == pytest.approx(usable / SLICE_S)
        assert s["error_rate"] == pytest.approx((len(ended) - len(ok)) / len(ended))
        assert s["truncation_rate"] == pytest.approx(sum(r.truncated for r in ok) / len(ok))
        for key, q in (("ttft_p50_s", 50), ("ttft_p99_s", 99)):
            assert s[key] == pytest.approx(np.percentile([r.ttft for r in ok], q))
        for key, q in (("ttfat_p50_s", 50), ("ttfat_p99_s", 99)):
            assert s[key] == pytest.approx(np.percentile([r.ttfat for r in ok], q))
    # 10 s cycles ending on every slice boundary: 30 requests of each user end in each 300 s slice (the ones
    # ending at a boundary in the earlier slice), none of the ones ending at w0 (they opened the window), and the
    # last slice lacks those ending at w1 (outside the step's sample)
    assert [s["ended"] for s in slices] == [C * 30] * 11 + [C * 29]
    assert sum(s["ended"] for s in slices) == row["sample_requests"]  # the slices tile the step's sample
    for s in slices:  # exactly what slice_figures gives over every record of the run
        got = slice_figures(main, s["start_wall"], s["end_wall"], w1)
        assert {k: v for k, v in s.items() if k != "start_s"} == got
        assert_same(oracle.slice_figures(records, s["start_wall"], s["end_wall"], w1), got)
    assert slice_figures(main, slices[-1]["start_wall"], w1)["ended"] == C * 30  # w1 counts without window_end


def test_requests_spanning_several_slices_count_in_each(tmp_path: Path) -> None:
    # one user, 700 s requests back to back, slices of 300 s: each request's tokens spread over 3-4 slices
    records = [rec("u0", 1, t, 700.0, ttft=50.0, tokens=7000) for t in (0.0, 700.0, 1400.0, 2100.0, 2800.0)]
    run = write_run(tmp_path / "run", records, [phase("step", 1, 1, 0.0, 3500.0), run_end(3500.0)],
                    {"profile": {"report": {"slice_s": 300.0}}})
    rep = build_report(run).as_dict()
    slices = rep["steps"][0]["slices"]
    assert len(slices) == 9  # window [700, 3500)
    main = frame_of(records)
    recs = [RequestResult.from_record(r) for r in records]
    for s in slices:
        assert {k: v for k, v in s.items() if k != "start_s"} == slice_figures(main, s["start_wall"], s["end_wall"])
        assert_same(oracle.slice_figures(recs, s["start_wall"], s["end_wall"]),
                    slice_figures(main, s["start_wall"], s["end_wall"]))
    # 3500 reasoning tokens over [50, 50.5], then 3500 answer tokens over [50.5, 700]: a slice fully inside the
    # answer phase has 300 s of it
    assert slices[1]["output_tps"] == pytest.approx(3500 / 649.5)
    # ends at 700 (the window start: in no slice, as in no step sample), 1400, 2100, and 2800 (the boundary of
    # slices 6 and 7: in the earlier one, (2500, 2800])
    assert [s["ended"] for s in slices] == [0, 0, 1, 0, 1, 0, 1, 0, 0]
    assert sum(s["ended"] for s in slices) == rep["steps"][0]["sample_requests"] == 3


def test_short_steps_get_no_slices_and_no_section(tmp_path: Path) -> None:
    # exactly 2 slices: no drift test
    rep = build_report(soak_run(tmp_path / "two", declining, slice_s=1800.0)).as_dict()
    row = rep["steps"][0]
    assert len(row["slices"]) == 2 and all(d is None for d in row["drift"].values())
    assert "## Soak" not in render_markdown(rep)
    rep = build_report(soak_run(tmp_path / "one", declining, slice_s=2000.0)).as_dict()  # 1.8 slices: none
    assert rep["steps"][0]["slices"] == [] and "## Soak" not in render_markdown(rep)


def test_a_compressed_runs_drift_is_also_given_per_real_hour(tmp_path: Path) -> None:
    """On a run time_scale times faster than the server it stands for, the Soak section's slopes are per wall hour;
    the real-time equivalents (report.md's section, and every surface through in_real_time) give them per real
    hour: × time_scale, the interval too; flagged as before; the total change over the step unchanged."""
    from harness.report.realtime import drift_in_real_time, in_real_time

    root = soak_run(tmp_path / "run", declining)
    meta = json.loads((root / "run.json").read_text())
    meta["simulator"] = {"time_scale": 0.25}  # the built-in simulator was the target
    (root / "run.json").write_text(json.dumps(meta))
    rep = build_report(root)
    wall = rep.steps[0].drift.output_tps
    real = in_real_time(rep.steps[0], 0.25).drift.output_tps
    assert wall is not None and real is not None and wall.flagged and real.flagged
    assert real.slope_per_h == pytest.approx(wall.slope_per_h * 0.25)
    assert real.slope_pct_per_h == pytest.approx(wall.slope_pct_per_h * 0.25)
    assert (real.low_pct_per_h, real.high_pct_per_h) == pytest.approx((wall.low_pct_per_h * 0.25,
                                                                       wall.high_pct_per_h * 0.25))
    assert real.change_pct == wall.change_pct and real.text != wall.text
    assert real.text == f"tok/s fell {abs(real.slope_pct_per_h):.1f} %/h (95 % {real.low_pct_per_h:.1f} … " \
        f"{real.high_pct_per_h:.1f})".replace("-", "−")
    md = render_markdown(rep)
    real_section = md.split("## Real-time equivalents", 1)[1]
    assert "Soak drift per real hour (the Soak section's per wall hour × 0.25):" in real_section
    assert f"**DRIFT** {real.text}" in real_section and f"**DRIFT** {wall.text}" in md.split("## Soak", 1)[1]
    assert drift_in_real_time(rep.steps[0].drift, 1.0) is rep.steps[0].drift


def test_the_terminal_summary_names_a_flagged_drift_per_real_hour_in_a_compressed_run(tmp_path: Path) -> None:
    """The terminal said nothing of a drift report.md flagged (fresh-user finding): a flagged fit is a footnote,
    in the real-time units of the rest of the terminal when the run was compressed; a flat run has none."""
    from harness.report.realtime import drift_in_real_time
    from harness.report.summary import render_summary

    root = soak_run(tmp_path / "run", declining)
    rep = build_report(root)
    wall = rep.steps[0].drift.output_tps
    assert wall is not None
    out = render_summary(rep, width=200)
    assert f"DRIFT at C=4 (per hour, over its steady window): {wall.text}." in out
    meta = json.loads((root / "run.json").read_text())
    meta["simulator"] = {"time_scale": 0.25}
    (root / "run.json").write_text(json.dumps(meta))
    rep = build_report(root)
    real = drift_in_real_time(rep.steps[0].drift, 0.25).output_tps
    assert real is not None and real.text != wall.text
    assert f"DRIFT at C=4 (per real hour, over its steady window): {real.text}." in render_summary(rep, width=200)
    flat = build_report(soak_run(tmp_path / "flat", lambda t: 500.0))
    assert "DRIFT" not in render_summary(flat, width=200)
