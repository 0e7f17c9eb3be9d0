"""harness.metrics: counters and fixed-bucket histograms from request records, the live estimate."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from harness.catalogue import TIME_BUCKETS, TOKEN_BUCKETS
from harness.histogram import LogHistogram
from harness.metrics import (
    MAX_PROMPT_LABELS,
    OUTCOMES,
    RunMetrics,
    StepEstimate,
    outcome_of,
    prompt_labels,
)
from harness.report.load import Phase
from harness.result import RequestResult
from tests.report.oracle import steady_window, usable_ends_in

MODEL = "m"


def rec(**kw: Any) -> dict[str, Any]:
    """A record as written to records.jsonl (a usable success unless told otherwise)."""
    r: dict[str, Any] = {
        "prompt_id": "p",
        "user": "w:1",
        "phase": "step",
        "step": 1,
        "concurrency": 8,
        "max_tokens": 100,
        "start_wall": 1000.0,
        "ttft": 0.5,
        "ttfat": 2.0,
        "e2e": 4.0,
        "tpot": 0.04,
        "gap_hist": LogHistogram.of([0.04] * 3).to_json(),
        "output_tokens": 90,
        "reasoning_tokens": 60,
        "answer_tokens": 30,
        "prompt_tokens": 12,
        "ok": True,
        "error_class": None,
        "finish_reason": "stop",
        "truncated": False,
        "truncated_in_reasoning": False,
        "usable": True,
    }
    r.update(kw)
    return r


def counter(m: RunMetrics, name: str, **labels: str) -> float:
    """Sum of a counter over the label sets matching ``labels``."""
    names = {
        "llmload_requests": ("model", "phase", "concurrency", "prompt", "outcome", "finish_reason"),
        "llmload_request_errors": ("model", "phase", "concurrency", "prompt", "error_class"),
        "llmload_truncated_requests": ("model", "phase", "concurrency", "prompt", "kind"),
        "llmload_output_tokens": ("model", "phase", "concurrency", "prompt", "outcome", "kind"),
        "llmload_prompt_tokens": ("model", "phase", "concurrency", "prompt", "outcome"),
    }[name]
    total = 0.0
    for (n, lb), v in m.counters.items():
        if n != name:
            continue
        d = dict(zip(names, lb, strict=True))
        if all(d[k] == v2 for k, v2 in labels.items()):
            total += v
    return total


def hist_totals(m: RunMetrics) -> dict[str, float]:
    """``<hist>_count`` / ``<hist>_sum`` summed over every label set of each histogram (as PromQL ``sum()``)."""
    out: dict[str, float] = {}
    for (name, _), h in m.hists.items():
        out[name + "_count"] = out.get(name + "_count", 0) + h.count
        out[name + "_sum"] = out.get(name + "_sum", 0.0) + h.sum
    return out


def test_bucket_layouts() -> None:
    assert TIME_BUCKETS[0] == 0.001 and TIME_BUCKETS[-1] == 7200.0
    assert all(b > a for a, b in itertools.pairwise(TIME_BUCKETS))
    assert max(b / a for a, b in itertools.pairwise(TIME_BUCKETS) if b <= 1000) <= 5 / 3 + 1e-9
    assert 0.0075 in TIME_BUCKETS and 2.5 not in TIME_BUCKETS  # exact decimal bounds
    assert TOKEN_BUCKETS == tuple(float(2**i) for i in range(18)) and TOKEN_BUCKETS[-1] == 131072


def test_outcomes_are_exclusive() -> None:
    def outcome(**kw: Any) -> str:
        return outcome_of(RequestResult.from_record(rec(**kw)))

    assert outcome() == "usable"
    assert outcome(truncated=True, usable=False) == "truncated"
    assert outcome(ok=False, truncated=True, usable=False) == "error"
    # a success that is not truncated but fails the profile's usable checks is not counted as usable
    assert outcome(usable=False, usable_reason="regex") == "unusable"
    assert {outcome(), outcome(truncated=True, usable=False), outcome(usable=False), outcome(ok=False)} == set(OUTCOMES)


def test_counters_from_records() -> None:
    recs = [
        rec(),
        rec(prompt_id="q", finish_reason="length", truncated=True, usable=False, answer_tokens=0,
            reasoning_tokens=100, output_tokens=100, truncated_in_reasoning=True, ttfat=None),
        rec(finish_reason="length", truncated=True, usable=False),
        rec(ok=False, usable=False, error_class="timeout_idle", finish_reason=None, output_tokens=7,
            reasoning_tokens=7, answer_tokens=0, prompt_tokens=None, ttfat=None, tpot=None),
        rec(ok=False, usable=False, error_class="http_5xx", finish_reason=None, output_tokens=0, reasoning_tokens=0,
            answer_tokens=0, prompt_tokens=None, ttft=None, ttfat=None, tpot=None, gap_hist=None, e2e=0.01),
        rec(phase="warmup", step=-1, concurrency=1, prompt_id="warmup", user="warmup", output_tokens=13,
            reasoning_tokens=11, answer_tokens=2),
    ]  # fmt: skip
    m = RunMetrics.of(MODEL, recs)
    assert m.records == 6
    assert counter(m, "llmload_requests") == 6
    assert counter(m, "llmload_requests", outcome="usable") == 2
    assert counter(m, "llmload_requests", outcome="usable", phase="warmup", prompt="warmup", concurrency="1") == 1
    assert counter(m, "llmload_requests", outcome="truncated", finish_reason="length") == 2
    assert counter(m, "llmload_requests", outcome="error", finish_reason="none") == 2
    assert counter(m, "llmload_request_errors") == 2
    assert counter(m, "llmload_request_errors", error_class="timeout_idle") == 1
    assert counter(m, "llmload_truncated_requests") == 2
    assert counter(m, "llmload_truncated_requests", kind="reasoning", prompt="q") == 1
    assert counter(m, "llmload_output_tokens") == sum(r["output_tokens"] for r in recs) == 90 + 100 + 90 + 7 + 13
    assert counter(m, "llmload_output_tokens", kind="reasoning") == 60 + 100 + 60 + 7 + 11
    assert counter(m, "llmload_output_tokens", outcome="error") == 7
    assert counter(m, "llmload_prompt_tokens") == 12 * 4
    # Histograms skip missing values; each label set has its own series.
    t = hist_totals(m)
    assert t["llmload_time_to_first_token_seconds_count"] == 5
    assert t["llmload_time_to_first_answer_token_seconds_count"] == 3
    assert t["llmload_time_per_output_token_seconds_count"] == 4
    assert t["llmload_request_duration_seconds_count"] == 6
    assert t["llmload_request_duration_seconds_sum"] == pytest.approx(5 * 4.0 + 0.01)
    assert t["llmload_request_output_tokens_count"] == 6
    assert t["llmload_inter_chunk_latency_seconds_count"] == 5 * 3
    assert set(lb[-1] for (n, lb) in m.hists if n == "llmload_request_duration_seconds") == {
        "usable",
        "truncated",
        "error",
    }


@pytest.mark.parametrize("values", [
    [0.0, 0.001, 0.0010001, 0.0075, 0.5, 1.0, 7.5, 999.9, 7200.0, 7200.5, 1e6],
    [random.Random(s).lognormvariate(0, 2.5) for s in range(300)],
])  # fmt: skip
def test_time_buckets_match_prometheus_client(values: list[float]) -> None:
    """Bucket placement (v <= le) is prometheus_client's own, including values exactly on a bound."""
    reg = CollectorRegistry()
    ref = Histogram("ref_seconds", "", buckets=TIME_BUCKETS, registry=reg)
    m = RunMetrics(MODEL)
    for v in values:
        ref.observe(v)
        m.observe(rec(e2e=v, ttft=None, ttfat=None, tpot=None, gap_hist=None))
    want = {
        s.labels["le"]: s.value
        for f in text_string_to_metric_families(generate_latest(reg).decode())
        for s in f.samples
        if s.name == "ref_seconds_bucket"
    }
    ((_, _), h), *_ = [(k, h) for k, h in m.hists.items() if k[0] == "llmload_request_duration_seconds"]
    from prometheus_client.utils import floatToGoString

    got = dict(zip([*(floatToGoString(b) for b in TIME_BUCKETS), "+Inf"], h.cumulative(), strict=True))
    assert got == want
    assert h.sum == pytest.approx(sum(values))


