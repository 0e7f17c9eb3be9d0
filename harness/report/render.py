"""GitHub Markdown rendering of a typed report (:class:`harness.report.model.Report`, from
:func:`harness.report.build.build_report` or :func:`harness.report.model.load_report`).

Display units: TTFT, TTFAT and E2E in seconds; inter-chunk gaps and TPOT in milliseconds; throughput in
tokens or requests per second; hours to N in hours; costs in US$. ``report.json`` always keeps seconds.
Every figure's header, display unit and format come from its entry in the catalogue
(:mod:`harness.report.catalogue`, whose formatters are :mod:`harness.report.fmt`'s helpers), as on every other
surface; prose is wrapped at 120 columns, footnotes and notes are bullets, wall times carry their UTC offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S
from harness.report import fmt
from harness.report.catalogue import (
    FIGURES,
    Flag,
    display,
    group_header,
    group_text,
    hours_text,
    interval_text,
    label_text,
    row_flags,
    usd_text,
    value,
    with_flags,
)
from harness.report.explain import message_text
from harness.report.fmt import DASH, wrap_markdown
from harness.report.model import (
    CostFigures,
    DriftFit,
    HoursEntry,
    RealTime,
    Report,
    SloThresholds,
    StepRow,
    Warmup,
    as_report,
)
from harness.report.rate import RATE_TABLE_HEADER, rate_table_rows
from harness.report.realtime import drift_in_real_time
from harness.report.search import search_lines
from harness.report.selfcert import SELFCERT_KEYS, selfcert_text
from harness.report.soak import DRIFT_MIN_ABS_CHANGE, DRIFT_MIN_CHANGE

__all__ = ["render_markdown"]

_DASH = DASH
# One formatting helper per kind of value (harness/report/fmt.py): 3 significant digits for seconds, milliseconds,
# rates, tok/s and hours; one decimal for percentages; integers for counts.
_s = fmt.seconds
_ms = fmt.millis
_rate = fmt.rate
_hours = fmt.hours
_wall = fmt.wall_time


def _num(v: float | None, digits: int = 1) -> str:
    """Fixed decimals with thousands separators: window lengths in s (1 decimal), mean token counts (0)."""
    return _DASH if v is None else f"{v:,.{digits}f}"


def _esc(text: object) -> str:
    return str(text).replace("|", "\\|")


def _label(row: StepRow) -> str:
    """The step label with its flags (:func:`harness.report.catalogue.label_text`)."""
    return label_text(row)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(_esc(c) for c in r) + " |" for r in rows]
    return out


def _phase_tps_lines(rep: Report) -> list[str]:
    """Output tok/s of each step by phase, one line per step: reasoning + answer = output tok/s
    (``output_tps_phase``); a list, not a table, so the report's tables keep their order."""
    out = ["## Output tok/s by phase", "",
           "Tokens that arrived in the steady window before (reasoning) and from (answer) each request's first "
           "answer token, ÷ window length; reasoning + answer = output tok/s (see Formulas).", ""]
    out += [f"- {r.label}: {display(r, 'output_tps')} tok/s = reasoning {display(r, 'output_tps_reasoning')} + "
            f"answer {display(r, 'output_tps_answer')}" for r in rep.steps]
    return [*out, ""]


#: The per-step table's columns: catalogue keys, several stats of one figure sharing a column.
STEP_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("concurrency",), ("requests",), ("completed",), ("errors",), ("request_rate",), ("output_tps",),
    ("per_stream_tps",), ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s"), ("ttfat_p50_s", "ttfat_p90_s", "ttfat_p99_s"),
    ("gap_p50_s", "gap_p99_s"), ("tpot_mean_s", "tpot_p50_s"), ("e2e_p50_s",), ("mean_output_tokens",),
    ("truncated_pct",), ("truncated_in_reasoning_pct",),
)


def _window_cell(r: StepRow) -> str:
    """The steady window's length and start (s from the step start), or ``NOT steady †``."""
    if not r.steady:
        return with_flags(Flag.NOT_STEADY.word, [Flag.NOT_STEADY])
    return f"{display(r, 'window_s')} (from +{FIGURES['window_s'].text(r.window_start_s)})"


