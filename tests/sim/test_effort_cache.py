"""Reasoning effort, thinking on/off and the optional prefix cache of the simulator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from harness.sim import SimProcess
from harness.sim.lengths import EFFORT_FACTORS, LengthModel
from harness.sim.prefix import PrefixCache
from harness.sim.presets import DEMO
from harness.sim.protocol import ApiError, StreamFormatter, completion_body, parse_chat_request
from tests.sim.sseclient import chat

USER = [{"role": "user", "content": "Tell me about the history of the printing press."}]


def _body(**kw: Any) -> bytes:
    return orjson.dumps({"model": "m", "messages": USER, **kw})


# -- request parsing ---------------------------------------------------------------------------
def test_effort_parsed_top_level_and_from_chat_template_kwargs() -> None:
    assert parse_chat_request(_body(), "m").effort is None
    assert parse_chat_request(_body(reasoning_effort="low"), "m").effort == "low"
    kw = parse_chat_request(_body(chat_template_kwargs={"reasoning_effort": "high"}), "m")
    assert kw.effort == "high" and kw.thinking
    both = parse_chat_request(_body(reasoning_effort="low", chat_template_kwargs={"reasoning_effort": "high"}), "m")
    assert both.effort == "low"  # the top-level field wins
    assert not parse_chat_request(_body(chat_template_kwargs={"thinking": False}), "m").thinking


@pytest.mark.parametrize("bad", ["extreme", 3, True])
def test_bad_effort_is_a_400_naming_the_field(bad: Any) -> None:
    with pytest.raises(ApiError) as e:
        parse_chat_request(_body(reasoning_effort=bad), "m")
    assert e.value.status == 400 and e.value.param == "reasoning_effort"
    with pytest.raises(ApiError) as e:
        parse_chat_request(_body(chat_template_kwargs={"reasoning_effort": bad}), "m")
    assert e.value.param == "chat_template_kwargs.reasoning_effort"


# -- length model ------------------------------------------------------------------------------
def test_effort_scales_reasoning_by_its_factor_and_leaves_the_answer() -> None:
    plans = {e: LengthModel(DEMO, seed=3).plan(USER, 100_000, effort=e) for e in EFFORT_FACTORS}
    base = LengthModel(DEMO, seed=3).plan(USER, 100_000)
    assert plans["medium"] == base
    for effort, factor in EFFORT_FACTORS.items():
        assert plans[effort].reasoning_tokens == max(1, round(base.reasoning_tokens * factor))
        assert plans[effort].answer_tokens == base.answer_tokens
    assert plans["low"].reasoning_tokens < plans["medium"].reasoning_tokens < plans["high"].reasoning_tokens
    off = LengthModel(DEMO, seed=3).plan(USER, 100_000, thinking=False, effort="high")
    assert off.reasoning_tokens == 0 and off.answer_tokens == base.answer_tokens
    with pytest.raises(KeyError):
        LengthModel(DEMO).plan(USER, 100, effort="max")


def test_high_effort_is_capped_by_max_tokens() -> None:
    base = LengthModel(DEMO, seed=3).plan(USER, 100_000)
    cap = base.total_tokens
    high = LengthModel(DEMO, seed=3).plan(USER, cap, effort="high")
    assert high.total_tokens == cap and high.finish_reason == "length"


# -- prefix cache ------------------------------------------------------------------------------
def _conv(n_chars: int, extra: str = "") -> list[dict[str, str]]:
    return [{"role": "system", "content": "s" * n_chars}, {"role": "user", "content": "question" + extra}]


def test_prefix_cache_matches_leading_blocks_only() -> None:
    cache = PrefixCache(100_000)
    msgs = _conv(4000)
    assert cache.lookup_insert(msgs, 1002) == 0  # cold
    again = cache.lookup_insert(msgs, 1002)
    assert 900 <= again <= 1001 and again % 16 == 0
    longer = [*msgs, {"role": "assistant", "content": "a" * 800}, {"role": "user", "content": "next"}]
    assert cache.lookup_insert(longer, 1204) >= again  # the shared prefix hits; the new tail does not
    other = [{"role": "system", "content": "t" + "s" * 3999}, {"role": "user", "content": "question"}]
    assert cache.lookup_insert(other, 1002) == 0  # first block differs: chained hashes never match later ones
    assert cache.lookups == 4 and cache.hits == 2


def test_prefix_cache_never_reports_the_whole_prompt_and_evicts_lru() -> None:
    cache = PrefixCache(64)  # 4 blocks
    tiny = [{"role": "user", "content": "x" * 64}]  # 16 tokens of content: the serialised text is one block
    cache.lookup_insert(tiny, 16)
    assert cache.lookup_insert(tiny, 16) == 15  # at most prompt_tokens - 1
    cache.lookup_insert(_conv(4000), 1002)  # 60+ blocks: evicts everything older
    assert len(cache) == 4
    assert cache.lookup_insert(tiny, 16) == 0
    with pytest.raises(ValueError):
        PrefixCache(8)
    with pytest.raises(ValueError):
        PrefixCache(100, block_tokens=0)


def test_usage_carries_cached_tokens_only_with_a_cache() -> None:
    def usage(fmt: StreamFormatter) -> dict[str, Any]:
        return orjson.loads(fmt.usage_event(10, 4)[6:])["usage"]

    assert "prompt_tokens_details" not in usage(StreamFormatter("vllm", "id", "m", 100, False))
    assert usage(StreamFormatter("vllm", "id", "m", 100, False, cached_tokens=64))["prompt_tokens_details"] == {
        "cached_tokens": 64
    }
    assert usage(StreamFormatter("sglang", "id", "m", 100, False, cached_tokens=32))["prompt_tokens_details"][
        "cached_tokens"] == 32
    assert usage(StreamFormatter("openai", "id", "m", 100, False, cached_tokens=48))["prompt_tokens_details"][
        "cached_tokens"] == 48
    assert usage(StreamFormatter("openai", "id", "m", 100, False))["prompt_tokens_details"]["cached_tokens"] == 0
    body = orjson.loads(completion_body("vllm", "id", "m", 100, 3, 2, "stop", cached_tokens=16))
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 16}
    assert "prompt_tokens_details" not in orjson.loads(completion_body("vllm", "id", "m", 100, 3, 2, "stop"))["usage"]


# -- over HTTP ---------------------------------------------------------------------------------
def _usage(reply: Any) -> dict[str, Any]:
    return next(e.data["usage"] for e in reply.events if isinstance(e.data, dict) and e.data.get("usage"))


def _stream(url: str, **kw: Any) -> Any:
    body = {"messages": USER, "stream": True, "stream_options": {"include_usage": True}, "seed": 7, **kw}
    reply = chat(url, body)
    assert reply.status == 200
    return reply


def test_server_honours_effort_and_thinking(sim: SimProcess) -> None:
    tokens = {e: _usage(_stream(sim.url, reasoning_effort=e))["completion_tokens_details"]["reasoning_tokens"]
              for e in ("low", "medium", "high")}
    assert tokens["low"] < tokens["medium"] < tokens["high"]
    assert tokens["low"] == max(1, round(tokens["medium"] * EFFORT_FACTORS["low"]))
    kw = _usage(_stream(sim.url, chat_template_kwargs={"reasoning_effort": "low"}))
    assert kw["completion_tokens_details"]["reasoning_tokens"] == tokens["low"]
    off = _stream(sim.url, chat_template_kwargs={"thinking": False}, reasoning_effort="high")
    assert _usage(off)["completion_tokens_details"]["reasoning_tokens"] == 0
    assert off.text("reasoning") == ""
    bad = chat(sim.url, {"messages": USER, "reasoning_effort": "huge"})
    assert bad.status == 400


def test_prefix_cache_over_http_cuts_prefill(launch_sim: Callable[..., SimProcess]) -> None:
    """Prefill grows with prompt tokens; a cached prefix is not prefilled again (time scale 1, demo preset:
    a 20,000-token prompt prefills in ~1.0 s cold, ~0.02 s when cached)."""
    proc = launch_sim(time_scale=1.0, extra_args=["--prefix-cache-tokens", "100000"])
    msgs = [{"role": "system", "content": "abcd" * 20_000}, {"role": "user", "content": "What is in the text?"}]
    body = {"messages": msgs, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 2}
    cold, warm = chat(proc.url, body), chat(proc.url, body)
    u_cold, u_warm = _usage(cold), _usage(warm)
    assert u_cold["prompt_tokens_details"] == {"cached_tokens": 0}
    assert u_warm["prompt_tokens"] == u_cold["prompt_tokens"] > 20_000
    assert u_warm["prompt_tokens_details"]["cached_tokens"] >= 20_000 - 16
    ttft_cold = cold.chunks[0].t - cold.t_sent
    ttft_warm = warm.chunks[0].t - warm.t_sent
    assert ttft_cold > 0.8 and ttft_warm < 0.4, (ttft_cold, ttft_warm)
    plain = chat(launch_sim(time_scale=1.0).url, {**body, "max_tokens": 1})
    assert "prompt_tokens_details" not in _usage(plain)  # no cache: the field is not sent (as vLLM by default)


def test_insert_holds_a_reply_so_the_next_turn_hits_all_but_its_new_message() -> None:
    cache = PrefixCache(100_000)
    turn0 = _conv(2000)
    cache.lookup_insert(turn0, 502)
    answer = "".join(f" a{i}" for i in range(300))
    cache.insert([*turn0, {"role": "assistant", "content": answer}])
    turn1 = [*turn0, {"role": "assistant", "content": answer}, {"role": "user", "content": "go on"}]
    prompt = 502 + len(answer) // 4 + 2
    assert cache.lookup_insert(turn1, prompt) >= prompt - 2 * 16  # only the last partial blocks are computed


def test_over_http_the_reply_is_cached_for_the_next_turn(launch_sim: Callable[..., SimProcess]) -> None:
    proc = launch_sim(extra_args=["--prefix-cache-tokens", "100000"])
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Tell me about the history of the printing press."}]
    body = {"stream": True, "stream_options": {"include_usage": True}}
    first = chat(proc.url, {**body, "messages": msgs})
    msgs += [{"role": "assistant", "content": first.text("content")}, {"role": "user", "content": "and then?"}]
    second = _usage(chat(proc.url, {**body, "messages": msgs}))
    assert second["prompt_tokens_details"]["cached_tokens"] >= second["prompt_tokens"] - 2 * 16
