"""Markdown and terminal rendering of a report (harness/report/render.py, harness/report/cli.py): layout, table
headers and rows, footnotes and notes, number formats (seconds, milliseconds, rates, thousands separators)."""

from __future__ import annotations

import copy
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report, fmt, render_markdown, render_summary
from harness.report.cli import _print_markdown, main
from tests.report.rundir import T0, phase, rec, run_end, write_run

STEP_HEADER = [
    "step", "C", "started (whole step)", "completed", "errors", "req/s", "output tok/s", "per-stream tok/s",
    "TTFT p50/p90/p99 (s)", "TTFAT p50/p90/p99 (s)", "inter-chunk p50/p99 (ms)", "TPOT mean/p50 (ms)", "E2E p50 (s)",
    "mean out tok", "% trunc", "% trunc in reasoning", "steady window (s)",
]  # fmt: skip
HOURS_HEADER = ["step", "C", "usable/ok", "% trunc", "% errors", "mean out tok", "interval"]
REAL_HEADER = [
    "step", "C", "window (s)", "output tok/s", "req/s", "per-stream tok/s", "TTFT p50 (s)", "TTFAT p50 (s)",
    "TPOT mean (ms)", "E2E p50 (s)",
]  # fmt: skip


@pytest.fixture(autouse=True)
def _utc() -> Iterator[None]:
    """Wall times render in local time: pin it to UTC for the test."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def _run(root: Path, meta: dict[str, Any] | None = None) -> Path:
    """Warm-up [0, 5), single stream [5, 35), C=2 [35, 95), run end at 95 (seconds after T0).

    Single stream: u1 requests of 10 s from 5 on. C=2: u1 and u2 requests of 20 s, u2's third one failing.
    """
    records = [rec("w", -1, 1, 3, tokens=16)]
    records += [rec("u1", 0, 5 + 10 * i, 10, ttft=1, tokens=91) for i in range(3)]
    for u, off in (("u1", 0.0), ("u2", 1.0)):
        for i in range(3):
            ok = not (u == "u2" and i == 2)
            records.append(rec(u, 1, 35 + off + 20 * i, 20, ttft=2, tokens=181, ok=ok, concurrency=2))
    phases = [phase("warmup", -1, 1, 0), phase("single", 0, 1, 5, 30), phase("step", 1, 2, 35, 60), run_end(95)]
    return write_run(root, records, phases, meta)


@pytest.fixture
def report(tmp_path: Path) -> dict[str, Any]:
    return build_report(_run(tmp_path / "run-1")).as_dict()


def _cells(line: str) -> list[str]:
    """The cells of one Markdown table row, ``\\|`` kept as an escaped pipe inside its cell."""
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[2:-2])]


def _tables(md: str) -> list[list[list[str]]]:
    """Every table of ``md``: header row first, the ``|---|`` separator dropped."""
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in md.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            if not re.fullmatch(r"\|(---\|)+", line):
                current.append(_cells(line))
        else:
            current = None
    return tables


def _bullets(text: str) -> list[str]:
    """The top-level bullets of ``text`` (``- `` items), each with its wrapped continuation lines joined."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line[2:])
        elif line.startswith("  ") and items:
            items[-1] += " " + line[2:]
    return items


def _section(md: str, title: str) -> str:
    """The text of section ``## title`` up to the next ``## ``."""
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end >= 0 else len(md)]


# -- layout --------------------------------------------------------------------------------------------------


