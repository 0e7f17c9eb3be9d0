"""The report's "SLO capacity search" section: the search's outcome as the master measured it.

The master writes it to ``phases.jsonl`` as a ``search`` event (:class:`harness.shapes.SearchDriver`,
:meth:`harness.search.CapacitySearch.result`); the report shows the boundary (highest passing and lowest failing
setting) with each SLO figure and its 95 % interval on both sides, and every probe in the order run. An
inconclusive probe (too few requests) says so in its "failed because" cell ("inconclusive (k requests < 10)": it did
not fail) and its sample cell says how many times its step was extended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.report.rundata import PhaseEvent, SearchEvent

if TYPE_CHECKING:
    from harness.report.model import SearchFigure, SearchResult

__all__ = ["SEARCH_DEFINITIONS", "search_lines", "search_result"]

#: The report's formula of the search (merged into ``definitions``).
SEARCH_DEFINITIONS: dict[str, str] = {
    "slo_search": "SLO capacity search (profile search:): probe low, then high, then bisect between the highest "
    "setting that met every SLO and the lowest that failed one until they are at most search.tolerance apart (or "
    "search.max_steps steps ran; concurrency midpoints are whole users). Each step is measured by the master at "
    "its end over its steady window (successful requests that ended in it): SLO <metric>_p<q>_s holds when the "
    "q-th percentile ≤ the threshold. A step with no steady window or fewer than 10 requests ended in it is "
    "inconclusive, never a fail: it is extended by steps.duration and measured again over the whole step, at most "
    "3 times; still short, it is reported 'inconclusive (k requests < 10)' and is neither the highest passing nor the "
    "lowest failing setting (an inconclusive lowest setting never gives a capacity below it). At least 10 requests "
    "but fewer than 10 successful: the step fails. In a rate search the sample is the step's "
    "successful requests scheduled in its schedule window that ended by the measurement (1 s after its time), TTFT, "
    "TTFAT and E2E are schedule-relative, and a step that sent more than 5 % fewer requests than scheduled fails. "
    "Intervals: distribution-free 95 % confidence intervals of the percentile (two order statistics of the "
    "sample, their ranks from the exact binomial distribution, as in llmload compare; a side with too few requests "
    "is unbounded).",
}


def search_result(events: Sequence[PhaseEvent]) -> SearchResult | None:
    """The last ``search`` event's result in ``phases.jsonl`` events (:func:`harness.report.rundata.read_events`),
    None when the run had no search."""
    found = [e.result for e in events if isinstance(e, SearchEvent) and e.result is not None]
    return found[-1] if found else None


def _v(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def _figure(f: SearchFigure | None) -> str:
    if f is None:
        return "–"
    return f"{_v(f.value)} [{_v(f.low)}, {_v(f.high)}] {'ok' if f.ok else 'FAIL'}"


def search_lines(search: SearchResult | None) -> list[str]:
    """The Markdown lines of the section (none without a search): settings in users or req/s, figures in s."""
    if search is None:
        return []
    unit = "users" if search.axis == "concurrency" else "req/s"
    lines = ["## SLO capacity search", "",
             f"Over {search.axis} from {search.low:g} to {search.high:g} {unit}, tolerance "
             f"{search.tolerance:g}: **{search.verdict}**. Each figure: percentile [95 % interval] against its "
             "threshold; see slo_search in Formulas.", ""]
    best, fail = search.highest_pass, search.lowest_fail
    keys: list[str] = []
    for p in (best, fail, *search.probes):
        for k in p.figures if p is not None else {}:
            if k not in keys:
                keys.append(k)
    thr = {k: f.threshold for p in search.probes for k, f in p.figures.items()}
    header = ["side", "setting", "step", "sample", *(f"{k} ≤ {thr.get(k, 0) or 0:g}" for k in keys),
              "failed because"]
    rows = []
    sides = [("highest passing", best), ("lowest failing", fail)]
    for side, p in [*sides, *(("probe", p) for p in search.probes)]:
        if p is not None:
            sample = f"{p.sample}" + (f" (step extended ×{p.extensions})" if p.extensions else "")
            rows.append([side, f"{p.setting:g}", str(p.step), sample,
                         *(_figure(p.figures.get(k)) for k in keys), p.reason or "–"])
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return [*lines, ""]
