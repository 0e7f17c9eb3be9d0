"""Repeated runs of one profile pooled into one answer: ``llmload report --pool RUN_DIR RUN_DIR [...]``.

Each run's figures come from its ``report.json`` (:func:`harness.report.model.load_report`; built from the records,
nothing written into the run directory, when absent). Steps are matched by their report label (``single``,
``C=<n>``, a rate step's label; a label repeated within a run by order of occurrence, as ``llmload compare`` does).
Only a row's published hours-to-N fields are read — its usable rate (``samples_per_hour`` ÷ 3600, usable samples/s),
its 95 % bounds (``rate_low``, ``rate_high``) and its window (``window_s``) — so pooling works with whichever
within-run interval method filled them.

Per matched step and N (usable samples/s, hours):

* **pooled rate** ``r = Σ r_i W_i ÷ Σ W_i`` (``W_i`` the run's steady window, s): the usable completions of all
  runs' windows ÷ their total length (pooled counts);
* **within-run interval (pooled)**: each run's bounds read as ``r_i ± h_i`` with ``h_i = (high − low) ÷ 2`` taken as
  ``1.96 · SE_i``, combined for independent runs (:func:`harness.stats.intervals.combined_interval`):
  ``r ± √(Σ (W_i ÷ ΣW)² h_i²)``; none when a run has no bounds;
* **run-to-run interval**: Student t over the runs' rates (:func:`harness.stats.intervals.t_mean_interval`):
  ``mean(r_i) ± t(n−1, 0.975) · s ÷ √n``; with 2 runs ``t(1) = 12.7`` makes it wide, with 1 run there is none;
  ``s`` is the between-run spread (standard deviation, usable samples/s);
* hours to N ``= N ÷ (r · 3600)`` and each interval's hours bounds ``N ÷ (rate bound · 3600)`` (no upper bound
  when the lower rate bound ≤ 0);
* **disagree**: the pairs of runs whose within-run rate intervals do not overlap — the runs differ by more than
  the within-run intervals allow, so those intervals understate the uncertainty: read the run-to-run interval.

Writes ``pool.md`` and ``pool.json`` (schema :data:`SCHEMA`) into ``--out`` (default ``./pool-<first run id>-x<k>``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from harness.report.catalogue import FIGURES, display, hours_header, hours_text
from harness.report.compare_model import run_tags, step_keys
from harness.report.model import HoursEntry, Num, Report, ReportError, ReportModel, StepRow, load_report
from harness.stats.intervals import combined_interval, t_mean_interval, t_quantile_975

__all__ = [
    "POOL_DEFINITIONS",
    "SCHEMA",
    "PoolError",
    "PoolHours",
    "PoolReport",
    "PoolRow",
    "PoolRun",
    "build_pool",
    "default_out_dir",
    "render_pool_markdown",
    "run_pool",
    "write_pool",
]

#: Identifies the layout of ``pool.json``.
SCHEMA = "llmload-pool/1"

#: How the pooled figures are defined (``pool.json``'s ``definitions``, printed under the tables).
POOL_DEFINITIONS: dict[str, str] = {
    "pool": "Repeated runs pooled (llmload report --pool): steps matched by label. Pooled usable rate r = Σ r_i W_i "
    "÷ Σ W_i over the runs' steady windows W_i (= all runs' usable completions in their windows ÷ the windows' "
    "total length). Within-run interval (pooled): each run's published 95 % rate bounds read as r_i ± h_i, h_i = "
    "1.96 SE_i, combined for independent runs: r ± √(Σ (W_i ÷ ΣW)² h_i²) (none when a run has none). The runs' "
    "bounds are prediction bounds for N, whose own-run term (σ² ÷ T_N) should not shrink with more runs; for N "
    "of hours of work T_N ≫ W_i and that term is negligible. Run-to-run interval: mean(r_i) ± t(n−1, 0.975) s ÷ √n "
    "over the n runs' rates (s = between-run standard deviation; 2 runs: t = 12.7, wide; 1 run: none): it holds "
    "what the within-run intervals miss (a different server start, other load on the host). Hours to N = N ÷ (r × "
    "3600), its bounds N ÷ (rate bound × 3600). Runs disagree beyond their intervals when two runs' within-run "
    "rate intervals do not overlap: then the within-run interval understates the uncertainty; use the "
    "run-to-run one.",
}


class PoolError(ValueError):
    """Bad input to pooling: fewer than one run, a missing run directory, an unreadable report."""


class PoolRun(ReportModel):
    """One run of a pooled step: its tag, its usable rate and 95 % bounds (usable samples/s, for the row's first
    N), its steady window (s)."""

    tag: str = ""
    request_rate: Num | None = None
    low: Num | None = None
    high: Num | None = None
    window_s: Num = 0.0


class PoolHours(ReportModel):
    """Hours to ``n`` of a pooled step: the pooled hours with the pooled within-run interval (``hours_low``,
    ``hours_high``) and with the run-to-run interval (``run_hours_low``, ``run_hours_high``); hours."""

    n: int = 0
    hours: Num | None = None
    hours_low: Num | None = None
    hours_high: Num | None = None
    run_hours: Num | None = None
    run_hours_low: Num | None = None
    run_hours_high: Num | None = None


class PoolRow(ReportModel):
    """One matched step of the pooled runs. Rates in usable samples/s (``request_rate``: pooled; ``*_low`` /
    ``*_high``: 95 % bounds, None when unavailable; the rate bounds are those of the first N)."""

    key: str = ""
    label: str = ""
    concurrency: int = 1
    runs: int = 0
    request_rate: Num | None = None
    within_low: Num | None = None
    within_high: Num | None = None
    run_mean: Num | None = None
    run_low: Num | None = None
    run_high: Num | None = None
    run_rate_sd: Num | None = None
    t: Num | None = None
    per_run: list[PoolRun] = Field(default_factory=list)
    hours: list[PoolHours] = Field(default_factory=list)
    disagree: list[str] = Field(default_factory=list)


class PoolReport(ReportModel):
    """``pool.json``: the runs pooled (tag, run id, directory), the N, one row per matched step, notes and
    definitions."""

    schema_: str = Field(SCHEMA, alias="schema")
    generated_wall: Num = 0.0
    profile_name: str | None = None
    runs: list[dict[str, Any]] = Field(default_factory=list)
    hours_to_n: list[int] = Field(default_factory=list)
    steps: list[PoolRow] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    definitions: dict[str, str] = Field(default_factory=lambda: dict(POOL_DEFINITIONS))


def _load(run_dir: str | os.PathLike[str]) -> Report:
    root = Path(run_dir)
    if not root.is_dir():
        raise PoolError(f"{root}: no such run directory")
    if (root / "report.json").exists():
        try:
            return load_report(root / "report.json")
        except ReportError as e:
            raise PoolError(str(e)) from e
    from harness.report.build import build_report
    from harness.report.load import NoRecordsError

    try:
        return build_report(root)
    except (NoRecordsError, ValueError) as e:
        raise PoolError(f"{root}: no report.json and cannot build the report: {e}") from e


def _entry(row: StepRow, n: int) -> HoursEntry | None:
    return next((h for h in row.hours if h.n == n), None)


def _finite(v: float | None) -> float | None:
    return float(v) if v is not None and math.isfinite(float(v)) else None


def _run_figures(row: StepRow, n: int) -> tuple[float | None, float | None, float | None]:
    """A run's usable rate and its 95 % bounds at N (usable samples/s), from its hours entry."""
    h = _entry(row, n)
    if h is None or h.samples_per_hour is None:
        return None, None, None
    return float(h.samples_per_hour) / 3600.0, _finite(h.rate_low), _finite(h.rate_high)


