"""``llmload panels``: its arguments and the command (:func:`main`)."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

from harness.panels.prometheus import QueryError, prometheus_get
from harness.panels.render import DEFAULT_SOURCE, render_dashboard
from harness.panels.times import parse_duration, parse_time


def build_parser(prog: str = "llmload panels") -> argparse.ArgumentParser:
    """The argument parser of ``llmload panels``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Render the Grafana dashboard's panels (PNG, one per row) from the dashboard JSON's own PromQL "
        "against a real Prometheus. Not Grafana: matplotlib drawings of the query results, captioned as such.",
    )
    p.add_argument("--dashboard", default=DEFAULT_SOURCE, help="dashboard JSON [%(default)s]")
    p.add_argument("--prometheus", default="http://127.0.0.1:9090", metavar="URL", help="Prometheus [%(default)s]")
    p.add_argument("--start", metavar="T", help="epoch seconds, ISO 8601 (UTC), now-15m or 'last 15 minutes' "
                   "[the dashboard's time.from, e.g. now-3h]")  # fmt: skip
    p.add_argument("--end", metavar="T", help="as --start [now]")
    p.add_argument("--last", metavar="DURATION", help="shorthand for --start now-DURATION --end now (15m, 2h)")
    p.add_argument("--model", help="the $model variable [the only model in llmload_run_info, else all: .*]")
    p.add_argument("--window", help="the $window (rate window) variable, e.g. 30s [the dashboard's current: 5m]")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="any other variable")
    p.add_argument("--step", type=parse_duration, metavar="S", help="query step [about 800 points, >= scrape]")
    p.add_argument("--scrape-interval", type=parse_duration, metavar="S",
                   help="for $__rate_interval [Prometheus' own global.scrape_interval]")  # fmt: skip
    p.add_argument("--out", default="panels", metavar="DIR", help="output directory [%(default)s]")
    p.add_argument("--caption", help="text appended to each image's caption (which run, settings)")
    p.add_argument("--dpi", type=int, default=100, help="[%(default)s]")
    p.add_argument("--json", action="store_true", help="print the result (per panel and target) as JSON")
    p.add_argument("--require-data", action="store_true", help="exit 1 when a target returned no data")
    return p


def _only_model(prometheus_url: str) -> str | None:
    """The model label of llmload_run_info when Prometheus holds exactly one."""
    params = urllib.parse.urlencode({"match[]": "llmload_run_info"})
    try:
        models = prometheus_get(f"{prometheus_url.rstrip('/')}/api/v1/label/model/values?{params}", None, 10)
    except QueryError:
        return None
    return str(models[0]) if isinstance(models, list) and len(models) == 1 else None


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it is inside it (for the caption)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def main(argv: Sequence[str] | None = None) -> int:
    """``llmload panels``: render the dashboard's panels; exit 0, 1 (``--require-data`` and a target without
    data), 2 (bad arguments, unreadable dashboard, Prometheus unreachable)."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        dashboard = json.loads(Path(args.dashboard).read_text())
        now = time.time()
        t = dashboard.get("time") or {}
        if args.last:
            start, end = now - parse_duration(args.last), now
        else:
            start = parse_time(args.start or str(t.get("from", "now-3h")), now)
            end = parse_time(args.end or str(t.get("to", "now")), now)
        variables = dict(v.split("=", 1) for v in args.var)
        model = args.model or variables.get("model") or _only_model(args.prometheus)
        if model:
            variables["model"] = model
        if args.window:
            variables["window"] = args.window
        res = render_dashboard(
            dashboard, args.prometheus, start, end, variables, Path(args.out), args.step,
            scrape_interval=args.scrape_interval, caption=args.caption, source=_shown_path(args.dashboard),
            dpi=args.dpi,
        )  # fmt: skip
    except (OSError, ValueError) as e:
        sys.stderr.write(f"llmload panels: {e}\n")
        return 2
    except ImportError as e:
        sys.stderr.write(f"llmload panels needs matplotlib (pip install matplotlib): {e}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(res.to_dict(), indent=2) + "\n")
    else:
        for p in res.panels:
            got = sum(t.has_data for t in p.targets)
            errs = [t.error for t in p.targets if t.error]
            flag = "" if got == len(p.targets) else ("  NO DATA" if not got else "  partly no data")
            sys.stdout.write(f"{p.row[:24]:24}  {p.title[:44]:44}  {got}/{len(p.targets)} targets with data{flag}\n")
            for err in errs:
                sys.stdout.write(f"    error: {err}\n")
        for name, n in res.annotations.items():
            sys.stdout.write(f"annotation {name}: {n} markers\n")
        for img in res.images:
            sys.stdout.write(f"wrote {img} ({img.stat().st_size // 1024} KiB)\n")
    return 1 if args.require_data and res.without_data() else 0
