"""Goodput: what share of a step's requests meet the profile's latency SLOs (``slo:``), and how many per second.

Per step (:func:`add_goodput`): ``slo_met_share`` = requests of the step's latency sample
(:func:`harness.report.figures.latency_sample` over the row's window) meeting every given SLO ÷ the sample's size;
``goodput_rps`` = usable requests (any step) meeting every SLO whose end falls in the row's window ÷ the window's
length. A request meets the SLOs when each given threshold holds for its measurement (TTFT, TTFAT, TPOT, E2E ≤ the
threshold, seconds); a missing measurement (no answer token for TTFAT, fewer than 2 streamed tokens for TPOT) does
not meet it. ``slo_capacity`` (:func:`slo_capacity`): the highest concurrency all of whose steps reach
``slo.target_share``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from harness.config import SloSpec
from harness.report.figures import latency_sample
from harness.result import RequestResult

__all__ = ["GOODPUT_ROW_KEYS", "add_goodput", "meets_slo", "slo_capacity", "slo_spec"]

#: The keys :func:`add_goodput` puts into a step row.
GOODPUT_ROW_KEYS = ("slo_sample_n", "slo_met", "slo_met_share", "slo_window_met", "goodput_rps")


def slo_spec(profile: dict[str, Any]) -> tuple[SloSpec | None, str | None]:
    """(SLOs, problem) from the run's profile as stored in ``run.json``: (None, None) without an ``slo`` section,
    (None, a note) when it is invalid (a run directory edited by hand, or written by another version)."""
    raw = profile.get("slo")
    if raw is None:
        return None, None
    try:
        return SloSpec.model_validate(raw), None
    except ValidationError as e:
        msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        return None, f"run.json: profile.slo is not usable ({msgs}); no goodput figures."


def meets_slo(r: RequestResult, slo: SloSpec) -> bool:
    """Whether ``r`` meets every threshold of ``slo`` (each ``measurement ≤ threshold``, seconds). A measurement
    that is missing (None) does not meet its threshold. Says nothing about success or usability."""
    measured = {"ttft_s": r.ttft, "ttfat_s": r.ttfat, "tpot_s": r.tpot, "e2e_s": r.e2e}
    for key, limit in slo.thresholds().items():
        v = measured[key]
        if v is None or v > limit:
            return False
    return True


def add_goodput(row: dict[str, Any], records: Sequence[RequestResult], slo: SloSpec | None) -> None:
    """Put the goodput figures into a step row (:func:`harness.report.figures.step_row`), in place.

    Keys: ``slo_sample_n`` (requests in the latency sample), ``slo_met`` (of them meeting every SLO),
    ``slo_met_share`` (0..1, None for an empty sample), ``slo_window_met`` (usable requests meeting every SLO
    ending in the window) and ``goodput_rps`` (that ÷ window length, req/s; None for an empty window). All None
    without SLOs. ``records``: every non-warm-up record of the run.
    """
    if slo is None:
        row.update(dict.fromkeys(GOODPUT_ROW_KEYS))
        return
    w0, w1 = row["window_start_wall"], row["window_end_wall"]
    sample = latency_sample(records, row["step"], row["steady"], w0, w1)
    met = sum(1 for r in sample if meets_slo(r, slo))
    k = sum(1 for r in records if r.usable and w0 < r.end_wall < w1 and meets_slo(r, slo))  # as request_rate
    length = max(0.0, w1 - w0)
    row.update({
        "slo_sample_n": len(sample),
        "slo_met": met,
        "slo_met_share": met / len(sample) if sample else None,
        "slo_window_met": k,
        "goodput_rps": k / length if length > 0 else None,
    })


def slo_capacity(rows: Sequence[dict[str, Any]], slo: SloSpec | None) -> dict[str, Any] | None:
    """The highest concurrency whose steps all meet ``slo.target_share`` (rows carry :func:`add_goodput`'s keys).

    Returns None without SLOs, else ``slo`` (the thresholds, seconds), ``target_share``, ``concurrency`` (None when
    no concurrency qualifies), ``steps`` (labels of the steps at that concurrency), ``slo_met_share`` (the lowest
    share among them), ``goodput_rps`` (the highest goodput among them), ``failing`` (labels of steps below the
    target, or with no sample). A concurrency with a step that has no latency sample does not qualify.
    """
    if slo is None:
        return None
    by_c: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_c.setdefault(int(r["concurrency"]), []).append(r)

    def ok(r: dict[str, Any]) -> bool:
        share = r.get("slo_met_share")
        return share is not None and share >= slo.target_share

    passing = [c for c, rs in by_c.items() if all(ok(r) for r in rs)]
    best = max(passing) if passing else None
    chosen = by_c.get(best, []) if best is not None else []
    return {
        "slo": slo.thresholds(),
        "target_share": slo.target_share,
        "concurrency": best,
        "steps": [r["label"] for r in chosen],
        "slo_met_share": min((r["slo_met_share"] for r in chosen), default=None),
        "goodput_rps": max((r["goodput_rps"] for r in chosen if r["goodput_rps"] is not None), default=None),
        "failing": [r["label"] for r in rows if not ok(r)],
    }
