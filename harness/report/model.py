"""The report as typed models: :class:`Report`, its step rows (:class:`StepRow`) and section types.

``report.json`` is the serialisation of a :class:`Report` (:meth:`Report.to_json`); :func:`load_report` is the one
reader of it. Field names are the JSON keys (the layout did not change with the models, so the schema stays
``llmload-report/1``: a report.json written before the models loads unchanged, see ``docs/report-model.md``).

Why pydantic (v2) and not dataclasses: ``report.json`` is read back (``llmload compare``, the web UI's cache), and
pydantic validates it on read with messages naming the bad key, gives the JSON round-trip and a JSON Schema
(:meth:`pydantic.BaseModel.model_json_schema`) for free, and ``model_fields_set`` tells a key written as null from a
key that was absent (older files lack keys added since), so :meth:`ReportModel.as_dict` reproduces a file exactly.

Units follow :mod:`harness.report.build`: seconds (``*_s``; ``*_wall`` epoch seconds), tokens, tokens per second
(``*_tps``), requests per second (``*_rate``, ``*_rps``), percentages (``*_pct``, 0..100), shares (``*_share``,
0..1), hours, US$. A figure that could not be computed (no sample, NaN, infinite) is None.

Every field has a default so that a report.json of an earlier version (which lacks keys added later) still loads;
a report built now sets every field (``tests/report/test_model.py`` checks it). Unknown keys are kept (``extra``),
so an old or newer file round-trips; :func:`undeclared_keys` lists them, and a freshly built report has none.

The renderers (render.py, summary.py, html.py, the web UI's cache and view) take a :class:`Report` and read
attributes; one that still accepts a report dict validates it at its boundary with :func:`as_report`.
Transitional: the models also have a read-only Mapping-style ``model["key"]`` / ``model.get("key")`` /
``"key" in model``, so code and tests written against the dict keep working until they move to attributes; new
code reads attributes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "KNOWN_SCHEMAS",
    "SCHEMA",
    "BatchInterval",
    "CostFigures",
    "DriftFit",
    "FailureClass",
    "FailureMessage",
    "FigureMeta",
    "FinishReasonRow",
    "HoursEntry",
    "HoursInterval",
    "HoursWhatIf",
    "IntervalCrossCheck",
    "Num",
    "PromptRow",
    "RateFigures",
    "RealTime",
    "Report",
    "ReportError",
    "ReportModel",
    "SearchFigure",
    "SearchProbe",
    "SearchResult",
    "SettingRow",
    "SliceRow",
    "SloCapacity",
    "SloThresholds",
    "StepDrift",
    "StepRow",
    "Totals",
    "TurnRow",
    "UsableIsSuccess",
    "Warmup",
    "as_report",
    "load_report",
    "undeclared_keys",
]

#: Identifies the layout of ``report.json`` (unchanged by the typed models: see the module docstring).
SCHEMA = "llmload-report/1"
#: The ``report.json`` schemas :func:`load_report` reads.
KNOWN_SCHEMAS = frozenset({SCHEMA})

#: A number as written: an int stays an int and a float a float (so a report.json round-trips value for value;
#: pydantic's ``float`` would turn a JSON ``1`` into ``1.0``).
Num: TypeAlias = float | int


class ReportError(ValueError):
    """A ``report.json`` that cannot be read: unreadable, not JSON, of an unknown schema, or not a report."""


class ReportModel(BaseModel):
    """Base of every report model: unknown keys kept (``extra="allow"``), :meth:`as_dict` for JSON."""

    model_config = ConfigDict(extra="allow", validate_assignment=False)

    # Transitional Mapping-style read (module docstring): to be removed once every reader uses attributes.

    def __getitem__(self, key: str) -> Any:
        """Transitional read-only access by JSON key, as on :meth:`as_dict` (``row["output_tps"]`` is
        ``row.output_tps``).

        Raises:
            KeyError: ``key`` is not a key of :meth:`as_dict` (no such field, or a field an older report.json did
                not have).
        """
        if key in type(self).model_fields and key in self.model_fields_set:
            return getattr(self, key)
        extra = self.model_extra or {}
        if key in extra:
            return extra[key]
        raise KeyError(key)

    def get(self, key: str, default: Any = None) -> Any:
        """Transitional: ``self[key]``, or ``default`` for an unknown key (a None value is returned as None)."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        """Transitional: whether ``key`` is a key of :meth:`as_dict` (a field that was set, or an extra key)."""
        return isinstance(key, str) and (key in self.model_fields_set or key in (self.model_extra or {}))

    def keys(self) -> list[str]:
        """Transitional: the JSON keys of :meth:`as_dict`, in order."""
        return list(self.as_dict())

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict this model was built or read from: the keys that were set (a key absent from an
        older report.json stays absent), nested models as dicts."""
        return self.model_dump(mode="json", exclude_unset=True)

    def pick(self, keys: Sequence[str]) -> dict[str, Any]:
        """``{key: value}`` for each of ``keys`` (field names), in that order, as :meth:`as_dict` holds the value
        (JSON-ready, nested models as dicts); None for a key that is not set (absent from an older report.json).
        For JSON built from a few figures of a model (the web view's rows)."""
        data = self.model_dump(mode="json", include=set(keys), exclude_unset=True)
        return {k: data.get(k) for k in keys}


