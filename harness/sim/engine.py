"""Continuous-batching engine model: one greenlet that hands out tokens step by step.

Model (all durations are simulated seconds multiplied by ``time_scale``):

1. A submitted :class:`Sequence` waits in a FIFO queue while ``running >= max_num_seqs``.
2. Once admitted it prefills for ``preset.prefill_seconds(prompt_tokens - cached_tokens)`` (the tokens not
   served from the prefix cache, :mod:`harness.sim.prefix`; plus the sequence's own
   ``extra_prefill``, real seconds, used by the "stall before first token" fault); the prefill produces
   its first token (emitted when the prefill ends).
3. It then joins the decode batch at the next step boundary.  Each engine step lasts
   ``preset.step_seconds(n)`` for a batch of ``n`` decoding sequences and gives every member one
   token at the step's end.  With speculative decoding (``spec_tokens`` K > 0) a step verifies K draft
   tokens per sequence: each draft is accepted with probability ``spec_acceptance`` until the first
   rejection, so a member gets ``1 + accepted`` tokens (never more than it has left), and the step
   lasts ``step_seconds(n) * (1 + spec_overhead * K)``.
4. A sequence with ``stall_at`` set leaves the batch once it has that many tokens and rejoins it
   ``stall_for`` real seconds later (the "stall between chunks" fault: a preempted sequence).
5. Drift (``drift_per_hour`` F, 0 = off): the server slows down steadily over simulated time. A step or a
   prefill that starts ``h`` simulated hours after the drift origin lasts ``(1 - F) ** -h`` times its preset
   duration (:meth:`Engine.slowdown`), so the decode speed of every sequence (tokens/s) falls by the fraction F
   per simulated hour, compounding (x (1 - F) each hour), and the prefill time (TTFT) rises by ``1 / (1 - F) - 1``
   per hour (F = 0.3: -30 % tokens/s, +42.9 % TTFT per hour).

Steps are scheduled on absolute deadlines (``time.perf_counter`` seconds) so timer lateness does
not accumulate: a late step is followed by shorter ones until the schedule is met again, as long as
the loop is at most ``max(step, max_lag)`` seconds behind (CPU contention, timer granularity);
beyond that it re-synchronises to "now" (the stall then shows as one long step, like a server
hiccup, instead of a burst).  Sequences never block the engine: the engine only bumps ``Sequence.generated``
(and, with speculative decoding, appends to ``Sequence.marks``) and sets the sequence's event; the request
greenlet writes to the socket at its own pace.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import deque
from collections.abc import Callable
from itertools import count

import gevent
from gevent.event import Event

from harness.sim.lengths import LengthPlan
from harness.sim.presets import Preset

clock: Callable[[], float] = time.perf_counter

#: Default lateness (seconds) the step schedule catches up on before re-synchronising to "now".
DEFAULT_MAX_LAG = 5.0
#: Default extra step cost per draft token with speculative decoding (fraction of a plain step).
DEFAULT_SPEC_OVERHEAD = 0.05
#: Simulated seconds per simulated hour (the unit of ``drift_per_hour``).
HOUR = 3600.0
#: Largest natural log of the drift slowdown (e^50 ~ 5e21): a drift run for days saturates instead of overflowing.
MAX_LOG_SLOWDOWN = 50.0


def drift_slowdown(drift_per_hour: float, hours: float) -> float:
    """Duration multiplier (>= 1) of a server whose speed falls by the fraction ``drift_per_hour`` per simulated
    hour, ``hours`` simulated hours after the drift began: ``(1 - drift_per_hour) ** -hours`` (1 for
    ``hours <= 0`` or no drift), capped at ``e ** MAX_LOG_SLOWDOWN``.

    Raises:
        ValueError: ``drift_per_hour`` outside [0, 1).
    """
    if not 0.0 <= drift_per_hour < 1.0:
        raise ValueError(f"drift_per_hour must be in [0, 1), got {drift_per_hour}")
    if drift_per_hour == 0.0 or hours <= 0.0:
        return 1.0
    return math.exp(min(-hours * math.log1p(-drift_per_hour), MAX_LOG_SLOWDOWN))


class Sequence:
    """One request inside the engine.

    Times are ``time.perf_counter()`` seconds; token counts are tokens.  ``generated`` only grows;
    ``finished`` becomes true when ``generated == plan.total_tokens`` (or the sequence was aborted).
    ``marks`` (speculative decoding only, else None) holds ``generated`` after the prefill and after each
    step that gave the sequence tokens, so the stream can send one chunk per engine output.
    """

    __slots__ = (
        "_order",
        "aborted",
        "admitted_at",
        "arrival",
        "cached_tokens",
        "event",
        "extra_prefill",
        "finished",
        "finished_at",
        "first_token_at",
        "generated",
        "marks",
        "paused",
        "plan",
        "prompt_tokens",
        "ready_at",
        "request_id",
        "stall_at",
        "stall_for",
        "stalled_at",
    )

    def __init__(self, request_id: str, prompt_tokens: int, plan: LengthPlan) -> None:
        self.request_id = request_id
        self.prompt_tokens = prompt_tokens
        #: Prompt tokens served from the prefix cache (not prefilled), 0 without one.
        self.cached_tokens = 0
        self.plan = plan
        self.generated = 0
        self.finished = False
        self.aborted = False
        self.event = Event()
        self.arrival = clock()
        self.admitted_at: float | None = None
        self.ready_at = 0.0
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.marks: list[int] | None = None
        #: Extra prefill delay, real seconds (fault "stall before first token").
        self.extra_prefill = 0.0
        #: Leave the batch once ``generated >= stall_at`` for ``stall_for`` real seconds (fault "stall").
        self.stall_at: int | None = None
        self.stall_for = 0.0
        #: perf_counter time the stall began (None until it happened).
        self.stalled_at: float | None = None
        self.paused = False
        self._order = 0

    @property
    def total_tokens(self) -> int:
        """Completion tokens this sequence will produce."""
        return self.plan.total_tokens

    def __lt__(self, other: Sequence) -> bool:  # heap order: prefill end time, then FIFO
        return (self.ready_at, self._order) < (other.ready_at, other._order)


class EngineListener:
    """Callbacks the engine fires (used for Prometheus metrics).  Default: do nothing."""

    def on_first_token(self, seq: Sequence) -> None:
        """The sequence's prefill finished and its first token was produced."""

    def on_tokens(self, n: int) -> None:
        """``n`` tokens were produced in one step (or one prefill)."""

    def on_finish(self, seq: Sequence, reason: str) -> None:
        """The sequence ended with ``reason`` (``stop`` / ``length`` / ``abort``)."""

    def on_spec(self, drafts: int, draft_tokens: int, accepted: int, accepted_per_pos: list[int]) -> None:
        """One speculative step: ``drafts`` sequences proposed ``draft_tokens`` tokens, ``accepted`` were kept;
        ``accepted_per_pos[i]`` = drafts whose i-th draft token was accepted."""


