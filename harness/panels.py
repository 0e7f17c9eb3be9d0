"""Render a Grafana dashboard's panels from its own PromQL against a real Prometheus, as PNG images.

This is not Grafana and the images are not Grafana screenshots: :func:`render_dashboard` reads the dashboard JSON
(``grafana/dashboards/llmload.json``), substitutes the template variables, runs every panel target's ``expr``
through Prometheus' HTTP API (``/api/v1/query_range``) and draws the results with matplotlib (Agg, no display),
roughly the way Grafana lays them out:

* one PNG per dashboard row (the row title as heading; panels before the first row get the dashboard title),
  panels placed by their ``gridPos`` (24 columns; one grid unit of height is :data:`UNIT_H` inches);
* ``timeseries`` (and the old ``graph``) panels: one line per series, named by the target's ``legendFormat``
  (``{{label}}`` replaced by the series' label value), a list legend under the plot, the y axis formatted in
  the panel's ``fieldConfig.defaults.unit``; ``byName`` / ``byRegexp`` / ``byFrameRefID`` overrides of the line
  style, interpolation (``stepAfter``), width, fill and fixed colour;
* ``stat`` (also ``gauge``, ``bargauge``): one cell per series with the reduced value (``reduceOptions.calcs``:
  lastNotNull, last, first, firstNotNull, mean, min, max, sum) in big text, its name (``textMode``) and, with
  ``graphMode: area``, a sparkline;
* ``text`` panels: their content as plain text; any other type: a placeholder naming the type;
* the dashboard's Prometheus annotations (e.g. llmload's step markers, ``useValueForTime``) as vertical dashed
  lines with their ``titleFormat`` text on every timeseries panel;
* a caption under each image saying what it is: rendered by this module from the dashboard's PromQL against
  the named Prometheus over the stated time range (UTC), with the variable values used; not a Grafana screenshot.

Variables: ``$name``, ``${name}``, ``${name:format}`` and ``[[name]]`` forms; the caller's values first, then
the dashboard's ``current`` value, then ``allValue`` (or ``.*``) for variables with ``includeAll``. Grafana's
built-ins are computed as Grafana does: ``$__interval`` = the query step (seconds), ``$__interval_ms``,
``$__range`` / ``$__range_s`` / ``$__range_ms``, and ``$__rate_interval`` = max(``$__interval`` + scrape
interval, 4 × scrape interval), the scrape interval being Prometheus' own ``global.scrape_interval`` (read from
``/api/v1/status/config``) unless given.

Not supported: transformations, value mappings and thresholds colours, repeated panels, library panels, table
and heatmap visualisations (drawn as placeholders), legend modes other than a bottom list, dual axes, stacking,
log scales; series values ``±Inf`` and ``NaN`` are drawn as gaps.

Command line: ``llmload panels --prometheus URL --start T --end T --model M --out DIR`` (see :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure

__all__ = [
    "PanelResult",
    "PrometheusUnavailable",
    "QueryError",
    "QueryFn",
    "RenderResult",
    "TargetResult",
    "format_duration",
    "format_value",
    "legend_name",
    "main",
    "parse_duration",
    "parse_time",
    "prometheus_query_range",
    "render_dashboard",
    "resolve_variables",
    "substitute",
]

#: ``query(expr, start, end, step)`` → Prometheus' ``data.result`` of a range query (a list of
#: ``{"metric": {...}, "values": [[t, "v"], ...]}``); times and step in seconds. Raises :class:`QueryError`
#: for an expression Prometheus rejects.
QueryFn = Callable[[str, float, float, float], list[dict[str, Any]]]

DEFAULT_SOURCE = "grafana/dashboards/llmload.json"
#: Figure width (inches) of one row image, and the height (inches) of one gridPos unit; 100 dpi by default.
FIG_W = 16.0
UNIT_H = 0.38
_GAP = 0.08  # inches between panels
_MARGIN = 0.15  # inches left and right of the grid
_HEADER_H = 0.5
_FONT = "DejaVu Sans"

# Grafana's dark theme, roughly.
_BG = "#111217"
_PANEL_BG = "#181b1f"
_BORDER = "#2c3235"
_TEXT = "#ccccdc"
_TEXT_DIM = "#8e8e9a"
_GRID = "#2a2d33"
#: Grafana's classic palette, in its order.
PALETTE = [
    "#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
    "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477",
]  # fmt: skip
_NAMED_COLOURS = {
    "green": "#73BF69", "yellow": "#FADE2A", "red": "#F2495C", "orange": "#FF9830", "blue": "#5794F2",
    "purple": "#B877D9", "dark-orange": "#E55400", "super-light-orange": "#FFCB7D", "text": _TEXT,
}  # fmt: skip


class QueryError(Exception):
    """Prometheus rejected an expression (HTTP 4xx/5xx or ``status: error``); the message is Prometheus' own."""


class PrometheusUnavailable(OSError):
    """Prometheus could not be reached at all (connection refused, time-out)."""


