"""The sections of a profile (all but ``slo:``, :mod:`harness.config.slo`), each a strict pydantic model."""

from __future__ import annotations

import os
import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from harness.axes import Setting, settings
from harness.config.base import _STRICT, _Model
from harness.redact import MARKER, is_secret_header, secret_query_values
from harness.timeouts import Timeouts
from harness.usable import DEFAULT_BUFFER_CHARS, UsableRule
from harness.vocab import FLAVOUR_ALIASES, FLAVOURS, RESERVED_PROMPT_LABELS, SEARCH_SLO_KEY, SIM_PRESETS

__all__ = [
    "DEFAULT_FOLLOW_UPS",
    "DEFAULT_HOURS_TO_N",
    "DEFAULT_SLICE_S",
    "SHAPE_TICK_S",
    "AxesSpec",
    "ConversationSpec",
    "CostSpec",
    "OutputSpec",
    "PromptSpec",
    "RateSpec",
    "ReportSpec",
    "RequestDefaults",
    "SearchSpec",
    "SimulatorSpec",
    "SingleStreamSpec",
    "StepsSpec",
    "TargetSpec",
    "TimeoutsSpec",
    "UntilSpec",
    "UsableSpec",
    "WarmupSpec",
]


class TargetSpec(_Model):
    """Where the load goes. ``base_url`` None means the built-in simulator (unless ``--host`` is given)."""

    base_url: str | None = Field(
        None, description="the server's base URL; None: the built-in simulator (unless --host is given)"
    )
    model: str | None = Field(None, description="model id; None asks GET /v1/models and takes the first")
    api_key_env: str | None = Field(None, description="NAME of the environment variable holding the API key")
    headers: dict[str, str] = Field(default_factory=dict, description="extra HTTP headers sent with every request")
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        description="extra HTTP headers whose values come from environment variables: header name -> variable NAME "
        "(e.g. {api-key: AZURE_OPENAI_KEY}); each value is a secret, redacted in every output",
    )
    verify_tls: bool = Field(True, description="verify the server's TLS certificate (https)")

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and (not v or not v.replace("_", "").isalnum()):
            raise ValueError("must be the NAME of an environment variable (letters, digits, _), not a key")
        return v

    @field_validator("headers_env")
    @classmethod
    def _env_names(cls, v: dict[str, str]) -> dict[str, str]:
        for header, name in v.items():
            if not name or not name.replace("_", "").isalnum():
                raise ValueError(
                    f"{header}: {name!r} must be the NAME of an environment variable (letters, digits, _), not a value"
                )
        return v

    def api_key(self) -> str | None:
        """The API key read from the environment variable named by ``api_key_env`` (None when unset)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def missing_header_env(self) -> list[tuple[str, str]]:
        """(header, variable) for each ``headers_env`` entry whose environment variable is unset or empty."""
        return [(h, name) for h, name in self.headers_env.items() if not os.environ.get(name)]

    def all_headers(self) -> dict[str, str]:
        """The headers sent with every request: ``headers`` then ``headers_env`` (values read from the
        environment now; a later entry wins).

        Raises:
            ValueError: a ``headers_env`` variable is unset or empty (the message names key and variable).
        """
        missing = self.missing_header_env()
        if missing:
            h, name = missing[0]
            raise ValueError(f"target.headers_env.{h}: environment variable {name} is unset or empty")
        return {**self.headers, **{h: os.environ[name] for h, name in self.headers_env.items()}}

    def secret_values(self) -> list[str]:
        """Every secret value of this target, for :func:`harness.redact.redact_text`: the API key, the value of
        each secret-named header (:func:`harness.redact.is_secret_header`) and each ``headers_env`` header (the
        token after a ``Bearer``/``Basic`` scheme too), and secret query parameters of ``base_url``. Unset
        variables are skipped (never raises)."""
        values = [self.api_key() or ""]
        values += [v for h, v in self.headers.items() if is_secret_header(h)]
        values += [os.environ.get(name, "") for name in self.headers_env.values()]
        values += [v.split(None, 1)[1] for v in list(values) if len(v.split(None, 1)) == 2]
        if self.base_url:
            values += secret_query_values(self.base_url)
        return [v for v in dict.fromkeys(values) if v]

    def public_headers(self) -> dict[str, str]:
        """``headers`` as stored in ``run.json``: each secret-named header's value replaced by the marker."""
        return {h: MARKER if is_secret_header(h) else v for h, v in self.headers.items()}


