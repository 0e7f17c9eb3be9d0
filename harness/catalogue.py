"""The exporter's metric families, in one table: name, type, help, labels, unit (and, for a histogram, the record
field it observes and its bucket bounds; for a percentile gauge, its record field).

:data:`FAMILIES` is the one definition. :mod:`harness.exporter` builds every family it serves from it,
:mod:`harness.metrics` counts the record-derived counters, histograms and percentile gauges it lists
(:data:`RECORD_COUNTERS`, :data:`HISTOGRAMS`, :data:`PERCENTILE_GAUGES`, over :data:`PERCENTILE_WINDOWS`), and
the metric lists of the exporter's docstring and of the docs are generated from it (:func:`markdown_table`,
:func:`rst_list`; the docs site's build fills ``docs/reference/prometheus-metrics.md`` with the table through
:mod:`harness.docs_ref`, ``python -m harness.catalogue FILE.md`` rewrites the table between markers in any
Markdown file, and tests/test_catalogue.py checks both).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FAMILIES",
    "HISTOGRAMS",
    "HIST_LABELS",
    "LAG_BUCKETS",
    "PERCENTILES",
    "PERCENTILE_GAUGES",
    "PERCENTILE_LABELS",
    "PERCENTILE_WINDOWS",
    "RECORD_COUNTERS",
    "TIME_BUCKETS",
    "TOKEN_BUCKETS",
    "Family",
    "markdown_table",
    "replace_table",
    "rst_list",
]


def _decades(lo_exp: int, hi_exp: int) -> list[float]:
    """1, 1.5, 2, 3, 5, 7.5 times each power of ten from 10**lo_exp to 10**hi_exp."""
    out = []
    for e in range(lo_exp, hi_exp + 1):
        for m in (1.0, 1.5, 2.0, 3.0, 5.0, 7.5):
            out.append(float(f"{m}e{e}"))  # exact decimal literals (0.0075, not 0.0075000000000000001)
    return out


#: Upper bounds (seconds) of every time histogram: 1 ms to 2 h, consecutive bounds at most x1.67 apart up to
#: 1000 s (so histogram_quantile() interpolates within a narrow bucket), then 1500 s ... 7200 s.
TIME_BUCKETS: tuple[float, ...] = (*_decades(-3, 2), 1000.0, 1500.0, 2000.0, 3000.0, 5000.0, 7200.0)
#: Upper bounds (tokens) of the output-tokens-per-request histogram: powers of two, 1 to 131072.
TOKEN_BUCKETS: tuple[float, ...] = tuple(float(2**i) for i in range(18))
#: Upper bounds (seconds) of the client read-lag histogram: 0.1 ms to 60 s (a healthy client reads within a few
#: ms of arrival, p99 2-3 ms measured; above ``harness.clientlag.CLIENT_LAG_LIMIT_S`` = 0.1 s it is starved).
LAG_BUCKETS: tuple[float, ...] = (
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0
)  # fmt: skip

_BASE = ("model", "phase", "concurrency", "prompt")
#: Labels of every histogram. No ``prompt``: their series per label set (45 for a time histogram, 21 for output
#: tokens and read lag) would multiply by the prompt classes (records and the report keep per-prompt latency).
#: Their series: phases x outcomes x (5 x 45 + 2 x 21) at most.
HIST_LABELS: tuple[str, ...] = ("model", "phase", "concurrency", "outcome")

#: Windows of the percentile gauges: label value -> seconds. They are the dashboard's ``$window`` options, so a
#: panel reads ``window="$window"`` (tests/test_dashboard_schema.py checks they agree).
PERCENTILE_WINDOWS: dict[str, float] = {"1m": 60.0, "2m": 120.0, "5m": 300.0, "10m": 600.0, "30m": 1800.0}
#: Percentiles (0..100) of every percentile gauge; the ``percentile`` label is the integer: ``50``, ``90`` ...
#: (not a ``quantile`` label: Prometheus reserves that for summaries, and ``promtool check metrics`` says so).
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
#: Labels of every percentile gauge: one series per window and percentile (5 x 4 = 20 per gauge, from the first
#: scrape to the last: NaN while a window holds no request).
PERCENTILE_LABELS: tuple[str, ...] = ("model", "window", "percentile")


@dataclass(frozen=True)
class Family:
    """One metric family of the exporter.

    Attributes:
        name: the family name (``prometheus_client`` adds ``_total`` to a counter's samples, ``_info`` to an
            info's, ``_bucket`` / ``_sum`` / ``_count`` to a histogram's).
        type: ``counter`` | ``histogram`` | ``gauge`` | ``info``.
        help: the HELP text served.
        labels: label names, ``model`` first (an info family: the keys of its one sample).
        unit: what a value (or a histogram observation) counts: ``seconds``, ``tokens``, ``requests``,
            ``requests/s``, ``users``, ``workers``, ``scrapes``, or ``1`` (an index or a constant).
        source: ``records`` (counted from the request records by :class:`harness.metrics.RunMetrics`), ``live``
            (the run's state at scrape time) or ``self`` (the exporter's own work).
        field: a histogram's or percentile gauge's record field (``gap_hist``: a record's gap histogram, every gap
            observed).
        buckets: a histogram's upper bounds (``+Inf`` implied).
        note: a sentence for the docs' metric table after ``help``.
    """

    name: str
    type: str
    help: str
    labels: tuple[str, ...]
    unit: str
    source: str = "records"
    field: str = ""
    buckets: tuple[float, ...] = ()
    note: str = ""

    @property
    def shown(self) -> str:
        """The name people query: a counter's ``_total``, an info's ``_info``, a histogram's or gauge's name."""
        return self.name if self.type == "histogram" else self.samples[0]

    @property
    def samples(self) -> tuple[str, ...]:
        """The sample names it exposes in the text format."""
        if self.type == "counter":
            return (self.name + "_total",)
        if self.type == "info":
            return (self.name + "_info",)
        if self.type == "histogram":
            return tuple(self.name + s for s in ("_bucket", "_sum", "_count"))
        return (self.name,)


def _hist(name: str, fld: str, buckets: tuple[float, ...], unit: str, help: str, note: str = "") -> Family:
    return Family(name, "histogram", help, HIST_LABELS, unit, field=fld, buckets=buckets, note=note)


def _percentile(hist: str, what: str) -> Family:
    """The percentile gauge of the time histogram ``hist`` (same record field): ``..._percentile_seconds``."""
    h = next(f for f in _HISTS if f.name == hist)
    return Family(
        hist.removesuffix("_seconds") + "_percentile_seconds",
        "gauge",
        f"{what} percentiles ({', '.join(map(str, PERCENTILES))}) of the successful (usable or truncated) "
        f"non-warm-up requests that ended in the last window ({', '.join(PERCENTILE_WINDOWS)}), from the "
        "records: the report's percentile definition, within 0.5 %. NaN while the window holds none.",
        PERCENTILE_LABELS,
        "seconds",
        field=h.field,
        note=f"The dashboard's source; `histogram_quantile()` over `{hist}` is up to ~30 % off (6 buckets a decade).",
    )


def _live(name: str, help: str, labels: tuple[str, ...], unit: str, note: str = "") -> Family:
    return Family(name, "gauge", help, ("model", *labels), unit, source="live", note=note)


_HISTS: tuple[Family, ...] = (
    _hist(
        "llmload_time_to_first_token_seconds",
        "ttft",
        TIME_BUCKETS,
        "seconds",
        "TTFT: request sent -> first token-bearing chunk of any channel (reasoning included).",
    ),
    _hist(
        "llmload_time_to_first_answer_token_seconds",
        "ttfat",
        TIME_BUCKETS,
        "seconds",
        "TTFAT: request sent -> first chunk with answer content (requests whose answer started).",
    ),
    _hist(
        "llmload_inter_chunk_latency_seconds",
        "gap_hist",
        TIME_BUCKETS,
        "seconds",
        "Gaps between consecutive token-bearing chunks (vLLM bench's ITL). Each gap is placed by its 1 % "
        "log-bucket value from the record's gap histogram; count and sum are exact.",
    ),
    _hist(
        "llmload_time_per_output_token_seconds",
        "tpot",
        TIME_BUCKETS,
        "seconds",
        "TPOT: (last token-bearing chunk - first) / (streamed tokens - 1), per request; streamed tokens = answer "
        "tokens with hidden reasoning, else output tokens.",
    ),
    _hist(
        "llmload_request_duration_seconds",
        "e2e",
        TIME_BUCKETS,
        "seconds",
        "E2E latency: request sent -> last byte of the stream.",
    ),
    _hist(
        "llmload_request_output_tokens",
        "output_tokens",
        TOKEN_BUCKETS,
        "tokens",
        "Output tokens per completed request.",
    ),
    _hist(
        "llmload_client_read_lag_seconds",
        "read_lag_max",
        LAG_BUCKETS,
        "seconds",
        "Client read lag per request: the largest (time this process read response bytes - kernel receive time "
        "of those bytes). Plain HTTP on Linux only. Above 0.1 s the load generator is starved of CPU.",
        note="Load-generator health: see the client read lag in the report.",
    ),
)

_PERCENTILE_GAUGES: tuple[Family, ...] = (
    _percentile("llmload_time_to_first_token_seconds", "TTFT"),
    _percentile("llmload_time_to_first_answer_token_seconds", "TTFAT"),
    _percentile("llmload_inter_chunk_latency_seconds", "Inter-chunk latency"),
    _percentile("llmload_time_per_output_token_seconds", "TPOT"),
    _percentile("llmload_request_duration_seconds", "E2E latency"),
)

_TABLE: tuple[Family, ...] = (
    Family(
        "llmload_requests",
        "counter",
        "Completed requests (success or failure) by outcome (usable, truncated, unusable: failed a profile usable "
        "check, error) and finish_reason.",
        (*_BASE, "outcome", "finish_reason"),
        "requests",
    ),
    Family("llmload_request_errors", "counter", "Failed requests by error class.", (*_BASE, "error_class"), "requests"),
    Family(
        "llmload_truncated_requests",
        "counter",
        "Truncated requests (finish_reason length, or output tokens >= max_tokens), by the channel that was "
        "cut: kind=reasoning when no answer token was streamed (truncated in reasoning), else answer.",
        (*_BASE, "kind"),
        "requests",
    ),
    Family(
        "llmload_output_tokens",
        "counter",
        "Output tokens of completed requests (usage.completion_tokens, or the client estimate), split into "
        "reasoning and answer tokens. Failed requests' partial tokens are counted with outcome=error.",
        (*_BASE, "outcome", "kind"),
        "tokens",
    ),
    Family(
        "llmload_prompt_tokens",
        "counter",
        "Prompt tokens (usage.prompt_tokens) of completed requests.",
        (*_BASE, "outcome"),
        "tokens",
    ),
    *_HISTS,
    *_PERCENTILE_GAUGES,
    _live("llmload_users", "Locust users running now (all workers).", (), "users"),
    _live("llmload_requests_in_flight", "Requests sent and not yet ended (all workers).", (), "requests"),
    _live(
        "llmload_target_users",
        "Concurrency the load shape asks for now: the current step's target (1 during warm-up and the "
        "single-stream phase), 0 after the last step.",
        (),
        "users",
    ),
    _live(
        "llmload_target_requests_per_second",
        "Request rate the current open-loop rate step asks for (rate.rates), requests per second; absent in a "
        "closed-loop phase and after the last step.",
        (),
        "requests/s",
        note="The alert LlmloadOpenLoopTargetMissed compares it with the completion rate (docs/guides/alerts.md).",
    ),
    _live(
        "llmload_workers_lost",
        "Locust workers lost during the current run (missing heartbeats, or quit) and not back: the "
        "worker_lost events of phases.jsonl less the worker_back ones. 0 in a single-process run.",
        (),
        "workers",
        note="Their requests in flight are not recorded (run.json cut_off); the report marks the steps not steady.",
    ),
    _live(
        "llmload_client_cpu_share",
        "CPU share of one core used by each load-generating process (the single process, or each worker) in the "
        "current step so far: its CPU seconds between its first and latest client_cpu sample of the step ÷ the wall "
        "seconds between them (samples at phase starts, the load's end and every 5 s on a worker).",
        ("process",),
        "1",
        note="The report's self-certification (client CPU, per step) is the same share over the whole step.",
    ),
    _live("llmload_step", "Index of the current step (-1 warm-up, 0 single stream, 1.. steps).", (), "1"),
    _live(
        "llmload_step_start_time_seconds",
        "Wall-clock start (Unix seconds) of the current phase; its labels name the phase (step markers).",
        ("phase", "step", "concurrency"),
        "seconds",
    ),
    _live(
        "llmload_step_rate_halfwidth_ratio",
        "Relative half-width of the current step's usable-rate 95 % interval (t * SE / rate; 0.05 = within 5 %), "
        "computed live by `steps.until` every `check_every` seconds over the step's steady window so far.",
        (),
        "1",
        note="Only with `steps.until`; absent while the step has no interval yet.",
    ),
    _live(
        "llmload_estimated_time_to_samples_seconds",
        "Live estimate of the time to N usable samples at each step's concurrency: N / (usable completions "
        "per second in the step's steady window so far), in real-time seconds (a compressed-time simulator run: wall "
        "seconds ÷ time_scale). The report's hours-to-N is authoritative.",
        ("n", "step", "concurrency"),
        "seconds",
        note="Only for the profile's first `report.hours_to_n` (the report has them all).",
    ),
    Family(
        "llmload_run",
        "info",
        "The run: profile, target URL (host), machine, run id, simulator time scale (1: real time), versions.",
        ("model", "profile", "host", "hostname", "run", "time_scale", "version", "locust_version"),
        "1",
        source="live",
        note="One sample, value 1.",
    ),
    Family(
        "llmload_exporter_scrapes",
        "counter",
        "Scrapes of this exporter (this one included).",
        ("model",),
        "scrapes",
        source="self",
    ),
    Family(
        "llmload_exporter_scrape_cpu_seconds",
        "counter",
        "CPU seconds (thread time) the exporter spent producing /metrics responses: collect, serialization, "
        "compression; includes this scrape so far.",
        ("model",),
        "seconds",
        source="self",
        note="0 when the collector is not served by an `Exporter`.",
    ),
)

#: Every family, by name, in exposition order.
FAMILIES: dict[str, Family] = {f.name: f for f in _TABLE}
#: The counters computed from request records: name -> (label names, help).
RECORD_COUNTERS: dict[str, tuple[tuple[str, ...], str]] = {
    f.name: (f.labels, f.help) for f in _TABLE if f.type == "counter" and f.source == "records"
}
#: The histograms computed from request records: name -> (record field, bounds, help). Labels: :data:`HIST_LABELS`.
HISTOGRAMS: dict[str, tuple[str, tuple[float, ...], str]] = {
    f.name: (f.field, f.buckets, f.help) for f in _TABLE if f.type == "histogram"
}
#: The percentile gauges computed from request records: name -> record field. Labels: :data:`PERCENTILE_LABELS`.
PERCENTILE_GAUGES: dict[str, str] = {f.name: f.field for f in _TABLE if f.type == "gauge" and f.source == "records"}


def _bound(v: float, unit: str) -> str:
    """A bucket bound for people: ``1 ms``, ``0.1 ms``, ``60 s``, ``2 h``; tokens as integers."""
    if unit != "seconds":
        return f"{v:g}"
    if v < 1:
        return f"{v * 1000:g} ms"
    if v >= 3600 and v % 3600 == 0:
        return f"{v / 3600:g} h"
    return f"{v:g} s"


def _type(f: Family) -> str:
    if f.type == "histogram":
        return f"histogram, {_bound(f.buckets[0], f.unit)} to {_bound(f.buckets[-1], f.unit)}"
    return f.type


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    """The docs' metric table (Markdown, one row per family, newline-terminated)."""
    rows = [
        "| metric | type | unit | labels (all have `model`) | meaning |",
        "|---|---|---|---|---|",
    ]
    for f in _TABLE:
        labels = ", ".join(f"`{lb}`" for lb in f.labels if lb != "model")
        meaning = _md(f"{f.help} {f.note}".strip())
        rows.append(f"| `{f.shown}` | {_type(f)} | {f.unit} | {labels} | {meaning} |")
    return "\n".join(rows) + "\n"