def _hours(n: int, rate: float | None) -> float | None:
    return n / (rate * 3600.0) if rate is not None and rate > 0 else None


def _pool_n(rows: Sequence[StepRow], n: int) -> dict[str, Any]:
    """Pooled figures of one step at one N (module docstring): rates in usable samples/s. ``figs``: per run
    ``((rate, low, high), window_s)``."""
    figs = [(_run_figures(r, n), float(r.window_s or 0.0)) for r in rows]
    have: list[tuple[float, float | None, float | None, float]] = [
        (f[0], f[1], f[2], w) for f, w in figs if f[0] is not None and w > 0]
    total = sum(w for *_, w in have)
    rate = sum(r * w for r, _, _, w in have) / total if total > 0 else None
    within: tuple[float | None, float | None] = (None, None)
    bounded = [(r, lo, hi, w) for r, lo, hi, w in have if lo is not None and hi is not None]
    if have and len(bounded) == len(have):
        within = combined_interval([(r, (hi - lo) / 2.0, w) for r, lo, hi, w in bounded])  # type: ignore[operator]
    rates = [r for r, *_ in have]
    run_lo, run_hi = t_mean_interval(rates)
    # a rate is >= 0: a lower bound at or below 0 is no bound (None; hours to N then have no upper bound), as the
    # report's own intervals do
    run_lo = run_lo if run_lo is not None and run_lo > 0 else None
    if within[0] is not None and within[0] <= 0:
        within = (None, within[1])
    mean = sum(rates) / len(rates) if rates else None
    sd = (math.sqrt(sum((x - mean) ** 2 for x in rates) / (len(rates) - 1))
          if mean is not None and len(rates) >= 2 else None)
    return {"rate": rate, "within": within, "run": (run_lo, run_hi), "mean": mean, "sd": sd, "runs": len(have),
            "figs": figs}


