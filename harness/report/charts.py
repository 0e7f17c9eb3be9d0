"""The report's figures as PNG images, drawn with matplotlib on Agg canvases (no display, no pyplot state).

Every number drawn comes from the report (:class:`harness.report.model.Report`) or from the run's
record frame (:func:`harness.report.columns.load_frame_run`) by the columnar engine's own definitions: a step's
latency sample is :func:`harness.report.series.row_latency_sample`, tokens per time bin
:func:`harness.report.series.output_tokens_binned` (the aggregate tok/s rule, per bin), the TTFT p50 per bin
:func:`harness.report.series.ttft_by_start_bin`, the request-rate interval the row's batch-means
``hours_interval``.

Units drawn: seconds for TTFT, TTFAT and E2E, milliseconds for TPOT, tokens per second, requests per second,
hours. Time axes are seconds since the run's start (``start_wall``). Drawing is deterministic: the same report
and records give the same PNG bytes (fixed size, DPI, fonts and metadata).

Importing this module imports matplotlib (ImportError when it is not installed).
"""

from __future__ import annotations

import io
import itertools
import logging
import math
import os
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.report.catalogue import Flag, label_flags, label_text, row_flags
from harness.report.columns import FrameRun
from harness.report.exprs import END as _END
from harness.report.exprs import OK as _OK
from harness.report.exprs import START as _START
from harness.report.exprs import mean_tokens as _mean_tokens
from harness.report.model import HoursEntry, Report, StepRow
from harness.report.series import (
    main_frame,
    output_tokens_binned,
    row_latency_sample,
    time_bin_s,
    ttft_by_start_bin,
)

__all__ = ["CHART_NAMES", "Chart", "draw_charts", "time_bin_s"]

#: PNG resolution (dots per inch); figure sizes are in inches.
DPI = 100
#: One colour per step (cycled), per percentile and per N.
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
_PNG_META = {"Software": "llmload report (matplotlib)"}


@dataclass(frozen=True)
class Chart:
    """One drawn figure.

    Attributes:
        name: file stem (``figures/<name>.png``) and HTML anchor.
        title: heading shown above the image.
        caption: what is drawn and where its numbers come from.
        png: the PNG image bytes.
    """

    name: str
    title: str
    caption: str
    png: bytes


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata=_PNG_META)
    return buf.getvalue()


def _no_data(ax: Axes, what: str = "no data") -> None:
    ax.text(0.5, 0.5, what, ha="center", va="center", transform=ax.transAxes, color="#777777")


#: A value axis turns logarithmic when its positive values span more than this factor.
LOG_SPAN = 20.0


def _wide(values: Sequence[float]) -> bool:
    """Whether ``values`` (all > 0) span more than :data:`LOG_SPAN`: a log axis then reads better."""
    return bool(values) and min(values) > 0 and max(values) / min(values) > LOG_SPAN


def _marker_kw(row: StepRow, color: str) -> dict[str, Any]:
    """Filled markers for steady rows, hollow for NOT steady (burst figures) ones."""
    face = color if row.steady else "white"
    return {"marker": "o", "markersize": 5, "markerfacecolor": face, "markeredgecolor": color}


def _conc_axis(ax: Axes, rows: Sequence[StepRow]) -> None:
    """Concurrency x axis: log 2 when it spans more than a factor 4, ticks at the steps' concurrencies."""
    cs = sorted({r.concurrency for r in rows})
    if not cs:
        return
    if cs[-1] / max(cs[0], 1) > 4:
        ax.set_xscale("log", base=2)
    ax.set_xticks(cs, [str(c) for c in cs])
    ax.minorticks_off()
    ax.set_xlabel("concurrency C (users)")


