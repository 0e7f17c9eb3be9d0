"""Number, time and prose formatting shared by the report's Markdown, HTML header and terminal summary.

One helper per kind of value, so every column of a kind reads the same way:

* :func:`sig3`: 3 significant digits, the integer part never rounded (0.194, 1.76, 17.6, 176, 1,764, 12,346); used
  for rates (req/s), throughputs (tok/s), latencies in seconds (TTFT, TTFAT, E2E), TPOT and gaps in milliseconds
  (:func:`seconds`, :func:`millis`, :func:`rate`, :func:`tps`) and hours to N (:func:`hours`).
* :func:`usd`: US dollars, ``$`` and 3 significant digits like :func:`sig3` ($0.0123, $7.82, $782, $1,735).
* :func:`pct`: percentages with one decimal (12.3); :func:`count`: integers with thousands separators (1,235).
* :func:`wall_time`: a wall time with its UTC offset, in the local zone of the process that renders
  (``2026-12-01 14:37:07 UTC+00:00``), so a report rebuilt elsewhere still names its instant unambiguously.
* :func:`wrap_markdown`: prose lines wrapped at 120 characters, keeping list and quote markers (tables untouched).

Missing values (None) render as an en dash; ``report.json`` is never rounded (these are display helpers only).
"""

from __future__ import annotations

import math
import re
from datetime import datetime

__all__ = [
    "DASH", "MAX_WIDTH", "count", "hours", "millis", "pct", "rate", "seconds", "sig3", "tps", "usd", "wall_time",
    "wrap_markdown",
]  # fmt: skip

#: What a missing value renders as.
DASH = "–"
#: Widest line (characters) of the Markdown prose and of the terminal summary.
MAX_WIDTH = 120


def sig3(v: float | None) -> str:
    """``v`` with 3 significant digits, the integer part never rounded, thousands separated.

    0.000123 → ``0.000123``, 0.04 → ``0.0400``, 0.1939 → ``0.194``, 1.756 → ``1.76``, 17.6 → ``17.6``,
    176.4 → ``176``, 99.96 → ``100``, 12345.67 → ``12,346``; 0 → ``0``; None → ``–``; ±inf → ``∞`` / ``-∞``;
    NaN → ``–``.
    """
    if v is None or math.isnan(v):
        return DASH
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if v == 0:
        return "0"
    if abs(v) >= 99.95:  # three integer digits or more (99.96 rounds up to 100): no decimals
        return f"{v:,.0f}"
    r = float(f"{v:.3g}")  # rounding first: 9.996 → 10.0 keeps 3 significant digits, not 4
    decimals = max(0, 2 - math.floor(math.log10(abs(r))))
    return f"{r:,.{decimals}f}"


def seconds(v_s: float | None) -> str:
    """A latency in seconds (TTFT, TTFAT, E2E) as seconds, 3 significant digits (:func:`sig3`)."""
    return sig3(v_s)


def millis(v_s: float | None) -> str:
    """A duration given in seconds (TPOT, inter-chunk gap) shown in milliseconds, 3 significant digits."""
    return DASH if v_s is None else sig3(v_s * 1000.0)


def rate(v: float | None) -> str:
    """Requests per second, 3 significant digits (0.194, 1.76, 17.6, 176)."""
    return sig3(v)


def tps(v: float | None) -> str:
    """Tokens per second (aggregate or per stream), 3 significant digits (9.10, 91.0, 910, 12,346)."""
    return sig3(v)


def hours(v_h: float | None) -> str:
    """Hours (hours to N), 3 significant digits; None (no upper bound) renders as ``∞``."""
    return "∞" if v_h is None else sig3(v_h)


def usd(v: float | None) -> str:
    """US dollars with 3 significant digits (:func:`sig3`), thousands separated: 781.77 → ``$782``, 1735.2 →
    ``$1,735``, 7.8249 → ``$7.82``, 0.012345 → ``$0.0123``; None → ``–``."""
    return DASH if v is None else ("-$" if v < 0 else "$") + sig3(abs(v))


def pct(v: float | None) -> str:
    """A percentage (0..100) with one decimal: 12.34 → ``12.3``; None → ``–``."""
    return DASH if v is None else f"{v:.1f}"


def count(v: float | None) -> str:
    """A count or mean count (tokens, requests) as an integer with thousands separators: 1234.6 → ``1,235``."""
    return DASH if v is None else f"{v:,.0f}"


def wall_time(t: float | None) -> str:
    """Epoch seconds as local ``YYYY-MM-DD HH:MM:SS UTC±HH:MM`` (the renderer's zone and its offset); ``?`` when
    unknown."""
    if t is None:
        return "?"
    dt = datetime.fromtimestamp(float(t)).astimezone()
    return f"{dt:%Y-%m-%d %H:%M:%S} UTC{dt.isoformat()[-6:]}"


#: A word that would open a block (list item, heading, quote, table row, setext underline) at a line's start.
_BLOCK_START = re.compile(r"^(?:[-+*>#=|]|\d+[.)]|```|~~~)")
#: The markers a wrapped line keeps: list bullets continue indented, quotes continue quoted.
_MARKER = re.compile(r"^(\s*(?:[-+*]|\d+[.)]) |\s*> ?)")


def _wrap_line(line: str, width: int) -> list[str]:
    m = _MARKER.match(line)
    first = m.group(1) if m else ""
    rest = (">" + " " * (len(first.strip()) and 1)) if first.strip().startswith(">") else " " * len(first)
    words = line[len(first):].rstrip().split(" ")
    out: list[list[str]] = [[]]
    used = len(first)
    for w in words:
        if out[-1] and used + 1 + len(w) > width:
            if _BLOCK_START.match(w) and len(out[-1]) > 1:
                carried = out[-1].pop()  # never start a line with a block marker: carry the word before it along
                out.append([carried])
                used = len(rest) + len(carried)
            else:
                out.append([])
                used = len(rest)
        used += (1 if out[-1] else 0) + len(w)
        out[-1].append(w)
    return [(first if i == 0 else rest) + " ".join(ws) for i, ws in enumerate(out)]


def wrap_markdown(text: str, width: int = MAX_WIDTH) -> str:
    """``text`` (Markdown) with every prose line longer than ``width`` characters wrapped at spaces.

    Table rows (``|``), headings (``#``) and indented code are kept as they are; a list item continues indented
    under its text, a quote continues quoted, and no wrapped line starts with a character that would open a new
    block (``-``, ``#``, ``>``, ``1.``, a code fence...), so the rendering is unchanged. A single word longer than
    ``width`` (a long URL) stays whole on its own line.
    """
    lines: list[str] = []
    for line in text.split("\n"):
        if len(line) <= width or line.startswith(("|", "#", "    ", "\t")):
            lines.append(line)
        else:
            lines += _wrap_line(line, width)
    return "\n".join(lines)