def test_title_meta_line_and_section_order(report: dict[str, Any]) -> None:
    md = render_markdown(report)
    lines = md.splitlines()
    assert lines[0] == "# Load report: run-1"
    assert lines[2] + " " + lines[3] == (  # one paragraph, two source lines (the start time stays whole)
        "target `http://127.0.0.1:8000/v1` · model `k2-test` · profile `synthetic` · status **finished** · "
        f"started {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(T0))} UTC+00:00, 95 s"
    )
    assert lines[3].endswith("started 2023-11-14 22:13:20 UTC+00:00, 95 s") and lines[4] == ""
    assert "Warm-up (excluded from every figure): 1 request, 1 ok, E2E p50 3.00 s (max 3.00 s), errors: none." in md
    heads = [ln for ln in lines if ln.startswith("## ")]
    assert heads == ["## Per step", "## Output tok/s by phase", "## Hours to N usable samples",
                     "## By finish reason", "## Per prompt",
                     "## Self-certification", "## Formulas", "## Notes"]
    assert "Interrupted run" not in md and "COMPRESSED TIME" not in md
    assert md.endswith("\n")


def test_step_table_header_and_one_row_per_step(report: dict[str, Any]) -> None:
    md = render_markdown(report)
    steps, hours = _tables(md)[:2]  # then the finish-reason and per-prompt tables
    assert steps[0] == STEP_HEADER
    assert [r[0] for r in steps[1:]] == [_label(r) for r in report["steps"]]
    assert all(len(r) == len(STEP_HEADER) for r in steps)
    for row, r in zip(steps[1:], report["steps"], strict=True):
        assert row[1:5] == [str(r["concurrency"]), str(r["requests"]), str(r["completed"]), str(r["errors"])]
    single, c2 = report["steps"]
    # the sample (ended in the steady window): single 25 s; C=2 u1's 75 s and u2's 76 s (the failure ends at 96)
    assert (single["completed"], single["errors"], c2["completed"], c2["errors"]) == (1, 0, 2, 0)
    assert (single["requests"], c2["requests"], c2["step_completed"], c2["step_errors"]) == (3, 6, 5, 1)
    assert hours[0] == [*HOURS_HEADER, "N=100,000", "N=200,000", "N=500,000", "N=900,000", "tokens check N=100,000"]
    assert [r[0] for r in hours[1:]] == [r[0] for r in steps[1:]]
    assert all(len(r) == len(hours[0]) for r in hours)


def _label(r: dict[str, Any]) -> str:
    return r["label"] + ("" if r["steady"] and not r.get("low_confidence") else " †" if not r["steady"] else " ‡")


def test_step_row_cells_follow_the_report_values(report: dict[str, Any]) -> None:
    steps = _tables(render_markdown(report))[0]
    r = report["steps"][1]
    row = dict(zip(STEP_HEADER, steps[2], strict=True))
    # 3 significant digits; 2 usable ends after ws (the one at ws opened the window) in a 39 s window
    assert (r["request_rate"], row["req/s"]) == (pytest.approx(2 / 39), "0.0513")
    assert row["output tok/s"] == f"{r['output_tps']:.3g}" == "13.9"
    assert row["TTFT p50/p90/p99 (s)"] == "2.00 / 2.00 / 2.00"
    assert row["TPOT mean/p50 (ms)"] == "100 / 100"  # 18 s of decode over 180 gaps
    assert row["E2E p50 (s)"] == "20.0"
    assert row["inter-chunk p50/p99 (ms)"] == "– / –"  # no gap histograms recorded
    assert row["mean out tok"] == "181"
    assert row["steady window (s)"] == f"{r['window_s']:.1f} (from +{r['window_start_s']:.1f})"


def test_formulas_and_notes_are_bullets(report: dict[str, Any]) -> None:
    md = render_markdown(report)
    formulas = _bullets(_section(md, "Formulas"))
    assert formulas == [f"**{key}**: {text}" for key, text in report["definitions"].items()]
    assert report["notes"]
    assert _bullets(_section(md, "Notes")) == report["notes"]