def _disagree(tags: Sequence[str], figs: Sequence[tuple[tuple[float | None, ...], float]]) -> list[str]:
    """Pairs of runs (``"A–B"``) whose within-run rate intervals both exist and do not overlap."""
    bounds = [(f[1], f[2]) for f, _ in figs]
    out = []
    for i, (lo_i, hi_i) in enumerate(bounds):
        for j in range(i + 1, len(bounds)):
            lo_j, hi_j = bounds[j]
            if lo_i is None or hi_i is None or lo_j is None or hi_j is None:
                continue
            if hi_i < lo_j or hi_j < lo_i:
                out.append(f"{tags[i]}–{tags[j]}")
    return out


def _row(key: str, rows: Sequence[StepRow], tags: Sequence[str], ns: Sequence[int]) -> PoolRow:
    first = _pool_n(rows, ns[0])
    lo, hi = first["within"]
    rlo, rhi = first["run"]
    runs = [PoolRun(tag=t, request_rate=f[0], low=f[1], high=f[2], window_s=w)
            for t, (f, w) in zip(tags, first["figs"], strict=True)]
    hours = []
    for n in ns:
        p = _pool_n(rows, n)
        (wlo, whi), (plo, phi) = p["within"], p["run"]
        hours.append(PoolHours(n=n, hours=_hours(n, p["rate"]), hours_low=_hours(n, whi),
                               hours_high=_hours(n, wlo) if wlo is not None and wlo > 0 else None,
                               run_hours=_hours(n, p["mean"]), run_hours_low=_hours(n, phi),
                               run_hours_high=_hours(n, plo) if plo is not None and plo > 0 else None))
    return PoolRow(key=key, label=rows[0].label, concurrency=rows[0].concurrency, runs=first["runs"],
                   request_rate=first["rate"], within_low=lo, within_high=hi, run_mean=first["mean"], run_low=rlo,
                   run_high=rhi, run_rate_sd=first["sd"],
                   t=t_quantile_975(first["runs"] - 1) if first["runs"] >= 2 else None, per_run=runs, hours=hours,
                   disagree=_disagree(tags, first["figs"]))


