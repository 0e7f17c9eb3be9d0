"""Compare runs: per-step ratios of throughput, latency and hours to N, with 95 % intervals and a noise flag.

::

    from harness.report.compare import build_comparison, write_comparison
    cmp = build_comparison(["runs/a", "runs/b"])      # a CompareReport (compare.json: schema llmload-compare/1)
    paths = write_comparison(cmp, "compare-a-vs-b")   # compare.md, compare.json, compare.html

Command line: ``llmload compare RUN_A RUN_B [RUN_C ...] [--out DIR] [--json] [--quiet]``.

Run A is the baseline: every other run X gets ``X/A`` ratios per matched step (the single-stream row by itself,
load steps by concurrency). Each run's figures come from its ``report.json`` (read with
:func:`harness.report.model.load_report`, which reads earlier versions' files too; built with
:func:`harness.report.build.build_report` when absent, nothing written into the run directory); latency
intervals come from its records (:mod:`harness.report.compare_stats`). Units: values keep the report's units
(seconds, tokens per second, hours); ratios are unitless.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from harness.report.build import build_report
from harness.report.catalogue import FIGURES, Flag, row_flags, to_n_label
from harness.report.columns import load_frame_run
from harness.report.compare_model import (
    CompareMetric,
    CompareReport,
    CompareRun,
    CompareStep,
    Estimate,
    MetricCells,
    Ratio,
    Unmatched,
    run_tags,
    step_keys,
)
from harness.report.compare_stats import LATENCY_FIGURES, latency_intervals
from harness.report.load import NoRecordsError
from harness.report.model import KNOWN_SCHEMAS, CostFigures, HoursEntry, Report, ReportError, StepRow, load_report

__all__ = [
    "DEFINITIONS",
    "KNOWN_REPORT_SCHEMAS",
    "SCHEMA",
    "CompareError",
    "RunInput",
    "build_comparison",
    "load_run_input",
    "main",
    "write_comparison",
]

#: Identifies the layout of ``compare.json``.
SCHEMA = "llmload-compare/1"

#: ``report.json`` schemas this module reads (those :func:`harness.report.model.load_report` reads).
KNOWN_REPORT_SCHEMAS = KNOWN_SCHEMAS

#: How every figure of the comparison is defined; stored in ``compare.json`` and printed under the tables.
DEFINITIONS: dict[str, str] = {
    "ratio": "Ratio X/A = run X's figure ÷ the baseline run A's figure at the same step (A is the first run "
    "given). For tok/s higher is better; for latencies, TPOT, hours and cost lower is better.",
    "matching": "Steps are matched by their report label: the single-stream row ('single') with itself, load "
    "steps by concurrency ('C=<n>'; a concurrency repeated within a run is matched by order of occurrence). "
    "Steps missing from some run are listed as unmatched and get no ratio there.",
    "within_noise": "Within noise = the two runs' 95 % intervals overlap, which is the same as the ratio interval "
    "[low_X ÷ high_A, high_X ÷ low_A] containing 1 (a conservative test: overlap of two 95 % intervals). An "
    "unbounded side of an interval (None) counts as 0 below or ∞ above and leaves that side of the ratio "
    "interval unbounded (None, shown as ≤ or ≥ the other bound). Otherwise the ratio is called better "
    "or worse. A figure without an interval in either run gets no flag ('no interval'). The intervals hold the "
    "sampling noise within each run only: run-to-run variation of the environment (other load on the host, "
    "a different server start) is not in them, so repeat a run to learn how far two runs of one set-up differ. "
    "A step where a run's hours-to-N interval does not overlap the baseline's is listed (step 'disagree', and a "
    "note) as disagreeing beyond their intervals; repeats of one profile pooled with llmload report --pool get a "
    "run-to-run interval.",
    "interval_hours": "Hours to N: the report's own 95 % prediction interval (hours_low, hours_high), by "
    "renewal-reward over the steady window's request cycles (open-loop steps: batch means).",
    "interval_output_tps": "Aggregate output tok/s: the relative interval implied by the hours interval (= tok/s × "
    "hours ÷ hours_high .. tok/s × hours ÷ hours_low), else the row's interval of its usable rate "
    "(hours_interval: renewal-reward or batch means). An "
    "approximation: it counts requests, not the spread of tokens per request.",
    "interval_per_stream_tps": "Per-stream tok/s (Σ output tokens ÷ Σ (e2e − ttft)): delta-method 95 % interval "
    "of a ratio estimator, R ± 1.96 · sqrt(Σ (y − R·x)² ÷ (n (n − 1))) ÷ x̄, over the report's latency sample.",
    "interval_percentiles": "TTFT, TTFAT and E2E percentiles: distribution-free order-statistic 95 % interval "
    "[x_(i), x_(j)] (ranks from Binomial(n, q)) over the report's latency sample of the step (successful "
    "requests that ended inside the steady window, the whole step when not steady), read from the run's records. "
    "A bound the sample is too small for is unbounded (the upper bound of p99 needs at least 367 requests, of "
    "p50 at least 6).",
    "interval_tpot": "TPOT mean: normal 95 % interval mean ± 1.96 s ÷ √n over the same latency sample.",
    "interval_records": "Latency intervals are used only when the figure recomputed from the records equals the "
    "report's (relative 1e-9); otherwise (stale report.json, no records) the figure has no interval and no "
    "noise flag.",
    "cost": "Cost (when at least two runs are priced, i.e. their profiles give US$ per hour): US$ to N (the "
    "hours entry's usd with its interval usd_low .. usd_high = the hours interval × US$/h), US$ per 1M output "
    "tokens (no interval) and US$ per 1,000 usable (with its interval), from each report; absent otherwise. "
    "A run without a price has no cost figure (–).",
}


class CompareError(ValueError):
    """Bad input to the comparison: a missing run directory, fewer than two runs, an unknown report schema."""



def _catalogued(key: str, better: str, method: str | None) -> CompareMetric:
    """A compared figure with its label and display unit from the catalogue (:mod:`harness.report.catalogue`)."""
    f = FIGURES[key]
    return CompareMetric(key=key, label=f.label, unit=f.display_unit.value, better=better, method=method)


#: The figures compared at every step, in table order (hours and cost to N are appended per N).
BASE_METRICS: tuple[CompareMetric, ...] = (
    _catalogued("output_tps", "higher", "interval_output_tps"),
    _catalogued("per_stream_tps", "higher", "interval_per_stream_tps"),
    _catalogued("ttft_p50_s", "lower", "interval_percentiles"),
    _catalogued("ttft_p99_s", "lower", "interval_percentiles"),
    _catalogued("ttfat_p50_s", "lower", "interval_percentiles"),
    _catalogued("ttfat_p99_s", "lower", "interval_percentiles"),
    _catalogued("tpot_mean_s", "lower", "interval_tpot"),
    _catalogued("e2e_p50_s", "lower", "interval_percentiles"),
)


@dataclass
class RunInput:
    """One run of the comparison.

    Attributes:
        path: the run directory.
        report: its report (``report.json`` read by :func:`harness.report.model.load_report`, or built).
        source: "report.json" or "built" (no report.json: built from the records, not written).
        records: its non-warm-up records as a prepared frame (:attr:`harness.report.columns.FrameRun.main`), or
            None when they could not be read (then no latency intervals).
        problems: issues met while loading (shown as notes).
    """

    path: Path
    report: Report
    source: str
    records: pl.DataFrame | None
    problems: list[str] = field(default_factory=list)


def load_run_input(run_dir: str | os.PathLike[str]) -> RunInput:
    """Read one run directory for the comparison.

    Raises:
        CompareError: the directory does not exist; its ``report.json`` is unreadable or of an unknown schema;
            it has neither ``report.json`` nor records.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise CompareError(f"{root}: no such run directory")
    problems: list[str] = []
    rj = root / "report.json"
    if rj.exists():
        try:
            rep = load_report(rj)
        except ReportError as e:
            raise CompareError(str(e)) from e
        source = "report.json"
    else:
        try:
            rep = build_report(root)
        except NoRecordsError as e:
            raise CompareError(f"{e} (and no report.json)") from e
        except ValueError as e:
            raise CompareError(f"{root}: cannot build the report: {e}") from e
        source = "built"
    records: pl.DataFrame | None = None
    try:
        if (root / "records.jsonl").exists() or any(root.glob("records*.jsonl")):
            records = load_frame_run(root).main
        else:
            problems.append(f"{root}: no records.jsonl: latency figures have no interval.")
    except (OSError, ValueError) as e:
        problems.append(f"{root}: records unreadable ({e}): latency figures have no interval.")
    return RunInput(root, rep, source, records, problems)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _hours_entry(row: StepRow, n: int) -> HoursEntry | None:
    return next((h for h in row.hours if h.n == n), None)


