"""Locust User classes for streamed chat completions."""

from __future__ import annotations

from locust import User, constant, task

import random
import time

from harness.runtime import context

__all__ = ["ReasoningChatUser", "RequestFailed"]


class RequestFailed(Exception):
    """The exception reported to Locust for a failed request; its message is the error class.

    Locust groups failures by message, so the message is stable per class (``timeout_idle``,
    ``http_429``, ``server_error_event code=500``...), never per request.
    """


class ReasoningChatUser(User):
    """A closed-loop user: sends one streamed chat completion after another, with no think time.

    Each request draws a prompt from the profile's weighted mix and fires one Locust ``request`` event:
    ``request_type`` "chat", ``name`` the prompt id, ``response_time`` the E2E latency in milliseconds (request
    sent -> last byte, not time to headers), ``response_length`` the output tokens (usage, or the flagged
    estimate), ``exception`` a :class:`RequestFailed` for failed requests. Truncated requests (finish_reason
    ``length``) are successes to Locust and are counted as truncated in the records and report.
    Every request is also written as one record (see :mod:`harness.records`) carrying the phase it started in.
    """

    wait_time = constant(0)

    def on_start(self) -> None:
        ctx = context()
        self.ctx = ctx
        self.client = ctx.new_client()
        self.user_id = ctx.next_user_id()
        self.rng = random.Random(f"{self.user_id}:{time.time_ns()}")

    def on_stop(self) -> None:
        self.client.close()

    @task
    def chat(self) -> None:
        """Send one request from the mix and report it."""
        ctx = self.ctx
        st = ctx.state
        prompt, body = ctx.pick(self.rng)
        res = self.client.stream_chat(
            body,
            prompt_id=prompt.id,
            phase=st.phase,
            step=st.step,
            concurrency=st.concurrency,
            keep_chunk_times=ctx.profile.output.chunk_times,
        )
        res.user = self.user_id
        ctx.record(res.to_record())
        exc = None
        if not res.ok:
            code = ""
            if res.error_class == "server_error_event" and res.error_detail:
                code = " " + res.error_detail.split(" ", 1)[0]  # "code=500"
            exc = RequestFailed(f"{res.error_class}{code}")
        self.environment.events.request.fire(
            request_type="chat",
            name=prompt.id,
            response_time=(res.e2e or 0.0) * 1000.0,
            response_length=res.output_tokens,
            exception=exc,
            context={"phase": st.phase, "step": st.step, "concurrency": st.concurrency},
            response=None,
            url=None,
            start_time=res.start_wall,
        )
