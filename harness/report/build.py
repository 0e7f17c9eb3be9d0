"""Assemble the report of a run directory (a typed :class:`harness.report.model.Report`) and write ``report.json``
/ ``report.md`` / ``report.html``.

See :func:`build_report` for the keys and :mod:`harness.report.model` for their types. All durations are seconds,
token counts are tokens, throughputs are tokens or requests per second, ``*_pct`` are percentages and ``*_share`` /
``*_rate`` (error rate) 0..1.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from harness.clientlag import CLIENT_LAG_LIMIT_S
from harness.config import DEFAULT_SLICE_S, SloSpec
from harness.report import fmt
from harness.report.axes import setting_rows
from harness.report.catalogue import TOPICS, Flag, catalogue_json
from harness.report.columns import (
    FrameRun,
    load_frame_run,
    run_totals,
    step_rows,
    step_windows,
    warmup_summary,
    without_gaps,
)
from harness.report.cost import usd_per_hour
from harness.report.diagnosis import hidden_reasoning_notes, prompt_notes, prompt_rows
from harness.report.exprs import END, START
from harness.report.goodput import GOODPUT_ROW_KEYS, add_goodput, slo_capacity, slo_spec
from harness.report.load import DEFAULT_HOURS_TO_N, Phase
from harness.report.lost import worker_losses
from harness.report.model import SCHEMA, Report, SearchResult, StepRow
from harness.report.rate import add_rate, open_loop_steps, rate_notes
from harness.report.rundata import PhaseEvent, RunMeta
from harness.report.search import search_result
from harness.report.series import time_bin_s
from harness.report.soak import drift_notes, slice_bounds, step_drift, step_slices
from harness.report.tokens import CoarseChunkBins
from harness.report.turns import turn_rows
from harness.report.until import UNTIL_ROW_KEYS, add_until, until_notes

__all__ = ["DEFINITIONS", "SCHEMA", "SOAK_GOODPUT_ROW_KEYS", "RunFigures", "RunInfo", "Settings", "assemble_report",
           "build_report", "report_settings", "run_figures", "write_report"]

#: The formulas behind every figure (:data:`harness.report.catalogue.TOPICS`), shown in the Markdown report and
#: stored in ``report.json``.
DEFINITIONS: dict[str, str] = TOPICS


#: Keys :func:`run_figures` adds to each step row after :func:`harness.report.columns.step_rows` (goodput, soak
#: slices, drift, the rate figures of :mod:`harness.report.rate`).
SOAK_GOODPUT_ROW_KEYS = (*GOODPUT_ROW_KEYS, "slices", "drift", "rate", *UNTIL_ROW_KEYS)


def _sub(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` when it is a dict, else an empty dict."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _hours_n(meta: RunMeta, override: Sequence[int] | None) -> list[int]:
    if override:
        return [int(n) for n in override]
    ns = _sub(meta.profile, "report").get("hours_to_n")
    if isinstance(ns, list) and ns:
        return [int(n) for n in ns]
    return list(DEFAULT_HOURS_TO_N)


def _slice_s(meta: RunMeta) -> float:
    """``profile.report.slice_s`` from run.json (seconds), else :data:`harness.config.DEFAULT_SLICE_S`."""
    v = _sub(meta.profile, "report").get("slice_s")
    try:
        f = float(v) if v is not None else DEFAULT_SLICE_S
    except (TypeError, ValueError):
        return DEFAULT_SLICE_S
    return f if f > 0 and math.isfinite(f) else DEFAULT_SLICE_S


def _time_scale(meta: RunMeta) -> tuple[float, bool]:
    """(time_scale, target is the built-in simulator) from run.json.

    Only the top-level ``simulator`` dict (written when the simulator was the target) counts: the profile's
    ``simulator`` section is present even when a real server was measured.
    """
    sim = meta.simulator
    if sim is None:
        return 1.0, bool(meta.target.get("simulator") is True)
    ts = sim.get("time_scale")
    try:
        v = float(ts) if ts is not None else 1.0
    except (TypeError, ValueError):
        v = 1.0
    return (v if v > 0 and math.isfinite(v) else 1.0), True


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun`` in the right number: "1 stream", "8 streams"."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _at_least_s(v_s: float) -> str:
    """A least duration in whole seconds, rounded up (52.1 → ``53``: a shorter setting would fall short),
    thousands separated (``1,613``)."""
    return f"{math.ceil(v_s - 1e-9):,}"


def profile_of(meta: RunMeta) -> dict[str, Any]:
    """The profile dict of run.json (empty when absent)."""
    return meta.profile


def _steady_notes(r: StepRow) -> list[str]:
    """Notes on one steady row's sample: Little's law, the hours interval's width and the token cross-check."""
    if not r.steady:
        return []
    out: list[str] = []
    lab, c = r.label, r.concurrency
    little = r.littles_law_c
    open_loop = r.rate is not None  # a rate step's C is its cap / pool, not the requests kept in flight
    if little is not None and r.littles_law_ok is False and not open_loop:
        small = (f" (low confidence: {r.sample_requests} requests over {r.window_s:.1f} s; a short window "
                 "misreads it)") if r.low_confidence else ""
        out.append(f"{lab}: Little's law does not hold: completions/s × mean E2E = {little:.2f} in flight, target "
                   f"C={c} ({100 * (little / c - 1):+.0f} %){small}: the window is not steady at C={c} or the load "
                   "generator did not keep C requests in flight.")
    iv = r.hours_interval
    key = iv.duration_key
    if r.until_margin is not None:  # steps.until held the step: its max bounds the step's length
        key = "steps.until.max"
    if iv.reason:
        if iv.needed_duration_s is None:  # no usable completion or no E2E: a longer step is not known to help
            out.append(f"{lab}: hours to N has no interval ({iv.reason}).")
        else:
            out.append(f"{lab}: hours to N has no interval ({iv.reason}); lengthen {key} to ≥ "
                       f"{_at_least_s(iv.needed_duration_s)} s.")
    elif iv.needed_window_s is not None:
        how = (f"batch means, {iv.batches} × {iv.batch_s or 0.0:.1f} s" if iv.batches else
               f"renewal-reward, {_count(iv.cycles or 0, 'request')} of {_count(iv.streams or 0, 'stream')}")
        out.append(f"{lab}: the hours-to-N interval is ±{100 * (iv.rel_halfwidth or 0.0):.0f} % ({how}); "
                   f"for ±10 % the window would need ~"
                   f"{_at_least_s(iv.needed_window_s)} s: set {key} to ≥ "
                   f"{_at_least_s(iv.needed_duration_s or 0.0)} s.")
    outside = [h for h in r.hours if h.token_check == "outside"]
    if outside:
        h = outside[0]
        hi = fmt.hours(h.hours_high)  # None: ∞
        out.append(f"{lab}: the token-based cross-check ({fmt.hours(h.token_hours)} h for N={h.n:,}) is OUTSIDE "
                   f"the interval of the recommended figure ({fmt.hours(h.hours)} h, {fmt.sig3(h.hours_low)}–"
                   f"{hi} h): output "
                   "lengths or token counts of the window's requests differ from its completions' (see tokens_by).")
    return out


