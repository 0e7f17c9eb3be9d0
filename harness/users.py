"""Locust User classes for streamed chat completions."""

from __future__ import annotations

from locust import User, task

import random
import time

import gevent

from harness import rate
from harness.conversation import Conversation
from harness.failures import FIRST_FAILURES, locust_message
from harness.result import RequestIdentity, RequestResult
from harness.runtime import context, of

__all__ = ["ReasoningChatUser", "RequestFailed"]

_BACKOFF_FIRST_S = 0.25
_BACKOFF_MAX_S = 10.0


class RequestFailed(Exception):
    """The exception reported to Locust for a failed request; its message is the error class and the server's
    message, normalised (:func:`harness.failures.locust_message`).

    Locust groups failures by message, so the message is stable per class and server message, never per
    request: ``http_4xx: HTTP 400: maximum context length is # tokens…`` (numbers as ``#``, ids as ``<id>``,
    secrets redacted), ``timeout_idle: …``, ``server_error_event code=500: …`` (the in-band error's ``code``
    when it had one); just the class when there is no message.
    """


class ReasoningChatUser(User):
    """A closed-loop user: sends one streamed chat completion after another, with no think time.

    Each request draws a prompt from the profile's weighted mix and fires one Locust ``request`` event:
    ``request_type`` "chat", ``name`` the prompt's class (its id unless the profile gives ``class``),
    ``response_time`` the E2E latency in milliseconds (request sent -> last byte, not time to headers),
    ``response_length`` the response's size in bytes as received (status line, headers and body with its framing:
    what Locust's "Average size (bytes)" column says; tokens are in the records and the report), ``exception`` a
    :class:`RequestFailed` for failed requests; a request killed by the stop timeout counts in the context's
    ``cut_off``. Truncated requests (finish_reason ``length``) are successes to Locust and are counted as
    truncated in the records and report.
    Every request is also written as one record (see :mod:`harness.records`) carrying the phase it started in.
    After a failed request the user pauses (0.25 s doubling to 10 s, at least ``Retry-After``) before its next
    one; a success resets the pause. With the profile's ``conversation:`` section each request is the next turn of
    the user's conversation (:mod:`harness.conversation`), followed by its think time.

    In a rate step (profile ``rate:``) the user is open-loop instead: it sends at the scheduled times of the
    process's arrival schedule (:mod:`harness.rate`), each record carrying its ``scheduled_wall``.
    """

    #: 0 between requests in closed-loop phases; in rate steps the wait until the next scheduled arrival.
    wait_time = rate.arrival_wait

    def on_start(self) -> None:
        ctx = context()
        self.ctx = ctx
        self.in_flight = of(self.environment).in_flight
        self.client = ctx.new_client()
        self.user_id = ctx.next_user_id()
        self.rng = random.Random(f"{self.user_id}:{time.time_ns()}")
        spec = ctx.profile.conversation
        self.conversation = Conversation(spec, self.user_id, self.rng) if spec is not None else None

    def on_stop(self) -> None:
        rate.give_back(self)  # an arrival it took but did not send is sent by another user
        self.client.close()
        # On a worker: send this user's last record now, before Locust reports the user gone to the master.
        self.ctx.flush()

    @task
    def chat(self) -> None:
        """Send one request from the mix and report it (in a rate step: only when an arrival of it is due)."""
        send, arrival = rate.take_arrival(self)
        if not send:
            return
        ctx = self.ctx
        st = ctx.state
        conv = self.conversation
        if conv is None:
            prompt, body = ctx.pick(self.rng)
        else:
            prompt, body = conv.next_request(lambda: ctx.pick_base(self.rng), ctx.settle)
        conv_id, turn = conv.position if conv is not None else (None, None)
        identity = RequestIdentity(prompt.id, prompt.label, self.user_id, st.phase, st.step, st.concurrency,
                                   setting=st.setting, conversation=conv_id, turn=turn,
                                   scheduled_wall=arrival.wall if arrival is not None else None)
        conn = self.client.conn
        rx0 = conn.rx_bytes
        self.in_flight.inc()
        try:
            res = self.client.stream_chat(body, identity, keep_chunk_times=ctx.profile.output.chunk_times,
                                          transcript=conv.transcript if conv is not None else None)
        except gevent.GreenletExit:  # killed when the stop timeout ran out: counted, never recorded
            ctx.cut_off += 1
            raise
        finally:
            self.in_flight.dec()
        size = conn.rx_bytes - rx0
        think = conv.after(res) if conv is not None else 0.0
        ctx.record(res)
        exc = None
        if not res.ok:
            key = ctx.profile.target.api_key()
            secrets = (key,) if key else ()
            exc = RequestFailed(locust_message(res.error_class, res.error_code, res.error_detail, secrets))
            FIRST_FAILURES.note(ctx.run_id, res.error_class, res.error_detail, res.http_status,
                                res.retry_after_s, secrets)
        self.environment.events.request.fire(
            request_type="chat",
            name=prompt.label,
            response_time=(res.e2e or 0.0) * 1000.0,
            response_length=size,
            exception=exc,
            context={"phase": st.phase, "step": st.step, "concurrency": st.concurrency},
            response=None,
            url=None,
            start_time=res.start_wall,
        )
        self._backoff_after(res)
        if think > 0:
            gevent.sleep(think)

    def _backoff_after(self, res: RequestResult) -> None:
        """After a failure, pause before the next request so a dead or throttling server is not hammered.

        The pause starts at 0.25 s and doubles per consecutive failure up to 10 s (at least the server's
        ``Retry-After``, :attr:`RequestResult.retry_after_s`, itself capped at 10 s), and resets on success. It
        is not a retry: the next request is a new one, recorded as such, and the pause is no request's latency.
        Without it a closed-loop user against a refused port writes thousands of ``connect_error`` records per
        second.
        """
        if res.ok:
            self._fail_streak = 0
            return
        self._fail_streak = getattr(self, "_fail_streak", 0) + 1
        pause = min(_BACKOFF_MAX_S, _BACKOFF_FIRST_S * 2 ** (self._fail_streak - 1))
        if res.retry_after_s is not None:
            pause = max(pause, min(res.retry_after_s, _BACKOFF_MAX_S))
        gevent.sleep(pause)
