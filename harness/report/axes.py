"""Sweep-axes comparison: the step rows of a run with ``axes:`` side by side per setting.

Each load step ran with one setting (:mod:`harness.axes`); its records carry the setting's label (``setting``).
:func:`setting_rows` gives one row per (setting, step) with the figures that differ between settings: latency,
reasoning and answer tokens, yield (usable share), throughput, and hours and cost to the first N. Every figure
is the step row's own (:func:`harness.report.figures.step_row`, over the same sample: the requests that ended in
the steady window), except the mean reasoning and answer tokens, which this module computes over the successful
requests of that sample (:func:`harness.report.figures.latency_sample`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from harness.report.figures import latency_sample
from harness.report.stats import mean
from harness.result import RequestResult

__all__ = ["SETTING_ROW_KEYS", "setting_rows", "step_settings"]

#: Keys of one :func:`setting_rows` row (units: ``*_s`` seconds, tokens, tok/s, hours, US$).
SETTING_ROW_KEYS = (
    "setting", "step", "concurrency", "steady", "completed", "ttft_p50_s", "ttfat_p50_s", "tpot_p50_s",
    "e2e_p50_s", "mean_reasoning_tokens", "mean_answer_tokens", "mean_output_tokens", "usable_share",
    "truncated_pct", "output_tps", "request_rate", "n", "hours", "hours_low", "hours_high", "usd", "real_hours",
    "real_usd",
)


def step_settings(records: Sequence[RequestResult]) -> dict[int, str]:
    """The setting of each step: the label most of its records carry (steps whose records have none are left out).

    Args:
        records: the run's non-warm-up records.
    """
    by_step: dict[int, Counter[str]] = {}
    for r in records:
        if r.setting is not None:
            by_step.setdefault(r.step, Counter())[r.setting] += 1
    return {step: c.most_common(1)[0][0] for step, c in by_step.items()}


def setting_rows(rows: Sequence[dict[str, Any]], records: Sequence[RequestResult]) -> list[dict[str, Any]]:
    """One comparison row per load step that ran with a setting, in setting order then step order.

    Args:
        rows: the report's step rows (:func:`harness.report.figures.step_row`, with cost).
        records: the run's non-warm-up records.

    Returns:
        Rows with :data:`SETTING_ROW_KEYS`: the step row's figures, the mean reasoning / answer tokens of the
        sample's successful requests, and the first hours-to-N entry (``n``, ``hours`` with its 95 % prediction
        interval ``hours_low`` / ``hours_high``, ``usd`` its cost or None without a price; ``real_hours`` /
        ``real_usd`` the same in real time when the run was time-compressed, else None). ``[]`` when no step has
        a setting (a run without ``axes:``).
    """
    settings = step_settings(records)
    order: list[str] = []
    for step in sorted(settings):
        if settings[step] not in order:
            order.append(settings[step])
    out: list[dict[str, Any]] = []
    for row in rows:
        setting = settings.get(row["step"])
        if setting is None or row.get("phase") != "step":
            continue
        ok = latency_sample(records, row["step"], row["steady"], row["window_start_wall"], row["window_end_wall"])
        first = (row.get("hours") or [{}])[0]
        real = ((row.get("real_time") or {}).get("hours") or [{}])[0]
        out.append({
            "setting": setting,
            "step": row["step"],
            "concurrency": row["concurrency"],
            "steady": row["steady"],
            "completed": row["completed"],
            "ttft_p50_s": row.get("ttft_p50_s"),
            "ttfat_p50_s": row.get("ttfat_p50_s"),
            "tpot_p50_s": row.get("tpot_p50_s"),
            "e2e_p50_s": row.get("e2e_p50_s"),
            "mean_reasoning_tokens": mean([float(r.reasoning_tokens) for r in ok]),
            "mean_answer_tokens": mean([float(r.answer_tokens) for r in ok]),
            "mean_output_tokens": row.get("mean_output_tokens"),
            "usable_share": row.get("usable_share"),
            "truncated_pct": row.get("truncated_pct"),
            "output_tps": row.get("output_tps"),
            "request_rate": row.get("request_rate"),
            "n": first.get("n"),
            "hours": first.get("hours"),
            "hours_low": first.get("hours_low"),
            "hours_high": first.get("hours_high"),
            "usd": first.get("usd"),
            "real_hours": real.get("hours"),
            "real_usd": real.get("usd"),
        })
    out.sort(key=lambda r: (order.index(r["setting"]), r["step"]))
    return out
