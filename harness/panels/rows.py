"""The dashboard's rows: its panels in grid order, grouped under their row's title (one image per row)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass
class Section:
    """One row image's content: the row's title and its panels in grid order."""

    title: str
    panels: list[dict[str, Any]]


def sections_of(dashboard: dict[str, Any]) -> list[Section]:
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
    sections: list[Section] = []
    for p in flat:
        if p.get("type") == "row":
            sections.append(Section(str(p.get("title") or "Row"), []))
        else:
            if not sections:
                sections.append(Section(str(dashboard.get("title") or "Dashboard"), []))
            sections[-1].panels.append(p)
    return [s for s in sections if s.panels]


def slug(title: str) -> str:
    """A row title as a file-name part: cut at its first ``(``, lower case, dashes, at most 40 characters."""
    head = title.split("(", 1)[0]
    return re.sub(r"[^a-z0-9]+", "-", head.lower()).strip("-")[:40] or "row"
