"""``llmload panels``: its arguments and the command (:func:`main`)."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.panels.prometheus import QueryError, probe_prometheus, prometheus_label_values
from harness.panels.render import render_dashboard
from harness.panels.results import RenderResult
from harness.panels.rows import sections_of
from harness.panels.times import format_duration, parse_duration, parse_time

#: Prometheus refuses a range query of more than this many points per series (``(end - start) / step``).
MAX_POINTS = 11_000


def build_parser(prog: str = "llmload panels") -> argparse.ArgumentParser:
    """The argument parser of ``llmload panels``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Render the Grafana dashboard's panels (PNG, one per row) from the dashboard JSON's own PromQL "
        "against a real Prometheus. Not Grafana: matplotlib drawings of the query results, captioned as such.",
    )
    p.add_argument("--dashboard", metavar="FILE", help="dashboard JSON [the project's grafana/dashboards/llmload.json]")
    p.add_argument("--prometheus", default="http://127.0.0.1:9090", metavar="URL", help="Prometheus [%(default)s]")
    p.add_argument("--start", metavar="T", help="epoch seconds, ISO 8601 (UTC), now-15m or 'last 15 minutes' "
                   "[the dashboard's time.from, e.g. now-3h]")  # fmt: skip
    p.add_argument("--end", metavar="T", help="as --start [now]")
    p.add_argument("--last", metavar="DURATION", help="shorthand for --start now-DURATION --end now (15m, 2h)")
    p.add_argument("--model", help="the $model variable, a model of llmload_run_info in the range "
                   "[the only model there, else all: .*]")  # fmt: skip
    p.add_argument("--window", help="the $window (rate window) variable, e.g. 30s [the dashboard's current: 5m]")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="any other variable")
    p.add_argument("--step", metavar="S", help="query step (at least the range / 11000, Prometheus' limit) "
                   "[about 800 points, >= scrape]")  # fmt: skip
    p.add_argument(
        "--scrape-interval", metavar="S", help="for $__rate_interval [Prometheus' own global.scrape_interval]"
    )
    p.add_argument("--out", default="panels", metavar="DIR", help="output directory [%(default)s]")
    p.add_argument("--caption", help="text appended to each image's caption (which run, settings)")
    p.add_argument("--dpi", type=int, default=100, help="[%(default)s]")
    p.add_argument("--json", action="store_true", help="print the result (per panel and target) as JSON")
    p.add_argument("--require-data", action="store_true", help="exit 1 when a target returned no data")
    return p


def shipped_dashboard() -> Path:
    """The project's dashboard, ``grafana/dashboards/llmload.json`` next to the ``harness`` package (present in a
    checkout or an editable install, not in a wheel)."""
    import harness

    return Path(harness.__file__).resolve().parents[1] / "grafana" / "dashboards" / "llmload.json"


def load_dashboard(path: Path) -> dict[str, Any]:
    """The dashboard JSON at ``path``, parsed. Raises ValueError (naming the file and what is wrong) when it
    cannot be read, is not JSON, not a JSON object, or has no panels."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ValueError(f"--dashboard {path}: cannot read it: {e.strerror or e}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    if not isinstance(doc, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(doc), "a number")
        raise ValueError(f"{path}: expected a JSON object (a Grafana dashboard), got {kind}")
    panels = doc.get("panels")
    if panels is not None and not (isinstance(panels, list) and all(isinstance(p, dict) for p in panels)):
        raise ValueError(f'{path}: "panels" is not a list of panel objects')
    if not sections_of(doc):
        raise ValueError(f"{path}: no panels")
    return doc


def _duration(option: str, text: str) -> float:
    """A duration option's seconds; ValueError naming the option unless it parses and is at least 1 ms."""
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise ValueError(f"{option}: {e} (e.g. 30s, 5m, 1h30m)") from None
    if not seconds >= 0.001:
        raise ValueError(f"{option}: {text!r} is not a positive duration (at least 1ms)")
    return seconds


def _time(option: str, text: str, now: float) -> float:
    try:
        return parse_time(text, now)
    except ValueError as e:
        raise ValueError(f"{option}: {e}") from None


def _utc(t: float) -> str:
    return f"{datetime.fromtimestamp(t, UTC):%Y-%m-%d %H:%M:%S} UTC"


def _var(text: str) -> tuple[str, str]:
    name, eq, value = text.partition("=")
    if not eq or not name.strip().lstrip("$"):
        raise ValueError(f"--var {text!r}: --var expects NAME=VALUE (e.g. --var window=1m)")
    return name.strip().lstrip("$"), value


def _matches(value: str, models: list[str]) -> bool:
    """Whether the ``$model`` value (a regular expression in the dashboard's ``model=~"$model"``) selects any
    of ``models``."""
    if value in ("All", "$__all"):
        value = ".*"
    try:
        rx = re.compile(value)
    except re.error:
        return value in models
    return any(rx.fullmatch(m) for m in models)