# -- results ----------------------------------------------------------------------------------------------------
@dataclass
class TargetResult:
    """One panel target: its ``refId``, ``legendFormat`` (as written), the expression as sent (variables
    substituted), how many series came back and their display names (legend), whether any value was finite,
    and Prometheus' error if any."""

    ref_id: str
    legend: str
    expr: str
    series: int = 0
    has_data: bool = False
    error: str | None = None
    series_names: list[str] = field(default_factory=list)


@dataclass
class PanelResult:
    """One non-row panel: id, title, type, the row it sits in, its targets and the PNG that shows it."""

    id: int
    title: str
    type: str
    row: str
    targets: list[TargetResult] = field(default_factory=list)
    image: str = ""

    @property
    def has_data(self) -> bool:
        """Whether any target returned a finite value."""
        return any(t.has_data for t in self.targets)


@dataclass
class RenderResult:
    """What :func:`render_dashboard` did: panels in grid order, the PNGs written, the number of markers per
    annotation, the variable values used (built-ins included), the time range (epoch seconds) and step (s)."""

    panels: list[PanelResult]
    images: list[Path]
    annotations: dict[str, int]
    variables: dict[str, str]
    start: float
    end: float
    step: float
    scrape_interval: float

    def target(self, title: str, legend: str | None) -> TargetResult:
        """The target of the panel titled ``title`` whose ``legendFormat`` is ``legend``."""
        for p in self.panels:
            if p.title == title:
                for t in p.targets:
                    if t.legend == (legend or ""):
                        return t
        raise KeyError((title, legend))

    def without_data(self) -> list[str]:
        """``"panel title / legendFormat"`` of every target that returned no finite value (or failed)."""
        return [f"{p.title} / {t.legend}" for p in self.panels for t in p.targets if not t.has_data]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary."""
        return {
            "start": self.start,
            "end": self.end,
            "step": self.step,
            "scrape_interval": self.scrape_interval,
            "variables": self.variables,
            "images": [str(p) for p in self.images],
            "annotations": self.annotations,
            "panels": [{**asdict(p), "has_data": p.has_data} for p in self.panels],
        }


# -- durations, times, variables ----------------------------------------------------------------------------------
_DUR_UNITS = {
    "ms": 0.001, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0,
    "minutes": 60.0, "h": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}  # fmt: skip


def parse_duration(text: str) -> float:
    """Seconds in a duration: ``90``, ``90s``, ``15m``, ``1h30m``, ``500ms``, ``15 minutes``, ``2 hours``."""
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]+)", s)
    if not parts or re.sub(r"(\d+(?:\.\d+)?)\s*([a-z]+)", "", s).strip():
        raise ValueError(f"not a duration: {text!r}")
    total = 0.0
    for num, unit in parts:
        if unit not in _DUR_UNITS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        total += float(num) * _DUR_UNITS[unit]
    return total


def format_duration(seconds: float) -> str:
    """A Prometheus/Grafana duration for a number of seconds: ``4s``, ``1m``, ``1m30s``, ``1500ms``."""
    ms = round(seconds * 1000)
    if ms % 1000:
        return f"{ms}ms"
    s = ms // 1000
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            out += f"{s // size}{unit}"
            s %= size
    return out or "0s"


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds of a time given as epoch seconds (``1764450000``), ISO 8601 (UTC unless it has an offset),
    ``now``, ``now-15m`` (Grafana's form) or ``last 15 minutes`` / ``15 minutes ago`` (that long before now)."""
    now = time.time() if now is None else now
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    if s == "now":
        return now
    m = re.fullmatch(r"now\s*-\s*(.+)", s) or re.fullmatch(r"last\s+(.+)", s) or re.fullmatch(r"(.+)\s+ago", s)
    if m:
        return now - parse_duration(m.group(1))
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (epoch seconds, ISO 8601, now, now-15m, last 15 minutes)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


_VAR_RE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")