def _notes(run: RunInfo, rep: Report, unplaced: int) -> list[str]:
    """The run-level and per-step notes of a report (interruption, compressed time, token estimates, failures,
    steadiness, client starvation, the steady rows' own notes, users, unplaced and cut-off requests)."""
    notes: list[str] = list(run.problems)
    rows = rep.steps
    status = rep.status
    if rep.interrupted:
        why = f"status '{status}'" if status not in ("finished", "unknown") else "no run_end event"
        if not run.has_run_end:
            why += ", no run_end event: the last step ends at the latest request end"
        notes.append(f"INTERRUPTED RUN ({why}). Figures cover only what was recorded; the last step may be short.")
    ts = rep.time_scale
    if ts != 1.0:
        notes.append(
            f"COMPRESSED TIME: the target was the simulator at time_scale={ts:g} (wall seconds per simulated "
            f"second). Every figure in the tables is in compressed wall time; real-time equivalents (durations "
            f"÷ {ts:g}, rates × {ts:g}) are in the 'Real-time equivalents' table. Client overheads do not scale, "
            "so the equivalents are approximate."
        )
    sim = run.meta.simulator or {}
    said = [f"{' '.join(map(str, words))} ({src})" for src, words in
            (("simulator.args", sim.get("args") or []), ("$LLMLOAD_SIM_ARGS", sim.get("env_args") or [])) if words]
    if said:
        notes.append(f"SIMULATOR OPTIONS: the built-in simulator ran with {'; '.join(said)}; what they set (faults, "
                     "drift, limits, caches) shows in these figures.")
    tot = rep.totals
    if tot.estimated_tokens:
        notes.append(
            f"{tot.estimated_tokens} of {tot.completed} successful requests "
            f"({100 * (tot.estimated_tokens_share or 0):.1f} %) have client-estimated output token counts "
            "(token_source = estimate: the server sent no usage); token figures that include them are approximate."
        )
    if tot.suspect_truncations:
        notes.append(
            f"{tot.suspect_truncations} requests ended with finish_reason 'stop' but output tokens == max_tokens "
            "(suspect truncation); they are counted as truncated, not usable."
        )
    for r in rows:
        rate = r.error_rate or 0.0
        if rate > 0.05:
            top = ", ".join(f"{k} {v}" for k, v in sorted(r.errors_by_class.items(), key=lambda kv: -kv[1])[:3])
            if r.client_starved:
                notes.append(f"{r.label}: {100 * rate:.1f} % of requests FAILED ({top}) while the load generator "
                             "was starved (below): timeouts may be the client's, not the server's.")
            else:
                notes.append(f"{r.label}: {100 * rate:.1f} % of requests FAILED ({top}); its figures describe a "
                             "failing server.")
        if not r.steady:
            notes.append(f"{r.label}: NOT steady, {r.not_steady_reason}; its row shows burst figures over "
                         "the whole step.")
        if r.client_starved:
            notes.append(
                f"{r.label}: the LOAD GENERATOR WAS STARVED: {r.client_lagged_pct:.0f} % of requests were read "
                f"more than {CLIENT_LAG_LIMIT_S:g} s after their bytes arrived (client read lag p99 "
                f"{r.client_read_lag_p99_s:.2f} s, max {r.client_read_lag_max_s:.2f} s). Requests started "
                "late, so this step's throughput, request rate and hours to N are the client's limit, not the "
                "server's, and its latencies include client delays. Give Locust its own CPUs (not the server's), "
                "or more worker processes."
            )
        notes.extend(_steady_notes(r))
        users = r.users_seen or 0
        if (r.steady and r.phase == "step" and r.first_wave_method == "users" and 0 < users < r.concurrency
                and r.rate is None):
            notes.append(f"{r.label}: only {users} distinct users sent requests in this step (target "
                         f"{r.concurrency}): a worker may have died or users failed to start; its figures are for "
                         f"about C={users}.")
        if r.first_wave_method != "users":
            notes.append(f"{r.label}: records carry no user id; the first wave was taken as the requests in "
                         "flight at the step start plus the first C requests of the step.")
    unmeasured = [r.label for r in rows if r.requests and r.client_starved is None]
    if unmeasured:
        notes.append(f"Client read lag was not measured at {', '.join(unmeasured)} (no kernel receive stamps: TLS, "
                     "or not Linux): whether the load generator kept up is unknown there.")
    if unplaced:
        notes.append(f"{unplaced} non-warm-up records belong to no phase in phases.jsonl and were ignored in the "
                     "per-step counts (they still count in throughput when inside a window).")
    cut = run.meta.cut_off
    lost = sum(x.in_flight or 0 for x in worker_losses(run.events))  # a lost worker's: noted on their own
    cut_off = isinstance(cut, int) and not isinstance(cut, bool) and cut - lost > 0
    last_failed = bool(rows) and bool(rows[-1].errors or rows[-1].step_errors)
    if rows and (cut_off or (last_failed and rows[-1].end_source in ("run_end", "last_record"))):
        # only when some were: a run whose records are every request sent (nothing cut off) has nothing missing
        notes.append("Requests cut off when the run stopped (or that failed) are not counted in tok/s: the last "
                     "step's throughput can be slightly low.")
    return notes


