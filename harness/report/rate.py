"""Rate-step figures of the report: target vs achieved rate, dispatch delay, schedule-relative latency.

A rate step (profile ``rate:``, :mod:`harness.rate`) has ``rate`` in its ``phase_start`` event. Its **schedule
window** is ``[a, e)``: ``a`` = the step's start + :data:`harness.rate.LEAD_S` (its first arrival), ``e`` = the
step's end. Over the step's records (warm-up excluded, every record of the step whether ok or not):

* **scheduled rate** = arrivals of the step's seeded schedule due in ``[a, e)`` (re-drawn from the profile's
  seed, so exact) ÷ (e − a); **achieved rate** = requests of the step sent (``start_wall``) in ``[a, e)`` ÷
  (e − a); ``shortfall`` = 1 − achieved ÷ scheduled;
* **dispatch delay** = ``start_wall − scheduled_wall`` (scheduled → sent) p50 / p99 / max; ``late_share`` = the
  share of requests with a dispatch delay above :data:`LATE_S` (they waited for a free user: the cap, the pool,
  or a starved client); ``late_free_user`` = how many of those late requests had a user free at their scheduled
  time (:func:`late_with_free_user`): the load generator itself was late, not the cap or the pool;
* **schedule-relative** TTFT / E2E = dispatch delay + TTFT / E2E (scheduled → first token / last byte), p50 /
  p99 / mean over the step's successful requests, beside the service TTFT / E2E (sent → ...) of the same requests.

A warning is added when the achieved rate is more than :data:`SHORTFALL_WARN` below the scheduled one, and when
more than :data:`LATE_SHARE_WARN` of the requests were late waiting for a free user (the cap or the pool), or late
although a user was free (the client fell behind).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from harness.arrivals import LEAD_S, arrivals_before
from harness.report.exprs import END, OK, START, STEP, pctl
from harness.report.model import RateFigures, StepRow
from harness.report.rundata import PhaseEvent, PhaseStart

__all__ = [
    "LATE_S",
    "LATE_SHARE_WARN",
    "RATE_DEFINITIONS",
    "SHORTFALL_WARN",
    "add_rate",
    "open_loop_steps",
    "rate_notes",
    "rate_table_rows",
]

#: A request is late when its dispatch delay exceeds this (seconds).
LATE_S = 0.05
#: Warn when the achieved rate is this much (a share) below the scheduled rate.
SHORTFALL_WARN = 0.05
#: Warn when more than this share of a step's requests were late.
LATE_SHARE_WARN = 0.01

#: The report's formulas of the rate figures (merged into ``definitions``).
RATE_DEFINITIONS: dict[str, str] = {
    "rate_mode": f"Rate steps (profile rate:): the step's schedule window is [a, e), a = step start + {LEAD_S:g} s "
    "(the first arrival; the users are spawned before it), e = the step's end. Target rate = the profile's rate; "
    "scheduled rate = arrivals of the step's seeded schedule due in [a, e) ÷ (e − a); achieved rate = the step's "
    "requests sent (start_wall) in [a, e) ÷ (e − a); shortfall = 1 − achieved ÷ scheduled. Dispatch delay = "
    "start_wall − scheduled_wall (scheduled → sent); late = dispatch delay > "
    f"{LATE_S:g} s; late with a free user = a late request for which, at its scheduled time, fewer requests of its "
    "process (the user id up to its last ':') were in flight than the process's share of the step's users "
    "(users ÷ processes of the step, at least 1): the load generator itself was late; the other late requests "
    "waited for a free user (the cap or the pool). Schedule-relative TTFT / E2E = dispatch delay + TTFT / E2E, "
    "over the step's successful requests (service TTFT / E2E beside them: from sent). A warning when the "
    f"shortfall exceeds {100 * SHORTFALL_WARN:g} %, and when more than {100 * LATE_SHARE_WARN:g} % of the "
    "requests were late waiting for a free user, or late with a free user.",
}


def _rate_events(events: Sequence[PhaseEvent]) -> dict[int, PhaseStart]:
    """The ``phase_start`` events of the rate steps (a ``rate``), by step (an event without ``step`` is none)."""
    return {e.step: e for e in events
            if isinstance(e, PhaseStart) and e.rate is not None and "step" in e.model_fields_set}


def _scheduled_count(ev: PhaseStart, seed: int, span: float) -> int | None:
    """Arrivals of the step's schedule (all processes) with offset < ``span`` seconds; None when it cannot be
    re-drawn (unknown process, or no rate)."""
    if ev.rate is None:
        return None
    try:
        return arrivals_before(ev.arrival or "poisson", float(ev.rate), float(ev.burstiness or 1),
                               f"{seed}:{ev.step}", span)
    except (TypeError, ValueError):
        return None


def _delay() -> pl.Expr:
    """Dispatch delay of a record (s): ``start_wall - scheduled_wall``, at least 0."""
    return pl.max_horizontal(pl.col(START) - pl.col("scheduled_wall"), pl.lit(0.0))


def _process() -> pl.Expr:
    """A record's load-generator process: its ``user`` id up to the last ``:`` (``local:8`` -> ``local``,
    ``<worker id>:3`` -> the worker), ``""`` for an id without one."""
    user = pl.col("user").fill_null("")
    return pl.when(user.str.contains(":")).then(user.str.replace(r":[^:]*$", "")).otherwise(pl.lit(""))


def late_with_free_user(late: pl.DataFrame, every: pl.DataFrame, procs: int, users: int | None) -> int:
    """How many of the ``late`` records had a user of their process free at their scheduled time.

    A record's process is :func:`_process`; requests in flight at time t = records of ``every`` of that process with
    ``start <= t < end``. A user was free when fewer than ``max(1, users // procs)`` (the process's share of the
    step's users) were in flight at the record's ``scheduled_wall``: the arrival was not waiting for the cap or the
    pool, the load generator handed it out late (busy or starved). 0 when ``users`` is unknown.

    Args:
        late: the step's late records (prepared frame with ``scheduled_wall`` and ``user``).
        every: every non-warm-up record of the run (prepared frame): what can be in flight.
        procs: the number of load-generator processes of the step (at least 1).
        users: the step's users (the cap, or the pool), from its ``phase_start`` event.
    """
    if late.height == 0 or not users:
        return 0
    share = max(1, int(users) // max(1, procs))
    everyp = every.with_columns(_process().alias("_proc"))
    free = 0
    for proc, grp in late.with_columns(_process().alias("_proc")).group_by("_proc"):
        mine = everyp.filter(pl.col("_proc") == proc[0])
        t = grp.get_column("scheduled_wall").cast(pl.Float64)
        starts = mine.get_column(START).sort()
        ends = mine.get_column(END).sort()
        busy = starts.search_sorted(t, side="right").cast(pl.Int64) - ends.search_sorted(t, side="right").cast(pl.Int64)
        free += int((busy < share).sum())
    return free


def rate_figures(ev: PhaseStart, seed: int, start: float, end: float, recs: pl.DataFrame,
                 every: pl.DataFrame | None = None) -> RateFigures:
    """The rate figures of one step (module docstring), over the polars record frame ``recs``: the step's
    non-warm-up records, prepared (:func:`harness.report.columns.prepare`: ``scheduled_wall`` among its columns).
    ``ev`` is its ``phase_start`` event, ``seed`` the profile's ``rate.seed``, ``[start, end)`` the step (epoch s);
    ``every`` the run's non-warm-up records (what was in flight, for ``late_free_user``; default ``recs``).
    Seconds, requests/s, shares 0..1; a NaN or infinite figure is None (strict JSON)."""
    a = start + LEAD_S
    span = max(0.0, end - a)
    target = float(ev.rate or 0.0)
    timed = recs.filter(pl.col("scheduled_wall").is_not_null()).with_columns(_delay().alias("_delay"))
    ok = timed.filter(pl.col(OK))
    sched_ttft = (pl.col("_delay") + pl.col("ttft")).alias("_sttft")
    sched_e2e = (pl.col("_delay") + pl.col("e2e")).alias("_se2e")
    f = timed.select(
        ((pl.col(START) >= a) & (pl.col(START) < end)).sum().alias("sent"),
        (pl.col("_delay") > LATE_S).sum().alias("late"),
        pctl("_delay", 50).alias("d50"), pctl("_delay", 99).alias("d99"), pl.col("_delay").max().alias("dmax"),
    ).row(0, named=True)
    g = ok.with_columns(sched_ttft, sched_e2e).select(
        pctl("ttft", 50).alias("ttft_p50_s"), pctl("ttft", 99).alias("ttft_p99_s"),
        pctl("_sttft", 50).alias("sched_ttft_p50_s"), pctl("_sttft", 99).alias("sched_ttft_p99_s"),
        pl.col("_sttft").mean().alias("sched_ttft_mean_s"),
        pctl("e2e", 50).alias("e2e_p50_s"), pctl("e2e", 99).alias("e2e_p99_s"),
        pl.col("e2e").mean().alias("e2e_mean_s"),
        pctl("_se2e", 50).alias("sched_e2e_p50_s"), pctl("_se2e", 99).alias("sched_e2e_p99_s"),
        pl.col("_se2e").mean().alias("sched_e2e_mean_s"),
    ).row(0, named=True)
    n = timed.height
    sent, late = int(f["sent"] or 0), int(f["late"] or 0)
    procs = int(timed.select(_process().n_unique()).item()) if n else 1
    free = late_with_free_user(timed.filter(pl.col("_delay") > LATE_S), recs if every is None else every, procs,
                               ev.concurrency)
    n_sched = _scheduled_count(ev, seed, span)
    figures = {
        "target_rate": target,
        "arrival": ev.arrival,
        "burstiness": ev.burstiness,
        "max_concurrency": ev.max_concurrency,
        "users": ev.concurrency,
        "schedule_window_s": span,
        "scheduled": n_sched,
        "sent": sent,
        "scheduled_rate": n_sched / span if n_sched is not None and span > 0 else None,
        "achieved_rate": sent / span if span > 0 else None,
        "shortfall": (1 - sent / n_sched) if n_sched else None,
        "requests": n,
        "late": late,
        "late_share": late / n if n else None,
        "late_free_user": free,
        "dispatch_delay_p50_s": f["d50"],
        "dispatch_delay_p99_s": f["d99"],
        "dispatch_delay_max_s": f["dmax"],
        **g,
    }
    return RateFigures.model_validate(
        {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in figures.items()})


def open_loop_steps(phases: Sequence[Any], events: Sequence[PhaseEvent], main: pl.DataFrame,
                    profile: dict[str, Any]) -> dict[int, float | None]:
    """The rate (open-loop) steps of a run: step -> its shortfall (1 − achieved ÷ scheduled, a share; None when
    the schedule is unknown), from :func:`rate_figures` over each step's records. ``phases``: the run's
    :class:`harness.report.load.Phase` list (``phase``, ``step``, ``start``, ``end``); the other arguments as
    :func:`add_rate`. The report chooses each step's interval method from it
    (:func:`harness.report.figures.rate_estimate`)."""
    evs = _rate_events(events)
    spec = profile.get("rate") if isinstance(profile.get("rate"), dict) else {}
    seed = int((spec or {}).get("seed") or 0)
    out: dict[int, float | None] = {}
    for p in phases:
        ev = evs.get(int(p.step)) if p.phase == "step" else None
        if ev is None:
            continue
        recs = main.filter(pl.col(STEP) == int(p.step))
        sf = rate_figures(ev, seed, float(p.start), float(p.end), recs, main).shortfall
        out[int(p.step)] = float(sf) if sf is not None else None
    return out


def add_rate(rows: list[dict[str, Any]], events: Sequence[PhaseEvent], main: pl.DataFrame,
             profile: dict[str, Any]) -> None:
    """Set ``row["rate"]`` on every step row: :func:`rate_figures` for a rate step (whose ``label`` becomes
    ``"<rate> req/s"``, then ``" (<setting>)"`` when the row has a sweep-axes setting), None otherwise.

    Args:
        rows: the report's step rows (``step``, ``start_wall``, ``end_wall``).
        events: ``phases.jsonl`` events (:func:`harness.report.rundata.read_events`).
        main: the run's non-warm-up records as a prepared polars frame (:attr:`harness.report.columns.FrameRun.main`).
        profile: the profile dict of run.json (its ``rate.seed``; 0 when absent).
    """
    evs = _rate_events(events)
    spec = profile.get("rate") if isinstance(profile.get("rate"), dict) else {}
    seed = int((spec or {}).get("seed") or 0)
    for row in rows:
        ev = evs.get(int(row["step"])) if row.get("phase") == "step" else None
        if ev is None:
            row["rate"] = None
            continue
        recs = main.filter(pl.col(STEP) == int(row["step"]))
        row["rate"] = rate_figures(ev, seed, float(row["start_wall"]), float(row["end_wall"]), recs, main)
        setting = row.get("setting")
        row["label"] = f"{float(ev.rate or 0.0):g} req/s" + (f" ({setting})" if setting else "")


def rate_notes(rows: Sequence[StepRow]) -> list[str]:
    """The warnings of the rate steps: the rate not achieved (by how much), requests late for a free user."""
    out: list[str] = []
    for r in rows:
        f = r.rate
        if f is None:
            continue
        lab = f"step {r.step} ({f.target_rate:g} req/s)"
        sf = f.shortfall
        if sf is not None and sf > SHORTFALL_WARN:
            out.append(f"{lab}: TARGET RATE NOT ACHIEVED: {f.sent} of {f.scheduled} scheduled requests were "
                       f"sent in the step ({f.achieved_rate:.3g} req/s of {f.scheduled_rate:.3g} "
                       f"scheduled, {100 * sf:.0f} % short): the client fell behind its schedule.")
        n = f.requests or 0
        free = int(f.late_free_user or 0)
        waited = int(f.late or 0) - free
        p99 = f.dispatch_delay_p99_s or 0.0
        se2e, e2e = f.sched_e2e_p50_s, f.e2e_p50_s
        lat = (f"; schedule-relative E2E p50 {se2e:.3g} s vs service E2E p50 {e2e:.3g} s"
               if se2e is not None and e2e is not None else "")
        if n and waited / n > LATE_SHARE_WARN:
            cap = f.max_concurrency
            why = (f"the cap of {cap} in flight" if cap is not None else
                   f"the pool of {f.users} users (rate.pool)")
            out.append(f"{lab}: {100 * waited / n:.0f} % of requests waited for a free user ({why}): dispatch delay "
                       f"p99 {p99:.3g} s{lat}. Service latency alone hides this wait (coordinated omission): read "
                       "the schedule-relative figures.")
        if n and free / n > LATE_SHARE_WARN:
            out.append(f"{lab}: {100 * free / n:.0f} % of requests were sent late (over {LATE_S:g} s) although a user "
                       f"was free: the load generator fell behind its schedule (busy or starved; see client lag): "
                       f"dispatch delay p99 {p99:.3g} s{lat}. The schedule-relative figures include that delay.")
    return out


def _f(v: float | None) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.3g}"


#: Header of the report's "Open-loop rates" table.
RATE_TABLE_HEADER = ["step", "target req/s", "scheduled req/s", "achieved req/s", "short %", "late %",
                     "dispatch p50 / p99 s", "TTFT p50 / p99 s", "sched. TTFT p50 / p99 s", "E2E p50 / p99 s",
                     "sched. E2E p50 / p99 s"]


def rate_table_rows(rows: Sequence[StepRow]) -> list[list[str]]:
    """The Markdown cells of the "Open-loop rates" table, one row per rate step (none without rate steps): rates in
    req/s, shortfall and late share in %, delays and latencies in s (p50 / p99)."""
    out = []
    for r in rows:
        f = r.rate
        if f is None:
            continue
        sf, ls = f.shortfall, f.late_share
        out.append([
            str(r.label), _f(f.target_rate), _f(f.scheduled_rate), _f(f.achieved_rate),
            "–" if sf is None else f"{100 * sf:.1f}", "–" if ls is None else f"{100 * ls:.1f}",
            f"{_f(f.dispatch_delay_p50_s)} / {_f(f.dispatch_delay_p99_s)}",
            f"{_f(f.ttft_p50_s)} / {_f(f.ttft_p99_s)}",
            f"{_f(f.sched_ttft_p50_s)} / {_f(f.sched_ttft_p99_s)}",
            f"{_f(f.e2e_p50_s)} / {_f(f.e2e_p99_s)}",
            f"{_f(f.sched_e2e_p50_s)} / {_f(f.sched_e2e_p99_s)}",
        ])
    return out