def test_token_buckets() -> None:
    m = RunMetrics.of(MODEL, [rec(output_tokens=n) for n in (1, 2, 3, 4096, 4097, 131072, 200000)])
    h = next(h for (n, _), h in m.hists.items() if n == "llmload_request_output_tokens")
    cum = dict(zip([*TOKEN_BUCKETS, float("inf")], h.cumulative(), strict=True))
    assert cum[1.0] == 1 and cum[2.0] == 2 and cum[4.0] == 3 and cum[4096.0] == 4 and cum[8192.0] == 5
    assert cum[131072.0] == 6 and cum[float("inf")] == 7


def test_inter_chunk_gaps_from_the_records_histogram() -> None:
    """Gaps are placed by their 1 % log bucket: exact except within 1 % of a bound; count and sum exact."""
    rng = random.Random(5)
    gaps = [rng.uniform(0.0011, 0.3) for _ in range(2000)]
    gaps = [g for g in gaps if all(abs(g / b - 1) > 0.011 for b in TIME_BUCKETS)]
    m = RunMetrics.of(MODEL, [rec(gap_hist=LogHistogram.of(gaps[:700]).to_json()),
                              rec(gap_hist=LogHistogram.of(gaps[700:]).to_json())])  # fmt: skip
    h = next(h for (n, _), h in m.hists.items() if n == "llmload_inter_chunk_latency_seconds")
    want = [sum(1 for g in gaps if g <= b) for b in TIME_BUCKETS] + [len(gaps)]
    assert h.cumulative() == want
    assert h.sum == pytest.approx(sum(gaps), rel=1e-12)
    # A single-gap histogram is clamped to its exact value (as LogHistogram.quantile does).
    m = RunMetrics.of(MODEL, [rec(gap_hist=LogHistogram.of([0.0100001]).to_json())])
    h = next(h for (n, _), h in m.hists.items() if n == "llmload_inter_chunk_latency_seconds")
    assert h.cumulative()[TIME_BUCKETS.index(0.01)] == 0 and h.cumulative()[TIME_BUCKETS.index(0.015)] == 1