class Engine:
    """Continuous-batching scheduler run by a single greenlet (see module docstring).

    Args:
        preset: performance model.
        time_scale: real seconds per simulated second.
        max_num_seqs: running-sequence limit (None = the preset's).
        listener: metrics callbacks.
        max_lag: real seconds of lateness caught up with shorter steps.
        spec_tokens: draft tokens per step (0 = no speculative decoding).
        spec_acceptance: probability that each draft token is accepted (0..1).
        spec_overhead: extra step cost per draft token, as a fraction of a plain step.
        seed: seed of the acceptance draws.
        drift_per_hour: fraction (in [0, 1)) by which decode speed falls per simulated hour, and by which every
            step and prefill therefore lengthens (see :meth:`slowdown`); 0 = no drift.
        drift_origin: ``time.perf_counter()`` time the drift began (default: now). A server passes its own start,
            so a simulated restart (a fresh engine) does not reset the drift.

    Raises:
        ValueError: ``drift_per_hour`` outside [0, 1).
    """

    def __init__(
        self,
        preset: Preset,
        time_scale: float = 1.0,
        max_num_seqs: int | None = None,
        listener: EngineListener | None = None,
        max_lag: float = DEFAULT_MAX_LAG,
        spec_tokens: int = 0,
        spec_acceptance: float = 0.0,
        spec_overhead: float = DEFAULT_SPEC_OVERHEAD,
        seed: int = 0,
        drift_per_hour: float = 0.0,
        drift_origin: float | None = None,
    ) -> None:
        drift_slowdown(drift_per_hour, 0.0)  # validates
        self.drift_per_hour = float(drift_per_hour)
        self.drift_origin = clock() if drift_origin is None else float(drift_origin)
        self.preset = preset
        self.max_lag = float(max_lag)
        self.time_scale = float(time_scale)
        self.max_num_seqs = int(max_num_seqs or preset.max_num_seqs)
        self.listener = listener or EngineListener()
        self.spec_tokens = int(spec_tokens)
        self.spec_acceptance = float(spec_acceptance)
        self.spec_factor = 1.0 + float(spec_overhead) * self.spec_tokens if self.spec_tokens > 0 else 1.0
        self._rng = random.Random(f"spec|{seed}")
        self._waiting: deque[Sequence] = deque()
        self._prefilling: list[Sequence] = []  # heap by ready_at
        self._active: list[Sequence] = []  # decoding (joined or waiting for the next step)
        self._paused: list[tuple[float, int, Sequence]] = []  # heap by resume time (stalled sequences)
        self._batch: list[Sequence] = []  # members of the step in progress
        self._step_end: float | None = None
        self._last_step_end: float | None = None
        self._wake = Event()
        self._order = count()
        self._greenlet: gevent.Greenlet | None = None
        self.steps = 0

    # -- public API -------------------------------------------------------------------------
    @property
    def num_running(self) -> int:
        """Sequences admitted (prefilling, decoding or stalled), like ``vllm:num_requests_running``."""
        return len(self._prefilling) + len(self._active) + len(self._paused)

    @property
    def num_waiting(self) -> int:
        """Sequences queued for admission, like ``vllm:num_requests_waiting``."""
        return len(self._waiting)

    def slowdown(self, now: float) -> float:
        """Duration multiplier (>= 1) of a step or prefill starting at ``now`` (``time.perf_counter()`` seconds):
        :func:`drift_slowdown` after ``(now - drift_origin) / time_scale`` simulated seconds (1 without drift, or
        at time scale 0, where no duration is modelled)."""
        if not self.drift_per_hour or self.time_scale <= 0.0:
            return 1.0
        return drift_slowdown(self.drift_per_hour, (now - self.drift_origin) / self.time_scale / HOUR)

    def step_seconds(self, n: int, now: float) -> float:
        """Real seconds of an engine step of ``n`` decoding sequences starting at ``now`` (perf_counter seconds):
        the preset's step time x time scale x speculative overhead x drift slowdown."""
        return self.preset.step_seconds(n) * self.time_scale * self.spec_factor * self.slowdown(now)

    def prefill_seconds(self, new_tokens: int, now: float) -> float:
        """Real seconds of a prefill of ``new_tokens`` prompt tokens (not from the prefix cache) starting at
        ``now``: the preset's prefill time x time scale x drift slowdown (a fault's extra prefill not included)."""
        return self.preset.prefill_seconds(new_tokens) * self.time_scale * self.slowdown(now)

    def start(self) -> None:
        """Spawn the engine loop greenlet (idempotent)."""
        if self._greenlet is None:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        """Kill the engine loop greenlet."""
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; its ``event`` is set whenever tokens arrive or it finishes."""
        seq._order = next(self._order)
        if self.spec_tokens > 0:
            seq.marks = []
        if seq.total_tokens <= 0:
            self._finish(seq, clock())
            return
        self._waiting.append(seq)
        self._wake.set()

    def abort(self, seq: Sequence) -> None:
        """Drop a sequence (client went away).  Safe to call on finished sequences."""
        if seq.finished:
            return
        seq.aborted = True
        seq.finished = True
        seq.finished_at = clock()
        try:
            self._waiting.remove(seq)
        except ValueError:
            pass
        if seq in self._prefilling:
            self._prefilling.remove(seq)
            heapq.heapify(self._prefilling)
        if seq.paused:
            self._paused = [p for p in self._paused if p[2] is not seq]
            heapq.heapify(self._paused)
            seq.paused = False
        # decoding sequences are filtered out at the next step boundary
        self.listener.on_finish(seq, "abort")
        seq.event.set()
        self._wake.set()

    def abort_all(self) -> int:
        """Abort every queued, prefilling, decoding and stalled sequence (a server restart); returns how many."""
        seqs = [*self._waiting, *self._prefilling, *self._active, *(p[2] for p in self._paused)]
        for seq in seqs:
            self.abort(seq)
        self._active = []
        self._batch = []
        self._step_end = None
        self._last_step_end = None
        return len(seqs)

    # -- loop -------------------------------------------------------------------------------
    def _finish(self, seq: Sequence, now: float) -> None:
        seq.finished = True
        seq.finished_at = now
        self.listener.on_finish(seq, seq.plan.finish_reason)

    def _admit(self, now: float) -> None:
        while self._waiting and self.num_running < self.max_num_seqs:
            seq = self._waiting.popleft()
            seq.admitted_at = now
            prefill = self.prefill_seconds(seq.prompt_tokens - seq.cached_tokens, now)
            seq.ready_at = now + prefill + seq.extra_prefill
            heapq.heappush(self._prefilling, seq)

    def _complete_prefills(self, now: float) -> None:
        produced = 0
        while self._prefilling and self._prefilling[0].ready_at <= now:
            seq = heapq.heappop(self._prefilling)
            seq.generated = 1
            seq.first_token_at = now
            if seq.marks is not None:
                seq.marks.append(1)
            produced += 1
            self.listener.on_first_token(seq)
            if seq.generated >= seq.total_tokens:
                self._finish(seq, now)
            elif not self._maybe_stall(seq, now):
                self._active.append(seq)
            seq.event.set()
        if produced:
            self.listener.on_tokens(produced)

    def _maybe_stall(self, seq: Sequence, now: float) -> bool:
        """Move ``seq`` out of the batch when it reached its stall point; returns whether it did."""
        if seq.stall_at is None or seq.generated < seq.stall_at:
            return False
        seq.stall_at = None
        seq.stalled_at = now
        seq.paused = True
        heapq.heappush(self._paused, (now + seq.stall_for, seq._order, seq))
        return True

    def _resume(self, now: float) -> None:
        while self._paused and self._paused[0][0] <= now:
            _, _, seq = heapq.heappop(self._paused)
            seq.paused = False
            if not seq.finished:
                self._active.append(seq)

    def _spec_tokens(self, left: int, pos: list[int]) -> tuple[int, int]:
        """Tokens one sequence gets from a speculative step (``1 + accepted``, at most ``left``) and the
        accepted draft tokens actually used; counts accepted positions into ``pos``."""
        k, p, rnd = self.spec_tokens, self.spec_acceptance, self._rng.random
        accepted = 0
        while accepted < k and rnd() < p:
            accepted += 1
        used = min(accepted, left - 1)
        for i in range(used):
            pos[i] += 1
        return 1 + used, used

    def _end_step(self, now: float) -> None:
        produced = 0
        spec = self.spec_tokens > 0
        drafts = accepted_total = 0
        pos = [0] * self.spec_tokens
        stalled = False
        for seq in self._batch:
            if seq.finished:
                continue
            if spec:
                n, used = self._spec_tokens(seq.total_tokens - seq.generated, pos)
                drafts += 1
                accepted_total += used
                seq.generated += n
                seq.marks.append(seq.generated)  # type: ignore[union-attr]
            else:
                n = 1
                seq.generated += 1
            produced += n
            if seq.generated >= seq.total_tokens:
                self._finish(seq, now)
            elif seq.stall_at is not None:
                stalled = self._maybe_stall(seq, now) or stalled
            seq.event.set()
        self.steps += 1
        if produced:
            self.listener.on_tokens(produced)
        if drafts:
            self.listener.on_spec(drafts, drafts * self.spec_tokens, accepted_total, pos)
        if stalled:
            self._active = [s for s in self._active if not s.finished and not s.paused]
        else:
            self._active = [s for s in self._active if not s.finished]
        self._batch = []

    def _run(self) -> None:
        wake = self._wake
        while True:
            now = clock()
            if self._step_end is not None and now >= self._step_end:
                self._end_step(now)
                self._last_step_end = self._step_end
                self._step_end = None
            if self._paused:
                self._resume(now)
            self._admit(now)
            self._complete_prefills(now)
            if self._step_end is None and self._active:
                self._batch = list(self._active)
                step = self.step_seconds(len(self._batch), now)
                start = self._last_step_end if self._last_step_end is not None else now
                if now - start > max(step, self.max_lag):
                    start = now  # too far behind: absorb the stall instead of bursting
                self._step_end = start + step
            elif self._step_end is None:
                self._last_step_end = None
            # sleep until the next event: step end, prefill end, stall end, or a new submission
            deadline = self._step_end
            if self._prefilling:
                ready = self._prefilling[0].ready_at
                deadline = ready if deadline is None else min(deadline, ready)
            if self._paused:
                resume = self._paused[0][0]
                deadline = resume if deadline is None else min(deadline, resume)
            if deadline is None:
                wake.wait()
                wake.clear()
                continue
            timeout = deadline - clock()
            if timeout > 0:
                wake.clear()
                wake.wait(timeout)
                wake.clear()
            else:
                gevent.sleep(0)
