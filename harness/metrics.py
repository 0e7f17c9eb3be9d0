"""Run metrics for Prometheus: counters and fixed-bucket histograms computed from the request records.

:class:`RunMetrics` is updated with every request record as it is written to ``records.jsonl`` (the records are
the ground truth, so the exported totals equal the records' totals exactly) and with every ``phases.jsonl``
event (for the current step and the live hours-to-N estimate). :mod:`harness.exporter` exposes it. The families'
names, labels and buckets are those of :data:`harness.catalogue.FAMILIES`.

Everything here is a plain counter or a fixed-bucket histogram count keyed by a bounded label tuple, plus the
percentile gauges' sliding windows (:mod:`harness.quantiles`: one per gauge and window, bounded memory). One instance
lives in the master (or the single process): workers send their records to the master, which writes them, so
every record passes through that instance once.

Label values come from the record: ``phase`` is the run phase (``warmup`` | ``single`` | ``step``; warm-up
requests are counted with ``phase="warmup"``, never dropped), ``concurrency`` the step's target concurrency,
``prompt`` the prompt's class (``prompt_class``: the profile's ``class``, else the prompt id) as mapped by
:func:`prompt_labels` from the profile (at most :data:`MAX_PROMPT_LABELS` values plus ``other``), ``outcome`` one
of :data:`OUTCOMES`, ``finish_reason`` the server's value when it is one of :data:`FINISH_REASONS` (``none`` when
absent, ``other`` for anything else), ``error_class`` a key of :data:`harness.result.ERROR_CLASSES` (else
``other``), ``kind`` ``reasoning`` | ``answer``. So the number of series is bounded by the profile's phases and
these sets, whatever the number of requests or distinct prompts (tests/test_metrics.py checks it).
"""

from __future__ import annotations

import bisect
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.catalogue import HISTOGRAMS, PERCENTILE_GAUGES, PERCENTILE_WINDOWS, PERCENTILES, TIME_BUCKETS
from harness.histogram import bucket_value
from harness.quantiles import SlidingQuantiles, gap_counts
from harness.result import ERROR_CLASSES, FINISH_REASONS, RESERVED_PROMPT_LABELS, RequestResult
from harness.selfcert import CpuShare, cpu_event_problem

_log = logging.getLogger(__name__)

__all__ = [
    "FINISH_REASONS",
    "MAX_PROMPT_LABELS",
    "OUTCOMES",
    "RESERVED_PROMPT_LABELS",
    "Hist",
    "InFlight",
    "RunMetrics",
    "StepEstimate",
    "outcome_of",
    "prompt_labels",
]

#: Request outcomes, mutually exclusive: ``usable`` (a usable sample: success, not truncated, passing the profile's
#: ``usable`` checks; the record's ``usable``), ``truncated`` (success that hit ``max_tokens``), ``unusable`` (success,
#: not truncated, failing a ``usable`` check), ``error`` (failed; its class is in ``llmload_request_errors_total``).
OUTCOMES = ("usable", "truncated", "unusable", "error")

#: Distinct ``prompt`` label values kept per run; records of further prompt classes are labelled ``other``.
MAX_PROMPT_LABELS = 32
# ``prompt`` label values the exporter itself gives (prompts beyond the label map, the warm-up request):
# harness.result.RESERVED_PROMPT_LABELS. ``finish_reason`` label values kept as sent (plus ``none`` when absent):
# harness.result.FINISH_REASONS; anything else is ``other``. Both are imported above and re-exported.


def prompt_labels(prompts: Iterable[tuple[str, float, bool]], limit: int = MAX_PROMPT_LABELS) -> dict[str, str]:
    """The ``prompt`` label value of every prompt class of a profile, at most ``limit`` distinct plus ``other``.

    Args:
        prompts: one ``(class, weight, explicit)`` per prompt of the profile: its class (the profile's ``class``,
            else its id), its weight in the mix, and whether the class was given explicitly.
        limit: distinct label values kept.

    Returns:
        class -> label. When the profile has at most ``limit`` classes every class is its own label. Otherwise
        prompts without an explicit class are labelled ``other`` (a mix of thousands of distinct prompts: give
        them classes), and if the explicit classes alone are too many, the ``limit`` heaviest by total weight
        keep their name (ties by first appearance) and the rest are ``other``.
    """
    rows = list(prompts)
    weight: dict[str, float] = {}
    explicit: set[str] = set()
    for cls, w, exp in rows:
        weight[cls] = weight.get(cls, 0.0) + w
        if exp:
            explicit.add(cls)
    if len(weight) <= limit:
        return {c: c for c in weight}
    keep = [c for c in weight if c in explicit]  # insertion order: first appearance
    keep = sorted(keep, key=lambda c: -weight[c])[:limit]  # stable: ties keep the profile's order
    kept = set(keep)
    return {c: (c if c in kept else "other") for c in weight}