# -- live hours-to-N -----------------------------------------------------------------------------------------
def closed_loop(steps: list[tuple[int, float, float]], seed: int) -> list[dict[str, Any]]:
    """Records of closed-loop users through consecutive steps ``(concurrency, start, end)``, as Locust runs them:
    a user sends its next request when the last one ends; a step-up adds users at its start, a step-down stops
    the extra users once their request in flight ends; each record carries the step it started in."""
    rng = random.Random(seed)
    recs: list[dict[str, Any]] = []
    free: dict[int, float] = {}  # user -> when its next request can start
    for i, (c, a, b) in enumerate(steps, start=1):
        for u in range(c):
            free.setdefault(u, a + rng.uniform(0, 0.2))
        for u in list(free):
            if u >= c:  # stopped: its request in flight (already recorded) ends after a
                del free[u]
                continue
            t = free[u]
            while t < b:
                d = rng.uniform(3, 9)
                usable = rng.random() > 0.15
                recs.append(rec(user=f"w:{u}", step=i, concurrency=c, start_wall=t, e2e=d, usable=usable,
                                truncated=not usable, finish_reason="stop" if usable else "length"))  # fmt: skip
                t += d
            free[u] = t
    return recs


@pytest.mark.parametrize("concurrencies", [(4, 8, 16), (16, 8, 12)])
def test_step_estimate_is_the_reports_steady_rate(concurrencies: tuple[int, ...]) -> None:
    """At each step's end the live estimate equals N / (usable completions per second in the report's steady
    window), step-ups and step-downs alike; before the first wave is replaced there is none; each estimate is
    frozen at its step's end."""
    bounds = [1000.0 + 100 * i for i in range(len(concurrencies) + 1)]
    steps = [(c, bounds[i], bounds[i + 1]) for i, c in enumerate(concurrencies)]
    recs = closed_loop(steps, seed=sum(concurrencies))
    events = [
        (a, {"event": "phase_start", "phase": "step", "step": i, "concurrency": c, "wall": a})
        for i, (c, a, _) in enumerate(steps, start=1)
    ]
    events.append((bounds[-1], {"event": "load_end", "wall": bounds[-1]}))
    # Records arrive in the order their requests end, phase events when they happen.
    timeline = sorted([(r["start_wall"] + r["e2e"], 1, r) for r in recs] + [(t, 0, e) for t, e in events],
                      key=lambda x: (x[0], x[1]))  # fmt: skip
    m = RunMetrics(MODEL)
    for t, kind, obj in timeline:
        if kind == 0:
            m.on_phase(obj)
        else:
            m.observe(obj)
        if kind == 0 and obj["event"] == "phase_start":
            assert m.steps[obj["step"]].seconds_to(1000, t + 1) is None  # first wave still running
    results = [RequestResult.from_record(r) for r in recs]
    for i, (c, a, b) in enumerate(steps, start=1):
        w = steady_window(Phase("step", i, c, a, b), results)
        assert w.steady
        k = usable_ends_in(results, w.start, w.end)
        assert m.steps[i].window_start == pytest.approx(w.start, abs=1e-9)
        assert m.steps[i].seconds_to(1000, now=bounds[-1] + 500) == pytest.approx(1000 * w.length / k, rel=1e-12)
        assert m.steps[i].end == b


