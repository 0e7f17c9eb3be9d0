"""The JSON the LLM view polls: the report's step rows, the row of the step in progress, the live history, the
workers and the downloads.

Every figure is a field of a step row (:class:`harness.report.model.StepRow`) of the cached typed report
(:mod:`harness.webui.cache`), passed through unchanged as report.json holds it; :data:`ROW_KEYS` lists those the
page shows. The one value assembled here is the mean reasoning / answer tokens per successful request of the row's
sample, the request-weighted mean of the report's own ``by_finish_reason`` groups (which partition that sample),
i.e. the same mean the report's tokens chart draws.

The page formats nothing itself: each row also carries ``display`` (the text of each table cell, from the
catalogue of figures, :mod:`harness.report.catalogue`, as the report shows it) and the payload carries ``columns``
(each column's key and header, from the same catalogue); the raw values stay for the charts.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.report.catalogue import FIGURES, Flag, display, hours_header, hours_text, label_text, usd_header, usd_text
from harness.report.explain import step_failure_lines
from harness.report.model import Report, StepRow
from harness.webui.cache import Entry, current_row
from harness.webui.downloads import files_of
from harness.webui.runs import RunDirs, WorkerInfo

__all__ = ["IN_PROGRESS_NOTE", "ROW_KEYS", "TABLE_KEYS", "columns", "payload", "row_display", "row_view"]

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
#: The catalogued figures of the page's per-step table, in order (between the label and the errors column come
#: C, window and completed; after the figures, one hours-to-N (and US$) column per N, the read lag, starved).
TABLE_KEYS = (
    "concurrency", "window_s", "completed", "errors", "output_tps", "output_tps_reasoning", "output_tps_answer",
    "mean_reasoning_tokens", "mean_answer_tokens", "per_stream_tps", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s",
    "ttft_p99_s", "ttfat_p50_s", "ttfat_p90_s", "ttfat_p95_s", "ttfat_p99_s", "gap_p50_s", "gap_p95_s", "gap_p99_s",
    "tpot_mean_s", "e2e_p50_s", "truncated_pct",
)  # fmt: skip
_SLICE_KEYS = ("start_wall", "end_wall", "output_tps", "ttft_p50_s", "ttft_p99_s", "ttfat_p50_s", "ttfat_p99_s")


def _token_split(row: StepRow) -> tuple[float | None, float | None]:
    """Mean reasoning and answer tokens per successful request of the row's sample (see the module docstring)."""
    groups = [g for g in row.by_finish_reason.values() if g.requests]
    n = sum(g.requests for g in groups)
    if not n:
        return None, None
    r = sum(g.requests * float(g.mean_reasoning_tokens or 0.0) for g in groups) / n
    a = sum(g.requests * float(g.mean_answer_tokens or 0.0) for g in groups) / n
    return r, a


def _errors_text(row: StepRow) -> str:
    by = row.errors_by_class
    text = display(row, "errors")
    return f"{text} ({', '.join(f'{k} {v}' for k, v in by.items())})" if by else text


def _starved_text(row: StepRow) -> str:
    starved = row.client_starved
    return "not measured" if starved is None else (Flag.STARVED.glyph if starved else "no")


def row_display(row: StepRow) -> dict[str, str]:
    """The text of each table cell of ``row`` (a report step row), keyed as :func:`columns`: the label with its
    flags, each :data:`TABLE_KEYS` figure in its display unit and format (the catalogue's, as the report shows it;
    the mean reasoning / answer tokens are the view's, :func:`_token_split`), errors with their classes,
    ``hours_<N>`` / ``usd_<N>`` for each N, the read lag p99 and starved."""
    split = dict(zip(("mean_reasoning_tokens", "mean_answer_tokens"), _token_split(row), strict=True))
    out = {"label": label_text(row)}
    out.update({k: FIGURES[k].text(split[k]) if k in split else display(row, k) for k in TABLE_KEYS})
    out["errors"] = _errors_text(row)
    for h in row.hours:
        out[f"hours_{h.n}"] = hours_text(h)
        out[f"usd_{h.n}"] = usd_text(h.usd, h.usd_low, h.usd_high)
    out["client_read_lag_p99_s"] = display(row, "client_read_lag_p99_s")
    out["client_starved"] = _starved_text(row)
    return out


