"""The standard sweep as a Locust load shape: warm-up, single stream, then concurrency steps.

Runs on the master (or the single local process) only. The warm-up is sent by the shape itself, before any
user starts, with its own timeout (the seed's fix: a short prompt, ``max_tokens`` 16, 300 s); its records are
marked ``phase: "warmup"`` and excluded from every figure. Then the single-stream phase holds 1 user, and each
step holds its users, all started at once (spawn rate = users), for the configured duration. Phase starts are
written to ``phases.jsonl`` and broadcast to workers before the users of that phase are spawned.

In the web UI's "fixed" mode (:class:`harness.runtime.FixedLoad`) the stage after the warm-up is one step holding
Locust's user count, ramped up at its spawn rate, for its run time (no run time: until Stop). One shape instance
serves every run of a web-UI process: it starts over when the run's context is a new one.

After the last step the shape asks for 0 users (each user ends its request in flight, up to the stop timeout)
and stops the test only once every user is gone, so in master/worker mode the master is still receiving when the
workers send the records of those last requests (a stopped master no longer receives anything).
"""

from __future__ import annotations

from locust import LoadTestShape

import logging
import math
import time
from dataclasses import dataclass, replace

import gevent

from harness import rate as rate_mode
from harness.arrivals import arrivals_before
from harness.client import Timeouts
from harness.result import RequestIdentity, RequestResult
from harness.runtime import MSG_PHASE, PhaseState, RunContext, context, current
from harness.search import MAX_EXTENSIONS, CapacitySearch, measure_step
from harness.split import worker_ids
from harness.until import MarginChecker

__all__ = ["ReasoningSweepShape", "Stage", "plan_stages"]

log = logging.getLogger("llmload")

#: Seconds to keep the master receiving after the last user is gone (workers send records every 0.5 s).
_SETTLE_S = 1.0
#: Seconds past the stop timeout after which the drain gives up (worker reports arrive every 3 s).
_DRAIN_MARGIN_S = 15.0


@dataclass(frozen=True)
class Stage:
    """One phase after the warm-up: ``users`` held for ``duration`` seconds, with the sweep-axes ``setting``
    (its label; None without ``axes:``); a rate step (``rate`` requests/s, None in a closed-loop phase) sends on
    its arrival schedule with at most ``users`` in flight."""

    phase: str
    step: int
    users: int
    duration: float
    setting: str | None = None
    rate: float | None = None


def plan_stages(ctx: RunContext) -> list[Stage]:
    """The stages of a run: the single-stream phase (if its duration > 0), then each step; in fixed mode one step
    of the fixed users for the run time (``inf`` without one), with no setting (the sweep axes are the sweep's).

    With sweep axes (``axes:``) the steps run once per setting, in setting order, numbered on (setting 1 has
    steps 1..k, setting 2 steps k+1..2k...); the single-stream phase runs once, with the first setting.
    """
    p = ctx.profile
    f = getattr(ctx, "fixed", None)  # (a context-like object without one: the sweep)
    if f is not None:
        return [Stage("step", 1, f.users, f.run_time if f.run_time is not None else math.inf)]
    labels: list[str | None] = [s.label for s in p.settings()] or [None]
    stages = []
    if p.single_stream.duration > 0:
        stages.append(Stage("single", 0, 1, p.single_stream.duration, labels[0]))
    if p.search is not None:  # the search appends its steps as it goes (SearchDriver)
        return stages
    if p.rate is not None:
        return stages + rate_stages(ctx)
    steps = [(label, c) for label in labels for c in p.steps.concurrency]
    length = p.steps.until.max if p.steps.until is not None else p.steps.duration  # until: ends earlier at its margin
    for i, (label, c) in enumerate(steps, start=1):
        stages.append(Stage("step", i, c, length, label))
    return stages


