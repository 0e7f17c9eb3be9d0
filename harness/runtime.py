"""Run-time wiring between the profile, the Locust processes, the record sink and the report.

One :class:`RunContext` per process. On the master (or the single local process) it owns the run directory,
the embedded simulator (when there is no ``--host``) and the warm-up; it sends workers a ``llmload_phase``
message at each phase start carrying everything they need (profile, base URL, model, current step), so remote
workers need only the locustfile. Workers send their records back in ``llmload_records`` batches; the master
writes every record to ``records.jsonl``. A local run writes directly.

The context is held once, by this process's :class:`Run` (:func:`current`), with the rest of the process's run
state (exporter, metrics, lag watch, signal and worker bookkeeping); :func:`context` reads it.

In web-UI mode each Start is a run of its own (:mod:`harness.locust.webrun`): the Run holds the current context
while the run goes, keeps the directories of the runs that ended, and :func:`runs` gives a snapshot of both for the
web UI's views (:class:`Runs`).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent

from harness.axes import Setting
from harness.client import ChatClient, Timeouts
from harness.clientlag import LagWatch
from harness.config import Profile, TargetSpec
from harness.exporter import Exporter
from harness.metrics import InFlight, RunMetrics
from harness.prompts.source import MixSource, PromptLike, PromptSource, build_source
from harness.rate import Dispatcher
from harness.records import RunDir
from harness.result import RequestResult
from harness.selfcert import CPU_SAMPLE_S, MSG_CPU, cpu_sample
from harness.usable import UsableRule

__all__ = [
    "RUN_STATES",
    "FixedLoad",
    "PhaseState",
    "Run",
    "RunContext",
    "Runs",
    "SignalState",
    "StopProgress",
    "WorkerBook",
    "WorkerStatus",
    "context",
    "current",
    "of",
    "runs",
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
        headers=target.all_headers(),
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


@dataclass(frozen=True)
class FixedLoad:
    """The web UI's "fixed" mode: Locust's own user count, ramp-up and run time, held after the warm-up."""

    #: Users to hold (>= 1).
    users: int
    #: Users started per second while ramping up (> 0).
    spawn_rate: float
    #: Seconds to hold them after the warm-up; None: until Stop.
    run_time: float | None = None


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
    #: The run's id (its directory's name; on a worker: from the master's phase messages), "" when unknown.
    run_id: str = ""
    #: "sweep" (the profile's shape) or "fixed" (:attr:`fixed`, web UI only).
    mode: str = "sweep"
    fixed: FixedLoad | None = None
    #: The master runs a web UI (each Start is a run); workers learn it from the phase messages.
    web: bool = False
    #: Records that arrived after the run directory was closed (not written; logged).
    late: int = 0
    #: Requests of this run killed in flight when the stop timeout ran out (never recorded); on a master, its
    #: workers' counts added up from their MSG_STOPPED answers.
    cut_off: int = 0
    #: ``load_end`` was written to ``phases.jsonl`` (the last step's window ends there; at most once a run).
    load_ended: bool = False
    #: Why the run stopped early: "sigint", "sigterm" or "stop" (web UI's Stop); "" when it was not stopped.
    stop_cause: str = ""
    _pending: list[dict[str, Any]] = field(default_factory=list)
    #: A worker's ``client_cpu`` samples not yet sent to the master (:mod:`harness.selfcert`).
    _pending_cpu: list[dict[str, Any]] = field(default_factory=list)
    _flusher: Any = None
    _user_seq: int = 0
    _settings: dict[str, Setting] = field(default_factory=dict)
    _setting_bodies: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _runner: Any = None
    #: What the users draw requests from (the ``prompts:`` mix, a data set or synthetic prompts), one per process.
    prompt_source: PromptSource = field(init=False)

    def __post_init__(self) -> None:
        self.prompt_source = build_source(self.profile, self.model, self.worker_id)
        self._settings = {s.label: s for s in self.profile.settings()}

    @property
    def secrets(self) -> tuple[str, ...]:
        """The run's secret values, the one list every writer redacts (:func:`harness.redact.redact_text`): the
        API key, secret header values (``headers_env`` included) and secret query parameters of the base URLs."""
        from harness.redact import secret_query_values

        values = [*self.profile.target.secret_values(), *secret_query_values(self.base_url)]
        return tuple(dict.fromkeys(v for v in values if v))

    # -- phases ---------------------------------------------------------------------------------------------
    def end_load(self, cause: str = "", wall: float | None = None) -> bool:
        """Write ``{"event": "load_end", "wall"}`` to ``phases.jsonl`` now, once a run: the last step's
        measurement window ends at this instant, before in-flight requests drain (the shape's normal end, or the
        moment a stop began: ``cause`` "sigint", "sigterm" or "stop", recorded in :attr:`stop_cause` and, for an
        early stop, in ``run.json`` as ``stop_cause``).

        ``wall``: the epoch seconds to write (default: now).

        Returns True when this call wrote it; False when it was written already, or there is no open run
        directory (a worker, a closed run)."""
        if self.run_dir is None or self.run_dir.closed:
            return False
        if cause and not self.stop_cause and not self.finished:
            self.stop_cause = cause
            self.run_dir.meta["stop_cause"] = cause
        if self.load_ended:
            return False
        self.load_ended = True
        self.sample_cpu()  # the load's last CPU sample of this process, just before the event that ends the step
        self.run_dir.write_phase({"event": "load_end", "wall": time.time() if wall is None else wall})
        return True

    def sample_cpu(self) -> None:
        """Take one ``client_cpu`` sample of this process (:func:`harness.selfcert.cpu_sample`): written to
        ``phases.jsonl`` by a single process, queued for the master by a worker (sent with :meth:`flush`); a master
        runs no users and takes none, nor does a closed run."""
        if self.role == "master":
            return
        if self.run_dir is None:
            self._pending_cpu.append(cpu_sample(self.worker_id))
        elif not self.run_dir.closed:
            self.run_dir.write_phase(cpu_sample(self.worker_id))

    # -- requests -------------------------------------------------------------------------------------------
    def new_client(self, timeouts: Timeouts | None = None) -> ChatClient:
        """A client for one user: its own keep-alive connection, the profile's timeouts, headers and usable rule."""
        to = timeouts or self.profile.timeouts.to_timeouts()
        return target_client(self.profile.target, self.base_url, to, self.profile.usable_rule())

    def next_user_id(self) -> str:
        """A user id unique in the run (worker id + sequence)."""
        self._user_seq += 1
        return f"{self.worker_id}:{self._user_seq}"

    def pick(self, rng: random.Random) -> tuple[PromptLike, dict[str, Any]]:
        """Draw the next prompt (:meth:`PromptSource.sample`); return it with its request body, the current
        phase's sweep-axes setting applied when it has one (:meth:`settle`)."""
        prompt, body = self.prompt_source.sample(rng)
        return prompt, self.settle(prompt, body)

    def pick_base(self, rng: random.Random) -> tuple[PromptLike, dict[str, Any]]:
        """Draw the next prompt as :meth:`pick` does, its body without any setting applied (a conversation keeps
        it and settles each turn under that turn's setting)."""
        return self.prompt_source.sample(rng)

    def settle(self, prompt: PromptLike, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with the current phase's sweep-axes setting applied (:meth:`harness.axes.Setting.apply`, a
        copy); ``body`` itself without a setting. The mix's bodies are built once per setting and prompt (a data
        set's or synthetic prompt's body is new per draw, so it is settled per request)."""
        label = self.state.setting
        if label is None:
            return body
        setting = self._settings[label]
        if not isinstance(self.prompt_source, MixSource):
            return setting.apply(body)
        key = (label, prompt.id)
        settled = self._setting_bodies.get(key)
        if settled is None:
            settled = self._setting_bodies[key] = setting.apply(body)
        return settled

    # -- records --------------------------------------------------------------------------------------------
    def record(self, res: RequestResult) -> None:
        """Keep one request's result: write it (local/master) or queue its record for the master (worker)."""
        if self.run_dir is not None:
            if self.run_dir.closed:
                self.late += 1
                log.warning("a request ended after its run %s was closed: not recorded", self.run_id)
                return
            self.run_dir.write_record(res)
        else:
            self._pending.append(res.to_record())

    def start_flusher(self, runner: Any) -> None:
        """On a worker: send queued records to the master every 0.5 s."""
        self._runner = runner
        if self._flusher is None:
            self._flusher = gevent.spawn(self._flush_loop)

    def stop_flusher(self) -> None:
        """On a worker: send what is queued, then stop the periodic sends (the context is being replaced)."""
        self.flush()
        if self._flusher is not None:
            self._flusher.kill(block=False)
            self._flusher = None

    def _flush_loop(self) -> None:
        every = max(1, round(CPU_SAMPLE_S / _FLUSH_INTERVAL_S))
        n = 0
        while True:
            gevent.sleep(_FLUSH_INTERVAL_S)
            n += 1
            if n % every == 0:
                self.sample_cpu()
            self.flush()

    def flush(self) -> None:
        """Send queued records, then queued CPU samples, to the master now (worker only; a no-op elsewhere)."""
        if self._runner is None:
            return
        if self._pending:
            batch, self._pending = self._pending, []
            self._runner.send_message(MSG_RECORDS, batch)
        if self._pending_cpu:
            samples, self._pending_cpu = self._pending_cpu, []
            self._runner.send_message(MSG_CPU, samples)

    # -- phase messages -------------------------------------------------------------------------------------
    def phase_message(self, workers: list[str] | None = None) -> dict[str, Any]:
        """The payload of a ``llmload_phase`` message (msgpack-safe). ``workers``: the master's worker ids in slot
        order (:func:`harness.split.worker_ids`), each worker's share of a split prompt source."""
        return {
            # the profile as written (secret target.headers values included: the workers send them), not
            # public_dict(), which redacts them for run.json
            "profile": self.profile.model_dump(mode="json", by_alias=True),
            "base_url": self.base_url,
            "model": self.model,
            "phase": self.state.phase,
            "step": self.state.step,
            "concurrency": self.state.concurrency,
            "run_id": self.run_id,
            "web": self.web,
            "setting": self.state.setting,
            "workers": list(workers or []),
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
    #: Worker: the greenlet of its graceful stop once one started (a second request waits for it); reset when a
    #: new run starts (web UI).
    stop: Any = None
    #: Master: every worker seen (client id -> epoch seconds of its last Locust report), kept after it is gone so a
    #: dead worker can be shown (:func:`runs`).
    seen: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StopProgress:
    """What the stop of the current run is doing (web UI; :attr:`Run.progress`, read by
    :func:`harness.webui.runs.stopping`).

    Attributes:
        run_id: the run being stopped.
        stage: ``draining`` (users stop, in-flight requests finish, for up to ``drain_timeout_s``; on a master the
            workers then send their last records) or ``writing_report`` (run directory closed, report drawn).
        since_wall: epoch seconds the stage began.
        stop_wall: epoch seconds the stop began.
        drain_timeout_s: the stop timeout in seconds (requests still unfinished then are cut off and counted).
    """

    run_id: str
    stage: str
    since_wall: float
    stop_wall: float
    drain_timeout_s: float


#: The states of :attr:`Runs.state`.
RUN_STATES = ("idle", "running", "stopping", "finished", "interrupted")


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as the master sees it (:attr:`Runs.workers`)."""

    #: Locust's client id of the worker.
    id: str
    #: Locust's worker state ("ready", "spawning", "running", "stopped", "missing": no heartbeat for 3 s), or
    #: "gone" (it quit or was removed after it had been seen).
    state: str
    #: Requests in flight on it, from its last report (every 3 s).
    in_flight: int
    #: Epoch seconds of its last Locust report to the master (None: none yet).
    last_report_wall: float | None

    @property
    def dead(self) -> bool:
        """The worker stopped answering ("missing") or left ("gone")."""
        return self.state in ("missing", "gone")


@dataclass(frozen=True)
class Runs:
    """A snapshot of this process's runs, for the web UI (:func:`runs`). Paths are run directories."""

    #: One of :data:`RUN_STATES`: "idle" before the first run, "running", "stopping" (Stop, Ctrl-C or the end of
    #: the load: in-flight requests drain, then the report is written), then "finished" or "interrupted" (the
    #: state of the last run, until the next Start).
    state: str
    #: The current run's directory; None between runs.
    current: Path | None
    #: The directories of the runs of this process that ended (finished or interrupted), newest first; each
    #: one's report (``report.md`` / ``.json`` / ``.html``) was written before it was listed here (unless the
    #: report failed: the log says so).
    finished: tuple[Path, ...]
    #: The current run's id (its directory's name); None between runs.
    run_id: str | None
    #: The current run's mode, "sweep" or "fixed"; None between runs.
    mode: str | None
    #: Epoch seconds of the current run's Start; None between runs.
    started_wall: float | None
    #: The master's workers (every worker seen since the process started); () on a single process.
    workers: tuple[WorkerStatus, ...] = ()

    @property
    def last(self) -> Path | None:
        """The current run's directory, else the newest ended one; None before the first run."""
        return self.current or (self.finished[0] if self.finished else None)

    @property
    def dead_workers(self) -> tuple[WorkerStatus, ...]:
        """The workers that stopped answering or left (:attr:`WorkerStatus.dead`)."""
        return tuple(w for w in self.workers if w.dead)


@dataclass
class Run:
    """Everything one Locust process holds for its run; one per process (:func:`current`), reachable from Locust's
    environment as ``environment.llmload`` (set by :func:`harness.locust.register`; :func:`of`).

    The context (:attr:`ctx`, with the run directory) is held here and nowhere else; :func:`context` reads it.
    The Locust wiring (:mod:`harness.locust`) keeps the rest here: the exporter and its metrics (master or single
    process), the client lag watch, the signal and worker bookkeeping, the rate mode's arrival dispatcher
    (:attr:`dispatch`), the requests in flight (:attr:`in_flight`), a web-UI stop's progress (:attr:`progress`)
    and the report text printed at quit. No run state lives in a module global elsewhere
    (``tests/locust/test_lifecycle.py`` checks it).
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
    #: The process runs Locust's web UI (master or single process): each Start is a run.
    web: bool = False
    #: One of :data:`RUN_STATES` (see :attr:`Runs.state`).
    state: str = "idle"
    #: Epoch seconds of the current run's Start (None between runs).
    started_wall: float | None = None
    #: Directories of the runs that ended, newest first.
    ended: list[Path] = field(default_factory=list)
    #: Some run of this process wrote a failed (non-warm-up) record (the exit code's rule: docs, exit codes).
    any_failed: bool = False
    #: The last run's warm-up failed (every warm-up request failed: status ``warmup_failed``).
    warmup_failed: bool = False
    #: The Locust runner (master or single process), for the workers' states in :func:`runs`.
    runner: Any = None
    #: Web UI: the built-in simulator shared by the runs (:class:`harness.locust.setup.SimHolder`).
    sims: Any = None
    #: Called with this Run when a run begins (web UI: serves the new run's metrics).
    on_begin: Callable[[Run], object] | None = None
    #: The rate mode's arrival schedule and dispatcher of this process (:mod:`harness.rate`).
    dispatch: Dispatcher = field(default_factory=Dispatcher)
    #: Requests in flight in this process (the users count them; the exporter and the master's worker book read
    #: it).
    in_flight: InFlight = field(default_factory=InFlight)
    #: Web UI: what the stop of the current run is doing; None when no run is stopping.
    progress: StopProgress | None = None

    def begin(self, ctx: RunContext) -> None:
        """A run starts with ``ctx`` (its run directory open): hold it, state "running"."""
        self.lag_watch = LagWatch()
        self.hold(ctx)
        self.state = "running"
        self.started_wall = time.time()
        self.signals.interrupted = False
        if self.on_begin is not None:
            self.on_begin(self)

    def active(self) -> bool:
        """A run is going (running or stopping)."""
        return self.state in ("running", "stopping")

    def ended_run(self, path: Path, status: str) -> None:
        """The current run ended with ``status`` ("finished", else interrupted), its report written."""
        self.ended.insert(0, path)
        self.state = "finished" if status == "finished" else "interrupted"
        self.started_wall = None

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


#: The process's one Run: the anchor through which code without a Locust environment at hand (the users' context,
#: the shape, the web UI's views) reaches it; ``environment.llmload`` is the same object.
_RUN = Run()


def current() -> Run:
    """This process's :class:`Run`."""
    return _RUN


def of(environment: Any) -> Run:
    """The :class:`Run` of a Locust ``environment``: ``environment.llmload`` (set by
    :func:`harness.locust.register`), else this process's (:func:`current`: an environment built without
    llmload's registration, as in unit tests)."""
    run = getattr(environment, "llmload", None)
    return run if isinstance(run, Run) else _RUN


def _worker_statuses(run: Run) -> tuple[WorkerStatus, ...]:
    clients = getattr(run.runner, "clients", None)
    if clients is None:
        return ()
    book = run.workers
    out = []
    live = {c.id: c for c in clients.all}
    for cid in sorted(set(book.seen) | set(live)):
        node = live.get(cid)
        out.append(
            WorkerStatus(
                id=cid,
                state=str(node.state) if node is not None else "gone",
                in_flight=int(book.in_flight.get(cid, 0)),
                last_report_wall=book.seen.get(cid),
            )
        )
    return tuple(out)


def runs(run: Run | None = None) -> Runs:
    """A snapshot of this process's runs (:class:`Runs`; ``run``: another :class:`Run` than :func:`current`):
    the current run's directory, the ended ones (newest first), the state and, on a master, its workers. Cheap
    (no I/O); meant for the web UI's views, on the master or the single process (a worker has no runs of its own:
    state "idle", no directories)."""
    run = run if run is not None else _RUN
    ctx = run.ctx
    going = run.active() and ctx is not None and ctx.run_dir is not None
    return Runs(
        state=run.state,
        current=ctx.run_dir.path if going and ctx is not None and ctx.run_dir is not None else None,
        finished=tuple(run.ended),
        run_id=ctx.run_id if going and ctx is not None else None,
        mode=ctx.mode if going and ctx is not None else None,
        started_wall=run.started_wall if going else None,
        workers=_worker_statuses(run),
    )


def context() -> RunContext:
    """This process's :class:`RunContext` (``current().ctx``).

    Raises:
        RuntimeError: before the run was set up (on a worker: before the master's first phase message).
    """
    ctx = _RUN.ctx
    if ctx is None:
        raise RuntimeError("llmload: run context not set up yet (no profile loaded / no phase message received)")
    return ctx