def _choose_model(dashboard: dict[str, Any], url: str, given: str | None, option: str, start: float,
                  end: float) -> str | None:  # fmt: skip
    """The ``$model`` value: ``given`` when it selects a model of ``llmload_run_info`` in the range (ValueError
    listing those there otherwise), else the only model there (``None`` when there is not exactly one). No check
    for a dashboard without a ``model`` variable or a Prometheus that cannot list label values."""
    templating = dashboard.get("templating")
    variables = templating.get("list") if isinstance(templating, dict) else None
    if not (isinstance(variables, list) and any(isinstance(v, dict) and v.get("name") == "model" for v in variables)):
        return given
    try:
        models = prometheus_label_values(url, "model", "llmload_run_info", start, end)
    except QueryError as e:
        sys.stderr.write(f"llmload panels: note: could not list the models of llmload_run_info ({e})\n")
        return given
    span = f"{_utc(start)} – {_utc(end)}"
    if given is not None:
        if not _matches(given, models):
            if models:
                raise ValueError(f"{option} {given}: no such model in llmload_run_info over {span}; "
                                 f"there: {', '.join(models)}")  # fmt: skip
            raise ValueError(f"{option} {given}: no llmload_run_info series (no llmload run) in Prometheus over "
                             f"{span}: check --start/--end/--last")  # fmt: skip
        return given
    if not models:
        sys.stderr.write(f"llmload panels: note: no llmload_run_info series (no llmload run) in Prometheus over "
                         f"{span}; the llmload panels will have no data\n")  # fmt: skip
    return models[0] if len(models) == 1 else None


def _shown_path(path: str) -> str:
    """``path`` relative to the working directory when it is inside it (for the caption)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def main(argv: Sequence[str] | None = None) -> int:
    """``llmload panels``: render the dashboard's panels. Exit 0; 1 after drawing when Prometheus rejected a
    query (the panel shows the error) or, with ``--require-data``, a target returned no data; 2 (one line on
    stderr, nothing drawn) for bad arguments, an unreadable or invalid dashboard, a URL that is not a reachable
    Prometheus HTTP API, or a ``--model`` not in ``llmload_run_info`` over the range."""
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        res = _render(args)
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
            if name in res.annotation_errors:
                sys.stdout.write(f"    error: {res.annotation_errors[name]}\n")
        for img in res.images:
            sys.stdout.write(f"wrote {img} ({img.stat().st_size // 1024} KiB)\n")
    rejected = [p.title for p in res.panels if any(t.error for t in p.targets)]
    rejected += [f"annotation {name}" for name in res.annotation_errors]
    if rejected:
        sys.stderr.write(f"llmload panels: Prometheus rejected the queries of {len(rejected)} panel(s) (drawn with "
                         f"the error): {', '.join(rejected)}\n")  # fmt: skip
        return 1
    return 1 if args.require_data and res.without_data() else 0


def _render(args: argparse.Namespace) -> RenderResult:
    """Check ``args`` (ValueError naming the option or file), load the dashboard, probe Prometheus, render."""
    if args.last and (args.start or args.end):
        raise ValueError("--last conflicts with --start/--end: give --last DURATION or --start/--end, not both")
    if not re.match(r"https?://[^/]", args.prometheus):
        raise ValueError(f"--prometheus {args.prometheus}: expected an http:// or https:// URL")
    variables = dict(_var(v) for v in args.var)
    window = args.window if args.window is not None else variables.get("window")
    if window is not None:  # checked, and written as Prometheus writes durations (5 minutes -> 5m)
        variables["window"] = format_duration(_duration("--window" if args.window else "--var window", window))
    step = _duration("--step", args.step) if args.step is not None else None
    scrape = _duration("--scrape-interval", args.scrape_interval) if args.scrape_interval is not None else None
    if args.dashboard is not None:
        path = Path(args.dashboard)
    else:
        path = shipped_dashboard()
        if not path.is_file():
            raise ValueError(f"no --dashboard given and the project's dashboard is not at {path} (an install without "
                             "the source tree has no grafana/ folder): pass --dashboard FILE")  # fmt: skip
    dashboard = load_dashboard(path)

    now = time.time()
    t: dict[str, Any] = dashboard["time"] if isinstance(dashboard.get("time"), dict) else {}
    if args.last:
        start, end = now - _duration("--last", args.last), now
    else:
        start = _time(
            "--start" if args.start else f"{path}: time.from", args.start or str(t.get("from", "now-3h")), now
        )
        end = _time("--end" if args.end else f"{path}: time.to", args.end or str(t.get("to", "now")), now)
        if end <= start:
            raise ValueError(f"--start/--end: empty time range: {_utc(start)} is not before {_utc(end)}")
    if step is not None and (end - start) / step > MAX_POINTS:
        least = format_duration(math.ceil((end - start) / MAX_POINTS * 1000) / 1000)
        raise ValueError(f"--step {args.step}: {(end - start) / step:,.0f} points per series over the "
                         f"{format_duration(round(end - start))} range, Prometheus allows {MAX_POINTS:,}: "
                         f"use --step {least} or more, or a shorter range")  # fmt: skip

    probe_prometheus(args.prometheus)
    given = args.model if args.model is not None else variables.get("model")
    model = _choose_model(dashboard, args.prometheus, given, "--model" if args.model else "--var model", start, end)
    if model:
        variables["model"] = model
    return render_dashboard(
        dashboard, args.prometheus, start, end, variables, Path(args.out), step,
        scrape_interval=scrape, caption=args.caption, source=_shown_path(str(path)), dpi=args.dpi,
    )  # fmt: skip
