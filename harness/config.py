"""Profiles: the YAML that says what to load, how hard, for how long, and what to report.

:func:`load_profile` validates a file completely before any load is sent; every problem is reported as
``<file>: <key.path>: <what is wrong>``. See ``profiles/k26.yaml`` for a commented example.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.axes import Setting, settings
from harness.prompts.spec import DatasetSpec, SyntheticSpec, resolve_paths
from harness.timeouts import Timeouts
from harness.usable import DEFAULT_BUFFER_CHARS, UsableRule
from harness.vocab import (
    FLAVOUR_ALIASES,
    FLAVOURS,
    RESERVED_PROMPT_LABELS,
    SEARCH_SLO_KEY,
    SIM_PRESETS,
    SLO_KEY,
    SLO_METRICS,
)

__all__ = [
    "DEFAULT_HOURS_TO_N",
    "DEFAULT_SLICE_S",
    "DEFAULT_SLO_TARGET_SHARE",
    "PROFILES_DIR",
    "AxesSpec",
    "ConversationSpec",
    "CostSpec",
    "Profile",
    "ProfileError",
    "PromptSpec",
    "RateSpec",
    "SearchSpec",
    "SloSpec",
    "UsableSpec",
    "default_profile_path",
    "load_profile",
    "resolve_profile_path",
    "slo_deprecations",
]


log = logging.getLogger("llmload")


class ProfileError(ValueError):
    """A profile that cannot be used. The message names the file, the key and the problem."""


#: Every profile model: unknown keys refused, and numbers strict and finite: ``.inf`` / ``.nan`` are refused
#: (a threshold or price that cannot be compared), and so are booleans where a number is meant
#: (``max_tokens: true``) and strings where a number or boolean is meant (an int is accepted for a float).
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class _Model(BaseModel):
    model_config = _STRICT


class TargetSpec(_Model):
    """Where the load goes. ``base_url`` None means the built-in simulator (unless ``--host`` is given)."""

    base_url: str | None = None
    model: str | None = Field(None, description="model id; None asks GET /v1/models and takes the first")
    api_key_env: str | None = Field(None, description="NAME of the environment variable holding the API key")
    headers: dict[str, str] = Field(default_factory=dict)
    verify_tls: bool = True

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and (not v or not v.replace("_", "").isalnum()):
            raise ValueError("must be the NAME of an environment variable (letters, digits, _), not a key")
        return v

    def api_key(self) -> str | None:
        """The API key read from the environment variable named by ``api_key_env`` (None when unset)."""
        return os.environ.get(self.api_key_env) if self.api_key_env else None


class SimulatorSpec(_Model):
    """Settings of the built-in simulator, used only when the target has no base URL."""

    preset: str = "demo"
    flavour: str = "vllm"
    time_scale: float = Field(1.0, gt=0)
    seed: int = 0
    model: str = "sim-reasoner"
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

    id: str = Field(min_length=1)
    prompt_class: str | None = Field(None, alias="class", min_length=1)
    text: str | None = None
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    weight: float = Field(1.0, gt=0)
    max_tokens: int | None = Field(None, gt=0)
    thinking: bool | None = None
    extra_body: dict[str, Any] = Field(default_factory=dict)

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

    max_tokens: int | None = Field(None, gt=0)
    temperature: float | None = Field(None, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    thinking: bool | None = None
    continuous_usage_stats: bool = False
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)


class WarmupSpec(_Model):
    """The warm-up: C=1, excluded from every figure. Defaults are the seed's fix for its 120 s time-out."""

    enabled: bool = True
    prompt: str = "Say just 'OK'"
    max_tokens: int = Field(16, gt=0)
    timeout: float = Field(300.0, gt=0, description="seconds, end to end")
    requests: int = Field(1, ge=1)


class SingleStreamSpec(_Model):
    """The single-stream phase (C=1). ``duration`` 0 skips it."""

    duration: float = Field(120.0, ge=0, description="seconds")


class StepsSpec(_Model):
    """The concurrency steps, each held for ``duration`` seconds with all its users started at once.

    After the last step no new request starts; requests in flight get ``drain_timeout`` seconds to finish
    (Locust's ``--stop-timeout``, which overrides it), so the last step's steady window is not short of the
    tokens of its in-flight requests.
    """

    concurrency: list[int] = Field(default_factory=lambda: [8, 16, 32, 64])
    duration: float = Field(600.0, gt=0, description="seconds per step")
    drain_timeout: float = Field(
        300.0, ge=0, description="seconds to let in-flight requests finish after the last step (0: cut them off)"
    )

    @field_validator("concurrency")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(c <= 0 for c in v):
            raise ValueError("every concurrency must be a positive integer")
        return v


