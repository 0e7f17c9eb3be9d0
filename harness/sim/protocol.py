"""OpenAI chat-completions wire format of the simulator: request parsing and response bytes.

Stream flavours (``--flavour``):

* ``vllm`` (default, current vLLM): reasoning in ``delta.reasoning``; fields that are unset are
  omitted (vLLM dumps with ``exclude_unset``); the finish chunk carries ``stop_reason: null``.
* ``vllm-old``: as ``vllm`` but reasoning in ``delta.reasoning_content`` (vLLM < 0.11-ish).
* ``sglang``: reasoning in ``delta.reasoning_content``; every delta lists ``role``, ``content``,
  ``reasoning_content`` and ``tool_calls`` (``null`` when unset), every chunk carries
  ``"usage": null`` unless it has usage, the finish chunk carries ``matched_stop``.

Chunks are assembled from pre-rendered byte templates (no JSON encoder per token).  Token text is
`` r<i>`` for the i-th reasoning token and `` a<j>`` for the j-th answer token (0-based).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import orjson

FLAVOURS = ("vllm", "vllm-old", "sglang")
DONE_EVENT = b"data: [DONE]\n\n"
#: Token id that SGLang reports in ``matched_stop`` for a natural stop (Qwen-style EOS).
_SGLANG_EOS_ID = 151645


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
    """The fields of a chat-completions request the simulator honours (lengths in tokens)."""

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
    )


def new_request_id() -> str:
    """A vLLM-looking completion id: ``chatcmpl-`` + 32 hex digits."""
    return "chatcmpl-" + os.urandom(16).hex()


def token_text(kind: str, index: int) -> str:
    """Text of one simulated token: `` r<index>`` (reasoning) or `` a<index>`` (answer)."""
    return f" {kind}{index}"


def _usage_json(prompt: int, completion: int, reasoning: int | None = None) -> bytes:
    usage = b'{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d' % (prompt, prompt + completion, completion)
    if reasoning is not None:
        usage += b',"completion_tokens_details":{"reasoning_tokens":%d}' % reasoning
    return usage + b"}"


class StreamFormatter:
    """Renders the SSE events (``data: {...}\\n\\n`` bytes) of one streamed response."""

    def __init__(
        self,
        flavour: str,
        request_id: str,
        model: str,
        prompt_tokens: int,
        continuous_usage: bool,
        created: int | None = None,
    ) -> None:
        if flavour not in FLAVOURS:
            raise ValueError(f"unknown flavour {flavour!r}; known: {FLAVOURS}")
        self.flavour = flavour
        self.prompt_tokens = prompt_tokens
        self.continuous_usage = continuous_usage
        created = int(time.time()) if created is None else created
        self._head = (
            b'data: {"id":' + orjson.dumps(request_id) + b',"object":"chat.completion.chunk","created":%d,"model":'
            % created
            + orjson.dumps(model)
            + b',"choices":'
        )
        self._sglang = flavour == "sglang"
        key = b"reasoning" if flavour == "vllm" else b"reasoning_content"
        # pre-rendered token-event pieces: PRE + json(text) + POST (+ usage tail when continuous)
        choice0 = self._head + b'[{"index":0,"delta":'
        if self._sglang:
            self._r_pre = choice0 + b'{"role":null,"content":null,"reasoning_content":'
            self._a_pre = choice0 + b'{"role":null,"content":'
            end = b',"logprobs":null,"finish_reason":null,"matched_stop":null}]'
            self._r_post = b',"tool_calls":null}' + end
            self._a_post = b',"reasoning_content":null,"tool_calls":null}' + end
        else:
            self._r_pre = choice0 + b'{"' + key + b'":'
            self._a_pre = choice0 + b'{"content":'
            self._r_post = self._a_post = b'},"logprobs":null,"finish_reason":null}]'
        if not continuous_usage:
            plain = self._tail(None)
            self._r_post += plain
            self._a_post += plain

    def _tail(self, completion: int | None) -> bytes:
        """Closing bytes after ``choices``: optional usage, then ``}`` and the event terminator."""
        if completion is not None:
            return b',"usage":' + _usage_json(self.prompt_tokens, completion) + b"}\n\n"
        if self._sglang:
            return b',"usage":null}\n\n'
        return b"}\n\n"

    def _choice(self, delta: bytes, finish: bytes = b"null", extra: bytes = b"") -> bytes:
        return b'[{"index":0,"delta":' + delta + b',"logprobs":null,"finish_reason":' + finish + extra + b"}]"

    def role_event(self) -> bytes:
        """First event: ``delta = {"role": "assistant", "content": ""}``."""
        if self._sglang:
            delta = b'{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null}'
            choice = self._choice(delta, extra=b',"matched_stop":null')
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
        """Event with an empty delta and ``finish_reason`` (``stop`` / ``length``)."""
        reason = orjson.dumps(finish_reason)
        if self._sglang:
            matched = b"%d" % _SGLANG_EOS_ID if finish_reason == "stop" else b"null"
            delta = b'{"role":null,"content":null,"reasoning_content":null,"tool_calls":null}'
            choice = self._choice(delta, reason, b',"matched_stop":' + matched)
        else:
            choice = self._choice(b"{}", reason, b',"stop_reason":null')
        return self._head + choice + self._tail(completion if self.continuous_usage else None)

    def usage_event(self, completion: int, reasoning: int) -> bytes:
        """Final usage event with ``choices: []`` (sent when ``include_usage`` was requested)."""
        return (
            self._head
            + b'[],"usage":'
            + _usage_json(self.prompt_tokens, completion, reasoning)
            + b"}\n\n"
        )


def completion_body(
    flavour: str,
    request_id: str,
    model: str,
    prompt_tokens: int,
    reasoning_tokens: int,
    answer_tokens: int,
    finish_reason: str,
    created: int | None = None,
) -> bytes:
    """Non-streaming ``chat.completion`` JSON body."""
    reasoning_text = "".join(token_text("r", i) for i in range(reasoning_tokens)) or None
    answer_text = "".join(token_text("a", i) for i in range(answer_tokens)) or None
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
    completion = reasoning_tokens + answer_tokens
    body = {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion,
            "completion_tokens": completion,
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        },
    }
    return orjson.dumps(body)
