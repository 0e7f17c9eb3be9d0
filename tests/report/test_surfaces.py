"""One run on every surface: each figure and flag reads the same on the terminal summary, report.md, report.html,
report.json, the web LLM view's JSON and Locust's LLM tab.

The expected text of every figure is derived from ``report.json``'s raw value and the figure's catalogue entry
(:mod:`harness.report.catalogue`: display unit and format), never written here; each surface is parsed on its own
(Markdown tables, HTML cells, the terminal's fixed-width columns, the view's ``display``, the tab's cells).
"""

from __future__ import annotations

import copy
import gzip
import html as html_mod
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.report import fmt
from harness.report.axes import setting_rows
from harness.report.build import build_report
from harness.report.catalogue import (
    FIGURES,
    LABEL_FLAGS,
    Flag,
    display,
    group_header,
    hours_header,
    hours_text,
    label_text,
    row_flags,
    with_flags,
)
from harness.report.diagnosis import hidden_reasoning_notes
from harness.report.html import render_html
from harness.report.model import StepRow, as_report
from harness.report.realtime import in_real_time
from harness.report.render import STEP_COLUMNS, render_markdown
from harness.report.summary import SUMMARY_KEYS, render_summary
from harness.webui.cache import Entry
from harness.webui.routes import TAB_KEYS, tab_rows
from harness.webui.runs import RunDirs
from harness.webui.view import TABLE_KEYS, payload

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-run"

#: The surfaces that show a compressed-time run in real-time equivalents (:mod:`harness.report.realtime`).
REAL_TIME = ("terminal", "web", "tab")
#: Figures every surface that has a per-step table shows (terminal, md, html, web, tab): the headline ones.
HEADLINE = ("concurrency", "completed", "errors", "output_tps", "ttft_p50_s", "truncated_pct")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("surfaces") / "20261201-135255-demo"
    d.mkdir()
    for name in ("run.json", "phases.jsonl"):
        shutil.copy(DEMO / name, d / name)
    (d / "records.jsonl").write_bytes(gzip.decompress((DEMO / "records.jsonl.gz").read_bytes()))
    return d


@pytest.fixture(scope="module")
def report(run_dir: Path) -> dict[str, Any]:
    return json.loads(build_report(run_dir).to_json())  # as report.json holds it


def _flagged(rep: dict[str, Any]) -> dict[str, Any]:
    """The demo report with every flag present: a NOT steady step, a STARVED step, a low-confidence step with hidden
    reasoning (and the report's note on it), hours with an interval, hours without usable completions, compressed
    time."""
    rep = copy.deepcopy(rep)
    s = rep["steps"]
    s[1].update(steady=False, not_steady_reason="the first wave ended after the step", low_confidence=None)
    s[2].update(client_starved=True, client_lagged_pct=55.0, client_read_lag_max_s=2.5)
    s[2]["hours"][0].update(hours_low=11.04, hours_high=15.93)
    s[3]["hours"][0].update(hours_low=7.5, hours_high=None)
    s[4]["hours"][0].update(hours=None, hours_low=None, hours_high=None)
    s[3].update(hidden_reasoning=20, hidden_reasoning_share=20 / s[3]["completed"])
    rep["notes"] += hidden_reasoning_notes([StepRow.model_validate(s[3])], Flag.HIDDEN_REASONING.glyph)
    rep["time_scale"] = 10.0
    return rep


def _md_tables(md: str, section: str) -> list[list[dict[str, str]]]:
    """The tables of Markdown section ``## section`` as rows of {header: cell}."""
    body = md.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    tables, cur = [], []
    for ln in [*body.splitlines(), ""]:
        if ln.startswith("|"):
            cur.append([c.strip().replace("\\|", "|") for c in ln.strip("|").split(" | ")])
        elif cur:
            tables.append([dict(zip(cur[0], r, strict=True)) for r in cur[2:]])
            cur = []
    return tables