class AxesSpec(_Model):
    """Sweep axes crossed with the concurrency steps (:mod:`harness.axes`): every setting runs every step.

    ``thinking`` values are booleans (YAML ``on`` / ``off`` / ``true`` / ``false``); ``reasoning_effort`` values
    ``low`` | ``medium`` | ``high``, sent as ``effort_param`` says; ``max_tokens`` values are tokens (> 0). Each
    list, when given, is non-empty without repeats.
    """

    thinking: list[bool] | None = None
    reasoning_effort: list[Literal["low", "medium", "high"]] | None = None
    max_tokens: list[int] | None = None
    effort_param: Literal["reasoning_effort", "chat_template_kwargs"] = "reasoning_effort"

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
    carry: Literal["answer", "answer_and_reasoning"] = "answer"
    think_time: float | list[float] = Field(0.0, description="seconds between turns: a number or [low, high]")
    system: str | None = None
    follow_ups: list[str] = Field(default_factory=lambda: list(DEFAULT_FOLLOW_UPS), min_length=1)

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
    """Open-loop rate steps (README "Open-loop rates"): in place of ``steps.concurrency``, each step sends requests
    at ``rates[i]`` requests/s on a seeded ``arrival`` process, for ``steps.duration`` seconds.

    ``arrival``: ``constant`` | ``poisson`` | ``gamma`` (:mod:`harness.arrivals`); ``burstiness`` is the gamma
    process's coefficient of variation of inter-arrival gaps (1 = Poisson, > 1 burstier). ``max_concurrency``
    caps requests in flight (an arrival waits for a free slot, and is timed from its scheduled time); without it
    the step holds ``pool`` users, which is then the cap (the report warns when requests waited for it).
    """

    arrival: Literal["constant", "poisson", "gamma"] = "poisson"
    burstiness: float = Field(1.0, gt=0, description="gamma: coefficient of variation of the gaps")
    rates: list[float] = Field(default_factory=list, description="requests/s per step (a rate search: none)")
    max_concurrency: int | None = Field(None, ge=1, description="requests in flight at most (users)")
    pool: int = Field(256, ge=1, description="users per step without max_concurrency")
    seed: int = 0

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
    """SLO capacity search (README "SLO capacity search", :mod:`harness.search`): bisection over ``axis``
    (``concurrency``: users; ``rate``: requests/s with the ``rate:`` section's process and cap) between ``low`` and
    ``high`` until the highest passing and lowest failing settings are at most ``tolerance`` apart (axis units),
    at most ``max_steps`` steps of ``steps.duration`` seconds. ``slo``: ``<metric>_p<q>_s`` -> seconds (metric
    ``ttft`` | ``ttfat`` | ``tpot`` | ``e2e``; q 50, 75, 90, 95, 99 or 99.9; TPOT in seconds per token)."""

    axis: Literal["concurrency", "rate"] = "concurrency"
    low: float = Field(gt=0)
    high: float = Field(gt=0)
    tolerance: float = Field(gt=0, description="axis units (users or requests/s)")
    max_steps: int = Field(8, ge=2)
    slo: dict[str, float] = Field(min_length=1)

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

    connect: float = Field(_DEFAULT_TIMEOUTS.connect, gt=0)
    first_byte: float = Field(_DEFAULT_TIMEOUTS.first_byte, gt=0)
    first_token: float = Field(_DEFAULT_TIMEOUTS.first_token, gt=0)
    idle: float = Field(_DEFAULT_TIMEOUTS.idle, gt=0)
    total: float = Field(_DEFAULT_TIMEOUTS.total, gt=0)

    def to_timeouts(self) -> Timeouts:
        """As the client's :class:`~harness.timeouts.Timeouts` (built by keyword, field for field)."""
        return Timeouts(**self.model_dump())


class OutputSpec(_Model):
    """Where run directories go, and optional bulky per-request detail."""

    dir: str = "runs"
    chunk_times: bool = Field(False, description="store every token-bearing chunk's arrival time per record")


#: Sample counts N of the report's hours-to-N table when the profile does not set ``report.hours_to_n`` (also the
#: report's default for a run directory whose run.json has none).
DEFAULT_HOURS_TO_N: tuple[int, ...] = (100_000, 200_000, 500_000, 900_000)