def substitute(expr: str, variables: dict[str, str]) -> str:
    """``expr`` with every known variable (``$name``, ``${name}``, ``${name:fmt}``, ``[[name]]``) replaced by its
    value; unknown names are left as written (so Prometheus reports them)."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return variables.get(name, m.group(0))

    return _VAR_RE.sub(repl, expr)


def resolve_variables(dashboard: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """Values of the dashboard's template variables: ``given`` (names with or without ``$``) first, then the
    variable's ``current`` value, then ``allValue`` (or ``.*``) when it has ``includeAll``. Datasource variables
    are skipped. Raises ValueError naming the variables left without a value."""
    given = {k.lstrip("$"): v for k, v in given.items()}
    out: dict[str, str] = {}
    missing: list[str] = []
    for var in dashboard.get("templating", {}).get("list", []):
        name = var.get("name", "")
        if var.get("type") == "datasource" or not name:
            continue
        all_value = var.get("allValue") or ".*"
        val: str | None
        if name in given:
            val = given[name]
        else:
            cur = (var.get("current") or {}).get("value")
            if isinstance(cur, list):
                cur = cur[0] if len(cur) == 1 else "|".join(cur)
            val = str(cur) if cur else (all_value if var.get("includeAll") else None)
        if val in ("$__all", "All") and var.get("includeAll"):
            val = all_value
        if val is None:
            missing.append(name)
        else:
            out[name] = val
    if missing:
        raise ValueError(f"no value for dashboard variable(s) {', '.join(missing)}: pass them")
    for k, v in given.items():  # extra values (e.g. for variables the dashboard does not declare)
        out.setdefault(k, v)
    return out


def _builtins(start: float, end: float, step: float, scrape_interval: float) -> dict[str, str]:
    rng = max(end - start, 0.0)
    rate = max(step + scrape_interval, 4 * scrape_interval)
    return {
        "__interval": format_duration(step),
        "__interval_ms": str(round(step * 1000)),
        "__rate_interval": format_duration(rate),
        "__range": format_duration(round(rng)),
        "__range_s": str(round(rng)),
        "__range_ms": str(round(rng * 1000)),
    }


def default_step(start: float, end: float, scrape_interval: float, points: int = 800) -> float:
    """Grafana's query interval, roughly: the range over ``points`` (about a panel's width in pixels) rounded
    to a whole second (or a nice multiple), never below the scrape interval."""
    raw = max(end - start, 1.0) / points
    for nice in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if raw <= nice:
            raw = float(nice)
            break
    return max(raw, scrape_interval)


# -- Prometheus ------------------------------------------------------------------------------------------------------
def _prometheus_get(url: str, data: dict[str, str] | None, timeout: float) -> Any:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    req = urllib.request.Request(url, data=body)
    if body is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            doc = json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        raw = e.read().decode(errors="replace")
        try:
            msg = json.loads(raw).get("error") or raw
        except ValueError:
            msg = raw
        raise QueryError(f"HTTP {e.code}: {msg}".strip()) from None
    except (urllib.error.URLError, OSError) as e:
        raise PrometheusUnavailable(f"Prometheus at {url.split('/api/', 1)[0]}: {e}") from None
    if doc.get("status") != "success":
        raise QueryError(str(doc.get("error") or doc))
    return doc["data"]


def prometheus_query_range(prometheus_url: str, timeout: float = 30.0) -> QueryFn:
    """A :data:`QueryFn` that POSTs to ``prometheus_url``'s ``/api/v1/query_range``."""
    base = prometheus_url.rstrip("/")

    def query(expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        data = _prometheus_get(base + "/api/v1/query_range", params, timeout)
        return list(data.get("result") or [])

    return query


def prometheus_scrape_interval(prometheus_url: str, timeout: float = 10.0) -> float | None:
    """``global.scrape_interval`` (seconds) of the Prometheus at ``prometheus_url``, from its loaded config."""
    import yaml

    try:
        data = _prometheus_get(prometheus_url.rstrip("/") + "/api/v1/status/config", None, timeout)
        cfg = yaml.safe_load(data["yaml"])
        return parse_duration(str(cfg["global"]["scrape_interval"]))
    except (QueryError, KeyError, TypeError, ValueError):
        return None


# -- legends and units -------------------------------------------------------------------------------------------
_LEGEND_RE = re.compile(r"\{\{\s*([^}\s]+)\s*\}\}")


def legend_name(legend_format: str | None, metric: dict[str, str], expr: str = "") -> str:
    """A series' display name: ``legendFormat`` with ``{{label}}`` replaced by the label's value (empty when the
    series lacks it), as Grafana does; without a legendFormat (or ``__auto``) the series' selector
    ``name{label="value", ...}``, or the expression when the series has no labels at all."""
    if legend_format and legend_format != "__auto":
        return _LEGEND_RE.sub(lambda m: metric.get(m.group(1), ""), legend_format)
    labels = {k: v for k, v in metric.items() if k != "__name__"}
    name = metric.get("__name__", "")
    if not labels:
        return name or expr
    return name + "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


# (upper bound in seconds, divisor in seconds, suffix): Grafana's toSeconds/toMilliseconds/toHours family.
_TIME_STEPS = [
    (1e-6, 1e-9, " ns"), (1e-3, 1e-6, " µs"), (1.0, 1e-3, " ms"), (60.0, 1.0, " s"), (3600.0, 60.0, " min"),
    (86400.0, 3600.0, " hour"), (604800.0, 86400.0, " day"), (31536000.0, 604800.0, " week"),
    (math.inf, 31536000.0, " year"),
]  # fmt: skip
_TIME_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SHORT = ["", " K", " Mil", " Bil", " Tri", " Quadr", " Quint", " Sext", " Sept"]
_RATE_SUFFIX = {"reqps": " req/s", "reqpm": " req/min", "ops": " ops/s", "opm": " ops/min", "rps": " rd/s",
                "wps": " wr/s", "iops": " io/s", "cps": " c/s", "hertz": " Hz"}  # fmt: skip
_BYTES = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
_DECBYTES = ["B", "kB", "MB", "GB", "TB", "PB"]


def _auto_decimals(x: float) -> int:
    """About three significant digits, never more than 3 decimals (Grafana's automatic decimals, roughly)."""
    if x == 0 or not math.isfinite(x):
        return 0
    return int(min(3, max(0, 2 - math.floor(math.log10(abs(x))))))


def _fixed(x: float, decimals: int | None) -> str:
    d = _auto_decimals(x) if decimals is None else decimals
    s = f"{x:.{d}f}"
    return "0" if re.fullmatch(r"-?0(\.0*)?", s) else s


def _scaled(x: float, factor: float, suffixes: Sequence[str], decimals: int | None) -> str:
    i = 0
    while abs(x) >= factor and i < len(suffixes) - 1:
        x /= factor
        i += 1
    return _fixed(x, decimals) + suffixes[i]


def format_value(value: float, unit: str | None, decimals: int | None = None) -> str:
    """``value`` as Grafana shows it in ``unit`` (``fieldConfig.defaults.unit``), with ``decimals`` or about
    three significant digits. Units: ``short`` (1.55 K, 2.3 Mil), ``none``, time units ``ns``, ``µs``, ``ms``,
    ``s``, ``m``, ``h``, ``d`` (scaled: 250 ms, 1.5 s, 2 min, 10.3 hour, 3.9 day), ``percentunit`` (0.05 → 5%),
    ``percent`` (5 → 5%), rates ``reqps`` / ``reqpm`` / ``ops`` / ``opm`` / ``rps`` / ``wps`` / ``iops`` /
    ``cps`` / ``hertz`` (short-scaled with their suffix), ``bytes`` (1024-based) / ``decbytes``, and Grafana's
    custom ``suffix:TEXT`` / ``prefix:TEXT``; any other unit string is appended to the short-scaled number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    unit = unit or "short"
    if unit == "none":
        return _fixed(value, decimals)
    if unit == "short":
        return _scaled(value, 1000.0, _SHORT, decimals)
    if unit in _TIME_UNITS:
        secs = value * _TIME_UNITS[unit]
        if secs == 0:
            return "0" + (" s" if unit in ("s", "m", "h", "d") else f" {unit}")
        for bound, div, suffix in _TIME_STEPS:
            if abs(secs) < bound:
                return _fixed(secs / div, decimals) + suffix
    if unit == "percentunit":
        return _fixed(value * 100, decimals) + "%"
    if unit == "percent":
        return _fixed(value, decimals) + "%"
    if unit in _RATE_SUFFIX:
        return _scaled(value, 1000.0, _SHORT, decimals) + _RATE_SUFFIX[unit]
    if unit in ("bytes", "decbytes"):
        names = _BYTES if unit == "bytes" else _DECBYTES
        return _scaled(value, 1024.0 if unit == "bytes" else 1000.0, [" " + n for n in names], decimals)
    if unit.startswith("suffix:"):
        return _scaled(value, 1000.0, _SHORT, decimals) + unit[len("suffix:") :]
    if unit.startswith("prefix:"):
        return unit[len("prefix:") :] + _scaled(value, 1000.0, _SHORT, decimals)
    return _scaled(value, 1000.0, _SHORT, decimals) + " " + unit


def tick_labels(ticks: Sequence[float], unit: str | None) -> list[str]:
    """Labels for axis ticks in ``unit``: the fewest decimals (0–4) that keep every label distinct."""
    for d in range(5):
        labels = [format_value(t, unit, d) for t in ticks]
        if len(set(labels)) == len(labels):
            return labels
    return [format_value(t, unit, 4) for t in ticks]


# -- series -------------------------------------------------------------------------------------------------------
@dataclass
class _Series:
    name: str
    ref_id: str
    labels: dict[str, str]
    t: list[float]
    v: list[float]

    def finite(self) -> list[tuple[float, float]]:
        return [(t, v) for t, v in zip(self.t, self.v, strict=True) if math.isfinite(v)]


def _to_float(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _natural_key(text: str) -> list[Any]:
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p]


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


# -- layout ------------------------------------------------------------------------------------------------------
@dataclass
class _Section:
    title: str
    panels: list[dict[str, Any]]


def _sections(dashboard: dict[str, Any]) -> list[_Section]:
    """Panels in grid order, grouped under their rows (a collapsed row's own ``panels`` included)."""
    flat: list[dict[str, Any]] = []
    for p in dashboard.get("panels", []):
        flat.append(p)
        if p.get("type") == "row" and p.get("collapsed"):
            flat.extend(p.get("panels") or [])

    def pos(p: dict[str, Any]) -> tuple[int, int]:
        g = p.get("gridPos") or {}
        return int(g.get("y", 0)), int(g.get("x", 0))

    flat.sort(key=pos)
    sections: list[_Section] = []
    for p in flat:
        if p.get("type") == "row":
            sections.append(_Section(str(p.get("title") or "Row"), []))
        else:
            if not sections:
                sections.append(_Section(str(dashboard.get("title") or "Dashboard"), []))
            sections[-1].panels.append(p)
    return [s for s in sections if s.panels]


def _slug(title: str) -> str:
    head = title.split("(", 1)[0]
    return re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-")[:40] or "row"


def _colour(c: str | None, default: str) -> str:
    if not c:
        return default
    if c in _NAMED_COLOURS:
        return _NAMED_COLOURS[c]
    m = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*[\d.]+)?\)", c.strip())
    if m:
        return "#{:02x}{:02x}{:02x}".format(*(int(g) for g in m.groups()))
    from matplotlib.colors import is_color_like

    return c if is_color_like(c) else default


