"""Prometheus metrics of the simulator, named like vLLM's (``vllm:*`` with a ``model_name`` label).

Exposed series (times in seconds, counts in tokens or requests):

* ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` — gauges, sampled at scrape time;
* ``vllm:prompt_tokens_total`` / ``vllm:generation_tokens_total`` — counters, tokens;
* ``vllm:request_success_total{finished_reason=stop|length|abort}`` — counter, requests;
* ``vllm:time_to_first_token_seconds``, ``vllm:e2e_request_latency_seconds``,
  ``vllm:request_queue_time_seconds``, ``vllm:request_time_per_output_token_seconds`` — histograms,
  server-side truth (wall-clock seconds as experienced with the configured time scale);
* with speculative decoding (``--spec-tokens``): ``vllm:spec_decode_num_drafts_total``,
  ``vllm:spec_decode_num_draft_tokens_total``, ``vllm:spec_decode_num_accepted_tokens_total`` and
  ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position}`` — counters (drafts = sequence-steps
  that proposed draft tokens; acceptance rate = accepted / draft tokens; mean tokens per step =
  1 + accepted / drafts).

A server restart (fault) replaces the whole registry, so every counter starts again from 0, as after a real
process restart.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from harness.sim.engine import Engine, EngineListener, Sequence

_TTFT_BUCKETS = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)
_LATENCY_BUCKETS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
)
_TPOT_BUCKETS = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
    0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class SimMetrics(EngineListener):
    """Owns a private registry and updates it from engine callbacks."""

    def __init__(self, model: str, engine_ref: Engine | None = None, spec_tokens: int = 0) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model = model
        labels = ["model_name"]
        r = self.registry
        self.running = Gauge("vllm:num_requests_running", "Requests in the batch (prefill or decode).",
                             labels, registry=r)
        self.waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be admitted.", labels, registry=r)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Prefill tokens processed.", labels, registry=r)
        self.generation_tokens = Counter("vllm:generation_tokens", "Generation tokens produced.", labels,
                                         registry=r)
        self.success = Counter("vllm:request_success", "Finished requests by finish reason.",
                               [*labels, "finished_reason"], registry=r)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Arrival to first token, seconds.", labels,
                              buckets=_TTFT_BUCKETS, registry=r)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Arrival to last token, seconds.", labels,
                             buckets=_LATENCY_BUCKETS, registry=r)
        self.queue = Histogram("vllm:request_queue_time_seconds", "Time waiting for admission, seconds.", labels,
                               buckets=_LATENCY_BUCKETS, registry=r)
        self.tpot = Histogram("vllm:request_time_per_output_token_seconds",
                              "Per-request mean time per output token after the first, seconds.", labels,
                              buckets=_TPOT_BUCKETS, registry=r)
        self._gen = self.generation_tokens.labels(model)
        self._prompt = self.prompt_tokens.labels(model)
        self._ttft = self.ttft.labels(model)
        self._e2e = self.e2e.labels(model)
        self._queue = self.queue.labels(model)
        self._tpot = self.tpot.labels(model)
        for reason in ("stop", "length", "abort"):
            self.success.labels(model, reason)
        self.spec_tokens = spec_tokens
        if spec_tokens > 0:
            self.spec_drafts = Counter("vllm:spec_decode_num_drafts", "Sequence-steps that proposed draft tokens.",
                                       labels, registry=r).labels(model)
            self.spec_draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Draft tokens proposed.",
                                             labels, registry=r).labels(model)
            self.spec_accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Draft tokens accepted.",
                                         labels, registry=r).labels(model)
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                              "Drafts whose token at this position was accepted.", [*labels, "position"],
                              registry=r)
            self.spec_per_pos = [per_pos.labels(model, str(i)) for i in range(spec_tokens)]
        if engine_ref is not None:
            self.bind(engine_ref)

    def bind(self, engine: Engine) -> None:
        """Sample the engine's running/waiting counts at scrape time."""
        self.running.labels(self.model).set_function(lambda: engine.num_running)
        self.waiting.labels(self.model).set_function(lambda: engine.num_waiting)

    # EngineListener ------------------------------------------------------------------------
    def on_first_token(self, seq: Sequence) -> None:
        """Count the prompt tokens and observe TTFT / queue time."""
        self._prompt.inc(seq.prompt_tokens)
        if seq.first_token_at is not None:
            self._ttft.observe(seq.first_token_at - seq.arrival)
        if seq.admitted_at is not None:
            self._queue.observe(seq.admitted_at - seq.arrival)

    def on_tokens(self, n: int) -> None:
        """Count generated tokens."""
        self._gen.inc(n)

    def on_finish(self, seq: Sequence, reason: str) -> None:
        """Count the finished request and observe E2E / TPOT."""
        self.success.labels(self.model, reason).inc()
        if seq.finished_at is None or reason == "abort":
            return
        self._e2e.observe(seq.finished_at - seq.arrival)
        if seq.first_token_at is not None and seq.generated > 1:
            self._tpot.observe((seq.finished_at - seq.first_token_at) / (seq.generated - 1))

    def on_spec(self, drafts: int, draft_tokens: int, accepted: int, accepted_per_pos: list[int]) -> None:
        """Count one speculative step's drafts, draft tokens and accepted tokens."""
        if self.spec_tokens <= 0:
            return
        self.spec_drafts.inc(drafts)
        self.spec_draft_tokens.inc(draft_tokens)
        self.spec_accepted.inc(accepted)
        for counter, n in zip(self.spec_per_pos, accepted_per_pos, strict=False):
            if n:
                counter.inc(n)

    def render(self) -> bytes:
        """Prometheus text exposition of the registry."""
        return generate_latest(self.registry)
