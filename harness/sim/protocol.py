"""OpenAI chat-completions wire format of the simulator: request parsing and response bytes.

Stream flavours (``--flavour``):

* ``vllm`` (default, current vLLM): reasoning in ``delta.reasoning``; fields that are unset are
  omitted (vLLM dumps with ``exclude_unset``); the finish chunk carries ``stop_reason: null``.
* ``vllm-old``: as ``vllm`` but reasoning in ``delta.reasoning_content`` (vLLM < 0.11-ish).
* ``sglang``: reasoning in ``delta.reasoning_content``; every delta lists ``role``, ``content``,
  ``reasoning_content`` and ``tool_calls`` (``null`` when unset), every chunk carries
  ``"usage": null`` unless it has usage, the finish chunk carries ``matched_stop``.
* ``openai``: OpenAI-style hidden reasoning: reasoning tokens take time but are never streamed; the role
  chunk (``{"role":"assistant","content":"","refusal":null}``) comes with the first answer token; every
  chunk carries ``service_tier`` and ``system_fingerprint`` and, when usage was asked for,
  ``"usage": null``; the usage chunk gives ``completion_tokens_details.reasoning_tokens`` (the only trace
  of the reasoning).  No ``continuous_usage_stats``.
* ``llamacpp``: llama-server (``nlohmann::ordered_json`` key order: ``choices, created, id, model,
  system_fingerprint, object``; choice keys ``finish_reason, index, delta``); role chunk
  ``{"role":"assistant","content":null}`` with the first token; reasoning in ``delta.reasoning_content``;
  the usage chunk (``choices: []``, ``usage`` + ``timings``) is sent **even when not asked for** (builds
  b6xxx, ggml-org/llama.cpp#16048); SSE ``:`` keep-alive comments while the stream is silent
  (``--sse-ping-interval``); no ``continuous_usage_stats``; no ``reasoning_tokens`` in usage.

Chunks are assembled from pre-rendered byte templates (no JSON encoder per token).  Token text is
`` r<i>`` for the i-th reasoning token and `` a<j>`` for the j-th answer token (0-based).
"""

from __future__ import annotations

import os
import string
import time
from dataclasses import dataclass
from typing import Any

import orjson

from harness.sim.lengths import EFFORT_FACTORS
from harness.vocab import FLAVOUR_ALIASES, FLAVOURS  # re-exported: the flavours this module implements

DONE_EVENT = b"data: [DONE]\n\n"
#: SSE comment llama-server sends while a stream is silent (build b9478+).
PING_EVENT = b":\n\n"
#: Token id that SGLang reports in ``matched_stop`` for a natural stop (Qwen-style EOS).
_SGLANG_EOS_ID = 151645
#: ``system_fingerprint`` of the llama.cpp flavour (``b<build>-<commit>``).
LLAMACPP_FINGERPRINT = "b6497-cd08fc3e"
#: ``system_fingerprint`` of the openai flavour.
OPENAI_FINGERPRINT = "fp_5e0f4ad1d2"
_ALNUM = string.ascii_letters + string.digits


def canonical_flavour(name: str) -> str:
    """The flavour name for ``name`` (aliases resolved); raises ``ValueError`` for an unknown one."""
    flavour = FLAVOUR_ALIASES.get(name, name)
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown flavour {name!r}; known: {', '.join(FLAVOURS)}")
    return flavour


