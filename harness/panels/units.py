"""Values as Grafana shows them in a panel's unit (``fieldConfig.defaults.unit``): ``short``, time units,
percentages, rates, bytes, ``suffix:`` / ``prefix:``; and axis tick labels."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

# (upper bound in seconds, divisor in seconds, suffix): Grafana's toSeconds/toMilliseconds/toHours family.
TIME_STEPS = [
    (1e-6, 1e-9, " ns"), (1e-3, 1e-6, " µs"), (1.0, 1e-3, " ms"), (60.0, 1.0, " s"), (3600.0, 60.0, " min"),
    (86400.0, 3600.0, " hour"), (604800.0, 86400.0, " day"), (31536000.0, 604800.0, " week"),
    (math.inf, 31536000.0, " year"),
]  # fmt: skip
TIME_UNITS = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_SHORT = ["", " K", " Mil", " Bil", " Tri", " Quadr", " Quint", " Sext", " Sept"]
_RATE_SUFFIX = {"reqps": " req/s", "reqpm": " req/min", "ops": " ops/s", "opm": " ops/min", "rps": " rd/s",
                "wps": " wr/s", "iops": " io/s", "cps": " c/s", "hertz": " Hz"}  # fmt: skip
_BYTES = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
_DECBYTES = ["B", "kB", "MB", "GB", "TB", "PB"]


def _auto_decimals(x: float) -> int:
    """About three significant digits, never more than 3 decimals (Grafana's automatic decimals, roughly)."""
    if x == 0 or not math.isfinite(x):
        return 0
    return int(min(3, max(0, 2 - math.floor(math.log10(abs(x))))))


def _fixed(x: float, decimals: int | None) -> str:
    d = _auto_decimals(x) if decimals is None else decimals
    s = f"{x:.{d}f}"
    return "0" if re.fullmatch(r"-?0(\.0*)?", s) else s


def _scaled(x: float, factor: float, suffixes: Sequence[str], decimals: int | None) -> str:
    i = 0
    while abs(x) >= factor and i < len(suffixes) - 1:
        x /= factor
        i += 1
    return _fixed(x, decimals) + suffixes[i]


def format_value(value: float, unit: str | None, decimals: int | None = None) -> str:
    """``value`` as Grafana shows it in ``unit`` (``fieldConfig.defaults.unit``), with ``decimals`` or about
    three significant digits. Units: ``short`` (1.55 K, 2.3 Mil), ``none``, time units ``ns``, ``µs``, ``ms``,
    ``s``, ``m``, ``h``, ``d`` (scaled: 250 ms, 1.5 s, 2 min, 10.3 hour, 3.9 day), ``percentunit`` (0.05 → 5%),
    ``percent`` (5 → 5%), rates ``reqps`` / ``reqpm`` / ``ops`` / ``opm`` / ``rps`` / ``wps`` / ``iops`` /
    ``cps`` / ``hertz`` (short-scaled with their suffix), ``bytes`` (1024-based) / ``decbytes``, and Grafana's
    custom ``suffix:TEXT`` / ``prefix:TEXT``; any other unit string is appended to the short-scaled number."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    unit = unit or "short"
    if unit == "none":
        return _fixed(value, decimals)
    if unit == "short":
        return _scaled(value, 1000.0, _SHORT, decimals)
    if unit in TIME_UNITS:
        secs = value * TIME_UNITS[unit]
        if secs == 0:
            return "0" + (" s" if unit in ("s", "m", "h", "d") else f" {unit}")
        for bound, div, suffix in TIME_STEPS:
            if abs(secs) < bound:
                return _fixed(secs / div, decimals) + suffix
    if unit == "percentunit":
        return _fixed(value * 100, decimals) + "%"
    if unit == "percent":
        return _fixed(value, decimals) + "%"
    if unit in _RATE_SUFFIX:
        return _scaled(value, 1000.0, _SHORT, decimals) + _RATE_SUFFIX[unit]
    if unit in ("bytes", "decbytes"):
        names = _BYTES if unit == "bytes" else _DECBYTES
        return _scaled(value, 1024.0 if unit == "bytes" else 1000.0, [" " + n for n in names], decimals)
    if unit.startswith("suffix:"):
        return _scaled(value, 1000.0, _SHORT, decimals) + unit[len("suffix:") :]
    if unit.startswith("prefix:"):
        return unit[len("prefix:") :] + _scaled(value, 1000.0, _SHORT, decimals)
    return _scaled(value, 1000.0, _SHORT, decimals) + " " + unit


def tick_labels(ticks: Sequence[float], unit: str | None) -> list[str]:
    """Labels for axis ticks in ``unit``: the fewest decimals (0–4) that keep every label distinct."""
    for d in range(5):
        labels = [format_value(t, unit, d) for t in ticks]
        if len(set(labels)) == len(labels):
            return labels
    return [format_value(t, unit, 4) for t in ticks]
