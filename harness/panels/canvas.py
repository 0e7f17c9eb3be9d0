"""One row image as a matplotlib Figure (Agg) measured in inches from the top-left, and a message in a box."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from harness.panels.theme import BG, BORDER, FONT, PANEL_BG, TEXT, TEXT_DIM

if TYPE_CHECKING:
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure


class Canvas:
    """One row image: a matplotlib Figure (Agg) in inches, y measured from the top."""

    def __init__(self, width: float, height: float, dpi: int) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.w, self.h, self.dpi = width, height, dpi
        self.fig: Figure = Figure(figsize=(width, height), dpi=dpi, facecolor=BG)
        self.agg = FigureCanvasAgg(self.fig)
        self.renderer: RendererBase = self.agg.get_renderer()

    def rect(self, x: float, top: float, w: float, h: float) -> tuple[float, float, float, float]:
        """Figure fractions (left, bottom, width, height) of a box given in inches from the top-left."""
        return (x / self.w, 1 - (top + h) / self.h, w / self.w, h / self.h)

    def text(self, x: float, top: float, s: str, **kw: Any) -> Any:
        """A text artist at ``x``, ``top`` (inches from the top-left), in the theme's text colour and font."""
        kw.setdefault("color", TEXT)
        kw.setdefault("family", FONT)
        kw.setdefault("parse_math", False)  # "$model" is text, not mathtext
        return self.fig.text(x / self.w, 1 - top / self.h, s, **kw)

    def width_of(self, artist: Any) -> float:
        """Width in inches of a text artist as drawn."""
        return float(artist.get_window_extent(self.renderer).width) / self.dpi

    def box(self, x: float, top: float, w: float, h: float) -> None:
        """A panel's background and border over a box given in inches from the top-left."""
        from matplotlib.patches import FancyBboxPatch

        left, b, fw, fh = self.rect(x, top, w, h)
        self.fig.add_artist(
            FancyBboxPatch(
                (left, b), fw, fh, boxstyle="round,pad=0,rounding_size=0.004", transform=self.fig.transFigure,
                facecolor=PANEL_BG, edgecolor=BORDER, linewidth=0.8, zorder=0,
            )
        )  # fmt: skip


def draw_message(cv: Canvas, x: float, top: float, w: float, h: float, text: str, colour: str = TEXT_DIM) -> None:
    """``text`` wrapped (at most 6 lines) and centred in a box (``No data``, a query error, a text panel)."""
    wrapped = "\n".join(textwrap.wrap(text, max(20, int(w * 13)))[:6])
    cv.text(x + w / 2, top + h / 2, wrapped, fontsize=9, ha="center", va="center", color=colour)