class ApiError(Exception):
    """An error answered as JSON ``{"error": {message, type, param, code}}`` (vLLM shape)."""

    def __init__(self, status: int, message: str, err_type: str = "BadRequestError", param: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.err_type = err_type
        self.param = param

    def body(self) -> bytes:
        """JSON body bytes."""
        return orjson.dumps(
            {"error": {"message": self.message, "type": self.err_type, "param": self.param, "code": self.status}}
        )


@dataclass
class ChatRequest:
    """The fields of a chat-completions request the simulator honours (lengths in tokens).

    ``sim_fault`` is the raw value of the request's ``sim_fault`` field (a fault to inject into this
    request, see :mod:`harness.sim.faults`), or None.
    """

    model: str
    messages: list[Any]
    stream: bool
    include_usage: bool
    continuous_usage: bool
    max_tokens: int | None
    thinking: bool
    seed: int | None
    ignore_eos: bool
    min_tokens: int
    sim_fault: Any = None
    #: ``reasoning_effort`` (top-level, else ``chat_template_kwargs.reasoning_effort``): low | medium | high, or None.
    effort: str | None = None


def _bool(value: Any, name: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise ApiError(400, f"'{name}' must be a boolean", param=name)


def _opt_int(value: Any, name: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, f"'{name}' must be an integer", param=name)
    if value < minimum:
        raise ApiError(400, f"'{name}' must be at least {minimum}, got {value}.", param=name)
    return value


def _effort(value: Any, name: str) -> str | None:
    """A ``reasoning_effort`` value: None, or one of :data:`~harness.sim.lengths.EFFORT_FACTORS` (else 400)."""
    if value is None:
        return None
    if not isinstance(value, str) or value not in EFFORT_FACTORS:
        raise ApiError(400, f"'{name}' must be one of {sorted(EFFORT_FACTORS)}, got {value!r}", param=name)
    return value


def parse_chat_request(body: bytes, served_model: str) -> ChatRequest:
    """Parse and validate a request body; raises :class:`ApiError` (400/404) like vLLM."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"Invalid JSON body: {exc}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "Request body must be a JSON object")
    model = data.get("model")
    if model is None:
        model = served_model
    elif model != served_model:
        raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list", param="messages")
    stream = _bool(data.get("stream"), "stream")
    opts = data.get("stream_options")
    if opts is not None:
        if not isinstance(opts, dict):
            raise ApiError(400, "'stream_options' must be an object", param="stream_options")
        if not stream:
            raise ApiError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
        # vLLM: include_usage defaults to true once stream_options is given; continuous stats need it
        raw_include = opts.get("include_usage")
        include_usage = raw_include is None or _bool(raw_include, "stream_options.include_usage")
        raw_continuous = opts.get("continuous_usage_stats")
        continuous = include_usage and _bool(raw_continuous, "stream_options.continuous_usage_stats")
    else:
        include_usage = continuous = False
    max_tokens = _opt_int(data.get("max_completion_tokens"), "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _opt_int(data.get("max_tokens"), "max_tokens", 1)
    thinking = True
    kwargs = data.get("chat_template_kwargs")
    if isinstance(kwargs, dict):
        for key in ("thinking", "enable_thinking"):
            if key in kwargs and kwargs[key] is not None:
                thinking = bool(kwargs[key])
    effort = _effort(data.get("reasoning_effort"), "reasoning_effort")
    if effort is None and isinstance(kwargs, dict):
        effort = _effort(kwargs.get("reasoning_effort"), "chat_template_kwargs.reasoning_effort")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ApiError(400, "'seed' must be an integer", param="seed")
    min_tokens = _opt_int(data.get("min_tokens"), "min_tokens", 0) or 0
    return ChatRequest(
        model=model,
        messages=messages,
        stream=stream,
        include_usage=include_usage,
        continuous_usage=continuous,
        max_tokens=max_tokens,
        thinking=thinking,
        seed=seed,
        ignore_eos=_bool(data.get("ignore_eos"), "ignore_eos"),
        min_tokens=min_tokens,
        sim_fault=data.get("sim_fault"),
        effort=effort,
    )


def new_request_id(flavour: str = "vllm") -> str:
    """A completion id in the flavour's style: ``chatcmpl-`` + 32 hex digits (llama.cpp: 32 letters/digits)."""
    if flavour == "llamacpp":
        raw = os.urandom(32)
        return "chatcmpl-" + "".join(_ALNUM[b % len(_ALNUM)] for b in raw)
    return "chatcmpl-" + os.urandom(16).hex()


def token_text(kind: str, index: int) -> str:
    """Text of one simulated token: `` r<index>`` (reasoning) or `` a<index>`` (answer)."""
    return f" {kind}{index}"


def _usage_json(prompt: int, completion: int, reasoning: int | None = None, cached: int | None = None) -> bytes:
    usage = b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d' % (prompt, prompt + completion, completion)
    if cached is not None:
        usage += b',"prompt_tokens_details":{"cached_tokens":%d}' % cached
    if reasoning is not None:
        usage += b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning
    return usage + b"}"


def llamacpp_timings(prompt_tokens: int, prompt_ms: float, predicted: int, predicted_ms: float) -> dict[str, Any]:
    """llama-server's ``timings`` object (milliseconds, tokens, tokens per second)."""
    return {
        "cache_n": 0,
        "prompt_n": prompt_tokens,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_tokens if prompt_tokens else 0.0,
        "prompt_per_second": 1e3 * prompt_tokens / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": predicted,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / predicted if predicted else 0.0,
        "predicted_per_second": 1e3 * predicted / predicted_ms if predicted_ms > 0 else 0.0,
    }


class StreamFormatter:
    """Renders the SSE events (``data: {...}\\n\\n`` bytes) of one streamed response.

    Args:
        flavour: one of :data:`FLAVOURS`.
        request_id: the completion id.
        model: the served model id.
        prompt_tokens: prompt tokens (for usage).
        continuous_usage: cumulative usage on every chunk (ignored by flavours that lack it).
        created: ``created`` epoch seconds (default: now).
        include_usage: whether the client asked for usage (the openai flavour then sends ``"usage": null``
            on every chunk).
        cached_tokens: prompt tokens served from the prefix cache, sent in the final usage as
            ``prompt_tokens_details.cached_tokens`` (None: no prefix cache, the field is left out; the openai
            flavour then sends 0, the llama.cpp flavour never sends it).
    """

    def __init__(
        self,
        flavour: str,
        request_id: str,
        model: str,
        prompt_tokens: int,
        continuous_usage: bool,
        created: int | None = None,
        include_usage: bool = False,
        cached_tokens: int | None = None,
    ) -> None:
        flavour = canonical_flavour(flavour)
        self.flavour = flavour
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens
        self.continuous_usage = continuous_usage and flavour in ("vllm", "vllm-old", "sglang")
        created = int(time.time()) if created is None else created
        self.hidden_reasoning = flavour == "openai"
        self._sglang = flavour == "sglang"
        self._openai = flavour == "openai"
        self._llama = flavour == "llamacpp"
        rid = orjson.dumps(request_id)
        mdl = orjson.dumps(model)
        if self._llama:
            # choices first, the envelope after them (ordered_json insertion order)
            self._head = b'data: {"choices":'
            self._env = (
                b',"created":%d,"id":%b,"model":%b,"system_fingerprint":%b,"object":"chat.completion.chunk"'
                % (created, rid, mdl, orjson.dumps(LLAMACPP_FINGERPRINT))
            )
        elif self._openai:
            self._head = (
                b'data: {"id":%b,"object":"chat.completion.chunk","created":%d,"model":%b,"service_tier":"default",'
                b'"system_fingerprint":%b,"choices":' % (rid, created, mdl, orjson.dumps(OPENAI_FINGERPRINT))
            )
            self._env = b""
        else:
            self._head = (
                b'data: {"id":' + rid + b',"object":"chat.completion.chunk","created":%d,"model":' % created
                + mdl
                + b',"choices":'
            )
            self._env = b""
        self._openai_null_usage = self._openai and include_usage
        key = b"reasoning" if flavour == "vllm" else b"reasoning_content"
        # pre-rendered token-event pieces: PRE + json(text) + POST (+ usage tail when continuous)
        if self._llama:
            self._r_pre = self._head + b'[{"finish_reason":null,"index":0,"delta":{"reasoning_content":'
            self._a_pre = self._head + b'[{"finish_reason":null,"index":0,"delta":{"content":'
            self._r_post = self._a_post = b"}}]"
        elif self._sglang:
            choice0 = self._head + b'[{"index":0,"delta":'
            self._r_pre = choice0 + b'{"role":null,"content":null,"reasoning_content":'
            self._a_pre = choice0 + b'{"role":null,"content":'
            end = b',"logprobs":null,"finish_reason":null,"matched_stop":null}]'
            self._r_post = b',"tool_calls":null}' + end
            self._a_post = b',"reasoning_content":null,"tool_calls":null}' + end
        else:
            choice0 = self._head + b'[{"index":0,"delta":'
            self._r_pre = choice0 + b'{"' + key + b'":'
            self._a_pre = choice0 + b'{"content":'
            self._r_post = self._a_post = b'},"logprobs":null,"finish_reason":null}]'
        if not self.continuous_usage:
            plain = self._tail(None)
            self._r_post += plain
            self._a_post += plain

    def _tail(self, completion: int | None) -> bytes:
        """Closing bytes after ``choices``: envelope (llama.cpp), optional usage, ``}`` and the terminator."""
        if completion is not None:
            return b',"usage":' + _usage_json(self.prompt_tokens, completion) + b"}\n\n"
        if self._sglang:
            return b',"usage":null}\n\n'
        if self._openai_null_usage:
            return b',"usage":null}\n\n'
        return self._env + b"}\n\n"

    def _choice(self, delta: bytes, finish: bytes = b"null", extra: bytes = b"") -> bytes:
        if self._llama:
            return b'[{"finish_reason":' + finish + b',"index":0,"delta":' + delta + b"}]"
        return b'[{"index":0,"delta":' + delta + b',"logprobs":null,"finish_reason":' + finish + extra + b"}]"

    def role_event(self) -> bytes:
        """First event: ``delta = {"role": "assistant", "content": ""}`` (flavour variants)."""
        if self._sglang:
            delta = b'{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}'
            choice = self._choice(delta, extra=b',"matched_stop":null')
        elif self._llama:
            choice = self._choice(b'{"role":"assistant","content":null}')
        elif self._openai:
            choice = self._choice(b'{"role":"assistant","content":"","refusal":null}')
        else:
            choice = self._choice(b'{"role":"assistant","content":""}')
        return self._head + choice + self._tail(0 if self.continuous_usage else None)

    def token_event(self, reasoning: bool, text: str, completion_so_far: int) -> bytes:
        """One token-bearing event carrying ``text`` in the reasoning or the answer field.

        ``completion_so_far`` (tokens, including this event's) is used for continuous usage.
        """
        if reasoning:
            event = self._r_pre + orjson.dumps(text) + self._r_post
        else:
            event = self._a_pre + orjson.dumps(text) + self._a_post
        if self.continuous_usage:
            event += self._tail(completion_so_far)
        return event

    def finish_event(self, finish_reason: str, completion: int) -> bytes:
        """Event with an empty delta and ``finish_reason`` (``stop`` / ``length`` / ``abort``)."""
        reason = orjson.dumps(finish_reason)
        if self._sglang:
            matched = b"%d" % _SGLANG_EOS_ID if finish_reason == "stop" else b"null"
            delta = b'{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}'
            choice = self._choice(delta, reason, b',"matched_stop":' + matched)
        elif self._llama or self._openai:
            choice = self._choice(b"{}", reason)
        else:
            choice = self._choice(b"{}", reason, b',"stop_reason":null')
        return self._head + choice + self._tail(completion if self.continuous_usage else None)

    def usage_event(self, completion: int, reasoning: int, timings: dict[str, Any] | None = None) -> bytes:
        """Final usage event with ``choices: []`` (``timings`` is added by the llama.cpp flavour)."""
        p = self.prompt_tokens
        if self._llama:
            usage = b'{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}' % (completion, p, p + completion)
            tail = b',"timings":' + orjson.dumps(timings) if timings is not None else b""
            return self._head + b"[]" + self._env + b',"usage":' + usage + tail + b"}\n\n"
        if self._openai:
            usage = (
                b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
                b'"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},'
                b'"completion_tokens_details":{"reasoning_tokens":%d,"audio_tokens":0,'
                b'"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}' % (p, completion, p + completion,
                                                                                      self.cached_tokens or 0,
                                                                                      reasoning)
            )
            return self._head + b'[],"usage":' + usage + b"}\n\n"
        return self._head + b'[],"usage":' + _usage_json(p, completion, reasoning, self.cached_tokens) + b"}\n\n"

    def error_event(self, message: str = "simulated engine failure", code: int = 500) -> bytes:
        """An in-band error object (then the server sends ``[DONE]``), in the flavour's shape."""
        msg = orjson.dumps(message)
        if self._llama:
            return b'data: {"error":{"code":%d,"message":%b,"type":"server_error"}}\n\n' % (code, msg)
        if self._openai:
            return b'data: {"error":{"message":%b,"type":"server_error","param":null,"code":null}}\n\n' % msg
        if self._sglang:
            return (b'data: {"error":{"object":"error","message":%b,"type":"InternalServerError","param":null,'
                    b'"code":%d}}\n\n' % (msg, code))
        return b'data: {"error":{"message":%b,"type":"InternalServerError","param":null,"code":%d}}\n\n' % (msg, code)

    @staticmethod
    def malformed(event: bytes) -> bytes:
        """``event`` cut in the middle of its JSON (still one SSE event): not valid JSON."""
        body = event.rstrip(b"\n")
        return body[: max(8, len(body) // 2)] + b"\n\n"


def completion_body(
    flavour: str,
    request_id: str,
    model: str,
    prompt_tokens: int,
    reasoning_tokens: int,
    answer_tokens: int,
    finish_reason: str,
    created: int | None = None,
    timings: dict[str, Any] | None = None,
    cached_tokens: int | None = None,
) -> bytes:
    """Non-streaming ``chat.completion`` JSON body in the flavour's shape (``cached_tokens``: as for
    :class:`StreamFormatter`)."""
    flavour = canonical_flavour(flavour)
    reasoning_text = "".join(token_text("r", i) for i in range(reasoning_tokens)) or None
    answer_text = "".join(token_text("a", i) for i in range(answer_tokens)) or None
    completion = reasoning_tokens + answer_tokens
    created = int(time.time()) if created is None else created
    if flavour == "llamacpp":
        msg: dict[str, Any] = {"role": "assistant", "content": answer_text or ""}
        if reasoning_text:
            msg["reasoning_content"] = reasoning_text
        llama: dict[str, Any] = {
            "choices": [{"finish_reason": finish_reason, "index": 0, "message": msg}],
            "created": created,
            "model": model,
            "system_fingerprint": LLAMACPP_FINGERPRINT,
            "object": "chat.completion",
            "usage": {"completion_tokens": completion, "prompt_tokens": prompt_tokens,
                      "total_tokens": prompt_tokens + completion},
            "id": request_id,
        }
        if timings is not None:
            llama["timings"] = timings
        return orjson.dumps(llama)
    if flavour == "openai":
        oai: dict[str, Any] = {
            "id": request_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": answer_text or "", "refusal": None, "annotations": []},
                "logprobs": None,
                "finish_reason": finish_reason,
            }],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion,
                "total_tokens": prompt_tokens + completion,
                "prompt_tokens_details": {"cached_tokens": cached_tokens or 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens, "audio_tokens": 0,
                                              "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
            },
            "service_tier": "default",
            "system_fingerprint": OPENAI_FINGERPRINT,
        }
        return orjson.dumps(oai)
    message: dict[str, Any] = {"role": "assistant", "content": answer_text}
    if flavour == "vllm":
        message["reasoning"] = reasoning_text
    else:
        message["reasoning_content"] = reasoning_text
    message["tool_calls"] = []
    choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
    if flavour == "sglang":
        choice["matched_stop"] = _SGLANG_EOS_ID if finish_reason == "stop" else None
    else:
        choice["stop_reason"] = None
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion,
        "completion_tokens": completion,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    body = {
        "id": request_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
    return orjson.dumps(body)
