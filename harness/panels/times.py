"""Durations and times as Grafana, Prometheus and the command line write them: ``90s``, ``1h30m``, ``15 minutes``,
epoch seconds, ISO 8601, ``now-15m``, ``last 15 minutes``."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

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
    ``now``, ``now-15m`` (Grafana's form) or ``last 15 minutes`` / ``15 minutes ago`` (that long before now).
    Raises ValueError for epoch milliseconds (a number above 1e11)."""
    now = time.time() if now is None else now
    s = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        if float(s) > 1e11:  # past the year 5000 in seconds: 1764450000000 is milliseconds
            raise ValueError(f"{text.strip()} looks like milliseconds; give seconds ({float(s) / 1000:.0f})")
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
