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

Modules: :mod:`~harness.panels.render` (:func:`render_dashboard`), :mod:`~harness.panels.results` (what it
reports), :mod:`~harness.panels.variables` and :mod:`~harness.panels.times` (template variables, built-ins,
durations and times), :mod:`~harness.panels.prometheus` (the HTTP API), :mod:`~harness.panels.series` (legend
names), :mod:`~harness.panels.units` (Grafana units), :mod:`~harness.panels.annotations`, drawing:
:mod:`~harness.panels.rows`, :mod:`~harness.panels.draw`, :mod:`~harness.panels.timeseries`,
:mod:`~harness.panels.stat`, :mod:`~harness.panels.canvas`, :mod:`~harness.panels.theme`; and
:mod:`~harness.panels.cli` (``llmload panels``).
"""

from harness.panels.cli import build_parser as build_parser
from harness.panels.cli import main
from harness.panels.draw import FIG_W as FIG_W
from harness.panels.draw import UNIT_H as UNIT_H
from harness.panels.prometheus import (
    NotPrometheus,
    PrometheusUnavailable,
    QueryError,
    QueryFn,
    probe_prometheus,
    prometheus_query_range,
)
from harness.panels.prometheus import prometheus_scrape_interval as prometheus_scrape_interval
from harness.panels.render import DEFAULT_SOURCE as DEFAULT_SOURCE
from harness.panels.render import render_dashboard
from harness.panels.results import PanelResult, RenderResult, TargetResult
from harness.panels.series import legend_name
from harness.panels.theme import PALETTE as PALETTE
from harness.panels.times import format_duration, parse_duration, parse_time
from harness.panels.units import format_value
from harness.panels.units import tick_labels as tick_labels
from harness.panels.variables import default_step as default_step
from harness.panels.variables import resolve_variables, substitute

# The names imported ``as`` themselves above are the former harness/panels.py's other public names: importable
# from harness.panels as before, outside ``__all__`` as before.
__all__ = [
    "NotPrometheus",
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
    "probe_prometheus",
    "prometheus_query_range",
    "render_dashboard",
    "resolve_variables",
    "substitute",
]