def test_step_estimate_counts_only_usable_ends_in_the_window() -> None:
    est = StepEstimate("step", 1, 2, start=0.0)
    est.add("a", 5.0, usable=True)  # first wave (a)
    est.add("a", 7.0, usable=True)
    assert est.window_start is None and est.rate(10.0) is None
    est.add("b", 8.0, usable=False)  # first wave complete at 8.0
    assert est.window_start == 8.0
    assert est.rate(10.0) is None or est.rate(10.0) == (0.0, 2.0)
    assert est.seconds_to(100, 10.0) is None  # no usable completion yet
    est.add("a", 9.0, usable=True)
    est.add("b", 9.5, usable=False)
    assert est.rate(10.0) == (1.0, 2.0) and est.seconds_to(100, 10.0) == 200.0
    est.end = 12.0
    est.add("a", 13.0, usable=True)  # after the step: ignored
    assert est.rate(1e9) == (1.0, 4.0)


# -- bounded label sets: the number of series does not grow with requests or distinct prompts ---------------
def _exposition_series(m: RunMetrics) -> tuple[int, int]:
    """(sample lines, bytes) of the exporter's text exposition of ``m``."""
    from harness.exporter import RunCollector, run_info

    registry = CollectorRegistry()
    registry.register(RunCollector(m, run_info("p", "http://h", "r"), 1000, clock=lambda: 5000.0))
    text = generate_latest(registry).decode()
    return sum(1 for x in text.splitlines() if x and not x.startswith("#")), len(text)


def _many(rng: random.Random, n: int, first_id: int) -> list[dict[str, Any]]:
    """``n`` records of ``n`` distinct prompt ids (no class), mixed outcomes, odd finish reasons and classes."""
    out = []
    for i in range(n):
        kind = rng.random()
        kw: dict[str, Any] = {"prompt_id": f"prompt-{first_id + i}", "concurrency": rng.choice([1, 8, 16])}
        kw["phase"] = "single" if kw["concurrency"] == 1 else "step"
        if kind < 0.1:
            kw.update(ok=False, usable=False, error_class=rng.choice(["http_429", f"made_up_{i}"]), finish_reason=None)
        elif kind < 0.2:
            kw.update(truncated=True, usable=False, finish_reason="length")
        elif kind < 0.25:
            kw.update(finish_reason=f"server_specific_{i}")  # a server's own value: not a label value
        out.append(rec(**kw))
    return out


def test_series_count_is_bounded_with_thousands_of_distinct_prompts() -> None:
    rng = random.Random(7)
    m = RunMetrics(MODEL)
    for r in _many(rng, 2000, 0):
        m.observe(r)
    series_2k, size_2k = _exposition_series(m)
    for r in _many(rng, 6000, 2000):  # 6,000 more requests, each of a prompt never seen before
        m.observe(r)
    series_8k, size_8k = _exposition_series(m)
    assert m.records == 8000
    assert series_8k == series_2k, (series_2k, series_8k)
    assert abs(size_8k - size_2k) < 0.01 * size_2k  # only digits of the values change
    prompts = {lb[3] for (_, lb) in m.counters}
    assert len(prompts) == MAX_PROMPT_LABELS + 1 and "other" in prompts  # the first 32 ids, then "other"
    assert {lb[5] for (n, lb) in m.counters if n == "llmload_requests"} == {"stop", "length", "none", "other"}
    assert {lb[4] for (n, lb) in m.counters if n == "llmload_request_errors"} == {"http_429", "other"}
    # Every request is still counted: capping relabels, never drops.
    assert counter(m, "llmload_requests") == 8000