class RunInfo(Protocol):
    """What the report's header and notes read of a loaded run (:class:`harness.report.columns.FrameRun`)."""

    path: Path
    meta: RunMeta
    phases: list[Phase]
    has_run_end: bool
    phases_inferred: bool
    problems: list[str]
    #: The ``phases.jsonl`` events as read (the ``worker_lost`` ones: :mod:`harness.report.lost`).
    events: list[PhaseEvent]


@dataclass(frozen=True)
class Settings:
    """The report settings of a run, from its ``run.json`` (and the caller's N).

    Attributes:
        hours_n: sample counts N for hours to N.
        time_scale: wall seconds per simulated second (1 for a real server); simulated: the target was the
            built-in simulator.
        usd_per_hour: the deployment's price (US$/h) or None; cost_problem: a note when ``cost`` is unusable.
        slo: the profile's SLOs or None; slo_problem: a note when ``slo`` is unusable.
        slice_s: seconds per soak slice.
    """

    hours_n: list[int]
    time_scale: float
    simulated: bool
    usd_per_hour: float | None
    cost_problem: str | None
    slo: SloSpec | None
    slo_problem: str | None
    slice_s: float


def report_settings(meta: RunMeta, n: Sequence[int] | None = None) -> Settings:
    """The :class:`Settings` of a run whose ``run.json`` is ``meta``; ``n`` overrides ``profile.report.hours_to_n``."""
    profile = meta.profile
    time_scale, simulated = _time_scale(meta)
    usd_h, cost_problem = usd_per_hour(profile)
    slo, slo_problem = slo_spec(profile)
    return Settings(_hours_n(meta, n), time_scale, simulated, usd_h, cost_problem, slo, slo_problem, _slice_s(meta))


