"""Markdown and self-contained HTML of a comparison (:func:`harness.report.compare.build_comparison`), read from
its typed model (:class:`harness.report.compare_model.CompareReport`; a ``compare.json`` dict is validated into it).

Display units: tok/s, TTFT/TTFAT/E2E in seconds, TPOT in milliseconds, hours, US$ (3 significant digits,
:mod:`harness.report.fmt`); ratios are unitless with their
95 % interval. The HTML is one file with inline CSS and no script, image or link to anything outside it.
Both are built from the same tables (:func:`tables`), so they always show the same numbers.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.report import fmt
from harness.report.catalogue import FIGURES, Flag, flags_legend, label_flags, with_flags
from harness.report.compare_model import CompareMetric, CompareReport, CompareStep, Estimate, Ratio, compare_report
from harness.report.fmt import wall_time

__all__ = ["Cell", "Table", "render_html", "render_markdown", "tables"]

_DASH = "–"

#: Verdict -> (mark shown after a ratio, CSS class).
VERDICT_MARKS: dict[str, tuple[str, str]] = {
    "better": ("▲", "better"),
    "worse": ("▼", "worse"),
    "within noise": ("≈", "noise"),
    "no interval": ("?", "nointerval"),
    "n/a": ("", "na"),
}

LEGEND = ("▲ better beyond noise, ▼ worse beyond noise, ≈ within noise (the 95 % intervals overlap), ? no interval "
          "for this figure (no noise flag), – not available. Ratios are X/A; for tok/s higher is better, for "
          "latencies, hours and US$ lower is better.")


@dataclass(frozen=True)
class Cell:
    """One table cell: its text and a CSS class (verdict colour in HTML, ignored in Markdown)."""

    text: str
    cls: str = ""


@dataclass(frozen=True)
class Table:
    """A titled table: header texts and rows of cells."""

    title: str
    header: list[str]
    rows: list[list[Cell]]


def _fmt(v: float | None, unit: str) -> str:
    """A value (stored unit) in display unit ``unit`` as every report surface writes that unit: the format of the
    catalogue's figures shown in it (:mod:`harness.report.catalogue`; ``ms`` values are stored in seconds)."""
    if v is None:
        return _DASH
    return _BY_UNIT[unit].text(v) if unit in _BY_UNIT else fmt.sig3(v)


#: One catalogued figure per display unit the comparison shows, whose conversion and format it uses.
_BY_UNIT = {u: FIGURES[k] for u, k in (("tok/s", "output_tps"), ("s", "ttft_p50_s"), ("ms", "tpot_mean_s"),
                                       ("h", "hours"), ("US$", "usd"))}


def _interval(low: float | None, high: float | None, unit: str, unbounded_low: str = "0") -> str:
    lo = unbounded_low if low is None else _fmt(low, unit)
    hi = "∞" if high is None else _fmt(high, unit)
    return f"{lo}{_DASH}{hi}"


def _value_cell(est: Estimate | None, unit: str) -> Cell:
    if est is None:
        return Cell(_DASH, "na")
    text = _fmt(est.value, unit)
    if est.method is not None:
        text += f" ({_interval(est.low, est.high, unit)})"
    return Cell(text)


def _ratio_text(r: Ratio) -> str:
    if r.ratio is None:
        return _DASH
    return f"{r.ratio:.3f}"


def _ratio_interval(low: float | None, high: float | None) -> str:
    """A ratio's 95 % interval; an unbounded side (None) is said, not shown as 0 or ∞: ``≤ 1.234``,
    ``≥ 0.567``, ``unbounded``."""
    if low is None and high is None:
        return "unbounded"
    if low is None:
        return f"≤ {high:.3f}"
    if high is None:
        return f"≥ {low:.3f}"
    return f"{low:.3f}{_DASH}{high:.3f}"


def _ratio_cell(r: Ratio, detail: bool) -> Cell:
    mark, cls = VERDICT_MARKS.get(r.verdict, ("", ""))
    if r.ratio is None:
        return Cell(_DASH, "na")
    text = _ratio_text(r)
    if detail and r.within_noise is not None:
        text += f" ({_ratio_interval(r.low, r.high)})"
    text += f" {mark}" if mark else ""
    if detail:
        text += f" {r.verdict}"
    return Cell(text, cls)


def _with_unit(m: CompareMetric) -> str:
    """A metric's label with its display unit, unless the label already ends with it."""
    label, unit = m.label, m.unit
    words = label.split()
    return label if unit in (words[0], words[-1]) else f"{label} ({unit})"


#: The flags a compared step's label shows: the report's label flags (†, ‡, §) and STARVED, which has no column
#: here.
LABEL_EXTRA = (Flag.STARVED,)


def _step_flags(step: CompareStep) -> list[Flag]:
    """The flags any run has at ``step`` (``compare.json`` holds their :class:`Flag` names), in :class:`Flag`
    order."""
    return label_flags((Flag[name] for fl in step.flags for name in fl), LABEL_EXTRA)


def _step_label(step: CompareStep) -> str:
    """The step's key with the flags any run has there, as every report surface marks a label: ``C=8 † §``."""
    return with_flags(step.key, _step_flags(step))


