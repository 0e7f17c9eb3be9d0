"""Does the usable-rate interval cover? Repeats a sweep on the built-in simulator and checks every step's 95 %
interval against the simulator's long-run rate at that concurrency (issue 16 item 2).

Run (from the repository root; output under /tmp; each repeat is one headless ``locust -f locustfiles/k26.py``)::

    .venv/bin/python benchmarks/hours_coverage.py                          # sim-k26 twin x10, demo x10
    .venv/bin/python benchmarks/hours_coverage.py --profile demo --repeats 3 --step-duration 12
    .venv/bin/python benchmarks/hours_coverage.py --analyse /tmp/hours-coverage   # re-read finished runs

Per repeat ``i`` the profile is rewritten to a temporary YAML: ``simulator.seed = 1000 + i`` (independent output
lengths per repeat), ``simulator.time_scale`` / ``single_stream.duration`` / ``steps.duration`` /
``steps.concurrency`` as given, ``output.dir`` under ``--out``. Profiles (:data:`PROFILES`):

* ``sim-k26``: ``profiles/sim-k26.yaml`` at ``k26.yaml``'s step lengths (1,200 s steps, 900 s single stream, real
  time) compressed by ``--k26-time-scale`` (default 0.02: 24 s wall steps);
* ``demo``: ``profiles/demo.yaml`` as it is (30 s steps, time scale 1).

For every load step the interval checked is :meth:`harness.report.interval.RateEstimate.rate_bounds` (no ``n``:
the estimate's 95 % interval of the usable rate ``k / W``), computed here from the run's records exactly as the
report does (:func:`harness.report.columns.load_frame_run`, then :func:`~harness.report.interval.cycle_frame` and
:func:`~harness.report.interval.renewal_reward` over the report's own steady window ``window_start_wall`` ..
``window_end_wall``); its rate must equal the report's ``hours_interval.rate`` (asserted). When the report's
row carries a renewal-reward interval (``hours_interval.method == "renewal_reward"``) the two must agree (rate
and standard error to 1e-6 relative: asserted); when it carries batch means (today's report), its interval, if
any, is checked against the same truth and shown beside. The prediction interval for N (``rate_bounds(n)``) is
not checked: it contains the estimate's interval (so covers the long-run rate at least as often) and its own
target, the rate one future run of N samples achieves, is not observable here.

Truth (the long-run usable rate at C): leave-one-out, the mean rate of the OTHER repeats' steps at the same C
(each an independent run under the same preset, seed policy and machine), so a repeat is never part of its own
truth; its error is the standard error of that mean (sd / sqrt(R - 1)). Why not the simulator's analytic model:
the engine's step time is exact only on paper; the wall-clock engine on a loaded 2-core machine runs late
(:mod:`harness.sim.engine` catches up on deadlines but re-synchronises after lag), the client adds its own
round-trip between a user's requests, and the demo truncates a prompt class; the repeats themselves measure what
this machine's simulator really does. The analytic figure ``C x usable share / mean cycle`` (cycle = prefill +
tokens x step(C)) is printed beside the truth as a check of the model's bias (``model`` column).

Exit status: 1 when any step with C >= 8 has fewer than 9/10 of its repeats covered (a repeat without an interval
counts as not covered), 2 on a failed run or a disagreement with the report; else 0. A summary is written to
``<out>/coverage.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.report.columns import load_frame_run  # noqa: E402
from harness.report.exprs import END, START, USABLE, WARMUP  # noqa: E402
from harness.report.interval import cycle_frame, renewal_reward  # noqa: E402
from harness.report.model import load_report  # noqa: E402
from harness.sim.presets import get_preset  # noqa: E402

#: Coverage required per step with C >= MIN_C (9 of 10).
REQUIRED = 0.9
MIN_C = 8
#: Relative tolerance of the agreement between this recomputation and the report's renewal-reward interval.
AGREE_RTOL = 1e-6


@dataclass
class ProfileSpec:
    """One profile of the benchmark: its YAML and the overrides (seconds are wall seconds)."""

    name: str
    path: Path
    time_scale: float | None = None
    single_stream_s: float | None = None
    step_s: float | None = None
    concurrency: list[int] | None = None
    sim_args: list[str] = field(default_factory=list)


#: sim-k26 at k26.yaml's lengths: 1,200 s steps and 900 s single stream, real time (scaled by --k26-time-scale).
K26_STEP_REAL_S = 1200.0
K26_SINGLE_REAL_S = 900.0


def profiles(args: argparse.Namespace) -> list[ProfileSpec]:
    """The profiles to run from the command line (see the module docstring)."""
    out: list[ProfileSpec] = []
    conc = [int(c) for c in args.steps.split(",")] if args.steps else None
    for name in args.profile:
        if name == "sim-k26":
            ts = args.k26_time_scale
            out.append(ProfileSpec(name, ROOT / "profiles/sim-k26.yaml", ts,
                                   args.single_stream_duration if args.single_stream_duration is not None
                                   else K26_SINGLE_REAL_S * ts,
                                   args.step_duration or K26_STEP_REAL_S * ts, conc,
                                   ["--tokens-per-chunk", str(args.k26_tokens_per_chunk)]))
        elif name == "demo":
            out.append(ProfileSpec(name, ROOT / "profiles/demo.yaml", None, args.single_stream_duration,
                                   args.step_duration, conc))
        else:
            raise SystemExit(f"unknown profile {name!r}: sim-k26 or demo")
    return out


def write_profile(spec: ProfileSpec, repeat: int, out_dir: Path) -> Path:
    """The repeat's profile YAML (``<out_dir>/profile.yaml``), its runs under ``<out_dir>/runs``."""
    d: dict[str, Any] = yaml.safe_load(spec.path.read_text())
    d.setdefault("simulator", {})["seed"] = 1000 + repeat
    if spec.time_scale is not None:
        d["simulator"]["time_scale"] = spec.time_scale
    if spec.sim_args:
        d["simulator"]["args"] = [*d["simulator"].get("args", []), *spec.sim_args]
    if spec.single_stream_s is not None:
        d.setdefault("single_stream", {})["duration"] = spec.single_stream_s
    if spec.step_s is not None:
        d["steps"]["duration"] = spec.step_s
    if spec.concurrency is not None:
        d["steps"]["concurrency"] = spec.concurrency
    d.setdefault("output", {})["dir"] = str(out_dir / "runs")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "profile.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def run_once(profile_yaml: Path, log: Path, timeout_s: float) -> int:
    """One headless sweep (``locust -f locustfiles/k26.py --headless --profile``); returns its exit status."""
    locust = Path(sys.executable).parent / "locust"
    cmd = [str(locust), "-f", str(ROOT / "locustfiles/k26.py"), "--headless", "--profile", str(profile_yaml)]
    with log.open("w") as fh:
        try:
            return subprocess.run(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s).returncode
        except subprocess.TimeoutExpired:
            fh.write(f"\nTIMEOUT after {timeout_s} s\n")
            return 124