@dataclass
class RunFigures:
    """Every record-derived part of the report (units: see :func:`build_report`).

    Attributes:
        rows: one row per single-stream phase / load step, with cost, goodput, ``slices`` and ``drift``.
        warmup: the ``warmup`` block; totals: the ``totals`` block; prompts: the per-prompt rows.
        unplaced: non-warm-up records of no phase.
        last_end: the latest record end (epoch s; None without records).
        turns: the per-conversation-turn rows (:func:`harness.report.turns.turn_rows`; ``[]`` without turns).
        search: the SLO capacity search's outcome (:func:`harness.report.search.search_result`; None without one).
    """

    rows: list[dict[str, Any]]
    warmup: dict[str, Any]
    totals: dict[str, Any]
    prompts: list[dict[str, Any]]
    unplaced: int
    last_end: float | None
    turns: list[dict[str, Any]]
    search: SearchResult | None = None


def run_figures(run: FrameRun, settings: Settings) -> RunFigures:
    """Compute every figure of the report over the run's record frame (no Python object per record)."""
    main = run.main
    open_loop = open_loop_steps(run.phases, run.events, without_gaps(main), profile_of(run.meta))
    rows = step_rows(run, settings.hours_n, settings.time_scale, settings.usd_per_hour, main=main, open_loop=open_loop)
    main = without_gaps(main)  # the figures below filter rows and do not read the gaps
    for row in rows:
        add_goodput(row, main, settings.slo)
        row["slices"] = step_slices(row, main, settings.slice_s)
        row["drift"] = step_drift(row["slices"])
    add_rate(rows, run.events, main, profile_of(run.meta))
    add_until(rows, run.events)
    totals = run_totals(run)
    unplaced = int(totals.pop("unplaced"))
    return RunFigures(rows, warmup_summary(run), totals, prompt_rows(main), unplaced, run.last_end, turn_rows(main),
                      search_result(run.events))