def _overrides_for(panel: dict[str, Any], s: _Series) -> dict[str, Any]:
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


class _Canvas:
    """One row image: a matplotlib Figure (Agg) in inches, y measured from the top."""

    def __init__(self, width: float, height: float, dpi: int) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.w, self.h, self.dpi = width, height, dpi
        self.fig: Figure = Figure(figsize=(width, height), dpi=dpi, facecolor=_BG)
        self.agg = FigureCanvasAgg(self.fig)
        self.renderer: RendererBase = self.agg.get_renderer()

    def rect(self, x: float, top: float, w: float, h: float) -> tuple[float, float, float, float]:
        """Figure fractions (left, bottom, width, height) of a box given in inches from the top-left."""
        return (x / self.w, 1 - (top + h) / self.h, w / self.w, h / self.h)

    def text(self, x: float, top: float, s: str, **kw: Any) -> Any:
        kw.setdefault("color", _TEXT)
        kw.setdefault("family", _FONT)
        kw.setdefault("parse_math", False)  # "$model" is text, not mathtext
        return self.fig.text(x / self.w, 1 - top / self.h, s, **kw)

    def width_of(self, artist: Any) -> float:
        """Width in inches of a text artist as drawn."""
        return float(artist.get_window_extent(self.renderer).width) / self.dpi

    def box(self, x: float, top: float, w: float, h: float) -> None:
        from matplotlib.patches import FancyBboxPatch

        left, b, fw, fh = self.rect(x, top, w, h)
        self.fig.add_artist(
            FancyBboxPatch(
                (left, b), fw, fh, boxstyle="round,pad=0,rounding_size=0.004", transform=self.fig.transFigure,
                facecolor=_PANEL_BG, edgecolor=_BORDER, linewidth=0.8, zorder=0,
            )
        )  # fmt: skip