def test_footnotes_for_errors_and_low_confidence(report: dict[str, Any]) -> None:
    md = render_markdown(report)
    per_step = _bullets(_section(md, "Per step"))  # each footnote its own bullet, in the order of the steps
    assert per_step == [
        *(f"‡ {r['label']}: low confidence, {r['low_confidence']}; {r['low_confidence_fix']}."
          for r in report["steps"]),
        "Errors at C=2: timeout_idle ×1 of the requests started in the step; none in the sample (ended in the "
        "steady window).",
    ]
    assert all(r.get("low_confidence") for r in report["steps"])
    # the hint names the phase's own duration key (nothing here is truncated: the window is just short)
    single, c2 = report["steps"]
    assert (single["low_confidence_fix"], c2["low_confidence_fix"]) == (
        "lengthen single_stream.duration", "lengthen steps.duration")


# -- number formats ------------------------------------------------------------------------------------------


def _one_step(report: dict[str, Any], **values: Any) -> dict[str, Any]:
    """A copy of ``report`` holding only its C=2 row, with ``values`` replacing the row's fields."""
    rep = copy.deepcopy(report)
    row = rep["steps"][1]
    row.update(values)
    rep["steps"] = [row]
    return rep


def test_seconds_milliseconds_rates_and_thousands(report: dict[str, Any]) -> None:
    rep = _one_step(
        report,
        low_confidence=None,
        ttft_p50_s=0.12345, ttft_p90_s=12.3456, ttft_p99_s=123.4,  # 3 significant digits
        ttfat_p50_s=None, ttfat_p90_s=0.5, ttfat_p99_s=99.994,  # 99.994 rounds up to 100: still 3 digits
        gap_p50_s=0.0012345, gap_p99_s=0.04567,  # ms, 3 significant digits
        tpot_mean_s=0.2504, tpot_p50_s=None,  # >= 100 ms: no decimals
        request_rate=2.5, output_tps=12345.67, per_stream_tps=0.04, e2e_p50_s=1000.4,
        mean_output_tokens=1234.5678, truncated_pct=12.34, truncated_in_reasoning_pct=None,
        completed=12345, errors=0,
    )  # fmt: skip
    row = dict(zip(STEP_HEADER, _tables(render_markdown(rep))[0][1], strict=True))
    assert row["step"] == "C=2"
    assert row["completed"] == "12,345"  # counts: integers, thousands separated (as the terminal shows them)
    assert row["TTFT p50/p90/p99 (s)"] == "0.123 / 12.3 / 123"
    assert row["TTFAT p50/p90/p99 (s)"] == "– / 0.500 / 100"
    assert row["inter-chunk p50/p99 (ms)"] == "1.23 / 45.7"
    assert row["TPOT mean/p50 (ms)"] == "250 / –"
    assert row["req/s"] == "2.50"  # 3 significant digits
    assert row["output tok/s"] == "12,346"  # the integer part is never rounded
    assert row["per-stream tok/s"] == "0.0400"
    assert row["E2E p50 (s)"] == "1,000"
    assert row["mean out tok"] == "1,235"
    assert (row["% trunc"], row["% trunc in reasoning"]) == ("12.3", "–")


def _what_if(per_k: float | None, ok: float | None) -> dict[str, Any]:
    return {"hours_per_1k_output_tokens": per_k, "usable_is_success": {"hours": ok, "hours_low": None,
                                                                        "hours_high": None}}


