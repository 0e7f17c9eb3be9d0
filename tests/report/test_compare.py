"""``llmload compare``: exact ratios, noise flags both ways, unmatched steps, outputs and exit codes.

The synthetic runs share one random timeline (users sending back to back, e2e 8..12 s, TTFT 0.8..1.2 s);
a run with ``speed=2`` is the same timeline compressed by 2 (steps included), so every rate is exactly twice
and every latency and hours figure exactly half the baseline's, with the same counts.
"""

from __future__ import annotations

import json
import math
import random
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as llmload_main
from harness.report import fmt
from harness.report.build import write_report
from harness.report.catalogue import FIGURES, Flag, flags_legend, to_n_label, with_flags
from harness.report.compare import (
    BASE_METRICS,
    CompareError,
    build_comparison,
    main,
    write_comparison,
)
from harness.report.compare import _ratio as cmp_ratio
from harness.report.compare_model import CompareReport, Estimate, Ratio
from harness.report.compare_render import render_html, render_markdown, tables
from harness.report.compare_stats import mean_interval, quantile_interval, ratio_of_sums_interval
from harness.report.cost import add_cost
from tests.report.rundir import phase, rec, run_end, write_run

STEP_S = 420.0
TPS_KEYS = ("output_tps", "per_stream_tps")
LOWER_KEYS = ("ttft_p50_s", "ttfat_p50_s", "tpot_mean_s", "e2e_p50_s")
P99_KEYS = ("ttft_p99_s", "ttfat_p99_s")


def _run(root: Path, speed: float = 1.0, steps: Sequence[tuple[int, int]] = ((0, 1), (1, 2)),
         step_s: float = STEP_S, seed: int = 7, last_step_s: float | None = None) -> Path:
    """A run of ``steps`` ((step, concurrency), step 0 = single stream) on a timeline compressed by ``speed``.

    Each step draws its requests from its own random stream (the same step is the same in every run). With
    ``last_step_s`` the last step lasts that long and keeps the requests in flight at its end (they drain).
    """
    records: list[dict[str, Any]] = [rec("w", -1, 0, 4 / speed, ttft=1 / speed, ttfat=1.5 / speed)]
    phases = [phase("warmup", -1, 1, 0)]
    t = 5.0
    for i, (step, c) in enumerate(steps):
        rng = random.Random(f"{seed}-{step}-{c}")
        last = last_step_s is not None and i == len(steps) - 1
        length = last_step_s if last and last_step_s is not None else step_s
        phases.append(phase("single" if step == 0 else "step", step, c, t / speed, length / speed))
        for u in range(c):
            s = t
            while s < t + length:
                e2e, ttft, tokens = rng.uniform(8, 12), rng.uniform(0.8, 1.2), rng.randint(80, 120)
                if s + e2e > t + length and not last:
                    break
                records.append(rec(f"u{step}-{u}", step, s / speed, e2e / speed, ttft=ttft / speed,
                                   ttfat=(ttft + 0.5) / speed, tokens=tokens, concurrency=c))
                s += e2e
        t += length
    phases.append(run_end(t / speed))
    return write_run(root, records, phases)


def _ratio(cmp: dict[str, Any], step: str, key: str, i: int = 0) -> dict[str, Any]:
    s = next(s for s in cmp["steps"] if s["key"] == step)
    return s["metrics"][key]["ratios"][i]


def _hours_keys(cmp: dict[str, Any]) -> list[str]:
    return [m["key"] for m in cmp["metrics"] if m["key"].startswith("hours@")]


