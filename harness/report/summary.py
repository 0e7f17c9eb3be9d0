"""The end-of-run terminal summary of a report: a few header lines, one compact row per step, short footnotes.

Printed by the Locust end of a run and by ``llmload report`` on a terminal; every line fits the terminal's width
(at most :data:`MAX_WIDTH`, 120 characters; :func:`summary_width`): when the step table is wider, the columns of
:data:`DROP_ORDER` are left out one by one (named under the table), never the step, C or the hours-to-N answer.
The full tables stay in ``report.md`` / ``report.json`` / ``report.html``; headers and numbers come from the
catalogue of figures (:mod:`harness.report.catalogue`) as in ``report.md``, so a value reads the same in both. A step
label too long for its column continues on the next lines, never cut.

Compressed time (simulator ``time_scale`` < 1): the durations, rates and hours of a row are its real-time
equivalents (:func:`harness.report.realtime.in_real_time`, the rule of report.md's "Real-time equivalents" table),
the compression stated once in the banner; counts are as measured.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from collections.abc import Mapping
from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S
from harness.report.catalogue import FIGURES, Flag, display, hours_text, label_text
from harness.report.explain import message_text
from harness.report.fmt import DASH, MAX_WIDTH, wall_time
from harness.report.model import Report, StepRow, as_report
from harness.report.realtime import drift_in_real_time, in_real_time
from harness.report.render import target_url
from harness.report.selfcert import CALIBRATION_SOURCE, selfcert_text

__all__ = ["DROP_ORDER", "MIN_WIDTH", "SUMMARY_KEYS", "render_summary", "summary_width"]

_GAP = "  "
#: Narrowest the step label column shrinks to when the table would be wider than the line.
_MIN_LABEL = 6


def _hours_cell(row: StepRow) -> str:
    return hours_text(row.hours[0]) if row.hours else DASH


#: The figures of a step's line, in order (catalogue keys; headers and formats from the catalogue).
SUMMARY_KEYS = ("concurrency", "completed", "errors", "output_tps", "per_stream_tps", "ttft_p50_s", "ttfat_p50_s",
                "tpot_mean_s", "e2e_p50_s", "truncated_pct")
#: The columns left out, in this order, while the table is wider than the line (all in report.md).
DROP_ORDER = ("per_stream_tps", "e2e_p50_s", "truncated_pct", "tpot_mean_s", "completed", "ttfat_p50_s")
#: The narrowest width the summary is laid out for (a narrower terminal wraps its lines).
MIN_WIDTH = 80


def summary_width() -> int:
    """The summary's line width: the terminal's columns (``COLUMNS``, else the size of the terminal stdout, stderr
    or stdin is on, else 120), clamped to [:data:`MIN_WIDTH`, :data:`MAX_WIDTH`]."""
    cols = shutil.get_terminal_size((0, 0)).columns  # COLUMNS, else stdout's terminal
    for fd in (2, 0):  # stdout piped (| tee): the terminal stderr or stdin is on
        if cols:
            break
        try:
            cols = os.get_terminal_size(fd).columns
        except OSError:
            cols = 0
    return max(MIN_WIDTH, min(MAX_WIDTH, cols or MAX_WIDTH))


def _columns(rep: Report, keys: tuple[str, ...]) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """Two-line headers and the cells of each step row (strings, unpadded), figures ``keys``."""
    ns = rep.hours_to_n
    first_n = f"N={ns[0]:,} (95 %)" if ns else "N"
    real = (rep.time_scale or 1.0) != 1.0
    hours_head = (FIGURES["hours"].short[0] + (" (real time)" if real else ""), first_n)
    header = [("", "step"), *(FIGURES[k].short for k in keys), hours_head]
    shown = [in_real_time(r, rep.time_scale or 1.0) for r in rep.steps]
    rows = [[label_text(r), *(display(r, k) for k in keys), _hours_cell(r)] for r in shown]
    return header, rows


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _label_lines(label: str, width: int) -> list[str]:
    """``label`` in lines of at most ``width`` characters, broken after spaces, commas and ``(`` (a sweep setting
    such as ``C=2 (thinking=on,effort=low,max_tokens=512)`` breaks between its axes, never inside a name); a
    single piece longer than ``width`` is cut into pieces. The whole label stays readable, so two settings never
    read the same."""
    lines: list[str] = []
    cur = ""
    for piece in re.findall(r"[^ ,(]*[ ,(]|[^ ,(]+$", label):
        if cur and len(cur + piece.rstrip()) > width:
            lines.append(cur.rstrip())
            cur = ""
        while len(piece.rstrip()) > width:
            lines.append(piece[:width])
            piece = piece[width:]
        cur += piece
    if cur.strip() or not lines:
        lines.append(cur.rstrip())
    return lines


def _table(rep: Report, width: int) -> list[str]:
    keys: tuple[str, ...] = SUMMARY_KEYS
    dropped: list[str] = []
    while True:
        header, rows = _columns(rep, keys)
        # the label column may shrink to _MIN_LABEL (a long label goes on its own lines): only the rest must fit
        widths = [max(len(h[0]), len(h[1]), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
        need = min(widths[0], _MIN_LABEL) + sum(widths[1:]) + len(_GAP) * (len(widths) - 1)
        rest = [k for k in DROP_ORDER if k in keys]
        if need <= width or not rest:
            break
        keys = tuple(k for k in keys if k != rest[0])
        dropped.append(rest[0])
    excess = sum(widths) + len(_GAP) * (len(widths) - 1) - width
    if excess > 0:  # long step labels go on a line of their own (below), never cut, nor the figures
        widths[0] = max(_MIN_LABEL, widths[0] - excess)
    left = {0, len(header) - 1}  # the label and the hours cell read left-aligned, the figures right-aligned

    def line(cells: list[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        parts = [_fit(c, w).ljust(w) if i in left else c.rjust(w) for i, (c, w) in pairs]
        return _fit(_GAP.join(parts).rstrip(), width)

    out = [line([h[0] for h in header]), line([h[1] for h in header])]
    out.append(_fit(_GAP.join("-" * w for w in widths), width))
    for r in rows:
        if len(r[0]) <= widths[0]:
            out.append(line(r))
        else:  # a label wider than its column: whole, on its own line(s), then the figures on the next line
            out += _label_lines(r[0], width)
            out.append(line(["", *r[1:]]))
    if dropped:
        out += _wrap(f"(Left out at {width} columns, in report.md: "
                     + ", ".join(FIGURES[k].label for k in dropped) + ".)", width)
    return out


def _footnotes(rep: Report) -> list[str]:
    notes: list[str] = []
    steps = rep.steps
    for r in steps:
        if not r.steady:
            notes.append(f"† {r.label}: NOT steady, {r.not_steady_reason}; burst figures over the whole step.")
    for r in steps:
        if r.low_confidence:
            fix = r.low_confidence_fix or "lengthen steps.duration"
            notes.append(f"‡ {r.label}: low confidence, {r.low_confidence}; {fix}.")
    notes += [n for n in rep.notes if n.startswith(f"{Flag.HIDDEN_REASONING.glyph} ")]  # its § labels
    notes += [n for n in rep.notes if n.startswith("steps.until: ")]
    hour = "real hour" if rep.time_scale != 1.0 else "hour"
    for r in steps:  # the Soak section's flagged drifts; per real hour in a compressed run, as the table above
        d = drift_in_real_time(r.drift, rep.time_scale)
        flagged = [f.text for f in (d.output_tps, d.ttft_p50_s, d.error_rate) if f is not None and f.flagged]
        if flagged:  # each fit's text names its figure ("tok/s fell 19.1 %/h (95 % ...)")
            notes.append(f"DRIFT at {r.label} (per {hour}, over its steady window): {'; '.join(flagged)}.")
    for r in steps:
        if r.client_starved:
            notes.append(f"Client STARVED at {r.label}: {r.client_lagged_pct or 0:.0f} % of requests read > "
                         f"{CLIENT_LAG_LIMIT_S:g} s late: figures are the load generator's limit.")
    for r in steps:
        step_errors = r.step_errors_by_class or r.errors_by_class
        if step_errors:
            classes = ", ".join(f"{k} ×{v}" for k, v in step_errors.items())
            notes.append(f"Errors at {r.label}: {classes} (requests started in the step).")
            for c in (c for c in r.failures if c.messages):
                notes.append(f"  {c.error_class} ×{c.count}, top messages:")
                notes += [f"    {message_text(m)}" for m in c.messages]
    return notes


def _wrap(text: str, width: int) -> list[str]:
    """``text`` wrapped at ``width``; continuation lines indented 2 more than the text's own leading spaces."""
    indent = " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(text, width, subsequent_indent=indent + "  ", break_long_words=False,
                         break_on_hyphens=False)


