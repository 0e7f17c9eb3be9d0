"""Series of a range query's answer: their display names (``legendFormat``), values and natural order."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

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


@dataclass
class Series:
    """One series of a target's answer: display name, the target's ``refId``, labels, times (epoch seconds)
    and values (NaN where not a number)."""

    name: str
    ref_id: str
    labels: dict[str, str]
    t: list[float]
    v: list[float]

    def finite(self) -> list[tuple[float, float]]:
        """The (time, value) points whose value is finite."""
        return [(t, v) for t, v in zip(self.t, self.v, strict=True) if math.isfinite(v)]


def to_float(x: Any) -> float:
    """A sample value as Prometheus sends it (``"1.5"``, ``"NaN"``, ``"+Inf"``) as a float; NaN when not a number."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def natural_key(text: str) -> list[Any]:
    """Sort key ordering digits by number: ``C=1``, ``C=8``, ``C=16``."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", text) if p]
