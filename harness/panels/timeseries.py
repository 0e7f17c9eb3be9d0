"""``timeseries`` (and ``graph``) panels: a line per series with its overrides, y axis in the panel's unit, clock
times on the x axis, the annotations' marks, and a list legend under the plot."""

from __future__ import annotations

import math
import re
import time
from typing import TYPE_CHECKING, Any, Literal

from harness.panels.annotations import Annotation
from harness.panels.canvas import Canvas, draw_message
from harness.panels.series import Series
from harness.panels.theme import FONT, GRID, PALETTE, TEXT, TEXT_DIM, grafana_colour
from harness.panels.units import TIME_STEPS, TIME_UNITS, tick_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _overrides_for(panel: dict[str, Any], s: Series) -> dict[str, Any]:
    """The override properties (``id`` → ``value``) of the panel that match this series."""
    props: dict[str, Any] = {}
    for o in (panel.get("fieldConfig") or {}).get("overrides") or []:
        m = o.get("matcher") or {}
        mid, opt = m.get("id"), m.get("options")
        hit = (
            (mid == "byName" and opt == s.name)
            or (mid == "byRegexp" and isinstance(opt, str) and re.fullmatch(opt, s.name) is not None)
            or (mid == "byFrameRefID" and opt == s.ref_id)
        )
        if hit:
            for p in o.get("properties") or []:
                props[str(p.get("id"))] = p.get("value")
    return props


def _time_ticks(start: float, end: float, width_in: float) -> tuple[list[float], str]:
    """Round clock times for an x axis ``width_in`` inches wide (about one label per 0.9 in) and their format."""
    span = max(end - start, 1.0)
    want = max(2, int(width_in / 0.9))
    for iv in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400):
        if span / iv <= want:
            break
    first = math.ceil(start / iv) * iv
    ticks = [float(t) for t in range(int(first), int(end) + 1, iv)]
    fmt = "%H:%M:%S" if iv < 60 else ("%H:%M" if span < 86400 * 2 else "%m-%d %H:%M")
    return ticks, fmt


def _y_ticks(lo: float, hi: float, unit: str | None, n: int) -> list[float]:
    """Nice tick values covering [lo, hi]; for time units in their scaled unit (so 250 ms steps, not 0.25 s)."""
    from matplotlib.ticker import MaxNLocator

    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    steps = [1, 2, 2.5, 5, 10]
    if unit in TIME_UNITS:
        secs = max(abs(lo), abs(hi)) * TIME_UNITS[unit]
        div = next(d for bound, d, _ in TIME_STEPS if secs < bound) / TIME_UNITS[unit]
        if div >= 60 / TIME_UNITS[unit] * 0.999 and div < 86400 / TIME_UNITS[unit]:
            steps = [1, 1.5, 2, 3, 5, 6, 10]  # minutes and hours: 15, 30 rather than 25
        t = MaxNLocator(nbins=n, steps=steps).tick_values(lo / div, hi / div)
        return [float(x) * div for x in t]
    return [float(x) for x in MaxNLocator(nbins=n, steps=steps).tick_values(lo, hi)]


def _legend(cv: Canvas, entries: list[tuple[str, dict[str, Any]]], x: float, w: float, bottom: float) -> float:
    """Draw a Grafana list legend (line sample + name, flowing left to right) whose last line ends at
    ``bottom`` (inches from the top); return its height in inches. ``entries``: (name, line style)."""
    from matplotlib.lines import Line2D

    if not entries:
        return 0.0
    line_h, handle, pad = 0.19, 0.22, 0.16
    texts = [cv.text(0, 0, name, fontsize=8, va="center", color=TEXT) for name, _ in entries]
    widths = [cv.width_of(t) for t in texts]
    rows: list[list[int]] = [[]]
    used = 0.0
    for i, tw in enumerate(widths):
        need = handle + 0.05 + tw + pad
        if rows[-1] and used + need > w:
            rows.append([])
            used = 0.0
        rows[-1].append(i)
        used += need
    height = len(rows) * line_h
    for r, idx in enumerate(rows):
        y = bottom - height + (r + 0.5) * line_h
        cx = x
        for i in idx:
            style = entries[i][1]
            x0, b, _, _ = cv.rect(cx, y, handle, 0)
            x1 = (cx + handle) / cv.w
            cv.fig.add_artist(
                Line2D([x0, x1], [b, b], transform=cv.fig.transFigure, color=style["color"],
                       linewidth=2.2, linestyle="-" if style.get("linestyle", "-") == "-" else (0, (2.2, 1.4)),
                       solid_capstyle="butt")
            )  # fmt: skip
            texts[i].set_position(((cx + handle + 0.05) / cv.w, 1 - y / cv.h))
            cx += handle + 0.05 + widths[i] + pad
    return height


def _style_axes(ax: Axes) -> None:
    ax.set_facecolor("none")
    for sp in ax.spines.values():
        sp.set_visible(False)
    ax.tick_params(colors=TEXT_DIM, labelsize=7.5, length=0, pad=4)
    ax.grid(True, color=GRID, linewidth=0.7)
    ax.set_axisbelow(True)


