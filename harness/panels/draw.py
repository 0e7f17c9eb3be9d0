"""A row's image: its panels placed by ``gridPos`` (24 columns), each framed and drawn by type, under the row's
title and above the caption."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

from harness.panels.annotations import Annotation
from harness.panels.canvas import Canvas, draw_message
from harness.panels.results import PanelResult
from harness.panels.rows import Section
from harness.panels.series import Series
from harness.panels.stat import draw_stat
from harness.panels.theme import BG, NAMED_COLOURS, TEXT, TEXT_DIM
from harness.panels.timeseries import draw_timeseries

#: Figure width (inches) of one row image, and the height (inches) of one gridPos unit; 100 dpi by default.
FIG_W = 16.0
UNIT_H = 0.38
_GAP = 0.08  # inches between panels
_MARGIN = 0.15  # inches left and right of the grid
_HEADER_H = 0.5


def _panel_frame(cv: Canvas, panel: dict[str, Any], x: float, top: float, w: float, h: float) -> None:
    cv.box(x, top, w, h)
    title = str(panel.get("title") or "")
    t = cv.text(x + 0.1, top + 0.09, title, fontsize=9.5, fontweight="bold", va="top")
    if cv.width_of(t) > w - 0.2:  # shorten a title wider than its panel
        while len(title) > 4 and cv.width_of(t) > w - 0.2:
            title = title[:-2]
            t.set_text(title + "…")


def _draw_panel(
    cv: Canvas,
    panel: dict[str, Any],
    series: list[Series],
    errors: list[str],
    box: tuple[float, float, float, float],
    rng: tuple[float, float],
    annotations: list[Annotation],
    step: float,
) -> None:
    x, top, w, h = box
    _panel_frame(cv, panel, x, top, w, h)
    kind = panel.get("type")
    if errors and not any(s.finite() for s in series):
        draw_message(cv, x, top + 0.3, w, h - 0.3, "Query error: " + errors[0], NAMED_COLOURS["red"])
    elif kind in ("timeseries", "graph"):
        draw_timeseries(cv, panel, series, box, rng, annotations, step)
    elif kind in ("stat", "gauge", "bargauge"):
        draw_stat(cv, panel, series, box)
    elif kind == "text":
        content = str((panel.get("options") or {}).get("content") or panel.get("content") or "")
        draw_message(cv, x, top + 0.3, w, h - 0.3, re.sub(r"[#*_`>]", "", content), TEXT)
    else:
        draw_message(cv, x, top + 0.3, w, h - 0.3, f"panel type {kind!r}: not rendered by harness/panels")


def draw_section(
    path: Path,
    section: Section,
    data: list[tuple[dict[str, Any], list[Series], list[str], PanelResult]],
    rng: tuple[float, float],
    annotations: list[Annotation],
    step: float,
    caption: str,
    dpi: int,
    width: float,
) -> None:
    """Draw one row image to ``path``: the row's title, each panel of ``data`` (panel, its series, its query
    errors, its result) at its ``gridPos``, and ``caption`` under them; ``width`` in inches."""
    grid = [p.get("gridPos") or {"x": 0, "y": 0, "w": 12, "h": 8} for p, *_ in data]
    y0 = min(int(g.get("y", 0)) for g in grid)
    rows_h = max(int(g.get("y", 0)) + int(g.get("h", 8)) for g in grid) - y0
    col_w = (width - 2 * _MARGIN) / 24
    cap_lines = textwrap.wrap(caption, int(width * 15.5))
    footer_h = 0.12 + 0.17 * len(cap_lines)
    height = _HEADER_H + rows_h * UNIT_H + footer_h
    cv = Canvas(width, height, dpi)
    cv.text(_MARGIN + 0.02, 0.3, section.title, fontsize=13, fontweight="bold", va="center", color="#d8d9da")
    for (panel, series, errors, _), g in zip(data, grid, strict=True):
        box = (
            _MARGIN + int(g.get("x", 0)) * col_w + _GAP / 2,
            _HEADER_H + (int(g.get("y", 0)) - y0) * UNIT_H + _GAP / 2,
            int(g.get("w", 12)) * col_w - _GAP,
            int(g.get("h", 8)) * UNIT_H - _GAP,
        )
        _draw_panel(cv, panel, series, errors, box, rng, annotations, step)
    cv.text(_MARGIN + 0.02, height - footer_h + 0.08, "\n".join(cap_lines), fontsize=8, va="top",
            color=TEXT_DIM, linespacing=1.35)  # fmt: skip
    cv.fig.savefig(path, dpi=dpi, facecolor=BG, metadata={"Software": "llmload panels, harness/panels (matplotlib)"})