def render_summary(report: Report | Mapping[str, Any], where: str | None = None, width: int | None = None) -> str:
    """The compact plain-text summary of ``report`` (:func:`harness.report.build.build_report`) for a terminal.

    Args:
        report: the typed report; a report dict (report.json's JSON) is validated first
            (:func:`harness.report.model.as_report`, which raises ReportError when it is not a report).
        where: the run directory, named in the closing line that points to the full report (None: not named).
        width: widest line in characters (None: :func:`summary_width`, the terminal's, at most 120); only a single
            word longer than that (a long URL) can exceed it.

    Returns:
        Lines joined with ``\\n``, ending with one: run and target header, banners (interrupted, compressed time),
        one row per step (label with †/‡, C, completed, errors, output and per-stream tok/s, TTFT/TTFAT/E2E p50
        in s, TPOT mean in ms, % truncated, hours to the first N with its 95 % interval), the self-certification
        line of each step (:func:`harness.report.selfcert.selfcert_text`; the calibration's provenance once, in its
        heading), footnotes, units.
    """
    rep = as_report(report)
    width = summary_width() if width is None else width
    head = [f"llmload report {rep.run_id}", f"status {rep.status}"]
    if rep.duration_s is not None:
        head.append(f"started {wall_time(rep.start_wall)}, {rep.duration_s:.0f} s")
    meta = [f"target {target_url(rep)}", f"model {rep.model or '?'}"]
    if rep.profile_name:
        meta.append(f"profile {rep.profile_name}")
    lines = _wrap(" · ".join(head), width) + _wrap(" · ".join(meta), width)
    if rep.interrupted:
        lines += _wrap("! Interrupted run: figures are partial (see the notes in report.md).", width)
    for note in rep.input_notes:  # the run directory's state: it changes what every figure below means
        lines += _wrap(f"! {note}", width)
    ts = rep.time_scale
    if ts != 1.0:
        lines += _wrap(f"! COMPRESSED TIME (simulator time_scale = {ts:g}): tok/s, latencies and hours below are "
                       f"real-time equivalents (durations ÷ {ts:g}, rates × {ts:g}), as report.md's real-time "
                       "table; counts as measured.", width)
    lines.append("")
    if rep.steps:
        lines += _table(rep, width)
        lines.append("")
        source = (f"; error bounds {CALIBRATION_SOURCE}" if any(r.client_selfcert == "certified" for r in rep.steps)
                  else "")
        lines += _wrap(f"Self-certification (the client's own overhead and error bound, per step{source}):", width)
        for r in rep.steps:
            lines += _wrap(f"  {r.label}: {selfcert_text(r, with_source=False)}", width)
    else:
        lines.append("No steps recorded.")
    foot = _footnotes(rep)
    if foot:
        lines.append("")
        for note in foot:
            lines += _wrap(note, width)
    lines.append("")
    n_notes = len(rep.notes)
    where_md = f"{where}/report.md (also report.json, report.html)" if where else "report.md / .json / .html"
    units = (f"Hours to N: usable samples per hour in the steady window, with the 95 % prediction interval "
             f"(renewal-reward over the request cycles). Every table (every N, the token-based cross-check), "
             f"the formulas and {n_notes} note{'' if n_notes == 1 else 's'}: {where_md}.")
    lines += _wrap(units, width)
    return "\n".join(lines) + "\n"