def rate_stages(ctx: RunContext) -> list[Stage]:
    """The rate steps of a profile with ``rate:``: one per (sweep-axes setting, rate), settings outermost as in
    :func:`plan_stages`, ``rate.users`` users, ``steps.duration`` s each."""
    p = ctx.profile
    assert p.rate is not None
    labels: list[str | None] = [s.label for s in p.settings()] or [None]
    steps = [(label, float(r)) for label in labels for r in p.rate.rates]
    return [Stage("step", i, p.rate.users, p.steps.duration, label, r) for i, (label, r) in enumerate(steps, start=1)]


def _rate_phase_fields(st: Stage, ctx: RunContext) -> dict[str, object]:
    """Extra ``phase_start`` keys of a rate step: ``rate`` (target requests/s), ``arrival``, ``burstiness``,
    ``max_concurrency`` (None: uncapped but for the pool of ``concurrency`` users)."""
    spec = ctx.profile.rate
    if st.rate is None or spec is None:
        return {}
    return {"rate": st.rate, "arrival": spec.arrival, "burstiness": spec.burstiness,
            "max_concurrency": spec.max_concurrency}


#: Seconds a search step is held past its end before it is measured: the workers' last records of its window
#: arrive (they send every 0.5 s). The next step starts after it.
SEARCH_SETTLE_S = 1.0


class SearchDriver:
    """The SLO capacity search on the master (:mod:`harness.search`): collects the records written to the run
    directory and, when a search step's time is up (plus :data:`SEARCH_SETTLE_S`), measures it and picks the next
    setting. An inconclusive step (too few requests, :mod:`harness.search`) is extended by ``steps.duration`` (the
    same step goes on; :meth:`next_stage` returns it with the longer duration) and measured again over the whole
    step, at most :data:`harness.search.MAX_EXTENSIONS` times. Its outcome is written to ``phases.jsonl`` as a
    ``search`` event (``result``: :meth:`harness.search.CapacitySearch.result`) before the load ends."""

    def __init__(self, ctx: RunContext) -> None:
        spec = ctx.profile.search
        assert spec is not None
        self.ctx = ctx
        self.spec = spec
        self.search = CapacitySearch(spec.axis, spec.low, spec.high, spec.tolerance, spec.max_steps)
        self.records: list[RequestResult] = []
        if ctx.run_dir is not None:
            ctx.run_dir.on_record.add_listener(self.records.append)
        self.settle_until: float | None = None
        self.settle_s = SEARCH_SETTLE_S
        self.measured: set[int] = set()
        self.extensions: dict[int, int] = {}

    def stage(self, setting: float, step: int) -> Stage:
        """The step probing ``setting``: ``setting`` users, or the rate section's users at ``setting`` req/s."""
        d = self.ctx.profile.steps.duration
        if self.spec.axis == "rate":
            spec = self.ctx.profile.rate
            assert spec is not None
            return Stage("step", step, spec.users, d, rate=float(setting))
        return Stage("step", step, int(setting), d)

    def next_stage(self, last: Stage | None, phase_wall: float | None) -> Stage | bool | None:
        """After ``last`` (None: no stage yet) ran out: True to hold it (settling); ``last`` again with a longer
        duration (same phase and step) to extend it (inconclusive); else the next step, or None when the search is
        done (its ``search`` event written)."""
        if last is not None and last.phase == "step" and last.step not in self.measured:
            now = time.perf_counter()
            if self.settle_until is None:
                self.settle_until = now + SEARCH_SETTLE_S
            if now < self.settle_until:
                return True
            self.settle_until = None
            self.measured.add(last.step)
            setting = float(last.rate if last.rate is not None else last.users)
            # a concurrency step ends now (as the report's step: at the next phase start); a rate step's sample is
            # its arrivals until its time ran out, each with the settle time to finish
            start, end = float(phase_wall or 0.0), time.time()
            scheduled = None
            rspec = self.ctx.profile.rate
            if self.spec.axis == "rate" and rspec is not None:
                end -= self.settle_s
                span = end - (start + rate_mode.LEAD_S)
                scheduled = arrivals_before(rspec.arrival, setting, rspec.burstiness, f"{rspec.seed}:{last.step}", span)
            probe = measure_step(setting, last.step, start, end, self.records, dict(self.spec.slo),
                                 schedule_relative=self.spec.axis == "rate", scheduled=scheduled)
            probe.extensions = self.extensions.get(last.step, 0)
            if probe.inconclusive and probe.extensions < MAX_EXTENSIONS:
                self.measured.discard(last.step)
                self.extensions[last.step] = probe.extensions + 1
                d = self.ctx.profile.steps.duration
                log.info("search step %d at %g: %s; extending it by %g s (%d of at most %d)", last.step,
                         setting, probe.reason, d, probe.extensions + 1, MAX_EXTENSIONS)
                return replace(last, duration=last.duration + d)
            self.search.observe(probe)
            log.info("search step %d at %g: %s (%s)", last.step, setting, "meets the SLOs" if probe.passed
                     else "FAILS the SLOs", ", ".join(f"{k} {v['value']}" for k, v in probe.figures.items())
                     or probe.reason)
        nxt = self.search.next_setting()
        if nxt is None:
            result = self.search.result()
            log.info("search done: %s", result["verdict"])
            if self.ctx.run_dir is not None:
                self.ctx.run_dir.write_phase({"event": "search", "wall": time.time(), "result": result})
            return None
        step = (last.step if last is not None and last.phase == "step" else 0) + 1
        return self.stage(nxt, step)