def test_hours_cells(report: dict[str, Any]) -> None:
    hours = [
        {"n": 1000, "hours": 1234.56, "hours_low": 1000.0, "hours_high": 1500.25, "token_hours": 3.0,
         "token_check": "outside", "what_if": _what_if(617.28, 1100.0)},
        {"n": 2000, "hours": 10.0, "hours_low": 5.0, "hours_high": None, "token_hours": None, "token_check": None,
         "what_if": _what_if(5.0, 9.0)},
        {"n": 3000, "hours": None, "hours_low": None, "hours_high": None, "token_hours": 7.77, "token_check": None,
         "what_if": _what_if(None, None)},
        {"n": 4000, "hours": 8.0, "hours_low": None, "hours_high": None, "token_hours": 7.77, "token_check": None,
         "what_if": _what_if(None, None)},
    ]
    interval = {"batches": 8, "batch_s": 12.5, "rel_halfwidth": 0.0412}
    rep = _one_step(report, hours=hours, usable_share=0.98765, error_rate=0.123, truncated_pct=None,
                    hours_interval=interval, mean_output_tokens_usable=2000.0)
    rep["hours_to_n"] = [1000, 2000, 3000, 4000]
    md = render_markdown(rep)
    table = _tables(md)[1]
    assert table[0] == [*HOURS_HEADER, "N=1,000", "N=2,000", "N=3,000", "N=4,000", "tokens check N=1,000"]
    row = table[1]
    assert row[2:7] == ["0.988", "–", "12.3", f"{rep['steps'][0]['mean_output_tokens']:,.0f}",
                        "batch means 8 × 12.5 s, ±4.1 %"]
    assert row[7:] == [
        "1,235 h (1,000–1,500)",
        "10.0 h (5.00–∞)",
        "∞ (no usable completions)",
        "8.00 h (no interval)",
        "3.00 h ⚠ outside",
    ]
    assert ("What-ifs for N=1,000 (hours scale with a sample's mean output length X as hours × X ÷ the mean now): "
            "C=2: 617 h per 1,000 output tokens per sample (mean now 2,000 output tokens), 1,100 h with usable = "
            "success.") in " ".join(
        md.split())  # prose is wrapped at 120 columns
    rep["steps"][0]["hours_interval"] = {"batches": 0}
    assert _tables(render_markdown(rep))[1][1][6] == "none"


def test_table_cells_escape_pipes(report: dict[str, Any]) -> None:
    rep = _one_step(report, label="a|b", low_confidence=None)
    steps, hours = _tables(render_markdown(rep))[:2]
    assert steps[1][0] == "a\\|b" and hours[1][0] == "a\\|b"
    assert len(steps[1]) == len(STEP_HEADER)


# -- variants ------------------------------------------------------------------------------------------------


def test_not_steady_row_and_footnote(report: dict[str, Any]) -> None:
    rep = _one_step(report, steady=False, not_steady_reason="first wave ended after the step", low_confidence=None)
    md = render_markdown(rep)
    row = dict(zip(STEP_HEADER, _tables(md)[0][1], strict=True))
    assert row["step"] == "C=2 †" and row["steady window (s)"] == "NOT steady †"
    assert "† C=2: NOT steady, first wave ended after the step; burst figures over the whole step." in md


def test_client_starved_footnote(report: dict[str, Any]) -> None:
    rep = _one_step(report, client_starved=True, client_lagged_pct=42.4, client_read_lag_max_s=1.234)
    md = render_markdown(rep)
    assert "Client STARVED at C=2: 42 % of requests read > 0.1 s late (max 1.23 s)" in md


def test_interrupted_banner_and_missing_meta(report: dict[str, Any]) -> None:
    rep = copy.deepcopy(report)
    rep.update(interrupted=True, status="interrupted", target={}, model=None, profile_name=None, duration_s=None)
    md = render_markdown(rep)
    lines = md.splitlines()
    assert lines[2:5] == ["target `?` · model `?` ·", "status **interrupted**", ""]
    assert "> **Interrupted run**: figures are partial (see notes)." in md


def test_no_steps_and_no_notes(report: dict[str, Any]) -> None:
    rep = copy.deepcopy(report)
    rep.update(steps=[], notes=[], prompts=[])
    rep["warmup"] = {"requests": 0}
    md = render_markdown(rep)
    assert "Warm-up: none recorded." in md
    assert "No steps recorded." in _section(md, "Per step")
    assert _tables(md) == []
    assert _section(md, "Notes").splitlines()[-1] == "- none"