def columns(hours_to_n: list[int], priced: bool) -> list[dict[str, str]]:
    """The per-step table's columns: ``[{key, header}]`` (headers from the catalogue), keys as in
    :func:`row_display`."""
    cols = [{"key": "label", "header": "step"}]
    cols += [{"key": k, "header": FIGURES[k].header + (" (by class)" if k == "errors" else "")} for k in TABLE_KEYS]
    for n in hours_to_n:
        cols.append({"key": f"hours_{n}", "header": hours_header(n)})
        if priced:
            cols.append({"key": f"usd_{n}", "header": usd_header(n)})
    cols.append({"key": "client_read_lag_p99_s", "header": FIGURES["client_read_lag_p99_s"].header})
    cols.append({"key": "client_starved", "header": "starved"})
    return cols


def row_view(row: StepRow) -> dict[str, Any]:
    """The view's JSON of ``row`` (a report step row): the fields the page shows (:data:`ROW_KEYS`, as report.json
    holds them; None when not set), ``hidden_reasoning``, the mean reasoning / answer tokens
    (``mean_reasoning_tokens`` / ``mean_answer_tokens``), its soak slices (``slices``: :data:`_SLICE_KEYS` of each)
    and ``display``, the text of each table cell (:func:`row_display`)."""
    out = row.pick((*ROW_KEYS, "hidden_reasoning"))
    out["mean_reasoning_tokens"], out["mean_answer_tokens"] = _token_split(row)
    out["slices"] = [s.pick(_SLICE_KEYS) for s in row.slices]
    out["display"] = row_display(row)
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


def _banners(rep: Report | None) -> list[str]:
    """The run's banners as the report shows them (compressed time)."""
    ts = (rep.time_scale if rep is not None else None) or 1.0
    if ts == 1.0:
        return []
    return [f"{Flag.COMPRESSED_TIME.glyph} (simulator time_scale = {ts:g}): {Flag.COMPRESSED_TIME.text}; real-time "
            "equivalents in report.md"]


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
        "error", "failures": [one line per step and error class with server messages: its count, top messages and
        hints (:func:`harness.report.explain.step_failure_lines`)], "workers": [...], "runs": [{run_id, current,
        files: [{name, href, size}]}], "stopping": {run_id,
        stage, since_wall, stop_wall, drain_timeout_s, users_left} | None}``. Times: epoch s. While the run shown
        is the current one (state ``running`` / ``stopping``) its ``status`` is ``running``, ``draining`` or
        ``writing_report`` and its notes start with :data:`IN_PROGRESS_NOTE` (no "INTERRUPTED RUN" note).
    """
    rep = entry.report if entry is not None else None
    cur = current_row(rep) if rep is not None else None
    live = shown is not None and shown == runs.current and runs.state in ("running", "stopping")
    rows = [row_view(r) for r in rep.steps] if rep is not None else []
    if cur is not None:
        rows = rows[:-1]
    for r in rows:
        r["provisional"] = live
    run = None
    if rep is not None:
        run = rep.pick(("run_id", "status", "profile_name", "model", "start_wall", "end_wall", "duration_s",
                        "time_scale", "hours_to_n", "totals", "notes", "cost_usd_per_hour"))
        run["target"] = rep.target.get("base_url")
        if live:
            run["status"], run["notes"] = _live_status(runs.state, stopping), _live_notes(run.get("notes"))
    return {
        "now": time.time(),
        "state": runs.state,
        "run": run,
        "steps": rows,
        "columns": columns(list(run.get("hours_to_n") or []) if run else [],
                           bool(run and run.get("cost_usd_per_hour") is not None)),
        "banners": _banners(rep),
        "failures": step_failure_lines(rep.steps) if rep is not None else [],
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
