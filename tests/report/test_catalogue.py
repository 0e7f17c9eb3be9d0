"""The catalogue of figures (:mod:`harness.report.catalogue`): every figure a surface shows has one entry, no other
module holds a catalogued header or formats a catalogued figure itself, the formats and flags, the reference page."""

from __future__ import annotations

import ast
import copy
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.report import fmt
from harness.report.build import DEFINITIONS, build_report
from harness.report.catalogue import (
    FIGURES,
    FLAG_KEYS,
    TOPICS,
    Flag,
    Format,
    Unit,
    cross_check_text,
    display,
    flags_legend,
    group_header,
    hours_text,
    interval_text,
    label_text,
    markdown_reference,
    usd_text,
    value,
    with_flags,
)
from harness.report.model import as_report
from harness.report.render import render_markdown
from harness.report.summary import render_summary
from harness.webui.routes import tab_rows
from harness.webui.view import row_view

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tests" / "data" / "demo-run"

#: Modules that render figures: none may hold a catalogued header or format a catalogued figure on its own.
SURFACES = ("harness/report/render.py", "harness/report/summary.py", "harness/report/html.py",
            "harness/webui/view.py", "harness/webui/routes.py")
#: Numeric row keys a surface shows only inside prose (footnotes), not as a figure of a table: with the reason.
PROSE_ONLY = {
    "window_start_s": "the per-step table's window cell says where the window starts (from +4.4)",
    "client_lagged_pct": "the STARVED footnote's share of late requests",
    "client_read_lag_max_s": "the STARVED footnote's largest lag",
    "mean_output_tokens_usable": "the what-if line's current mean output length of a usable sample",
    "client_processes": "the self-certification line's count of load-generating processes",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("cat") / "20261201-135255-demo"
    d.mkdir()
    for name in ("run.json", "phases.jsonl"):
        shutil.copy(DEMO / name, d / name)
    (d / "records.jsonl").write_bytes(gzip.decompress((DEMO / "records.jsonl.gz").read_bytes()))
    return json.loads(build_report(d).to_json())


def _rendered(rep: dict[str, Any]) -> str:
    """Everything the surfaces show of ``rep``'s rows (md, terminal, the view's cell texts, the tab's cells)."""
    typed = as_report(rep)
    cells = [row_view(r)["display"] for r in typed.steps]
    return "\n".join([render_markdown(typed), render_summary(typed), json.dumps(cells), json.dumps(tab_rows(typed))])


def test_every_figure_a_surface_shows_has_an_entry(report: dict[str, Any]) -> None:
    """Change one numeric key of a step row at a time: when any surface's text changes, the key is shown, and it
    must be a catalogue entry (or a prose-only key of :data:`PROSE_ONLY`). So a new figure shown anywhere without
    its entry fails here."""
    base = _rendered(report)
    row = report["steps"][1]
    shown = set()
    for key, v in row.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            continue
        rep = copy.deepcopy(report)
        rep["steps"][1][key] = v * 1.37 + 7.3 if isinstance(v, float) else v + 7
        try:
            changed = _rendered(rep) != base
        except (TypeError, ValueError, KeyError):
            changed = True
        if changed:
            shown.add(key)
    assert {"output_tps", "ttft_p50_s", "tpot_mean_s", "completed"} <= shown  # the probe sees the figures
    assert "hidden_reasoning" in shown  # its § after the step label
    missing = shown - set(FIGURES) - set(PROSE_ONLY) - set(FLAG_KEYS)  # a flag's key shows as the flag's mark
    assert not missing, f"shown on a surface without a catalogue entry: {sorted(missing)}"


def _literals(path: Path) -> list[str]:
    """The string constants of a Python module, docstrings left out (they may name a figure)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def _headers() -> set[str]:
    """The catalogued headers (full and short) of more than one word: a single word or unit (``completed``,
    ``req/s``) is prose too."""
    return {h for f in FIGURES.values() for h in (f.header, f.short_header) if " " in h}


@pytest.mark.parametrize("path", SURFACES)
def test_no_surface_holds_a_catalogued_header(path: str) -> None:
    headers = _headers()
    hits = sorted({(lit, h) for lit in _literals(ROOT / path) for h in headers if h in lit and "\n" not in lit
                   and len(lit) < 40})
    assert not hits, f"{path} writes catalogued headers itself: {hits}"


def test_the_view_script_formats_no_figure() -> None:
    """llm.js shows the server's display strings: no catalogued header in it, and no row value formatted by it."""
    js = (ROOT / "harness/webui/static/llm.js").read_text()
    literals = re.findall(r'"([^"\n]*)"|`([^`\n]*)`', js)
    texts = [a or b for a, b in literals]
    hits = sorted({h for h in _headers() for t in texts if h in t})
    assert not hits, hits
    assert not re.search(r"num\(\s*r\.", js)  # no row value through the page's own number format
    assert "r.display" in js and "shown[key]" in js  # the cells are the server's display strings


def test_formats_one_per_unit() -> None:
    f = FIGURES
    assert f["tpot_mean_s"].text(0.0108) == "10.8" and f["tpot_mean_s"].display_unit is Unit.MS
    assert f["gap_p99_s"].text(0.04567) == "45.7" and f["ttft_p50_s"].text(0.022069) == "0.0221"
    assert f["output_tps"].text(1431.4) == "1,431" and f["request_rate"].text(2.5) == "2.50"
    assert f["error_rate"].text(0.1234) == "12.3" and f["usable_share"].text(0.75) == "0.750"
    assert f["completed"].text(12345) == "12,345" and f["concurrency"].text(2048) == "2048"
    assert f["window_s"].text(11.457) == "11.5" and f["mean_output_tokens"].text(1234.6) == "1,235"
    assert all(fig.text(None) == fmt.DASH for fig in f.values() if fig.format is not Format.HOURS)
    assert f["hours"].text(None) == "∞"  # hours without an upper bound
    for fig in f.values():  # every display unit differing from the stored one has a conversion
        assert fig.scale(1.0) is not None


def test_value_reads_dict_rows_and_typed_rows() -> None:
    class Row:
        label, steady, low_confidence, tpot_mean_s = "C=2", True, "short", 0.02
        client_starved, hidden_reasoning = None, 0

    d = {"label": "C=2", "steady": True, "low_confidence": "short", "tpot_mean_s": 0.02}
    assert value(Row(), "tpot_mean_s") == value(d, "tpot_mean_s") == 0.02 and value(d, "absent") is None
    assert display(Row(), "tpot_mean_s") == display(d, "tpot_mean_s") == "20.0"
    assert label_text(Row()) == label_text(d) == "C=2 ‡"
    assert label_text({"label": "C=4", "steady": False}) == "C=4 †"
    assert label_text({"label": "C=8", "steady": True, "hidden_reasoning": 3}) == "C=8 §"
    assert label_text({"label": "C=8", "steady": False, "client_starved": True, "hidden_reasoning": 3}) == "C=8 † §"
    assert label_text({"label": "C=8", "steady": True, "client_starved": True}, extra=[Flag.STARVED]) == \
        "C=8 STARVED"


def test_every_flag_is_documented_for_the_reference_page() -> None:
    """Each flag's glyph, word and text are distinct (a mark names one flag) and the label flags are explained on
    the report-figures page."""
    assert len({f.glyph for f in Flag}) == len({f.word for f in Flag}) == len({f.text for f in Flag}) == len(Flag)
    page = markdown_reference()
    assert f"| {Flag.HIDDEN_REASONING.glyph} | hidden reasoning | {Flag.HIDDEN_REASONING.text} |" in page
    assert "A step's label carries its †, ‡, § marks on every surface" in page
    assert flags_legend([Flag.STARVED, Flag.NOT_STEADY]) == f"† NOT steady: {Flag.NOT_STEADY.text}; client STARVED: " \
        f"{Flag.STARVED.text}."


def test_flags_intervals_and_groups() -> None:
    assert with_flags("8", [Flag.NOT_STEADY, Flag.STARVED]) == "8 † STARVED"
    assert hours_text({"hours": 159.1, "hours_low": None, "hours_high": None}) == "159 h (no interval)"
    assert hours_text({"hours": 27.1, "hours_low": 25.04, "hours_high": None}) == "27.1 h (25.0–∞)"
    assert hours_text({"hours": None, "hours_low": None, "hours_high": None}) == "∞ (no usable completions)"
    assert hours_text(None) == fmt.DASH
    assert usd_text(7.8249, 7.1, None) == "$7.82 ($7.10–∞)" and usd_text(7.8249, None, None) == "$7.82 (no interval)"
    assert group_header(["ttft_p50_s", "ttft_p90_s", "ttft_p99_s"]) == "TTFT p50/p90/p99 (s)"
    assert group_header(["gap_p50_s", "gap_p99_s"]) == "inter-chunk p50/p99 (ms)"
    with pytest.raises(ValueError):
        group_header(["ttft_p50_s", "tpot_mean_s"])


def test_definitions_are_the_catalogues_topics() -> None:
    assert DEFINITIONS is TOPICS
    assert all(f.topic in TOPICS for f in FIGURES.values())
    assert FIGURES["output_tps_answer"].definition == TOPICS["output_tps_phase"]


def test_markdown_reference_lists_every_figure_and_definition() -> None:
    page = markdown_reference()
    rows = [ln for ln in page.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(FIGURES)
    for f, row in zip(FIGURES.values(), rows, strict=True):
        assert row.startswith(f"| `{f.key}` | {f.header} | {f.unit.value} | {f.display_unit.value} |")
    for topic, text in TOPICS.items():
        assert f"### {topic}\n\n{text}\n" in page
    assert all(f"| {f.glyph} | {f.word} |" in page for f in Flag)


def test_interval_and_cross_check_texts() -> None:
    """The hours interval's method (renewal-reward, batch means in real time, none) and its cross-check's verdict
    (agrees, DISAGREES, no interval with its reason, none), one text each for every surface."""
    rr = {"hours_interval": {"rel_halfwidth": 0.061, "cycles": 120, "streams": 4, "cross_check": {
        "method": "batch_means", "rel_halfwidth": 0.079, "agree": True}}}
    assert interval_text(rr) == "renewal-reward 120 req / 4 streams, ±6.1 %"
    assert cross_check_text(rr) == "batch means ±7.9 %: agrees"
    bm = {"hours_interval": {"rel_halfwidth": 0.08, "batches": 20, "batch_s": 6.0, "cross_check": {
        "method": "renewal_reward", "rel_halfwidth": 0.05, "agree": False}}}
    assert interval_text(bm, time_scale=4.0) == "batch means 20 × 1.5 s, ±8.0 %"
    assert cross_check_text(bm) == "renewal-reward ±5.0 %: DISAGREES"
    none = {"hours_interval": {"rel_halfwidth": None, "cross_check": {"method": "batch_means", "reason": "too few"}}}
    assert interval_text(none) == "none" and cross_check_text(none) == "batch means: too few"
    assert cross_check_text({"hours_interval": {"rel_halfwidth": 0.1}}) == "–" == cross_check_text({})
