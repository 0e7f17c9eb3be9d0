"""The whole profile: :class:`Profile`, its sections and the rules across them."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from harness.axes import Setting
from harness.config.base import _Model
from harness.config.sections import (
    AxesSpec,
    ConversationSpec,
    CostSpec,
    OutputSpec,
    PromptSpec,
    RateSpec,
    ReportSpec,
    RequestDefaults,
    SearchSpec,
    SimulatorSpec,
    SingleStreamSpec,
    StepsSpec,
    TargetSpec,
    TimeoutsSpec,
    UsableSpec,
    WarmupSpec,
)
from harness.config.slo import SloSpec
from harness.prompts.spec import DatasetSpec, SyntheticSpec
from harness.redact import redact_query
from harness.usable import UsableRule

__all__ = ["Profile"]


class Profile(_Model):
    """A validated profile. Build with :func:`load_profile`."""

    name: str = Field(
        min_length=1, description="run name (run directory, records, Prometheus); the file's stem when not set",
        json_schema_extra={"doc_default": "the file's stem"},  # load_profile() sets it; the reference shows it
    )
    description: str = Field("", description="free text describing the profile")
    target: TargetSpec = Field(default_factory=TargetSpec)
    simulator: SimulatorSpec = Field(default_factory=SimulatorSpec)
    request: RequestDefaults = Field(default_factory=RequestDefaults)
    prompts: list[PromptSpec] = Field(default_factory=list)
    dataset: DatasetSpec | None = None
    synthetic: SyntheticSpec | None = None
    tokenizer: str | None = Field(None, min_length=1, description="a local tokenizer.json (synthetic token counts)")
    warmup: WarmupSpec = Field(default_factory=WarmupSpec)
    single_stream: SingleStreamSpec = Field(default_factory=SingleStreamSpec)
    steps: StepsSpec = Field(default_factory=StepsSpec)
    timeouts: TimeoutsSpec = Field(default_factory=TimeoutsSpec)
    output: OutputSpec = Field(default_factory=OutputSpec)
    report: ReportSpec = Field(default_factory=ReportSpec)
    usable: UsableSpec | None = None
    cost: CostSpec | None = None
    slo: SloSpec | None = None
    axes: AxesSpec | None = None
    conversation: ConversationSpec | None = None
    rate: RateSpec | None = None
    search: SearchSpec | None = None

    @model_validator(mode="after")
    def _search_or_steps(self) -> Profile:
        if self.search is None:
            if self.rate is not None and not self.rate.rates:
                raise ValueError("rate.rates: give at least one rate (requests/s), or a search: section")
            return self
        if self.steps.concurrency != StepsSpec().concurrency:
            raise ValueError("search: the search picks the steps; leave out steps.concurrency")
        if self.search.axis == "rate" and self.rate is None:
            raise ValueError("search.axis rate needs a rate: section (arrival, max_concurrency or pool, seed)")
        if self.search.axis == "rate" and self.rate is not None and self.rate.rates:
            raise ValueError("search: the search picks the rates; leave out rate.rates")
        if self.search.axis == "concurrency" and self.rate is not None:
            raise ValueError("search.axis concurrency: leave out the rate: section (or search over rate)")
        return self

    @model_validator(mode="after")
    def _open_loop_combinations(self) -> Profile:
        if self.search is not None and self.axes is not None:
            raise ValueError("search: a capacity search runs one setting; leave out axes: (or run one search per "
                             "setting)")
        if self.rate is not None and self.conversation is not None:
            raise ValueError("rate: open-loop arrivals are single requests; leave out conversation: (multi-turn "
                             "conversations run closed-loop, with steps.concurrency)")
        return self

    @model_validator(mode="after")
    def _until_closed_loop_steps(self) -> Profile:
        if self.steps.until is not None and (self.search is not None or self.rate is not None):
            raise ValueError("steps.until: ends closed-loop concurrency steps only; leave it out with "
                             + ("search:" if self.search is not None else "rate:"))
        return self

    @model_validator(mode="after")
    def _rate_or_concurrency(self) -> Profile:
        # (compared with the default, not "was it set": the profile a master sends its workers has every key set)
        if self.rate is not None and self.steps.concurrency != StepsSpec().concurrency:
            raise ValueError("give either rate.rates or steps.concurrency, not both (rate steps replace them)")
        return self

    @model_validator(mode="after")
    def _something_to_measure(self) -> Profile:
        if (self.rate is None and self.search is None and not self.steps.concurrency
                and self.single_stream.duration <= 0):
            raise ValueError("nothing to measure: steps.concurrency is empty and single_stream.duration is 0")
        return self

    @model_validator(mode="before")
    @classmethod
    def _empty_mix_beside_a_source(cls, data: Any) -> Any:
        # public_dict() of a dataset/synthetic profile holds prompts: [] (a worker validates it again)
        if isinstance(data, dict) and data.get("prompts") == [] and (data.get("dataset") or data.get("synthetic")):
            data = {k: v for k, v in data.items() if k != "prompts"}
        return data

    @field_validator("prompts")
    @classmethod
    def _some_prompts(cls, v: list[PromptSpec]) -> list[PromptSpec]:
        if not v:
            raise ValueError("List should have at least 1 item (or leave it out and give dataset: or synthetic:)")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> Profile:
        given = [k for k in ("prompts", "dataset", "synthetic") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one prompt source of prompts, dataset, synthetic (got {given or 'none'})")
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> Profile:
        seen: set[str] = set()
        for p in self.prompts:
            if p.id in seen:
                raise ValueError(f"prompt id {p.id!r} appears twice")
            seen.add(p.id)
        return self

    def settings(self) -> list[Setting]:
        """The sweep-axes settings in run order (``[]`` without ``axes:``)."""
        return self.axes.settings() if self.axes is not None else []

    def usable_rule(self) -> UsableRule | None:
        """The ``usable:`` section as the interpreter's rule (a fresh one, regex compiled), None without it."""
        return self.usable.rule() if self.usable is not None else None

    def build_body(self, prompt: PromptSpec, model: str) -> dict[str, Any]:
        """The JSON request body for ``prompt`` (without ``stream``/``stream_options``, which the client sets).

        Precedence, lowest first: request defaults, then the prompt's own ``max_tokens``/``thinking``, then
        ``request.extra_body``, then the prompt's ``extra_body``.
        """
        req = self.request
        body: dict[str, Any] = {"model": model, "messages": prompt.chat_messages()}
        mt = prompt.max_tokens or req.max_tokens
        if mt is not None:
            body["max_tokens"] = mt
        if req.temperature is not None:
            body["temperature"] = req.temperature
        if req.top_p is not None:
            body["top_p"] = req.top_p
        ctk = dict(req.chat_template_kwargs)
        thinking = prompt.thinking if prompt.thinking is not None else req.thinking
        if thinking is not None:
            ctk["thinking"] = thinking
            ctk["enable_thinking"] = thinking
        if ctk:
            body["chat_template_kwargs"] = ctk
        if req.continuous_usage_stats:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        _deep_merge(body, req.extra_body)
        _deep_merge(body, prompt.extra_body)
        return body

    def public_dict(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict (it holds the API key's and ``headers_env``'s variable *names*, never
        their values; secret ``target.headers`` values and secret query parameters of ``target.base_url`` are
        replaced by :data:`harness.redact.MARKER`)."""
        data = self.model_dump(mode="json", by_alias=True)
        target = data.get("target") or {}
        target["headers"] = self.target.public_headers()
        if target.get("base_url"):
            target["base_url"] = redact_query(target["base_url"])
        return data


def _deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v