class SimulatorSpec(_Model):
    """Settings of the built-in simulator, used only when the target has no base URL."""

    preset: str = Field("demo", description="the simulator's performance and length model (llmload sim serve --preset)")
    flavour: str = Field("vllm", description="the server the simulator imitates (llmload sim serve --flavour)")
    time_scale: float = Field(
        1.0, gt=0, description="wall seconds per simulated second: every simulated duration is multiplied by it "
        "(0.05 runs at 1/20 of real time); the report also gives real-time equivalents"
    )
    seed: int = Field(0, description="seed of the simulator's output-length, acceptance and fault draws")
    model: str = Field("sim-reasoner", description="the model id the simulator serves")
    args: list[str] = Field(
        default_factory=list, description="extra `llmload sim serve` flags, e.g. [--fault-drop, '0.02']"
    )

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in SIM_PRESETS:
            raise ValueError(f"unknown simulator preset {v!r} (known: {', '.join(sorted(SIM_PRESETS))})")
        return v

    @field_validator("flavour")
    @classmethod
    def _known_flavour(cls, v: str) -> str:
        if v not in FLAVOURS and v not in FLAVOUR_ALIASES:
            known = ", ".join(sorted([*FLAVOURS, *FLAVOUR_ALIASES]))
            raise ValueError(f"unknown simulator flavour {v!r} (known: {known})")
        return v