def _priced(rep: Report) -> bool:
    """Whether a report carries cost figures (a row with ``cost``: the profile had a price)."""
    return any(row.cost is not None for row in rep.steps)


#: Row-level cost figures (``row.cost``, :func:`harness.report.cost.cost_figures`) compared when priced: (catalogue
#: key, has a ``_low`` / ``_high`` interval); their labels and units are the catalogue's.
ROW_COSTS: tuple[tuple[str, bool], ...] = (
    ("usd_per_1m_output_tokens", False),
    ("usd_per_1k_usable", True),
)


def _to_n(key: str, n: int, method: str) -> CompareMetric:
    """Hours (``key`` ``hours``) or US$ (``usd``) to ``n``: the catalogue's name (``hours to N=100,000``) and
    display unit."""
    return CompareMetric(key=f"{key}@{n}", label=to_n_label(key, n), unit=FIGURES[key].display_unit.value,
                         better="lower", method=method, n=n)


def _metrics(reports: list[Report]) -> list[CompareMetric]:
    ns: list[int] = []
    for rep in reports:
        for n in rep.hours_to_n:
            if n not in ns:
                ns.append(n)
    out = list(BASE_METRICS)
    out += [_to_n("hours", n, "interval_hours") for n in ns]
    if sum(_priced(rep) for rep in reports) >= 2:  # a cost ratio needs two priced runs
        out += [_to_n("usd", n, "cost") for n in ns]
        out += [_catalogued(k, "lower", "cost" if iv else None) for k, iv in ROW_COSTS]
    return out


