"""Render a dashboard's panels over a time range into PNGs, one per row (:func:`render_dashboard`): variables
substituted, every target queried, results reported per panel and target."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.panels.annotations import query_annotations
from harness.panels.draw import FIG_W, draw_section
from harness.panels.prometheus import QueryError, QueryFn, prometheus_query_range, prometheus_scrape_interval
from harness.panels.results import PanelResult, RenderResult, TargetResult
from harness.panels.rows import sections_of, slug
from harness.panels.series import Series, legend_name, natural_key, to_float
from harness.panels.times import format_duration
from harness.panels.variables import builtin_variables, default_step, resolve_variables, substitute

DEFAULT_SOURCE = "grafana/dashboards/llmload.json"


def _caption(start: float, end: float, prometheus_url: str, source: str, variables: dict[str, str],
             builtins: dict[str, str], scrape: float, extra: str | None) -> str:  # fmt: skip
    t0 = datetime.fromtimestamp(start, UTC)
    t1 = datetime.fromtimestamp(end, UTC)
    span = f"{t0:%Y-%m-%d %H:%M:%S}–{t1:%H:%M:%S} UTC" if t0.date() == t1.date() else f"{t0:%F %T}–{t1:%F %T} UTC"
    var = ", ".join(f"${k}={v}" for k, v in variables.items())
    text = (
        f"Rendered by harness/panels (llmload panels) from {source}'s PromQL against Prometheus at {prometheus_url}, "
        f"{span} (query step {builtins['__interval']}, scrape interval {format_duration(scrape)}, "
        f"$__rate_interval={builtins['__rate_interval']}{'; ' + var if var else ''}). Not a Grafana screenshot."
    )
    return text + (" " + extra if extra else "")


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
    builtins = builtin_variables(start, end, step, scrape_interval)
    all_vars = {**user_vars, **builtins}
    out.mkdir(parents=True, exist_ok=True)

    annotations = query_annotations(dashboard, all_vars, run_query, start, end, step)
    results: list[PanelResult] = []
    images: list[Path] = []
    caption_text = _caption(start, end, prometheus_url, source, user_vars, builtins, scrape_interval, caption)
    for n, section in enumerate(sections_of(dashboard), start=1):
        path = out / f"{n:02d}-{slug(section.title)}.png"
        data: list[tuple[dict[str, Any], list[Series], list[str], PanelResult]] = []
        for panel in section.panels:
            pr = PanelResult(int(panel.get("id", 0)), str(panel.get("title", "")), str(panel.get("type", "")),
                             section.title, image=str(path))  # fmt: skip
            series: list[Series] = []
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
                    Series(legend_name(target.get("legendFormat"), s.get("metric") or {}, expr), tr.ref_id,
                           dict(s.get("metric") or {}), [float(p[0]) for p in s.get("values") or []],
                           [to_float(p[1]) for p in s.get("values") or []])
                    for s in raw
                ]  # fmt: skip
                mine.sort(key=lambda s: natural_key(s.name))
                tr.series = len(mine)
                tr.series_names = [s.name for s in mine]
                tr.has_data = any(s.finite() for s in mine)
                series.extend(mine)
                pr.targets.append(tr)
            data.append((panel, series, errors, pr))
            results.append(pr)
        draw_section(path, section, data, (start, end), annotations, step, caption_text, dpi, width)
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
        annotation_errors={a.name: a.error for a in annotations if a.error},
    )