class PromptSpec(_Model):
    """One prompt of the mix. Give ``text`` (one user message) or ``messages`` (a full chat).

    ``class`` (YAML key; attribute ``prompt_class``) groups prompts for Locust's statistics and the Prometheus
    ``prompt`` label: a mix of thousands of distinct prompts should give them a few classes (e.g. ``short``,
    ``long``) so both stay small. Without it the class is the prompt's ``id``.
    """

    model_config = ConfigDict(**_STRICT, populate_by_name=True)

    id: str = Field(min_length=1, description="the prompt's id (records' prompt_id)")
    prompt_class: str | None = Field(
        None, alias="class", min_length=1, description="groups prompts in Locust's table and the prompt label [the id]"
    )
    text: str | None = Field(None, description="one user message (or give messages)")
    system: str | None = Field(None, description="a system message sent before text")
    messages: list[dict[str, Any]] | None = Field(None, description="a full chat (OpenAI messages) instead of text")
    weight: float = Field(1.0, gt=0, description="relative weight of the prompt in the mix")
    max_tokens: int | None = Field(None, gt=0, description="this prompt's max_tokens (wins over request.max_tokens)")
    thinking: bool | None = Field(None, description="this prompt's thinking (wins over request.thinking)")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="deep-merged into this prompt's request bodies"
    )

    @field_validator("prompt_class", mode="before")
    @classmethod
    def _class_name(cls, v: Any) -> Any:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)  # class: 7
        if isinstance(v, str):
            if not v.strip() or v != v.strip() or any(not c.isprintable() for c in v):
                raise ValueError(f"{v!r}: a class is a non-blank name without surrounding spaces or control characters")
            if v in RESERVED_PROMPT_LABELS:
                raise ValueError(f"{v!r} is reserved (the Prometheus label of overflow prompts / of the warm-up)")
        return v

    @model_validator(mode="after")
    def _text_or_messages(self) -> PromptSpec:
        if self.prompt_class is None and self.id in RESERVED_PROMPT_LABELS:
            raise ValueError(f"id {self.id!r} is reserved (a Prometheus 'prompt' label): rename it or give a 'class'")
        if (self.text is None) == (self.messages is None):
            raise ValueError("give exactly one of 'text' or 'messages'")
        if self.text is not None and not self.text.strip():
            raise ValueError(f"prompt {self.id!r}: text is empty{' (only spaces)' if self.text else ''}: give the "
                             "message to send")
        if self.messages is not None:
            for i, m in enumerate(self.messages):
                if not isinstance(m, dict) or "role" not in m or "content" not in m:
                    raise ValueError(f"messages[{i}] needs 'role' and 'content'")
        return self

    @property
    def label(self) -> str:
        """The prompt's class: ``class`` when given, else its ``id`` (Locust's request name, the records'
        ``prompt_class``, the Prometheus ``prompt`` label)."""
        return self.prompt_class or self.id

    def chat_messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array sent to the server."""
        if self.messages is not None:
            return list(self.messages)
        out: list[dict[str, Any]] = []
        if self.system:
            out.append({"role": "system", "content": self.system})
        out.append({"role": "user", "content": self.text})
        return out


class RequestDefaults(_Model):
    """Fields merged into every request body (a prompt's own fields win).

    ``thinking`` True/False sets ``chat_template_kwargs.thinking`` and ``.enable_thinking`` (the keys used by
    Kimi/DeepSeek-style and Qwen-style chat templates); None leaves the server's default.
    ``continuous_usage_stats`` asks vLLM/SGLang for cumulative usage on every chunk (exact tokens per chunk).
    """

    max_tokens: int | None = Field(None, gt=0, description="max_tokens of every request (a prompt's own wins)")
    temperature: float | None = Field(None, ge=0, description="sampling temperature sent (None: the server's "
                                      "default; above 2, OpenAI's maximum, accepted with a warning)")
    top_p: float | None = Field(None, gt=0, le=1, description="top_p sent (None: the server's default)")
    thinking: bool | None = Field(
        None, description="true/false sets chat_template_kwargs thinking and enable_thinking (None: server default)"
    )
    continuous_usage_stats: bool = Field(False, description="ask vLLM/SGLang for cumulative usage on every chunk")
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="sent as the body's chat_template_kwargs"
    )
    extra_body: dict[str, Any] = Field(default_factory=dict, description="deep-merged into every request body")


class WarmupSpec(_Model):
    """The warm-up: C=1, excluded from every figure. Defaults are the seed's fix for its 120 s time-out."""

    enabled: bool = Field(True, description="send the warm-up before any user starts")
    prompt: str = Field("Say just 'OK'", description="the warm-up request's prompt")
    max_tokens: int = Field(16, gt=0, description="max_tokens of a warm-up request")
    timeout: float = Field(300.0, gt=0, description="seconds, end to end")
    requests: int = Field(1, ge=1, description="warm-up requests sent, at C=1")

    @field_validator("prompt")
    @classmethod
    def _prompt_not_blank(cls, v: str) -> str:
        if not v.strip():  # as a prompt's text: an empty message is not a warm-up of anything
            raise ValueError(f"empty{' (only spaces)' if v else ''}: give the message to send (default "
                             "\"Say just 'OK'\"), or set enabled: false to skip the warm-up")
        return v


class SingleStreamSpec(_Model):
    """The single-stream phase (C=1). ``duration`` 0 skips it."""

    duration: float = Field(120.0, ge=0, description="seconds")


class UntilSpec(_Model):
    """Hold each step until the usable-sample rate is known within ``margin``: the step ends at the first check
    (every ``check_every`` seconds) at or after ``min`` seconds where the relative half-width of the rate's 95 %
    interval (:func:`harness.report.interval.renewal_reward` over the requests that ended since the step's first
    wave ended) is at most ``margin``; it ends at ``max`` seconds otherwise ("margin not reached")."""

    margin: float = Field(..., gt=0, lt=1, description="target relative half-width of the usable rate's 95 % "
                          "interval (0.05: within ±5 %)")
    min: float = Field(0.0, ge=0, description="seconds every step lasts at least (the margin is not checked before)")
    max: float = Field(..., gt=0, description="seconds after which a step ends whether or not the margin was reached")
    check_every: float = Field(5.0, gt=0, description="seconds between two checks of the half-width")

    @model_validator(mode="after")
    def _min_le_max(self) -> UntilSpec:
        if self.min > self.max:
            raise ValueError(f"until.min ({self.min:g} s) must be at most until.max ({self.max:g} s)")
        return self


#: Seconds between the load shape's ticks (Locust calls a shape's ``tick()`` about once a second,
#: :mod:`harness.shapes`): a step cannot end sooner, so ``steps.duration`` (and ``--step-duration``) must be at least
#: this.
SHAPE_TICK_S = 1.0


class StepsSpec(_Model):
    """The concurrency steps, each held for ``duration`` seconds with all its users started at once (with
    ``until``: from ``until.min`` to ``until.max`` seconds, until the usable rate is known within its margin).

    After the last step no new request starts; requests in flight get ``drain_timeout`` seconds to finish
    (Locust's ``--stop-timeout``, which overrides it), so the last step's steady window is not short of the
    tokens of its in-flight requests.
    """

    concurrency: list[int] = Field(
        default_factory=lambda: [8, 16, 32, 64], description="users of each step, in order (closed loop)"
    )
    duration: float = Field(600.0, gt=0, description="seconds per step (at least 1: the load shape ticks once a "
                            "second)")
    drain_timeout: float = Field(
        300.0, ge=0, description="seconds to let in-flight requests finish after the last step (0: cut them off)"
    )
    until: UntilSpec | None = Field(
        None, description="end each step once the usable rate's interval is within a margin (then ``duration`` "
        "is unused: ``until.max`` bounds the step); null: every step lasts ``duration``")

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(c <= 0 for c in v):
            raise ValueError("every concurrency must be a positive integer")
        return v

    @field_validator("duration")
    @classmethod
    def _at_least_a_tick(cls, v: float) -> float:
        if v < SHAPE_TICK_S:
            raise ValueError(f"{v:g} s is shorter than the load shape's tick ({SHAPE_TICK_S:g} s: a step cannot end "
                             f"sooner, it would run about {SHAPE_TICK_S:g} s): give at least {SHAPE_TICK_S:g} s")
        return v


class AxesSpec(_Model):
    """Sweep axes crossed with the concurrency steps (:mod:`harness.axes`): every setting runs every step.

    ``thinking`` values are booleans (YAML ``on`` / ``off`` / ``true`` / ``false``); ``reasoning_effort`` values
    ``low`` | ``medium`` | ``high``, sent as ``effort_param`` says; ``max_tokens`` values are tokens (> 0). Each
    list, when given, is non-empty without repeats.
    """

    thinking: list[bool] | None = Field(None, description="thinking values to sweep (on / off)")
    reasoning_effort: list[Literal["low", "medium", "high"]] | None = Field(
        None, description="reasoning efforts to sweep (low, medium, high)"
    )
    max_tokens: list[int] | None = Field(None, description="max_tokens values to sweep (tokens)")
    effort_param: Literal["reasoning_effort", "chat_template_kwargs"] = Field(
        "reasoning_effort", description="where the effort is sent: top-level reasoning_effort, or chat_template_kwargs"
    )

    @field_validator("thinking", "reasoning_effort", "max_tokens")
    @classmethod
    def _non_empty_unique(cls, v: list[Any] | None) -> list[Any] | None:
        if v is not None and not v:
            raise ValueError("give at least one value, or leave the axis out")
        if v is not None and len(set(v)) != len(v):
            shown = ", ".join(("on" if x else "off") if isinstance(x, bool) else str(x) for x in v)
            raise ValueError(f"a value appears twice: [{shown}]")
        return v

    @field_validator("max_tokens")
    @classmethod
    def _positive(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and any(m <= 0 for m in v):
            raise ValueError("every max_tokens must be a positive integer")
        return v

    @model_validator(mode="after")
    def _some_axis(self) -> AxesSpec:
        if not (self.thinking or self.reasoning_effort or self.max_tokens):
            raise ValueError("no axis: give thinking, reasoning_effort or max_tokens")
        return self

    def settings(self) -> list[Setting]:
        """The settings of the sweep, in run order (:func:`harness.axes.settings`)."""
        return settings(
            self.thinking, list(self.reasoning_effort) if self.reasoning_effort else None, self.max_tokens,
            self.effort_param,
        )


#: Follow-up user messages of turns 1.. when the profile gives none (cycled by turn index).
DEFAULT_FOLLOW_UPS = (
    "Thanks. Now go deeper into the most important point of your answer, with a concrete example.",
    "Good. What are the main objections to that, and how would you answer them?",
    "Summarise everything we discussed so far in a short list.",
)


class ConversationSpec(_Model):
    """Multi-turn conversations (:mod:`harness.conversation`): each user runs conversations of ``turns`` turns.

    Turn 0 is a prompt drawn from the mix; turn k > 0 appends the previous reply (``carry``: ``answer`` = its
    answer text, ``answer_and_reasoning`` = ``<think>reasoning</think>`` then the answer, as the assistant
    message's content) and the follow-up ``follow_ups[(k - 1) % len]``. ``think_time`` (seconds) is waited
    between turns: a number, or ``[low, high]`` for a uniform draw. ``system``, when given, is the system message
    of every conversation (a shared prefix; it replaces a prompt's own system message).
    """

    turns: int = Field(3, ge=1, description="turns per conversation")
    carry: Literal["answer", "answer_and_reasoning"] = Field(
        "answer", description="what of each reply the next turn carries: the answer, or answer and reasoning"
    )
    think_time: float | list[float] = Field(0.0, description="seconds between turns: a number or [low, high]")
    system: str | None = Field(None, description="a system prompt shared by every conversation")
    follow_ups: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FOLLOW_UPS), min_length=1,
        description="user messages of turns 1.. (cycled)",
    )

    @field_validator("think_time")
    @classmethod
    def _think_time(cls, v: float | list[float]) -> float | list[float]:
        if isinstance(v, list):
            if len(v) != 2 or not 0 <= v[0] <= v[1]:
                raise ValueError(f"a range is [low, high] with 0 <= low <= high (seconds), got {v}")
        elif v < 0:
            raise ValueError(f"must be >= 0 seconds, got {v}")
        return v

    @field_validator("follow_ups")
    @classmethod
    def _no_blank(cls, v: list[str]) -> list[str]:
        if any(not f.strip() for f in v):
            raise ValueError("a follow-up message is blank")
        return v