def _estimate(value: float | None, interval: tuple[float | None, float | None] | None,
              method: str | None) -> Estimate | None:
    if value is None:
        return None
    if interval is None:
        return Estimate(value=value, low=None, high=None, method=None)
    return Estimate(value=value, low=interval[0], high=interval[1], method=method)


def _output_tps(row: StepRow) -> Estimate | None:
    v = _num(row.output_tps)
    if v is None:
        return None
    h = row.hours[0] if row.hours else None
    point = _num(h.hours) if h is not None else None
    if h is not None and point:
        hi_h, lo_h = _num(h.hours_high), _num(h.hours_low)
        if hi_h is None and lo_h is None:  # the hours have no interval (too few batches): nor has tok/s
            return _estimate(v, None, None)
        lo = v * point / hi_h if hi_h else None
        hi = v * point / lo_h if lo_h else None
        return _estimate(v, (lo, hi), "interval_output_tps")
    iv = row.hours_interval
    rate, se, t = _num(iv.rate), _num(iv.rate_se), _num(iv.t)
    if rate and se is not None and t is not None:  # the row's interval of its usable rate (either method)
        rlo, rhi = rate - t * se, rate + t * se
        return _estimate(v, (v * rlo / rate if rlo > 0 else None, v * rhi / rate), "interval_output_tps")
    return _estimate(v, None, None)


def _row_estimates(run: RunInput, row: StepRow, metrics: list[CompareMetric],
                   notes: list[str], tag: str) -> dict[str, Estimate | None]:
    """Every metric's estimate (value, 95 % bounds, method) for one row of one run."""
    lat: dict[str, tuple[float | None, float | None]] = {}
    if run.records is not None:
        lat, bad = latency_intervals(run.records, row)
        if bad:
            notes.append(f"{tag} {row.label}: the records do not reproduce the report's "
                         f"{', '.join(bad)} (stale report.json?): no interval for them.")
    out: dict[str, Estimate | None] = {}
    for m in metrics:
        if m.key == "output_tps":
            out[m.key] = _output_tps(row)
        elif m.key in LATENCY_FIGURES:
            out[m.key] = _estimate(_num(getattr(row, m.key)), lat.get(m.key), m.method)
        elif m.n is not None:
            h = _hours_entry(row, m.n)
            name = "hours" if m.method == "interval_hours" else "usd"
            out[m.key] = None if h is None else _bounded(h, name, m.method)
        else:  # a row-level cost figure
            out[m.key] = _bounded(row.cost, m.key, m.method) if row.cost is not None else None
    return out