def test_identical_runs_are_within_noise(tmp_path: Path) -> None:
    a = _run(tmp_path / "a")
    b = _run(tmp_path / "b")
    cmp = build_comparison([a, b])
    assert [s["key"] for s in cmp["steps"]] == ["single", "C=2"] and cmp["unmatched"] == []
    assert _hours_keys(cmp) == ["hours@100000", "hours@200000", "hours@500000", "hours@900000"]
    for s in cmp["steps"]:
        for key, cell in s["metrics"].items():
            r = cell["ratios"][0]
            assert r["ratio"] == pytest.approx(1.0, rel=1e-12), (s["key"], key)
            assert r["within_noise"] is True and r["verdict"] == "within noise", (s["key"], key, r)
            va, vx = cell["values"]
            unbounded_low = not vx["low"] or va["high"] is None  # then the ratio has no lower bound, not 0
            assert (r["low"] is None) if unbounded_low else (r["low"] is not None and r["low"] <= 1.0), (key, r)
            assert (r["high"] is None) if (vx["high"] is None or not va["low"]) else r["high"] >= 1.0
    assert cmp["notes"] == []


@pytest.mark.parametrize("step", ["single", "C=2"])
def test_twice_as_fast_exact_ratios_beyond_noise(tmp_path: Path, step: str) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)])
    for key in TPS_KEYS:
        r = _ratio(cmp, step, key)
        assert r["ratio"] == pytest.approx(2.0, rel=1e-9), key
        assert (r["within_noise"], r["verdict"]) == (False, "better"), (key, r)
        assert r["low"] > 1.0
    for key in (*LOWER_KEYS, *_hours_keys(cmp)):
        r = _ratio(cmp, step, key)
        assert r["ratio"] == pytest.approx(0.5, rel=1e-9), key
        assert (r["within_noise"], r["verdict"]) == (False, "better"), (key, r)
        assert r["high"] is not None and r["high"] < 1.0
    for key in P99_KEYS:
        # p99's upper bound needs >= 367 values (0.99^n <= 2.5 %); with ~40 / ~80 it is unbounded, so the
        # intervals overlap: a p99 from a short step cannot tell a 2x difference, and says so
        r = _ratio(cmp, step, key)
        assert r["ratio"] == pytest.approx(0.5, rel=1e-9), key
        assert (r["within_noise"], r["verdict"], r["high"]) == (True, "within noise", None), key


def test_p99_beyond_noise_with_enough_requests(tmp_path: Path) -> None:
    steps = ((1, 12),)
    cmp = build_comparison([_run(tmp_path / "a", steps=steps), _run(tmp_path / "b", steps=steps, speed=2.0)])
    c12 = next(s for s in cmp["steps"] if s["key"] == "C=12")
    assert c12["metrics"]["ttft_p99_s"]["values"][0]["high"] is not None
    for key in P99_KEYS:
        r = _ratio(cmp, "C=12", key)
        assert r["ratio"] == pytest.approx(0.5, rel=1e-9)
        assert (r["within_noise"], r["verdict"]) == (False, "better"), (key, r)


def test_slower_run_is_worse(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "fast", speed=2.0), _run(tmp_path / "slow")])
    r = _ratio(cmp, "C=2", "output_tps")
    assert r["ratio"] == pytest.approx(0.5, rel=1e-9) and r["verdict"] == "worse"
    r = _ratio(cmp, "C=2", "e2e_p50_s")
    assert r["ratio"] == pytest.approx(2.0, rel=1e-9) and r["verdict"] == "worse"


def test_small_difference_is_within_noise(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=1.03)])
    for key in ("output_tps", "e2e_p50_s", "ttft_p50_s", "hours@100000"):
        r = _ratio(cmp, "C=2", key)
        assert r["ratio"] != pytest.approx(1.0)
        assert (r["within_noise"], r["verdict"]) == (True, "within noise"), (key, r)
    assert _ratio(cmp, "C=2", "output_tps")["ratio"] == pytest.approx(1.03, rel=1e-9)