class RateSpec(_Model):
    """Open-loop rate steps (docs/guides/open-loop.md): in place of ``steps.concurrency``, each step sends requests
    at ``rates[i]`` requests/s on a seeded ``arrival`` process, for ``steps.duration`` seconds.

    ``arrival``: ``constant`` | ``poisson`` | ``gamma`` (:mod:`harness.arrivals`); ``burstiness`` is the gamma
    process's coefficient of variation of inter-arrival gaps (1 = Poisson, > 1 burstier). ``max_concurrency``
    caps requests in flight (an arrival waits for a free slot, and is timed from its scheduled time); without it
    the step holds ``pool`` users, which is then the cap (the report warns when requests waited for it).
    """

    arrival: Literal["constant", "poisson", "gamma"] = Field(
        "poisson", description="arrival process: constant, poisson or gamma"
    )
    burstiness: float = Field(1.0, gt=0, description="gamma: coefficient of variation of the gaps")
    rates: list[float] = Field(default_factory=list, description="requests/s per step (a rate search: none)")
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at most (users)")
    pool: int = Field(256, ge=1, description="users per step without max_concurrency")
    seed: int = Field(0, description="seed of the arrival schedule")

    @field_validator("rates")
    @classmethod
    def _positive_rates(cls, v: list[float]) -> list[float]:
        if any(not r > 0 for r in v):
            raise ValueError("every rate must be > 0 requests/s")
        return v

    @property
    def users(self) -> int:
        """Users a rate step holds: ``max_concurrency`` when given, else ``pool``."""
        return self.max_concurrency if self.max_concurrency is not None else self.pool


