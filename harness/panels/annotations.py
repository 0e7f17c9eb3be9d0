"""The dashboard's Prometheus annotations (e.g. llmload's step markers), queried into marks: a time and a title."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.panels.prometheus import QueryError, QueryFn
from harness.panels.series import legend_name, to_float
from harness.panels.theme import grafana_colour
from harness.panels.times import parse_duration
from harness.panels.variables import substitute


@dataclass
class Annotation:
    """One dashboard annotation: its name, its colour, its marks and Prometheus' error if it rejected the query."""

    name: str
    colour: str
    marks: list[tuple[float, str]]  # (epoch seconds, title)
    error: str | None = None


def query_annotations(
    dashboard: dict[str, Any], variables: dict[str, str], run_query: QueryFn, start: float, end: float, step: float
) -> list[Annotation]:
    """The dashboard's enabled, visible Prometheus annotations: a mark per distinct time (the value, in ms,
    with ``useValueForTime``; else each series' first non-zero sample), titled by ``titleFormat``."""
    out: list[Annotation] = []
    for a in (dashboard.get("annotations") or {}).get("list") or []:
        if not a.get("expr") or a.get("enable") is False or a.get("hide"):
            continue
        ann_step = step
        if a.get("step"):
            try:
                ann_step = min(step, parse_duration(substitute(str(a["step"]), variables)))
            except ValueError:
                pass
        # Prometheus answers at most 11,000 points per series: over a long range the annotation's own step
        # (the dashboard's 10s) is raised, as Grafana does.
        ann_step = max(ann_step, (end - start) / 10_000)
        error = None
        try:
            raw = run_query(substitute(str(a["expr"]), variables), start, end, ann_step)
        except QueryError as e:
            raw, error = [], str(e)
        marks: dict[float, str] = {}
        for s in raw:
            metric = s.get("metric") or {}
            title = legend_name(a.get("titleFormat") or "{{__name__}}", metric)
            for t, v in s.get("values") or []:
                fv = to_float(v)
                if not math.isfinite(fv) or fv == 0:
                    continue
                when = fv / 1000 if a.get("useValueForTime") else float(t)
                marks.setdefault(round(when, 3), title)
                if not a.get("useValueForTime"):
                    break
        colour = grafana_colour(a.get("iconColor"), "#FF9830")
        out.append(Annotation(str(a.get("name", "")), colour, sorted(marks.items()), error))
    return out