class Warmup(ReportModel):
    """The ``warmup`` block: warm-up requests (excluded from every figure)."""

    requests: int = 0
    completed: int = 0
    errors: int = 0
    errors_by_class: dict[str, int] = Field(default_factory=dict)
    e2e_p50_s: Num | None = None
    e2e_max_s: Num | None = None


class Totals(ReportModel):
    """The ``totals`` block over every non-warm-up request (counts; ``estimated_tokens_share`` 0..1)."""

    requests: int = 0
    completed: int = 0
    errors: int = 0
    errors_by_class: dict[str, int] = Field(default_factory=dict)
    usable: int = 0
    hidden_reasoning: int = 0
    truncated: int = 0
    suspect_truncations: int = 0
    estimated_tokens: int = 0
    estimated_tokens_share: Num | None = None


class FinishReasonRow(ReportModel):
    """One entry of a row's ``by_finish_reason``: the sample's successful requests ending with that reason."""

    requests: int = 0
    ttft_p50_s: Num | None = None
    ttfat_p50_s: Num | None = None
    e2e_p50_s: Num | None = None
    mean_output_tokens: Num | None = None
    mean_reasoning_tokens: Num | None = None
    mean_answer_tokens: Num | None = None


class FailureMessage(ReportModel):
    """One distinct server message of an error class (:func:`harness.failures.summarise`): the first text seen
    of its normalised key (≤ 160 chars, secrets redacted), the failed requests carrying it, and what to check."""

    message: str = ""
    count: int = 0
    hint: str | None = None


class FailureClass(ReportModel):
    """One entry of a row's ``failures``: the failed requests of an error class started in the step, with their
    top distinct server messages (most frequent first)."""

    error_class: str = ""
    count: int = 0
    messages: list[FailureMessage] = Field(default_factory=list)


class IntervalCrossCheck(ReportModel):
    """The other method's interval over the same window (``hours_interval.cross_check``): batch means beside a
    closed loop's renewal-reward, renewal-reward beside an open loop's batch means
    (:func:`harness.report.figures.interval_info`). ``agree``: the two 95 % intervals of the rate overlap (None
    when either has none)."""

    method: str = "batch_means"
    batches: int | None = None
    batch_s: Num | None = None
    rate_low: Num | None = None
    rate_high: Num | None = None
    rel_halfwidth: Num | None = None
    agree: bool | None = None
    reason: str | None = None


class BatchInterval(ReportModel):
    """A row's ``hours_interval``: THE interval's method and figures behind the hours interval
    (:func:`harness.report.figures.interval_info`). ``method``: ``renewal_reward`` (closed loops, and open loops
    that fell behind), ``open_loop_batch_means`` (rate steps that kept up), or ``batch_means`` (reports written
    before renewal-reward). Renewal-reward figures: ``cycles``, ``streams``, ``dof``, ``bandwidth``,
    ``inflation``; batch means: ``batches``, ``batch_s``; either: ``rate`` (usable/s), ``rate_se`` (its SE),
    ``sigma2``, ``t``, ``rel_halfwidth``, ``reason`` (why no interval)."""

    method: str = "batch_means"
    method_why: str | None = None
    open_loop: bool | None = None
    batches: int = 0
    batch_s: Num | None = None
    cycles: int | None = None
    streams: int | None = None
    dof: int | None = None
    bandwidth: int | None = None
    inflation: Num | None = None
    rate: Num | None = None
    rate_se: Num | None = None
    sigma2: Num | None = None
    t: Num | None = None
    rel_halfwidth: Num | None = None
    reason: str | None = None
    needed_window_s: Num | None = None
    needed_duration_s: Num | None = None
    duration_key: str | None = None
    cross_check: IntervalCrossCheck | None = None