def test_compressed_time_adds_the_real_time_tables(tmp_path: Path) -> None:
    meta = {"simulator": {"preset": "demo", "time_scale": 0.1}}
    rep = build_report(_run(tmp_path / "fast", meta)).as_dict()
    assert rep["time_scale"] == 0.1
    md = render_markdown(rep)
    assert "> **COMPRESSED TIME** (simulator time_scale = 0.1)" in md
    real = _section(md, "Real-time equivalents")
    assert "durations ÷ 0.1, rates × 0.1" in real
    tables = _tables(md)
    # per step, hours, real-time figures, real-time hours, by finish reason, per prompt, self-certification
    assert len(tables) == 7
    assert tables[2][0] == REAL_HEADER
    c2 = rep["steps"][1]
    row = dict(zip(REAL_HEADER, tables[2][2], strict=True))
    assert row["window (s)"] == f"{c2['real_time']['window_s']:,.1f}"
    assert row["E2E p50 (s)"] == "200"  # 20 s of compressed time at 0.1 s per simulated second
    assert tables[3][0] == tables[1][0]
    assert tables[3][2][7] != tables[1][2][7]  # real-time hours, not the compressed ones


# -- terminal ------------------------------------------------------------------------------------------------


def test_full_on_a_narrow_terminal_never_elides_a_number(
    report: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    md = render_markdown(_wide(report))
    assert max(len(line) for line in md.splitlines()) > 120  # tables wider than the terminal
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    _print_markdown(md)
    out = capsys.readouterr().out
    assert out == md and "…" not in out  # every cell whole: the Markdown as plain text, not a cut rich table
    for cell in ("TTFT p50/p90/p99 (s)", "N=100,000", "12,346", "0.000123"):
        assert cell in out


def test_non_terminal_output_is_the_raw_markdown(
    report: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    md = render_markdown(report)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    _print_markdown(md)
    assert capsys.readouterr().out == md


# -- formatting helpers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "–"), (0.0, "0"), (0.000123, "0.000123"), (0.04, "0.0400"), (0.1939, "0.194"), (1.756, "1.76"),
        (1.76, "1.76"), (17.64, "17.6"), (176.4, "176"), (9.996, "10.0"), (0.9996, "1.00"), (99.94, "99.9"),
        (99.96, "100"), (1764.3, "1,764"), (12345.67, "12,346"), (-0.1939, "-0.194"), (float("inf"), "∞"),
        (float("nan"), "–"),
    ],
)  # fmt: skip
def test_sig3_three_significant_digits_integer_part_whole(value: float | None, text: str) -> None:
    assert fmt.sig3(value) == text


def test_one_helper_per_kind() -> None:
    assert [fmt.rate(v) for v in (0.1939, 1.76, 17.6, 176.0)] == ["0.194", "1.76", "17.6", "176"]
    assert [fmt.tps(v) for v in (9.1, 91.04, 910.4, 12345.6)] == ["9.10", "91.0", "910", "12,346"]
    assert [fmt.seconds(v) for v in (0.0123, 2.0, 20.0, 200.4)] == ["0.0123", "2.00", "20.0", "200"]
    assert [fmt.millis(v) for v in (0.0012345, 0.04567, 0.2504, None)] == ["1.23", "45.7", "250", "–"]
    assert [fmt.hours(v) for v in (0.5, 278.4, 1234.56, None)] == ["0.500", "278", "1,235", "∞"]
    assert [fmt.pct(v) for v in (0.0, 12.34, 100.0, None)] == ["0.0", "12.3", "100.0", "–"]
    assert [fmt.count(v) for v in (3, 1234.5678, None)] == ["3", "1,235", "–"]


