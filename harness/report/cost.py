"""Cost figures of a step from the profile's ``cost:`` section (US$ per hour of the deployment).

Every cost is hours × US$/h, so the hours figures' 95 % intervals map through unchanged: US$ to N usable samples
= hours to N × US$/h (bounds likewise); US$ per 1,000 usable samples = the same for N = 1,000; US$ per 1M output
tokens = US$/h ÷ (aggregate output tok/s × 3600) × 10⁶.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from harness.config import CostSpec
from harness.report.hours import hours_interval
from harness.report.interval import RateEstimate
from harness.report.model import CostFigures

__all__ = ["add_cost", "cost_figures", "hours_cost", "row_estimate", "usd_per_hour"]


def usd_per_hour(profile: dict[str, Any]) -> tuple[float | None, str | None]:
    """(US$ per hour, problem) from the run's profile as stored in ``run.json``: (None, None) without a ``cost``
    section, (None, a note) when it is invalid (a run directory edited by hand, or written by another version)."""
    raw = profile.get("cost")
    if raw is None:
        return None, None
    try:
        spec = CostSpec.model_validate(raw)
    except ValidationError as e:
        msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        return None, f"run.json: profile.cost is not usable ({msgs}); no cost figures."
    return spec.usd_per_hour, None


def _times(hours: float | None, usd_h: float) -> float | None:
    return hours * usd_h if hours is not None else None


def hours_cost(h: dict[str, Any], usd_h: float) -> dict[str, float | None]:
    """US$ of one hours-to-N entry (``hours``, ``hours_low``, ``hours_high``, ``token_hours``):
    ``usd``, ``usd_low``, ``usd_high``, ``token_usd`` (None where the hours are None, i.e. unbounded)."""
    return {
        "usd": _times(h.get("hours"), usd_h),
        "usd_low": _times(h.get("hours_low"), usd_h),
        "usd_high": _times(h.get("hours_high"), usd_h),
        "token_usd": _times(h.get("token_hours"), usd_h),
    }


def cost_figures(usd_h: float, output_tps: float | None, per_1k: dict[str, float | None]) -> CostFigures:
    """A step's cost figures.

    Args:
        usd_h: US$ per hour of the deployment.
        output_tps: aggregate output throughput (tokens per second), or None.
        per_1k: the hours to 1,000 usable samples with their 95 % interval (``hours``, ``hours_low``,
            ``hours_high``: :func:`harness.report.hours.hours_interval` for N = 1,000).

    Returns:
        The typed figures (:class:`harness.report.model.CostFigures`): ``usd_per_hour``,
        ``usd_per_1m_output_tokens`` (None without throughput), ``usd_per_1k_usable`` with
        ``usd_per_1k_usable_low`` / ``_high`` (the hours interval × US$/h; high None when unbounded, all None
        without usable completions); a NaN or infinite figure is None (strict JSON).
    """
    figures = {
        "usd_per_hour": usd_h,
        "usd_per_1m_output_tokens": usd_h / (output_tps * 3600.0) * 1e6 if output_tps else None,
        "usd_per_1k_usable": _times(per_1k["hours"], usd_h),
        "usd_per_1k_usable_low": _times(per_1k["hours_low"], usd_h),
        "usd_per_1k_usable_high": _times(per_1k["hours_high"], usd_h),
    }
    return CostFigures.model_validate(
        {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in figures.items()})


def row_estimate(row: dict[str, Any]) -> RateEstimate:
    """The usable-rate estimate of a step row, from its ``hours_interval`` (see
    :func:`harness.report.columns.step_rows`): THE interval's figures the row's hours were computed from (rate,
    SE, sigma2, t: either method's; ``method`` says which)."""
    iv = row.get("hours_interval") or {}
    return RateEstimate(
        rate=float(iv.get("rate") or 0.0),
        events=int(row.get("window_usable_completions") or 0),
        window_s=float(row.get("window_s") or 0.0),
        se=iv.get("rate_se"),
        sigma2=iv.get("sigma2"),
        t=iv.get("t"),
        method=str(iv.get("method") or "renewal_reward"),
        reason=iv.get("reason"),
    )


def add_cost(row: dict[str, Any], usd_h: float | None) -> None:
    """Put the cost figures into a step row (:func:`harness.report.columns.step_rows`), in place.

    ``row["cost"]``: :func:`cost_figures` of the row (None without a price); each ``row["hours"]`` entry gets
    :func:`hours_cost`'s keys. A row measured in compressed time (``row["real_time"]`` set) gets the same in
    ``row["real_time"]``, from the real-time hours and rates: what the deployment would cost in real time.
    """
    if usd_h is None:
        row["cost"] = None
        return
    per_1k = hours_interval(1000, row_estimate(row))
    row["cost"] = cost_figures(usd_h, row.get("output_tps"), per_1k)
    for h in row.get("hours") or []:
        h.update(hours_cost(h, usd_h))
    rt = row.get("real_time")
    if rt:
        ts = float(rt.get("time_scale") or 1.0)  # real durations = wall durations ÷ time scale
        per_1k_rt = {k: (v / ts if v is not None else None) for k, v in per_1k.items()
                     if k in ("hours", "hours_low", "hours_high")}
        rt["cost"] = cost_figures(usd_h, rt.get("output_tps"), per_1k_rt)
        for h in rt.get("hours") or []:
            h.update(hours_cost(h, usd_h))
