"""Dashboard template variables: their values (the caller's, the dashboard's ``current``, ``allValue``), their
substitution into expressions, and Grafana's built-ins (``$__interval``, ``$__rate_interval``, ``$__range``...)
for a query step and scrape interval."""

from __future__ import annotations

import re
from typing import Any

from harness.panels.times import format_duration

_VAR_RE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")


def substitute(expr: str, variables: dict[str, str]) -> str:
    """``expr`` with every known variable (``$name``, ``${name}``, ``${name:fmt}``, ``[[name]]``) replaced by its
    value; unknown names are left as written (so Prometheus reports them)."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        return variables.get(name, m.group(0))

    return _VAR_RE.sub(repl, expr)


def resolve_variables(dashboard: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    """Values of the dashboard's template variables: ``given`` (names with or without ``$``) first, then the
    variable's ``current`` value, then ``allValue`` (or ``.*``) when it has ``includeAll``. Datasource variables
    are skipped. Raises ValueError naming the variables left without a value."""
    given = {k.lstrip("$"): v for k, v in given.items()}
    out: dict[str, str] = {}
    missing: list[str] = []
    for var in dashboard.get("templating", {}).get("list", []):
        name = var.get("name", "")
        if var.get("type") == "datasource" or not name:
            continue
        all_value = var.get("allValue") or ".*"
        val: str | None
        if name in given:
            val = given[name]
        else:
            cur = (var.get("current") or {}).get("value")
            if isinstance(cur, list):
                cur = cur[0] if len(cur) == 1 else "|".join(cur)
            val = str(cur) if cur else (all_value if var.get("includeAll") else None)
        if val in ("$__all", "All") and var.get("includeAll"):
            val = all_value
        if val is None:
            missing.append(name)
        else:
            out[name] = val
    if missing:
        raise ValueError(f"no value for dashboard variable(s) {', '.join(missing)}: pass them")
    for k, v in given.items():  # extra values (e.g. for variables the dashboard does not declare)
        out.setdefault(k, v)
    return out


def builtin_variables(start: float, end: float, step: float, scrape_interval: float) -> dict[str, str]:
    """Grafana's built-in variables for a query over [``start``, ``end``] at ``step`` (seconds):
    ``__interval`` (the step), ``__interval_ms``, ``__range`` / ``__range_s`` / ``__range_ms`` and
    ``__rate_interval`` = max(step + scrape interval, 4 × scrape interval)."""
    rng = max(end - start, 0.0)
    rate = max(step + scrape_interval, 4 * scrape_interval)
    return {
        "__interval": format_duration(step),
        "__interval_ms": str(round(step * 1000)),
        "__rate_interval": format_duration(rate),
        "__range": format_duration(round(rng)),
        "__range_s": str(round(rng)),
        "__range_ms": str(round(rng * 1000)),
    }


def default_step(start: float, end: float, scrape_interval: float, points: int = 800) -> float:
    """Grafana's query interval, roughly: the range over ``points`` (about a panel's width in pixels) rounded
    to a whole second (or a nice multiple), never below the scrape interval."""
    raw = max(end - start, 1.0) / points
    for nice in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400):
        if raw <= nice:
            raw = float(nice)
            break
    return max(raw, scrape_interval)
