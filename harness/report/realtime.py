"""A step row in real-time equivalents, for the surfaces that show a compressed-time run (simulator
``time_scale`` < 1) in real time: the terminal summary and the web LLM view.

The simulator runs ``time_scale`` times faster than the server it stands for, so a wall duration is the real
duration × ``time_scale``: real durations = wall ÷ ``time_scale``, real rates = wall rates × ``time_scale``
(the rule of :func:`harness.report.figures.real_time`, report.md's "Real-time equivalents" table). Here it is
applied to every catalogued figure (:data:`harness.report.catalogue.FIGURES`) by its stored unit:

* ``s`` (latencies, TPOT, windows, margin reached), ``h`` (hours to N) and ``US$`` (money to N, per 1M tokens, per
  1,000 usable: all priced by the real hour) ÷ ``time_scale``;
* ``tok/s``, ``req/s`` × ``time_scale``;
* counts, tokens, shares and percentages unchanged (they do not depend on the clock);

and to each hours-to-N entry (hours and bounds, token hours, US$ ÷; samples per hour and rate bounds ×), to each
soak drift fit (slopes per hour ×, its text rewritten; the total change over the step unchanged), and to the
figures of each soak slice and of each point of the web view's live history (:func:`values_in_real_time`: same
keys, same rule). Wall-clock timestamps (``start_wall``, ``end_wall``, ``t``) are not figures and stay as
measured: the charts' time axis is the compressed wall time. Client overheads do not scale, so the equivalents are
approximate (as report.md says). The self-certification's figures (:data:`harness.report.selfcert.SELFCERT_KEYS`:
the client's CPU, read lag, chunks/s and error bounds) describe the load generator in wall time and stay as
measured, so its line reads the same on every surface and against its wall-time calibration.
"""

from __future__ import annotations

from typing import Any

from harness.report.catalogue import FIGURES, Unit
from harness.report.model import DriftFit, HoursEntry, StepDrift, StepRow
from harness.report.selfcert import SELFCERT_KEYS
from harness.report.soak import drift_text

__all__ = ["drift_in_real_time", "in_real_time", "values_in_real_time"]

_DIVIDE = (Unit.S, Unit.H, Unit.USD)
_MULTIPLY = (Unit.TOK_S, Unit.REQ_S)
_HOURS_DIVIDE = ("hours", "hours_low", "hours_high", "token_hours", "usd", "usd_low", "usd_high", "token_usd")
_HOURS_MULTIPLY = ("samples_per_hour", "rate_low", "rate_high")


def _scaled(v: Any, factor: float) -> Any:
    return v * factor if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _hours(h: HoursEntry, ts: float) -> HoursEntry:
    update = {k: _scaled(getattr(h, k), 1 / ts) for k in _HOURS_DIVIDE}
    update.update({k: _scaled(getattr(h, k), ts) for k in _HOURS_MULTIPLY})
    return h.model_copy(update=update)


_DRIFT_MULTIPLY = ("slope_per_h", "slope_low_per_h", "slope_high_per_h", "slope_pct_per_h", "low_pct_per_h",
                   "high_pct_per_h")


def drift_in_real_time(drift: StepDrift, time_scale: float) -> StepDrift:
    """``drift`` per hour of the server the simulator stands for: a slope per wall hour of a run ``time_scale``
    times faster is a slope per real hour × ``time_scale`` (its interval too; whether it is significant or flagged
    does not change, nor the total change over the step); each fit's text is rewritten from the converted values
    (:func:`harness.report.soak.drift_text`). ``drift`` itself when ``time_scale`` is 1 (or not positive)."""
    if time_scale == 1.0 or time_scale <= 0:
        return drift
    update: dict[str, DriftFit | None] = {}
    for metric in StepDrift.model_fields:
        fit: DriftFit | None = getattr(drift, metric)
        if fit is None:
            continue
        scaled = fit.model_copy(update={k: _scaled(getattr(fit, k), time_scale) for k in _DRIFT_MULTIPLY})
        update[metric] = scaled.model_copy(update={"text": drift_text(metric, scaled.model_dump())})
    return drift.model_copy(update=update)


def values_in_real_time(values: dict[str, Any], time_scale: float) -> dict[str, Any]:
    """``values`` (figure key -> value, e.g. a soak slice's or a live-history point's) with each catalogued figure
    in real-time equivalents by its unit (module docstring); other keys (timestamps, labels) unchanged. A copy;
    ``values`` itself when ``time_scale`` is 1 (or not positive)."""
    if time_scale == 1.0 or time_scale <= 0:
        return values
    out = dict(values)
    for key, v in values.items():
        f = FIGURES.get(key)
        if f is None or key == "hours" or key in SELFCERT_KEYS:
            continue
        if f.unit in _DIVIDE:
            out[key] = _scaled(v, 1 / time_scale)
        elif f.unit in _MULTIPLY:
            out[key] = _scaled(v, time_scale)
    return out


def in_real_time(row: StepRow, time_scale: float) -> StepRow:
    """``row`` with every clock-dependent figure in real-time equivalents (module docstring); ``row`` itself when
    ``time_scale`` is 1 (or not positive)."""
    if time_scale == 1.0 or time_scale <= 0:
        return row
    fields = StepRow.model_fields
    update = values_in_real_time({k: getattr(row, k) for k in FIGURES if k in fields and k != "hours"}, time_scale)
    update["hours"] = [_hours(h, time_scale) for h in row.hours]
    update["slices"] = [s.model_copy(update=values_in_real_time(s.model_dump(), time_scale)) for s in row.slices]
    update["drift"] = drift_in_real_time(row.drift, time_scale)
    return row.model_copy(update=update)