#: The name of THE hours interval's model (the class name predates renewal-reward).
HoursInterval = BatchInterval


class UsableIsSuccess(ReportModel):
    """What-if hours with usable = success (hours)."""

    hours: Num | None = None
    hours_low: Num | None = None
    hours_high: Num | None = None


class HoursWhatIf(ReportModel):
    """An hours entry's what-ifs: hours per 1,000 output tokens per usable sample, and usable = success."""

    hours_per_1k_output_tokens: Num | None = None
    usable_is_success: UsableIsSuccess = Field(default_factory=UsableIsSuccess)


class HoursEntry(ReportModel):
    """One hours-to-N entry (:func:`harness.report.figures.hours_entry`): hours, interval (None: unbounded), rate
    bounds (usable samples/s), the token cross-check and the what-ifs; US$ keys with a price."""

    n: int = 0
    hours: Num | None = None
    hours_low: Num | None = None
    hours_high: Num | None = None
    samples_per_hour: Num | None = None
    rate_low: Num | None = None
    rate_high: Num | None = None
    token_hours: Num | None = None
    token_check: str | None = None
    what_if: HoursWhatIf = Field(default_factory=HoursWhatIf)
    # with a price (harness.report.cost.hours_cost)
    usd: Num | None = None
    usd_low: Num | None = None
    usd_high: Num | None = None
    token_usd: Num | None = None


class CostFigures(ReportModel):
    """A row's ``cost`` (:func:`harness.report.cost.cost_figures`): US$/h, US$ per 1M output tokens, US$ per 1,000
    usable samples and its interval."""

    usd_per_hour: Num | None = None
    usd_per_1m_output_tokens: Num | None = None
    usd_per_1k_usable: Num | None = None
    usd_per_1k_usable_low: Num | None = None
    usd_per_1k_usable_high: Num | None = None


class RealTime(ReportModel):
    """A row's ``real_time``: its figures converted from compressed simulator time (durations ÷ time_scale, rates ×
    time_scale; :func:`harness.report.figures.real_time`), with ``cost`` when priced."""

    time_scale: Num = 1.0
    window_s: Num | None = None
    output_tps: Num | None = None
    request_rate: Num | None = None
    per_stream_tps: Num | None = None
    ttft_p50_s: Num | None = None
    ttfat_p50_s: Num | None = None
    e2e_p50_s: Num | None = None
    tpot_mean_s: Num | None = None
    e2e_mean_s: Num | None = None
    hours: list[HoursEntry] = Field(default_factory=list)
    cost: CostFigures | None = None


class SliceRow(ReportModel):
    """One soak slice of a steady window (:func:`harness.report.soak.step_slices`)."""

    start_s: Num | None = None
    start_wall: Num | None = None
    end_wall: Num | None = None
    output_tokens: Num | None = None
    output_tps: Num | None = None
    usable_completions: int = 0
    request_rate: Num | None = None
    ended: int = 0
    errors: int = 0
    error_rate: Num | None = None
    truncated: int = 0
    truncation_rate: Num | None = None
    ttft_p50_s: Num | None = None
    ttft_p99_s: Num | None = None
    ttfat_p50_s: Num | None = None
    ttfat_p99_s: Num | None = None


class DriftFit(ReportModel):
    """One drift fit over a step's slices (:func:`harness.report.soak.step_drift`): OLS slope per hour, its 95 %
    interval, as % of the mean per hour, and whether it is flagged."""

    n: int = 0
    mean: Num | None = None
    slope_per_h: Num | None = None
    slope_low_per_h: Num | None = None
    slope_high_per_h: Num | None = None
    t975: Num | None = None
    slope_pct_per_h: Num | None = None
    low_pct_per_h: Num | None = None
    high_pct_per_h: Num | None = None
    change_pct: Num | None = None
    significant: bool = False
    flagged: bool = False
    text: str = ""