def _series(ax: Axes, rows: Sequence[StepRow], key: str, label: str, color: str, scale: float = 1.0,
            style: str = "-", flag: bool = True) -> bool:
    """A line through the rows where figure ``key`` is set, each point marked steady/not steady (and, with
    ``flag``, its flags' glyphs as in the tables: :func:`_flag`); False when no row has it."""
    pts = [(r.concurrency, v * scale, r) for r in rows if (v := getattr(r, key)) is not None]
    if not pts:
        return False
    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, label=label, linewidth=1.2)
    for c, v, r in pts:
        ax.plot([c], [v], linestyle="none", **_marker_kw(r, color))
        if flag:
            _flag(ax, c, v, r)
    return True


#: The flags a chart point carries besides the step label's (:data:`harness.report.catalogue.LABEL_FLAGS`).
_POINT_EXTRA = (Flag.STARVED,)
#: The point marks' legend in a chart's caption: ``† NOT steady, ‡ low confidence, STARVED, § hidden reasoning``.
_MARKS = ", ".join(f.named for f in label_flags(Flag, _POINT_EXTRA))


def _flag(ax: Axes, x: float, y: float, row: StepRow) -> None:
    """The report's row flags next to a point, each by its catalogue glyph (:class:`harness.report.catalogue.Flag`):
    the label's († NOT steady, ‡ low confidence, § hidden reasoning) and STARVED."""
    mark = " ".join(f.glyph for f in label_flags(row_flags(row), _POINT_EXTRA))
    if mark:
        ax.annotate(mark, (x, y), xytext=(4, 3), textcoords="offset points", fontsize=8, color="#444444")


def _finish(ax: Axes, drawn: bool, ylabel: str, title: str) -> None:
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if drawn:
        ax.set_ylim(bottom=0)
        ax.legend(loc="best")
    else:
        _no_data(ax)


def throughput_chart(rep: Report) -> Figure:
    """Aggregate and per-stream output tok/s, and usable req/s with its 95 % batch-means interval, vs concurrency."""
    rows = rep.steps
    fig = _figure(12, 3.6)
    ax1, ax2, ax3 = fig.subplots(1, 3)
    drawn = _series(ax1, rows, "output_tps", "aggregate output tok/s", PALETTE[0])
    _finish(ax1, drawn, "tokens / s", "Aggregate output tok/s (steady window)")
    drawn = _series(ax2, rows, "per_stream_tps", "per-stream tok/s", PALETTE[1])
    _finish(ax2, drawn, "tokens / s per stream", "Per-stream decode tok/s")
    drawn = _series(ax3, rows, "request_rate", "usable req/s", PALETTE[2])
    for r in rows:
        if r.request_rate is None:
            continue
        iv = r.hours_interval
        if iv.t is None or iv.rate_se is None or iv.rate is None:
            continue  # no interval for this step
        half = float(iv.t) * float(iv.rate_se)
        lo, hi = float(iv.rate) - half, float(iv.rate) + half
        ax3.vlines(r.concurrency, max(lo, 0.0), hi, color=PALETTE[2], alpha=0.5, linewidth=3)
    _finish(ax3, drawn, "usable requests / s", "Usable req/s, 95 % interval")
    for ax in (ax1, ax2, ax3):
        _conc_axis(ax, rows)
    return fig


def latency_chart(rep: Report) -> Figure:
    """TTFT and TTFAT p50/p90/p99 (s) and TPOT mean/p50 (ms) vs concurrency, from the report rows."""
    rows = rep.steps
    fig = _figure(12, 3.6)
    axes = fig.subplots(1, 3)
    for ax, key, name in ((axes[0], "ttft", "TTFT"), (axes[1], "ttfat", "TTFAT")):
        drawn = False
        for i, q in enumerate((50, 90, 99)):
            drawn |= _series(ax, rows, f"{key}_p{q}_s", f"p{q}", PALETTE[i], flag=q == 99)
        _finish(ax, drawn, "seconds", f"{name} percentiles")
    drawn = _series(axes[2], rows, "tpot_mean_s", "mean", PALETTE[3], scale=1000.0)
    drawn |= _series(axes[2], rows, "tpot_p50_s", "p50", PALETTE[4], scale=1000.0, style="--", flag=False)
    _finish(axes[2], drawn, "milliseconds", "TPOT (time per output token)")
    for ax in axes:
        _conc_axis(ax, rows)
    return fig