#: Length of the report's soak slices (seconds) when the profile does not set ``report.slice_s``.
DEFAULT_SLICE_S = 300.0


class ReportSpec(_Model):
    """Post-processing settings: the hours-to-N sample counts, and ``slice_s``, the length (seconds) of the time
    slices the soak analysis cuts each steady window into (:mod:`harness.report.soak`)."""

    hours_to_n: list[int] = Field(default_factory=lambda: list(DEFAULT_HOURS_TO_N))
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


def _pct(share: Decimal) -> str:
    """A share as the percentile of an SLO key: ``Decimal("0.95")`` -> ``"95"``, ``0.999`` -> ``"99.9"``."""
    q = (share * 100).normalize()
    return f"{q:f}"


def slo_deprecations(raw: Any) -> list[tuple[str, str]]:
    """The older-spelling keys of a profile's raw ``slo:`` mapping, each with what to write instead:
    ``[("ttft_s", "ttft_p95_s: 2"), ("target_share", "the percentile in each key, p95")]``; ``[]`` when none (or
    when the section is not a mapping: validation reports that)."""
    if not isinstance(raw, dict) or any(isinstance(k, str) and SLO_KEY.match(k) for k in raw):
        return []
    share = raw.get("target_share", DEFAULT_SLO_TARGET_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        return []  # validation reports it
    q = _pct(Decimal(repr(float(share))))
    out = [(k, f"{k.removesuffix('_s')}_p{q}_s: {raw[k]}") for k in _SLO_FIELDS if k in raw]
    if "target_share" in raw:
        out.append(("target_share", f"the percentile in each key's name, p{q}"))
    return out


@functools.lru_cache(maxsize=256)
def _warn_deprecated(path: str, key: str, instead: str) -> None:
    """Log one deprecation warning per file and key for the life of the process."""
    log.warning("%s: %s: deprecated spelling, still read; write %s instead", path, key, instead)


#: Default ``slo.target_share``: the share of a step's requests that must meet every SLO for the step to count
#: towards ``slo_capacity`` (a share is a percentile: 0.95 meeting a TTFT SLO = TTFT p95 within it).
DEFAULT_SLO_TARGET_SHARE = 0.95


#: The thresholds of :class:`SloSpec` (attribute names, seconds), in display order.
_SLO_FIELDS = tuple(f"{m}_s" for m in SLO_METRICS)


class SloSpec(_Model):
    """Latency service-level objectives for the report's goodput (:mod:`harness.report.goodput`).

    Written, as everywhere in a profile, ``<metric>_p<q>_s: seconds`` (:data:`harness.vocab.SLO_KEY`), e.g.
    ``slo: {ttft_p95_s: 2, e2e_p95_s: 60}``; every key of this section names the same percentile ``q``, the share
    of a step's requests that must meet all the thresholds together for the step's concurrency to count as within
    the SLOs (for one metric, "TTFT p95 ≤ 2 s"). The older spelling, ``ttft_s: 2`` ... with ``target_share: 0.95``,
    is still read (:func:`load_profile` logs a deprecation warning naming the new keys); it is also the model's
    serialised form (``run.json``, the report's ``slo``).

    Attributes: ``ttft_s`` (TTFT), ``ttfat_s`` (TTFAT), ``tpot_s`` (TPOT, seconds per token), ``e2e_s`` (E2E), each
    optional (at least one), seconds, > 0; ``target_share`` (0 < share ≤ 1) = q / 100. A request meets the SLOs when
    every given threshold holds and its measurement exists.

    Raises (at validation): keys of both spellings, percentiles that differ, a percentile outside (0, 100], a
    threshold that is not a number of seconds > 0.
    """

    ttft_s: float | None = Field(None, gt=0, description="TTFT at most this many seconds")
    ttfat_s: float | None = Field(None, gt=0, description="TTFAT at most this many seconds")
    tpot_s: float | None = Field(None, gt=0, description="TPOT at most this many seconds per token")
    e2e_s: float | None = Field(None, gt=0, description="E2E at most this many seconds")
    target_share: float = Field(DEFAULT_SLO_TARGET_SHARE, gt=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _percentile_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        new = {k: v for k, v in data.items() if isinstance(k, str) and SLO_KEY.match(k)}
        if not new:
            return data  # the older spelling (or the serialised form)
        old = [k for k in data if k in (*_SLO_FIELDS, "target_share")]
        if old:
            raise ValueError(f"write every SLO as <metric>_p<q>_s; {', '.join(old)} is the older spelling: "
                             f"give {', '.join(new)} alone")
        out = {k: v for k, v in data.items() if k not in new}  # anything else: refused as an unknown key
        shares: dict[str, Decimal] = {}
        for key, seconds in new.items():
            m = SLO_KEY.match(key)
            assert m is not None
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
                    math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"{key}: the threshold must be a number of seconds > 0, got {seconds!r}")
            q = Decimal(m.group(2))
            if not 0 < q <= 100:
                raise ValueError(f"{key}: the percentile must be above 0 and at most 100")
            if f"{m.group(1)}_s" in out:
                raise ValueError(f"{key}: a second SLO of {m.group(1)}")
            out[f"{m.group(1)}_s"] = seconds
            shares[key] = q / 100
        if len(set(shares.values())) > 1:
            given = ", ".join(f"{k} (p{_pct(s)})" for k, s in shares.items())
            raise ValueError(f"every SLO of this section names the same percentile, the share of a step's requests "
                             f"that must meet all of them together; got {given}")
        out["target_share"] = float(next(iter(shares.values())))
        return out

    @model_validator(mode="after")
    def _some_threshold(self) -> SloSpec:
        if not self.thresholds():
            raise ValueError("give at least one SLO: <ttft|ttfat|tpot|e2e>_p<q>_s, seconds (e.g. ttft_p95_s: 2)")
        return self

    def keys(self) -> dict[str, float]:
        """The SLOs in the profile's spelling, ``{"ttft_p95_s": seconds, ...}`` (order ttft, ttfat, tpot, e2e)."""
        q = _pct(Decimal(repr(self.target_share)))
        return {f"{k.removesuffix('_s')}_p{q}_s": v for k, v in self.thresholds().items()}

    def thresholds(self) -> dict[str, float]:
        """The given thresholds, ``{"ttft_s": seconds, ...}`` in the order ttft, ttfat, tpot, e2e."""
        out = {"ttft_s": self.ttft_s, "ttfat_s": self.ttfat_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}
        return {k: float(v) for k, v in out.items() if v is not None}


class Profile(_Model):
    """A validated profile. Build with :func:`load_profile`."""

    name: str = Field(min_length=1)
    description: str = ""
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
        """The profile as a JSON-ready dict (it holds the API key's variable *name*, never the key)."""
        return self.model_dump(mode="json", by_alias=True)


def _deep_merge(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_merge(dst[k], v)
        else:
            dst[k] = v


def _format_errors(path: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (typo?)"
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile YAML file.

    Relative file paths in ``dataset:``, ``synthetic:`` and ``tokenizer:`` are taken from the profile's
    directory (:func:`harness.prompts.spec.resolve_paths`). The files themselves are opened by the feature that
    reads them, when the profile is loaded for a run (:func:`harness.profile_check.load_checked_profile`).

    Raises:
        ProfileError: the file is missing, is not YAML, is not a mapping, or fails validation; the message
            names the file, each bad key (dotted path, list indexes included) and the problem.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ProfileError(f"{p}: cannot read profile: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ProfileError(f"{p}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{p}: (top level): expected a mapping of keys (name, target, prompts, ...)")
    data.setdefault("name", p.stem)
    for key, instead in slo_deprecations(data.get("slo")):
        _warn_deprecated(str(p), f"slo.{key}", instead)
    resolve_paths(data, p.parent.absolute())
    try:
        return Profile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(_format_errors(str(p), e)) from None


#: The repository's ``profiles/`` directory: where ``--profile NAME`` is looked up when NAME is not a file here.
PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"


def default_profile_path(host: str | None) -> Path:
    """The profile used when ``--profile`` is not given: ``profiles/k26.yaml`` with a host, else the demo."""
    return PROFILES_DIR / ("k26.yaml" if host else "demo.yaml")


def resolve_profile_path(arg: str | None, host: str | None) -> Path:
    """``--profile`` as given (a file relative to the working directory, else in the repo's ``profiles/``).

    A directory of that name in the working directory (``--profile demo`` run where ``./demo/`` exists) does not
    hide ``profiles/demo.yaml``. A name found nowhere is returned as given (:func:`load_profile` then reports it).
    """
    if not arg:
        return default_profile_path(host)
    p = Path(arg)
    if p.is_file() or p.is_absolute():
        return p
    for alt in (PROFILES_DIR / p.name, PROFILES_DIR / f"{p.name}.yaml"):
        if alt.exists():
            return alt
    return p