def _bounded(d: HoursEntry | CostFigures, name: str, method: str | None) -> Estimate | None:
    """The estimate of figure ``name`` of ``d`` with its bounds ``name_low``, ``name_high``; no interval (method
    None) when ``method`` is None or both bounds are missing (None): a figure with neither bound has no interval,
    an unbounded upper side alone is a one-sided interval."""
    lo, hi = _num(getattr(d, f"{name}_low", None)), _num(getattr(d, f"{name}_high", None))
    has_iv = method is not None and (lo is not None or hi is not None)
    return _estimate(_num(getattr(d, name, None)), (lo, hi) if has_iv else None, method)


def _ratio(a: Estimate | None, x: Estimate | None, better: str, vs: str) -> Ratio:
    """Ratio X/A of two estimates (X is run ``vs``), its 95 % interval, the noise flag and the verdict."""
    if a is None or x is None or not a.value:
        return Ratio(vs=vs, ratio=None, low=None, high=None, within_noise=None, verdict="n/a")
    ratio = x.value / a.value
    if a.method is None or x.method is None:
        return Ratio(vs=vs, ratio=ratio, low=None, high=None, within_noise=None, verdict="no interval")
    lo_x = x.low or 0.0
    lo_a = a.low or 0.0
    hi_x = x.high if x.high is not None else math.inf
    hi_a = a.high if a.high is not None else math.inf
    low = None if lo_x == 0 or hi_a == math.inf else lo_x / hi_a  # None: unbounded below (not a bound of 0)
    high = None if hi_x == math.inf or lo_a == 0 else hi_x / lo_a
    noise = lo_x <= hi_a and lo_a <= hi_x
    if noise:
        verdict = "within noise"
    else:
        verdict = "better" if (ratio > 1) == (better == "higher") else "worse"
    return Ratio(vs=vs, ratio=ratio, low=low, high=high, within_noise=noise, verdict=verdict)


def _flags(row: StepRow) -> list[str]:
    """The row's flags (:func:`harness.report.catalogue.row_flags`) by :class:`~harness.report.catalogue.Flag`
    name (``NOT_STEADY``, ``LOW_CONFIDENCE``, ``STARVED``, ``HIDDEN_REASONING``), as ``compare.json`` holds them."""
    return [f.name for f in row_flags(row)]


def _run_summary(run: RunInput, tag: str) -> CompareRun:
    rep = run.report
    target = rep.target
    return CompareRun(
        tag=tag,
        run_id=rep.run_id or run.path.resolve().name,
        run_dir=str(run.path),
        source=run.source,
        profile_name=rep.profile_name,
        model=rep.model,
        target_url=target.get("base_url") or target.get("url") or target.get("host"),
        status=rep.status,
        interrupted=rep.interrupted,
        start_wall=rep.start_wall,
        duration_s=rep.duration_s,
        time_scale=rep.time_scale,
        hours_to_n=rep.hours_to_n,
        records=run.records.height if run.records is not None else None,
    )


def _workload(rep: Report) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """A report's prompt classes with the max_tokens their requests had (``prompts`` rows), sorted."""
    return tuple(sorted((r.prompt, tuple(r.max_tokens_seen)) for r in rep.prompts))


def _workload_notes(runs: Sequence[RunInput], tags: Sequence[str]) -> list[str]:
    """Notes when the runs are not two measurements of one workload: the same run given twice (ratios 1 by
    construction), different profiles, or different prompt classes / max_tokens (the ratios then compare
    workloads, not only servers)."""
    notes = []
    firsts: list[tuple[str, str, str]] = []  # (tag, resolved directory, run id) of each distinct run so far
    for t, r in zip(tags, runs, strict=True):
        path, rid = str(r.path.resolve()), r.report.run_id
        same = next((u for u, p, q in firsts if p == path or (rid and q == rid)), None)
        if same is None:
            firsts.append((t, path, rid))
        else:
            notes.append(f"{same} and {t} are the same run ({rid or path}): their ratios are 1 by construction and "
                         "say nothing about noise.")
    names = [str(r.report.profile_name) for r in runs]
    if len(set(names)) > 1:
        notes.append("The runs ran different profiles (" + ", ".join(
            f"{t} {n}" for t, n in zip(tags, names, strict=True)) + "): the ratios compare different workloads, "
            "not only the servers.")
    loads = [_workload(r.report) for r in runs]
    if len(set(loads)) > 1:
        notes.append("The runs sent different prompt classes or max_tokens (" + "; ".join(
            f"{t} " + ", ".join(f"{p} ({'/'.join(map(str, caps)) or 'no cap'})" for p, caps in w)
            for t, w in zip(tags, loads, strict=True)) + "): token counts and latencies differ by workload too.")
    return notes