def test_prompt_class_is_the_label_and_the_cap_is_per_run() -> None:
    m = RunMetrics(MODEL, max_prompt_labels=2)
    for pid, cls in [("a1", "short"), ("a2", "short"), ("b1", "long"), ("c1", None), ("b2", "long")]:
        m.observe(rec(prompt_id=pid, prompt_class=cls))
    by_prompt: dict[str, float] = {}
    for (name, lb), v in m.counters.items():
        if name == "llmload_requests":
            by_prompt[lb[3]] = by_prompt.get(lb[3], 0) + v
    assert by_prompt == {"short": 2, "long": 2, "other": 1}  # c1 (no class: its id) came third


def test_prompt_labels_from_the_profile() -> None:
    few = [("short", 1.0, True), ("short", 2.0, True), ("quicksort", 1.0, False)]
    assert prompt_labels(few, limit=3) == {"short": "short", "quicksort": "quicksort"}
    # Too many classes: unclassed prompts are "other", explicit classes keep their name.
    many = [("short", 1.0, True), ("long", 1.0, True)] + [(f"p{i}", 1.0, False) for i in range(100)]
    labels = prompt_labels(many, limit=3)
    assert labels["short"] == "short" and labels["long"] == "long" and labels["p7"] == "other"
    assert set(labels.values()) == {"short", "long", "other"}
    # Too many explicit classes: the heaviest keep their name (ties: profile order).
    heavy = [("a", 1.0, True), ("b", 5.0, True), ("c", 1.0, True), ("d", 3.0, True)]
    assert prompt_labels(heavy, limit=2) == {"a": "other", "b": "b", "c": "other", "d": "d"}
    assert prompt_labels([("a", 1.0, True), ("b", 1.0, True), ("c", 1.0, True)], limit=2) == {
        "a": "a",
        "b": "b",
        "c": "other",
    }
    m = RunMetrics(MODEL, labels)
    m.observe(rec(prompt_id="p1", prompt_class="p1"))
    m.observe(rec(prompt_id="x", prompt_class="long"))
    m.observe(rec(prompt_id="unknown-to-the-profile"))
    m.observe(rec(prompt_id="warmup", phase="warmup", step=-1, concurrency=1))
    assert {lb[3] for (n, lb) in m.counters if n == "llmload_requests"} == {"other", "long", "warmup"}


def test_percentile_gauge_series_are_constant_over_a_run() -> None:
    """The percentile gauges have one series per (gauge, window, percentile) from the first scrape (no request
    yet: NaN) through hours of requests to long after the last one: the same 100 series, and their windows keep
    at most their slices' worth of buckets whatever the number of requests."""
    from harness.catalogue import PERCENTILE_GAUGES, PERCENTILE_WINDOWS, PERCENTILES
    from harness.exporter import RunCollector, run_info
    from harness.quantiles import SLICES

    clock = [1e9]
    m = RunMetrics(MODEL, clock=lambda: clock[0])
    c = RunCollector(m, run_info("p", "http://h", "r"), 1000, clock=lambda: clock[0])

    def series() -> set[tuple[str, str, str]]:
        registry = CollectorRegistry()
        registry.register(c)  # type: ignore[arg-type]
        return {
            (s.name, s.labels["window"], s.labels["percentile"])
            for f in text_string_to_metric_families(generate_latest(registry).decode())
            for s in f.samples
            if s.name in PERCENTILE_GAUGES
        }

    want = set(itertools.product(PERCENTILE_GAUGES, PERCENTILE_WINDOWS, map(str, PERCENTILES)))
    assert len(want) == 100 and series() == want
    rng = random.Random(3)
    for i in range(20_000):  # 2 requests/s for 10,000 s (2.8 h)
        clock[0] += 0.5
        gaps = LogHistogram.of(rng.uniform(0.005, 0.05) for _ in range(20)).to_json()
        m.observe(rec(start_wall=clock[0] - 4.0, gap_hist=gaps, ttft=rng.uniform(0.1, 1.0)))
        if i % 5000 == 0:
            assert series() == want
    assert all(len(w._slices) <= SLICES + 1 for w in m.windows.values())
    assert max(len(w.total.counts) for w in m.windows.values()) < 300  # 1 % buckets of 5 ms ... 50 ms
    clock[0] += 7200
    assert series() == want
