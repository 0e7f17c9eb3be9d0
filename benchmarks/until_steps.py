"""What ``steps.until`` costs or saves in step time against fixed step durations (run on demand).

Runs a profile (default ``profiles/sim-k26.yaml``: the built-in simulator, compressed time) twice, headless: as
written (fixed ``steps.duration``), then with ``steps.until: {margin, min, max}``; for every load step prints its
length (wall s, and real s at the profile's time scale) and the relative half-width of the usable rate's 95 %
interval over its steady window (``harness.report.interval.renewal_reward`` over the records, the same estimator
the margin check uses live), and for the until run whether and when the margin was reached.

    python benchmarks/until_steps.py [--profile profiles/sim-k26.yaml] [--margin 0.10] [--min 0] [--max 60]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.report.interval import cycle_frame, renewal_reward  # noqa: E402


def run(profile: dict[str, Any], out: Path) -> Path:
    """Run ``profile`` headless into ``out``; its run directory."""
    out.mkdir(parents=True, exist_ok=True)
    prof = out / "profile.yaml"
    profile = {**profile, "output": {**profile.get("output", {}), "dir": str(out / "runs")}}
    prof.write_text(yaml.safe_dump(profile))
    cmd = [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
           "--profile", str(prof), "--no-metrics"]
    subprocess.run(cmd, cwd=out, check=True, capture_output=True, timeout=1800)
    (run_dir,) = [p for p in (out / "runs").iterdir() if p.is_dir()]
    return run_dir


def steps(run_dir: Path) -> list[dict[str, Any]]:
    """Per load step: label, length (s), steady window (s), relative half-width over the window, until event."""
    rep = json.loads((run_dir / "report.json").read_text())
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines() if x.strip()]
    recs = [r for r in recs if r.get("phase") != "warmup"]
    frame = pl.DataFrame({"s": [r["start_wall"] for r in recs], "e": [r["start_wall"] + (r["e2e"] or 0) for r in recs],
                          "u": [r["user"] for r in recs], "y": [bool(r["usable"]) for r in recs]})
    cyc = cycle_frame(frame, "s", "e", "u", "y")
    events = {e["step"]: e for e in map(json.loads, (run_dir / "phases.jsonl").read_text().splitlines())
              if e.get("event") == "until"}
    out = []
    for r in rep["steps"]:
        if r["phase"] != "step":
            continue
        h = None
        if r["steady"]:
            h = renewal_reward(cyc, r["window_start_wall"], r["window_end_wall"]).rel_halfwidth()
        out.append({"label": r["label"], "length_s": r["duration_s"], "window_s": r["window_s"], "halfwidth": h,
                    "until": events.get(r["step"])})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default=str(ROOT / "profiles" / "sim-k26.yaml"))
    ap.add_argument("--margin", type=float, default=0.10)
    ap.add_argument("--min", type=float, default=0.0)
    ap.add_argument("--max", type=float, default=60.0)
    args = ap.parse_args()
    base = yaml.safe_load(Path(args.profile).read_text())
    scale = float((base.get("simulator") or {}).get("time_scale") or 1.0)
    until = {**base, "steps": {**base["steps"], "until": {"margin": args.margin, "min": args.min, "max": args.max,
                                                         "check_every": 1.0}}}
    with tempfile.TemporaryDirectory() as tmp:
        fixed = steps(run(base, Path(tmp) / "fixed"))
        held = steps(run(until, Path(tmp) / "until"))
    print(f"{args.profile}: fixed steps of {base['steps']['duration']} s vs steps.until margin {args.margin:g}, "
          f"min {args.min:g}, max {args.max:g} s (wall s; real s = wall / {scale:g})")
    print(f"{'step':>6} {'fixed s':>8} {'±% fixed':>9} {'until s':>8} {'±% until':>9} {'reached':>8} {'live ±%':>8}")
    tf = tu = 0.0
    for f, u in zip(fixed, held, strict=True):
        ev = u["until"] or {}
        def pct(h: float | None) -> str:
            return f"{100 * h:.1f}" if h is not None else "–"
        print(f"{f['label']:>6} {f['length_s']:8.1f} {pct(f['halfwidth']):>9} {u['length_s']:8.1f} "
              f"{pct(u['halfwidth']):>9} {ev.get('reached')!s:>8} {pct(ev.get('halfwidth')):>8}")
        tf += f["length_s"]
        tu += u["length_s"]
    print(f"{'total':>6} {tf:8.1f} {'':>9} {tu:8.1f}   ({tu - tf:+.1f} s wall, {(tu - tf) / scale:+.0f} s real, "
          f"{100 * (tu - tf) / tf:+.0f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