@dataclass
class _Annotation:
    name: str
    colour: str
    marks: list[tuple[float, str]]  # (epoch seconds, title)


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
    if unit in _TIME_UNITS:
        secs = max(abs(lo), abs(hi)) * _TIME_UNITS[unit]
        div = next(d for bound, d, _ in _TIME_STEPS if secs < bound) / _TIME_UNITS[unit]
        if div >= 60 / _TIME_UNITS[unit] * 0.999 and div < 86400 / _TIME_UNITS[unit]:
            steps = [1, 1.5, 2, 3, 5, 6, 10]  # minutes and hours: 15, 30 rather than 25
        t = MaxNLocator(nbins=n, steps=steps).tick_values(lo / div, hi / div)
        return [float(x) * div for x in t]
    return [float(x) for x in MaxNLocator(nbins=n, steps=steps).tick_values(lo, hi)]


# -- drawing panels --------------------------------------------------------------------------------------------
def _panel_frame(cv: _Canvas, panel: dict[str, Any], x: float, top: float, w: float, h: float) -> None:
    cv.box(x, top, w, h)
    title = str(panel.get("title") or "")
    t = cv.text(x + 0.1, top + 0.09, title, fontsize=9.5, fontweight="bold", va="top")
    if cv.width_of(t) > w - 0.2:  # shorten a title wider than its panel
        while len(title) > 4 and cv.width_of(t) > w - 0.2:
            title = title[:-2]
            t.set_text(title + "…")


def _message(cv: _Canvas, x: float, top: float, w: float, h: float, text: str, colour: str = _TEXT_DIM) -> None:
    wrapped = "\n".join(textwrap.wrap(text, max(20, int(w * 13)))[:6])
    cv.text(x + w / 2, top + h / 2, wrapped, fontsize=9, ha="center", va="center", color=colour)


def _legend(cv: _Canvas, entries: list[tuple[str, dict[str, Any]]], x: float, w: float, bottom: float) -> float:
    """Draw a Grafana list legend (line sample + name, flowing left to right) whose last line ends at
    ``bottom`` (inches from the top); return its height in inches. ``entries``: (name, line style)."""
    from matplotlib.lines import Line2D

    if not entries:
        return 0.0
    line_h, handle, pad = 0.19, 0.22, 0.16
    texts = [cv.text(0, 0, name, fontsize=8, va="center", color=_TEXT) for name, _ in entries]
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
    ax.tick_params(colors=_TEXT_DIM, labelsize=7.5, length=0, pad=4)
    ax.grid(True, color=_GRID, linewidth=0.7)
    ax.set_axisbelow(True)