class StepDrift(ReportModel):
    """A row's ``drift``: one fit per figure (None with fewer than 3 slices)."""

    output_tps: DriftFit | None = None
    ttft_p50_s: DriftFit | None = None
    error_rate: DriftFit | None = None


class RateFigures(ReportModel):
    """A rate step's ``rate`` (:func:`harness.report.rate.rate_figures`): schedule, achieved rate, lateness and
    service vs schedule-relative latency."""

    target_rate: Num = 0.0
    arrival: str | None = None
    burstiness: Num | None = None
    max_concurrency: int | None = None
    users: int | None = None
    schedule_window_s: Num | None = None
    scheduled: int | None = None
    sent: int = 0
    scheduled_rate: Num | None = None
    achieved_rate: Num | None = None
    shortfall: Num | None = None
    requests: int = 0
    late: int = 0
    late_share: Num | None = None
    late_free_user: int | None = None
    dispatch_delay_p50_s: Num | None = None
    dispatch_delay_p99_s: Num | None = None
    dispatch_delay_max_s: Num | None = None
    ttft_p50_s: Num | None = None
    ttft_p99_s: Num | None = None
    sched_ttft_p50_s: Num | None = None
    sched_ttft_p99_s: Num | None = None
    sched_ttft_mean_s: Num | None = None
    e2e_p50_s: Num | None = None
    e2e_p99_s: Num | None = None
    e2e_mean_s: Num | None = None
    sched_e2e_p50_s: Num | None = None
    sched_e2e_p99_s: Num | None = None
    sched_e2e_mean_s: Num | None = None


class StepRow(ReportModel):
    """One row of ``steps``: a single-stream phase or load step (:func:`harness.report.columns.step_rows`, then
    goodput, slices, drift and rate from :func:`harness.report.build.run_figures`). Units: module docstring."""

    # identity and window (harness.report.figures.row_header)
    label: str = ""
    phase: str = "step"
    step: int = 0
    concurrency: int = 1
    setting: str | None = None
    start_wall: Num | None = None
    end_wall: Num | None = None
    duration_s: Num | None = None
    planned_duration_s: Num | None = None
    end_source: str | None = None
    steady: bool = False
    not_steady_reason: str | None = None
    first_wave_end_s: Num | None = None
    first_wave_users: int | None = None
    first_wave_method: str | None = None
    window_start_wall: Num | None = None
    window_end_wall: Num | None = None
    window_start_s: Num | None = None
    window_s: Num = 0.0
    sample: str | None = None
    # counts
    sample_requests: int = 0
    requests: int = 0
    step_completed: int = 0
    step_errors: int = 0
    step_errors_by_class: dict[str, int] = Field(default_factory=dict)
    failures: list[FailureClass] = Field(default_factory=list)
    completed: int = 0
    errors: int = 0
    errors_by_class: dict[str, int] = Field(default_factory=dict)
    error_rate: Num | None = None
    usable: int = 0
    usable_reasons: dict[str, int] = Field(default_factory=dict)
    truncated: int = 0
    truncated_pct: Num | None = None
    truncated_in_reasoning: int = 0
    truncated_in_reasoning_pct: Num | None = None
    suspect_truncations: int = 0
    estimated_tokens_share: Num | None = None
    hidden_reasoning: int = 0
    hidden_reasoning_share: Num | None = None
    # throughput
    window_output_tokens: Num | None = None
    output_tps: Num | None = None
    output_tps_reasoning: Num | None = None
    output_tps_answer: Num | None = None
    tokens_by: str | None = None
    window_usable_completions: int = 0
    request_rate: Num | None = None
    completion_rate: Num | None = None
    e2e_mean_s: Num | None = None
    littles_law_c: Num | None = None
    littles_law_ok: bool | None = None
    # latency
    latency_n: int = 0
    ttft_p50_s: Num | None = None
    ttft_p90_s: Num | None = None
    ttft_p95_s: Num | None = None
    ttft_p99_s: Num | None = None
    ttfat_n: int = 0
    ttfat_p50_s: Num | None = None
    ttfat_p90_s: Num | None = None
    ttfat_p95_s: Num | None = None
    ttfat_p99_s: Num | None = None
    gap_n: int = 0
    gap_p50_s: Num | None = None
    gap_p95_s: Num | None = None
    gap_p99_s: Num | None = None
    tpot_mean_s: Num | None = None
    tpot_p50_s: Num | None = None
    e2e_p50_s: Num | None = None
    per_stream_tps: Num | None = None
    mean_output_tokens: Num | None = None
    mean_output_tokens_usable: Num | None = None
    mean_reasoning_tokens: Num | None = None
    mean_answer_tokens: Num | None = None
    usable_share: Num | None = None
    tokens_per_usable: Num | None = None
    usable_criterion: str | None = None
    by_finish_reason: dict[str, FinishReasonRow] = Field(default_factory=dict)
    # hours to N
    hours_interval: BatchInterval = Field(default_factory=BatchInterval)
    hours: list[HoursEntry] = Field(default_factory=list)
    # client lag
    client_lag_requests: int = 0
    client_read_lag_p50_s: Num | None = None
    client_read_lag_p99_s: Num | None = None
    client_read_lag_max_s: Num | None = None
    client_lagged_pct: Num | None = None
    client_starved: bool | None = None
    users_seen: int | None = None
    low_confidence: str | None = None
    low_confidence_fix: str | None = None
    real_time: RealTime | None = None
    cost: CostFigures | None = None
    # self-certification (harness.report.selfcert)
    client_processes: int = 0
    client_cpu_share_max: Num | None = None
    client_chunks_per_s_proc: Num | None = None
    client_ttft_error_bound_s: Num | None = None
    client_itl_error_bound_s: Num | None = None
    client_selfcert: str | None = None
    client_selfcert_range: dict[str, Num] | None = None
    # goodput (harness.report.goodput.add_goodput; None without slo)
    slo_sample_n: int | None = None
    slo_met: int | None = None
    slo_met_share: Num | None = None
    slo_window_met: int | None = None
    goodput_rps: Num | None = None
    # soak and rate
    slices: list[SliceRow] = Field(default_factory=list)
    drift: StepDrift = Field(default_factory=StepDrift)
    rate: RateFigures | None = None
    # steps.until (harness.report.until.add_until): None without an until event for the step
    until_margin: Num | None = None
    until_reached: bool | None = None
    margin_reached_s: Num | None = None
    margin_halfwidth: Num | None = None
    until_at_s: Num | None = None


