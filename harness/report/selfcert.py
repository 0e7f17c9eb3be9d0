"""A run that certifies itself: per step, the load generator's own overhead and the error bound it implies.

Per load step (and the single stream), from the records and the ``client_cpu`` events (:mod:`harness.selfcert`):

* ``client_processes``: load-generating processes with records in the step (a record's process is its ``user``
  id up to the last ``:``, the worker id);
* ``client_cpu_share_max``: the largest, over those processes, of (CPU seconds between the process's first and
  last ``client_cpu`` sample inside the step) ÷ (wall seconds between them), a share of one core (1.0 = a core
  fully busy); None without two samples at least :data:`MIN_SPAN_S` apart (a run without samples: older runs);
* ``client_chunks_per_s_proc``: the largest, over those processes, of token-bearing chunks of the requests that
  started in the step ÷ the step's length (s), chunks/s per process;
* ``client_ttft_error_bound_s`` / ``client_itl_error_bound_s``: the TTFT and inter-chunk gap error bound (p99 of
  |harness − simulator truth|, s) calibrated at this load (:func:`error_bound`, :data:`CALIBRATION`); None when
  the step is beyond the calibrated range, not measured or starved;
* ``client_selfcert``: the verdict, one of :data:`VERDICTS`.

The read lag p50 / p99 and the STARVED flag are :func:`harness.report.columns._client_lag`'s (their meaning is
unchanged); :func:`selfcert_text` writes the one self-certification line of a row, which every surface shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from harness.report.catalogue import FIGURES, display
from harness.selfcert import CPU_SAMPLE_S, CpuShare

__all__ = [
    "CALIBRATION",
    "CALIBRATION_SOURCE",
    "MIN_SPAN_S",
    "SELFCERT_KEYS",
    "SLACK_S",
    "VERDICTS",
    "CalPoint",
    "chunk_rates",
    "cpu_shares",
    "error_bound",
    "selfcert_figures",
    "selfcert_text",
]  # fmt: skip

#: The self-certification's catalogued figures, in the order every surface shows them (report.md's table, the web
#: view's row details, Locust's LLM tab).
SELFCERT_KEYS = ("client_cpu_share_max", "client_read_lag_p50_s", "client_read_lag_p99_s", "client_chunks_per_s_proc",
                 "client_ttft_error_bound_s", "client_itl_error_bound_s")
#: A CPU share needs two samples of a process this many wall seconds apart inside the step.
MIN_SPAN_S = 1.0
#: A worker's sample of the next phase arrives this long after the master's phase_start at most (a phase
#: message's delivery): samples up to this many seconds past a step's end still close it.
SLACK_S = 0.5


@dataclass(frozen=True)
class CalPoint:
    """One calibration run: the load (chunks/s per process, read lag p99 s, CPU share) and the errors measured
    against the simulator's truth there (TTFT and inter-chunk gap |harness − truth| p99, seconds), and how many
    Locust processes the calibration run had (``benchmarks/selfcert_calibrate.py --processes N``)."""

    concurrency: int
    chunks_per_s: float
    read_lag_p99_s: float
    ttft_err_p99_s: float
    itl_err_p99_s: float
    processes: int = 1


#: How :data:`CALIBRATION` was measured (shown with every bound; docs/guides/self-certification.md).
CALIBRATION_SOURCE = "calibrated against the simulator's truth, 1 process, shared 2-core machine"

#: The calibration points (benchmarks/selfcert_calibrate.py, 2026-12-04: preset demo at time_scale 0.5, one
#: prompt of 512 tokens with thinking, 12 s steps, one process and the simulator on a 2-core machine shared with
#: other jobs; two sweeps, the second under heavier machine load). Errors are |harness − truth| p99 over the
#: run's requests (TTFT, 54-265 requests a point: close to the max) and chunk gaps (17k-85k gaps); they include the
#: simulator's own delays on the shared cores, so they bound the client's error from above.
CALIBRATION: tuple[CalPoint, ...] = (
    # concurrency, chunks/s per process, read lag p99 s, TTFT error p99 s, ITL error p99 s   (client CPU share)
    CalPoint(8, 1382, 0.0034, 0.00026, 0.00003),  # first sweep (CPU share not yet sampled)
    CalPoint(32, 3534, 0.026, 0.00009, 0.00002),
    CalPoint(64, 5040, 0.0385, 0.00144, 0.00785),
    CalPoint(128, 6827, 0.0729, 0.03143, 0.04596),
    CalPoint(8, 1349, 0.1019, 0.05493, 0.01623),  # second sweep, heavier machine load: CPU 5 %
    CalPoint(16, 2302, 0.0834, 0.00504, 0.0115),  # 7 %
    CalPoint(32, 3549, 0.2545, 0.05137, 0.01904),  # 10 %
    CalPoint(48, 4300, 0.1587, 0.01346, 0.0218),  # 11 %
    CalPoint(64, 5039, 0.0471, 0.03891, 0.0291),  # 13 %
    CalPoint(96, 6092, 0.1135, 0.12805, 0.09861),  # 10 %
    CalPoint(128, 6870, 0.3897, 0.48244, 0.07746),  # 14 %
)

#: ``client_selfcert`` values: errors within a calibrated bound; beyond the calibrated load; the client was
#: STARVED; no stamped records (no read lag, e.g. TLS) so nothing to certify.
VERDICTS = ("certified", "beyond_calibration", "starved", "not_measured")


def _process(user: pl.Expr) -> pl.Expr:
    return user.str.replace(r":[^:]*$", "")


def cpu_shares(events: Sequence[Any], start: float, end: float) -> dict[str, float]:
    """Each process's CPU share (CPU s ÷ wall s, one core = 1.0) over ``[start, end]`` (epoch s) from its
    ``client_cpu`` events (typed :class:`harness.report.rundata.ClientCpu` or dicts): between its first sample at
    or after ``start`` and its last at or before ``end + SLACK_S``, summed over consecutive samples
    (:class:`harness.selfcert.CpuShare`: a counter that goes down starts a new baseline, the interval across it
    counts in neither sum); a process with under :data:`MIN_SPAN_S` wall seconds summed is left out."""
    by: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        get = e.get if isinstance(e, Mapping) else (lambda k, _e=e: getattr(_e, k, None))
        if get("event") != "client_cpu":
            continue
        wall, cpu, proc = get("wall"), get("cpu_s"), get("process")
        if wall is None or cpu is None or proc is None or not start <= wall <= end + SLACK_S:
            continue
        by.setdefault(str(proc), []).append((float(wall), float(cpu)))
    out = {}
    for proc, samples in by.items():
        acc = CpuShare()
        for wall, cpu in sorted(samples):
            acc.add(wall, cpu)
        share = acc.share(MIN_SPAN_S)
        if share is not None:
            out[proc] = share
    return out


def chunk_rates(step_recs: pl.DataFrame, length: float) -> dict[str, float]:
    """Token-bearing chunks per second of each process: the ``chunks`` of the step's records (requests that
    started in it, any outcome) by process (``user`` up to its last ``:``) ÷ ``length`` (the step's seconds);
    empty when ``length`` <= 0 or there are no records."""
    if length <= 0 or step_recs.height == 0:
        return {}
    g = step_recs.group_by(_process(pl.col("user")).alias("p")).agg(pl.col("chunks").fill_null(0).sum().alias("n"))
    return {str(p): float(n) / length for p, n in g.iter_rows()}


def error_bound(chunks_per_s: float, read_lag_p99_s: float,
                points: Sequence[CalPoint] = CALIBRATION) -> CalPoint | None:
    """The calibrated error bound at a load (chunks/s per process, read lag p99 in s), or None when no calibrated
    point dominates the load (both its chunks/s and its read lag p99 at least this load's): beyond the calibrated
    range.

    Each dominating point ``p`` bounds the load by its *envelope*: the largest error measured at any calibrated
    load ``p`` dominates (``p`` itself included). The bound is the dominating point of the smallest envelope (TTFT
    error p99), its ITL error the envelope's ITL maximum over the same loads. So the bound is never below an error
    measured at this load or a lighter one, even where the measured error is not monotone in load (on a shared
    machine it follows other processes' load, not only this client's: a C=8 point of 54.9 ms beside a C=48 point of
    13.5 ms; docs/guides/self-certification.md).
    """
    cover = [p for p in points if p.chunks_per_s >= chunks_per_s and p.read_lag_p99_s >= read_lag_p99_s]
    if not cover:
        return None

    def envelope(p: CalPoint) -> tuple[float, float]:
        under = [q for q in points if q.chunks_per_s <= p.chunks_per_s and q.read_lag_p99_s <= p.read_lag_p99_s]
        return max(q.ttft_err_p99_s for q in under), max(q.itl_err_p99_s for q in under)

    best = min(cover, key=lambda p: (envelope(p), p.chunks_per_s))
    ttft, itl = envelope(best)
    return CalPoint(best.concurrency, best.chunks_per_s, best.read_lag_p99_s, ttft, itl)


def selfcert_figures(step_recs: pl.DataFrame, events: Sequence[Any], start: float, end: float,
                     read_lag_p99_s: float | None, starved: bool | None,
                     points: Sequence[CalPoint] = CALIBRATION) -> dict[str, Any]:
    """The self-certification keys of one step row (module docstring): ``step_recs`` its records (``user``,
    ``chunks``), ``events`` the run's phase events, ``[start, end]`` the step (epoch s), ``read_lag_p99_s`` and
    ``starved`` its client lag figures (None: not measured)."""
    rates = chunk_rates(step_recs, end - start)
    cpu = cpu_shares(events, start, end)
    procs = set(rates)
    cpu_max = max((v for p, v in cpu.items() if p in procs or not procs), default=None)
    rate_max = max(rates.values(), default=None)
    bound = None
    if starved:
        verdict = "starved"
    elif read_lag_p99_s is None or rate_max is None:
        verdict = "not_measured"
    else:
        bound = error_bound(rate_max, read_lag_p99_s, points)
        verdict = "certified" if bound is not None else "beyond_calibration"
    return {
        "client_processes": len(procs),
        "client_cpu_share_max": cpu_max,
        "client_chunks_per_s_proc": rate_max,
        "client_ttft_error_bound_s": bound.ttft_err_p99_s if bound else None,
        "client_itl_error_bound_s": bound.itl_err_p99_s if bound else None,
        "client_selfcert": verdict,
        "client_selfcert_range": ({"chunks_per_s": bound.chunks_per_s, "read_lag_p99_s": bound.read_lag_p99_s}
                                  if bound else None),
    }


def selfcert_text(row: Any, points: Sequence[CalPoint] = CALIBRATION, with_source: bool = True) -> str:
    """The one self-certification line of a step row (dict or typed): the client's overhead (CPU share of the
    busiest process, read lag p50 / p99, chunks/s per process), then the verdict: the calibrated TTFT / ITL error
    bound at this load, or why there is none ("beyond the calibrated range", STARVED, not measured). Every figure
    is written by its catalogue entry (:func:`harness.report.catalogue.display`). ``with_source`` False leaves
    the calibration's provenance (:data:`CALIBRATION_SOURCE`) out of a certified line, for a surface that states
    it once for all its steps (the terminal summary)."""
    get = row.get if isinstance(row, Mapping) else (lambda k: getattr(row, k, None))
    n = get("client_processes") or 0
    lag = FIGURES["client_read_lag_p99_s"]
    procs = f"{n} process{'' if n == 1 else 'es'}"
    cpu = (f"client CPU {display(row, 'client_cpu_share_max')} % of a core (busiest of {procs})"
           if get("client_cpu_share_max") is not None
           else f"client CPU not sampled in this step ({procs}; a share needs two samples of one process "
                f"≥ {MIN_SPAN_S:g} s apart, taken every {CPU_SAMPLE_S:g} s; runs of versions before sampling have "
                "none)")
    head = (f"{cpu}, read lag p50 {display(row, 'client_read_lag_p50_s')} / p99 "
            f"{display(row, 'client_read_lag_p99_s')} {lag.display_unit.value}, "
            f"{display(row, 'client_chunks_per_s_proc')} chunks/s per process")
    verdict = get("client_selfcert")
    if verdict == "certified":
        rng = get("client_selfcert_range") or {}
        tail = (f"TTFT/ITL error ≤ {display(row, 'client_ttft_error_bound_s')} / "
                f"{display(row, 'client_itl_error_bound_s')} ms (p99) at this load (calibrated up to "
                f"{FIGURES['client_chunks_per_s_proc'].text(rng.get('chunks_per_s'))} chunks/s per process, read "
                f"lag p99 ≤ {lag.text(rng.get('read_lag_p99_s'))} {lag.display_unit.value}"
                f"{f': {CALIBRATION_SOURCE}' if with_source else ''})")
        if n > 1 and not any(p.processes > 1 for p in points):
            tail += (f"; the bound is a 1-process calibration applied to each of the {n} processes at its own "
                     "chunks/s and read lag (no multi-process calibration point)")
    elif verdict == "starved":
        tail = "STARVED: no error bound, figures are the load generator's limit"
    elif verdict == "beyond_calibration":
        top = max(points, key=lambda p: p.chunks_per_s, default=None)
        cal = "no calibration" if top is None else (
            f"calibrated up to {FIGURES['client_chunks_per_s_proc'].text(top.chunks_per_s)} chunks/s per process, "
            f"read lag p99 ≤ {lag.text(max(p.read_lag_p99_s for p in points))} {lag.display_unit.value}")
        tail = f"no error bound: beyond the calibrated range ({cal})"
    else:
        tail = "not measured (no kernel-stamped reads)"
    return f"{head}; {tail}"