def build_report(run_dir: str | os.PathLike[str], n: Sequence[int] | None = None) -> Report:
    """The report of a run directory (:class:`harness.report.model.Report`; ``report.json`` is its
    serialisation), computed over its records as a columnar frame (:func:`harness.report.columns.load_frame_run`).

    Args:
        run_dir: the run directory (``run.json``, ``records.jsonl``, ``phases.jsonl``).
        n: sample counts for hours-to-N (default: ``profile.report.hours_to_n``, else 100K/200K/500K/900K).

    Returns:
        The report; its fields (the JSON keys): ``schema, run_id, run_dir, status, interrupted, profile_name,
        target, model, start_wall, end_wall, duration_s, simulated, time_scale, hours_to_n, warmup, totals, steps,
        cost_usd_per_hour, slice_s, slo, slo_capacity, search, prompts, settings, turns, definitions, notes``.
        ``search``: the SLO capacity search's outcome (:func:`harness.report.search.search_result`; None without
        one). ``steps`` holds one row per single-stream phase / load step (:func:`harness.report.columns.step_rows`,
        with ``cost``: :func:`harness.report.cost.add_cost`; ``rate``: :func:`harness.report.rate.add_rate`, over
        the record frame);
        ``cost_usd_per_hour`` is the profile's price (US$/h, None without ``cost``); ``prompts`` one row per prompt
        class (:func:`harness.report.diagnosis.prompt_rows`). Each row also has the goodput keys
        (:func:`harness.report.goodput.add_goodput`; None without ``slo``), ``slices`` (soak slices,
        :func:`harness.report.soak.step_slices`) and ``drift`` (:func:`harness.report.soak.step_drift`). Also
        ``slice_s`` (seconds per slice), ``slo`` (the profile's SLOs, None without) and ``slo_capacity``
        (:func:`harness.report.goodput.slo_capacity`). ``settings``: one row per (sweep-axes setting, load step),
        :func:`harness.report.axes.setting_rows` (``[]`` without ``axes:``); ``turns``: one row per conversation
        turn index, :func:`harness.report.turns.turn_rows` (``[]`` without ``conversation:``).

    Raises:
        NoRecordsError: the directory or its records.jsonl is missing.
        ValueError: a JSON-lines file is corrupt before its last line.
    """
    try:
        return _report_of(load_report_run(run_dir), n)
    except CoarseChunkBins:  # a window the bins do not fit (a bug of report_chunk_edges): the chunk lists
        return _report_of(load_frame_run(run_dir), n)


def load_report_run(run_dir: str | os.PathLike[str]) -> FrameRun:
    """The run as the report reads it: :func:`harness.report.columns.load_frame_run` in two passes, the chunk lists
    reduced to the bins of :func:`report_chunk_edges` (memory that does not grow with the chunk times kept).

    Raises:
        NoRecordsError, ValueError, OSError: as :func:`harness.report.columns.load_frame_run`.
    """
    return load_frame_run(run_dir, chunk_edges=report_chunk_edges)


def report_chunk_edges(run: FrameRun) -> list[float]:
    """Every window edge (epoch s) the report asks output tokens of, from the records without their chunk lists:
    each step's window (steady, else the whole step, as :func:`harness.report.columns.step_rows`), its soak slices
    (:func:`harness.report.soak.slice_bounds`) and the timeline chart's bins
    (:func:`harness.report.charts.timeline_chart`: from the report's start, :func:`harness.report.series.time_bin_s`
    wide, to the last step or record end)."""
    settings = report_settings(run.meta)
    steps, windows = step_windows(run)
    edges: list[float] = []
    for p, w in zip(steps, windows, strict=True):
        w0, w1 = (w.start, w.end) if w.steady else (p.start, p.end)
        edges += [w0, w1]
        if w.steady:
            edges += [x for b in slice_bounds(w0, w1, settings.slice_s) for x in b]
    main = run.main
    first: float | None = run.meta.start_wall
    if first is None and run.phases:
        first = run.phases[0].start
    if first is None and main.height:
        first = float(main.get_column(START).min())  # type: ignore[arg-type]
    t0 = float(first or 0.0)
    ends = [float(p.end) for p in steps]
    if main.height:
        ends.append(float(main.get_column(END).max()))  # type: ignore[arg-type]
    t1 = max(ends, default=t0)
    if main.height and t1 > t0:
        width = time_bin_s(t1 - t0)
        n = max(1, math.ceil((t1 - t0) / width))
        edges += [x for i in range(n) for x in (t0 + i * width, t0 + (i + 1) * width)]
    return edges