def outcome_of(res: RequestResult) -> str:
    """``error`` for a failed request, ``truncated`` for a truncated success, ``usable`` for a usable sample (the
    record's ``usable``: the report's definition, profile checks included), else ``unusable``."""
    if not res.ok:
        return "error"
    if res.truncated:
        return "truncated"
    return "usable" if res.usable else "unusable"


class Hist:
    """One fixed-bucket histogram series: per-bucket (non-cumulative) counts, the last one is ``+Inf``."""

    __slots__ = ("counts", "sum")

    def __init__(self, n_bounds: int) -> None:
        self.counts = [0] * (n_bounds + 1)
        self.sum = 0.0

    @property
    def count(self) -> int:
        """Number of observations."""
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Cumulative counts, one per bound then ``+Inf`` (Prometheus ``_bucket`` values)."""
        out, acc = [], 0
        for c in self.counts:
            acc += c
            out.append(acc)
        return out


@dataclass
class StepEstimate:
    """Live request throughput of one step, for the hours-to-N estimate (wall-clock epoch seconds).

    Mirrors the report's steady window (:mod:`harness.report.steady`) on the records seen so far: the window
    starts when ``wave`` distinct users (the users in flight at the step start or started in it: closed-loop,
    the larger of this step's and the previous step's concurrency) have each finished a request ending after
    the step start (the first wave replaced), at the latest of those first ends; it ends at the step's end
    (or now).
    """

    phase: str
    step: int
    concurrency: int
    start: float
    wave: int = 0
    end: float | None = None
    window_start: float | None = None
    _first_end: dict[str, float] = field(default_factory=dict)
    _early: list[float] = field(default_factory=list)  # usable ends before the window start is known
    _k: int = 0  # usable ends in the window so far

    def add(self, user: str, end: float, usable: bool) -> None:
        """Account one completed request that ended at ``end`` (only ends inside the step matter)."""
        if end <= self.start or (self.end is not None and end >= self.end):
            return
        if usable:
            if self.window_start is None:
                self._early.append(end)
            elif end > self.window_start:  # the completion at the window start opened it: not counted
                self._k += 1
        if self.window_start is None and user and user != "warmup":
            if end < self._first_end.get(user, math.inf):
                self._first_end[user] = end
            if len(self._first_end) >= max(self.wave, self.concurrency):
                ws = self.window_start = max(self._first_end.values())
                self._k = sum(1 for t in self._early if t > ws)
                self._first_end, self._early = {}, []

    def rate(self, now: float) -> tuple[float, float] | None:
        """(usable completions, window seconds) of the steady window so far, or None before it starts."""
        if self.window_start is None:
            return None
        w1 = min(now, self.end) if self.end is not None else now
        length = w1 - self.window_start
        if length <= 0:
            return None
        return float(self._k), length

    def seconds_to(self, n: int, now: float) -> float | None:
        """Estimated seconds to ``n`` usable samples at this step's rate (None: no window or no usable yet)."""
        r = self.rate(now)
        if r is None or r[0] <= 0:
            return None
        k, length = r
        return n * length / k


