"""Multi-turn conversations: the messages of each turn, what is carried, think time, ids and the section."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from harness.config import ConversationSpec, Profile, PromptSpec
from harness.conversation import Conversation, carried_content, with_system
from harness.interpret import StreamInterpreter, Transcript
from harness.result import RequestResult

P1 = PromptSpec(id="p1", text="First question about rivers and mountains?")
P2 = PromptSpec(id="p2", text="Another opening question about the sea?")
BODIES = {
    "p1": {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": P1.text}]},
    "p2": {"model": "m", "max_tokens": 200, "messages": [{"role": "system", "content": "own"},
                                                         {"role": "user", "content": P2.text}]},
}


def _draw(prompt: PromptSpec) -> Callable[[], tuple[PromptSpec, dict[str, Any]]]:
    return lambda: (prompt, BODIES[prompt.id])


def _no_draw() -> tuple[PromptSpec, dict[str, Any]]:
    raise AssertionError("drawn mid-conversation")


def _plain(prompt: Any, body: dict[str, Any]) -> dict[str, Any]:
    return body


def _reply(conv: Conversation, answer: str, reasoning: str = "", ok: bool = True) -> RequestResult:
    conv.transcript.reasoning.append(reasoning)
    conv.transcript.answer.append(answer)
    return RequestResult(prompt_id="x", ok=ok)


def test_turns_append_the_answer_and_the_follow_up_then_a_new_conversation_starts() -> None:
    spec = ConversationSpec(turns=3, follow_ups=["more", "again"], system="shared")
    conv = Conversation(spec, "w:1", random.Random(0))
    assert conv.position == (None, 0)
    prompt, body = conv.next_request(_draw(P1), _plain)
    assert prompt is P1 and body["max_tokens"] == 100 and conv.position == ("w:1/1", 0)  # the request's identity
    assert body["messages"] == [{"role": "system", "content": "shared"}, {"role": "user", "content": P1.text}]
    r0 = _reply(conv, "A0", "R0")
    assert conv.after(r0) == 0.0
    prompt, body = conv.next_request(_no_draw, _plain)  # no draw mid-conversation
    assert prompt is P1
    assert body["messages"][1:] == [{"role": "user", "content": P1.text}, {"role": "assistant", "content": "A0"},
                                    {"role": "user", "content": "more"}]
    assert conv.position == ("w:1/1", 1)
    conv.after(_reply(conv, "A1"))
    _, body = conv.next_request(_no_draw, _plain)
    assert [m["content"] for m in body["messages"][-3:]] == ["more", "A1", "again"]
    assert conv.position == ("w:1/1", 2)
    conv.after(_reply(conv, "A2"))
    prompt, body = conv.next_request(_draw(P2), _plain)  # 3 turns done: a new conversation with the draw
    assert prompt is P2 and conv.id == "w:1/2" and conv.turn == 0
    assert body["messages"] == [{"role": "system", "content": "shared"}, {"role": "user", "content": P2.text}]
    assert body["max_tokens"] == 200 and BODIES["p2"]["messages"][0]["content"] == "own"  # not mutated


def test_a_failed_turn_ends_the_conversation() -> None:
    conv = Conversation(ConversationSpec(turns=5, think_time=2.0), "u", random.Random(0))
    conv.next_request(_draw(P1), _plain)
    assert conv.after(_reply(conv, "A")) == 2.0
    conv.next_request(_draw(P1), _plain)
    assert conv.position == ("u/1", 1)
    failed = _reply(conv, "", ok=False)
    assert conv.after(failed) == 0.0
    conv.next_request(_draw(P2), _plain)
    assert conv.id == "u/2" and conv.turn == 0


def test_each_turn_is_settled_under_the_current_setting() -> None:
    conv = Conversation(ConversationSpec(turns=3), "u", random.Random(0))
    _, b0 = conv.next_request(_draw(P1), lambda p, b: {**b, "max_tokens": 1})
    conv.after(_reply(conv, "A"))
    prompt, b1 = conv.next_request(_no_draw, lambda p, b: {**b, "max_tokens": 2})  # a new step's setting
    assert prompt is P1 and (b0["max_tokens"], b1["max_tokens"]) == (1, 2)
    assert len(b1["messages"]) == 3 and BODIES["p1"]["max_tokens"] == 100


def test_think_time_range_and_carry_reasoning() -> None:
    conv = Conversation(ConversationSpec(turns=9, think_time=[1.0, 3.0]), "u", random.Random(4))
    draws = [conv.think_time() for _ in range(200)]
    assert all(1.0 <= d <= 3.0 for d in draws) and max(draws) - min(draws) > 1.5
    t = Transcript(answer=["an", "swer"], reasoning=["thou", "ght"])
    assert carried_content(t, "answer") == "answer"
    assert carried_content(t, "answer_and_reasoning") == "<think>thought</think>answer"
    assert carried_content(Transcript(answer=["a"]), "answer_and_reasoning") == "a"
    assert with_system([{"role": "user", "content": "q"}], None) == [{"role": "user", "content": "q"}]


def test_interpreter_fills_the_transcript() -> None:
    import json

    t = Transcript()
    it = StreamInterpreter(100, transcript=t)
    for delta in ({"reasoning": "r1 "}, {"reasoning_content": "r2"}, {"content": "a1 "}, {"content": "a2"}):
        it.on_payload(0.1, json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode())
    assert (t.reasoning_text, t.answer_text) == ("r1 r2", "a1 a2")


@pytest.mark.parametrize(
    ("section", "needle"),
    [({"turns": 0}, "turns"), ({"think_time": -1}, "think_time"), ({"think_time": [3, 1]}, "think_time"),
     ({"think_time": [1]}, "think_time"), ({"carry": "all"}, "carry"), ({"follow_ups": []}, "follow_ups"),
     ({"follow_ups": [" "]}, "follow_ups"), ({"bogus": 1}, "bogus")],
)
def test_bad_conversation_sections_name_the_key(section: dict[str, Any], needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        Profile.model_validate({"name": "c", "prompts": [{"id": "p", "text": "hi"}], "conversation": section})