class SearchSpec(_Model):
    """SLO capacity search (docs/guides/slo-search.md, :mod:`harness.search`): bisection over ``axis``
    (``concurrency``: users; ``rate``: requests/s with the ``rate:`` section's process and cap) between ``low`` and
    ``high`` until the highest passing and lowest failing settings are at most ``tolerance`` apart (axis units),
    at most ``max_steps`` steps of ``steps.duration`` seconds. ``slo``: ``<metric>_p<q>_s`` -> seconds (metric
    ``ttft`` | ``ttfat`` | ``tpot`` | ``e2e``; q 50, 75, 90, 95, 99 or 99.9; TPOT in seconds per token)."""

    axis: Literal["concurrency", "rate"] = Field(
        "concurrency", description="what the search varies: concurrency (users) or rate (requests/s)"
    )
    low: float = Field(gt=0, description="lower bound, axis units (whole users for concurrency)")
    high: float = Field(gt=0, description="upper bound, axis units (> low)")
    tolerance: float = Field(gt=0, description="axis units (users or requests/s)")
    max_steps: int = Field(8, ge=2, description="at most this many probe steps")
    slo: dict[str, float] = Field(min_length=1, description="<ttft|ttfat|tpot|e2e>_p<q>_s -> seconds, at least one")

    @field_validator("slo")
    @classmethod
    def _slo_keys(cls, v: dict[str, float]) -> dict[str, float]:
        for k, t in v.items():
            if not SEARCH_SLO_KEY.match(k):
                raise ValueError(f"{k!r}: an SLO is <ttft|ttfat|tpot|e2e>_p<50|75|90|95|99|99.9>_s (e.g. ttft_p99_s)")
            if not t > 0:
                raise ValueError(f"{k}: the threshold must be > 0 seconds")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> SearchSpec:
        if self.low >= self.high:
            raise ValueError("low must be below high")
        if self.axis == "concurrency":
            if self.low != int(self.low) or self.high != int(self.high):
                raise ValueError("a concurrency search's low and high are whole numbers of users")
            if self.tolerance < 1:
                raise ValueError("a concurrency search's tolerance is at least 1 user")
        return self


