"""The JSON the LLM view polls: the report's step rows, the row of the step in progress, the live history, the
workers and the downloads.

Every figure is a key of a row of ``harness.report.build.build_report`` (:mod:`harness.webui.cache`), passed
through unchanged; :data:`ROW_KEYS` lists those the page shows. The one value assembled here is the mean
reasoning / answer tokens per successful request of the row's sample, the request-weighted mean of the report's own
``by_finish_reason`` groups (which partition that sample), i.e. the same mean the report's tokens chart draws.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.webui.cache import Entry, current_row
from harness.webui.downloads import files_of
from harness.webui.runs import RunDirs, WorkerInfo

__all__ = ["IN_PROGRESS_NOTE", "ROW_KEYS", "payload", "row_view"]

#: Keys of a report row (:func:`harness.report.figures.step_row` + cost) the view sends, unchanged.
ROW_KEYS = (
    "label", "phase", "step", "concurrency", "start_wall", "end_wall", "end_source", "steady", "not_steady_reason",
    "window_start_wall", "window_end_wall", "window_s", "sample_requests", "requests", "completed", "errors",
    "errors_by_class", "error_rate", "output_tps", "output_tps_reasoning", "output_tps_answer", "tokens_by",
    "per_stream_tps", "request_rate",
    "ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttfat_p50_s", "ttfat_p90_s", "ttfat_p95_s",
    "ttfat_p99_s", "gap_p50_s", "gap_p95_s", "gap_p99_s", "tpot_mean_s", "tpot_p50_s", "e2e_p50_s",
    "mean_output_tokens", "truncated", "truncated_pct",
    "hours", "hours_interval", "cost", "client_read_lag_p50_s", "client_read_lag_p99_s", "client_read_lag_max_s",
    "client_lagged_pct", "client_starved", "low_confidence", "users_seen",
)
_SLICE_KEYS = ("start_wall", "end_wall", "output_tps", "ttft_p50_s", "ttft_p99_s", "ttfat_p50_s", "ttfat_p99_s")


def _token_split(row: dict[str, Any]) -> tuple[float | None, float | None]:
    """Mean reasoning and answer tokens per successful request of the row's sample (see the module docstring)."""
    groups = [g for g in (row.get("by_finish_reason") or {}).values() if g.get("requests")]
    n = sum(int(g["requests"]) for g in groups)
    if not n:
        return None, None
    r = sum(int(g["requests"]) * float(g.get("mean_reasoning_tokens") or 0.0) for g in groups) / n
    a = sum(int(g["requests"]) * float(g.get("mean_answer_tokens") or 0.0) for g in groups) / n
    return r, a


def row_view(row: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``row`` (a report step row) the page shows (:data:`ROW_KEYS`), the mean reasoning / answer
    tokens (``mean_reasoning_tokens`` / ``mean_answer_tokens``) and its soak slices (``slices``: :data:`_SLICE_KEYS`
    of each)."""
    out = {k: row.get(k) for k in ROW_KEYS}
    out["mean_reasoning_tokens"], out["mean_answer_tokens"] = _token_split(row)
    out["slices"] = [{k: s.get(k) for k in _SLICE_KEYS} for s in row.get("slices") or []]
    return out


#: The note the view shows instead of the report's "INTERRUPTED RUN" one while the run is still going.
IN_PROGRESS_NOTE = (
    "RUN IN PROGRESS: figures so far. Rows of finished steps are provisional until the run ends (a request that "
    "started in a step's window counts when it ends); the step in progress is the current window."
)


def _live_status(state: str, stopping: dict[str, Any] | None) -> str:
    """The run's status while it is the current run: ``running``, else the stop's stage (``draining``,
    ``writing_report``), else ``stopping``; the report's own status (``running`` until ``run.json`` is closed,
    then the final one) is shown once the run is recorded."""
    if state == "running":
        return "running"
    return str(stopping.get("stage") or "stopping") if stopping else "stopping"


def _live_notes(notes: Any) -> list[str]:
    """The report's notes of a run still going: its "INTERRUPTED RUN" note (a report of a run with no
    ``run_end`` yet) replaced by :data:`IN_PROGRESS_NOTE`."""
    kept = [str(n) for n in (notes or []) if not str(n).startswith("INTERRUPTED RUN")]
    return [IN_PROGRESS_NOTE, *kept]


def _run_entry(path: Path, current: bool, url: str) -> dict[str, Any]:
    return {"run_id": path.name, "current": current, "files": files_of(path, url)}


def payload(runs: RunDirs, entry: Entry | None, shown: Path | None, workers: list[WorkerInfo], url: str,
            stopping: dict[str, Any] | None = None) -> dict[str, Any]:
    """The view's JSON.

    Args:
        runs: this process's runs.
        entry: the cached report of the run shown (None when there is no run yet).
        shown: that run's directory.
        workers: the master's workers (empty on a single process).
        url: the base URL of the view's routes (``<web_base_path>/llm``), for the download links.
        stopping: the current run's stop in progress (:func:`harness.webui.runs.stopping`), None when none.

    Returns:
        ``{"now", "state", "run": {run_id, status, profile_name, model, target, start_wall, end_wall,
        duration_s, time_scale, hours_to_n, totals, notes} | None, "steps": [row_view... + "provisional"]
        (finished steps; ``provisional`` while the run shown is the one going),
        "current": row_view | None (the step in progress), "history": [...], "report_age_s", "compute_s",
        "error", "workers": [...], "runs": [{run_id, current, files: [{name, href, size}]}], "stopping": {run_id,
        stage, since_wall, stop_wall, drain_timeout_s, users_left} | None}``. Times: epoch s. While the run shown
        is the current one (state ``running`` / ``stopping``) its ``status`` is ``running``, ``draining`` or
        ``writing_report`` and its notes start with :data:`IN_PROGRESS_NOTE` (no "INTERRUPTED RUN" note).
    """
    rep = entry.report if entry is not None else None
    cur = current_row(rep) if rep is not None else None
    live = shown is not None and shown == runs.current and runs.state in ("running", "stopping")
    rows = [row_view(r) for r in (rep.get("steps") or [])] if rep is not None else []
    if cur is not None:
        rows = rows[:-1]
    for r in rows:
        r["provisional"] = live
    run = None
    if rep is not None:
        run = {k: rep.get(k) for k in ("run_id", "status", "profile_name", "model", "start_wall", "end_wall",
                                       "duration_s", "time_scale", "hours_to_n", "totals", "notes",
                                       "cost_usd_per_hour")}
        tgt = rep.get("target") or {}
        run["target"] = tgt.get("base_url") if isinstance(tgt, dict) else None
        if live:
            run["status"], run["notes"] = _live_status(runs.state, stopping), _live_notes(run.get("notes"))
    return {
        "now": time.time(),
        "state": runs.state,
        "run": run,
        "steps": rows,
        "current": row_view(cur) if cur is not None else None,
        "history": list(entry.history) if entry is not None else [],
        "report_age_s": (time.time() - entry.computed_at) if entry is not None and entry.computed_at else None,
        "compute_s": entry.compute_s if entry is not None else None,
        "error": entry.error if entry is not None else None,
        "workers": [
            {"id": w.id, "state": w.state, "users": w.users, "in_flight": w.in_flight, "cpu_pct": w.cpu_pct,
             "dead": w.dead}
            for w in workers
        ],
        "runs": [_run_entry(p, p == runs.current, url) for p in runs.all()],
        "shown": shown.name if shown is not None else None,
        "stopping": stopping,
    }