@dataclass
class StepResult:
    """One load step of one repeat: the recomputed interval (usable samples per WALL second) and the report's."""

    profile: str
    repeat: int
    concurrency: int
    steady: bool
    window_s: float
    rate: float
    low: float | None
    high: float | None
    rel_halfwidth: float | None
    reason: str | None
    report_method: str
    report_low: float | None = None
    report_high: float | None = None
    starved: bool | None = None
    read_lag_p99_s: float | None = None
    usable_share: float | None = None
    e2e_mean_s: float | None = None
    mean_output_tokens: float | None = None
    time_scale: float = 1.0


def analyse_run(run_dir: Path, profile: str, repeat: int) -> list[StepResult]:
    """The load steps of one finished run: each with its interval recomputed from the records over the report's
    window, checked against the report's own when that is renewal-reward.

    Raises:
        AssertionError: the report's renewal-reward interval differs from the recomputation.
    """
    report = load_report(run_dir)
    run = load_frame_run(run_dir)
    frame = run.frame.filter(~pl.col(WARMUP))
    cycles = cycle_frame(frame, START, END, "user", USABLE)
    ts = float(report.time_scale or 1.0)
    out: list[StepResult] = []
    for row in report.steps:
        if row.phase != "step" or row.window_start_wall is None or row.window_end_wall is None:
            continue
        est = renewal_reward(cycles, float(row.window_start_wall), float(row.window_end_wall))
        lo, hi = est.rate_bounds()
        hi_ = row.hours_interval
        res = StepResult(profile, repeat, row.concurrency, row.steady, est.window_s, est.rate, lo if hi else None,
                         hi, est.rel_halfwidth(), est.reason, hi_.method, starved=row.client_starved,
                         read_lag_p99_s=_f(row.client_read_lag_p99_s), usable_share=_f(row.usable_share),
                         e2e_mean_s=_f(row.e2e_mean_s), mean_output_tokens=_f(row.mean_output_tokens),
                         time_scale=ts)
        # the point estimate k / W is the report's whatever its method: the recomputation uses the report's sample
        assert hi_.rate is None or math.isclose(float(hi_.rate), est.rate, rel_tol=AGREE_RTOL), (
            f"{run_dir} C={row.concurrency}: report rate {hi_.rate} != recomputed {est.rate}")
        if hi_.rate is not None and hi_.rate_se is not None and hi_.t is not None:
            half = float(hi_.t) * float(hi_.rate_se)
            res.report_low, res.report_high = max(0.0, float(hi_.rate) - half), float(hi_.rate) + half
            if hi_.method == "renewal_reward":
                assert est.se is not None and math.isclose(float(hi_.rate), est.rate, rel_tol=AGREE_RTOL) and \
                    math.isclose(float(hi_.rate_se), est.se, rel_tol=AGREE_RTOL), (
                        f"{run_dir} C={row.concurrency}: report rate {hi_.rate} ± SE {hi_.rate_se} != recomputed "
                        f"{est.rate} ± {est.se}")
        out.append(res)
    return out


