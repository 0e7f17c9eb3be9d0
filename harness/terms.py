"""The field's terms: one typed entry per measurement the harness defines, the one place its definition text is
declared.

Every surface renders these entries: the "Metric definitions" reference page is generated from :data:`TERMS`
(:func:`harness.docs_ref.terms_markdown`, ``<!-- generated: metric-terms -->`` in
``docs/reference/metric-definitions.md``). A :class:`Term` names the record field(s) it is stored in
(:data:`harness.result.RECORD_FIELDS`) and, when a report figure is computed from it, the topic of the figure
catalogue that defines that figure (:data:`harness.report.catalogue.TOPICS`): such a figure's rule is written once,
in its topic, and the term's text does not repeat it (the generated page links the topic's definition on the
"Report figures" page).

Imports nothing: the report's catalogue is named by key only, so this module is cheap to import anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INTRO", "TERMS", "Term", "term"]


@dataclass(frozen=True, slots=True)
class Term:
    """One term of the field.

    Attributes:
        name: the term as the docs and the report write it (``TTFT``, ``E2E latency``).
        definition: its definition (Markdown, one paragraph).
        expansion: the spelled-out name shown in parentheses after it, if any (``time to first answer token``).
        fields: the record fields it is stored in (:data:`harness.result.RECORD_FIELDS` names), if any.
        topics: the :data:`harness.report.catalogue.TOPICS` keys that define the report figures built on it (the
            exact rule lives there, not here).
    """

    name: str
    definition: str
    expansion: str = ""
    fields: tuple[str, ...] = ()
    topics: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """The name as the table shows it: ``TTFAT (time to first answer token)``."""
        return f"{self.name} ({self.expansion})" if self.expansion else self.name


#: The reference page's introduction (Markdown): the clocks every time is measured with.
INTRO = (
    "One definition per term, used by the records, Locust's table and the report. All times are measured on the "
    "client with a monotonic clock (`time.perf_counter`), from **request sent** = the moment the request bytes are "
    "written to an open connection (opening a new connection is timed separately as `connect`). A chunk's time is "
    "the arrival of the bytes that completed its SSE event (the blank line): on Linux over plain HTTP the kernel's "
    "receive timestamp of those bytes (`SO_TIMESTAMPNS`, records say `time_source: kernel`), so a busy client "
    "reading a burst of 64 streams does not delay its stamps; elsewhere (TLS, other systems) the moment the process "
    "read them (`time_source: read`). Against the simulator's ground truth at C=64 the harness's TTFT was within "
    "0.33–0.45 ms at p99 (under 1 ms max) in three runs."
)

#: Every term, in the order the reference page lists them (a term may refer to one "above" or "below").
TERMS: tuple[Term, ...] = (
    Term(
        "token-bearing chunk",
        "an SSE event whose first choice's delta has non-empty `content`, or non-empty reasoning text "
        "(`reasoning_content`, `reasoning`, or `reasoning_details[*].text`: the first non-empty of these, "
        "never their sum), or non-empty `tool_calls`. Role-only, empty-string, finish-only, usage-only, "
        "comment and `[DONE]` events are not.",
        fields=("chunks", "reasoning_chunks", "answer_chunks"),
    ),
    Term(
        "TTFT",
        "request sent → first token-bearing chunk of any channel (reasoning included). Comparable to vLLM's "
        "`vllm:time_to_first_token_seconds` plus network and client queueing.",
        fields=("ttft",),
        topics=("latency",),
    ),
    Term(
        "TTFAT",
        "request sent → first chunk with non-empty `content` (or `tool_calls`). Null when the answer never "
        "started (e.g. `max_tokens` spent in reasoning).",
        expansion="time to first answer token",
        fields=("ttfat",),
        topics=("latency",),
    ),
    Term(
        "reasoning time",
        "first reasoning chunk → first answer chunk (→ end of stream when there is no answer).",
        fields=("t_first_reasoning", "ttfat"),
    ),
    Term(
        "inter-chunk latency",
        "the gaps between consecutive token-bearing chunks. This is what `vllm bench serve` calls ITL. Stored "
        "per request as a log histogram with 1 % buckets (quantiles within ±0.5 %, exact min/max/mean).",
        fields=("gap_hist",),
        topics=("latency",),
    ),
    Term(
        "ITL",
        "chunk gap ÷ tokens in the later chunk, only when the server sends cumulative per-chunk usage "
        "(`continuous_usage_stats`, vLLM/SGLang); otherwise TPOT is the per-token figure. With speculative "
        "decoding a chunk carries several tokens, so inter-chunk latency ≠ ITL.",
        expansion="per token",
        fields=("itl_hist",),
    ),
    Term(
        "TPOT",
        "(last token-bearing chunk − first token-bearing chunk) ÷ (streamed tokens − 1); null with fewer than "
        "2 chunks or 2 streamed tokens. **Streamed tokens** = output tokens, except with hidden reasoning "
        "(below): answer tokens, since the hidden reasoning tokens were generated before the first visible "
        "chunk. The Prometheus TPOT histogram is fed from the record's `tpot`, so it follows the same rule.",
        fields=("tpot",),
        topics=("latency",),
    ),
    Term(
        "hidden reasoning",
        "usage counts reasoning tokens (`completion_tokens_details.reasoning_tokens` > 0) but no reasoning "
        "text was streamed (OpenAI-style; the simulator's `openai` flavour): record field `hidden_reasoning`. "
        "TTFT and TTFAT then include the whole reasoning, TPOT and the decode rate cover the streamed answer "
        "only, the reasoning rate is null. Spreading all usage tokens over the answer chunks instead gave "
        "TPOT 1.45 ms and 672 tok/s per stream where the truth was ~50 tok/s. The report counts such requests "
        "per step and says so in a note.",
        fields=("hidden_reasoning",),
        topics=("hidden_reasoning",),
    ),
    Term(
        "E2E latency",
        "request sent → last byte of the stream (end of the HTTP body). For a failed request: → the moment it "
        "failed.",
        fields=("e2e",),
        topics=("latency",),
    ),
    Term(
        "usage",
        "the `usage` object of an OpenAI-compatible response, which the harness always asks for "
        "(`stream_options.include_usage`; cumulative on every chunk too with `request.continuous_usage_stats`, "
        "vLLM/SGLang): `prompt_tokens`, `completion_tokens` (reasoning included), "
        "`completion_tokens_details.reasoning_tokens`, `prompt_tokens_details.cached_tokens`. Where sent, it is the "
        "source of the output, reasoning, prompt and cached tokens (output tokens, reasoning tokens and cached "
        "tokens below); without it output and reasoning tokens are estimated (flagged), prompt and cached tokens "
        "null.",
        fields=("prompt_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"),
    ),
    Term(
        "output tokens",
        "`usage.completion_tokens` when the server sends it (it includes reasoning tokens; `token_source: "
        "usage`). Otherwise a client-side estimate, ⌈UTF-8 bytes of the joined reasoning + answer text ÷ 4⌉, "
        "flagged `token_source: estimate` (the report shows the estimated share). Never one token per chunk.",
        fields=("output_tokens", "token_source"),
    ),
    Term(
        "reasoning tokens",
        "`usage.completion_tokens_details.reasoning_tokens` when it is positive and ≤ output tokens "
        "(`usage`); else, with per-chunk usage, the cumulative count at the last reasoning chunk "
        "(`chunk_usage`: exact up to the end-of-reasoning delimiter token, which vLLM counts with the first "
        "answer chunk or, when it coalesces tokens under load, with the last reasoning chunk; not used when a "
        "chunk carries both reasoning and answer text); else output tokens × reasoning chunks ÷ token-bearing "
        "chunks (`estimate`; chunks, not characters, because one server streams both phases with the same "
        "tokens per chunk); 0 when no reasoning was streamed (`none`). vLLM reports 0 in `reasoning_tokens` "
        "even when it streamed reasoning, hence \"positive\". **Answer tokens** = output − reasoning (so the "
        "end-of-reasoning delimiter and the EOS token, counted in usage but streamed as no text, are answer "
        "tokens).",
        fields=("reasoning_tokens", "reasoning_source", "answer_tokens"),
    ),
    Term(
        "per-stream decode rate",
        "streamed tokens (see TPOT) ÷ (E2E − TTFT), per request (`decode_rate`); per step (per-stream tok/s) "
        "Σ streamed tokens ÷ Σ (E2E − TTFT). Per phase: reasoning tokens ÷ reasoning time, answer tokens ÷ "
        "(E2E − TTFAT).",
        fields=("decode_rate", "reasoning_rate", "answer_rate"),
        topics=("latency",),
    ),
    Term(
        "success",
        "HTTP 2xx, no in-band error object, and a `finish_reason` seen that is one of `stop`, `length`, "
        "`tool_calls`, `content_filter`, `function_call`, `eos`. `[DONE]` is neither required nor sufficient.",
        fields=("ok",),
    ),
    Term(
        "truncated",
        "`finish_reason == \"length\"`, or output tokens (from usage) ≥ `max_tokens` whatever the server says "
        "(then also `suspect_truncation`). **Truncated in reasoning**: truncated with no answer chunk.",
        fields=("truncated", "truncated_in_reasoning", "suspect_truncation"),
    ),
    Term(
        "usable sample",
        "a success that is not truncated and passes every check of the profile's `usable` section: "
        "`min_answer_tokens` (answer tokens ≥), `answer_regex` (Python `re.search` finds it in the answer "
        "text), `answer_json` (the answer parses as JSON, any value, optionally inside one ```` ```json ```` "
        "fence). `usable_reason` says why not: `error`, `truncated`, `min_answer_tokens`, `regex`, `json` "
        "(checked in that order). The text checks need the answer text: the client then keeps up to "
        "`usable.buffer_chars` characters of it per request (only then; otherwise it keeps counts, never "
        "text), checks them when the request ends and records only the verdict.",
        fields=("usable", "usable_reason"),
        topics=("usable",),
    ),
    Term(
        "step",
        "a period of constant target concurrency (the single-stream phase is step 0 at C=1). Each record "
        "carries the step it *started* in.",
        fields=("step",),
        topics=("step",),
    ),
    Term(
        "steady state",
        "a step's regime once its first wave of requests (those in flight when it started) has been replaced, so "
        "every request in flight started in the step and runs at its concurrency. The report measures it over the "
        "steady-state window (below); a step too short for one shows burst figures over its own requests, marked "
        "NOT steady.",
    ),
    Term(
        "steady-state window",
        "the part of a step after the first wave of requests has been replaced: from ws, the latest over the step's "
        "users of the end of each one's first request ending after the step starts, to the end of the step. **One "
        "sample per step**: every request (ok or not) that *ended* inside the window; every column of the step's "
        "row is over it, success-only figures over its successes.",
        topics=("steady_window", "sample"),
    ),
    Term(
        "aggregate output throughput",
        "output tokens of successful requests that *arrived* inside the steady window ÷ window length, counted by "
        "chunk arrival (`tokens_by: chunks`, with `output.chunk_times: true`, on in the demo and simulator profiles) "
        "or pro rata (`tokens_by: pro_rata`); the sum of reasoning and answer throughput (below). Little's law is "
        "checked per step (`littles_law_c` ≈ C); its note says \"low confidence: N requests over W s\" when the "
        "window is low-confidence (a short window misreads it).",
        topics=("output_tps", "littles_law"),
    ),
    Term(
        "request throughput",
        "the report's req/s: usable requests completed per second of the steady window (by Little's law ≈ C ÷ mean "
        "E2E).",
        topics=("request_rate",),
    ),
    Term(
        "hours to N samples",
        "the hours of steady running the step needs to collect N usable samples, with a 95 % **prediction "
        "interval** by **renewal-reward** over every stream's request cycles (open-loop rate steps: batch "
        "means with 20 fixed batches; batch means is the cross-check), and what-ifs; the seed article's "
        "token-based figure is a cross-check column only.",
        topics=("hours", "hours_tokens"),
    ),
    Term(
        "client read lag",
        "per request (`read_lag_max`, seconds): the largest, over the response's reads, of (wall time this "
        "process read the bytes − the kernel's receive time of those bytes). Plain HTTP on Linux only (null "
        "elsewhere). A healthy client reads within a few milliseconds (p50 1–2 ms, p99 2–3 ms against vLLM on "
        "its own core). Above 0.1 s the **load generator is starved** (its CPU taken by the server on the "
        "same machine, or too many users per process): chunk arrivals stay kernel-stamped, but each user "
        "starts its next request late, so throughput and request rate measure the client, and latencies "
        "include client delays (a request can be sent late after \"request sent\" was stamped: TTFT p50 0.27 s "
        "instead of 0.01 s in the starved vLLM runs of [Testing a real server](../guides/real-server.md)). A "
        "step where more than 10 % of requests lagged > 0.1 s is called client-STARVED in the report (a note "
        "and a line under the table) and in `report.json` (`client_starved`, `client_lagged_pct`, "
        "`client_read_lag_p50_s/p99_s/max_s`; null, and a note, where no request was stamped: not measured is "
        "not healthy). A step's failures while it was starved are not blamed on the server alone.",
        fields=("read_lag_max",),
        topics=("client_read_lag",),
    ),
    Term(
        "cost",
        "with the profile's `cost` (US$/h = `hour_usd`, or `gpu_hour_usd` × `gpus`): US$ per 1M output tokens, US$ "
        "to N usable samples (with the hours' 95 % interval) and US$ per 1,000 usable.",
        topics=("cost",),
    ),
    Term(
        "goodput",
        "with the profile's `slo`: the request throughput counting only the requests that meet every SLO given "
        "(req/s). Beside it, the **SLO met share** of each step's latency sample and the **SLO capacity** (the "
        "highest concurrency all of whose steps reach the target SLO met share).",
        topics=("goodput", "slo_capacity"),
    ),
    Term(
        "reasoning / answer throughput",
        "`output_tps_reasoning` / `output_tps_answer`: the reasoning / answer tokens of aggregate output throughput "
        "(they sum to it), each chunk's tokens counted in its phase.",
        topics=("output_tps_phase",),
    ),
    Term(
        "soak slice",
        "a whole `report.slice_s`-second part of a steady window, from its start (a shorter remainder at the "
        "end is left out). A request *ends in* slice (t0, t1] when t0 < end ≤ t1, the step sample's rule: the "
        "request ending exactly at ws is in no slice, one ending exactly on a boundary between two slices is "
        "in the earlier one, one ending exactly at e is in none (it is outside the sample), so the slices' "
        "requests are the step's sample less those ending in the remainder. The per-slice figures are over the "
        "requests *ending* in the slice.",
        topics=("soak_slices",),
    ),
    Term(
        "drift",
        "a trend of a step's tok/s, TTFT p50 or error rate over its soak slices: their least-squares slope per "
        "hour, flagged when its 95 % interval excludes 0 **and** the change over the slices is large.",
        topics=("drift",),
    ),
    Term(
        "cached tokens",
        "`usage.prompt_tokens_details.cached_tokens` when the server sends it (prompt tokens served from its "
        "prefix cache; vLLM sends it with `--enable-prompt-tokens-details`, OpenAI always), else null (record "
        "field `cached_tokens`). Never estimated.",
        fields=("cached_tokens",),
        topics=("turns",),
    ),
    Term(
        "conversation turn",
        "with `conversation:`, each request is turn k (0-based, record field `turn`) of a conversation "
        "(`conversation`, id `<user>/<n>`). **Per-turn figures** (\"By conversation turn\") are over the "
        "successful non-warm-up requests of each turn index, all steps together.",
        fields=("turn", "conversation"),
        topics=("turns",),
    ),
    Term(
        "setting",
        "with `axes:`, the sweep-axes point a step ran with (record field `setting`, e.g. "
        "`thinking=on,effort=low`). **Settings table**: one row per (setting, step) with the step row's "
        "figures (same sample: the requests that ended in its steady window) and the mean reasoning and "
        "answer tokens of the sample's successful requests; yield = usable share; hours and US$ to the first "
        "N of `report.hours_to_n`.",
        fields=("setting",),
    ),
    Term(
        "concurrency",
        "the number of users (= in-flight requests, closed loop) the step targets. In a rate step: the users "
        "it holds, i.e. its cap on in-flight requests (`rate.max_concurrency`, else `rate.pool`).",
        fields=("concurrency",),
    ),
    Term(
        "request rate",
        "completions per second (above). In a rate step the *offered* load is its arrival rate instead "
        "(below).",
    ),
    Term(
        "target / scheduled / achieved rate",
        "rate steps only (see [Open-loop rates](../guides/open-loop.md)): **target** = the profile's `rate.rates` "
        "entry (req/s); **scheduled** = the rate of the step's seeded arrival schedule; **achieved** = the rate at "
        "which the step's requests were *sent* (`start_wall`), ok or not. **Shortfall** = 1 − achieved ÷ "
        "scheduled; above 5 % the report warns TARGET RATE NOT ACHIEVED.",
        fields=("start_wall",),
        topics=("rate_mode",),
    ),
    Term(
        "dispatch delay",
        "rate steps only: `start_wall − scheduled_wall` per request, scheduled → sent (p50 / p99 / max per step). "
        "A request is **late** when it exceeds 0.05 s: it waited for a free user (the cap or the pool) or for a "
        "starved client; **late with a free user** (`late_free_user`) when the client was late, not the cap.",
        fields=("start_wall", "scheduled_wall"),
        topics=("rate_mode",),
    ),
    Term(
        "schedule-relative TTFT / E2E",
        "rate steps only: dispatch delay + TTFT (or E2E), i.e. scheduled send time → first token (last byte), "
        "over the step's successful requests; the latency a client on that schedule sees. Shown beside the "
        "service TTFT / E2E (from sent) of the same requests: when the client falls behind, service latency "
        "stays flat while schedule-relative latency grows (coordinated omission).",
        topics=("rate_mode",),
    ),
)


def term(name: str) -> Term:
    """The term called ``name`` (case-insensitive).

    Raises:
        KeyError: no such term.
    """
    for t in TERMS:
        if t.name.lower() == name.lower():
            return t
    raise KeyError(name)