def _selfcert_section(rep: Report) -> list[str]:
    """The ``Self-certification`` section: the client's overhead and error bound per step (a table of
    :data:`SELFCERT_KEYS`), then one line per step (:func:`harness.report.selfcert.selfcert_text`)."""
    if not rep.steps:
        return []
    head = ["step", *(FIGURES[k].header for k in SELFCERT_KEYS)]
    body = [[_label(r), *(display(r, k) for k in SELFCERT_KEYS)] for r in rep.steps]
    return ["## Self-certification", "",
            "The load generator's own overhead per step and the TTFT / inter-chunk error bound calibrated against "
            "the simulator's truth at that load (see client_selfcert in Formulas).", "",
            *_table(head, body), "", *(f"- {r.label}: {_esc(selfcert_text(r))}" for r in rep.steps), ""]


def _until_lines(rep: Report) -> list[str]:
    """The ``steps.until`` section: per step, when the margin was reached (or not) and the live half-width at the
    step's end (none when no step ran with ``steps.until``)."""
    rows = [r for r in rep.steps if r.until_reached is not None]
    if not rows:
        return []
    margin = FIGURES["margin_halfwidth"].text(rows[0].until_margin)
    head = ["step", "margin reached", FIGURES["margin_reached_s"].header, FIGURES["margin_halfwidth"].header]
    body = [[_label(r), "yes" if r.until_reached else "NOT reached (ended at its max)",
             display(r, "margin_reached_s"), display(r, "margin_halfwidth")] for r in rows]
    return [f"## Steps until the margin (steps.until: ±{margin} %)", "", *_table(head, body), ""]


def _steps_table(rep: Report) -> list[str]:
    header = ["step", *(group_header(c) for c in STEP_COLUMNS), FIGURES["window_s"].header]
    rows = [[_label(r), *(group_text(r, c) for c in STEP_COLUMNS), _window_cell(r)] for r in rep.steps]
    return _table(header, rows)


def _usd(v: float | None) -> str:
    """US dollars, 3 significant digits (:func:`harness.report.fmt.usd`); None (unbounded) → ``∞``."""
    return "∞" if v is None else fmt.usd(v)


def _hours_cell(h: HoursEntry) -> str:
    """The recommended hours with its 95 % prediction interval (:func:`harness.report.catalogue.hours_text`), and
    its US$ when priced."""
    cell = hours_text(h)
    if h.hours is not None and h.usd is not None:
        cell += f" · {usd_text(h.usd, h.usd_low, h.usd_high)}"
    return cell


def _token_cell(h: HoursEntry | None) -> str:
    if h is None or h.token_hours is None:
        return _DASH
    mark = " ⚠ outside" if h.token_check == "outside" else ""
    return f"{_hours(h.token_hours)} h{mark}"


def _hours_table(rep: Report, real: bool = False) -> list[str]:
    ns = rep.hours_to_n
    priced = rep.cost_usd_per_hour is not None
    header = ["step", *(FIGURES[k].header for k in ("concurrency", "usable_share", "truncated_pct", "error_rate",
                                                      "mean_output_tokens")), "interval"]
    if priced:
        header += [FIGURES["usd_per_1m_output_tokens"].header, FIGURES["usd_per_1k_usable"].header]
    header += [f"N={n:,}" for n in ns]
    header += [f"tokens check N={ns[0]:,}" if ns else "tokens check"]
    rows = []
    for r in rep.steps:
        figures: StepRow | RealTime = r.real_time if real and r.real_time else r
        hours = figures.hours
        cells = [_label(r), *(display(r, k) for k in ("concurrency", "usable_share", "truncated_pct", "error_rate",
                                                       "mean_output_tokens")),
                 interval_text(r, rep.time_scale if real else 1.0)]
        if priced:
            c = figures.cost or CostFigures()
            cells += [display(c, "usd_per_1m_output_tokens"),
                      usd_text(value(c, "usd_per_1k_usable"), c.usd_per_1k_usable_low, c.usd_per_1k_usable_high)]
        rows.append(cells + [_hours_cell(h) for h in hours] + [_token_cell(hours[0] if hours else None)])
    return _table(header, rows)


def _finish_table(rep: Report) -> list[str]:
    keys = ("ttft_p50_s", "ttfat_p50_s", "e2e_p50_s", "mean_output_tokens", "mean_reasoning_tokens",
            "mean_answer_tokens")
    header = ["step", FIGURES["concurrency"].header, "finish_reason", "requests", *(FIGURES[k].header for k in keys)]
    rows = []
    for r in rep.steps:
        for reason, f in r.by_finish_reason.items():
            if not f.requests:
                continue
            rows.append([_label(r), display(r, "concurrency"), reason, fmt.count(f.requests),
                         *(display(f, k) for k in keys)])
    return _table(header, rows) if rows else []


