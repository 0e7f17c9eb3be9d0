"""The self-contained HTML report of a run (``report.html``) and its figures (``figures/*.png``).

``report.html`` is one file that fetches nothing when opened: CSS inline, no script, every figure embedded as a
base64 PNG (the same bytes as ``figures/<name>.png``). It holds a run header (profile, target, model, start time
with its UTC offset, duration, status), the Markdown report's text and tables (:func:`render_markdown`, rendered
with markdown-it, so every value is formatted exactly as in ``report.md``) and the figures of
:mod:`harness.report.charts`, placed before the formulas.

Written by :func:`harness.report.build.write_report` (so by ``llmload report`` and at the end of every run).
Without matplotlib it logs that the HTML report was skipped and writes nothing.
"""

from __future__ import annotations

import base64
import html
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markdown_it import MarkdownIt

from harness.report.fmt import wall_time
from harness.report.model import Report, as_report
from harness.report.render import render_markdown, target_url

if TYPE_CHECKING:
    from harness.report.charts import Chart
    from harness.report.columns import FrameRun

__all__ = ["FIGURES_DIR", "HTML_NAME", "render_html", "write_html"]

log = logging.getLogger("llmload")

#: File name of the HTML report and folder of the PNG figures, inside the run directory.
HTML_NAME = "report.html"
FIGURES_DIR = "figures"

_CSS = """
body { font-family: -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 1.5em auto;
       max-width: 1280px; padding: 0 1em; color: #1b1b1b; line-height: 1.45; font-size: 14px; }
h1 { font-size: 1.6em; margin-bottom: 0.3em; }
h2 { font-size: 1.3em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
h3 { font-size: 1.05em; margin: 1.2em 0 0.3em; }
table { border-collapse: collapse; font-size: 11.5px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d7de; padding: 2px 5px; text-align: right; white-space: nowrap; }
th { background: #f3f5f7; text-align: center; white-space: normal; min-width: 3em; vertical-align: bottom; }
td:first-child, th:first-child { text-align: left; }
tbody tr:nth-child(even) { background: #fafbfc; }
.scroll { overflow-x: auto; margin: 0.5em 0 1em; }
table.meta td, table.meta th { text-align: left; border: none; padding: 1px 12px 1px 0; font-size: 13px; }
table.meta th { background: none; color: #555; font-weight: normal; }
.status { font-weight: bold; padding: 1px 8px; border-radius: 4px; }
.status.ok { background: #dafbe1; color: #116329; }
.status.bad { background: #ffebe9; color: #a40e26; }
blockquote { border-left: 4px solid #d4a72c; background: #fff8c5; margin: 0.8em 0; padding: 0.4em 0.9em; }
code { background: #f3f5f7; padding: 0 3px; border-radius: 3px; font-size: 0.92em; }
figure { margin: 1em 0 1.8em; }
figure img { width: 100%; max-width: 1200px; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: 12px; margin-top: 0.2em; }
nav.toc { font-size: 12px; color: #555; }
"""


#: A number and a following " %" in rendered HTML text (the space becomes a no-break space).
_NUMBER_UNIT = re.compile(r"(\d) %")


def _nbsp(text: str) -> str:
    """``text`` (HTML) with the space in "95 %" a no-break space: a number never breaks from its unit."""
    return _NUMBER_UNIT.sub("\\1&nbsp;%", text)


