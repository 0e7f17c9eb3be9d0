"""Multi-turn conversations: one Locust user runs a conversation turn by turn, each turn one request.

With a profile's ``conversation:`` section (:class:`harness.config.ConversationSpec`) every
:class:`harness.users.ReasoningChatUser` holds a :class:`Conversation`. A conversation starts with a prompt drawn
from the weighted mix (turn 0: its messages, with the shared ``system`` message when the profile gives one). Each
successful turn appends the reply as an assistant message (``carry``: the answer, or the reasoning in
``<think>…</think>`` then the answer) and the next follow-up as a user message, so the prompt grows turn by
turn (and a server with prefix caching serves the earlier turns from its cache). After ``turns`` turns, or a
failed turn (its reply is missing, so the conversation cannot go on), the next request starts a new
conversation. Between the turns of one conversation the user waits the ``think_time``; there is none between
conversations (closed loop). Every request records its ``conversation`` id (``<user>/<n>``, unique in the run)
and its 0-based ``turn``.

The request body of every turn is the conversation's prompt's body under the *current* phase's sweep setting
(:meth:`harness.runtime.RunContext.settle`) with the conversation's messages: a conversation that spans a step
boundary continues with the new step's setting. Requests are measured as usual; a conversation's think time is
no request's latency, but it lowers the load below the step's C users (Little's law then reads below C).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from harness.config import ConversationSpec
from harness.interpret import Transcript
from harness.prompts.source import PromptLike
from harness.result import RequestResult

__all__ = ["Conversation", "carried_content", "with_system"]


def with_system(messages: list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    """``messages`` (copied) with ``system`` as the first, system message: it replaces a leading system message, or
    is inserted before the others; ``system`` None returns a copy unchanged."""
    out = [dict(m) for m in messages]
    if system is None:
        return out
    if out and out[0].get("role") == "system":
        out[0] = {"role": "system", "content": system}
    else:
        out.insert(0, {"role": "system", "content": system})
    return out


def carried_content(transcript: Transcript, carry: str) -> str:
    """The assistant message content a reply leaves in the conversation: its answer text (``carry`` ``answer``),
    or ``<think>reasoning</think>`` then the answer (``answer_and_reasoning``; the answer alone when there was no
    reasoning text)."""
    answer = transcript.answer_text
    if carry == "answer_and_reasoning":
        reasoning = transcript.reasoning_text
        if reasoning:
            return f"<think>{reasoning}</think>{answer}"
    return answer


class Conversation:
    """The conversation state of one user (see the module docstring).

    Args:
        spec: the profile's ``conversation:`` section.
        user_id: the user's id (conversation ids are ``<user_id>/<n>``, n = 1, 2, ...).
        rng: the user's random generator (think-time draws).
    """

    def __init__(self, spec: ConversationSpec, user_id: str, rng: random.Random) -> None:
        self.spec = spec
        self.user_id = user_id
        self.rng = rng
        self.count = 0
        #: The turn the next request is (0 = a new conversation).
        self.turn = 0
        self.id: str | None = None
        self.prompt: PromptLike | None = None
        #: The conversation's prompt's body as drawn (no setting applied).
        self.base: dict[str, Any] | None = None
        self.messages: list[dict[str, Any]] = []
        #: The text of the reply in flight (fed by the client).
        self.transcript = Transcript()

    def next_request(
        self,
        draw: Callable[[], tuple[PromptLike, dict[str, Any]]],
        settle: Callable[[PromptLike, dict[str, Any]], dict[str, Any]],
    ) -> tuple[PromptLike, dict[str, Any]]:
        """The prompt and request body of the next turn.

        Args:
            draw: draws a prompt and its body without a setting (:meth:`harness.runtime.RunContext.pick_base`);
                called only when a new conversation starts, so mid-conversation turns use up no draw of the
                prompt source (a data set walked without replacement loses no row).
            settle: ``(prompt, body) -> body`` under the current phase's setting
                (:meth:`harness.runtime.RunContext.settle`), applied to the conversation's prompt's body each turn.

        Returns:
            ``(prompt, body)``: the conversation's prompt and a new body whose ``messages`` are the conversation so
            far plus this turn's user message (the drawn body is not mutated).
        """
        if self.turn == 0 or self.prompt is None or self.base is None:
            self.count += 1
            self.turn = 0
            self.id = f"{self.user_id}/{self.count}"
            self.prompt, self.base = draw()
            self.messages = with_system(self.base["messages"], self.spec.system)
        else:
            follow = self.spec.follow_ups[(self.turn - 1) % len(self.spec.follow_ups)]
            self.messages.append({"role": "user", "content": follow})
        self.transcript = Transcript()
        return self.prompt, {**settle(self.prompt, self.base), "messages": list(self.messages)}

    @property
    def position(self) -> tuple[str | None, int]:
        """``(conversation id, turn)`` of the request :meth:`next_request` returned last (the request's identity,
        :class:`harness.result.RequestIdentity`); ``(None, 0)`` before the first."""
        return self.id, self.turn

    def after(self, res: RequestResult) -> float:
        """Move the conversation on after the turn whose result is ``res`` (its ``conversation`` and ``turn`` came
        with its identity, :attr:`position`).

        A successful turn carries its reply into the messages and, unless it was the last, returns the think time
        to wait before the next turn (seconds); a failed or last turn ends the conversation and returns 0.0.
        """
        if not res.ok or self.turn + 1 >= self.spec.turns:
            self.turn = 0
            self.messages = []
            return 0.0
        self.messages.append({"role": "assistant", "content": carried_content(self.transcript, self.spec.carry)})
        self.turn += 1
        return self.think_time()

    def think_time(self) -> float:
        """One think-time draw, seconds: the fixed value, or uniform in ``[low, high]``."""
        t = self.spec.think_time
        if isinstance(t, list):
            return self.rng.uniform(t[0], t[1])
        return float(t)