def _prompt_table(rep: Report) -> list[str]:
    first = ("usable_pct", "truncated_pct", "truncated_in_reasoning_pct")
    then = ("mean_reasoning_tokens", "mean_answer_tokens", "ttfat_p50_s")
    header = ["prompt", "requests", *(FIGURES[k].header for k in first), "max_tokens",
              *(FIGURES[k].header for k in then), "not usable (why)"]
    rows = []
    for p in rep.prompts:
        cap = str(p.max_tokens) if p.max_tokens is not None else "/".join(map(str, p.max_tokens_seen)) or _DASH
        why = ", ".join(f"{k} ×{v}" for k, v in p.usable_reasons.items()) or _DASH
        rows.append([p.prompt, display(p, "requests"), *(display(p, k) for k in first), cap,
                     *(display(p, k) for k in then), why])
    return _table(header, rows)


def _what_if_lines(rep: Report, real: bool = False) -> list[str]:
    """One line per step with the what-ifs of the first N: hours per 1,000 output tokens per usable sample, and
    hours when truncated successes count as samples."""
    if not rep.hours_to_n:
        return []
    parts = []
    for r in rep.steps:
        hours = r.real_time.hours if real and r.real_time else r.hours
        if not hours or hours[0].hours is None:
            continue
        w = hours[0].what_if
        per_k, ok = w.hours_per_1k_output_tokens, w.usable_is_success.hours
        m = r.mean_output_tokens_usable
        parts.append(f"{r.label}: {_hours(per_k)} h per 1,000 output tokens per sample (mean now "
                     f"{fmt.count(m)} output tokens), "
                     f"{_hours(ok)} h with usable = success")
    if not parts:
        return []
    return [f"What-ifs for N={rep.hours_to_n[0]:,} (hours scale with a sample's mean output length X as "
            f"hours × X ÷ the mean now): " + "; ".join(parts) + "."]


def _real_table(rep: Report) -> list[str]:
    keys = ("output_tps", "request_rate", "per_stream_tps", "ttft_p50_s", "ttfat_p50_s", "tpot_mean_s", "e2e_p50_s")
    header = ["step", FIGURES["concurrency"].header, "window (s)", *(FIGURES[k].header for k in keys)]
    rows = []
    for r in rep.steps:
        rt = r.real_time or RealTime()
        rows.append([_label(r), display(r, "concurrency"), display(rt, "window_s"), *(display(rt, k) for k in keys)])
    return _table(header, rows)


def _real_drift_lines(rep: Report, ts: float) -> list[str]:
    """The soak drift of each step with slices, per hour of the server the run stands for (the Soak section's is
    per wall hour of the compressed run: × ``ts``); [] when no step has a drift fit."""
    rows = []
    for r in rep.steps:
        d = drift_in_real_time(r.drift, ts)
        fits = (d.output_tps, d.ttft_p50_s, d.error_rate)
        if any(f is not None for f in fits):
            rows.append([_label(r), str(r.concurrency), *(_drift_cell(f) for f in fits)])
    if not rows:
        return []
    return ["", f"Soak drift per real hour (the Soak section's per wall hour × {ts:g}):", "",
            *_table(["step", "C", "tok/s", "TTFT p50", "error rate"], rows)]


def _share_pct(v: float | None) -> str:
    return _DASH if v is None else f"{100.0 * v:.1f}"


def _slo_text(slo: SloThresholds) -> str:
    """The thresholds given (TTFT, TTFAT, E2E in s; TPOT in ms), in that order."""
    given = (("TTFT", slo.ttft_s, False), ("TTFAT", slo.ttfat_s, False), ("TPOT", slo.tpot_s, True),
             ("E2E", slo.e2e_s, False))
    return ", ".join(f"{name} ≤ {_ms(v) + ' ms' if ms else _s(v) + ' s'}" for name, v, ms in given if v is not None)