def _disagree(cells: dict[str, MetricCells], metrics: Sequence[CompareMetric], tags: Sequence[str]) -> list[str]:
    """The tags of the runs whose hours-to-N interval (any N) does not overlap the baseline's at this step: they
    disagree beyond their intervals (``within_noise`` False on an hours metric)."""
    hours = [m.key for m in metrics if m.method == "interval_hours"]
    return [tags[i + 1] for i in range(len(tags) - 1)
            if any(cells[k].ratios[i].within_noise is False for k in hours)]


def _disagree_notes(steps: Sequence[CompareStep], tags: Sequence[str], one_profile: bool) -> list[str]:
    """One note naming the steps where runs disagree beyond their intervals (hours to N), with what it means for
    repeats of one profile."""
    where = [f"{s.key} ({tags[0]} vs {', '.join(s.disagree)})" for s in steps if s.disagree]
    if not where:
        return []
    text = ("Runs disagree beyond their intervals (their hours-to-N 95 % intervals do not overlap) at "
            + "; ".join(where) + ".")
    if one_profile:
        text += (" If these are repeats of one set-up, the within-run intervals miss the run-to-run spread: pool "
                 "the repeats (llmload report --pool RUN_DIR ...) for a run-to-run interval.")
    return [text]


def build_comparison(run_dirs: Sequence[str | os.PathLike[str]]) -> CompareReport:
    """Compare two or more run directories; the first is the baseline.

    Returns:
        The comparison (:class:`harness.report.compare_model.CompareReport`; ``compare.json`` is its
        :meth:`~harness.report.compare_model.CompareReport.to_json`): ``schema, generated_wall, baseline, runs,
        metrics, steps, unmatched, definitions, notes``. ``runs`` has one summary per run (``tag`` A, B, ...).
        ``steps`` has one entry per step of the baseline present in at least one other run: ``key, label,
        concurrency, flags`` (per run: the names of its row's :class:`~harness.report.catalogue.Flag` s,
        ``NOT_STEADY``, ``LOW_CONFIDENCE``, ``STARVED``, ``HIDDEN_REASONING``), ``present`` (per run) and
        ``metrics[key]`` (values: an :class:`~harness.report.compare_model.Estimate` or None per run; ratios: a
        :class:`~harness.report.compare_model.Ratio` per other run); an estimate's value and bounds are in the
        report's units (seconds, tok/s, hours); ``disagree`` the tags of the runs whose hours-to-N interval does not
        overlap the baseline's there (they disagree beyond their intervals; also a note). ``unmatched`` lists
        steps missing from some run (tags).

    Raises:
        CompareError: fewer than two runs, or a run that cannot be read (:func:`load_run_input`).
    """
    if len(run_dirs) < 2:
        raise CompareError(f"compare needs at least two run directories (got {len(run_dirs)})")
    runs = [load_run_input(d) for d in run_dirs]
    tags = run_tags(len(runs))
    reports = [r.report for r in runs]
    metrics = _metrics(reports)
    notes: list[str] = [p for r in runs for p in r.problems]
    keyed = [dict(zip(step_keys(rep.steps), rep.steps, strict=True)) for rep in reports]
    order: list[str] = []
    for k in keyed:
        order += [key for key in k if key not in order]

    unmatched = []
    for key in order:
        present = [t for t, k in zip(tags, keyed, strict=True) if key in k]
        if len(present) < len(runs):
            unmatched.append(Unmatched(key=key, present_in=present, missing_in=[t for t in tags if t not in present]))

    steps: list[CompareStep] = []
    for key in (k for k in order if k in keyed[0]):
        if not any(key in k for k in keyed[1:]):
            continue
        rows = [k.get(key) for k in keyed]
        base = rows[0]
        assert base is not None
        ests = [_row_estimates(run, row, metrics, notes, tag) if row is not None else None
                for run, row, tag in zip(runs, rows, tags, strict=True)]
        cells: dict[str, MetricCells] = {}
        for m in metrics:
            values = [e.get(m.key) if e is not None else None for e in ests]
            ratios = [_ratio(values[0], values[i], m.better, tags[i]) for i in range(1, len(runs))]
            cells[m.key] = MetricCells(values=values, ratios=ratios)
        steps.append(CompareStep(key=key, label=base.label, concurrency=base.concurrency,
                                 present=[row is not None for row in rows],
                                 flags=[_flags(row) if row is not None else [] for row in rows], metrics=cells,
                                 disagree=_disagree(cells, metrics, tags)))

    scales = {float(r.report.time_scale or 1.0) for r in runs}
    if len(scales) > 1:
        notes.append("The runs used different simulator time scales ("
                     + ", ".join(f"{t} {float(r.report.time_scale or 1.0):g}" for t, r in zip(tags, runs,
                                                                                                    strict=True))
                     + "): their wall-time figures are not comparable; compare the real-time equivalents in "
                     "their reports instead.")
    models = {str(r.report.model) for r in runs}
    if len(models) > 1:
        notes.append("The runs measured different models: " + ", ".join(
            f"{t} {r.report.model}" for t, r in zip(tags, runs, strict=True)) + ".")
    notes.extend(_workload_notes(runs, tags))
    notes.extend(_disagree_notes(steps, tags, len({str(r.report.profile_name) for r in runs}) == 1))
    for t, r in zip(tags, runs, strict=True):
        if r.report.interrupted:
            notes.append(f"{t} is an interrupted run: its figures are partial.")
    for flag in Flag:
        where = [f"{s.key} ({', '.join(t for t, f in zip(tags, s.flags, strict=True) if flag.name in f)})"
                 for s in steps if any(flag.name in f for f in s.flags)]
        if where:
            notes.append(f"{flag.named}: {flag.text} (see those runs' reports): {'; '.join(where)}. "
                         "Ratios at these steps are less reliable.")
    return CompareReport.model_validate({
        "schema": SCHEMA,
        "generated_wall": time.time(),
        "baseline": tags[0],
        "runs": [_run_summary(r, t) for r, t in zip(runs, tags, strict=True)],
        "metrics": list(metrics),
        "steps": steps,
        "unmatched": unmatched,
        "definitions": dict(DEFINITIONS),
        "notes": notes,
    })