def _markdown() -> MarkdownIt:
    """CommonMark + tables; raw HTML, links, images and autolinks off, so the text can add no URL or tag."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")  # wrapped prose lines join into paragraphs
    md.disable(["link", "image", "autolink"])
    return md


def _header(rep: Report) -> str:
    url = target_url(rep)
    status = rep.status or "unknown"
    good = status == "finished" and not rep.interrupted
    cls = "ok" if good else "bad"
    dur = rep.duration_s
    ts = rep.time_scale
    rows = [
        ("profile", html.escape(rep.profile_name or "?")),
        ("target", f"<code>{html.escape(url)}</code>" + (" (built-in simulator)" if rep.simulated else "")),
        ("model", f"<code>{html.escape(rep.model or '?')}</code>"),
        ("started", html.escape(wall_time(rep.start_wall))),
        ("duration", "?" if dur is None else f"{dur:.0f} s"),
        ("status", f'<span class="status {cls}">{html.escape(status)}</span>'
                   + (" interrupted: figures are partial" if rep.interrupted else "")),
    ]
    if ts != 1.0:
        rows.append(("time scale", f"{ts:g} (COMPRESSED TIME: see the real-time equivalents)"))
    notes = rep.notes
    rows.append(("notes", f"{len(notes)} (see Notes)" if notes else "none"))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="meta">{body}</table>'


def _figures(charts: Sequence[Chart]) -> str:
    parts = ["<h2>Figures</h2>"]
    if charts:
        links = " · ".join(f'<a href="#fig-{c.name}">{html.escape(c.title)}</a>' for c in charts)
        parts.append(f'<nav class="toc">{links}</nav>')
    for c in charts:
        data = base64.b64encode(c.png).decode("ascii")
        parts.append(
            f'<figure id="fig-{c.name}"><h3>{html.escape(c.title)}</h3>'
            f'<img alt="{html.escape(c.title)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_nbsp(html.escape(c.caption))} File: {FIGURES_DIR}/{c.name}.png</figcaption></figure>"
        )
    return "\n".join(parts)


def render_html(report: Report | Mapping[str, Any], charts: Sequence[Chart]) -> str:
    """The HTML report: header, the Markdown report's sections and tables, the figures before the formulas.

    Args:
        report: the typed report (:func:`harness.report.build.build_report`); a report dict (report.json's JSON)
            is validated first (:func:`harness.report.model.as_report`; ReportError when it is not a report).
        charts: the drawn figures (:func:`harness.report.charts.draw_charts`), embedded as base64 PNGs.

    Returns:
        One HTML5 document (str) with inline CSS, no script and no external reference.
    """
    rep = as_report(report)
    md_text = render_markdown(rep)
    lines = md_text.split("\n")
    if lines and lines[0].startswith("# "):  # the title and the one-line run summary: the header shows both
        lines = lines[1:]
        if len(lines) > 1 and not lines[0] and lines[1].startswith("target `"):
            end = lines.index("", 1) if "" in lines[1:] else len(lines)  # the summary may wrap over lines
            lines = lines[end:]
    text = "\n".join(lines)
    cut = text.find("\n## Formulas")
    before, after = (text, "") if cut < 0 else (text[:cut], text[cut:])
    md = _markdown()

    def block(src: str) -> str:
        out = _nbsp(md.render(src))
        return out.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")

    title = html.escape(f"Load report: {rep.run_id}")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{_CSS}</style></head>\n<body>\n"
        f"<h1>{title}</h1>\n{_header(rep)}\n{block(before)}\n{_figures(charts)}\n{block(after)}\n"
        "</body></html>\n"
    )


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_html(
    run_dir: str | os.PathLike[str],
    report: Report | Mapping[str, Any],
    run: FrameRun | None = None,
) -> Path | None:
    """Draw the figures and write ``figures/<name>.png`` and ``report.html`` into the run directory.

    Args:
        run_dir: the run directory the report was built from.
        report: its typed report (:func:`harness.report.build.build_report`; a report dict is validated first, as
            by :func:`render_html`).
        run: the run's record frame; read from ``run_dir`` (:func:`harness.report.columns.load_frame_run`) when
            None.

    Returns:
        The path of ``report.html``, or None when it was skipped: matplotlib is not installed, or drawing or
        writing failed (logged with the traceback; ``report.md`` / ``report.json`` are written before and stay
        valid, which is why this does not raise).
    """
    from harness.report.tokens import CoarseChunkBins

    root = Path(run_dir)
    try:
        from harness.report.charts import CHART_NAMES, draw_charts
    except ImportError as e:
        log.warning("HTML report skipped (matplotlib is not installed: %s); report.md and report.json "
                    "are written. Install matplotlib and run `llmload report %s` to add it.", e, root)
        return None
    try:
        if run is None:
            from harness.report.columns import load_frame_run

            run = load_frame_run(root)
        rep = as_report(report)
        try:
            charts = draw_charts(rep, run)
        except CoarseChunkBins:  # a two-pass read's bins do not fit a chart's windows: the chunk lists
            from harness.report.columns import load_frame_run

            charts = draw_charts(rep, load_frame_run(root))
        page = render_html(rep, charts)
        figs = root / FIGURES_DIR
        figs.mkdir(exist_ok=True)
        for c in charts:
            _write_atomic(figs / f"{c.name}.png", c.png)
        drawn = {c.name for c in charts}
        for name in CHART_NAMES:  # a figure of an earlier report of this directory that no longer applies
            if name not in drawn:
                (figs / f"{name}.png").unlink(missing_ok=True)
        out = root / HTML_NAME
        _write_atomic(out, page.encode("utf-8"))
    except Exception as e:  # the Markdown and JSON reports are already written; say so and go on
        log.exception("HTML report failed: %s (report.md and report.json are written)", e)
        return None
    return out
