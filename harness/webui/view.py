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

from harness.report.catalogue import (
    CONVERSIONS,
    FIGURES,
    Flag,
    Unit,
    cross_check_text,
    display,
    group_header,
    group_text,
    hours_header,
    hours_text,
    interval_text,
    label_text,
    to_n_label,
    usd_header,
    usd_text,
)
from harness.report.explain import step_failure_lines
from harness.report.model import Report, StepRow
from harness.report.realtime import in_real_time, values_in_real_time
from harness.report.selfcert import SELFCERT_KEYS, selfcert_text
from harness.webui.cache import Entry, current_row
from harness.webui.downloads import files_of
from harness.webui.runs import Live, RunDirs, WorkerInfo

__all__ = [
    "CHARTS", "IN_PROGRESS_NOTE", "MAIN_KEYS", "ROW_KEYS", "TABLE_KEYS", "columns", "duration_text", "headline",
    "payload", "row_display", "row_view",
]  # fmt: skip

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
    "client_lagged_pct", "client_starved", "client_processes", "client_cpu_share_max", "client_chunks_per_s_proc",
    "client_ttft_error_bound_s", "client_itl_error_bound_s", "client_selfcert", "low_confidence", "users_seen",
)
#: The catalogued figures of the page's per-step table, in order (between the label and the errors column come
#: C, window and completed; after the figures, one hours-to-N (and US$) column per N, the read lag, starved).
TABLE_KEYS = (
    "concurrency", "window_s", "completed", "errors", "output_tps", "output_tps_reasoning", "output_tps_answer",
    "mean_reasoning_tokens", "mean_answer_tokens", "per_stream_tps", "ttft_p50_s", "ttft_p90_s", "ttft_p95_s",
    "ttft_p99_s", "ttfat_p50_s", "ttfat_p90_s", "ttfat_p95_s", "ttfat_p99_s", "gap_p50_s", "gap_p95_s", "gap_p99_s",
    "tpot_mean_s", "e2e_p50_s", "truncated_pct",
)  # fmt: skip
#: The columns the per-step table shows in its row (the rest are in the row's expandable details): the label, these
#: figures, then hours to each N (and US$ to the first N when priced), the answer.
MAIN_KEYS = ("concurrency", "completed", "errors", "output_tps", "ttft_p50_s", "ttft_p99_s", "ttfat_p50_s")
#: The page's charts: (id, title, figure keys, display unit). Each chart has its own y axis in that unit; the
#: factor from the stored unit is the catalogue's (:data:`harness.report.catalogue.CONVERSIONS`), sent with it.
CHARTS = (
    ("tps", "Output throughput", ("output_tps", "output_tps_reasoning", "output_tps_answer"), Unit.TOK_S),
    ("ttft", "TTFT", ("ttft_p50_s", "ttft_p99_s"), Unit.MS),
    ("ttfat", "TTFAT", ("ttfat_p50_s", "ttfat_p99_s"), Unit.S),
)
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
    ``hours_<N>`` / ``usd_<N>`` for each N, the read lag p99, starved, the self-certification figures
    (:data:`SELFCERT_KEYS`) and line (``selfcert``, :func:`harness.report.selfcert.selfcert_text`), the hours
    interval's method (``interval``, :func:`harness.report.catalogue.interval_text`) and its cross-check
    (``cross_check``)."""
    split = dict(zip(("mean_reasoning_tokens", "mean_answer_tokens"), _token_split(row), strict=True))
    out = {"label": label_text(row)}
    out.update({k: FIGURES[k].text(split[k]) if k in split else display(row, k) for k in TABLE_KEYS})
    out["errors"] = _errors_text(row)
    for h in row.hours:
        out[f"hours_{h.n}"] = hours_text(h)
        out[f"usd_{h.n}"] = usd_text(h.usd, h.usd_low, h.usd_high)
    out["client_read_lag_p99_s"] = display(row, "client_read_lag_p99_s")
    out["client_starved"] = _starved_text(row)
    for k in SELFCERT_KEYS:
        out[k] = display(row, k)
    out["selfcert"] = selfcert_text(row)
    out["interval"] = interval_text(row)
    out["cross_check"] = cross_check_text(row)
    return out


def columns(hours_to_n: list[int], priced: bool) -> list[dict[str, Any]]:
    """The per-step table's columns: ``[{key, header, main}]`` (headers from the catalogue), keys as in
    :func:`row_display`; ``main``: shown in the row (:data:`MAIN_KEYS`, hours to each N, US$ to the first N),
    else in the row's details."""
    cols: list[dict[str, Any]] = [{"key": "label", "header": "step", "main": True}]
    cols += [{"key": k, "header": FIGURES[k].header + (" (by class)" if k == "errors" else ""),
              "main": k in MAIN_KEYS} for k in TABLE_KEYS]
    for i, n in enumerate(hours_to_n):
        cols.append({"key": f"hours_{n}", "header": hours_header(n), "main": True, "answer": True})
        if priced:
            cols.append({"key": f"usd_{n}", "header": usd_header(n), "main": i == 0, "answer": True})
    cols.append({"key": "interval", "header": "hours interval (method, ± rate)", "main": False})
    cols.append({"key": "cross_check", "header": "interval cross-check", "main": False})
    cols.append({"key": "client_starved", "header": "starved", "main": False})  # the read lag p99: SELFCERT_KEYS
    cols += [{"key": k, "header": FIGURES[k].header, "main": False} for k in SELFCERT_KEYS]
    cols.append({"key": "selfcert", "header": "self-certification", "main": False})
    return cols