_DEFAULT_TIMEOUTS = Timeouts()


class TimeoutsSpec(_Model):
    """Per-request timeouts in seconds, each > 0 (meanings and defaults: :class:`harness.timeouts.Timeouts`)."""

    connect: float = Field(_DEFAULT_TIMEOUTS.connect, gt=0, description="seconds to open the TCP (+TLS) connection")
    first_byte: float = Field(
        _DEFAULT_TIMEOUTS.first_byte, gt=0, description="seconds from request sent to the status line"
    )
    first_token: float = Field(
        _DEFAULT_TIMEOUTS.first_token, gt=0, description="seconds from request sent to the first token-bearing chunk"
    )
    idle: float = Field(
        _DEFAULT_TIMEOUTS.idle, gt=0, description="seconds from a token-bearing chunk to the next one (or the end)"
    )
    total: float = Field(
        _DEFAULT_TIMEOUTS.total, gt=0, description="seconds from request sent to the end of the stream"
    )

    def to_timeouts(self) -> Timeouts:
        """As the client's :class:`~harness.timeouts.Timeouts` (built by keyword, field for field)."""
        return Timeouts(**self.model_dump())


class OutputSpec(_Model):
    """Where run directories go, and optional bulky per-request detail."""

    dir: str = Field("runs", description="directory of the run directories (--output-dir overrides it)")
    chunk_times: bool = Field(False, description="store every token-bearing chunk's arrival time per record")