#: Most points an ECDF is drawn through: above it, every ``n / ECDF_POINTS``-th rank (first and last kept), so the
#: step plot of a million values differs from the full one by under 1/ECDF_POINTS in y (below a pixel).
ECDF_POINTS = 4000


def _ecdf(ax: Axes, xs: np.ndarray, label: str, color: str) -> None:
    """Step plot of the empirical CDF of ``xs`` (sorted ascending): the value of rank ``i`` at height
    ``(i + 1) / n``, through at most :data:`ECDF_POINTS` of the ranks."""
    n = len(xs)
    ranks = np.arange(n)
    if n > ECDF_POINTS:
        ranks = np.unique(np.linspace(0, n - 1, ECDF_POINTS).round().astype(np.int64))
    ax.step(xs[ranks], (ranks + 1) / n, where="post", color=color, label=f"{label} (n={n})", linewidth=1.2)


def distribution_chart(rep: Report, main: pl.DataFrame) -> Figure:
    """ECDFs of TTFT and E2E (seconds) per step over each step's latency sample, report percentiles marked."""
    rows = rep.steps
    fig = _figure(12, 4.0)
    axes = fig.subplots(1, 2)
    samples = [row_latency_sample(main, row).select("ttft", "e2e") for row in rows]
    specs: tuple[tuple[Axes, str, str, tuple[str, ...]], ...] = (
        (axes[0], "TTFT", "ttft", ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s")),
        (axes[1], "E2E", "e2e", ("e2e_p50_s",)),
    )
    for ax, name, col, marks in specs:
        drawn = False
        lo = hi = None
        for i, (row, sample) in enumerate(zip(rows, samples, strict=True)):
            vals = sample.get_column(col).drop_nulls().sort()
            if vals.len() == 0:
                continue
            color = PALETTE[i % len(PALETTE)]
            _ecdf(ax, vals.to_numpy(), row.label, color)
            lo = vals[0] if lo is None else min(lo, vals[0])
            hi = vals[-1] if hi is None else max(hi, vals[-1])
            for key in marks:
                v = getattr(row, key)
                if v is not None:
                    q = float(key.split("_p")[1].split("_")[0])
                    ax.plot([v], [q / 100.0], linestyle="none", **_marker_kw(row, color))
            drawn = True
        ax.set_title(f"{name} distribution per step (ECDF; dots: report p50/p90/p99)" if name == "TTFT"
                     else f"{name} distribution per step (ECDF; dot: report p50)")
        ax.set_xlabel(f"{name} (s)")
        ax.set_ylabel("share of requests ≤ x")
        if drawn:
            if lo is not None and hi is not None and _wide([lo, hi]):
                ax.set_xscale("log")
            ax.set_ylim(0, 1.02)
            ax.legend(loc="lower right")
        else:
            _no_data(ax)
    return fig


def _slice_marks(ax: Axes, rows: Sequence[StepRow], t0: float, key: str, label: str) -> bool:
    """Each soak slice's ``key`` (the report's ``steps[i].slices``) as a short black segment over the slice, in
    seconds since ``t0`` (one collection labelled ``label``); False when no row has slices with that figure."""
    segs = [(float(v), float(sl.start_wall or 0.0) - t0, float(sl.end_wall or 0.0) - t0)
            for r in rows for sl in r.slices if (v := getattr(sl, key)) is not None]
    if not segs:
        return False
    ax.hlines([v for v, _, _ in segs], [a for _, a, _ in segs], [b for _, _, b in segs], color="#000000",
              linewidth=1.6, label=label)
    return True


def _step_marks(ax: Axes, rows: Sequence[StepRow], t0: float, label: bool) -> None:
    """Step boundaries (dashed lines) and steady windows (shaded), in seconds since ``t0``."""
    for r in rows:
        start = float(r.start_wall or 0.0)
        ax.axvline(start - t0, color="#555555", linestyle="--", linewidth=0.8)
        if r.steady:
            ax.axvspan(float(r.window_start_wall or 0.0) - t0, float(r.window_end_wall or 0.0) - t0, color="#2ca02c",
                       alpha=0.08)
        if label:
            ax.text(start - t0, 1.0, f" {r.label}", transform=ax.get_xaxis_transform(), va="bottom",
                    ha="left", fontsize=8, color="#333333")
    if rows:
        ax.axvline(float(rows[-1].end_wall or 0.0) - t0, color="#555555", linestyle="--", linewidth=0.8)


#: Most TTFT dots of the timeline: above, every k-th successful request (in record order) is drawn, k the least
#: that keeps them under this (a million dots took 2 s to draw and looked the same); the per-bin p50 line and the
#: soak slices' p99 are over every request.
TIMELINE_POINTS = 100_000


def timeline_chart(rep: Report, main: pl.DataFrame) -> Figure:
    """Output tok/s per time bin and TTFT at its start of each successful request (every k-th above
    :data:`TIMELINE_POINTS` of them), with the per-bin p50, over the run."""
    rows = rep.steps
    fig = _figure(12, 5.6)
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    first: Any = rep.start_wall
    if first is None:
        first = main.get_column(_START).min() if main.height else 0.0
    t0 = float(first)
    ends = [float(r.end_wall) for r in rows if r.end_wall is not None]
    if main.height:
        ends.append(float(main.get_column(_END).max()))  # type: ignore[arg-type]
    t1 = max(ends, default=t0)
    if main.height and t1 > t0:
        width = time_bin_s(t1 - t0)
        n = max(1, math.ceil((t1 - t0) / width))
        tps = [v / width for v in output_tokens_binned(main, t0, width, n)]
        xs = [i * width for i in range(len(tps) + 1)]
        ax1.stairs(tps, xs, color=PALETTE[0], fill=True, alpha=0.35)
        ax1.stairs(tps, xs, color=PALETTE[0], label=f"output tok/s ({width:g} s bins)")
        _slice_marks(ax1, rows, t0, "output_tps", "output tok/s per soak slice")
        ax1.set_ylim(bottom=0)
        ax1.legend(loc="upper left")
        ok = main.filter(pl.col(_OK) & pl.col("ttft").is_not_null()).select(_START, "ttft")
        ttft = ok.get_column("ttft")
        every = max(1, math.ceil(ok.height / TIMELINE_POINTS))
        dots = ok.gather_every(every) if every > 1 else ok
        ax2.scatter((dots.get_column(_START) - t0).to_numpy(), dots.get_column("ttft").to_numpy(), s=6,
                    color=PALETTE[1], alpha=0.5, linewidths=0, rasterized=True,
                    label="TTFT of a request (at its start)" + (f"; every {every}th" if every > 1 else ""))
        med = ttft_by_start_bin(ok, t0, width)
        ax2.plot([(i + 0.5) * width for i, _ in med], [v for _, v in med], color="#333333", linewidth=1.2,
                 label=f"p50 per {width:g} s bin")
        _slice_marks(ax2, rows, t0, "ttft_p99_s", "p99 TTFT per soak slice")
        if ok.height:
            ax2.legend(loc="upper left")
            if _wide([float(ttft.min()), float(ttft.max())]):  # type: ignore[arg-type]
                ax2.set_yscale("log")
            else:
                ax2.set_ylim(bottom=0)
        else:
            _no_data(ax2, "no successful request")
    else:
        _no_data(ax1)
        _no_data(ax2)
    _step_marks(ax1, rows, t0, label=True)
    _step_marks(ax2, rows, t0, label=False)
    ax1.set_ylabel("output tokens / s")
    ax1.set_title("Output tok/s over time (dashed: step starts; shaded: steady windows)", pad=14)
    ax2.set_ylabel("TTFT (s)")
    ax2.set_xlabel("seconds since run start")
    ax2.set_title("TTFT over time (successful requests)")
    return fig


def tokens_chart(rep: Report, main: pl.DataFrame) -> Figure:
    """Mean reasoning and answer tokens per successful request of each step's latency sample (stacked bars);
    the bar total is the report's mean output tokens."""
    rows = rep.steps
    fig = _figure(12, 3.6)
    ax = fig.subplots(1, 1)
    labels: list[str] = []
    reasoning: list[float] = []
    answer: list[float] = []
    for row in rows:
        mr, ma = row_latency_sample(main, row).select(_mean_tokens("reasoning_tokens"),
                                                       _mean_tokens("answer_tokens")).row(0)
        if mr is None or ma is None:
            continue
        labels.append(label_text(row))
        reasoning.append(mr)
        answer.append(ma)
    if labels:
        xs = list(range(len(labels)))
        ax.bar(xs, reasoning, color=PALETTE[4], label="reasoning tokens (mean)")
        ax.bar(xs, answer, bottom=reasoning, color=PALETTE[2], label="answer tokens (mean)")
        for x, a, b in zip(xs, reasoning, answer, strict=True):
            ax.text(x, a + b, f"{a + b:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs, labels)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        _no_data(ax)
    ax.set_ylabel("tokens per successful request")
    ax.set_title("Reasoning vs answer tokens per step (latency sample; total = mean out tok)")
    return fig


def hours_chart(rep: Report, real: bool = False) -> Figure:
    """Hours to N usable samples vs concurrency, one colour per N: request-based with its 95 % interval (bars;
    an arrow when unbounded above; only the point when there is no interval), token-based dashed. ``real``: the
    real-time equivalents."""
    rows = rep.steps
    fig = _figure(12, 4.0)
    ax = fig.subplots(1, 1)
    drawn = False
    for j, n in enumerate(rep.hours_to_n):
        color = PALETTE[j % len(PALETTE)]
        pts: list[tuple[int, HoursEntry, StepRow]] = []
        for row in rows:
            hours = row.real_time.hours if real and row.real_time is not None else row.hours
            h = next((h for h in hours if h.n == n), None)
            if h is not None:
                pts.append((row.concurrency, h, row))
        req = [(c, h.hours, h, row) for c, h, row in pts if h.hours is not None]
        if req:
            ax.plot([c for c, _, _, _ in req], [v for _, v, _, _ in req], "-", color=color, linewidth=1.2,
                    label=f"N={n:,} (requests)")
            dodge = 2.0 ** (0.04 * (j - (len(rep.hours_to_n) - 1) / 2))  # intervals side by side
            for c, v, h, row in req:
                ax.plot([c], [v], linestyle="none", **_marker_kw(row, color))
                if j == 0:
                    _flag(ax, c, v, row)
                lo = h.hours_low if h.hours_low is not None else v
                if h.hours_high is not None:
                    ax.vlines(c * dodge, lo, h.hours_high, color=color, alpha=0.5, linewidth=3)
                elif h.hours_low is not None:  # bounded below only: an arrow up; no interval at all: the point
                    ax.annotate("", xy=(c * dodge, v * 3), xytext=(c * dodge, lo),
                                arrowprops={"arrowstyle": "->", "color": color, "alpha": 0.6})
            drawn = True
        tok = [(c, h.token_hours) for c, h, _ in pts if h.token_hours is not None]
        if tok:
            ax.plot([c for c, _ in tok], [v for _, v in tok], "--", color=color, linewidth=1.0,
                    alpha=0.8, label=f"N={n:,} (tokens)")
            drawn = True
    ax.set_ylabel("hours" + (" (real time)" if real else ""))
    usd_h = rep.cost_usd_per_hour
    if drawn and usd_h:
        price = float(usd_h)  # US$ = hours × the deployment's price: the same curve on a second scale

        def to_usd(h: Any) -> Any:
            return h * price

        def to_hours(d: Any) -> Any:
            return d / price

        cost = ax.secondary_yaxis("right", functions=(to_usd, to_hours))
        cost.set_ylabel(f"US\\$ (at {price:,.2f} US\\$/h)")
    ax.set_title("Hours to N usable samples (bars: 95 % prediction interval; arrow: no upper bound; dashed: "
                 "token method)" + (" — real-time equivalents" if real else ""))
    if drawn:
        ax.set_yscale("log")
        ax.legend(loc="upper left", bbox_to_anchor=(1.09 if usd_h else 1.0, 1.0), ncols=1)
    else:
        _no_data(ax)
    _conc_axis(ax, rows)
    return fig


#: Most prompt classes :func:`prompts_chart` draws (those with the lowest usable share when there are more).
MAX_PROMPTS = 30
#: Colour of each reason a request is not usable (``usable_reason``); other reasons take the palette's next ones.
REASON_COLORS = {"error": PALETTE[3], "truncated": PALETTE[1], "min_answer_tokens": PALETTE[4],
                 "regex": PALETTE[5], "json": PALETTE[6]}


def prompts_chart(rep: Report) -> Figure:
    """Yield per prompt class (report ``prompts``): the share of its requests usable and not usable by reason
    (stacked bars, % of requests), and the mean reasoning and answer tokens of its successful requests with its
    ``max_tokens`` cap (a tick when all its requests had the same cap)."""
    prompts = list(rep.prompts)
    if len(prompts) > MAX_PROMPTS:
        worst = sorted(prompts, key=lambda p: (p.usable_pct if p.usable_pct is not None else -1.0,
                                               p.prompt))[:MAX_PROMPTS]
        prompts = sorted(worst, key=lambda p: p.prompt)
    fig = _figure(12, max(3.0, 1.4 + 0.3 * len(prompts)))
    ax1, ax2 = fig.subplots(1, 2)
    title = "Yield per prompt (% of its requests)"
    if len(prompts) < len(rep.prompts):
        title += f"; the {len(prompts)} with the lowest usable share"
    ax1.set_title(title)
    ax2.set_title("Tokens per successful request (mean; tick: max_tokens)")
    if not prompts:
        _no_data(ax1)
        _no_data(ax2)
        return fig
    ys = list(range(len(prompts)))[::-1]  # the first prompt at the top
    names = [p.prompt for p in prompts]
    reasons = list(dict.fromkeys([*REASON_COLORS, *sorted({k for p in prompts for k in p.usable_reasons})]))
    extra = itertools.cycle(PALETTE[7:] + PALETTE[:7])
    colors = {k: REASON_COLORS.get(k) or next(extra) for k in reasons}
    usable = [100.0 * p.usable / p.requests if p.requests else 0.0 for p in prompts]
    ax1.barh(ys, usable, height=0.6, color=PALETTE[2], label="usable")
    left = usable
    for k in reasons:
        part = [100.0 * p.usable_reasons.get(k, 0) / p.requests if p.requests else 0.0 for p in prompts]
        if any(part):
            ax1.barh(ys, part, height=0.6, left=left, color=colors[k], label=f"not usable: {k}")
            left = [a + b for a, b in zip(left, part, strict=True)]
    for y, p in zip(ys, prompts, strict=True):
        ax1.text(101, y, f"{_pct_text(p['usable_pct'])} of {p['requests']:,}", va="center", fontsize=8)
    ax1.set_yticks(ys, names)
    ax1.set_xlim(0, 125)
    ax1.set_xticks([0, 25, 50, 75, 100])
    ax1.set_xlabel("% of the prompt's requests")
    ax1.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12 if len(prompts) > 3 else -0.2), ncols=3)
    mr = [p.mean_reasoning_tokens or 0.0 for p in prompts]
    ma = [p.mean_answer_tokens or 0.0 for p in prompts]
    ax2.barh(ys, mr, height=0.6, color=PALETTE[4], label="reasoning tokens (mean)")
    ax2.barh(ys, ma, height=0.6, left=mr, color=PALETTE[2], label="answer tokens (mean)")
    capped = [(y, p.max_tokens) for y, p in zip(ys, prompts, strict=True) if p.max_tokens is not None]
    if capped:
        ax2.plot([c for _, c in capped], [y for y, _ in capped], linestyle="none", marker="|", markersize=14,
                 markeredgewidth=2, color="#000000", label="max_tokens")
    ax2.set_yticks(ys, names)
    ax2.set_xlim(left=0)
    ax2.set_xlabel("tokens")
    ax2.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def _pct_text(v: float | None) -> str:
    return "–" if v is None else f"{v:.0f} % usable"


