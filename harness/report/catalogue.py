"""The catalogue of the report's figures: one typed entry per figure, the one place its header, unit, display
format and definition are declared, and the one set of functions every surface renders it with.

Every surface (``report.md`` and ``report.html`` via :mod:`harness.report.render`, the terminal summary
:mod:`harness.report.summary`, the web LLM view :mod:`harness.webui.view` and Locust's LLM tab
:mod:`harness.webui.routes`) takes a figure's header from its :class:`Figure` entry and its display string from
:func:`display`; ``report.json`` keeps the raw numbers in the entry's :attr:`Figure.unit` and carries the catalogue
itself (:func:`catalogue_json`). Adding a figure is one entry in :data:`FIGURES` (plus its test).

* :class:`Unit`: the physical unit of a value as ``report.json`` holds it (s, tok/s, req/s, tokens, %, share, h,
  US$, count); a figure's :attr:`Figure.display_unit` may differ (TPOT: s stored, ms shown; error rate: share
  stored, % shown), converted by :data:`CONVERSIONS`.
* :class:`Format`: one formatter per kind of display (the helpers of :mod:`harness.report.fmt`).
* :class:`Flag`: the marks a value or row carries (†, ‡, STARVED, § hidden reasoning, compressed time, no
  interval), each with one glyph and one text; :func:`with_flags` renders a value with its flags, :func:`label_text`
  a step label with its row's :data:`LABEL_FLAGS` (†, ‡, §), :func:`flags_legend` a legend of flags.
* :data:`TOPICS`: the definition texts (the report's Formulas, ``report.json``'s ``definitions``); each figure
  names the topic that defines it (:attr:`Figure.topic`), so one text serves every figure it defines.
* :func:`markdown_reference`: the report-figures reference page (key, header, unit, definition).

Rows are read with :func:`value`, which takes today's dict rows and attribute-style typed rows alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from harness.clientlag import CLIENT_LAG_LIMIT_S, CLIENT_STARVED_PCT
from harness.config import DEFAULT_SLICE_S
from harness.report import fmt
from harness.report.diagnosis import NOTE_PCT
from harness.report.rate import RATE_DEFINITIONS
from harness.report.search import SEARCH_DEFINITIONS
from harness.report.soak import DRIFT_MIN_ABS_CHANGE, DRIFT_MIN_CHANGE, MIN_SLICES

__all__ = [
    "CONVERSIONS", "DEFINITIONS", "FIGURES", "FLAG_KEYS", "LABEL_FLAGS", "TOPICS", "Figure", "Flag", "Format", "Unit",
    "catalogue_json", "cross_check_text", "display", "figure", "flags_legend", "group_header", "group_text",
    "hours_header", "hours_text", "interval_text", "label_flags", "label_text", "markdown_reference", "row_flags",
    "to_n_label", "usd_header", "usd_text", "value", "with_flags",
]  # fmt: skip


#: The definition of each topic of the report (the Formulas section; ``report.json``'s ``definitions``). A figure
#: refers to its topic by key (:attr:`Figure.topic`).
TOPICS: dict[str, str] = {
    "until": "steps.until: every check_every seconds from the step's min on, the relative half-width of the "
    "usable-sample rate's 95 % interval (t x SE / rate, harness.report.interval.renewal_reward over the requests that "
    "ended since the step's first wave ended, computed live on the master) is compared with the margin; the step ends "
    "at the first check where it is within the margin (margin reached at that many seconds into the step), else at "
    "its max (not reached). The half-width shown is the live one at the step's end; the report's interval is "
    "recomputed from every record and can differ slightly.",
    "warmup": "Warm-up requests (phase 'warmup', step -1) are excluded from every figure; they only count in the "
    "first wave of the single-stream phase when still in flight when it starts.",
    "step": "A step runs from its phase_start event to the next phase_start; the last one to load_end (in-flight "
    "requests then drain), else run_end, else (interrupted run) the latest request end. A request's end = "
    "start_wall + e2e.",
    "steady_window": "For step [s, e): for every user active in the step (users with a request of the step, plus "
    "users with a request in flight at s), take the end of its first request ending after s; the window start "
    "ws = max of those ends (the first wave has been replaced), window = [ws, e) (e = the next step's start; "
    "load_end for the last step, so the drain is outside). If ws >= e the step has no steady window and its row "
    "shows burst figures over [s, e) and the step's own requests, marked NOT steady.",
    "sample": "One sample per step: every request (ok or not) that ENDED inside the steady window, after ws and "
    "before e: (ws, e) (the request ending at ws, the last of the first wave, opened the window). Every "
    "column of the row (completed, errors, % truncated, usable share, mean output tokens, latency percentiles, "
    "per-stream tok/s, req/s, hours) is over it, success-only figures over its successes. Each such request "
    "started after s and ran entirely at the step's concurrency (none in the drain or the next step), and "
    "completions ending in a window are an unbiased (renewal) sample of steady state. 'started (whole step)' "
    "counts the requests that started in the step, for the record.",
    "output_tps": "Aggregate output tok/s = output tokens of successful requests (any step) that ARRIVED inside "
    "the window ÷ window length. tokens_by 'chunks': each token-bearing chunk's tokens at its arrival time "
    "(per-chunk usage; else the reasoning tokens split evenly over the chunks before ttfat and the answer tokens "
    "over the others, output_tps_phase; usage tokens beyond the chunks, e.g. EOS, at the request's end), "
    "from the records' chunk_times (output.chunk_times: true). tokens_by 'pro_rata' (no "
    "chunk times): each request's reasoning tokens spread uniformly over [start + ttft, start + ttfat] and its "
    "answer tokens over [start + ttfat, start + e2e] (without ttfat both over [start + ttft, start + e2e]; with "
    "hidden reasoning, generated before the first visible chunk, the reasoning over [start, start + ttft]), "
    "counted pro rata to the part inside the window (output_tps_phase). Failed requests' "
    "tokens are not counted.",
    "output_tps_phase": "Reasoning / answer tok/s (output_tps_reasoning, output_tps_answer) = reasoning / answer "
    "tokens of successful requests that ARRIVED inside the window ÷ window length; they sum to output_tps (its "
    "tokens are their sum: one rule). A request's reasoning tokens are reasoning_tokens (at most output_tokens), "
    "its answer tokens the rest. tokens_by 'chunks': a chunk arriving before the request's first answer token "
    "(before ttfat; every chunk without ttfat) is a reasoning chunk, else an answer chunk; with per-chunk usage "
    "each chunk's tokens count in its chunk's phase and the usage tokens beyond the chunks (at the end) as answer; "
    "without it the reasoning tokens are split evenly over the reasoning chunks and the answer tokens over the "
    "answer chunks (a phase without chunks: over all chunks). tokens_by 'pro_rata': reasoning tokens spread over "
    "[start + ttft, start + ttfat] ([start, start + ttft] with hidden reasoning; to the end without ttfat), answer "
    "tokens over [start + ttfat, end], each bound clipped into [start, end], counted pro rata.",
    "request_rate": "req/s = usable requests (success, not truncated, passing the profile's usable checks) whose "
    "end falls in the window ÷ window length.",
    "littles_law": "littles_law_c = (requests of the sample ÷ window length) × mean E2E over the sample; in a "
    "closed loop of C users it is ≈ C (less the users' time between requests). A mismatch above 10 % is a note: "
    "the window is not steady or the load generator did not keep C requests in flight.",
    "latency": "TTFT, TTFAT (over requests with an answer token), inter-chunk gaps (merged per-request log "
    "histograms, ±0.5 %), TPOT, E2E, per-stream tok/s (Σ streamed tokens ÷ Σ (e2e − ttft), a ratio of sums; "
    "streamed tokens = output tokens, or answer tokens for a request with hidden reasoning) and mean output tokens "
    "are over the successful requests of the sample. Percentiles interpolate linearly "
    "between closest ranks (numpy's default).",
    "hours": "Hours to N = N ÷ (r × 3600), r = k ÷ W, k = usable samples (success, not truncated, passing the "
    "profile's usable checks) ending in the steady window of W s. 95 % PREDICTION interval: closed-loop steps "
    "(and the single stream) by RENEWAL-REWARD over every stream's request cycles: cycle X = max(end, the "
    "user's next start) − start, reward Y = 1 if usable; residuals d = Y − R X, R = ΣY ÷ ΣX; V = Bartlett-weighted "
    "variance of Σd over the requests ordered by start (bandwidth L = min(n − 1, max(C, ⌈n^⅓⌉)), never below "
    "n × var(d)); SE = √(V + C ÷ 4) ÷ W (C ÷ 4: the window edges), σ² = V ÷ W, t with n − 1 dof; no interval "
    "with < 10 requests or < 5 usable ones ending in the window (a single stream needs 10 requests in its "
    "window). Open-loop (rate) steps that achieved their target rate: batch means with 20 fixed batches "
    "(completions mirror the arrivals; SE = sd(r_b) ÷ √20, σ² = L × var(r_b), t with 19 dof; renewal-reward when "
    "< 20 usable completions or when the target rate was not achieved). Rate bounds r ± t × √(SE² + σ² ÷ T_N), "
    "T_N = N ÷ r; hours bounds = N ÷ rate bounds (no upper bound when the lower rate bound ≤ 0). Cross-check "
    "(hours_interval.cross_check): batch means (B = 10 batches, fewer, at least 5, of ≥ 2 × mean E2E) beside "
    "renewal-reward, renewal-reward beside open-loop batch means; agree = their 95 % rate intervals overlap. "
    "Not a Poisson interval k ± 1.96√k: closed-loop completions are autocorrelated and not Poisson. A prediction "
    "interval because GPU time is booked for one future run of N samples, which varies on its own (the σ² ÷ T_N "
    "term) on top of the estimate's error (SE). Assumes no drift slower than the window (repeat runs or the soak "
    "drift figure see that). A step whose interval is wider than ±10 % gets a note with the window (SE ∝ 1 ÷ √W: "
    "W × (half-width ÷ 10 %)²) and step duration needed. What-ifs: hours per 1,000 output tokens per usable "
    "sample (hours × X ÷ mean output tokens of the usable requests, for a mean length X), and hours with usable = "
    "success (truncated counted).",
    "hours_tokens": "Cross-check only: hours by tokens (the seed article's method) = N × mean output tokens per "
    "successful request ÷ usable share (usable ÷ successful) ÷ aggregate tok/s ÷ 3600, over the sample. Noted "
    "when it falls outside the interval of the recommended figure.",
    "cost": "With the profile's cost (US$/h = cost.hour_usd, or cost.gpu_hour_usd × cost.gpus): US$ to N = hours "
    "to N × US$/h, and its interval the hours interval × US$/h (token-based likewise); US$ per 1,000 usable = the "
    "same for N = 1,000; US$ per 1M output tokens = US$/h ÷ (aggregate output tok/s × 3600) × 10⁶. Compressed-time "
    "runs also give them from the real-time equivalents.",
    "hidden_reasoning": "A request has hidden reasoning when usage counts reasoning tokens "
    "(completion_tokens_details.reasoning_tokens > 0) but no reasoning text was streamed (OpenAI-style). Its TPOT = "
    "(last chunk − TTFT) ÷ (answer tokens − 1) and decode rate = answer tokens ÷ (E2E − TTFT): only what was "
    "streamed; its reasoning rate is unknown (null).",
    "usable": "usable = success, not truncated, and passing every check of the profile's usable section "
    "(min_answer_tokens, answer_regex found in the answer text, answer_json: the answer parses as JSON, optionally "
    "inside a ```json fence); usable_reason says which failed (error, truncated, min_answer_tokens, regex, json).",
    "by_finish_reason": "Per step, over the successful requests of the sample (those that ended in the window): "
    "TTFT, "
    "TTFAT and E2E p50 and mean output / reasoning / answer tokens of the requests that ended with finish_reason "
    "'stop' and of those cut at max_tokens ('length'; other reasons when present). A suspect truncation (output "
    "tokens = max_tokens but the server did not say 'length') is its own group 'suspect_truncation', not in 'stop': "
    "it is counted as truncated.",
    "prompts": "Per prompt class (its id when it has no class), over every non-warm-up request of any step: "
    f"usable % of requests; truncated % and truncated in reasoning % of successful requests; mean reasoning and "
    f"answer tokens of successful requests; TTFAT p50 of those whose answer started. A note names a class whose "
    f"truncation or failed usable checks reach {NOTE_PCT:g} % of its successful requests, with the profile key "
    "to change.",
    "client_read_lag": "Client read lag of a request = the largest, over its response's reads, of (wall time this "
    "process read the bytes − the kernel's receive time of those bytes, SO_TIMESTAMPNS); recorded as read_lag_max "
    f"on plain HTTP on Linux, absent elsewhere. A step is client-STARVED when more than {CLIENT_STARVED_PCT:g} % of "
    f"its requests have a lag above {CLIENT_LAG_LIMIT_S:g} s: the load generator then started requests late, so "
    "that step's throughput, request rate and hours to N describe the client, not the server, and its latencies "
    "include client delays (chunk arrivals are kernel-stamped, but a request's send can be late).",
    "client_selfcert": "Self-certification, per step: client CPU = the largest, over the load-generating "
    "processes (the single process, or each worker), of (that process's CPU seconds, time.process_time, between its "
    "first and last client_cpu sample in the step) ÷ (the wall seconds between them), % of one core; samples are "
    "taken at each phase start, at the load's end and every 5 s on a worker. chunks/s per process = the largest, "
    "over the processes, of the token-bearing chunks of the requests that started in the step ÷ the step's length. "
    "TTFT / ITL error bound = the p99 of |harness − simulator truth| of TTFT and of inter-chunk gaps measured by "
    "the calibration (benchmarks/selfcert_calibrate.py) at the smallest calibrated load whose chunks/s per process "
    "and read lag p99 are both at least the step's, raised to the largest p99 measured at any smaller load; none "
    "(beyond the calibrated range) when no calibrated load covers the step, when the step is client-STARVED, or "
    "when nothing was kernel-stamped.",
    "goodput": "With the profile's slo (thresholds <ttft|ttfat|tpot|e2e>_p<q>_s, seconds, each optional, every "
    "key with the "
    "same q; the older ttft_s ... + target_share spelling reads the same): a "
    "request meets the SLOs when every given measurement is ≤ its threshold (a missing one, e.g. no TTFAT without "
    "an answer, does not). SLO met share = requests of the latency sample meeting all SLOs ÷ latency sample size; "
    "goodput (req/s) = usable requests (any step) meeting all SLOs whose end falls in the window ÷ window length, "
    "i.e. the request rate counting only requests within the SLOs.",
    "slo_capacity": "SLO capacity = the highest concurrency all of whose steps have SLO met share ≥ "
    "q ÷ 100 of the SLO keys (target_share in report.json; ttft_p95_s: 0.95 of requests within the TTFT SLO, i.e. "
    "TTFT p95 ≤ it; q = 100 would hinge on a step's single worst request).",
    "soak_slices": "Each steady window is cut into whole slices of report.slice_s seconds from its start (default "
    f"{DEFAULT_SLICE_S:g} s; a remainder shorter than a slice is left out; fewer than {MIN_SLICES} slices: none). "
    "Per slice: tok/s = output tokens generated in the slice (as output_tps) ÷ slice length; req/s = usable "
    "requests ending in it ÷ slice length; over the requests ending in the slice: TTFT and TTFAT p50/p99 "
    "(successful ones), error rate (failed ÷ ended), truncation rate (truncated ÷ successful).",
    "drift": "Per step with ≥ 3 slices, for tok/s, TTFT p50 and error rate: ordinary least-squares slope against "
    "slice mid-time (per hour), 95 % interval slope ± t(0.975, n − 2) × standard error, standard error = "
    "√(Σ residual² ÷ (n − 2) ÷ Σ (t − t̄)²); shown as % of the step's mean per hour. Flagged as drift when the "
    f"interval excludes 0 and |slope| × the slices' span exceeds {100 * DRIFT_MIN_CHANGE:g} % of the mean (for TTFT "
    f"p50 also {1000 * DRIFT_MIN_ABS_CHANGE['ttft_p50_s']:g} ms).",
    "turns": "Per conversation turn index (0 = a conversation's first), over every successful non-warm-up request "
    "of that turn, all steps together: TTFT p50/p90/mean and E2E p50, mean prompt tokens (the prompt grows with the "
    "turn), mean cached tokens (the server's usage.prompt_tokens_details.cached_tokens; none when it did not send "
    "them) and cached share = Σ cached tokens ÷ Σ prompt tokens.",
    **RATE_DEFINITIONS,
    **SEARCH_DEFINITIONS,
}
#: ``report.json``'s ``definitions``: the topic texts (kept under this name for the report's readers).
DEFINITIONS: dict[str, str] = TOPICS


class Unit(Enum):
    """The unit of a value: as ``report.json`` holds it (:attr:`Figure.unit`) or as a surface shows it
    (:attr:`Figure.display_unit`). ``value`` is its symbol."""

    S = "s"
    MS = "ms"
    TOK_S = "tok/s"
    REQ_S = "req/s"
    TOKENS = "tokens"
    PCT = "%"
    SHARE = "share"
    H = "h"
    USD = "US$"
    COUNT = "count"
    CHUNKS_S = "chunks/s"


#: Factor from a stored unit to a different display unit (stored value × factor = displayed value).
CONVERSIONS: dict[tuple[Unit, Unit], float] = {(Unit.S, Unit.MS): 1000.0, (Unit.SHARE, Unit.PCT): 100.0}


def _share3(v: float | None) -> str:
    return fmt.DASH if v is None else f"{v:.3f}"


def _int(v: float | None) -> str:
    return fmt.DASH if v is None else str(round(v))


def _fixed1(v: float | None) -> str:
    return fmt.DASH if v is None else f"{v:,.1f}"


class Format(Enum):
    """How a displayed value is written (one formatter each, :mod:`harness.report.fmt`); None renders ``–``."""

    INT = "int"  # a plain integer (concurrency: 2048, as in the step label C=2048)
    SIG3 = "sig3"  # 3 significant digits, integer part whole: 0.0221, 1.76, 17.6, 1,037 (s, ms, tok/s, req/s)
    FIXED1 = "fixed1"  # one decimal, thousands separated: window lengths (11.5)
    COUNT = "count"  # integer, thousands separated (1,235): counts and mean token counts
    PCT = "pct"  # one decimal (12.3): percentages
    SHARE = "share"  # three decimals (0.947): shares 0..1
    HOURS = "hours"  # 3 significant digits, None = unbounded (∞)
    USD = "usd"  # $ and 3 significant digits ($7.82)

    def __call__(self, v: float | None) -> str:
        """``v`` (already in the display unit) as text."""
        return _FORMATTERS[self](v)


_FORMATTERS: dict[Format, Callable[[float | None], str]] = {
    Format.INT: _int, Format.SIG3: fmt.sig3, Format.FIXED1: _fixed1, Format.COUNT: fmt.count, Format.PCT: fmt.pct,
    Format.SHARE: _share3, Format.HOURS: fmt.hours, Format.USD: fmt.usd,
}  # fmt: skip


@dataclass(frozen=True)
class Figure:
    """One figure of a report row.

    Attributes:
        key: its key in a step row of ``report.json`` (and in the typed row model).
        header: the full column header (``report.md``, ``report.html``, the web LLM view), e.g. ``TTFT p50 (s)``.
        short: the two-line terminal header, e.g. ``("TTFT", "p50 s")``; joined by a space it is the short header
            (Locust's LLM tab).
        unit: the unit of the stored value.
        display_unit: the unit it is shown in (value converted by :data:`CONVERSIONS` when it differs).
        format: how the displayed value is written.
        topic: the :data:`TOPICS` key whose text defines it.
        computed_by: what computes it (a function or expression of :mod:`harness.report.columns` or another
            report module), for the reference page.
        name: the figure's name within a group of columns (``TTFT``), with ``stat`` (``p50``): a surface that
            shows several stats of one name in one column uses :func:`group_header`.
        stat: see ``name`` (empty when the figure is not one stat of a distribution).
    """

    key: str
    header: str
    short: tuple[str, str]
    unit: Unit
    display_unit: Unit
    format: Format
    topic: str
    computed_by: str
    name: str = ""
    stat: str = ""

    @property
    def short_header(self) -> str:
        """The one-line short header (Locust's LLM tab): the two terminal lines joined."""
        return " ".join(p for p in self.short if p)

    @property
    def label(self) -> str:
        """Its name without the unit: ``TTFT p50`` for a stat of a distribution, else the header."""
        return f"{self.name} {self.stat}" if self.name else self.header

    @property
    def definition(self) -> str:
        """The text that defines it (:data:`TOPICS`)."""
        return TOPICS[self.topic]

    def scale(self, v: float | None) -> float | None:
        """``v`` (stored unit) in the display unit."""
        if v is None or self.unit == self.display_unit:
            return v
        return v * CONVERSIONS[(self.unit, self.display_unit)]

    def text(self, v: float | None) -> str:
        """``v`` (stored unit) as displayed: converted, then formatted (None → ``–``)."""
        return self.format(self.scale(v))


def _latency(key: str, name: str, stat: str, unit: Unit = Unit.S, topic: str = "latency") -> Figure:
    u = unit.value
    how = "latency means" if stat == "mean" else "latency percentiles, exprs.pctl"
    return Figure(key, f"{name} {stat} ({u})", (name, f"{stat} {u}"), Unit.S, unit, Format.SIG3, topic,
                  f"harness.report.columns.step_rows ({how})", name, stat)


_C = "harness.report.columns.step_rows"

#: Every catalogued figure, by report.json key, in the order the surfaces show them.
FIGURES: dict[str, Figure] = {f.key: f for f in (
    Figure("margin_reached_s", "margin reached at (s)", ("margin", "at s"), Unit.S, Unit.S, Format.FIXED1, "until",
           "harness.report.until.add_until (the step's until event)"),
    Figure("margin_halfwidth", "rate ± at step end (%)", ("rate ±", "%"), Unit.SHARE, Unit.PCT, Format.PCT, "until",
           "harness.report.until.add_until (the step's until event)"),
    Figure("concurrency", "C", ("", "C"), Unit.COUNT, Unit.COUNT, Format.INT, "step",
           "harness.report.figures.row_header (the step's phase_start)"),
    Figure("window_s", "steady window (s)", ("window", "s"), Unit.S, Unit.S, Format.FIXED1, "steady_window",
           "harness.report.figures.row_header (harness.report.steady)"),
    Figure("requests", "started (whole step)", ("started", "in step"), Unit.COUNT, Unit.COUNT, Format.COUNT,
           "sample", _C),
    Figure("completed", "completed", ("", "completed"), Unit.COUNT, Unit.COUNT, Format.COUNT, "sample", _C),
    Figure("errors", "errors", ("", "errors"), Unit.COUNT, Unit.COUNT, Format.COUNT, "sample", _C),
    Figure("error_rate", "% errors", ("%", "errors"), Unit.SHARE, Unit.PCT, Format.PCT, "sample", _C),
    Figure("request_rate", "req/s", ("", "req/s"), Unit.REQ_S, Unit.REQ_S, Format.SIG3, "request_rate", _C),
    Figure("output_tps", "output tok/s", ("output", "tok/s"), Unit.TOK_S, Unit.TOK_S, Format.SIG3, "output_tps",
           "harness.report.tokens.window_tokens ÷ window_s"),
    Figure("output_tps_reasoning", "reasoning tok/s", ("reasoning", "tok/s"), Unit.TOK_S, Unit.TOK_S,
           Format.SIG3, "output_tps_phase", "harness.report.tokens.window_tokens (reasoning) ÷ window_s"),
    Figure("output_tps_answer", "answer tok/s", ("answer", "tok/s"), Unit.TOK_S, Unit.TOK_S, Format.SIG3,
           "output_tps_phase", "harness.report.tokens.window_tokens (answer) ÷ window_s"),
    Figure("per_stream_tps", "per-stream tok/s", ("per-stream", "tok/s"), Unit.TOK_S, Unit.TOK_S, Format.SIG3,
           "latency", _C),
    _latency("ttft_p50_s", "TTFT", "p50"),
    _latency("ttft_p90_s", "TTFT", "p90"),
    _latency("ttft_p95_s", "TTFT", "p95"),
    _latency("ttft_p99_s", "TTFT", "p99"),
    _latency("ttfat_p50_s", "TTFAT", "p50"),
    _latency("ttfat_p90_s", "TTFAT", "p90"),
    _latency("ttfat_p95_s", "TTFAT", "p95"),
    _latency("ttfat_p99_s", "TTFAT", "p99"),
    _latency("gap_p50_s", "inter-chunk", "p50", Unit.MS),
    _latency("gap_p95_s", "inter-chunk", "p95", Unit.MS),
    _latency("gap_p99_s", "inter-chunk", "p99", Unit.MS),
    _latency("tpot_mean_s", "TPOT", "mean", Unit.MS),
    _latency("tpot_p50_s", "TPOT", "p50", Unit.MS),
    _latency("e2e_p50_s", "E2E", "p50"),
    _latency("ttft_mean_s", "TTFT", "mean"),
    _latency("e2e_mean_s", "E2E", "mean"),
    Figure("mean_output_tokens", "mean out tok", ("mean", "out tok"), Unit.TOKENS, Unit.TOKENS, Format.COUNT,
           "latency", _C),
    Figure("mean_reasoning_tokens", "mean reasoning tok", ("mean", "reas. tok"), Unit.TOKENS, Unit.TOKENS,
           Format.COUNT, "by_finish_reason", _C),
    Figure("mean_answer_tokens", "mean answer tok", ("mean", "ans. tok"), Unit.TOKENS, Unit.TOKENS, Format.COUNT,
           "by_finish_reason", _C),
    Figure("truncated_pct", "% trunc", ("%", "trunc"), Unit.PCT, Unit.PCT, Format.PCT, "sample", _C),
    Figure("truncated_in_reasoning_pct", "% trunc in reasoning", ("% trunc", "in reas."), Unit.PCT, Unit.PCT,
           Format.PCT, "sample", _C),
    Figure("usable_pct", "% usable", ("%", "usable"), Unit.PCT, Unit.PCT, Format.PCT, "prompts",
           "harness.report.diagnosis.prompt_rows"),
    Figure("truncation_rate", "% trunc", ("%", "trunc"), Unit.SHARE, Unit.PCT, Format.PCT, "soak_slices",
           "harness.report.soak.step_slices"),
    Figure("ended", "ended", ("", "ended"), Unit.COUNT, Unit.COUNT, Format.COUNT, "soak_slices",
           "harness.report.soak.step_slices"),
    Figure("mean_prompt_tokens", "mean prompt tok", ("mean", "prompt tok"), Unit.TOKENS, Unit.TOKENS, Format.COUNT,
           "turns", "harness.report.turns.turn_rows"),
    Figure("mean_cached_tokens", "mean cached tok", ("mean", "cached tok"), Unit.TOKENS, Unit.TOKENS, Format.COUNT,
           "turns", "harness.report.turns.turn_rows"),
    Figure("cached_share", "cached share", ("cached", "share"), Unit.SHARE, Unit.SHARE, Format.SHARE, "turns",
           "harness.report.turns.turn_rows"),
    Figure("usable_share", "usable/ok", ("usable", "/ok"), Unit.SHARE, Unit.SHARE, Format.SHARE, "usable", _C),
    _latency("client_read_lag_p50_s", "client read lag", "p50", topic="client_read_lag"),
    _latency("client_read_lag_p99_s", "client read lag", "p99", topic="client_read_lag"),
    Figure("client_cpu_share_max", "client CPU (% of a core)", ("client", "CPU %"), Unit.SHARE, Unit.PCT,
           Format.PCT, "client_selfcert", "harness.report.selfcert.cpu_shares (client_cpu events)"),
    Figure("client_chunks_per_s_proc", "chunks/s per process", ("chunks/s", "/process"), Unit.CHUNKS_S,
           Unit.CHUNKS_S, Format.SIG3, "client_selfcert", "harness.report.selfcert.chunk_rates"),
    Figure("client_ttft_error_bound_s", "TTFT error bound p99 (ms)", ("TTFT err", "bound ms"), Unit.S, Unit.MS,
           Format.SIG3, "client_selfcert", "harness.report.selfcert.error_bound (CALIBRATION)"),
    Figure("client_itl_error_bound_s", "ITL error bound p99 (ms)", ("ITL err", "bound ms"), Unit.S, Unit.MS,
           Format.SIG3, "client_selfcert", "harness.report.selfcert.error_bound (CALIBRATION)"),
    Figure("slo_sample_n", "latency sample", ("latency", "sample"), Unit.COUNT, Unit.COUNT, Format.COUNT,
           "goodput", "harness.report.goodput.add_goodput"),
    Figure("slo_met_share", "% meeting all SLOs", ("% meeting", "all SLOs"), Unit.SHARE, Unit.PCT, Format.PCT,
           "goodput", "harness.report.goodput.add_goodput"),
    Figure("goodput_rps", "goodput (req/s)", ("goodput", "req/s"), Unit.REQ_S, Unit.REQ_S, Format.SIG3, "goodput",
           "harness.report.goodput.add_goodput"),
    Figure("hours", "hours to N", ("hours to", "N"), Unit.H, Unit.H, Format.HOURS, "hours",
           "harness.report.figures.hours_entry (harness.report.hours.hours_interval)"),
    Figure("usd", "US$ to N", ("US$ to", "N"), Unit.USD, Unit.USD, Format.USD, "cost",
           "harness.report.cost.hours_cost"),
    Figure("usd_per_1m_output_tokens", "$ / 1M out tok", ("$ / 1M", "out tok"), Unit.USD, Unit.USD, Format.USD,
           "cost", "harness.report.cost.cost_figures"),
    Figure("usd_per_1k_usable", "$ / 1k usable", ("$ / 1k", "usable"), Unit.USD, Unit.USD, Format.USD, "cost",
           "harness.report.cost.cost_figures"),
)}


def figure(key: str) -> Figure:
    """The entry of ``key``. Raises KeyError for a key that is not catalogued."""
    return FIGURES[key]


def value(row: Any, key: str) -> Any:
    """``key`` of a report row: a mapping (today's dict rows) or an attribute-style typed model; None when absent.

    The one accessor every surface reads a row's figure with.
    """
    if isinstance(row, Mapping):
        return row.get(key)
    return getattr(row, key, None)


def display(row: Any, key: str) -> str:
    """The display string of figure ``key`` of ``row`` (converted to its display unit, formatted; ``–`` when
    missing). Raises KeyError when ``key`` is not catalogued."""
    return FIGURES[key].text(value(row, key))


def group_header(keys: Sequence[str]) -> str:
    """One header for several stats of one name in one column: ``TTFT p50/p90/p99 (s)``. All keys share the
    figure name and display unit (ValueError otherwise); one key gives its own header."""
    figs = [FIGURES[k] for k in keys]
    if len(figs) == 1:
        return figs[0].header
    if len({(f.name, f.display_unit) for f in figs}) != 1 or not figs[0].name:
        raise ValueError(f"not one group: {keys}")
    return f"{figs[0].name} {'/'.join(f.stat for f in figs)} ({figs[0].display_unit.value})"


def group_text(row: Any, keys: Sequence[str]) -> str:
    """The values of :func:`group_header`'s keys of ``row``, joined by `` / ``."""
    return " / ".join(display(row, k) for k in keys)


class Flag(Enum):
    """A mark a value or a row carries, with one glyph (how it is marked) and one text (what it means)."""

    NOT_STEADY = ("†", "NOT steady", "no steady window: burst figures over the whole step")
    LOW_CONFIDENCE = ("‡", "low confidence", "the steady window is too short or holds too few usable completions")
    STARVED = ("STARVED", "client STARVED", "the load generator could not keep up: the figures are its limit")
    HIDDEN_REASONING = ("§", "hidden reasoning",
                        "requests of the step had reasoning tokens counted but not streamed: TTFT includes the "
                        "reasoning, TPOT, decode rate and per-stream tok/s count the streamed answer only")
    COMPRESSED_TIME = ("COMPRESSED TIME", "COMPRESSED TIME",
                       "a time-compressed simulator run: figures in compressed wall time")
    NO_INTERVAL = ("no interval", "no interval",
                   "too few requests (< 10) or usable ones (< 5) ended in the window for an interval")
    NO_USABLE = ("no usable completions", "no usable completions", "no usable completion in the window: unbounded")

    @property
    def glyph(self) -> str:
        """How the flag is marked next to a value or label."""
        return str(self.value[0])

    @property
    def word(self) -> str:
        """Its name in prose and footnotes (``NOT steady``)."""
        return str(self.value[1])

    @property
    def text(self) -> str:
        """What the flag means (legends, tooltips)."""
        return str(self.value[2])

    @property
    def named(self) -> str:
        """Its glyph and word as a legend or note names it: ``† NOT steady``, ``§ hidden reasoning``, ``client
        STARVED`` (the glyph alone when the word holds it)."""
        return self.word if self.glyph in self.word else f"{self.glyph} {self.word}"


#: The flags a step label carries on every surface (in this order): ``C=64 †``, ``C=32 ‡ §``.
LABEL_FLAGS = (Flag.NOT_STEADY, Flag.LOW_CONFIDENCE, Flag.HIDDEN_REASONING)


#: The step-row key each row flag is read from (:func:`row_flags`): a surface shows these keys only as the flag's
#: mark, never as a figure.
FLAG_KEYS: dict[str, Flag] = {"steady": Flag.NOT_STEADY, "low_confidence": Flag.LOW_CONFIDENCE,
                              "client_starved": Flag.STARVED, "hidden_reasoning": Flag.HIDDEN_REASONING}


def row_flags(row: Any) -> tuple[Flag, ...]:
    """The flags of a step row: NOT_STEADY (``steady`` false), LOW_CONFIDENCE (``low_confidence`` set, steady rows
    only), STARVED (``client_starved``), HIDDEN_REASONING (``hidden_reasoning`` > 0 requests)."""
    out = []
    if not value(row, "steady"):
        out.append(Flag.NOT_STEADY)
    elif value(row, "low_confidence"):
        out.append(Flag.LOW_CONFIDENCE)
    if value(row, "client_starved"):
        out.append(Flag.STARVED)
    if value(row, "hidden_reasoning"):
        out.append(Flag.HIDDEN_REASONING)
    return tuple(out)


def with_flags(text: str, flags: Iterable[Flag]) -> str:
    """``text`` followed by each flag's glyph, space separated: ``C=8 †``, ``8 † STARVED``."""
    return " ".join([text, *(f.glyph for f in flags)])


def label_flags(flags: Iterable[Flag], extra: Iterable[Flag] = ()) -> list[Flag]:
    """Those of ``flags`` a step label shows: the :data:`LABEL_FLAGS` and those in ``extra``, in :class:`Flag`
    order."""
    have, shown = set(flags), set(LABEL_FLAGS) | set(extra)
    return [f for f in Flag if f in have and f in shown]


def label_text(row: Any, extra: Iterable[Flag] = ()) -> str:
    """A step's label with its :data:`LABEL_FLAGS` (``C=32 ‡``, ``C=64 †``, ``C=8 ‡ §``), plus those of ``extra``
    it has."""
    return with_flags(str(value(row, "label")), label_flags(row_flags(row), extra))


def flags_legend(flags: Iterable[Flag]) -> str:
    """One legend sentence for ``flags`` (in :class:`Flag` order): ``† NOT steady: no steady window: ...; ‡ ...``."""
    have = set(flags)
    return "; ".join(f"{f.named}: {f.text}" for f in Flag if f in have) + "."


def _interval(v: str, lo: float | None, hi: float | None, text: Callable[[float | None], str],
              unbounded: Callable[[float | None], str]) -> str:
    if lo is None and hi is None:
        return f"{v} ({Flag.NO_INTERVAL.glyph})"
    return f"{v} ({text(lo)}{fmt.DASH}{unbounded(hi)})"


def hours_text(h: Any) -> str:
    """One hours-to-N entry (a row's ``hours[i]``) as every surface shows it: ``27.1 h (25.0–30.2)`` with its
    95 % interval (``∞`` when unbounded above), ``159 h (no interval)``, ``∞ (no usable completions)``, ``–``
    when there is no entry."""
    if h is None:
        return fmt.DASH
    hv = value(h, "hours")
    if hv is None:
        return f"∞ ({Flag.NO_USABLE.glyph})"
    return _interval(f"{fmt.hours(hv)} h", value(h, "hours_low"), value(h, "hours_high"), fmt.sig3, fmt.hours)


def interval_text(row: Any, time_scale: float = 1.0) -> str:
    """THE hours interval's method and size of ``row`` (a step row; its ``hours_interval``) as every surface shows
    it: ``renewal-reward 120 req / 4 streams, ±6.1 %`` or ``batch means 20 × 1.5 s, ±8.0 %`` (batch length in s,
    ÷ ``time_scale`` for real time); ``none`` without an interval."""
    iv = value(row, "hours_interval")
    hw = value(iv, "rel_halfwidth") if iv is not None else None
    if hw is None:
        return "none"
    width = f", ±{100 * hw:.1f} %"
    batches, batch_s = value(iv, "batches"), value(iv, "batch_s")
    if batches and batch_s is not None:
        return f"batch means {batches} × {batch_s / time_scale:,.1f} s{width}"
    streams = value(iv, "streams") or 0
    return f"renewal-reward {value(iv, 'cycles') or 0} req / {streams} stream{'' if streams == 1 else 's'}{width}"


#: How an interval method (``hours_interval.method`` and its cross-check's) is named on every surface.
_METHOD_NAMES = {"renewal_reward": "renewal-reward", "batch_means": "batch means",
                 "open_loop_batch_means": "open-loop batch means"}


def cross_check_text(row: Any) -> str:
    """The other interval method's verdict on ``row``'s hours interval (``hours_interval.cross_check``):
    ``batch means ±7.9 %: agrees``, ``… : DISAGREES`` (the two 95 % rate intervals do not overlap), ``batch means:
    <why it has no interval>``; ``–`` when the row has no cross-check."""
    iv = value(row, "hours_interval")
    cc = value(iv, "cross_check") if iv is not None else None
    if cc is None:
        return fmt.DASH
    method = str(value(cc, "method") or "")
    name = _METHOD_NAMES.get(method, method.replace("_", " "))
    hw = value(cc, "rel_halfwidth")
    if hw is None:
        reason = value(cc, "reason")
        return f"{name}: {reason}" if reason else f"{name}: no interval"
    agree = value(cc, "agree")
    verdict = "agrees" if agree else ("DISAGREES" if agree is not None else "not compared")
    return f"{name} ±{100 * hw:.1f} %: {verdict}"


def usd_text(v: float | None, lo: float | None, hi: float | None) -> str:
    """US$ with its 95 % interval: ``$7.82 ($7.10–$8.70)``, ``$7.82 (no interval)``, ``∞`` bounds when
    unbounded; ``–`` without a value."""
    if v is None:
        return fmt.DASH

    def usd(x: float | None) -> str:
        return "∞" if x is None else fmt.usd(x)

    return _interval(usd(v), lo, hi, usd, usd)


def to_n_label(key: str, n: int) -> str:
    """The name of figure ``key`` (``hours`` or ``usd``) to ``n`` usable samples: ``hours to N=100,000``,
    ``US$ to N=100,000``. Raises KeyError when ``key`` is not catalogued."""
    return f"{FIGURES[key].short[0]} N={n:,}"


def hours_header(n: int) -> str:
    """The header of the hours-to-N column of ``n`` with its interval: ``hours to N=100,000 (95 %)``."""
    return f"{to_n_label('hours', n)} (95 %)"


def usd_header(n: int) -> str:
    """The header of the US$-to-N column of ``n``: ``US$ to N=100,000 (95 %)``."""
    return f"{to_n_label('usd', n)} (95 %)"


def catalogue_json() -> dict[str, dict[str, Any]]:
    """The catalogue as ``report.json`` carries it: per key ``header``, ``short``, ``unit``, ``display_unit``,
    ``format``, ``topic``."""
    return {
        f.key: {"header": f.header, "short": f.short_header, "unit": f.unit.value,
                "display_unit": f.display_unit.value, "format": f.format.value, "topic": f.topic}
        for f in FIGURES.values()
    }


def markdown_reference() -> str:
    """The report-figures reference page (Markdown): a table of every figure (key, header, unit stored,
    unit shown, computed by) and then each topic's definition, with the figures it defines."""
    lines = ["# Report figures", "",
             "Every figure of a report row, as declared in `harness/report/catalogue.py` (generated from it). "
             "`report.json` holds each value in its unit; every surface shows it in its display unit.", "",
             "| key | header | unit | shown in | computed by |", "|---|---|---|---|---|"]
    for f in FIGURES.values():
        lines.append(f"| `{f.key}` | {f.header} | {f.unit.value} | {f.display_unit.value} | `{f.computed_by}` |")
    lines += ["", "## Flags", "", "| mark | name | meaning |", "|---|---|---|"]
    lines += [f"| {f.glyph} | {f.word} | {f.text} |" for f in Flag]
    lines += ["", f"A step's label carries its {', '.join(f.glyph for f in LABEL_FLAGS)} marks on every surface "
              "(`harness.report.catalogue.label_text`: `C=64 †`, `C=32 ‡ §`); the others are shown next to the "
              "value or in the notes."]
    lines += ["", "## Definitions", ""]
    for topic, text in TOPICS.items():
        keys = [f"`{f.key}`" for f in FIGURES.values() if f.topic == topic]
        lines += [f"### {topic}", "", text, ""]
        if keys:
            lines += [f"Figures: {', '.join(keys)}.", ""]
    return "\n".join(lines)