def _goodput_section(rep: Report) -> list[str]:
    """The "Goodput (SLOs)" section: per step SLO met share and goodput, and the SLO capacity. [] without SLOs."""
    slo = rep.slo
    if slo is None or not rep.steps:
        return []
    cap = rep.slo_capacity
    lines = ["## Goodput (SLOs)", "",
             f"SLOs: {_slo_text(slo)}. % meeting all: over each step's latency sample; goodput: usable requests "
             "within every SLO ending in the window ÷ window length.", ""]
    keys = ("slo_sample_n", "slo_met_share", "goodput_rps", "request_rate")
    header = ["step", FIGURES["concurrency"].header, *(FIGURES[k].header for k in keys)]
    rows = [[_label(r), display(r, "concurrency"), fmt.count(r.slo_sample_n or 0),
             *(display(r, k) for k in keys[1:])] for r in rep.steps]
    lines += _table(header, rows)
    lines.append("")
    share = cap.target_share if cap is not None and "target_share" in cap.model_fields_set else slo.target_share
    target = f"{100.0 * (0.95 if share is None else share):g} %"
    if cap is None or cap.concurrency is None:
        lines.append(f"**SLO capacity**: no concurrency has every step with ≥ {target} of requests meeting all SLOs.")
    else:
        lines.append(f"**SLO capacity**: C = {cap.concurrency} is the highest concurrency whose steps have ≥ "
                     f"{target} of requests meeting all SLOs ({_share_pct(cap.slo_met_share)} %, goodput "
                     f"{_rate(cap.goodput_rps)} req/s).")
    if cap is not None and cap.failing:
        lines.append(f"Below {target}: {', '.join(cap.failing)}.")
    lines.append("")
    return lines


def _drift_cell(d: DriftFit | None) -> str:
    if d is None:
        return _DASH
    return f"**DRIFT** {d.text}" if d.flagged else d.text


def _soak_section(rep: Report) -> list[str]:
    """The "Soak" section: per step with ≥ 3 slices, its slices and the drift of tok/s, TTFT p50, error rate."""
    steps = [r for r in rep.steps if len(r.slices) >= 3]
    if not steps:
        return []
    lines = ["## Soak", "",
             f"Each steady window in slices of {rep.slice_s or 0:g} s. Drift: least-squares slope per hour "
             "as % of the step's mean, with its 95 % t interval; **DRIFT** when the interval excludes 0 and the "
             f"change over the step exceeds {100 * DRIFT_MIN_CHANGE:g} % of the mean (for TTFT p50 also "
             f"{1000 * DRIFT_MIN_ABS_CHANGE['ttft_p50_s']:g} ms; see Formulas).", ""]
    header = ["step", "C", "tok/s", "TTFT p50", "error rate"]
    lines += _table(header, [[_label(r), str(r.concurrency)]
                             + [_drift_cell(d) for d in (r.drift.output_tps, r.drift.ttft_p50_s, r.drift.error_rate)]
                             for r in steps])
    lines.append("")
    for r in steps:
        lines += [f"### Slices of {r.label}", ""]
        cols = (("output_tps",), ("request_rate",), ("ttft_p50_s", "ttft_p99_s"), ("ttfat_p50_s", "ttfat_p99_s"),
                ("ended",), ("error_rate",), ("truncation_rate",))
        header = ["slice from (s)", "tok/s", *(group_header(c) for c in cols[1:])]  # a slice's output tok/s
        rows = [[f"+{s.start_s or 0:.0f}", *(group_text(s, c) for c in cols)] for s in r.slices]
        lines += _table(header, rows)
        lines.append("")
    return lines


def _settings_section(rep: Report) -> list[str]:
    """The sweep-axes comparison (``rep.settings``): one line per setting and step, settings side by side."""
    rows = rep.settings
    if not rows:
        return []
    priced = rep.cost_usd_per_hour is not None
    real = any(r.real_hours is not None for r in rows)
    n = rows[0].n
    at = f" N={n:,}" if n else ""
    keys = ("completed", "ttft_p50_s", "tpot_p50_s", "e2e_p50_s", "mean_reasoning_tokens", "mean_answer_tokens",
            "usable_share", "truncated_pct", "output_tps")
    header = ["setting", FIGURES["concurrency"].header, *(FIGURES[k].header for k in keys), f"hours{at}"]
    header += [f"${at}"] if priced else []
    header += [f"real-time hours{at}"] + ([f"real-time ${at}"] if priced else []) if real else []
    table = []
    for r in rows:
        flags = row_flags(r)
        cells = [r.setting, with_flags(display(r, "concurrency"), flags), *(display(r, k) for k in keys),
                 hours_text(r)]
        cells += [_usd(r.usd)] if priced else []
        real_h = fmt.DASH if r.real_hours is None else f"{_hours(r.real_hours)} h"  # as the hours cells beside it
        cells += [real_h] + ([_usd(r.real_usd)] if priced else []) if real else []
        table.append(cells)
    return ["## Settings (sweep axes)", "",
            "Each setting of the profile's `axes:` ran every concurrency step; the figures are the step rows' (over "
            "the requests that ended in the steady window), the mean reasoning and answer tokens over its "
            "successful requests; hours to N usable samples with the 95 % prediction interval (as measured; the "
            "real-time columns convert a time-compressed simulator run). † = not steady; ‡ = low confidence (see the "
            "per-step table's notes); § = hidden reasoning; STARVED = the load generator's limit (see the notes).",
            "", *_table(header, table), ""]