#: File stems of the charts :func:`draw_charts` returns, in order (``hours_real_time`` only for compressed time).
CHART_NAMES = ("throughput", "latency_percentiles", "latency_distributions", "timeline", "tokens", "prompts",
               "hours", "hours_real_time")


def draw_charts(report: Report | dict[str, Any], run: FrameRun) -> list[Chart]:
    """Draw every figure of a report.

    Args:
        report: the report (:func:`harness.report.build.build_report`), or (transitional, as ``html.py`` passes
            it) the dict report.json holds, validated into a :class:`harness.report.model.Report` here.
        run: the run's record frame (:func:`harness.report.columns.load_frame_run`); warm-up records are dropped.

    Raises:
        pydantic.ValidationError: ``report`` is a dict that is not a report.

    Returns:
        The charts in :data:`CHART_NAMES` order (``hours_real_time`` only when ``report.time_scale != 1``).
    """
    rep = report if isinstance(report, Report) else Report.model_validate(report)  # transitional: see Args
    main = main_frame(run)
    specs: list[tuple[str, str, str, Callable[[], Figure]]] = [
        ("throughput", "Throughput vs concurrency",
         "Report rows: output_tps, per_stream_tps, request_rate; the interval is the 95 % batch-means interval "
         "of the window's usable rate (the estimate's part of the hours-to-N interval). Hollow markers: NOT steady "
         f"(burst figures). Marks as in the tables: {_MARKS} (see the tables and notes).",
         lambda: throughput_chart(rep)),
        ("latency_percentiles", "Latency percentiles vs concurrency",
         "Report rows: ttft_p50/p90/p99, ttfat_p50/p90/p99 (s), tpot_mean and tpot_p50 (ms).",
         lambda: latency_chart(rep)),
        ("latency_distributions", "Latency distributions per step",
         "Empirical CDFs over each step's latency sample (successful requests that ended in the steady window); the "
         "dots are the report's percentiles (interpolated between ranks, so with few requests a dot can sit "
         "beside the ECDF's steps).",
         lambda: distribution_chart(rep, main)),
        ("timeline", "Throughput and TTFT over time",
         "Output tokens per time bin by the output_tps rule (chunk arrivals, else spread over each request's "
         "decode interval); TTFT of every successful request at its start time (of every k-th one above "
         f"{TIMELINE_POINTS:,} requests, the legend says k). Black segments: the soak slices' "
         "output_tps and ttft_p99 (report steps[].slices). Warm-up excluded.",
         lambda: timeline_chart(rep, main)),
        ("tokens", "Reasoning vs answer tokens",
         "Mean reasoning_tokens and answer_tokens over each step's latency sample.",
         lambda: tokens_chart(rep, main)),
        ("prompts", "Yield per prompt",
         "Report prompts: every non-warm-up request of each prompt class, all steps together; usable and "
         "usable_reasons as % of its requests (see the per-prompt table), mean_reasoning_tokens and "
         "mean_answer_tokens over its successful requests, max_tokens its requests' cap.",
         lambda: prompts_chart(rep)),
        ("hours", "Hours to N usable samples",
         "Report rows: hours (request method, 95 % interval hours_low..hours_high) and token_hours; with a price "
         "(profile cost), the right axis is the same in US$ (hours × cost_usd_per_hour).",
         lambda: hours_chart(rep)),
    ]
    if rep.time_scale != 1.0:
        specs.append(("hours_real_time", "Hours to N usable samples (real-time equivalents)",
                      "Report rows' real_time.hours: compressed simulator time converted with time_scale.",
                      lambda: hours_chart(rep, real=True)))
    # matplotlib looks up its mathtext fonts (STIX, cmr10) at the first figure and logs a "findfont: ... not found"
    # warning per family where they are not installed: noise above every `llmload report` (fresh-user finding)
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    with matplotlib.rc_context({  # a literal: mypy checks the keys against matplotlib's rc names
        "font.family": "DejaVu Sans",
        "font.size": 9,
        "axes.titlesize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.fontsize": 8,
        "legend.frameon": False,
    }):
        forked: _Forked | None = None
        if main.height >= PARALLEL_MIN_RECORDS:
            forked = _Forked([(name, draw) for name, _, _, draw in specs if name in REPORT_ONLY_CHARTS])
        pngs = {} if forked is None else forked.pngs
        drawn = {name: _png(draw()) for name, _, _, draw in specs if name not in pngs}
        if forked is not None:
            pngs = forked.result()  # what the child could not draw (it failed) is drawn here
            drawn.update({name: _png(draw()) for name, _, _, draw in specs if name not in drawn and name not in pngs})
        return [Chart(name, title, caption, drawn.get(name) or pngs[name]) for name, title, caption, _ in specs]