def test_wall_time_carries_the_utc_offset(report: dict[str, Any]) -> None:
    assert fmt.wall_time(T0) == "2023-11-14 22:13:20 UTC+00:00"
    assert fmt.wall_time(None) == "?"
    os.environ["TZ"] = "IST-05:30"  # POSIX zone string: no tz database needed (the fixture restores TZ)
    time.tzset()
    assert fmt.wall_time(T0) == "2023-11-15 03:43:20 UTC+05:30"
    assert "started 2023-11-15 03:43:20 UTC+05:30, 95 s" in render_markdown(report)
    assert "started 2023-11-15 03:43:20 UTC+05:30, 95 s" in render_summary(report)
    os.environ["TZ"] = "XST+03:00"
    time.tzset()
    assert fmt.wall_time(T0) == "2023-11-14 19:13:20 UTC-03:00"


def test_wrap_markdown_keeps_blocks() -> None:
    words = " ".join(f"w{i}" for i in range(60))
    bullet = f"- {words} - 1. # > ```json {words}"
    out = fmt.wrap_markdown(bullet, 40).split("\n")
    assert all(len(ln) <= 40 for ln in out) and len(out) > 5
    assert out[0].startswith("- ") and all(ln.startswith("  ") and not ln.startswith("   ") for ln in out[1:])
    assert " ".join(ln[2:] for ln in out) == bullet[2:]  # the same words in the same order
    assert not any(re.match(r"  (?:[-+*>#=|]|\d+[.)]|```)", ln) for ln in out[1:])  # no new block opened
    quote = fmt.wrap_markdown("> " + words, 40).split("\n")
    assert all(ln.startswith("> ") and len(ln) <= 40 for ln in quote)
    table = "| " + " | ".join(["cell"] * 40) + " |"
    url = "see http://127.0.0.1:8000/" + "x" * 150
    assert fmt.wrap_markdown(f"{table}\n# {words}\n{url}", 40) == f"{table}\n# {words}\nsee\n{url[4:]}"


# -- line widths ---------------------------------------------------------------------------------------------