class SloThresholds(ReportModel):
    """The report's ``slo``: the profile's SLOs (seconds; :class:`harness.config.SloSpec` as dumped)."""

    ttft_s: Num | None = None
    ttfat_s: Num | None = None
    tpot_s: Num | None = None
    e2e_s: Num | None = None
    target_share: Num | None = None


class SloCapacity(ReportModel):
    """The report's ``slo_capacity`` (:func:`harness.report.goodput.slo_capacity`)."""

    slo: dict[str, Num] = Field(default_factory=dict)
    target_share: Num | None = None
    concurrency: int | None = None
    steps: list[str] = Field(default_factory=list)
    slo_met_share: Num | None = None
    goodput_rps: Num | None = None
    failing: list[str] = Field(default_factory=list)


class SearchFigure(ReportModel):
    """One SLO figure of a search probe: the percentile, its 95 % interval (None: unbounded), threshold, pass."""

    value: Num | None = None
    low: Num | None = None
    high: Num | None = None
    threshold: Num | None = None
    ok: bool = False
    n: int = 0


class SearchProbe(ReportModel):
    """One probe of the SLO capacity search (:meth:`harness.search.Probe.as_dict`)."""

    setting: Num = 0.0
    step: int = 0
    passed: bool = False
    figures: dict[str, SearchFigure] = Field(default_factory=dict)
    sample: int = 0
    window_s: Num = 0.0
    reason: str | None = None
    inconclusive: bool = False
    extensions: int = 0
    #: ``(start, end)`` epoch seconds the step was measured over (None in reports written before it was kept).
    span: list[Num] | None = None


class SearchResult(ReportModel):
    """The report's ``search`` (:meth:`harness.search.CapacitySearch.result`)."""

    axis: str = "concurrency"
    low: Num = 0.0
    high: Num = 0.0
    tolerance: Num = 0.0
    highest_pass: SearchProbe | None = None
    lowest_fail: SearchProbe | None = None
    converged: bool = False
    verdict: str = ""
    inconclusive: list[Num] = Field(default_factory=list)
    probes: list[SearchProbe] = Field(default_factory=list)