def build_pool(run_dirs: Sequence[str | os.PathLike[str]]) -> PoolReport:
    """Pool the runs in ``run_dirs`` (module docstring).

    Raises:
        PoolError: fewer than 2 runs, the same run twice, runs of different profiles (by ``profile_name``), a run
            directory missing, a report unreadable, or no N common to the runs.
    """
    if len(run_dirs) < 2:
        raise PoolError(f"--pool needs at least 2 run directories (got {len(run_dirs)}): one run has no run-to-run "
                        "interval, and its own report already gives the within-run one")
    reports = [_load(d) for d in run_dirs]
    tags = run_tags(len(reports))
    ids = [r.run_id or str(Path(d).resolve()) for r, d in zip(reports, run_dirs, strict=True)]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise PoolError(f"the same run is given more than once ({', '.join(dup)}): counting it twice would narrow "
                        "the intervals falsely; give each run once")
    names = {str(r.profile_name) for r in reports}
    if len(names) > 1:
        raise PoolError("the runs ran different profiles (" + ", ".join(
            f"{t} {r.profile_name} ({d})" for t, r, d in zip(tags, reports, run_dirs, strict=True)) + "): --pool "
            "pools repeats of one profile; compare different ones with `llmload compare`")
    ns = [n for n in reports[0].hours_to_n if all(n in r.hours_to_n for r in reports[1:])]
    if not ns:
        raise PoolError("the runs have no hours-to-N count in common (rebuild their reports with the same --n)")
    notes: list[str] = []
    if len(reports) == 2:
        notes.append("Two runs: the run-to-run interval uses t(1) = 12.7 and is wide; 3 to 5 runs narrow it "
                     "(t(2) = 4.30, t(4) = 2.78).")
    keyed = [dict(zip(step_keys(r.steps), r.steps, strict=True)) for r in reports]
    order: list[str] = []
    for k in keyed:
        order += [key for key in k if key not in order]
    steps, unmatched = [], []
    for key in order:
        if not all(key in k for k in keyed):
            unmatched.append(key)
            continue
        row = _row(key, [k[key] for k in keyed], tags, ns)
        steps.append(row)
        if row.runs < len(reports):
            missing = [t for t, r in zip(tags, row.per_run, strict=True) if r.request_rate is None or not r.window_s]
            notes.append(f"{row.label}: run{'s' if len(missing) > 1 else ''} {', '.join(missing)} had no usable rate "
                         f"there (no usable completion or no steady window): pooled over {row.runs} of "
                         f"{len(reports)} runs.")
        if row.disagree:
            notes.append(f"{row.label}: runs {', '.join(row.disagree)} disagree beyond their intervals (their "
                         "within-run usable-rate intervals do not overlap): the within-run interval understates the "
                         "uncertainty here; read the run-to-run interval.")
    bare = [s.label for s in steps if s.within_low is None and s.request_rate is not None]
    if bare:
        notes.append(f"{', '.join(bare)}: a run has no within-run interval there (its report gave none), so the "
                     "pooled step has none either; the run-to-run interval is the only one.")
    if unmatched:
        notes.append(f"Steps not in every run (not pooled): {', '.join(unmatched)}.")
    runs = [{"tag": t, "run_id": r.run_id, "run_dir": str(d)} for t, r, d in zip(tags, reports, run_dirs,
                                                                                      strict=True)]
    return PoolReport(generated_wall=time.time(), profile_name=reports[0].profile_name, runs=runs, hours_to_n=ns,
                      steps=steps, unmatched=unmatched, notes=notes)


def _rate_iv(lo: float | None, hi: float | None) -> str:
    if lo is None and hi is None:
        return "–"
    f = FIGURES["request_rate"]
    return f"{display({'request_rate': lo}, f.key)}–{display({'request_rate': hi}, f.key)}"


