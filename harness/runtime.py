"""Run-time wiring between the profile, the Locust processes, the record sink and the report.

One :class:`RunContext` per process. On the master (or the single local process) it owns the run directory,
the embedded simulator (when there is no ``--host``) and the warm-up; it sends workers a ``llmload_phase``
message at each phase start carrying everything they need (profile, base URL, model, current step), so remote
workers need only the locustfile. Workers send their records back in ``llmload_records`` batches; the master
writes every record to ``records.jsonl``. A local run writes directly.

The context is held once, by this process's :class:`Run` (:func:`current`), with the rest of the process's run
state (exporter, metrics, lag watch, signal and worker bookkeeping); :func:`context` reads it.
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass, field
from typing import Any

import gevent

from harness.client import ChatClient, Timeouts
from harness.clientlag import LagWatch
from harness.config import Profile, PromptSpec, TargetSpec
from harness.exporter import Exporter
from harness.metrics import RunMetrics
from harness.records import RunDir
from harness.result import RequestResult
from harness.usable import UsableRule

__all__ = [
    "PhaseState",
    "Run",
    "RunContext",
    "SignalState",
    "WorkerBook",
    "context",
    "current",
    "target_client",
]

log = logging.getLogger("llmload")

MSG_PHASE = "llmload_phase"
MSG_RECORDS = "llmload_records"
#: Master -> workers when a run is stopped before its end (Ctrl-C, SIGTERM, the web UI's Stop): stop the users,
#: letting in-flight requests finish for ``stop_timeout`` s, and send every record. Workers answer MSG_STOPPED.
MSG_STOP = "llmload_stop"
MSG_STOPPED = "llmload_stopped"
_FLUSH_INTERVAL_S = 0.5


def target_client(
    target: TargetSpec, base_url: str, timeouts: Timeouts, usable: UsableRule | None = None
) -> ChatClient:
    """A client for ``base_url`` with the profile target's API key, headers and TLS setting: the users' requests and
    the model lookup go through the same settings (the lookup once ignored ``verify_tls: false``). ``usable``: the
    profile's usable-sample rule (:meth:`harness.config.Profile.usable_rule`)."""
    return ChatClient(
        base_url,
        api_key=target.api_key(),
        timeouts=timeouts,
        headers=dict(target.headers),
        verify_tls=target.verify_tls,
        usable=usable,
    )


@dataclass
class PhaseState:
    """The phase a process is in; every request records the phase it *started* in."""

    phase: str = "warmup"
    step: int = -1
    concurrency: int = 0
    #: The sweep-axes setting's label (:attr:`harness.axes.Setting.label`); None without ``axes:``.
    setting: str | None = None


@dataclass
class RunContext:
    """Everything a process needs to send and record requests. See the module docstring."""

    profile: Profile
    base_url: str
    model: str
    role: str  # "local" | "master" | "worker"
    worker_id: str = "local"
    run_dir: RunDir | None = None
    state: PhaseState = field(default_factory=PhaseState)
    sim: Any = None
    finished: bool = False
    _pending: list[dict[str, Any]] = field(default_factory=list)
    _flusher: Any = None
    _user_seq: int = 0
    _weights: list[float] = field(default_factory=list)
    _bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    _setting_bodies: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    _runner: Any = None

    def __post_init__(self) -> None:
        self._weights = list(itertools.accumulate(p.weight for p in self.profile.prompts))  # cumulative
        self._bodies = {p.id: self.profile.build_body(p, self.model) for p in self.profile.prompts}
        self._setting_bodies = {
            s.label: {pid: s.apply(body) for pid, body in self._bodies.items()} for s in self.profile.settings()
        }

    # -- requests -------------------------------------------------------------------------------------------
    def new_client(self, timeouts: Timeouts | None = None) -> ChatClient:
        """A client for one user: its own keep-alive connection, the profile's timeouts, headers and usable rule."""
        to = timeouts or self.profile.timeouts.to_timeouts()
        return target_client(self.profile.target, self.base_url, to, self.profile.usable_rule())

    def next_user_id(self) -> str:
        """A user id unique in the run (worker id + sequence)."""
        self._user_seq += 1
        return f"{self.worker_id}:{self._user_seq}"

    def pick(self, rng: random.Random) -> tuple[PromptSpec, dict[str, Any]]:
        """Draw a prompt from the weighted mix; return it with its prebuilt request body (with the current
        phase's sweep-axes setting applied, when it has one)."""
        prompt = rng.choices(self.profile.prompts, cum_weights=self._weights)[0]
        setting = self.state.setting
        bodies = self._setting_bodies[setting] if setting is not None else self._bodies
        return prompt, bodies[prompt.id]

    def body(self, prompt_id: str) -> dict[str, Any]:
        """The prebuilt request body of prompt ``prompt_id`` under the current phase's setting (as :meth:`pick`).

        Raises:
            KeyError: no prompt has that id.
        """
        setting = self.state.setting
        return (self._setting_bodies[setting] if setting is not None else self._bodies)[prompt_id]

    # -- records --------------------------------------------------------------------------------------------
    def record(self, res: RequestResult) -> None:
        """Keep one request's result: write it (local/master) or queue its record for the master (worker)."""
        if self.run_dir is not None:
            self.run_dir.write_record(res)
        else:
            self._pending.append(res.to_record())

    def start_flusher(self, runner: Any) -> None:
        """On a worker: send queued records to the master every 0.5 s."""
        self._runner = runner
        if self._flusher is None:
            self._flusher = gevent.spawn(self._flush_loop)

    def _flush_loop(self) -> None:
        while True:
            gevent.sleep(_FLUSH_INTERVAL_S)
            self.flush()

    def flush(self) -> None:
        """Send queued records to the master now (worker only; a no-op elsewhere)."""
        if self._pending and self._runner is not None:
            batch, self._pending = self._pending, []
            self._runner.send_message(MSG_RECORDS, batch)

    # -- phase messages -------------------------------------------------------------------------------------
    def phase_message(self) -> dict[str, Any]:
        """The payload of a ``llmload_phase`` message (msgpack-safe)."""
        return {
            "profile": self.profile.public_dict(),
            "base_url": self.base_url,
            "model": self.model,
            "phase": self.state.phase,
            "step": self.state.step,
            "concurrency": self.state.concurrency,
            "setting": self.state.setting,
        }


