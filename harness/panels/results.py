"""What :func:`harness.panels.render_dashboard` reports: per panel and target, whether Prometheus returned data."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    annotation, the variable values used (built-ins included), the time range (epoch seconds) and step (s), and
    Prometheus' error for each annotation whose query it rejected."""

    panels: list[PanelResult]
    images: list[Path]
    annotations: dict[str, int]
    variables: dict[str, str]
    start: float
    end: float
    step: float
    scrape_interval: float
    annotation_errors: dict[str, str] = field(default_factory=dict)

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
            "annotation_errors": self.annotation_errors,
            "panels": [{**asdict(p), "has_data": p.has_data} for p in self.panels],
        }