def _turns_section(rep: Report) -> list[str]:
    """Per-turn figures of a multi-turn run (``rep.turns``)."""
    rows = rep.turns
    if not rows:
        return []
    keys = ("completed", "ttft_p50_s", "ttft_p90_s", "ttft_mean_s", "e2e_p50_s", "mean_prompt_tokens",
            "mean_cached_tokens", "cached_share", "mean_output_tokens")
    header = ["turn", "requests", *(FIGURES[k].header for k in keys)]
    table = [[str(r.turn), display(r, "requests"), *(display(r, k) for k in keys)] for r in rows]
    return ["## By conversation turn", "",
            "Every successful non-warm-up request of each turn index (0 = a conversation's first), all steps "
            "together: the prompt grows with the turn; cached tokens are the server's "
            "`usage.prompt_tokens_details.cached_tokens` (— when it did not send them).", "",
            *_table(header, table), ""]


def _warmup_line(w: Warmup) -> str:
    if not w.requests:
        return "Warm-up: none recorded."
    errs = ", ".join(f"{k} ×{v}" for k, v in w.errors_by_class.items()) or "none"
    noun = "request" if w.requests == 1 else "requests"
    return (f"Warm-up (excluded from every figure): {w.requests} {noun}, {w.completed} ok, "
            f"E2E p50 {_s(w.e2e_p50_s)} s (max {_s(w.e2e_max_s)} s), errors: {errs}.")


def target_url(rep: Report) -> str:
    """The target's address as the report headers show it: run.json's ``base_url``, else ``url``, else ``host``,
    else ``?``."""
    target = rep.target
    return str(target.get("base_url") or target.get("url") or target.get("host") or "?")