def draw_timeseries(
    cv: Canvas,
    panel: dict[str, Any],
    series: list[Series],
    box: tuple[float, float, float, float],
    rng: tuple[float, float],
    annotations: list[Annotation],
    step: float,
) -> None:
    """Draw a timeseries panel's plot and legend in ``box`` (x, top, width, height in inches) over the time
    range ``rng``, a line broken where samples are more than 1.5 ``step`` apart (unless ``spanNulls``)."""
    from matplotlib.transforms import blended_transform_factory, offset_copy

    x, top, w, h = box
    defaults = (panel.get("fieldConfig") or {}).get("defaults") or {}
    unit, custom = defaults.get("unit"), defaults.get("custom") or {}
    legend_opts = (panel.get("options") or {}).get("legend") or {}
    show_legend = legend_opts.get("showLegend", True) and legend_opts.get("displayMode") != "hidden"
    styles: list[dict[str, Any]] = []
    for i, s in enumerate(series):
        o = _overrides_for(panel, s)
        colour_cfg = o.get("color") or {}
        style: dict[str, Any] = {
            "color": grafana_colour(colour_cfg.get("fixedColor") if isinstance(colour_cfg, dict) else None,
                                    PALETTE[i % len(PALETTE)]),
            "linewidth": 1.4 * float(o.get("custom.lineWidth", custom.get("lineWidth", 1)) or 1),
            "fill": float(o.get("custom.fillOpacity", custom.get("fillOpacity", 0)) or 0) / 100,
            "drawstyle": {"stepAfter": "steps-post", "stepBefore": "steps-pre"}.get(
                str(o.get("custom.lineInterpolation", custom.get("lineInterpolation", "linear"))), "default"),
            "span": bool(o.get("custom.spanNulls", custom.get("spanNulls", False))),
        }  # fmt: skip
        ls = o.get("custom.lineStyle", custom.get("lineStyle")) or {}
        if isinstance(ls, dict) and ls.get("fill") == "dash":
            dash = ls.get("dash") or [10, 10]
            style["linestyle"] = (0, tuple(max(1.0, d / 3) for d in dash))
        elif isinstance(ls, dict) and ls.get("fill") == "dot":
            style["linestyle"] = ":"
        styles.append(style)

    entries = [(s.name, st) for s, st in zip(series, styles, strict=True)] if show_legend else []
    legend_h = _legend(cv, entries, x + 0.12, w - 0.24, top + h - 0.07)
    plot_top, plot_bottom = top + 0.38, top + h - 0.07 - legend_h - 0.3
    if not series or not any(s.finite() for s in series):
        draw_message(cv, x, top + 0.3, w, h - 0.3, "No data")
        return

    vals = [v for s in series for _, v in s.finite()]
    lo, hi = min(vals), max(vals)
    if defaults.get("min") is not None:
        lo = float(defaults["min"])
    elif lo >= 0:
        lo = 0.0
    if defaults.get("max") is not None:
        hi = float(defaults["max"])
    n_ticks = max(2, int((plot_bottom - plot_top) / 0.42))
    yt = _y_ticks(lo, hi, unit, n_ticks)
    labels = tick_labels(yt, unit)
    probe = [cv.text(0, 0, lab, fontsize=7.5) for lab in labels]
    label_w = max(cv.width_of(t) for t in probe)
    for t in probe:
        t.remove()
    left = x + 0.14 + label_w + 0.08
    right = x + w - 0.32  # room for the last time label, centred on its tick
    ax = cv.fig.add_axes(cv.rect(left, plot_top, right - left, plot_bottom - plot_top))
    _style_axes(ax)
    pad = 0.012 * (yt[-1] - yt[0])  # a line at the top or bottom tick stays whole
    ax.set_ylim(yt[0] - pad, yt[-1] + pad)
    ax.set_yticks(yt, labels)
    ax.set_xlim(*rng)
    xt, fmt = _time_ticks(rng[0], rng[1], right - left)
    ax.set_xticks(xt, [time.strftime(fmt, time.gmtime(t)) for t in xt])
    for s, st in zip(series, styles, strict=True):
        ts, vs = list(s.t), [v if math.isfinite(v) else math.nan for v in s.v]
        if not st["span"]:  # a gap longer than 1.5 steps breaks the line
            ts2: list[float] = []
            vs2: list[float] = []
            for i, (t, v) in enumerate(zip(ts, vs, strict=True)):
                if i and t - ts[i - 1] > 1.5 * step:
                    ts2.append(ts[i - 1] + step)  # a step line holds its last value one step
                    vs2.append(math.nan)
                ts2.append(t)
                vs2.append(v)
            ts, vs = ts2, vs2
        ax.plot(ts, vs, color=st["color"], linewidth=st["linewidth"], linestyle=st.get("linestyle", "-"),
                drawstyle=st["drawstyle"], solid_joinstyle="round")  # fmt: skip
        lone = [  # a sample between gaps draws no line: a dot, as Grafana shows it
            i for i, v in enumerate(vs)
            if math.isfinite(v) and (i == 0 or not math.isfinite(vs[i - 1]))
            and (i == len(vs) - 1 or not math.isfinite(vs[i + 1]))
        ]  # fmt: skip
        if lone:
            ax.plot([ts[i] for i in lone], [vs[i] for i in lone], linestyle="none", marker="o",
                    markersize=2.5, color=st["color"])  # fmt: skip
        if st["fill"] > 0:
            where: Literal["pre", "post"] | None = (
                "post" if st["drawstyle"] == "steps-post" else "pre" if st["drawstyle"] == "steps-pre" else None
            )
            ax.fill_between(ts, vs, color=st["color"], alpha=st["fill"], linewidth=0, step=where)
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    beside = offset_copy(trans, fig=cv.fig, x=1.5, units="points")  # text just right of its line
    for ann in annotations:
        for t, title in ann.marks:
            if rng[0] <= t <= rng[1]:
                ax.axvline(t, color=ann.colour, linewidth=0.9, linestyle=(0, (4, 3)), alpha=0.75, zorder=1)
                ax.plot([t], [0], transform=trans, marker="^", color=ann.colour, markersize=5, clip_on=False)
                ax.text(t, 0.98, title + " ", transform=beside, rotation=90, rotation_mode="anchor", ha="right",
                        va="top", fontsize=6.2, color=ann.colour, family=FONT, parse_math=False)  # fmt: skip