def charts() -> list[dict[str, Any]]:
    """The charts' declarations (:data:`CHARTS`): ``[{id, title, unit, factor, series: [{key, name}]}]``; a value
    drawn is the stored one × ``factor`` (the catalogue's conversion to ``unit``); names are the catalogue's."""
    out = []
    for cid, title, keys, unit in CHARTS:
        stored = FIGURES[keys[0]].unit
        factor = 1.0 if stored == unit else CONVERSIONS[(stored, unit)]
        out.append({"id": cid, "title": f"{title} ({unit.value})", "unit": unit.value, "factor": factor,
                    "series": [{"key": k, "name": FIGURES[k].label} for k in keys]})
    return out


def duration_text(s: float | None) -> str:
    """Seconds as the headline strip shows a time left: ``42 s``, ``12 min 05 s``, ``1 h 40 min``; ``–`` for None,
    ``until Stop`` for an unbounded time."""
    if s is None:
        return "–"
    if s == float("inf"):
        return "until Stop"
    t = max(0, round(s))
    if t < 60:
        return f"{t} s"
    if t < 3600:
        return f"{t // 60} min {t % 60:02d} s"
    return f"{t // 3600} h {t % 3600 // 60:02d} min"


def _time_left(row: StepRow, live: Live, now: float) -> tuple[str, str, str]:
    """``(step i of n, step time left, run time left)`` of ``row`` (the step in progress) by the run's plan; the
    step's own planned length when the plan is unknown (``?`` of n, run time left unknown)."""
    plan = list(live.plan or ())
    idx = next((i for i, (ph, st, _) in enumerate(plan) if ph == row.phase and st == row.step), None)
    length = row.planned_duration_s if row.planned_duration_s is not None else (
        plan[idx][2] if idx is not None else None)
    step_left = None if length is None or row.start_wall is None else max(0.0, row.start_wall + length - now)
    if idx is None:
        return "?", duration_text(step_left), "–"
    run_left = None if step_left is None else step_left + sum(d for _, _, d in plan[idx + 1:])
    return f"{idx + 1} of {len(plan)}", duration_text(step_left), duration_text(run_left)


def headline(rep: Report | None, status: str, live: Live | None, now: float) -> list[dict[str, str]]:
    """The headline strip: ``[{key, label, text}]``, every figure the report's display text of the step in
    progress (else the run's last step): status; step (label, i of n) and time left (step, run; only while it
    runs); users; output tok/s; TTFT p50/p99; errors (the run's, by class); hours (and US$) to the first N with
    its 95 % interval; the interval's method and its cross-check. Empty without a report."""
    if rep is None:
        return [{"key": "status", "label": "status", "text": status}]
    cur = current_row(rep)
    row = cur if cur is not None else (rep.steps[-1] if rep.steps else None)
    out = [{"key": "status", "label": "status", "text": status}]
    if row is None:
        return out
    step = label_text(row)
    if cur is not None and live is not None:
        of_n, step_left, run_left = _time_left(cur, live, now)
        out.append({"key": "step", "label": "step", "text": f"{step} ({of_n})"})
        out.append({"key": "time_left", "label": "time left (step · run)", "text": f"{step_left} · {run_left}"})
    else:
        out.append({"key": "step", "label": "last step", "text": step})
    users = live.users if cur is not None and live is not None and live.users is not None else row.users_seen
    out.append({"key": "users", "label": "users", "text": "–" if users is None else f"{users:,}"})
    out.append({"key": "output_tps", "label": FIGURES["output_tps"].header, "text": display(row, "output_tps")})
    ttft = ("ttft_p50_s", "ttft_p99_s")
    out.append({"key": "ttft", "label": group_header(ttft), "text": group_text(row, ttft)})
    errors = display(rep.totals, "errors")
    by = rep.totals.errors_by_class
    out.append({"key": "errors", "label": f"{FIGURES['errors'].header} (run)",
                "text": f"{errors} ({', '.join(f'{k} {v}' for k, v in by.items())})" if by else errors})
    h = row.hours[0] if row.hours else None
    if h is not None:
        out.append({"key": "hours", "label": f"{to_n_label('hours', h.n)} (95 %)", "text": hours_text(h)})
        if rep.cost_usd_per_hour is not None:
            out.append({"key": "usd", "label": f"{to_n_label('usd', h.n)} (95 %)",
                        "text": usd_text(h.usd, h.usd_low, h.usd_high)})
        out.append({"key": "interval", "label": "interval", "text": interval_text(row)})
        out.append({"key": "cross_check", "label": "cross-check", "text": cross_check_text(row)})
    return out


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
    return [f"{Flag.COMPRESSED_TIME.glyph} (simulator time_scale = {ts:g}): the strip and the tables show real-time "
            f"equivalents (durations ÷ {ts:g}, rates × {ts:g}, as report.md's real-time table; counts as measured); "
            "the charts' values too, on a time axis of compressed wall time"]