def tables(comparison: CompareReport | Mapping[str, Any]) -> list[Table]:
    """The comparison's tables: the runs, one overview of ratios per compared run, one detail table per step,
    and the unmatched steps (when any)."""
    cmp = compare_report(comparison)
    runs = cmp.runs
    tags = [r.tag for r in runs]
    base = cmp.baseline
    metrics = cmp.metrics
    out: list[Table] = []

    run_rows = []
    for r in runs:
        start = wall_time(r.start_wall) if r.start_wall else "?"
        dur = f"{fmt.seconds(r.duration_s)} s" if r.duration_s is not None else "?"
        run_rows.append([Cell(r.tag), Cell(str(r.run_id)), Cell(str(r.profile_name or "?")),
                         Cell(str(r.model or "?")), Cell(str(r.target_url or "?")),
                         Cell(str(r.status or "?")), Cell(start), Cell(dur), Cell(f"{r.time_scale:g}"),
                         Cell(r.source)])
    out.append(Table("Runs", ["run", "run id", "profile", "model", "target", "status", "started", "duration",
                              "time scale", "figures from"], run_rows))

    for i, tag in enumerate(tags[1:]):
        header = ["step"] + [m.label for m in metrics]
        rows = []
        for s in cmp.steps:
            if not s.present[i + 1]:
                continue
            rows.append([Cell(_step_label(s))]
                        + [_ratio_cell(s.metrics[m.key].ratios[i], detail=False) for m in metrics])
        out.append(Table(f"{tag}/{base} per step", header, rows))

    for s in cmp.steps:
        header = ["figure"]
        for i, tag in enumerate(tags):
            header.append(tag)
            if i:
                header.append(f"{tag}/{base} (95 % interval)")
        rows = []
        for m in metrics:
            cell = s.metrics[m.key]
            row = [Cell(_with_unit(m))]
            for i, v in enumerate(cell.values):
                row.append(_value_cell(v, m.unit) if s.present[i] else Cell("not in run", "na"))
                if i:
                    row.append(_ratio_cell(cell.ratios[i - 1], detail=True))
            rows.append(row)
        conc = f" (C={s.concurrency})" if s.key == "single" else ""
        out.append(Table(f"Step {_step_label(s)}{conc}", header, rows))

    if cmp.unmatched:
        out.append(Table("Unmatched steps", ["step", "in", "missing in"],
                         [[Cell(u.key), Cell(", ".join(u.present_in)), Cell(", ".join(u.missing_in))]
                          for u in cmp.unmatched]))
    return out


def _foot(cmp: CompareReport) -> str:
    """The legend of the flags the steps' labels carry (in at least one run), from the catalogue's
    :class:`Flag` texts; empty when none."""
    flags = {f for s in cmp.steps for f in _step_flags(s)}
    return f"In at least one run: {flags_legend(flags)} See the notes." if flags else ""


def _md_table(t: Table) -> list[str]:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(esc(h) for h in t.header) + " |", "|" + "|".join("---" for _ in t.header) + "|"]
    lines += ["| " + " | ".join(esc(c.text) for c in row) + " |" for row in t.rows]
    return lines


def _title(cmp: CompareReport) -> str:
    return "Compare runs: " + " vs ".join(f"{r.tag} {r.run_id}" for r in cmp.runs)


def render_markdown(comparison: CompareReport | Mapping[str, Any]) -> str:
    """The comparison (a ``compare.json`` dict is validated) as GitHub Markdown: runs, per-run ratio overviews,
    per-step detail tables, unmatched steps, notes and definitions."""
    cmp = compare_report(comparison)
    lines = [f"# {_title(cmp)}", "", f"Baseline: run {cmp.baseline}. {LEGEND}", ""]
    for t in tables(cmp):
        lines += [f"## {t.title}", ""]
        lines += _md_table(t) if t.rows else ["No step to compare."]
        lines.append("")
        if t.title.endswith("per step") and t.rows and _foot(cmp):
            lines += [_foot(cmp), ""]
    lines += ["## Notes", ""]
    lines += [f"- {n}" for n in cmp.notes] or ["- none"]
    lines += ["", "## Definitions", ""]
    lines += [f"- **{k}**: {v}" for k, v in cmp.definitions.items()]
    lines.append("")
    return "\n".join(lines)


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; white-space: nowrap; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
td.better { background: #d9f2d9; } td.worse { background: #f8d7d7; } td.noise { background: #f3f3f3; }
td.nointerval { background: #fff8e0; } td.na { color: #999; }
p.legend, li { font-size: 0.9em; }
div.wide { overflow-x: auto; }
"""


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.header)
    body = "".join(
        "<tr>" + "".join(f'<td class="{c.cls}">{html.escape(c.text)}</td>' if c.cls else
                         f"<td>{html.escape(c.text)}</td>" for c in row) + "</tr>"
        for row in t.rows
    )
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def render_html(comparison: CompareReport | Mapping[str, Any]) -> str:
    """The comparison (a ``compare.json`` dict is validated) as one self-contained HTML page (inline CSS; no
    script, image or external reference)."""
    cmp = compare_report(comparison)
    title = html.escape(_title(cmp))
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', f"<title>{title}</title>",
        f"<style>{_CSS}</style></head><body>", f"<h1>{title}</h1>",
        f'<p class="legend">Baseline: run {html.escape(cmp.baseline)}. {html.escape(LEGEND)}</p>',
    ]
    for t in tables(cmp):
        parts.append(f"<h2>{html.escape(t.title)}</h2>")
        parts.append(_html_table(t) if t.rows else "<p>No step to compare.</p>")
        if t.title.endswith("per step") and t.rows and _foot(cmp):
            parts.append(f'<p class="legend">{html.escape(_foot(cmp))}</p>')
    parts.append("<h2>Notes</h2><ul>")
    parts += [f"<li>{html.escape(n)}</li>" for n in cmp.notes] or ["<li>none</li>"]
    parts.append("</ul><h2>Definitions</h2><ul>")
    parts += [f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in cmp.definitions.items()]
    parts.append("</ul></body></html>")
    return "\n".join(parts) + "\n"
