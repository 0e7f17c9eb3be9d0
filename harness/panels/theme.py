"""Grafana's dark theme, roughly: background, panel and text colours, font, the classic palette, and the colours
a dashboard may name (``green``, ``rgba(...)``, or any matplotlib colour)."""

from __future__ import annotations

import re

FONT = "DejaVu Sans"

# Grafana's dark theme, roughly.
BG = "#111217"
PANEL_BG = "#181b1f"
BORDER = "#2c3235"
TEXT = "#ccccdc"
TEXT_DIM = "#8e8e9a"
GRID = "#2a2d33"
#: Grafana's classic palette, in its order.
PALETTE = [
    "#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0",
    "#508642", "#CCA300", "#447EBC", "#C15C17", "#890F02", "#0A437C", "#6D1F62", "#584477",
]  # fmt: skip
NAMED_COLOURS = {
    "green": "#73BF69", "yellow": "#FADE2A", "red": "#F2495C", "orange": "#FF9830", "blue": "#5794F2",
    "purple": "#B877D9", "dark-orange": "#E55400", "super-light-orange": "#FFCB7D", "text": TEXT,
}  # fmt: skip


def grafana_colour(c: str | None, default: str) -> str:
    """A dashboard's colour (a Grafana name such as ``green``, ``rgb(...)`` / ``rgba(...)``, or any colour
    matplotlib knows) as matplotlib takes it; ``default`` when none is given or it is not a colour."""
    if not c:
        return default
    if c in NAMED_COLOURS:
        return NAMED_COLOURS[c]
    m = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*[\d.]+)?\)", c.strip())
    if m:
        return "#{:02x}{:02x}{:02x}".format(*(int(g) for g in m.groups()))
    from matplotlib.colors import is_color_like

    return c if is_color_like(c) else default