def test_throughput_interval_is_the_hours_interval(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b")])
    v = next(s for s in cmp["steps"] if s["key"] == "C=2")["metrics"]
    tps, hours = v["output_tps"]["values"][0], v["hours@100000"]["values"][0]
    assert tps["method"] == "interval_output_tps" and hours["method"] == "interval_hours"
    assert tps["low"] == pytest.approx(tps["value"] * hours["value"] / hours["high"])
    assert tps["high"] == pytest.approx(tps["value"] * hours["value"] / hours["low"])


def test_unmatched_steps(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", steps=((0, 1), (1, 2)))
    b = _run(tmp_path / "b", steps=((0, 1), (1, 2), (2, 4)))
    c = _run(tmp_path / "c", steps=((1, 2),))
    cmp = build_comparison([a, b, c])
    assert [s["key"] for s in cmp["steps"]] == ["single", "C=2"]
    assert cmp.as_dict()["unmatched"] == [
        {"key": "single", "present_in": ["A", "B"], "missing_in": ["C"]},
        {"key": "C=4", "present_in": ["B"], "missing_in": ["A", "C"]},
    ]
    single = next(s for s in cmp["steps"] if s["key"] == "single")
    assert single["present"] == [True, True, False]
    assert [r["vs"] for r in single["metrics"]["output_tps"]["ratios"]] == ["B", "C"]
    assert single["metrics"]["output_tps"]["ratios"][1]["verdict"] == "n/a"
    assert _ratio(cmp, "C=2", "output_tps", 1)["ratio"] == pytest.approx(1.0)
    md = render_markdown(cmp)
    assert "## Unmatched steps" in md and "| C=4 | B | A, C |" in md


def test_records_intervals_follow_the_report_sample(tmp_path: Path) -> None:
    # a 5 s last step cannot reach steady state (every first request takes 8..12 s): the latency sample is then
    # the step's successful requests, as in the report
    a = _run(tmp_path / "a", steps=((0, 1), (1, 4)), last_step_s=5.0)
    rep, _ = write_report(a)
    assert not rep.steps[1].steady
    cmp = build_comparison([a, a])
    assert not any("do not reproduce" in n for n in cmp["notes"])
    c4 = next(s for s in cmp["steps"] if s["key"] == "C=4")
    assert c4["flags"][0] == [Flag.NOT_STEADY.name]
    assert c4["metrics"]["e2e_p50_s"]["values"][0]["method"] == "interval_percentiles"
    assert "C=4 †" in render_markdown(cmp)


def test_stale_report_json_gets_no_interval(tmp_path: Path) -> None:
    a = _run(tmp_path / "a")
    b = _run(tmp_path / "b")
    write_report(a)
    rep = json.loads((a / "report.json").read_text())
    rep["steps"][1]["ttft_p50_s"] *= 1.1
    (a / "report.json").write_text(json.dumps(rep))
    cmp = build_comparison([a, b])
    assert [r["source"] for r in cmp["runs"]] == ["report.json", "built"]
    r = _ratio(cmp, "C=2", "ttft_p50_s")
    assert r["ratio"] == pytest.approx(1 / 1.1) and (r["within_noise"], r["verdict"]) == (None, "no interval")
    assert any("A C=2" in n and "ttft_p50_s" in n for n in cmp["notes"])
    assert _ratio(cmp, "C=2", "ttft_p99_s")["verdict"] == "within noise"


def _price(run: Path, usd_h: float | None) -> None:
    """Rewrite a run's report.json as if its profile had priced the deployment at ``usd_h`` US$/h."""
    rep = write_report(run)[0].as_dict()
    for row in rep["steps"]:
        add_cost(row, usd_h)
    (run / "report.json").write_text(json.dumps(rep, default=lambda typed: typed.as_dict()))  # CostFigures


def test_cost_compared_only_when_both_priced(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)
    cmp = build_comparison([a, b])
    assert not any(m["unit"] == "US$" for m in cmp["metrics"])
    assert [m["key"] for m in cmp["metrics"][: len(BASE_METRICS)]] == [m.key for m in BASE_METRICS]
    _price(a, 10.0)
    assert not any(m["unit"] == "US$" for m in build_comparison([a, b])["metrics"])  # B has no price
    _price(b, 8.0)
    cmp = build_comparison([a, b])
    keys = [m["key"] for m in cmp["metrics"] if m["unit"] == "US$"]
    assert keys == ["usd@100000", "usd@200000", "usd@500000", "usd@900000", "usd_per_1m_output_tokens",
                    "usd_per_1k_usable"]
    r = _ratio(cmp, "C=2", "usd@200000")  # half the hours at 0.8 the price
    assert r["ratio"] == pytest.approx(0.4) and r["verdict"] == "better"
    hrs = _ratio(cmp, "C=2", "hours@200000")
    assert r["low"] == pytest.approx(0.8 * hrs["low"]) and r["high"] == pytest.approx(0.8 * hrs["high"])
    per_m = _ratio(cmp, "C=2", "usd_per_1m_output_tokens")  # twice the tok/s at 0.8 the price
    assert per_m["ratio"] == pytest.approx(0.4) and per_m["verdict"] == "no interval"
    assert _ratio(cmp, "C=2", "usd_per_1k_usable")["ratio"] == pytest.approx(0.4)
    c2 = next(s for s in cmp["steps"] if s["key"] == "C=2")
    v = c2["metrics"]["usd@200000"]["values"][0]
    md = render_markdown(cmp)
    for key in ("usd@200000", "usd_per_1m_output_tokens", "usd_per_1k_usable"):  # the catalogue's labels
        label = next(m["label"] for m in cmp["metrics"] if m["key"] == key)
        assert label == (to_n_label("usd", 200_000) if key == "usd@200000" else FIGURES[key].label), key
        assert f"| {label} |" in md or f"| {label} (US$) |" in md, key
    assert next(m["label"] for m in cmp["metrics"] if m["key"] == "hours@200000") == to_n_label("hours", 200_000)
    assert f"{fmt.usd(v['value'])} ({fmt.usd(v['low'])}–{fmt.usd(v['high'])})" in md


def test_no_interval_in_either_run_has_no_noise_flag(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)
    for run in (a, b):
        rep = write_report(run)[0].as_dict()
        for row in rep["steps"]:
            for h in row["hours"]:
                h["hours_low"] = h["hours_high"] = None  # keys present, no bound: no interval at all
        (run / "report.json").write_text(json.dumps(rep))
    cmp = build_comparison([a, b])
    r = _ratio(cmp, "C=2", "hours@100000")
    assert r["ratio"] == pytest.approx(0.5)
    assert (r["low"], r["high"], r["within_noise"], r["verdict"]) == (None, None, None, "no interval")
    assert "0.500 ? no interval" in render_markdown(cmp)


def test_one_sided_interval_is_unbounded_not_zero() -> None:
    a = Estimate(value=2.0, low=1.5, high=None, method="interval_hours")  # no upper bound
    x = Estimate(value=1.0, low=0.9, high=1.6, method="interval_hours")
    r = cmp_ratio(a, x, "lower", "B")
    assert r.vs == "B" and r.low is None and r.high == pytest.approx(1.6 / 1.5)  # not a silent 0.0
    assert r.within_noise is True
    assert cell_text(r) == f"0.500 (≤ {1.6 / 1.5:.3f}) ≈ within noise"
    r = cmp_ratio(x, a, "lower", "B")
    assert r.low == pytest.approx(1.5 / 1.6) and r.high is None
    assert cell_text(r) == f"2.000 (≥ {1.5 / 1.6:.3f}) ≈ within noise"


def test_outputs_markdown_json_html(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)])
    paths = write_comparison(cmp, tmp_path / "out")
    assert sorted(p.name for p in paths.values()) == ["compare.html", "compare.json", "compare.md"]
    data = json.loads(paths["json"].read_text(), parse_constant=lambda c: pytest.fail(f"non-finite {c}"))
    assert data["schema"] == "llmload-compare/1" and data["baseline"] == "A"
    assert [r["tag"] for r in data["runs"]] == ["A", "B"]
    md = paths["md"].read_text()
    assert md == render_markdown(cmp)
    assert "## B/A per step" in md and "## Step C=2" in md and "## Definitions" in md
    assert "| single | 2.000 ▲ | 2.000 ▲ | 0.500 ▲ |" in md
    assert "| output tok/s |" in md and "▲ better" in md
    assert re.search(r"\| \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC[+-]\d\d:\d\d \|", md)  # start times with their offset
    page = paths["html"].read_text()
    assert page == render_html(cmp)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    low = page.lower()
    for forbidden in ("src=", "href=", "@import", "url(", "<script", "<link"):
        assert forbidden not in low, forbidden
    assert '<td class="better">2.000 ▲</td>' in page
    assert "<style>" in page