#: Sample counts N of the report's hours-to-N table when the profile does not set ``report.hours_to_n`` (also the
#: report's default for a run directory whose run.json has none).
DEFAULT_HOURS_TO_N: tuple[int, ...] = (100_000, 200_000, 500_000, 900_000)


#: Length of the report's soak slices (seconds) when the profile does not set ``report.slice_s``.
DEFAULT_SLICE_S = 300.0


class ReportSpec(_Model):
    """Post-processing settings: the hours-to-N sample counts, and ``slice_s``, the length (seconds) of the time
    slices the soak analysis cuts each steady window into (:mod:`harness.report.soak`)."""

    hours_to_n: list[int] = Field(
        default_factory=lambda: list(DEFAULT_HOURS_TO_N), description="sample counts N of the report's hours-to-N table"
    )
    slice_s: float = Field(DEFAULT_SLICE_S, gt=0, description="seconds per soak slice")

    @field_validator("hours_to_n")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if not v or any(n <= 0 for n in v):
            raise ValueError("must be a non-empty list of positive sample counts")
        return v


class UsableSpec(_Model):
    """What makes a successful, untruncated request a usable sample (every check optional; see
    :class:`harness.usable.UsableRule`). The text checks need the answer text: the client then keeps up to
    ``buffer_chars`` characters of it per request, checks them at the request's end and records only the verdict
    (``usable``, ``usable_reason``)."""

    min_answer_tokens: int | None = Field(None, ge=1, description="at least this many answer tokens")
    answer_regex: str | None = Field(
        None, min_length=1, description="Python regular expression that must be found (re.search) in the answer"
    )
    answer_json: bool = Field(False, description="the answer parses as JSON, optionally inside a ```json fence")
    buffer_chars: int = Field(
        DEFAULT_BUFFER_CHARS, ge=1, description="characters of answer text kept for the text checks"
    )

    @field_validator("answer_regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as e:
                raise ValueError(f"not a valid regular expression: {e}") from None
        return v

    def rule(self) -> UsableRule:
        """The rule the interpreter applies (the regex compiled)."""
        return UsableRule(
            min_answer_tokens=self.min_answer_tokens,
            answer_regex=re.compile(self.answer_regex) if self.answer_regex is not None else None,
            answer_json=self.answer_json,
            buffer_chars=self.buffer_chars,
        )


class CostSpec(_Model):
    """What the measured server costs to run, for the report's cost figures: ``gpu_hour_usd`` (US$ per GPU-hour)
    with ``gpus`` (GPUs serving the model), or ``hour_usd`` (US$ per hour for the whole deployment)."""

    gpu_hour_usd: float | None = Field(None, gt=0, description="US$ per GPU-hour")
    gpus: int | None = Field(None, ge=1, description="GPUs serving the model")
    hour_usd: float | None = Field(None, gt=0, description="US$ per hour for the whole deployment")

    @model_validator(mode="after")
    def _one_price(self) -> CostSpec:
        per_gpu = self.gpu_hour_usd is not None or self.gpus is not None
        if self.hour_usd is not None and per_gpu:
            raise ValueError("give either hour_usd, or gpu_hour_usd with gpus, not both")
        if self.hour_usd is None and (self.gpu_hour_usd is None or self.gpus is None):
            if self.gpu_hour_usd is not None:
                raise ValueError("gpu_hour_usd needs gpus (the number of GPUs serving the model)")
            if self.gpus is not None:
                raise ValueError("gpus needs gpu_hour_usd (US$ per GPU-hour)")
            raise ValueError("give hour_usd, or gpu_hour_usd with gpus")
        return self

    @property
    def usd_per_hour(self) -> float:
        """US$ per hour of the deployment: ``hour_usd``, else ``gpu_hour_usd × gpus``."""
        if self.hour_usd is not None:
            return self.hour_usd
        return float(self.gpu_hour_usd or 0.0) * (self.gpus or 0)