def _f(x: Any) -> float | None:
    return None if x is None else float(x)


def model_rate(preset_name: str, c: int, usable_share: float | None, e2e_mean_s: float | None,
               mean_tokens: float | None, time_scale: float) -> float | None:
    """The analytic usable rate (per wall second) at C from the preset's step time and the run's mean output
    tokens: ``C x usable share / (prefill + tokens x step(C))``, time-scaled; None without the inputs."""
    if usable_share is None or mean_tokens is None:
        return None
    p = get_preset(preset_name)
    cycle = (p.prefill_base + mean_tokens * p.step_seconds(c)) * time_scale
    return c * usable_share / cycle if cycle > 0 else None


@dataclass
class Cell:
    """The coverage of one (profile, C) over its repeats (rates in usable samples per REAL hour)."""

    profile: str
    concurrency: int
    runs: int
    with_interval: int
    covered: int
    median_rel_halfwidth: float | None
    truth_per_h: float
    truth_se_per_h: float
    model_per_h: float | None
    batch_means_intervals: int
    batch_means_covered: int
    not_steady: int
    starved: int
    max_read_lag_p99_s: float | None
    misses: list[dict[str, Any]] = field(default_factory=list)
    #: the same count over the repeats whose step the report did NOT flag client-STARVED, truth from those only
    clean_runs: int = 0
    clean_covered: int = 0


def _loo_covered(rs: list[StepResult]) -> tuple[int, list[dict[str, Any]]]:
    """How many of ``rs`` have an interval holding the mean rate of the others (leave-one-out), and the misses."""
    covered = 0
    misses: list[dict[str, Any]] = []
    for i, r in enumerate(rs):
        others = [o.rate for j, o in enumerate(rs) if j != i]
        if not others or r.low is None or r.high is None:
            continue
        truth = statistics.fmean(others)
        if r.low <= truth <= r.high:
            covered += 1
        else:
            misses.append({"repeat": r.repeat, "rate": r.rate, "low": r.low, "high": r.high, "truth": truth,
                           "starved": r.starved})
    return covered, misses


def cells(results: list[StepResult], presets: dict[str, str]) -> list[Cell]:
    """Coverage per (profile, C), with the leave-one-out truth (see the module docstring)."""
    out: list[Cell] = []
    keys = sorted({(r.profile, r.concurrency) for r in results})
    for prof, c in keys:
        rs = [r for r in results if r.profile == prof and r.concurrency == c]
        with_iv = sum(r.low is not None and r.high is not None for r in rs)
        covered, misses = _loo_covered(rs)
        clean = [r for r in rs if not r.starved]
        clean_covered, _ = _loo_covered(clean)
        bm = bm_cov = 0
        for i, r in enumerate(rs):
            if r.report_method == "batch_means" and r.report_low is not None and r.report_high is not None:
                truth = statistics.fmean(o.rate for j, o in enumerate(rs) if j != i)
                bm += 1
                bm_cov += r.report_low <= truth <= r.report_high
        ts = rs[0].time_scale
        per_h = 3600.0 * ts  # per wall second -> per real (simulated) hour: a wall second is 1 / ts real seconds
        rates = [r.rate for r in rs]
        truth_all = statistics.fmean(rates)
        se = statistics.stdev(rates) / math.sqrt(len(rates) - 1) if len(rates) > 2 else float("nan")
        hws = [r.rel_halfwidth for r in rs if r.rel_halfwidth is not None]
        models = [model_rate(presets[prof], c, r.usable_share, r.e2e_mean_s, r.mean_output_tokens, ts) for r in rs]
        mvals = [m for m in models if m is not None]
        lags = [r.read_lag_p99_s for r in rs if r.read_lag_p99_s is not None]
        out.append(Cell(prof, c, len(rs), with_iv, covered, statistics.median(hws) if hws else None,
                        truth_all * per_h, se * per_h, statistics.fmean(mvals) * per_h if mvals else None, bm, bm_cov,
                        sum(not r.steady for r in rs), sum(bool(r.starved) for r in rs), max(lags) if lags else None,
                        misses, len(clean), clean_covered))
    return out


def failing(table: list[Cell]) -> list[Cell]:
    """The cells with C >= MIN_C covered in fewer than REQUIRED of their runs."""
    return [c for c in table if c.concurrency >= MIN_C and c.covered < REQUIRED * c.runs]