def _draw_timeseries(
    cv: _Canvas,
    panel: dict[str, Any],
    series: list[_Series],
    box: tuple[float, float, float, float],
    rng: tuple[float, float],
    annotations: list[_Annotation],
    step: float,
) -> None:
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
            "color": _colour(colour_cfg.get("fixedColor") if isinstance(colour_cfg, dict) else None,
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
        _message(cv, x, top + 0.3, w, h - 0.3, "No data")
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
                        va="top", fontsize=6.2, color=ann.colour, family=_FONT, parse_math=False)  # fmt: skip


def _draw_stat(
    cv: _Canvas, panel: dict[str, Any], series: list[_Series], box: tuple[float, float, float, float]
) -> None:
    x, top, w, h = box
    defaults = (panel.get("fieldConfig") or {}).get("defaults") or {}
    unit, decimals = defaults.get("unit"), defaults.get("decimals")
    opts = panel.get("options") or {}
    calcs = (opts.get("reduceOptions") or {}).get("calcs") or ["lastNotNull"]
    text_mode = opts.get("textMode", "auto")
    cells = [(s, _reduce(s.finite(), str(calcs[0]))) for s in series if s.finite()]
    if not cells:
        _message(cv, x, top + 0.3, w, h - 0.3, "No data")
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
    colour = _NAMED_COLOURS["green"]
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
            cv.text(cx + cw / 2, cy + ch * 0.1, s.name, fontsize=name_fs, ha="center", va="top", color=_TEXT_DIM)
        if text_mode != "name":
            vy = cy + ch * (0.62 if show_name else 0.5)
            cv.text(cx + cw / 2, vy, vt, fontsize=value_fs, ha="center", va="center", fontweight="bold")


def _draw_panel(
    cv: _Canvas,
    panel: dict[str, Any],
    series: list[_Series],
    errors: list[str],
    box: tuple[float, float, float, float],
    rng: tuple[float, float],
    annotations: list[_Annotation],
    step: float,
) -> None:
    x, top, w, h = box
    _panel_frame(cv, panel, x, top, w, h)
    kind = panel.get("type")
    if errors and not any(s.finite() for s in series):
        _message(cv, x, top + 0.3, w, h - 0.3, "Query error: " + errors[0], _NAMED_COLOURS["red"])
    elif kind in ("timeseries", "graph"):
        _draw_timeseries(cv, panel, series, box, rng, annotations, step)
    elif kind in ("stat", "gauge", "bargauge"):
        _draw_stat(cv, panel, series, box)
    elif kind == "text":
        content = str((panel.get("options") or {}).get("content") or panel.get("content") or "")
        _message(cv, x, top + 0.3, w, h - 0.3, re.sub(r"[#*_`>]", "", content), _TEXT)
    else:
        _message(cv, x, top + 0.3, w, h - 0.3, f"panel type {kind!r}: not rendered by harness/panels.py")


def _caption(start: float, end: float, prometheus_url: str, source: str, variables: dict[str, str],
             builtins: dict[str, str], scrape: float, extra: str | None) -> str:  # fmt: skip
    t0 = datetime.fromtimestamp(start, UTC)
    t1 = datetime.fromtimestamp(end, UTC)
    span = f"{t0:%Y-%m-%d %H:%M:%S}–{t1:%H:%M:%S} UTC" if t0.date() == t1.date() else f"{t0:%F %T}–{t1:%F %T} UTC"
    var = ", ".join(f"${k}={v}" for k, v in variables.items())
    text = (
        f"Rendered by harness/panels.py from {source}'s PromQL against Prometheus at {prometheus_url}, "
        f"{span} (query step {builtins['__interval']}, scrape interval {format_duration(scrape)}, "
        f"$__rate_interval={builtins['__rate_interval']}{'; ' + var if var else ''}). Not a Grafana screenshot."
    )
    return text + (" " + extra if extra else "")