def rst_list() -> str:
    """The exporter docstring's metric list (reStructuredText bullets, one per family)."""
    out = []
    for f in _TABLE:
        labels = ",".join(f.labels)
        out.append(f"* ``{f.shown}{{{labels}}}`` ({_type(f)}, {f.unit})")
    return "\n".join(out) + "\n"


#: In a Markdown file that holds a copy of the table (:func:`main`), it sits between these two lines.
BEGIN = "<!-- metric table: generated from harness/catalogue.py by `python -m harness.catalogue FILE.md` -->"
END = "<!-- end of the generated metric table -->"


def replace_table(text: str) -> str:
    """``text`` (a Markdown file) with the block between :data:`BEGIN` and :data:`END` set to :func:`markdown_table`.

    Raises:
        ValueError: the markers are missing or out of order.
    """
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), text, flags=re.S)
    if m is None:
        raise ValueError("the generated metric table markers are missing")
    return text[: m.start(1)] + markdown_table() + text[m.end(1) :]


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.catalogue FILE.md``: rewrite the metric table of FILE.md; exit 0, or 1 on a bad file."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m harness.catalogue FILE.md\n")
        return 1
    path = Path(args[0])
    try:
        path.write_text(replace_table(path.read_text()))
    except (OSError, ValueError) as e:
        sys.stderr.write(f"{e}\n")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