def render(table: list[Cell]) -> str:
    """The coverage table as text (rates in usable samples per real hour)."""
    head = (f"{'profile':<8} {'C':>3} {'interval':>8} {'covered':>8} {'med ±%':>7} {'truth/h (LOO mean)':>22} "
            f"{'model/h':>9} {'batch means cov':>15} {'starved':>7} {'lag p99':>7} {'not starved: cov':>16}")
    lines = [head, "-" * len(head)]
    for c in table:
        hw = f"{100 * c.median_rel_halfwidth:.1f}" if c.median_rel_halfwidth is not None else "-"
        model = f"{c.model_per_h:,.0f}" if c.model_per_h is not None else "-"
        lag = f"{c.max_read_lag_p99_s:.3f}" if c.max_read_lag_p99_s is not None else "-"
        lines.append(
            f"{c.profile:<8} {c.concurrency:>3} {c.with_interval:>4}/{c.runs:<3} {c.covered:>4}/{c.runs:<3} {hw:>7} "
            f"{c.truth_per_h:>12,.1f} ± {c.truth_se_per_h:>7,.1f} {model:>9} "
            f"{c.batch_means_covered:>6}/{c.batch_means_intervals:<8} {c.starved:>7} {lag:>7} "
            f"{c.clean_covered:>9}/{c.clean_runs:<6}")
    return "\n".join(lines)


def collect(out: Path) -> tuple[list[StepResult], list[str]]:
    """Every finished run under ``out`` (``<profile>/rep-<i>/runs/<run>``), analysed; and the problems seen."""
    results: list[StepResult] = []
    problems: list[str] = []
    for rep_dir in sorted(out.glob("*/rep-*")):
        prof, repeat = rep_dir.parent.name, int(rep_dir.name.split("-")[1])
        runs = sorted(p.parent for p in (rep_dir / "runs").glob("*/report.json"))
        if len(runs) != 1:
            problems.append(f"{rep_dir}: {len(runs)} runs with a report.json (expected 1)")
            continue
        try:
            results.extend(analyse_run(runs[0], prof, repeat))
        except AssertionError as e:
            problems.append(f"DISAGREE {e}")
    return results, problems


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or re-analyse ``--analyse DIR``); print the table; the exit status of the docstring."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", action="append", choices=["sim-k26", "demo"],
                    help="profile(s) to run, in order (default: sim-k26 then demo)")
    ap.add_argument("--repeats", type=int, default=10, help="repeats per profile (default 10)")
    ap.add_argument("--k26-time-scale", type=float, default=0.02, help="sim-k26's time scale (default 0.02)")
    ap.add_argument("--k26-tokens-per-chunk", type=int, default=8,
                    help="sim-k26's simulator --tokens-per-chunk (default 8: an eighth of the chunks to read)")
    ap.add_argument("--step-duration", type=float, default=None, help="override: wall seconds per step")
    ap.add_argument("--single-stream-duration", type=float, default=None, help="override: wall s of single stream")
    ap.add_argument("--steps", default="", help="override: concurrencies, e.g. 8,16")
    ap.add_argument("--out", type=Path, default=Path("/tmp/hours-coverage"), help="output directory")
    ap.add_argument("--timeout", type=float, default=900.0, help="wall seconds allowed per run")
    ap.add_argument("--analyse", type=Path, default=None, help="only analyse the runs under this directory")
    args = ap.parse_args(argv)
    args.profile = args.profile or ["sim-k26", "demo"]
    out: Path = args.analyse or args.out
    failed_runs: list[str] = []
    if args.analyse is None:
        for spec in profiles(args):
            for i in range(args.repeats):
                rep = out / spec.name / f"rep-{i}"
                path = write_profile(spec, i, rep)
                t0 = time.monotonic()
                rc = run_once(path, rep / "locust.log", args.timeout)
                print(f"{spec.name} repeat {i}: exit {rc} in {time.monotonic() - t0:.0f} s", flush=True)
                if rc != 0:
                    failed_runs.append(f"{rep}: locust exit {rc} (see locust.log)")
    results, problems = collect(out)
    presets = {"sim-k26": "k26", "demo": "demo"}
    table = cells(results, presets)
    print(render(table))
    bad = failing(table)
    summary = {"cells": [asdict(c) for c in table], "steps": [asdict(r) for r in results],
               "problems": problems + failed_runs, "failing": [(c.profile, c.concurrency) for c in bad]}
    (out / "coverage.json").write_text(json.dumps(summary, indent=1))
    for p in problems + failed_runs:
        print("PROBLEM:", p)
    for c in bad:
        print(f"FAIL: {c.profile} C={c.concurrency} covered {c.covered}/{c.runs} (needs {REQUIRED:.0%})")
    if problems or failed_runs:
        return 2
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