def render_pool_markdown(pool: PoolReport) -> str:
    """``pool.md``: the runs, a table of the pooled usable rate (req/s, with both 95 % intervals, the between-run
    standard deviation and each run's rate) and one of hours to each N (pooled within-run and run-to-run
    intervals), the notes and definitions."""
    rate_h = FIGURES["request_rate"].header
    lines = [f"# Pooled runs: {pool.profile_name or '?'} ({len(pool.runs)} runs)", ""]
    lines += [f"- {r['tag']}: {r['run_id'] or '?'} (`{r['run_dir']}`)" for r in pool.runs]
    lines += ["", "## Usable rate", "",
              f"Pooled usable {rate_h} (all runs' windows) with the pooled within-run 95 % interval, and the mean "
              "of the runs' rates with the run-to-run 95 % t interval; see pool under Definitions.", ""]
    header = ["step", "runs", f"pooled {rate_h}", "within-run 95 %", f"mean of runs {rate_h}", "run-to-run 95 %",
              "between-run sd", *(f"{r['tag']} {rate_h}" for r in pool.runs), "disagree"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in pool.steps:
        cells = [s.label, str(s.runs), display(s, "request_rate"), _rate_iv(s.within_low, s.within_high),
                 display({"request_rate": s.run_mean}, "request_rate"), _rate_iv(s.run_low, s.run_high),
                 display({"request_rate": s.run_rate_sd}, "request_rate"),
                 *(display(r, "request_rate") for r in s.per_run),
                 ("runs " + ", ".join(s.disagree) + " beyond their intervals") if s.disagree else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Hours to N", "",
              "Each cell: pooled hours (pooled within-run 95 %) · mean-of-runs hours (run-to-run 95 %).", ""]
    header = ["step", *(hours_header(n) for n in pool.hours_to_n)]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for s in pool.steps:
        cells = [s.label]
        for h in s.hours:
            run = {"hours": h.run_hours, "hours_low": h.run_hours_low, "hours_high": h.run_hours_high}
            cells.append(f"{hours_text(h)} · {hours_text(run)}")
        lines.append("| " + " | ".join(cells) + " |")
    if pool.notes:
        lines += ["", "## Notes", "", *(f"- {n}" for n in pool.notes)]
    lines += ["", "## Definitions", "", *(f"- **{k}**: {v}" for k, v in pool.definitions.items())]
    return "\n".join(lines) + "\n"


def default_out_dir(pool: PoolReport) -> Path:
    """``pool-<first run id>-x<k>`` in the current directory."""
    first = pool.runs[0]["run_id"] or Path(pool.runs[0]["run_dir"]).resolve().name
    return Path(f"pool-{first}-x{len(pool.runs)}")


def write_pool(pool: PoolReport, out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``pool.md`` and ``pool.json`` into ``out_dir`` (created); return their paths. Raises OSError."""
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    data = pool.model_dump(mode="json", by_alias=True)
    texts = {"md": ("pool.md", render_pool_markdown(pool)),
             "json": ("pool.json", json.dumps(data, indent=2, allow_nan=False) + "\n")}
    out = {}
    for kind, (name, text) in texts.items():
        tmp = root / (name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(root / name)
        out[kind] = root / name
    return out


def run_pool(run_dirs: Sequence[str], out: str | None, as_json: bool, quiet: bool) -> int:
    """The ``--pool`` command: build, write, print (Markdown, or JSON with ``as_json``); the exit code: 0 done,
    2 bad input, 1 cannot write."""
    try:
        pool = build_pool(run_dirs)
    except PoolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        paths = write_pool(pool, Path(out) if out else default_out_dir(pool))
    except OSError as e:
        print(f"error: cannot write the pooled report: {e}", file=sys.stderr)
        return 1
    if not quiet:
        sys.stdout.write(paths["json" if as_json else "md"].read_text(encoding="utf-8"))
        print(f"wrote {paths['md']}, {paths['json']}", file=sys.stderr)
    return 0
