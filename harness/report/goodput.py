"""Goodput: what share of a step's requests meet the profile's latency SLOs (``slo:``), and how many per second.

Per step (:func:`add_goodput`, over the record frame): ``slo_met_share`` = requests of the step's latency sample
(the successful requests of :func:`harness.report.exprs.in_sample` over the row's window) meeting every given SLO
÷ the sample's size; ``goodput_rps`` = usable requests (any step) meeting every SLO whose end falls in the row's
window ÷ the window's length. A request meets the SLOs when each given threshold holds for its measurement (TTFT,
TTFAT, TPOT, E2E ≤ the threshold, seconds); a missing measurement (no answer token for TTFAT, fewer than 2
streamed tokens for TPOT) does not meet it. ``slo_capacity`` (:func:`slo_capacity`): the highest concurrency all
of whose steps reach ``slo.target_share``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl
from pydantic import ValidationError

from harness.config import SloSpec
from harness.report.exprs import END, OK, USABLE, counts, in_sample

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


#: The record column of each SLO threshold key of :meth:`harness.config.SloSpec.thresholds` (seconds).
_MEASURED = {"ttft_s": "ttft", "ttfat_s": "ttfat", "tpot_s": "tpot", "e2e_s": "e2e"}


def meets_slo(slo: SloSpec) -> pl.Expr:
    """Per record: whether it meets every threshold of ``slo`` (each ``measurement ≤ threshold``, seconds); a
    missing (null) measurement does not meet its threshold. Says nothing about success or usability."""
    met = pl.lit(True)
    for key, limit in slo.thresholds().items():
        met = met & (pl.col(_MEASURED[key]) <= limit).fill_null(False)
    return met


def add_goodput(row: dict[str, Any], main: pl.DataFrame, slo: SloSpec | None) -> None:
    """Put the goodput figures into a step row (:func:`harness.report.columns.step_rows`), in place.

    Keys: ``slo_sample_n`` (requests in the latency sample), ``slo_met`` (of them meeting every SLO),
    ``slo_met_share`` (0..1, None for an empty sample), ``slo_window_met`` (usable requests meeting every SLO
    ending in the window) and ``goodput_rps`` (that ÷ window length, req/s; None for an empty window). All None
    without SLOs. ``main``: every non-warm-up record of the run (:attr:`harness.report.columns.FrameRun.main`).
    """
    if slo is None:
        row.update(dict.fromkeys(GOODPUT_ROW_KEYS))
        return
    w0, w1 = row["window_start_wall"], row["window_end_wall"]
    met = meets_slo(slo)
    latency = in_sample(row["step"], row["steady"], w0, w1) & pl.col(OK)
    ends = (pl.col(END) > w0) & (pl.col(END) < w1)  # as request_rate
    c = counts(main, n=latency, met=latency & met, k=pl.col(USABLE) & ends & met)
    n, k = c["n"], c["k"]
    length = max(0.0, w1 - w0)
    row.update({
        "slo_sample_n": n,
        "slo_met": c["met"],
        "slo_met_share": c["met"] / n if n else None,
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