class PromptRow(ReportModel):
    """One row of ``prompts`` (:func:`harness.report.diagnosis.prompt_rows`), per prompt class."""

    prompt: str = ""
    prompt_ids: list[str] = Field(default_factory=list)
    requests: int = 0
    completed: int = 0
    errors: int = 0
    usable: int = 0
    usable_pct: Num | None = None
    usable_reasons: dict[str, int] = Field(default_factory=dict)
    truncated: int = 0
    truncated_pct: Num | None = None
    truncated_in_reasoning: int = 0
    truncated_in_reasoning_pct: Num | None = None
    hidden_reasoning: int = 0
    max_tokens: int | None = None
    max_tokens_seen: list[int] = Field(default_factory=list)
    mean_reasoning_tokens: Num | None = None
    mean_answer_tokens: Num | None = None
    min_reasoning_tokens_truncated: int | None = None
    ttfat_p50_s: Num | None = None


class SettingRow(ReportModel):
    """One row of ``settings`` (:func:`harness.report.axes.setting_rows`): a (sweep-axes setting, step) pair."""

    setting: str = ""
    step: int = 0
    concurrency: int = 1
    steady: bool = False
    completed: int = 0
    ttft_p50_s: Num | None = None
    ttfat_p50_s: Num | None = None
    tpot_p50_s: Num | None = None
    e2e_p50_s: Num | None = None
    mean_reasoning_tokens: Num | None = None
    mean_answer_tokens: Num | None = None
    mean_output_tokens: Num | None = None
    usable_share: Num | None = None
    truncated_pct: Num | None = None
    output_tps: Num | None = None
    request_rate: Num | None = None
    n: int | None = None
    hours: Num | None = None
    hours_low: Num | None = None
    hours_high: Num | None = None
    usd: Num | None = None
    real_hours: Num | None = None
    real_usd: Num | None = None
    low_confidence: str | None = None
    client_starved: bool | None = None
    hidden_reasoning: int = 0


class TurnRow(ReportModel):
    """One row of ``turns`` (:func:`harness.report.turns.turn_rows`), per conversation turn index."""

    turn: int = 0
    requests: int = 0
    completed: int = 0
    ttft_p50_s: Num | None = None
    ttft_p90_s: Num | None = None
    ttft_mean_s: Num | None = None
    e2e_p50_s: Num | None = None
    mean_prompt_tokens: Num | None = None
    mean_cached_tokens: Num | None = None
    cached_share: Num | None = None
    cached_sent: int = 0
    mean_output_tokens: Num | None = None


class FigureMeta(ReportModel):
    """How a figure is shown, as ``report.json`` carries it under ``figures`` (by key): from the figure catalogue
    (:func:`harness.report.catalogue.catalogue_json`), so a reader of report.json alone can label and format it."""

    header: str = ""
    short: str = ""
    unit: str = ""
    display_unit: str = ""
    format: str = ""
    topic: str = ""


