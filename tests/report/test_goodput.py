"""Goodput: SLO met share over the latency sample, goodput over the window, and the SLO capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.config import SloSpec
from harness.report import build_report
from harness.report.goodput import GOODPUT_ROW_KEYS, add_goodput, meets_slo, slo_capacity, slo_spec
from harness.report.render import render_markdown
from harness.result import RequestResult
from tests.report.rundir import T0, frame_of, phase, rec, run_end, write_run


def rr(start: float, e2e: float, **kw: Any) -> RequestResult:
    return RequestResult.from_record(rec(kw.pop("user", "u"), kw.pop("step", 1), start, e2e, **kw))


def hand_records() -> list[RequestResult]:
    """Window [T0+100, T0+200) of step 1; SLOs TTFT ≤ 2 s, E2E ≤ 20 s."""
    return [
        rr(100, 10, ttft=1.0),  # a: meets, usable, ends in the window
        rr(110, 30, ttft=1.0),  # b: E2E too long
        rr(120, 10, ttft=3.0),  # c: TTFT too long
        rr(130, 10, ttft=1.5, truncated=True),  # d: meets but truncated (not usable)
        rr(140, 10, ttft=1.0, ok=False),  # e: failed: in neither
        rr(90, 15, ttft=1.0),  # f: started before the window, ends in it: goodput only
        rr(190, 15, ttft=1.0),  # g: started in the window, ends after it: share only
        rr(150, 10, ttft=1.0, step=2),  # h: another step's request ending in the window: goodput (any step)
    ]


def meets(r: RequestResult, slo: SloSpec) -> bool:
    """:func:`meets_slo` of one record."""
    return bool(frame_of([r]).select(meets_slo(slo)).item())


def window_row(steady: bool = True) -> dict[str, Any]:
    return {"label": "C=4", "step": 1, "concurrency": 4, "steady": steady,
            "window_start_wall": T0 + 100, "window_end_wall": T0 + 200}


SLO = SloSpec(ttft_s=2.0, e2e_s=20.0)


def test_share_and_goodput_exact() -> None:
    row = window_row()
    add_goodput(row, frame_of(hand_records()), SLO)
    # latency sample: successful requests started in the window = a, b, c, d, g, h; meeting: a, d, g, h
    assert (row["slo_sample_n"], row["slo_met"]) == (6, 4)
    assert row["slo_met_share"] == pytest.approx(4 / 6)
    # usable, meeting every SLO, ending in [100, 200): a (110), f (105), h (160)
    assert row["slo_window_met"] == 3 and row["goodput_rps"] == pytest.approx(3 / 100.0)


def test_not_steady_rows_use_the_whole_step_sample() -> None:
    row = window_row(steady=False)
    add_goodput(row, frame_of(hand_records()), SLO)
    # every successful request of step 1: a, b, c, d, f, g; meeting: a, d, f, g
    assert (row["slo_sample_n"], row["slo_met"]) == (6, 4)


def test_without_slo_every_key_is_none() -> None:
    row = window_row()
    add_goodput(row, frame_of(hand_records()), None)
    assert all(row[k] is None for k in GOODPUT_ROW_KEYS)
    assert slo_capacity([row], None) is None


def test_a_missing_measurement_does_not_meet_its_slo() -> None:
    no_answer = rr(100, 10, ttft=1.0, in_reasoning=True, truncated=True)  # ttfat None
    assert no_answer.ttfat is None and not meets(no_answer, SloSpec(ttfat_s=100.0))
    assert meets(no_answer, SloSpec(ttft_s=1.0))  # the boundary is inclusive
    one_token = rr(100, 10, ttft=1.0, tokens=1)
    assert one_token.tpot is None and not meets(one_token, SloSpec(tpot_s=1.0))
    ok = rr(100, 10, ttft=1.0, tokens=10)  # tpot = 9 s / 9 tokens = 1 s
    assert meets(ok, SloSpec(tpot_s=1.0)) and not meets(ok, SloSpec(tpot_s=0.99))


def cap_rows(shares: list[tuple[int, float | None]]) -> list[dict[str, Any]]:
    return [{"label": f"#{i}", "concurrency": c, "slo_met_share": s, "goodput_rps": None if s is None else 10.0 * c}
            for i, (c, s) in enumerate(shares)]


def test_capacity_is_the_highest_concurrency_all_of_whose_steps_meet_the_target() -> None:
    rows = cap_rows([(1, 1.0), (8, 0.99), (16, 0.95), (32, 0.94), (32, 0.97)])
    cap = slo_capacity(rows, SLO)
    assert cap is not None
    assert (cap["concurrency"], cap["steps"], cap["slo_met_share"], cap["goodput_rps"]) == (16, ["#2"], 0.95, 160.0)
    assert cap["target_share"] == 0.95 and cap["failing"] == ["#3"] and cap["slo"] == {"ttft_s": 2.0, "e2e_s": 20.0}
    strict = slo_capacity(rows, SloSpec(ttft_s=2.0, target_share=0.99))
    assert strict is not None and strict["concurrency"] == 8
    none = slo_capacity(cap_rows([(8, 0.5), (16, None)]), SLO)
    assert none is not None and none["concurrency"] is None and none["failing"] == ["#0", "#1"]


def test_report_json_and_markdown_with_slo(tmp_path: Path) -> None:
    records = []
    for u in range(2):
        t = 0.0
        while t < 200.0:
            records.append(rec(f"u{u}", 1, t, 10.0, ttft=1.0 + 2.0 * (u == 1 and t >= 100), concurrency=2))
            t += 10.0
    meta = {"profile": {"name": "s", "slo": {"ttft_s": 2.0, "target_share": 0.9}}}
    run = write_run(tmp_path / "run", records, [phase("step", 1, 2, 0.0, 200.0), run_end(200.0)], meta)
    rep = build_report(run).as_dict()
    row = rep["steps"][0]
    # the step's sample: requests ending in the window (10, 200) (the one ending at +10 opened it): starts +10 ..
    # +180, 18 per user; u1's started from +100 (9) miss TTFT
    assert (row["slo_sample_n"], row["slo_met"]) == (36, 27)
    # usable ends in (10, 200), like the request rate: the same 18 per user, 18 + 9 within the SLO
    assert row["slo_window_met"] == 18 + 9 and row["goodput_rps"] == pytest.approx(27 / 190.0)
    assert rep["slo"]["ttft_s"] == 2.0 and rep["slo_capacity"]["concurrency"] is None
    md = render_markdown(rep)
    assert "## Goodput (SLOs)" in md and "SLOs: TTFT ≤ 2.00 s." in md and "no concurrency" in md
    assert "Below 90 %: C=2." in md
    assert "goodput" in rep["definitions"] and "slo_capacity" in rep["definitions"]


def test_no_slo_no_section_and_a_bad_slo_is_a_note(tmp_path: Path) -> None:
    records = [rec("u0", 1, float(t), 10.0) for t in range(0, 100, 10)]
    phases = [phase("step", 1, 1, 0.0, 100.0), run_end(100.0)]
    rep = build_report(write_run(tmp_path / "plain", records, phases)).as_dict()
    assert rep["slo"] is None and rep["slo_capacity"] is None and rep["steps"][0]["goodput_rps"] is None
    assert "## Goodput" not in render_markdown(rep)
    bad = build_report(write_run(tmp_path / "bad", records, phases, {"profile": {"slo": {"ttft_s": -1}}})).as_dict()
    assert bad["slo"] is None and any(n.startswith("run.json: profile.slo is not usable") for n in bad["notes"])
    assert slo_spec({"slo": {}}) == (None, "run.json: profile.slo is not usable (give at least one SLO: "
                                           "<ttft|ttfat|tpot|e2e>_p<q>_s, seconds (e.g. ttft_p95_s: 2)); no goodput "
                                           "figures.")


def test_both_slo_spellings_give_the_same_goodput_figures(tmp_path: Path) -> None:
    records = []
    for u in range(2):
        t = 0.0
        while t < 200.0:
            records.append(rec(f"u{u}", 1, t, 10.0, ttft=1.0 + 2.0 * (u == 1 and t >= 100), concurrency=2))
            t += 10.0
    phases = [phase("step", 1, 2, 0.0, 200.0), run_end(200.0)]
    reps = [build_report(write_run(tmp_path / name, records, phases, {"profile": {"name": "s", "slo": slo}}))
            for name, slo in (("old", {"ttft_s": 2.0, "e2e_s": 20.0, "target_share": 0.9}),
                              ("new", {"ttft_p90_s": 2.0, "e2e_p90_s": 20.0}))]
    old, new = ({k: r["steps"][0][k] for k in GOODPUT_ROW_KEYS} for r in reps)
    assert old == new and old["slo_met"] == 27
    assert reps[0]["slo"] == reps[1]["slo"] and reps[0]["slo_capacity"] == reps[1]["slo_capacity"]
    assert reps[1]["slo_capacity"]["target_share"] == 0.9