def _run_entry(path: Path, current: bool, url: str) -> dict[str, Any]:
    return {"run_id": path.name, "current": current, "files": files_of(path, url)}


def payload(runs: RunDirs, entry: Entry | None, shown: Path | None, workers: list[WorkerInfo], url: str,
            stopping: dict[str, Any] | None = None, live_run: Live | None = None,
            now: float | None = None) -> dict[str, Any]:
    """The view's JSON.

    Args:
        runs: this process's runs.
        entry: the cached report of the run shown (None when there is no run yet).
        shown: that run's directory.
        workers: the master's workers (empty on a single process).
        url: the base URL of the view's routes (``<web_base_path>/llm``), for the download links.
        stopping: the current run's stop in progress (:func:`harness.webui.runs.stopping`), None when none.
        live_run: the current run's users and plan (:func:`harness.webui.runs.live`), for the headline strip of
            the run in progress (None: unknown).
        now: the time of the answer (epoch s; None: ``time.time()``), from which the headline's time left counts.

    Returns:
        ``{"now", "state", "run": {run_id, status, profile_name, model, target, start_wall, end_wall,
        duration_s, time_scale, hours_to_n, totals, notes} | None, "steps": [row_view... + "provisional"]
        (finished steps; ``provisional`` while the run shown is the one going),
        "current": row_view | None (the step in progress), "history": [...], "report_age_s", "compute_s",
        "error", "headline": [{key, label, text}] (:func:`headline`), "charts": [...] (:func:`charts`),
        "workers": [...], "runs": [{run_id, current, files: [{name, href, size}]}], "stopping": {run_id,
from harness.report.explain import step_failure_lines
        stage, since_wall, stop_wall, drain_timeout_s, users_left} | None}``. Times: epoch s. While the run shown
        is the current one (state ``running`` / ``stopping``) its ``status`` is ``running``, ``draining`` or
        ``writing_report`` and its notes start with :data:`IN_PROGRESS_NOTE` (no "INTERRUPTED RUN" note).
    """
    rep = entry.report if entry is not None else None
    if rep is not None and (rep.time_scale or 1.0) != 1.0:  # compressed time: the rows in real-time equivalents
        rep = rep.model_copy(update={"steps": [in_real_time(r, rep.time_scale) for r in rep.steps]})
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
        if (rep.time_scale or 1.0) != 1.0:  # the banner says it, for what the view shows (real-time equivalents);
            # the report's own note is about report.md's tables (compressed wall time)
            own = f"{Flag.COMPRESSED_TIME.glyph}:"
            run["notes"] = [n for n in run.get("notes") or [] if not str(n).startswith(own)]
        if live:
            run["status"], run["notes"] = _live_status(runs.state, stopping), _live_notes(run.get("notes"))
    now = time.time() if now is None else now
    status = str(run["status"]) if run else runs.state
    return {
        "now": now,
        "headline": headline(rep, status, live_run if live else None, now),
        "charts": charts(),
        "state": runs.state,
        "run": run,
        "steps": rows,
        "columns": columns(list(run.get("hours_to_n") or []) if run else [],
                           bool(run and run.get("cost_usd_per_hour") is not None)),
        "banners": _banners(rep),
        "failures": step_failure_lines(rep.steps) if rep is not None else [],
        "current": row_view(cur) if cur is not None else None,
        # the live trace of the step in progress: only while the run shown is going (once it is recorded, its
        # final rows are the figures; the trace of its last step would linger beside them)
        "history": [values_in_real_time(h, (rep.time_scale if rep is not None else None) or 1.0)
                    for h in entry.history] if entry is not None and live else [],
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