#: The charts drawn from the report dict alone (no record frame): with :data:`PARALLEL_MIN_RECORDS` records or
#: more, a forked child process draws them while this process draws the others (two cores: ~1.5 s of 4 s at 1M).
REPORT_ONLY_CHARTS = frozenset({"throughput", "latency_percentiles", "prompts", "hours", "hours_real_time"})
#: Non-warm-up records from which :func:`draw_charts` draws in two processes (below, the fork is not worth it).
PARALLEL_MIN_RECORDS = 50_000


def _gevent_patched() -> bool:
    """Whether gevent has patched ``os`` in this process (a report written by the run's Locust process): gevent's
    fork reaps children itself and the pipe's end of file never came, so the figures are then drawn here."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("os"))


class _Forked:
    """Draw ``jobs`` (chart name, figure maker) as PNGs in a forked child; :attr:`pngs` lists the names it draws
    (empty when the platform cannot fork), :meth:`result` their PNG bytes (only those it drew: a failed child
    returns none, and the caller draws them). The child runs only matplotlib (no polars: its thread pool is not
    carried over by a fork) and ends with ``os._exit``. Not under gevent's monkey patching (:func:`_gevent_patched`):
    there everything is drawn in this process."""

    def __init__(self, jobs: list[tuple[str, Callable[[], Figure]]]) -> None:
        self.pngs: dict[str, bytes] = {}
        self._pid = 0
        if not jobs or not hasattr(os, "fork") or _gevent_patched():
            return
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return
        if pid == 0:  # the child
            code = 1
            try:
                os.close(r)
                data = pickle.dumps({name: _png(draw()) for name, draw in jobs})
                with os.fdopen(w, "wb") as out:
                    out.write(data)
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        self._pid, self._read = pid, r
        self.pngs = dict.fromkeys((name for name, _ in jobs), b"")

    def result(self) -> dict[str, bytes]:
        """Wait for the child; the PNG of every chart it drew (empty when it failed)."""
        if not self._pid:
            return {}
        with os.fdopen(self._read, "rb") as f:
            data = f.read()
        _, status = os.waitpid(self._pid, 0)
        self._pid = 0
        if os.waitstatus_to_exitcode(status) != 0 or not data:
            return {}
        got = pickle.loads(data)
        return got if isinstance(got, dict) else {}