class Report(ReportModel):
    """The report of one run (:func:`harness.report.build.build_report`); ``report.json`` is its serialisation.

    Header: ``schema``, ``run_id``, ``run_dir``, ``status``, ``interrupted``, profile, ``target`` (run.json's target
    as written), ``model``, wall interval (epoch s), ``duration_s``, ``simulated`` / ``time_scale``, ``hours_to_n``.
    Blocks: ``warmup``, ``totals``, ``steps``, cost (``cost_usd_per_hour``), ``slice_s``, SLOs, search,
    ``prompts``, ``settings``, ``turns``, ``definitions`` (the formulas, by name), ``figures`` (each figure's
    header, units and format, from the catalogue; absent in report.json files written before the catalogue),
    ``notes`` and ``input_notes`` (those of the notes about the run directory's files).
    """

    schema_: str = Field(SCHEMA, alias="schema")
    run_id: str = ""
    run_dir: str = ""
    status: str = "unknown"
    interrupted: bool = False
    profile_name: str | None = None
    target: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None
    start_wall: Num | None = None
    end_wall: Num | None = None
    duration_s: Num | None = None
    simulated: bool = False
    time_scale: Num = 1.0
    hours_to_n: list[int] = Field(default_factory=list)
    warmup: Warmup = Field(default_factory=Warmup)
    totals: Totals = Field(default_factory=Totals)
    steps: list[StepRow] = Field(default_factory=list)
    cost_usd_per_hour: Num | None = None
    slice_s: Num | None = None
    slo: SloThresholds | None = None
    slo_capacity: SloCapacity | None = None
    search: SearchResult | None = None
    prompts: list[PromptRow] = Field(default_factory=list)
    settings: list[SettingRow] = Field(default_factory=list)
    turns: list[TurnRow] = Field(default_factory=list)
    definitions: dict[str, str] = Field(default_factory=dict)
    figures: dict[str, FigureMeta] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)
    #: The notes about the run directory itself, also the first of ``notes``: a torn last records line, a missing
    #: or unreadable ``run.json`` / ``phases.jsonl``, no records, lost workers, requests cut off (empty: none; absent
    #: from report.json files written before it).
    #: Every surface that shows a short summary (the terminal) shows these, since they change what the figures mean.
    input_notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())

    def __getitem__(self, key: str) -> Any:
        """Transitional Mapping-style read (:meth:`ReportModel.__getitem__`); ``"schema"`` reads ``schema_``."""
        return super().__getitem__("schema_" if key == "schema" else key)

    def __contains__(self, key: object) -> bool:
        """Transitional: ``key in report`` (``"schema"`` included)."""
        return super().__contains__("schema_" if key == "schema" else key)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (keys as in report.json; see :meth:`ReportModel.as_dict`)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    def to_json(self) -> str:
        """``report.json``'s text: :meth:`as_dict` as indented strict JSON (ASCII, as before the models)."""
        return json.dumps(self.as_dict(), indent=2, allow_nan=False) + "\n"


def undeclared_keys(model: BaseModel, where: str = "$") -> list[str]:
    """The paths (``$.steps[0].foo``) of every key of ``model`` and its nested models that no field declares
    (kept as extra keys). A report built by this version has none (tested); an older or newer file may."""
    out = [f"{where}.{k}" for k in (model.model_extra or {})]
    for name in type(model).model_fields:
        out += _undeclared_in(getattr(model, name), f"{where}.{name}")
    return out


def _undeclared_in(v: Any, where: str) -> list[str]:
    if isinstance(v, BaseModel):
        return undeclared_keys(v, where)
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in _undeclared_in(x, f"{where}[{i}]")]
    if isinstance(v, dict):
        return [p for k, x in v.items() for p in _undeclared_in(x, f"{where}.{k}")]
    return []


def parse_report(data: Any, source: str = "report") -> Report:
    """A :class:`Report` from the decoded JSON of a report.json (or a report dict).

    Raises:
        ReportError: not an object, an unknown ``schema``, no ``steps`` list, or a value of the wrong type.
    """
    if not isinstance(data, dict):
        raise ReportError(f"{source}: not a report (top level is not an object)")
    schema = data.get("schema")
    if schema not in KNOWN_SCHEMAS:
        known = ", ".join(sorted(KNOWN_SCHEMAS))
        raise ReportError(f"{source}: unknown report schema {schema!r} (this version reads {known})")
    if not isinstance(data.get("steps"), list):
        raise ReportError(f"{source}: report has no 'steps' list")
    try:
        return Report.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ReportError(f"{source}: not a valid report ({e.error_count()} problem(s); first at {where}: "
                          f"{first['msg']})") from e


def load_report(path: str | os.PathLike[str]) -> Report:
    """Read a ``report.json`` (this version's or an earlier one's: every schema in :data:`KNOWN_SCHEMAS`).

    Args:
        path: the file, or a run directory holding ``report.json``.

    Raises:
        ReportError: the file is unreadable, not JSON or not a report (see :func:`parse_report`).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{p}: unreadable report ({e})") from e
    return parse_report(data, str(p))


def as_report(report: Report | Mapping[str, Any], source: str = "report") -> Report:
    """``report`` as a :class:`Report`: a Report unchanged, a report dict (report.json's decoded JSON, e.g. from
    older code paths or a test) validated by :func:`parse_report`. The boundary of every renderer that still
    accepts a dict.

    Raises:
        ReportError: a dict that is not a report (see :func:`parse_report`).
    """
    if isinstance(report, Report):
        return report
    return parse_report(dict(report), source)