# -- the renderer -----------------------------------------------------------------------------------------------
def render_dashboard(
    dashboard: dict[str, Any],
    prometheus_url: str,
    start: float,
    end: float,
    variables: dict[str, str],
    out: Path,
    step: float | None = None,
    *,
    scrape_interval: float | None = None,
    query: QueryFn | None = None,
    caption: str | None = None,
    source: str = DEFAULT_SOURCE,
    dpi: int = 100,
    width: float = FIG_W,
) -> RenderResult:
    """Render every non-row panel of ``dashboard`` (a Grafana dashboard JSON, parsed) over [``start``, ``end``]
    (epoch seconds) into ``out`` as one PNG per row, ``NN-<row>.png``; return which targets returned data.

    ``variables``: template variable values (e.g. ``{"model": "sim-reasoner", "window": "30s"}``); see
    :func:`resolve_variables`. ``step``: the query step in seconds (default: about 800 points over the range,
    never below the scrape interval, as Grafana's ``$__interval``). ``scrape_interval`` (seconds) sets
    ``$__rate_interval``; by default Prometheus' own ``global.scrape_interval`` (15 s if it cannot be read).
    ``query`` replaces the HTTP calls to ``prometheus_url`` (tests); ``caption`` is appended to the caption
    under each image; ``source`` is the dashboard's path as named in the caption; ``dpi`` and ``width``
    (inches) size the images. A query Prometheus rejects is recorded in its :class:`TargetResult` and drawn
    as an error in its panel; Prometheus unreachable raises :class:`PrometheusUnavailable`."""
    if end <= start:
        raise ValueError(f"empty time range: start {start} >= end {end}")
    if scrape_interval is None:
        scrape_interval = (prometheus_scrape_interval(prometheus_url) if query is None else None) or 15.0
    if step is None:
        step = default_step(start, end, scrape_interval)
    run_query = query or prometheus_query_range(prometheus_url)
    user_vars = resolve_variables(dashboard, variables)
    builtins = _builtins(start, end, step, scrape_interval)
    all_vars = {**user_vars, **builtins}
    out.mkdir(parents=True, exist_ok=True)

    annotations = _query_annotations(dashboard, all_vars, run_query, start, end, step)
    results: list[PanelResult] = []
    images: list[Path] = []
    caption_text = _caption(start, end, prometheus_url, source, user_vars, builtins, scrape_interval, caption)
    for n, section in enumerate(_sections(dashboard), start=1):
        path = out / f"{n:02d}-{_slug(section.title)}.png"
        data: list[tuple[dict[str, Any], list[_Series], list[str], PanelResult]] = []
        for panel in section.panels:
            pr = PanelResult(int(panel.get("id", 0)), str(panel.get("title", "")), str(panel.get("type", "")),
                             section.title, image=str(path))  # fmt: skip
            series: list[_Series] = []
            errors: list[str] = []
            for target in panel.get("targets") or []:
                if target.get("hide") or "expr" not in target:
                    continue
                expr = substitute(str(target["expr"]), all_vars)
                tr = TargetResult(str(target.get("refId", "")), str(target.get("legendFormat") or ""), expr)
                try:
                    raw = run_query(expr, start, end, step)
                except QueryError as e:
                    tr.error = str(e)
                    errors.append(str(e))
                    raw = []
                mine = [
                    _Series(legend_name(target.get("legendFormat"), s.get("metric") or {}, expr), tr.ref_id,
                            dict(s.get("metric") or {}), [float(p[0]) for p in s.get("values") or []],
                            [_to_float(p[1]) for p in s.get("values") or []])
                    for s in raw
                ]  # fmt: skip
                mine.sort(key=lambda s: _natural_key(s.name))
                tr.series = len(mine)
                tr.series_names = [s.name for s in mine]
                tr.has_data = any(s.finite() for s in mine)
                series.extend(mine)
                pr.targets.append(tr)
            data.append((panel, series, errors, pr))
            results.append(pr)
        _draw_section(path, section, data, (start, end), annotations, step, caption_text, dpi, width)
        images.append(path)
    return RenderResult(
        panels=results,
        images=images,
        annotations={a.name: len(a.marks) for a in annotations},
        variables=all_vars,
        start=start,
        end=end,
        step=step,
        scrape_interval=scrape_interval,
    )


def _query_annotations(
    dashboard: dict[str, Any], variables: dict[str, str], run_query: QueryFn, start: float, end: float, step: float
) -> list[_Annotation]:
    """The dashboard's enabled, visible Prometheus annotations: a mark per distinct time (the value, in ms,
    with ``useValueForTime``; else each series' first non-zero sample), titled by ``titleFormat``."""
    out: list[_Annotation] = []
    for a in (dashboard.get("annotations") or {}).get("list") or []:
        if not a.get("expr") or a.get("enable") is False or a.get("hide"):
            continue
        ann_step = step
        if a.get("step"):
            try:
                ann_step = min(step, parse_duration(substitute(str(a["step"]), variables)))
            except ValueError:
                pass
        try:
            raw = run_query(substitute(str(a["expr"]), variables), start, end, ann_step)
        except QueryError:
            raw = []
        marks: dict[float, str] = {}
        for s in raw:
            metric = s.get("metric") or {}
            title = legend_name(a.get("titleFormat") or "{{__name__}}", metric)
            for t, v in s.get("values") or []:
                fv = _to_float(v)
                if not math.isfinite(fv) or fv == 0:
                    continue
                when = fv / 1000 if a.get("useValueForTime") else float(t)
                marks.setdefault(round(when, 3), title)
                if not a.get("useValueForTime"):
                    break
        out.append(_Annotation(str(a.get("name", "")), _colour(a.get("iconColor"), "#FF9830"), sorted(marks.items())))
    return out


def _draw_section(
    path: Path,
    section: _Section,
    data: list[tuple[dict[str, Any], list[_Series], list[str], PanelResult]],
    rng: tuple[float, float],
    annotations: list[_Annotation],
    step: float,
    caption: str,
    dpi: int,
    width: float,
) -> None:
    grid = [p.get("gridPos") or {"x": 0, "y": 0, "w": 12, "h": 8} for p, *_ in data]
    y0 = min(int(g.get("y", 0)) for g in grid)
    rows_h = max(int(g.get("y", 0)) + int(g.get("h", 8)) for g in grid) - y0
    col_w = (width - 2 * _MARGIN) / 24
    cap_lines = textwrap.wrap(caption, int(width * 15.5))
    footer_h = 0.12 + 0.17 * len(cap_lines)
    height = _HEADER_H + rows_h * UNIT_H + footer_h
    cv = _Canvas(width, height, dpi)
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
            color=_TEXT_DIM, linespacing=1.35)  # fmt: skip
    cv.fig.savefig(path, dpi=dpi, facecolor=_BG, metadata={"Software": "harness/panels.py (matplotlib)"})