def _wide(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with 12 steps at high concurrency, big counts and long footnote and note texts."""
    rep = copy.deepcopy(report)
    base = rep["steps"][1]
    steps = []
    for i in range(12):
        c = 2**i
        steps.append({
            **base, "label": f"C={c}", "concurrency": c, "completed": 1_234_567, "errors": 12_345,
            "output_tps": 12345.67 * (i + 1), "per_stream_tps": 123.456, "ttft_p50_s": 123.456, "ttfat_p50_s": 0.000123,
            "tpot_mean_s": 1.2346, "e2e_p50_s": 1234.6, "truncated_pct": 100.0, "steady": i % 3 != 0,
            "not_steady_reason": "the first wave ended after the step, " * 4, "low_confidence": "short window " * 12,
            "client_starved": i == 5, "client_lagged_pct": 55.0, "client_read_lag_max_s": 2.5,
            "errors_by_class": {f"class_{k}": 1000 + k for k in range(12)},
            "step_errors_by_class": {f"class_{k}": 1000 + k for k in range(12)},
            "hours": [{**h, "hours": 12345.6, "hours_low": 11000.4, "hours_high": 13800.2} for h in base["hours"]],
        })  # fmt: skip
    rep["steps"] = steps
    rep["notes"] = [("A long note about the run " * 20).strip(), "Short note."]
    return rep


def test_markdown_prose_fits_120_columns(report: dict[str, Any]) -> None:
    rep = _wide(report)
    md = render_markdown(rep)
    prose = [ln for ln in md.splitlines() if not ln.startswith("|")]
    assert max(len(ln) for ln in prose) <= 120
    assert max(len(ln) for ln in md.splitlines()) > 120  # tables may be wide
    assert _bullets(_section(md, "Notes")) == rep["notes"]
    foot = _bullets(_section(md, "Per step"))
    assert len(foot) == 4 + 12 + 1 + 12  # not steady, low confidence, client starved, errors: one bullet each
    assert foot[0] == f"† C=1: NOT steady, {rep['steps'][0]['not_steady_reason']}; burst figures over the whole step."


def test_summary_fits_120_columns_and_holds_the_step_figures(report: dict[str, Any]) -> None:
    rep = _wide(report)
    out = render_summary(rep, "/runs/some-run")
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 120
    assert out.endswith("\n") and "…" not in out  # nothing had to be cut
    head = next(i for i, ln in enumerate(lines) if ln.startswith("step "))
    assert lines[head - 1].split() == ["output", "per-stream", "TTFT", "TTFAT", "TPOT", "E2E", "%", "hours", "to"]
    assert lines[head].split() == ["step", "C", "completed", "errors", "tok/s", "tok/s", "p50", "s", "p50", "s",
                                   "mean", "ms", "p50", "s", "trunc", "N=100,000", "(95", "%)"]
    rows = lines[head + 2 : head + 2 + 12]
    assert rows[0].split() == ["C=1", "†", "1", "1,234,567", "12,345", "12,346", "123", "123", "0.000123", "1,235",
                               "1,235", "100.0", "12,346", "h", "(11,000–13,800)"]
    assert rows[1].split()[:2] == ["C=2", "‡"] and rows[11].split()[:3] == ["C=2048", "‡", "2048"]
    assert "! COMPRESSED TIME" not in out and "/runs/some-run/report.md" in out
    text = " ".join(out.split())
    assert "Client STARVED at C=32: 55 % of requests read > 0.1 s late" in text
    assert "Errors at C=1: class_0 ×1000, class_1 ×1001" in text
    assert "2 notes" in text


def test_summary_of_the_small_run(report: dict[str, Any]) -> None:
    out = render_summary(report)
    lines = out.splitlines()
    assert lines[0] == "llmload report run-1 · status finished · started 2023-11-14 22:13:20 UTC+00:00, 95 s"
    assert lines[1] == "target http://127.0.0.1:8000/v1 · model k2-test · profile synthetic"
    c2 = report["steps"][1]
    row = next(ln for ln in lines if ln.startswith("C=2 ")).split()
    # the one sample: 2 requests ended in C=2's window, none failed there (the timeout is in the whole-step count)
    h = c2["hours"][0]
    assert (c2["completed"], c2["errors"], h["hours_low"], h["hours_high"]) == (2, 0, None, None)
    assert row == ["C=2", "‡", "2", "2", "0", fmt.tps(c2["output_tps"]), fmt.tps(c2["per_stream_tps"]), "2.00",
                   "2.50", "100", "20.0", "0.0", f"{fmt.hours(h['hours'])}", "h", "(no", "interval)"]  # fmt: skip
    assert "Errors at C=2: timeout_idle ×1 (requests started in the step)." in lines
    assert len(out) < len(render_markdown(report)) / 5


def test_summary_banners_and_no_steps(report: dict[str, Any]) -> None:
    rep = copy.deepcopy(report)
    rep.update(interrupted=True, time_scale=0.1, steps=[], notes=["x"])
    out = render_summary(rep)
    assert "! Interrupted run" in out and "! COMPRESSED TIME (simulator time_scale = 0.1)" in out
    assert "No steps recorded." in out and "the formulas and 1 note:" in " ".join(out.split())


# -- command line --------------------------------------------------------------------------------------------


def test_report_command_prints_the_summary_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _run(tmp_path / "run-1")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    assert out == render_summary(build_report(root).as_dict(), str(root))
    assert main([str(root), "--full"]) == 0
    full = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    assert full == (root / "report.md").read_text()  # the whole report, as plain Markdown text
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    for args in ([str(root)], [str(root), "--full"]):
        assert main(args) == 0
        assert capsys.readouterr().out == (root / "report.md").read_text()  # a pipe gets the raw Markdown


def _summary_labels(text: str) -> list[str]:
    """The step labels of a terminal summary's table, each read whole: a label that fits its column starts its
    row; a longer one stands on its own line(s) above its row, whose label cell is then blank."""
    lines = text.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    labels: list[str] = []
    pending: list[str] = []
    for ln in lines[rule + 1 :]:
        if not ln.strip():
            break
        cells = re.split(r" {2,}", ln.strip())
        if ln.startswith(" "):  # the figures of a label given above
            labels.append("".join(pending))
            pending = []
        elif len(cells) == 1:  # (part of) a label on its own line
            pending.append(cells[0])
        else:
            labels.append(cells[0])
    return labels


def test_summary_wraps_long_step_labels_never_cuts_them(report: dict[str, Any]) -> None:
    """A label too long for the table continues on the next lines (under the label column), whole: never cut
    with ``…`` (cut labels made three sweep settings read the same), and the figures stay whole."""
    rep = _wide(report)
    rep["steps"][3]["label"] = "a-step-label-far-too-long-for-a-terminal-table"
    out = render_summary(rep)
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= 120 and "…" not in out
    at = next(i for i, ln in enumerate(lines) if ln.startswith("a-step-"))
    assert lines[at].startswith("a-step-label-far-too-long-for-a-terminal-table")  # whole, on its own line
    row = lines[at + 1]  # then its figures, whole
    assert row.startswith(" ") and row.endswith("12,346 h (11,000–13,800)") and " 1,234,567 " in row
    got = _summary_labels(out)[3].replace(" ", "")
    assert got.startswith("a-step-label-far-too-long-for-a-terminal-table")


def test_summary_settings_labels_stay_distinct(report: dict[str, Any]) -> None:
    """Three sweep settings whose labels share a long prefix each read whole in the terminal table."""
    rep = _wide(report)
    labels = [f"C=8 (thinking=on, effort={e}, prompt=long-context-summarisation-{k})"
              for k, e in enumerate(("low", "medium", "high"))]
    for r, lab in zip(rep["steps"][:3], labels, strict=True):
        r["label"], r["steady"], r["low_confidence"] = lab, True, None
    out = render_summary(rep)
    assert max(len(ln) for ln in out.splitlines()) <= 120
    got = [g.replace(" ", "") for g in _summary_labels(out)[:3]]
    assert got == [lab.replace(" ", "") for lab in labels] and len(set(got)) == 3



def test_least_durations_round_up_with_separators() -> None:
    from harness.report.build import _steady_notes
    from harness.report.model import StepRow

    iv = {"reason": None, "needed_window_s": 1612.2, "needed_duration_s": 52.128, "rel_halfwidth": 0.3,
          "batches": 10, "batch_s": 5.0, "duration_key": "steps.duration"}
    row = {"steady": True, "label": "C=4", "concurrency": 4, "littles_law_c": None, "hours_interval": iv,
           "hours": [{"n": 100_000, "token_check": "outside", "token_hours": 1234.5, "hours": 2000.4,
                      "hours_low": 1500.2, "hours_high": None}]}
    notes = _steady_notes(StepRow.model_validate(row))
    assert "~1,613 s: set steps.duration to ≥ 53 s." in notes[0]
    assert "(1,234 h for N=100,000)" in notes[1] and "(2,000 h, 1,500–∞ h)" in notes[1]
    row["hours_interval"] = {**iv, "reason": "too few batches", "needed_duration_s": 52.0}
    assert "lengthen steps.duration to ≥ 52 s." in _steady_notes(StepRow.model_validate(row))[0]


def test_summary_breaks_setting_labels_between_axes_never_inside_a_name() -> None:
    from harness.report.summary import _label_lines

    label = "C=2 (thinking=on,effort=low,max_tokens=512)"
    assert _label_lines(label, 120) == [label]
    lines = _label_lines(label, 20)
    assert all(len(ln) <= 20 for ln in lines) and "".join(lines).replace(" ", "") == label.replace(" ", "")
    for name in ("thinking=on,", "effort=low,", "max_tokens=512)"):
        assert any(name in ln for ln in lines), (name, lines)  # each axis whole on one line
    assert _label_lines("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]  # a longer piece is cut, never lost