def _report_of(run: FrameRun, n: Sequence[int] | None) -> Report:
    settings = report_settings(run.meta, n)
    return assemble_report(run, settings, run_figures(run, settings))


def assemble_report(run: RunInfo, settings: Settings, figs: RunFigures) -> Report:
    """The report (see :func:`build_report`) of a run from its settings and computed figures: header, blocks,
    capacity and notes. Every NaN or infinite float becomes None.

    Raises:
        pydantic.ValidationError: a section builder produced a value of the wrong type (a bug, not bad input).
    """
    meta = run.meta
    rows = figs.rows
    target = meta.target
    profile = meta.profile
    status = str(meta.status or "unknown")
    start = meta.start_wall
    if start is None and run.phases:
        start = run.phases[0].start
    end = meta.end_wall
    if end is None:
        end = run.phases[-1].end if run.phases else figs.last_end
    slo = settings.slo
    rep: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": str(meta.run_id or Path(run.path).resolve().name),
        "run_dir": str(run.path),
        "status": status,
        "interrupted": status in ("interrupted", "running", "aborted") or (not run.has_run_end and
                                                                        not run.phases_inferred),
        "profile_name": profile.get("name") or meta.get("profile_name"),  # profile_name, model: older run.json
        "target": target,
        "model": target.get("model") or meta.get("model"),
        "start_wall": start,
        "end_wall": end,
        "duration_s": (float(end) - float(start)) if start is not None and end is not None else None,
        "simulated": settings.simulated,
        "time_scale": settings.time_scale,
        "hours_to_n": settings.hours_n,
        "warmup": figs.warmup,
        "totals": figs.totals,
        "steps": rows,
        "cost_usd_per_hour": settings.usd_per_hour,
        "slice_s": settings.slice_s,
        "slo": slo.model_dump() if slo is not None else None,
        "slo_capacity": slo_capacity(rows, slo),
        "search": figs.search.as_dict() if figs.search is not None else None,
        "prompts": figs.prompts,
        "settings": setting_rows(rows),
        "turns": figs.turns,
        "definitions": dict(DEFINITIONS),
        "figures": catalogue_json(),
    }
    report = Report.model_validate(_finite(rep))
    steps = report.steps  # the notes read the typed figures, as every surface does
    notes = _notes(run, report, figs.unplaced) + rate_notes(steps)
    notes += until_notes(steps)
    notes += prompt_notes(report.prompts, profile) + hidden_reasoning_notes(steps, Flag.HIDDEN_REASONING.glyph)
    if settings.cost_problem:
        notes.append(settings.cost_problem)
    notes += drift_notes(steps)
    if settings.slo_problem:
        notes.append(settings.slo_problem)
    report.notes = notes
    report.input_notes = list(run.problems)  # the run directory's own state (damage, missing files): shown first
    return report


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def write_report(run_dir: str | os.PathLike[str], n: Sequence[int] | None = None) -> tuple[Report, str]:
    """Build the report, write ``report.json`` (:meth:`harness.report.model.Report.to_json`), ``steps.csv``
    (:mod:`harness.report.csvexport`), ``report.md`` and
    (matplotlib permitting) ``report.html`` with ``figures/*.png`` into the run directory.

    Returns:
        (the typed report, whose :meth:`harness.report.model.Report.to_json` is the report.json written; the
        Markdown of report.md).

    Raises:
        NoRecordsError, ValueError, OSError: as :func:`build_report`, or report.json / report.md not writable.
    """
    from harness.report.csvexport import write_steps_csv
    from harness.report.html import write_html
    from harness.report.render import render_markdown

    run = load_report_run(run_dir)  # read once: the tables and the figures are drawn from the same frame
    try:
        rep = _report_of(run, n)
    except CoarseChunkBins:  # a window the bins do not fit (a bug of report_chunk_edges): the chunk lists
        run = load_frame_run(run_dir)
        rep = _report_of(run, n)
    md = render_markdown(rep)
    root = Path(run_dir)
    for name, text in (("report.json", rep.to_json()), ("report.md", md)):
        tmp = root / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(root / name)
    write_steps_csv(root, rep)
    write_html(root, rep, run)
    return rep, md