@dataclass
class SignalState:
    """How far this process got in handling Ctrl-C and SIGTERM (:mod:`harness.locust.signals`)."""

    #: Master / single process: the sweep is being stopped (a first Ctrl-C or a SIGTERM was taken).
    interrupted: bool = False
    #: ``time.monotonic()`` of the first SIGINT taken (a second one within the echo window is the same Ctrl-C).
    first_sigint: float | None = None


@dataclass
class WorkerBook:
    """The master's view of its workers, and a worker's own graceful stop (:mod:`harness.locust.drain`)."""

    #: Master: requests in flight on each worker (client id -> count), from the workers' Locust reports.
    in_flight: dict[str, int] = field(default_factory=dict)
    #: Master: workers that answered MSG_STOP (all their records sent).
    stopped: set[str] = field(default_factory=set)
    #: Worker: the greenlet of its graceful stop once one started (a second request waits for it).
    stop: Any = None


@dataclass
class Run:
    """Everything one Locust process holds for its run; one per process (:func:`current`).

    The context (:attr:`ctx`, with the run directory) is held here and nowhere else; :func:`context` reads it.
    The Locust wiring (:mod:`harness.locust`) keeps the rest here: the exporter and its metrics (master or single
    process), the client lag watch, the signal and worker bookkeeping, and the report text printed at quit.
    """

    ctx: RunContext | None = None
    #: The run's exported metrics (listening to the run directory), when the exporter serves them.
    metrics: RunMetrics | None = None
    exporter: Exporter | None = None
    #: Seconds the exporter waits at quit for a last scrape (``--metrics-linger``).
    linger: float = 0.0
    lag_watch: LagWatch = field(default_factory=LagWatch)
    #: The report's terminal summary once the report is written (None: not written or failed).
    report_summary: str | None = None
    signals: SignalState = field(default_factory=SignalState)
    workers: WorkerBook = field(default_factory=WorkerBook)

    def hold(self, ctx: RunContext) -> None:
        """Make ``ctx`` this process's context. Where it writes the run directory (master, single process) the
        lag watch listens to every record written there and logs its warning (:class:`LagWatch`)."""
        self.ctx = ctx
        if ctx.run_dir is not None:
            ctx.run_dir.on_record.add_listener(self._watch_lag)

    def _watch_lag(self, rec: RequestResult) -> None:
        warning = self.lag_watch.observe(rec)
        if warning:
            log.warning(warning)


_RUN = Run()


def current() -> Run:
    """This process's :class:`Run`."""
    return _RUN


def context() -> RunContext:
    """This process's :class:`RunContext` (``current().ctx``).

    Raises:
        RuntimeError: before the run was set up (on a worker: before the master's first phase message).
    """
    ctx = _RUN.ctx
    if ctx is None:
        raise RuntimeError("llmload: run context not set up yet (no profile loaded / no phase message received)")
    return ctx