class RunMetrics:
    """Aggregated run metrics: counters, histograms, current phase and per-step throughput.

    Thread-safe (the exporter reads it from its HTTP server thread while records are added).

    Args:
        model: the ``model`` label value (the served model id).
        labels: prompt class -> ``prompt`` label value (:func:`prompt_labels` of the profile); a class missing
            from it is ``other``. None (e.g. records re-read without their profile): the first
            ``max_prompt_labels`` distinct classes keep their name, later ones are ``other``.
        max_prompt_labels: the limit when ``labels`` is None.
        clock: wall-clock time (epoch seconds); at every record the percentile windows move to end at it, so
            their memory stays bounded between scrapes. A record whose end is older than a window is not in it.
    """

    def __init__(
        self,
        model: str,
        labels: Mapping[str, str] | None = None,
        max_prompt_labels: int = MAX_PROMPT_LABELS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.labels = dict(labels) if labels is not None else None
        self.max_prompt_labels = max_prompt_labels
        self._prompt_labels: set[str] = set()
        self.counters: dict[tuple[str, tuple[str, ...]], float] = {}
        self.hists: dict[tuple[str, tuple[str, ...]], Hist] = {}
        self.records = 0
        self.phase: dict[str, Any] | None = None  # the last phase_start event
        #: the current step's live relative half-width of the usable rate's 95 % interval (``steps.until``, set by the
        #: load shape; None: no until, or no interval yet)
        self.until_halfwidth: float | None = None
        self.load_ended = False
        #: Locust workers lost in this run and not back (``worker_lost`` / ``worker_back`` events; client ids).
        self.workers_lost: set[str] = set()
        #: Each load-generating process's CPU share of the current step so far (its ``client_cpu`` samples,
        #: :class:`harness.selfcert.CpuShare`: a counter going down starts a new baseline), cleared at each phase start.
        self.cpu_samples: dict[str, CpuShare] = {}
        #: A malformed ``client_cpu`` event was warned about (once per run; :func:`harness.selfcert.cpu_event_problem`).
        self.cpu_warned = False
        self.steps: dict[int, StepEstimate] = {}
        self.lock = threading.Lock()
        self._gap_index: dict[str, tuple[float, int]] = {}  # log-bucket key -> (its value, Prometheus bucket)
        self.clock = clock
        #: (percentile gauge name, window label) -> its sliding window (:data:`harness.catalogue.PERCENTILE_WINDOWS`).
        self.windows: dict[tuple[str, str], SlidingQuantiles] = {
            (name, w): SlidingQuantiles(seconds, nearest=fld == "gap_hist")
            for name, fld in PERCENTILE_GAUGES.items()
            for w, seconds in PERCENTILE_WINDOWS.items()
        }

    # -- updates ------------------------------------------------------------------------------------------------
    def _inc(self, name: str, labels: tuple[str, ...], v: float) -> None:
        key = (name, labels)
        self.counters[key] = self.counters.get(key, 0) + v

    def _hist(self, name: str, labels: tuple[str, ...], n_bounds: int) -> Hist:
        key = (name, labels)
        h = self.hists.get(key)
        if h is None:
            h = self.hists[key] = Hist(n_bounds)
        return h

    def observe(self, rec: RequestResult | Mapping[str, Any]) -> None:
        """Count one request: a result, or its record (a dict as written to ``records.jsonl``, read with
        :meth:`RequestResult.from_record`).

        Raises:
            ValueError: a record of a schema version this harness cannot read.
        """
        res = rec if isinstance(rec, RequestResult) else RequestResult.from_record(rec)
        with self.lock:
            self._observe(res)

    def _observe(self, res: RequestResult) -> None:
        self.records += 1
        if res.phase == "warmup":  # the shape's own warm-up request, not a prompt of the mix
            prompt = "warmup"
        else:
            prompt = self._prompt_label(res.prompt_class or res.prompt_id)
        base = (self.model, res.phase, str(res.concurrency), prompt)
        outcome = outcome_of(res)
        fr = res.finish_reason
        self._inc(
            "llmload_requests", (*base, outcome, ("none" if not fr else fr if fr in FINISH_REASONS else "other")), 1
        )
        if outcome == "error":
            ec = res.error_class
            self._inc("llmload_request_errors", (*base, ec if ec in ERROR_CLASSES else "other"), 1)
        if res.truncated:
            self._inc("llmload_truncated_requests", (*base, "reasoning" if res.truncated_in_reasoning else "answer"), 1)
        reasoning = res.reasoning_tokens
        self._inc("llmload_output_tokens", (*base, outcome, "reasoning"), reasoning)
        self._inc("llmload_output_tokens", (*base, outcome, "answer"), res.output_tokens - reasoning)
        self._inc("llmload_prompt_tokens", (*base, outcome), res.prompt_tokens or 0)
        hl = (base[0], base[1], base[2], outcome)
        for name, (fld, bounds, _) in HISTOGRAMS.items():
            v = getattr(res, fld)
            if v is None:
                continue
            if fld == "gap_hist":
                self._observe_gaps(name, hl, v)
                continue
            h = self._hist(name, hl, len(bounds))
            h.counts[bisect.bisect_left(bounds, v)] += 1
            h.sum += v
        if res.ok and res.phase != "warmup":
            self._observe_windows(res)
        self._observe_step(res)

    def _observe_windows(self, res: RequestResult) -> None:
        now = self.clock()
        end = res.start_wall + (res.e2e or 0.0)
        gaps = gap_counts(res.gap_hist) if res.gap_hist else None  # read once for every window
        for (name, _), win in self.windows.items():
            win.advance(now)
            fld = PERCENTILE_GAUGES[name]
            if fld == "gap_hist":
                if gaps is not None:
                    win.add_hist(end, gaps)
                continue
            v = getattr(res, fld)
            if v is not None:
                win.add(end, float(v))

    def window_percentiles(self, now: float) -> list[tuple[str, str, list[float | None]]]:
        """Every percentile gauge's values at ``now`` (epoch seconds): ``(name, window label, [one value per
        harness.catalogue.PERCENTILES, seconds, None for an empty window])``, in catalogue order. Call with
        :attr:`lock` held (the exporter does)."""
        qs = [p / 100 for p in PERCENTILES]
        return [(name, w, win.quantiles(now, qs)) for (name, w), win in self.windows.items()]

    def _prompt_label(self, value: str) -> str:
        if self.labels is not None:
            return self.labels.get(value, "other")
        if value in self._prompt_labels:
            return value
        if len(self._prompt_labels) < self.max_prompt_labels:
            self._prompt_labels.add(value)
            return value
        return "other"

    def _observe_gaps(self, name: str, labels: tuple[str, ...], gh: Mapping[str, Any]) -> None:
        n = int(gh.get("n") or 0)
        if n == 0:
            return
        h = self._hist(name, labels, len(TIME_BUCKETS))
        lo = float(gh["min"]) if gh.get("min") is not None else -math.inf
        hi = float(gh["max"]) if gh.get("max") is not None else math.inf
        cache = self._gap_index
        for k, c in (gh.get("buckets") or {}).items():
            hit = cache.get(k)
            if hit is None:
                v = bucket_value(int(k))
                hit = cache[k] = (v, bisect.bisect_left(TIME_BUCKETS, v))
            v, i = hit
            if v < lo or v > hi:  # never outside the exact observed range (as LogHistogram.quantile does)
                i = bisect.bisect_left(TIME_BUCKETS, min(max(v, lo), hi))
            h.counts[i] += int(c)
        h.sum += float(gh.get("sum") or 0.0)

    def _observe_step(self, res: RequestResult) -> None:
        if res.phase == "warmup" or not self.steps:
            return
        end = res.start_wall + (res.e2e or 0.0)
        for est in self.steps.values():
            if est.end is None or end < est.end:
                est.add(res.user, end, res.usable)

    def on_phase(self, event: Mapping[str, Any]) -> None:
        """Take one ``phases.jsonl`` event (``phase_start`` / ``load_end`` / ``worker_lost`` / ``worker_back`` /
        ``client_cpu``) into account; other events are ignored."""
        with self.lock:
            kind = event.get("event")
            if kind == "client_cpu":
                why = cpu_event_problem(event)
                if why is not None:
                    if not self.cpu_warned:
                        self.cpu_warned = True
                        _log.warning("phases.jsonl: a malformed client_cpu event (%s): %r; left out of the live "
                                     "client CPU share (said once per run)", why, dict(event))
                    return
                acc = self.cpu_samples.setdefault(str(event["process"]), CpuShare())
                acc.add(float(event["wall"]), float(event["cpu_s"]))
                return
            wall = float(event.get("wall") or 0.0)
            if kind == "phase_start":
                self.cpu_samples.clear()
                for est in self.steps.values():
                    if est.end is None:
                        est.end = wall
                prev = self.phase
                in_flight = 0 if prev is None or prev.get("phase") == "warmup" else int(prev.get("concurrency") or 0)
                self.phase = dict(event)
                self.load_ended = False
                if event.get("phase") != "warmup":
                    step, c = int(event.get("step") or 0), int(event.get("concurrency") or 1)
                    self.steps[step] = StepEstimate(str(event.get("phase")), step, c, wall, wave=max(c, in_flight))
            elif kind == "worker_lost":
                self.workers_lost.add(str(event.get("worker")))
            elif kind == "worker_back":
                self.workers_lost.discard(str(event.get("worker")))
            elif kind == "load_end":
                self.load_ended = True
                for est in self.steps.values():
                    if est.end is None:
                        est.end = wall

    def cpu_shares(self) -> dict[str, float]:
        """Each load-generating process's CPU share in the current step so far (CPU s ÷ wall s summed over its
        consecutive ``client_cpu`` samples since the step started, a counter going down starting a new baseline:
        :class:`harness.selfcert.CpuShare`; 1.0 = one core), for processes with at least 1 s summed. Call with
        :attr:`lock` held."""
        return {p: v for p, acc in self.cpu_samples.items() if (v := acc.share(1.0)) is not None}

    # -- building ---------------------------------------------------------------------------------------------
    @classmethod
    def of(cls, model: str, records: Iterable[RequestResult | Mapping[str, Any]]) -> RunMetrics:
        """Metrics of the given results or records (e.g. re-read from ``records.jsonl``)."""
        m = cls(model)
        for r in records:
            m.observe(r)
        return m


class InFlight:
    """Requests in flight in one process (a gauge; Locust users increment and decrement it). The process's one is
    its run's (:attr:`harness.runtime.Run.in_flight`)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0

    def inc(self) -> None:
        """A request was sent."""
        self.n += 1

    def dec(self) -> None:
        """A request ended (success or failure)."""
        self.n -= 1