# -- command line --------------------------------------------------------------------------------------------------
def build_parser(prog: str = "llmload panels") -> argparse.ArgumentParser:
    """The argument parser of ``llmload panels``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Render the Grafana dashboard's panels (PNG, one per row) from the dashboard JSON's own PromQL "
        "against a real Prometheus. Not Grafana: matplotlib drawings of the query results, captioned as such.",
    )
    p.add_argument("--dashboard", default=DEFAULT_SOURCE, help="dashboard JSON [%(default)s]")
    p.add_argument("--prometheus", default="http://127.0.0.1:9090", metavar="URL", help="Prometheus [%(default)s]")
    p.add_argument("--start", metavar="T", help="epoch seconds, ISO 8601 (UTC), now-15m or 'last 15 minutes' "
                   "[the dashboard's time.from, e.g. now-3h]")  # fmt: skip
    p.add_argument("--end", metavar="T", help="as --start [now]")
    p.add_argument("--last", metavar="DURATION", help="shorthand for --start now-DURATION --end now (15m, 2h)")
    p.add_argument("--model", help="the $model variable [the only model in llmload_run_info, else all: .*]")
    p.add_argument("--window", help="the $window (rate window) variable, e.g. 30s [the dashboard's current: 5m]")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="any other variable")
    p.add_argument("--step", type=parse_duration, metavar="S", help="query step [about 800 points, >= scrape]")
    p.add_argument("--scrape-interval", type=parse_duration, metavar="S",
                   help="for $__rate_interval [Prometheus' own global.scrape_interval]")  # fmt: skip
    p.add_argument("--out", default="panels", metavar="DIR", help="output directory [%(default)s]")
    p.add_argument("--caption", help="text appended to each image's caption (which run, settings)")
    p.add_argument("--dpi", type=int, default=100, help="[%(default)s]")
    p.add_argument("--json", action="store_true", help="print the result (per panel and target) as JSON")
    p.add_argument("--require-data", action="store_true", help="exit 1 when a target returned no data")
    return p


def _only_model(prometheus_url: str) -> str | None:
    """The model label of llmload_run_info when Prometheus holds exactly one."""
    params = urllib.parse.urlencode({"match[]": "llmload_run_info"})
    try:
        models = _prometheus_get(f"{prometheus_url.rstrip('/')}/api/v1/label/model/values?{params}", None, 10)
    except QueryError:
        return None
    return str(models[0]) if isinstance(models, list) and len(models) == 1 else None


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it is inside it (for the caption)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def main(argv: Sequence[str] | None = None) -> int:
    """``llmload panels``: render the dashboard's panels; exit 0, 1 (``--require-data`` and a target without
    data), 2 (bad arguments, unreadable dashboard, Prometheus unreachable)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        dashboard = json.loads(Path(args.dashboard).read_text())
        now = time.time()
        t = dashboard.get("time") or {}
        if args.last:
            start, end = now - parse_duration(args.last), now
        else:
            start = parse_time(args.start or str(t.get("from", "now-3h")), now)
            end = parse_time(args.end or str(t.get("to", "now")), now)
        variables = dict(v.split("=", 1) for v in args.var)
        model = args.model or variables.get("model") or _only_model(args.prometheus)
        if model:
            variables["model"] = model
        if args.window:
            variables["window"] = args.window
        res = render_dashboard(
            dashboard, args.prometheus, start, end, variables, Path(args.out), args.step,
            scrape_interval=args.scrape_interval, caption=args.caption, source=_shown_path(args.dashboard),
            dpi=args.dpi,
        )  # fmt: skip
    except (OSError, ValueError) as e:
        sys.stderr.write(f"llmload panels: {e}\n")
        return 2
    except ImportError as e:
        sys.stderr.write(f"llmload panels needs matplotlib (pip install matplotlib): {e}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(res.to_dict(), indent=2) + "\n")
    else:
        for p in res.panels:
            got = sum(t.has_data for t in p.targets)
            errs = [t.error for t in p.targets if t.error]
            flag = "" if got == len(p.targets) else ("  NO DATA" if not got else "  partly no data")
            sys.stdout.write(f"{p.row[:24]:24}  {p.title[:44]:44}  {got}/{len(p.targets)} targets with data{flag}\n")
            for err in errs:
                sys.stdout.write(f"    error: {err}\n")
        for name, n in res.annotations.items():
            sys.stdout.write(f"annotation {name}: {n} markers\n")
        for img in res.images:
            sys.stdout.write(f"wrote {img} ({img.stat().st_size // 1024} KiB)\n")
    return 1 if args.require_data and res.without_data() else 0


if __name__ == "__main__":
    raise SystemExit(main())