def _html_rows(doc: str) -> list[list[str]]:
    """Every table row of an HTML document as its cells' text."""
    rows = []
    for tr in re.findall(r"<tr>(.*?)</tr>", doc, flags=re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, flags=re.S)
        rows.append([html_mod.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def _term_rows(text: str) -> list[list[str]]:
    """The terminal summary's step rows, cells split on the column gap (2+ spaces)."""
    lines = text.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    out = []
    for ln in lines[rule + 1 :]:
        if not ln.strip():
            break
        out.append(re.split(r" {2,}", ln.strip()))
    return out


def _surfaces(rep: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    entry = Entry(report=as_report(rep))  # the view's cache holds the typed report (report.json validated)
    web = json.loads(json.dumps(payload(RunDirs(None, (run_dir,), "finished"), entry, run_dir, [], "/llm")))
    return {"md": render_markdown(rep), "html": render_html(rep, []), "terminal": render_summary(rep),
            "web": web, "tab": tab_rows(entry.report)}


def _shown(rep: dict[str, Any], s: dict[str, Any]) -> dict[str, dict[str, dict[str, str]]]:
    """{surface: {step label as shown: {figure key: text shown}}} for the per-step tables of every surface."""
    out: dict[str, dict[str, dict[str, str]]] = {}
    md_rows = _md_tables(s["md"], "Per step")[0]
    html_all = _html_rows(s["html"])
    head = ["step", *(group_header(c) for c in STEP_COLUMNS), FIGURES["window_s"].header]
    html_head = html_all.index(head)
    n = len(rep["steps"])
    html_rows = html_all[html_head + 1 : html_head + 1 + n]
    for name, rows in (("md", [list(r.values()) for r in md_rows]), ("html", html_rows)):
        got: dict[str, dict[str, str]] = {}
        for cells in rows:
            assert len(cells) == len(head)
            figs: dict[str, str] = {}
            for cols, cell in zip(STEP_COLUMNS, cells[1:], strict=False):
                figs.update(zip(cols, cell.split(" / "), strict=True))
            got[cells[0]] = figs
        out[name] = got
    term = _term_rows(s["terminal"])
    out["terminal"] = {c[0]: dict(zip(SUMMARY_KEYS, c[1:], strict=False)) for c in term}
    out["web"] = {r["display"]["label"]: {k: r["display"][k] for k in TABLE_KEYS} for r in s["web"]["steps"]}
    out["tab"] = {r["label"]: {k: r[k] for k in TAB_KEYS} for r in s["tab"][:-1]}
    return out


@pytest.mark.parametrize("flagged", [False, True], ids=["demo", "every-flag"])
def test_every_figure_reads_the_same_on_every_surface(report: dict[str, Any], run_dir: Path, flagged: bool) -> None:
    rep = _flagged(report) if flagged else report
    s = _surfaces(rep, run_dir)
    shown = _shown(rep, s)
    labels = [label_text(r) for r in rep["steps"]]
    checked: dict[str, set[str]] = {name: set() for name in shown}
    ts = float(rep.get("time_scale") or 1.0)
    for name, rows in shown.items():
        assert list(rows) == labels, (name, list(rows))  # every step, its label with its † / ‡ marks
        for r in rep["steps"]:
            # the terminal and the web view show a compressed-time run in real-time equivalents (one rule,
            # harness.report.realtime); report.md / html and the tab show the measured row (md adds its real-time table)
            shown_row = in_real_time(StepRow.model_validate(r), ts).model_dump() if name in REAL_TIME else r
            for key, text in rows[label_text(r)].items():
                want = FIGURES[key].text(shown_row[key])  # report.json's value in the catalogue's display format
                assert text == want, (name, r["label"], key, text, want)
                checked[name].add(key)
    for name in shown:
        assert set(HEADLINE) <= checked[name], (name, set(HEADLINE) - checked[name])
    assert {"tpot_mean_s", "per_stream_tps", "ttfat_p50_s", "e2e_p50_s"} <= checked["terminal"] & checked["md"] \
        & checked["web"]  # TPOT in ms on all three (the view used to print seconds)
    assert len(checked["web"]) >= 20 and len(checked["md"]) >= 15


@pytest.mark.parametrize("flagged", [False, True], ids=["demo", "every-flag"])
def test_hours_to_n_reads_the_same_on_every_surface(report: dict[str, Any], run_dir: Path, flagged: bool) -> None:
    rep = _flagged(report) if flagged else report
    s = _surfaces(rep, run_dir)
    n = rep["hours_to_n"][0]
    md_hours = next(t for t in _md_tables(s["md"], "Hours to N usable samples") if f"N={n:,}" in t[0])
    html_rows = _html_rows(s["html"])
    term = {c[0]: c for c in _term_rows(s["terminal"])}
    web = {r["display"]["label"]: r["display"] for r in s["web"]["steps"]}
    tab = {r["label"]: r["hours"] for r in s["tab"][:-1]}
    assert any(c["header"] == hours_header(n) for c in s["web"]["columns"])
    ts = float(rep.get("time_scale") or 1.0)
    for r, md_row in zip(rep["steps"], md_hours, strict=True):
        want, label = hours_text(r["hours"][0]), label_text(r)
        real = hours_text(in_real_time(StepRow.model_validate(r), ts).hours[0])  # terminal and web view
        assert md_row["step"] == label and md_row[f"N={n:,}"] == want
        assert any(row[0] == label and want in row for row in html_rows)
        assert term[label][-1] == real
        assert web[label][f"hours_{n}"] == real
        assert tab[label] == f"N={n:,}: {real}"  # the LLM tab: real-time equivalents too
    if flagged:  # every kind of interval, written one way
        texts = [hours_text(r["hours"][0]) for r in rep["steps"]]
        assert f"({Flag.NO_INTERVAL.glyph})" in texts[0] and texts[2].endswith("(11.0–15.9)")
        assert texts[3].endswith("(7.50–∞)") and texts[4] == f"∞ ({Flag.NO_USABLE.glyph})"
    hours_cells = [w for r in s["web"]["steps"] for k, w in r["display"].items() if k.startswith("hours_")]
    assert len(hours_cells) == len(rep["steps"]) * len(rep["hours_to_n"])
    assert not any("[" in w for w in hours_cells)  # not the view's old "159 [––∞]"


def test_flags_read_the_same_on_every_surface(report: dict[str, Any], run_dir: Path) -> None:
    rep = _flagged(report)
    s = _surfaces(rep, run_dir)
    steady, starved = rep["steps"][1], rep["steps"][2]
    dagger = f"{steady['label']} {Flag.NOT_STEADY.glyph}"
    assert label_text(steady) == dagger and any(label_text(r).endswith(Flag.LOW_CONFIDENCE.glyph)
                                                for r in rep["steps"])
    html_cells = [c for row in _html_rows(s["html"]) for c in row]
    for name, labels in (("md", [r["step"] for r in _md_tables(s["md"], "Per step")[0]]),
                         ("html", html_cells),
                         ("terminal", [c[0] for c in _term_rows(s["terminal"])]),
                         ("web", [r["display"]["label"] for r in s["web"]["steps"]]),
                         ("tab", [r["label"] for r in s["tab"]])):
        assert dagger in labels, name
        for r in rep["steps"]:
            if r.get("low_confidence") and r["steady"]:
                assert label_text(r).startswith(f"{r['label']} {Flag.LOW_CONFIDENCE.glyph}"), r["label"]
                assert label_text(r) in labels, (name, r["label"])
    # STARVED and compressed time: the same word on every surface that shows them
    glyph = Flag.STARVED.glyph
    assert f"Client {glyph} at {starved['label']}" in s["md"] and f"Client {glyph} at {starved['label']}" in \
        s["terminal"] and f"Client {glyph} at {html_mod.escape(starved['label'])}" in s["html"]
    assert [r["display"]["client_starved"] for r in s["web"]["steps"]][2] == glyph
    for name in ("md", "terminal", "html"):
        assert Flag.COMPRESSED_TIME.glyph in s[name], name
    assert any(Flag.COMPRESSED_TIME.glyph in b for b in s["web"]["banners"])
    assert not any(Flag.COMPRESSED_TIME.glyph in b for b in _surfaces(report, run_dir)["web"]["banners"])


def test_hidden_reasoning_reads_the_same_on_every_surface(report: dict[str, Any], run_dir: Path) -> None:
    """A step with hidden reasoning carries the flag's glyph after its label (after its ‡) on every surface, and
    every surface that shows the report's notes explains it with the same glyph; a step without it carries none."""
    assert Flag.HIDDEN_REASONING in LABEL_FLAGS and Flag.HIDDEN_REASONING.glyph not in report["steps"][3]["label"]
    rep = _flagged(report)
    s = _surfaces(rep, run_dir)
    hidden = rep["steps"][3]
    glyph = Flag.HIDDEN_REASONING.glyph
    want = f"{hidden['label']} {Flag.LOW_CONFIDENCE.glyph} {glyph}"
    assert label_text(hidden) == want and label_text(report["steps"][3]) == f"{hidden['label']} " \
        f"{Flag.LOW_CONFIDENCE.glyph}"
    html_rows = _html_rows(s["html"])
    shown = {"md": [r["step"] for r in _md_tables(s["md"], "Per step")[0]],
             "html": [row[0] for row in html_rows if row],
             "terminal": [c[0] for c in _term_rows(s["terminal"])],
             "web": [r["display"]["label"] for r in s["web"]["steps"]],
             "tab": [r["label"] for r in s["tab"]]}
    for name, labels in shown.items():
        assert want in labels, (name, labels)
        assert {lb for lb in labels if glyph in lb} == {want}, name  # only the step that has it (every table)
    hours = next(t for t in _md_tables(s["md"], "Hours to N usable samples"))
    assert [r["step"] for r in hours if glyph in r["step"]] == [want]
    note = next(n for n in rep["notes"] if "HIDDEN REASONING" in n)
    assert note.startswith(f"{glyph} HIDDEN REASONING") and f"{hidden['label']} 20 of" in note
    web_notes = json.dumps(s["web"], ensure_ascii=False)
    for name, text in (("md", s["md"]), ("terminal", s["terminal"]), ("html", html_mod.unescape(s["html"])),
                       ("web", web_notes)):
        assert f"{glyph} HIDDEN REASONING" in text, name


def test_report_json_keeps_raw_numbers_and_carries_the_catalogue(report: dict[str, Any]) -> None:
    """report.json: every catalogued figure of a row is the raw number in its unit (never a display string), and
    the catalogue's unit and format of each figure ride along under ``figures``."""
    cat = report["figures"]
    assert set(cat) == set(FIGURES)
    for key, f in FIGURES.items():
        assert cat[key]["unit"] == f.unit.value and cat[key]["display_unit"] == f.display_unit.value
        assert cat[key]["header"] == f.header and cat[key]["topic"] in report["definitions"]
    for r in report["steps"]:
        for key in (k for k in FIGURES if k in r):
            v = r[key]
            if key == "hours":  # the entries of hours to each N: their hours are raw numbers too
                v = [h["hours"] for h in v]
            assert all(x is None or isinstance(x, int | float) for x in (v if isinstance(v, list) else [v])), key
    tpot = report["steps"][1]["tpot_mean_s"]
    assert 0.001 < tpot < 1.0  # seconds in report.json; every surface shows ms
    assert FIGURES["tpot_mean_s"].text(tpot) == fmt.sig3(tpot * 1000.0)


def test_settings_rows_carry_the_step_flags(report: dict[str, Any]) -> None:
    """The sweep-axes table marks each setting row's C with its step row's flags (§ hidden reasoning included), as
    the per-step table marks the label."""
    rep = _flagged(report)
    for r in rep["steps"]:
        r["setting"] = "thinking=on"
    rep["settings"] = setting_rows(rep["steps"])
    rows = _md_tables(render_markdown(rep), "Settings (sweep axes)")[0]
    steps = [r for r in rep["steps"] if r["phase"] == "step"]
    assert len(rows) == len(steps) >= 4
    for row, step in zip(rows, steps, strict=True):
        assert row[FIGURES["concurrency"].header] == with_flags(display(step, "concurrency"), row_flags(step))
    hidden = next(row for row, step in zip(rows, steps, strict=True) if step["hidden_reasoning"])
    assert hidden[FIGURES["concurrency"].header].endswith(f" {Flag.HIDDEN_REASONING.glyph}")


def test_chart_points_carry_the_catalogues_marks(report: dict[str, Any]) -> None:
    """report.html's charts mark a point with its row's flags by their catalogue glyphs (§ hidden reasoning, STARVED;
    not the charts' former own ``*``), and the caption explains each."""
    from harness.report import charts
    from harness.report.model import Report

    rows = Report.model_validate(_flagged(report)).steps
    marks: list[str] = []

    class Ax:
        def annotate(self, text: str, *args: Any, **kwargs: Any) -> None:
            marks.append(text)

    for r in rows:
        before = len(marks)
        charts._flag(Ax(), 1.0, 1.0, r)  # type: ignore[arg-type]
        got = marks[before:]
        want = [f.glyph for f in row_flags(r) if f in LABEL_FLAGS or f is Flag.STARVED]
        assert got == ([" ".join(want)] if want else []), (r.label, got)
    assert f"{Flag.LOW_CONFIDENCE.glyph} {Flag.HIDDEN_REASONING.glyph}" in marks and Flag.STARVED.glyph in marks
    assert "*" not in "".join(marks)
    for f in (*LABEL_FLAGS, Flag.STARVED):
        assert f.named in charts._MARKS, f