def test_markdown_values_carry_intervals(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)])
    c2 = next(s for s in cmp["steps"] if s["key"] == "C=2")
    tps = c2["metrics"]["output_tps"]["values"][0]
    md = render_markdown(cmp)
    assert f"{fmt.tps(tps['value'])} ({fmt.tps(tps['low'])}–{fmt.tps(tps['high'])})" in md
    r = c2["metrics"]["output_tps"]["ratios"][0]
    assert f"2.000 ({r['low']:.3f}–{r['high']:.3f}) ▲ better" in md


def test_cli_writes_and_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)
    out = tmp_path / "cmp"
    assert llmload_main(["compare", str(a), str(b), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("# Compare runs: A a vs B b") and (out / "compare.html").exists()
    assert cap.out == (out / "compare.md").read_text()
    assert main([str(a), str(b), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["schema"] == "llmload-compare/1"
    assert main([str(a), str(b), "--out", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    assert not (a / "report.json").exists()  # compare never writes into a run directory


def test_cli_default_out_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    monkeypatch.chdir(tmp_path)
    assert main([str(a), str(b), "--quiet"]) == 0
    assert (tmp_path / "compare-a-vs-b" / "compare.json").exists()


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path / "a")
    assert main([str(a), str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    assert "missing: no such run directory" in capsys.readouterr().err
    assert main([str(a), "--out", str(tmp_path / "o")]) == 2
    assert "at least two run directories" in capsys.readouterr().err
    assert main(["--out", str(tmp_path / "o")]) == 2
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(a), str(empty), "--out", str(tmp_path / "o")]) == 2
    assert "records.jsonl" in capsys.readouterr().err
    odd = tmp_path / "odd"
    shutil.copytree(a, odd)
    (odd / "report.json").write_text(json.dumps({"schema": "llmload-report/99", "steps": []}))
    assert main([str(a), str(odd), "--out", str(tmp_path / "o")]) == 2
    assert "unknown report schema 'llmload-report/99'" in capsys.readouterr().err
    (odd / "report.json").write_text("{not json")
    assert main([str(a), str(odd), "--out", str(tmp_path / "o")]) == 2
    assert "unreadable report" in capsys.readouterr().err
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main([str(a), str(a), "--out", str(blocker)]) == 1
    assert not (tmp_path / "o").exists()


def test_build_comparison_needs_two_runs(tmp_path: Path) -> None:
    with pytest.raises(CompareError, match="at least two"):
        build_comparison([_run(tmp_path / "a")])


def test_records_unreadable_means_no_latency_interval(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    write_report(a)
    (a / "records.jsonl").unlink()
    cmp = build_comparison([a, b])
    assert any("no records.jsonl" in n for n in cmp["notes"])
    assert _ratio(cmp, "C=2", "e2e_p50_s")["verdict"] == "no interval"
    assert _ratio(cmp, "C=2", "output_tps")["verdict"] == "within noise"  # from the report's hours interval


def test_quantile_interval_order_statistics() -> None:
    xs = [float(v) for v in range(1, 101)]
    assert quantile_interval(xs, 50) == (40.0, 61.0)  # the textbook ranks for n = 100
    assert quantile_interval(xs, 99)[1] is None  # P(all 100 below p99) = 0.99^100 > 2.5 %
    assert quantile_interval(xs[:5], 50) == (None, None)
    assert quantile_interval([], 50) == (None, None)
    # coverage of the true median of U(0, 1) by the interval from 30 draws, 400 trials
    rng = random.Random(3)
    hits = 0
    for _ in range(400):
        lo, hi = quantile_interval([rng.random() for _ in range(30)], 50)
        assert lo is not None and hi is not None
        hits += lo <= 0.5 <= hi
    assert 0.93 <= hits / 400 <= 0.995


def test_mean_and_ratio_intervals() -> None:
    lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0])
    half = 1.96 * math.sqrt((1.25 * 4 / 3) / 4)
    assert (lo, hi) == (pytest.approx(2.5 - half), pytest.approx(2.5 + half))
    assert mean_interval([1.0]) == (None, None)
    pairs = [(10.0, 1.0), (22.0, 2.0), (27.0, 3.0)]
    lo, hi = ratio_of_sums_interval(pairs)
    r = 59 / 6
    se = math.sqrt(sum((y - r * x) ** 2 for y, x in pairs) / 6) / 2
    assert (lo, hi) == (pytest.approx(r - 1.96 * se), pytest.approx(r + 1.96 * se))
    assert ratio_of_sums_interval([(1.0, 1.0)]) == (None, None)


def test_llmload_lists_and_dispatches_compare(capsys: pytest.CaptureFixture[str]) -> None:
    assert llmload_main(["--help"]) == 0
    assert "compare RUN_A RUN_B" in capsys.readouterr().out
    with pytest.raises(SystemExit) as ei:
        llmload_main(["compare", "--help"])
    assert ei.value.code == 0
    assert capsys.readouterr().out.startswith("usage: llmload compare ")


def cell_text(r: Ratio) -> str:
    """The detail-table text of a ratio."""
    from harness.report.compare_render import _ratio_cell

    return _ratio_cell(r, detail=True).text


def test_compare_values_use_the_report_formats(tmp_path: Path) -> None:
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)])
    md = render_markdown(cmp)
    c2 = next(s for s in cmp["steps"] if s["key"] == "C=2")
    ttft = c2["metrics"]["ttft_p50_s"]["values"][0]["value"]
    hrs = c2["metrics"]["hours@100000"]["values"][0]["value"]
    assert f"| {fmt.seconds(ttft)} (" in md and f"| {fmt.hours(hrs)} (" in md
    detail = [t for t in tables(cmp) if t.title.startswith("Step ")]
    values = [row[i].text for t in detail for row in t.rows for i in (1, 2)]  # A's and B's values
    numbers = [n for v in values for n in re.findall(r"\d[\d,]*\.\d+", v)]
    assert numbers and all(len(n.replace(",", "").replace(".", "").lstrip("0")) <= 3 for n in numbers), numbers


def test_same_run_twice_and_different_workloads_are_noted(tmp_path: Path) -> None:
    a = _run(tmp_path / "a")
    same = build_comparison([a, a])
    assert [n for n in same["notes"] if "same run" in n] == [
        "A and B are the same run (a): their ratios are 1 by construction and say nothing about noise."]
    b = _run(tmp_path / "b")
    meta = json.loads((b / "run.json").read_text())
    meta["run_id"] = "a"  # a copy of run a in another directory
    (b / "run.json").write_text(json.dumps(meta))
    assert any("A and B are the same run (a)" in n for n in build_comparison([a, b])["notes"])
    # another profile and another max_tokens: both said
    c = _run(tmp_path / "c")
    lines = [json.loads(x) for x in (c / "records.jsonl").read_text().splitlines() if x.strip()]
    for r in lines:
        r["max_tokens"] = 64
    (c / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    meta = json.loads((c / "run.json").read_text())
    meta["profile"] = {**(meta.get("profile") or {}), "name": "other"}
    (c / "run.json").write_text(json.dumps(meta))
    ca = build_comparison([a, c])
    assert [r["profile_name"] for r in ca["runs"]] == ["synthetic", "other"]
    notes = ca["notes"]
    assert not [n for n in notes if "same run" in n]
    assert [n for n in notes if n.startswith("The runs sent different prompt classes or max_tokens")], notes
    assert "The runs ran different profiles (A synthetic, B other): the ratios compare different workloads, not " \
        "only the servers." in notes
    assert not [n for n in build_comparison([a, _run(tmp_path / "d")])["notes"] if "differen" in n]


def test_flags_are_the_catalogues(tmp_path: Path) -> None:
    """compare.json holds each run's row flags as the catalogue computes them (:func:`row_flags`, by Flag name);
    compare.md and compare.html mark a step's label with their glyphs as every report surface does and explain
    them with the catalogue's texts; the notes name each flag as the catalogue does."""
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)
    rep = write_report(b)[0].as_dict()
    rep["steps"][1].update(hidden_reasoning=3, client_starved=True)  # C=2 of run B
    rep["steps"][0].update(steady=False, low_confidence=None)  # single of run B
    (b / "report.json").write_text(json.dumps(rep))
    cmp = build_comparison([a, b])
    flags = {s["key"]: s["flags"] for s in cmp["steps"]}
    assert flags["C=2"][1] == [Flag.STARVED.name, Flag.HIDDEN_REASONING.name]
    assert flags["single"][1][0] == Flag.NOT_STEADY.name
    assert all(Flag[n] for fl in flags.values() for f in fl for n in f)  # every flag is a catalogue Flag
    md, doc = render_markdown(cmp), render_html(cmp)
    c2 = with_flags("C=2", [Flag.STARVED, Flag.HIDDEN_REASONING])
    assert c2 == f"C=2 {Flag.STARVED.glyph} {Flag.HIDDEN_REASONING.glyph}"
    assert f"| {c2} |" in md and f"## Step {c2}" in md and f"<td>{c2}</td>" in doc
    assert f"| single {Flag.NOT_STEADY.glyph}" in md
    legend = flags_legend([Flag.NOT_STEADY, Flag.STARVED, Flag.HIDDEN_REASONING])
    assert Flag.HIDDEN_REASONING.text in legend and legend in md
    for f in (Flag.NOT_STEADY, Flag.STARVED, Flag.HIDDEN_REASONING):
        assert any(n.startswith(f"{f.named}: {f.text}") for n in cmp["notes"]), f
    shown = md.split("## Definitions")[0]  # tables, legends and notes
    for old in ("not steady", "client starved", "load generator starved"):  # compare's former own strings
        assert old not in shown, old


def test_compare_json_is_the_typed_models_serialisation_and_reads_back(tmp_path: Path) -> None:
    """compare.json is :meth:`CompareReport.to_json`; the file read back validates to the same model (same text)
    and renders the same Markdown and HTML as the model built."""
    cmp = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "b", speed=2.0)])
    assert isinstance(cmp, CompareReport) and cmp.steps[0].metrics["output_tps"].ratios[0].vs == "B"
    paths = write_comparison(cmp, tmp_path / "out")
    text = paths["json"].read_text()
    again = CompareReport.model_validate(json.loads(text))
    assert again.to_json() == text == cmp.to_json()
    assert list(json.loads(text)) == ["schema", "generated_wall", "baseline", "runs", "metrics", "steps",
                                      "unmatched", "definitions", "notes"]
    assert render_markdown(json.loads(text)) == render_markdown(cmp) and render_html(again) == render_html(cmp)


def test_runs_that_disagree_beyond_their_hours_intervals_are_flagged(tmp_path: Path) -> None:
    same = build_comparison([_run(tmp_path / "a"), _run(tmp_path / "a2")])
    assert all(s["disagree"] == [] for s in same["steps"])
    assert not any("disagree" in n for n in same["notes"])
    cmp = build_comparison([_run(tmp_path / "b"), _run(tmp_path / "c", speed=2.0)])
    c2 = next(s for s in cmp["steps"] if s["key"] == "C=2")
    assert c2["disagree"] == ["B"]
    assert all(not r["within_noise"] for k in _hours_keys(cmp) for r in c2["metrics"][k]["ratios"])
    (note,) = [n for n in cmp["notes"] if "disagree beyond their intervals" in n]
    assert "C=2 (A vs B)" in note and "llmload report --pool" in note
    assert note in render_markdown(cmp)
