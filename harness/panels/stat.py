"""``stat`` (also ``gauge``, ``bargauge``) panels: one cell per series with its reduced value in big text, its name
and, with ``graphMode: area``, a sparkline."""

from __future__ import annotations

import math
from typing import Any

from harness.panels.canvas import Canvas, draw_message
from harness.panels.series import Series
from harness.panels.theme import NAMED_COLOURS, TEXT_DIM
from harness.panels.units import format_value


def _reduce(points: list[tuple[float, float]], calc: str) -> float:
    vals = [v for _, v in points]
    if not vals:
        return math.nan
    if calc in ("last", "lastNotNull"):
        return vals[-1]
    if calc in ("first", "firstNotNull"):
        return vals[0]
    if calc == "mean":
        return sum(vals) / len(vals)
    if calc == "min":
        return min(vals)
    if calc == "max":
        return max(vals)
    if calc == "sum":
        return sum(vals)
    if calc == "count":
        return float(len(vals))
    return vals[-1]


def draw_stat(cv: Canvas, panel: dict[str, Any], series: list[Series], box: tuple[float, float, float, float]) -> None:
    """Draw a stat panel's cells in ``box`` (x, top, width, height in inches): one per series with a finite value,
    reduced by the panel's first ``reduceOptions.calcs``."""
    x, top, w, h = box
    defaults = (panel.get("fieldConfig") or {}).get("defaults") or {}
    unit, decimals = defaults.get("unit"), defaults.get("decimals")
    opts = panel.get("options") or {}
    calcs = (opts.get("reduceOptions") or {}).get("calcs") or ["lastNotNull"]
    text_mode = opts.get("textMode", "auto")
    cells = [(s, _reduce(s.finite(), str(calcs[0]))) for s in series if s.finite()]
    if not cells:
        draw_message(cv, x, top + 0.3, w, h - 0.3, "No data")
        return
    show_name = text_mode in ("value_and_name", "name") or (text_mode == "auto" and len(cells) > 1)
    area = (x + 0.1, top + 0.36, w - 0.2, h - 0.44)
    n = len(cells)
    best = (0.0, 1)
    for cols in range(1, n + 1):
        rows = math.ceil(n / cols)
        cw, ch = area[2] / cols, area[3] / rows
        score = min(cw / 2.2, ch)
        if score > best[0]:
            best = (score, cols)
    cols = best[1]
    rows = math.ceil(n / cols)
    cw, ch = area[2] / cols, area[3] / rows
    spark = opts.get("graphMode", "none") == "area"
    colour = NAMED_COLOURS["green"]
    texts = [format_value(v, unit, decimals if isinstance(decimals, int) else None) for _, v in cells]
    longest = max(len(t) for t in texts)
    name_fs = max(6.0, min(9.0, ch * 72 * 0.2))
    value_fs = max(8.0, min(30.0, ch * 72 * (0.42 if show_name else 0.6), cw * 72 / (0.62 * longest + 0.5)))
    probes = [cv.text(0, 0, t, fontsize=value_fs, fontweight="bold") for t in texts]
    widest = max(cv.width_of(p) for p in probes)
    for p in probes:
        p.remove()
    value_fs = max(7.0, min(value_fs, value_fs * cw * 0.88 / widest))  # one size for all, fitting every cell
    for i, ((s, _), vt) in enumerate(zip(cells, texts, strict=True)):
        r, c = divmod(i, cols)
        cx, cy = area[0] + c * cw, area[1] + r * ch
        if spark:
            pts = s.finite()
            ax = cv.fig.add_axes(cv.rect(cx + 0.04, cy + ch * 0.55, cw - 0.08, ch * 0.42))
            ax.set_axis_off()
            ts, vs = [p[0] for p in pts], [p[1] for p in pts]
            ax.fill_between(ts, vs, color=colour, alpha=0.16, linewidth=0)
            ax.plot(ts, vs, color=colour, alpha=0.5, linewidth=0.9)
            lo = min(0.0, min(vs))
            ax.set_ylim(lo, max(vs) * 1.05 if max(vs) > lo else lo + 1)
        if show_name:
            cv.text(cx + cw / 2, cy + ch * 0.1, s.name, fontsize=name_fs, ha="center", va="top", color=TEXT_DIM)
        if text_mode != "name":
            vy = cy + ch * (0.62 if show_name else 0.5)
            cv.text(cx + cw / 2, vy, vt, fontsize=value_fs, ha="center", va="center", fontweight="bold")
