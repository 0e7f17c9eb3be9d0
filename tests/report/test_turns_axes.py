"""The per-turn and per-setting report sections (harness.report.turns, harness.report.axes) and their Markdown."""

from __future__ import annotations

from typing import Any

import pytest

from harness.report.axes import SETTING_ROW_KEYS, setting_rows
from harness.report.model import Report
from harness.report.render import _settings_section, _turns_section
from harness.report.turns import TURN_ROW_KEYS, turn_rows
from harness.result import RequestResult
from tests.report.oracle import turn_rows as oracle_turn_rows
from tests.report.rundir import frame_of


def _rec(**kw: Any) -> RequestResult:
    base: dict[str, Any] = {"prompt_id": "p", "ok": True, "phase": "step", "step": 1, "start_wall": 100.0, "e2e": 1.0}
    return RequestResult(**{**base, **kw})


def test_turn_rows_group_by_turn_index() -> None:
    recs = [
        _rec(turn=0, ttft=0.1, prompt_tokens=100, cached_tokens=0, output_tokens=10),
        _rec(turn=0, ttft=0.3, prompt_tokens=120, cached_tokens=64, output_tokens=20),
        _rec(turn=1, ttft=0.2, prompt_tokens=300, cached_tokens=288, output_tokens=30),
        _rec(turn=1, ok=False, ttft=None, prompt_tokens=None),
        _rec(turn=None, ttft=9.0, prompt_tokens=5),  # a single request: not in any turn
        _rec(turn=2, ttft=0.4, prompt_tokens=500),  # a server that sends no cached_tokens
    ]
    rows = turn_rows(frame_of(recs))
    assert rows == oracle_turn_rows(recs)
    assert [r["turn"] for r in rows] == [0, 1, 2] and all(set(r) == set(TURN_ROW_KEYS) for r in rows)
    t0, t1, t2 = rows
    assert (t0["requests"], t0["completed"], t0["mean_prompt_tokens"], t0["mean_cached_tokens"]) == (2, 2, 110, 32)
    assert t0["ttft_p50_s"] == pytest.approx(0.2) and t0["cached_share"] == pytest.approx(64 / 220)
    assert (t1["requests"], t1["completed"], t1["cached_sent"]) == (2, 1, 1)
    assert t1["cached_share"] == pytest.approx(288 / 300) and t1["mean_output_tokens"] == 30
    assert t2["mean_cached_tokens"] is None and t2["cached_share"] is None and t2["cached_sent"] == 0
    assert turn_rows(frame_of([_rec()])) == []
    md = "\n".join(_turns_section(Report.model_validate({"turns": rows})))
    assert "## By conversation turn" in md and "| 1 | 2 | 1 |" in md
    assert _turns_section(Report()) == []


def _row(step: int, conc: int, hours: float, **kw: Any) -> dict[str, Any]:
    return {
        "phase": "step", "step": step, "concurrency": conc, "steady": True, "completed": 10,
        "window_start_wall": 100.0, "window_end_wall": 200.0, "ttft_p50_s": 0.1, "ttfat_p50_s": 0.5,
        "tpot_p50_s": 0.01, "e2e_p50_s": 2.0, "mean_output_tokens": 300.0, "usable_share": 0.9, "truncated_pct": 1.0,
        "output_tps": 1000.0, "request_rate": 3.0, "real_time": None,
        "hours": [{"n": 1000, "hours": hours, "hours_low": hours * 0.9, "hours_high": hours * 1.1, "usd": 20 * hours}],
        **kw,
    }  # fmt: skip


def test_setting_rows_pair_steps_with_their_setting() -> None:
    rows = [_row(0, 1, 9.0, phase="single", setting="thinking=on", window_start_wall=0.0, window_end_wall=99.0),
            _row(2, 8, 1.0, setting="thinking=off", window_start_wall=300.0, window_end_wall=400.0,
                 mean_reasoning_tokens=0.0, mean_answer_tokens=40.0),
            _row(1, 8, 2.0, setting="thinking=on", mean_reasoning_tokens=150.0, mean_answer_tokens=60.0)]
    out = setting_rows(rows)
    assert [(r["setting"], r["step"]) for r in out] == [("thinking=on", 1), ("thinking=off", 2)]  # setting order
    on, off = out
    assert all(set(r) == set(SETTING_ROW_KEYS) for r in out)
    assert on["mean_reasoning_tokens"] == 150 and on["mean_answer_tokens"] == 60  # the step row's figures
    assert off["mean_reasoning_tokens"] == 0 and (off["hours"], off["usd"], off["n"]) == (1.0, 20.0, 1000)
    assert on["real_hours"] is None
    assert setting_rows([{**r, "setting": None} for r in rows]) == []  # no axes: no rows
    md = "\n".join(_settings_section(Report.model_validate({"settings": out, "cost_usd_per_hour": 20.0})))
    assert "## Settings (sweep axes)" in md and "| thinking=off | 8 | 10 |" in md and "$ N=1,000" in md
    assert "real-time" not in md.split("\n\n")[2]  # the table has no real-time columns without compressed time
    assert _settings_section(Report()) == []


def test_step_rows_carry_the_setting_and_the_sample_mean_tokens(tmp_path: Any) -> None:
    from harness.report.build import build_report
    from tests.report.rundir import phase, rec, write_run

    recs = [rec(f"u{i}", 1, 1.0 + i, 2.0, tokens=100 + 10 * i, setting="effort=low") for i in range(4)]
    recs += [rec(f"u{i}", 2, 11.0 + i, 2.0, tokens=300, setting="effort=high") for i in range(4)]
    recs.append(rec("u9", 2, 12.0, 1.0, ok=False, setting="effort=high", reasoning_tokens=999))
    events = [{**phase("step", 1, 4, 0.0), "setting": "effort=low"}, {**phase("step", 2, 4, 10.0),
                                                                        "setting": "effort=high"}]
    rep = build_report(write_run(tmp_path / "run", recs, events))
    assert [r["setting"] for r in rep["steps"]] == ["effort=low", "effort=high"]
    assert [(r["setting"], r["step"]) for r in rep["settings"]] == [("effort=low", 1), ("effort=high", 2)]
    high = rep["steps"][1]
    assert high["mean_reasoning_tokens"] == 150 and high["mean_answer_tokens"] == 150  # successes only
    assert rep["settings"][1]["mean_reasoning_tokens"] == high["mean_reasoning_tokens"]


def test_settings_real_time_hours_read_like_the_hours_beside_them() -> None:
    """With compressed time the settings table's real-time hours carry ``h`` like its hours column (they were bare
    numbers: "1.18" beside "0.295 h (0.287–0.303)")."""
    rows = [_row(1, 8, 2.0, setting="thinking=on",
                 real_time={"hours": [{"n": 1000, "hours": 8.0, "hours_low": 7.2, "hours_high": 8.8}]})]
    out = setting_rows(rows)
    assert out[0]["real_hours"] == 8.0
    md = "\n".join(_settings_section(Report.model_validate({"settings": out})))
    row = next(ln for ln in md.splitlines() if ln.startswith("| thinking=on |"))
    assert row.rstrip(" |").endswith("| 8.00 h"), row