def default_out_dir(cmp: CompareReport) -> Path:
    """``compare-<run A id>-vs-<run B id>[-vs-...]`` in the current directory."""
    return Path("compare-" + "-vs-".join(r.run_id for r in cmp.runs))


def write_comparison(cmp: CompareReport, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``compare.md``, ``compare.json`` and ``compare.html`` into ``out_dir`` (created); return their paths.

    Raises:
        OSError: the directory or a file cannot be written.
    """
    from harness.report.compare_render import render_html, render_markdown

    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    texts = {
        "md": ("compare.md", render_markdown(cmp)),
        "json": ("compare.json", cmp.to_json()),
        "html": ("compare.html", render_html(cmp)),
    }
    out = {}
    for kind, (name, text) in texts.items():
        tmp = root / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(root / name)
        out[kind] = root / name
    return out


def build_parser(prog: str = "llmload compare") -> argparse.ArgumentParser:
    """The argument parser of the compare command."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Compare runs step by step: ratios X/A (A = the first run) of tok/s, latencies and hours to "
        "N, with 95 % intervals and a within-noise flag. Writes compare.md, compare.json and compare.html.",
    )
    p.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run directories; the first is the baseline A")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default: ./compare-<run A>-vs-<run B>...)")
    p.add_argument("--json", action="store_true", help="print the JSON instead of the Markdown")
    p.add_argument("--quiet", action="store_true", help="write the files but print nothing")
    return p


def main(argv: list[str] | None = None, prog: str = "llmload compare") -> int:
    """Run the compare command; returns the exit code: 0 done, 2 bad input (missing run directory, fewer than
    two runs, unreadable or unknown-schema report), 1 the output cannot be written."""
    args = build_parser(prog).parse_args(argv)
    try:
        cmp = build_comparison(args.runs)
    except CompareError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out_dir = Path(args.out) if args.out else default_out_dir(cmp)
    try:
        paths = write_comparison(cmp, out_dir)
    except OSError as e:
        print(f"error: cannot write the comparison: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        if args.json:
            sys.stdout.write(json.dumps(cmp.as_dict(), indent=2) + "\n")
        else:
            sys.stdout.write(paths["md"].read_text(encoding="utf-8"))
        print(f"wrote {paths['md']}, {paths['json']}, {paths['html']}", file=sys.stderr)
    return 0
