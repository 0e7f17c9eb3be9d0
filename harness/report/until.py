"""The report's figures of ``steps.until`` (steps that end when the usable rate is known within a margin).

The load shape writes one ``until`` event per step to ``phases.jsonl`` when the step's margin check ends it
(:meth:`harness.until.Decision.event`: ``step``, ``reached``, ``at_s`` seconds into the step, ``halfwidth`` the
live relative half-width of the usable rate's 95 % interval, ``margin``). :func:`add_until` copies it onto the step
row (``until_margin``, ``until_reached``, ``until_at_s``, and the catalogued figures ``margin_reached_s`` (None
when not reached) and ``margin_halfwidth``); :func:`until_text` is the one sentence every surface shows for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.report.catalogue import FIGURES, display
from harness.report.model import StepRow

__all__ = ["UNTIL_ROW_KEYS", "add_until", "until_notes", "until_text"]

#: The step-row keys :func:`add_until` sets (after :func:`harness.report.columns.step_rows`).
UNTIL_ROW_KEYS = ("until_margin", "until_reached", "margin_reached_s", "margin_halfwidth", "until_at_s")


def _events(events: Sequence[Any]) -> dict[int, dict[str, Any]]:
    """``{step: until event}`` (the last one of a step), from typed or plain events."""
    out: dict[int, dict[str, Any]] = {}
    for e in events:
        d = e if isinstance(e, dict) else e.model_dump()
        if d.get("event") == "until" and d.get("step") is not None:
            out[int(d["step"])] = d
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def add_until(rows: list[dict[str, Any]], events: Sequence[Any]) -> None:
    """Set the :data:`UNTIL_ROW_KEYS` of each step row from its ``until`` event (all None without one).

    Args:
        rows: the report's step rows (``phase``, ``step``).
        events: the ``phases.jsonl`` events (dicts or :mod:`harness.report.rundata` typed events).
    """
    evs = _events(events)
    for row in rows:
        ev = evs.get(int(row["step"])) if row.get("phase") == "step" else None
        row.update(dict.fromkeys(UNTIL_ROW_KEYS))
        if ev is None:
            continue
        reached = bool(ev.get("reached"))
        at_s = _num(ev.get("at_s"))
        row["until_margin"] = _num(ev.get("margin"))
        row["until_reached"] = reached
        row["margin_reached_s"] = at_s if reached else None
        row["margin_halfwidth"] = _num(ev.get("halfwidth"))
        row["until_at_s"] = at_s
        fix = row.get("low_confidence_fix")
        if isinstance(fix, str):  # the step's length was until's, not steps.duration's (unused with until)
            row["low_confidence_fix"] = fix.replace(
                "lengthen steps.duration", "raise steps.until.min" if reached else "raise steps.until.max")


def until_text(r: StepRow) -> str | None:
    """``C=8: margin ±10.0 % reached at 41.0 s (rate ±9.2 %)`` or ``C=8: margin ±10.0 % NOT reached in its 600.0 s
    (rate ±13.1 %)``; None for a step without an until event."""
    if r.until_reached is None:
        return None
    margin = FIGURES["margin_halfwidth"].text(r.until_margin)
    hw = display(r, "margin_halfwidth")
    hw = f"rate ±{hw} %" if r.margin_halfwidth is not None else "no interval yet"
    if r.until_reached:
        return f"{r.label}: margin ±{margin} % reached at {display(r, 'margin_reached_s')} s ({hw})"
    return f"{r.label}: margin ±{margin} % NOT reached in its {FIGURES['margin_reached_s'].text(r.until_at_s)} s ({hw})"


def until_notes(rows: Sequence[StepRow]) -> list[str]:
    """One note per step that ran with ``steps.until`` (:func:`until_text`), prefixed ``steps.until``."""
    return [f"steps.until: {t}." for r in rows if (t := until_text(r)) is not None]
