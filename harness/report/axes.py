"""Sweep-axes comparison: the step rows of a run with ``axes:`` side by side per setting.

Each load step ran with one setting (:mod:`harness.axes`): its phase carries the setting's label (the
``phase_start`` event's ``setting``, or its records' when phases are inferred), and so does its step row
(``setting``, :func:`harness.report.figures.row_header`). :func:`setting_rows` picks from each such row the figures
that differ between settings: latency, mean reasoning and answer tokens, yield (usable share), throughput, and hours
and cost to the first N. Every figure is the step row's own (:func:`harness.report.columns.step_rows`, over the same
sample: the requests that ended in the steady window); nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["SETTING_ROW_KEYS", "setting_rows"]

#: Keys of one :func:`setting_rows` row (units: ``*_s`` seconds, tokens, tok/s, hours, US$).
SETTING_ROW_KEYS = (
    "setting", "step", "concurrency", "steady", "completed", "ttft_p50_s", "ttfat_p50_s", "tpot_p50_s",
    "e2e_p50_s", "mean_reasoning_tokens", "mean_answer_tokens", "mean_output_tokens", "usable_share",
    "truncated_pct", "output_tps", "request_rate", "n", "hours", "hours_low", "hours_high", "usd", "real_hours",
    "real_usd", "low_confidence", "client_starved", "hidden_reasoning",
)

#: The keys copied as they are from the step row.
_FROM_ROW = SETTING_ROW_KEYS[:16]


def setting_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One comparison row per load step that ran with a setting, in setting order (first run first) then step order.

    Args:
        rows: the report's step rows (:func:`harness.report.columns.step_rows`, with cost), each with its
            ``setting`` (None without ``axes:``).

    Returns:
        Rows with :data:`SETTING_ROW_KEYS`: the step row's figures (``mean_reasoning_tokens`` /
        ``mean_answer_tokens`` over the sample's successful requests), and its first hours-to-N entry (``n``,
        ``hours`` with its 95 % prediction interval ``hours_low`` / ``hours_high``, ``usd`` its cost or None
        without a price; ``real_hours`` / ``real_usd`` the same in real time when the run was time-compressed,
        else None; ``low_confidence`` / ``client_starved`` / ``hidden_reasoning`` the step row's flags, read by
        :func:`harness.report.catalogue.row_flags`). ``[]`` when no load step has a
        setting (a run without ``axes:``).
    """
    steps = sorted((r for r in rows if r.get("phase") == "step" and r.get("setting") is not None),
                   key=lambda r: r["step"])
    order = list(dict.fromkeys(r["setting"] for r in steps))
    out: list[dict[str, Any]] = []
    for row in steps:
        first = (row.get("hours") or [{}])[0]
        real = ((row.get("real_time") or {}).get("hours") or [{}])[0]
        out.append({
            **{k: row.get(k) for k in _FROM_ROW},
            "n": first.get("n"),
            "hours": first.get("hours"),
            "hours_low": first.get("hours_low"),
            "hours_high": first.get("hours_high"),
            "usd": first.get("usd"),
            "real_hours": real.get("hours"),
            "real_usd": real.get("usd"),
            "low_confidence": row.get("low_confidence"),
            "client_starved": row.get("client_starved"),
            "hidden_reasoning": row.get("hidden_reasoning") or 0,
        })
    out.sort(key=lambda r: (order.index(r["setting"]), r["step"]))
    return out