def render_markdown(report: Report | Mapping[str, Any]) -> str:
    """The report as GitHub Markdown: title, per-step table, hours-to-N table (with cost columns when the profile has
    a price), the split by finish reason, the per-prompt table, goodput (with SLOs), soak slices and drift (a step
    with ≥ 3 slices), formulas and notes.

    Args:
        report: the typed report; a report dict (report.json's JSON) is validated first
            (:func:`harness.report.model.as_report`, which raises ReportError when it is not a report).
    """
    rep = as_report(report)
    url = target_url(rep)
    model = rep.model or "?"
    lines = [f"# Load report: {rep.run_id}", ""]
    meta = [f"target `{url}`", f"model `{model}`"]
    if rep.profile_name:
        meta.append(f"profile `{rep.profile_name}`")
    when = [f"status **{rep.status}**"]
    if rep.duration_s is not None:
        when.append(f"started {_wall(rep.start_wall)}, {rep.duration_s:.0f} s")
    lines += [" · ".join(meta) + " ·", " · ".join(when)]  # one paragraph over two lines: the time stays whole
    lines.append("")
    if rep.interrupted:
        lines += ["> **Interrupted run**: figures are partial (see notes).", ""]
    ts = rep.time_scale
    if ts != 1.0:
        lines += [f"> **COMPRESSED TIME** (simulator time_scale = {ts:g}): the tables below are in compressed wall "
                  f"time; see *Real-time equivalents*.", ""]
    lines += [_warmup_line(rep.warmup), ""]

    lines += ["## Per step", ""]
    if rep.steps:
        lines += _steps_table(rep)
    else:
        lines.append("No steps recorded.")
    lines.append("")
    foot = [r for r in rep.steps if not r.steady]
    for r in foot:
        lines.append(f"- † {r.label}: NOT steady, {r.not_steady_reason}; burst figures over the whole step.")
    for r in (r for r in rep.steps if r.low_confidence):
        fix = r.low_confidence_fix or "lengthen steps.duration"
        lines.append(f"- ‡ {r.label}: low confidence, {r.low_confidence}; {fix}.")
    starved = [r for r in rep.steps if r.client_starved]
    for r in starved:
        lines.append(f"- Client STARVED at {r.label}: {r.client_lagged_pct or 0:.0f} % of requests read > "
                     f"{CLIENT_LAG_LIMIT_S:g} s late "
                     f"(max {r.client_read_lag_max_s or 0:.2f} s): figures are the load generator's limit (see "
                     "notes).")
    errs = [r for r in rep.steps if r.step_errors_by_class or r.errors_by_class]
    for r in errs:
        classes = ", ".join(f"{k} ×{v}" for k, v in r.step_errors_by_class.items()) or "none"
        in_sample = ", ".join(f"{k} ×{v}" for k, v in r.errors_by_class.items()) or "none"
        lines.append(f"- Errors at {r.label}: {classes} of the requests started in the step; {in_sample} in the "
                     "sample (ended in the steady window).")
        for c in (c for c in r.failures if c.messages):
            lines.append(f"  - {c.error_class} ×{c.count}, top messages:")
            lines += [f"    - {message_text(m, code=True)}" for m in c.messages]
    if foot or errs or starved or any(r.low_confidence for r in rep.steps):
        lines.append("")

    lines += _until_lines(rep)
    if rep.steps:
        lines += _phase_tps_lines(rep)
    lines += search_lines(rep.search)
    rate_rows = rate_table_rows(rep.steps)
    if rate_rows:
        lines += ["## Open-loop rates", "",
                  "Target, scheduled and achieved request rates; dispatch delay (scheduled → sent); service latency "
                  "(from sent) beside schedule-relative latency (from scheduled). See rate_mode in Formulas.", ""]
        lines += _table(RATE_TABLE_HEADER, rate_rows)
        lines += [""]
    lines += ["## Hours to N usable samples", ""]
    lines.append("Each cell: hours to N usable samples (usable = success, not truncated, passing the profile's "
                 "usable checks) from the usable completions per second in the steady window, with its 95 % "
                 "prediction interval for one run of N "
                 "samples (renewal-reward over the request cycles; open-loop steps: batch means; "
                 "see Formulas). The token-based figure (seed method) is a cross-check only. "
                 "Assumptions per row: concurrency C, and the usable share, truncation and error rates and mean "
                 "output tokens of the requests that ended in the steady window.")
    lines.append("")
    if rep.steps:
        lines += _hours_table(rep)
        lines += ["", *_what_if_lines(rep)]
        lines.append("")
    if ts != 1.0 and rep.steps:
        lines += ["## Real-time equivalents", "",
                  f"Compressed figures converted with time_scale = {ts:g}: durations ÷ {ts:g}, rates × {ts:g}.", ""]
        lines += _real_table(rep)
        lines += ["", "Hours to N in real time:", ""]
        lines += _hours_table(rep, real=True)
        lines += ["", *_what_if_lines(rep, real=True)]
        lines += _real_drift_lines(rep, ts)
        lines.append("")

    finish = _finish_table(rep)
    if finish:
        lines += ["## By finish reason", "",
                  "Successful requests of each step's sample (ended in its steady window), by how they ended: "
                  "`stop` (finished), `length` (cut at max_tokens) or `suspect_truncation` (the server said `stop` or "
                  "nothing, but output reached max_tokens: counted as truncated); see by_finish_reason in Formulas.",
                  ""]
        lines += finish
        lines.append("")
    if rep.prompts:
        lines += ["## Per prompt", "",
                  "Every non-warm-up request of each prompt class, all steps together; % trunc over successful "
                  "requests.", ""]
        lines += _prompt_table(rep)
        lines.append("")

    lines += _settings_section(rep)
    lines += _turns_section(rep)
    lines += _goodput_section(rep)
    lines += _soak_section(rep)
    lines += _selfcert_section(rep)
    lines += ["## Formulas", ""]
    lines += [f"- **{k}**: {v}" for k, v in rep.definitions.items()]
    lines.append("")
    lines += ["## Notes", ""]
    lines += [f"- {n}" for n in rep.notes] or ["- none"]
    lines.append("")
    return wrap_markdown("\n".join(lines))