class WarmupFailed(RuntimeError):
    """Every warm-up request failed: the server is not ready, and no figure would be meaningful."""


class ReasoningSweepShape(LoadTestShape):
    """Warm-up -> single stream (C=1) -> steps (default C = 8, 16, 32, 64), from the profile."""

    def __init__(self) -> None:
        super().__init__()
        self._ctx: RunContext | None = None
        self._new_run()

    def _new_run(self) -> None:
        self._stages: list[Stage] | None = None
        self._t0: float | None = None
        self._current: int = -1
        self._drain: tuple[float, int] | None = None  # (deadline, users of the last stage) while draining
        self._idle_since: float | None = None
        self.warmup_error: str | None = None
        self._search: SearchDriver | None = None
        self._phase_wall: float | None = None
        self._until: MarginChecker | None = None
        self._until_next: float = 0.0  # stage seconds of the next margin check
        self._until_done: bool = True  # the current stage's until decision was taken (or it has none)

    def _warmup(self, ctx: RunContext) -> None:
        w = ctx.profile.warmup
        if not w.enabled:
            return
        to = ctx.profile.timeouts
        wt = w.timeout
        timeouts = Timeouts(connect=to.connect, first_byte=wt, first_token=wt, idle=wt, total=wt)
        client = ctx.new_client(timeouts)
        body = {"model": ctx.model, "messages": [{"role": "user", "content": w.prompt}], "max_tokens": w.max_tokens}
        ctx.state = PhaseState("warmup", -1, 1)
        if ctx.run_dir is not None:
            ctx.run_dir.write_phase(
                {
                    "event": "phase_start",
                    "phase": "warmup",
                    "step": -1,
                    "concurrency": 1,
                    "wall": time.time(),
                    "planned_duration": None,
                }
            )
            ctx.sample_cpu()
        ok = False
        identity = RequestIdentity("warmup", None, user="warmup", phase="warmup", step=-1, concurrency=1)
        for i in range(w.requests):
            try:
                res = client.stream_chat(body, identity)
            except gevent.GreenletExit:  # Stop during the warm-up: counted as cut off, never recorded
                ctx.cut_off += 1
                client.close()
                raise
            ctx.record(res)
            log.info(
                "warm-up %d/%d: %s in %.1f s (%d output tokens, finish_reason %s)",
                i + 1,
                w.requests,
                "ok" if res.ok else f"FAILED ({res.error_class}: {res.error_detail})",
                res.e2e or 0.0,
                res.output_tokens,
                res.finish_reason,
            )
            ok = ok or res.ok
        client.close()
        if not ok:
            self.warmup_error = "every warm-up request failed; see records.jsonl (phase warmup)"
            log.error("%s: stopping before any measured load", self.warmup_error)

    def tick(self) -> tuple[int, float] | tuple[int, float, list[type]] | None:
        """Locust calls this about once a second; see the class docstring for the sequence."""
        ctx = context()
        if ctx.run_dir is not None and ctx.run_dir.closed:  # its run ended (web UI): nothing to run until a Start
            return None
        if ctx is not self._ctx:  # a new run (web UI: each Start is one)
            self._new_run()
            self._ctx = ctx
        if self._stages is None:
            self._stages = plan_stages(ctx)
            if ctx.profile.search is not None and ctx.fixed is None:
                self._search = SearchDriver(ctx)
            if ctx.profile.steps.until is not None and ctx.fixed is None:
                self._until = MarginChecker(ctx.profile.steps.until)
                if ctx.run_dir is not None:
                    ctx.run_dir.on_record.add_listener(self._until.add)
            self._warmup(ctx)
            if self.warmup_error:
                return None
            self._t0 = time.perf_counter()
        assert self._t0 is not None
        elapsed = time.perf_counter() - self._t0
        if ctx.fixed is not None and ctx.fixed.run_time is not None and not ctx.finished:
            left = ctx.fixed.run_time - elapsed
            if 0 < left < 1.0:  # Locust ticks once a second: end the fixed run on time, not up to 1 s late
                gevent.sleep(left)
                elapsed = time.perf_counter() - self._t0
        if self._until is not None and not self._until_done:
            elapsed = self._until_tick(ctx, elapsed)
        idx, acc = -1, 0.0
        for i, st in enumerate(self._stages):
            acc += st.duration
            if elapsed < acc:
                idx = i
                break
        if idx < 0 and self._search is not None and not ctx.finished:
            ran = self._stages[self._current] if self._current >= 0 else None
            nxt = self._search.next_stage(ran, self._phase_wall)
            if nxt is True and ran is not None:  # settling: hold the last step a little longer
                return ran.users, float(ran.users)
            if isinstance(nxt, Stage) and ran is not None and (nxt.phase, nxt.step) == (ran.phase, ran.step):
                self._stages[self._current] = nxt  # extended (inconclusive): the same step goes on, no new phase
                return nxt.users, float(nxt.users)
            if isinstance(nxt, Stage):
                self._stages.append(nxt)
                self._t0 += elapsed - acc  # the new step starts now, not when the last one's time ran out
                elapsed, idx = acc, len(self._stages) - 1
        if idx < 0:
            if not ctx.finished:
                ctx.finished = True
                if ctx.profile.rate is not None:  # no arrival after the last step
                    rate_mode.broadcast_step(self.runner, current().dispatch, -1, None, ctx.profile.rate,
                                             time.time(), ctx.run_id)
                ctx.end_load(wall=time.time())  # the last step ends here; in-flight requests drain after it
                stop_timeout = self.runner.environment.stop_timeout if self.runner else 0.0
                log.info(
                    "last step done; letting in-flight requests finish (stop timeout %.0f s)", stop_timeout
                )
                last = self._stages[-1].users if self._stages else 1
                self._drain = (time.perf_counter() + (stop_timeout or 0.0) + _DRAIN_MARGIN_S, max(1, last))
            return self._drain_tick()
        st = self._stages[idx]
        if idx != self._current:
            self._current = idx
            ctx.state = PhaseState(st.phase, st.step, st.users, st.setting)
            wall = time.time()
            self._phase_wall = wall
            if ctx.run_dir is not None:
                event: dict[str, object] = {
                    "event": "phase_start",
                    "phase": st.phase,
                    "step": st.step,
                    "concurrency": st.users,
                    "wall": wall,
                    "planned_duration": st.duration if math.isfinite(st.duration) else None,
                    **_rate_phase_fields(st, ctx),
                }
                if st.setting is not None:
                    event["setting"] = st.setting
                if self._until is not None and st.phase == "step":
                    event["until"] = ctx.profile.steps.until.model_dump() if ctx.profile.steps.until else None
                ctx.run_dir.write_phase(event)
                ctx.sample_cpu()
            if self._until is not None:
                self._until_done = st.phase != "step"
                if st.phase == "step":
                    self._until.begin(st.step, wall, st.users)
                    self._until_next = self._until.spec.check_every
                    self._set_halfwidth(None)
            length = f"for {st.duration:.0f} s" if math.isfinite(st.duration) else "until stopped"
            log.info("phase %s step %d: %d users %s%s%s", st.phase, st.step, st.users, length,
                     f" at {st.rate:g} req/s" if st.rate is not None else "", f" ({st.setting})" if st.setting else "")
            if self.runner is not None:
                self.runner.send_message(MSG_PHASE, ctx.phase_message(worker_ids(self.runner)))
            if ctx.profile.rate is not None:
                rate_mode.broadcast_step(self.runner, current().dispatch, st.step, st.rate, ctx.profile.rate, wall,
                                         ctx.run_id, closed=st.rate is None)
        rate = ctx.fixed.spawn_rate if ctx.fixed is not None else float(st.users)
        return st.users, rate

    def _until_tick(self, ctx: RunContext, elapsed: float) -> float:
        """The margin check of the current step (``steps.until``), at most every ``check_every`` seconds and at its
        ``max``: when it ends the step, writes the ``until`` event and returns ``elapsed`` moved to the step's end
        (the run's clock ``_t0`` is moved back by the time the step had left), else ``elapsed`` unchanged."""
        assert self._until is not None and self._stages is not None and self._t0 is not None
        begun = sum(st.duration for st in self._stages[: self._current])
        st = self._stages[self._current]
        in_step = elapsed - begun
        at_max = in_step >= st.duration
        if not at_max and in_step < self._until_next:
            return elapsed
        self._until_next = in_step + self._until.spec.check_every
        wall = time.time()
        d = self._until.decide(min(in_step, st.duration), wall)
        self._set_halfwidth(d.halfwidth)
        if not d.end and not at_max:
            return elapsed
        self._until_done = True
        margin = self._until.spec.margin
        hw = f"±{d.halfwidth:.1%}" if d.halfwidth is not None else "no interval"
        if d.reached:
            log.info("step %d: margin reached at %.0f s (usable rate %s <= ±%.1f%%)", st.step, d.elapsed_s,
                     hw, 100 * margin)
        else:
            log.info("step %d: margin ±%.1f%% not reached at its max %.0f s (%s)", st.step, 100 * margin,
                     st.duration, hw)
        if ctx.run_dir is not None:
            ctx.run_dir.write_phase(d.event(st.step, margin, wall))
        if at_max:
            return elapsed
        left = st.duration - in_step
        self._t0 -= left
        return elapsed + left

    def _set_halfwidth(self, h: float | None) -> None:
        """Show ``h`` (the live relative half-width; None: none yet) on the run's exported metrics."""
        m = current().metrics
        if m is not None:
            with m.lock:
                m.until_halfwidth = h

    def _drain_tick(self) -> tuple[int, float] | None:
        """0 users until every user has ended its last request (and its records had time to arrive)."""
        if self._drain is None or self.runner is None:
            return None
        deadline, rate = self._drain
        now = time.perf_counter()
        if self.runner.user_count == 0:
            if self._idle_since is None:
                self._idle_since = now
            if now - self._idle_since >= _SETTLE_S:
                return None
        else:
            self._idle_since = None
        if now > deadline:
            log.warning("users still running %.0f s after the stop timeout; stopping", _DRAIN_MARGIN_S)
            return None
        return 0, float(rate)
