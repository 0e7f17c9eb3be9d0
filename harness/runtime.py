"""Run-time wiring between the profile, the Locust processes, the record sink and the report.

One :class:`RunContext` per process. On the master (or the single local process) it owns the run directory,
the embedded simulator (when there is no ``--host``) and the warm-up; it sends workers a ``llmload_phase``
message at each phase start carrying everything they need (profile, base URL, model, current step), so remote
workers need only the locustfile. Workers send their records back in ``llmload_records`` batches; the master
writes every record to ``records.jsonl``. A local run writes directly.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent

from harness.client import ChatClient, ClientError, Timeouts
from harness.clientlag import LagWatch
from harness.config import Profile, ProfileError, PromptSpec, TargetSpec, load_profile
from harness.records import RunDir, redact_url

__all__ = ["PhaseState", "RunContext", "context", "default_profile_path"]

log = logging.getLogger("llmload")

MSG_PHASE = "llmload_phase"
MSG_RECORDS = "llmload_records"
#: Master -> workers when a run is stopped before its end (Ctrl-C, SIGTERM, the web UI's Stop): stop the users,
#: letting in-flight requests finish for ``stop_timeout`` s, and send every record. Workers answer MSG_STOPPED.
MSG_STOP = "llmload_stop"
MSG_STOPPED = "llmload_stopped"
_FLUSH_INTERVAL_S = 0.5
_PROFILES_DIR = Path(__file__).resolve().parent.parent / "profiles"


def default_profile_path(host: str | None) -> Path:
    """The profile used when ``--profile`` is not given: ``profiles/k26.yaml`` with a host, else the demo."""
    return _PROFILES_DIR / ("k26.yaml" if host else "demo.yaml")


def resolve_profile_path(arg: str | None, host: str | None) -> Path:
    """``--profile`` as given (a file relative to the working directory, else in the repo's ``profiles/``).

    A directory of that name in the working directory (``--profile demo`` run where ``./demo/`` exists) does not
    hide ``profiles/demo.yaml``.
    """
    if not arg:
        return default_profile_path(host)
    p = Path(arg)
    if p.is_file() or p.is_absolute():
        return p
    for alt in (_PROFILES_DIR / p.name, _PROFILES_DIR / f"{p.name}.yaml"):
        if alt.exists():
            return alt
    return p


def target_client(target: TargetSpec, base_url: str, timeouts: Timeouts) -> ChatClient:
    """A client for ``base_url`` with the profile target's API key, headers and TLS setting: the users' requests and
    the model lookup go through the same settings (the lookup once ignored ``verify_tls: false``)."""
    return ChatClient(
        base_url,
        api_key=target.api_key(),
        timeouts=timeouts,
        headers=dict(target.headers),
        verify_tls=target.verify_tls,
    )


@dataclass
class PhaseState:
    """The phase a process is in; every request records the phase it *started* in."""

    phase: str = "warmup"
    step: int = -1
    concurrency: int = 0


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
    _runner: Any = None
    _lag_watch: LagWatch = field(default_factory=LagWatch)

    def __post_init__(self) -> None:
        self._weights = list(itertools.accumulate(p.weight for p in self.profile.prompts))  # cumulative
        self._bodies = {p.id: self.profile.build_body(p, self.model) for p in self.profile.prompts}

    # -- requests -------------------------------------------------------------------------------------------
    def new_client(self, timeouts: Timeouts | None = None) -> ChatClient:
        """A client for one user: its own keep-alive connection, the profile's timeouts and headers."""
        return target_client(self.profile.target, self.base_url, timeouts or self.profile.timeouts.to_timeouts())

    def next_user_id(self) -> str:
        """A user id unique in the run (worker id + sequence)."""
        self._user_seq += 1
        return f"{self.worker_id}:{self._user_seq}"

    def pick(self, rng: random.Random) -> tuple[PromptSpec, dict[str, Any]]:
        """Draw a prompt from the weighted mix; return it with its prebuilt request body."""
        prompt = rng.choices(self.profile.prompts, cum_weights=self._weights)[0]
        return prompt, self._bodies[prompt.id]

    # -- records --------------------------------------------------------------------------------------------
    def record(self, rec: dict[str, Any]) -> None:
        """Keep one request record: write it (local/master) or queue it for the master (worker)."""
        if self.run_dir is not None:
            self.write(rec)
        else:
            self._pending.append(rec)

    def write(self, rec: dict[str, Any]) -> None:
        """Write one record to the run directory (local/master: this process's and its workers' records), and
        warn once per step when the load generator falls behind (:class:`harness.clientlag.LagWatch`).

        Raises:
            ValueError: the run directory is closed.
        """
        assert self.run_dir is not None
        self.run_dir.write_record(rec)
        warning = self._lag_watch.observe(rec)
        if warning:
            log.warning(warning)

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
        }


_CONTEXT: RunContext | None = None


def context() -> RunContext:
    """This process's :class:`RunContext`.

    Raises:
        RuntimeError: before the run was set up (on a worker: before the master's first phase message).
    """
    if _CONTEXT is None:
        raise RuntimeError("llmload: run context not set up yet (no profile loaded / no phase message received)")
    return _CONTEXT


def set_context(ctx: RunContext | None) -> None:
    """Install (or clear) this process's context."""
    global _CONTEXT
    _CONTEXT = ctx


def setup_master(profile_arg: str | None, host: str | None, role: str, output_dir: str | None = None) -> RunContext:
    """Load the profile, resolve the target (starting the simulator if needed), open the run directory.

    Raises:
        ProfileError: bad profile (before any load is sent).
        RuntimeError: the target's model cannot be determined (no ``target.model`` and GET /v1/models failed).
    """
    path = resolve_profile_path(profile_arg, host)
    profile = load_profile(path)
    base_url = host or profile.target.base_url
    sim = None
    sim_meta: dict[str, Any] | None = None
    if not base_url:
        from harness.sim import launch  # the simulator is only imported when it is the target

        s = profile.simulator
        log.info("No --host and no target.base_url: starting the built-in simulator (preset %s)", s.preset)
        sim = launch(
            preset=s.preset,
            flavour=s.flavour,
            time_scale=s.time_scale,
            seed=s.seed,
            model=s.model,
            extra_args=tuple(s.args),
        )
        base_url = sim.url
        sim_meta = {
            "preset": s.preset,
            "flavour": s.flavour,
            "time_scale": s.time_scale,
            "seed": s.seed,
            "args": s.args,
        }
    shown = redact_url(base_url)
    key_env = profile.target.api_key_env
    if key_env and not profile.target.api_key():
        log.warning(
            "llmload: %s: target.api_key_env names %s, which is unset or empty: no API key is sent", path, key_env
        )
    model = profile.target.model
    if not model:
        probe = target_client(profile.target, base_url, Timeouts(connect=10.0))
        try:
            models = probe.list_models()
        except (ClientError, ValueError) as e:
            if sim is not None:
                sim.stop()
            kind = e.error_class if isinstance(e, ClientError) else "bad response"
            if kind == "connect_error" or kind.startswith("timeout_"):
                hint = "is the server up and the URL right?"
            elif isinstance(e, ClientError) and e.status in (401, 403):
                hint = f"the server rejected the API key (target.api_key_env: {key_env or 'not set'})"
            else:
                hint = f"or set target.model in {path} to skip the model lookup"
            raise RuntimeError(f"{shown}: GET /v1/models failed: {redact_url(str(e))}; {hint}") from None
        if not models:
            raise RuntimeError(f"{shown}: GET /v1/models returned no model; set target.model in {path}")
        model = models[0]
    ctx = RunContext(profile=profile, base_url=base_url, model=model, role=role, sim=sim)
    meta = {
        "profile_path": str(path),
        "profile": profile.public_dict(),
        "target": {"base_url": shown, "model": model, "simulator": sim is not None},
        "simulator": sim_meta,
    }
    ctx.run_dir = RunDir.create(output_dir or profile.output.dir, profile.name, meta)
    log.info("llmload: profile %s -> %s model %s; records in %s", path, shown, model, ctx.run_dir.path)
    return ctx


def setup_worker_from_message(data: dict[str, Any], worker_id: str) -> RunContext:
    """Build (or update) a worker's context from a ``llmload_phase`` message."""
    global _CONTEXT
    ctx = _CONTEXT
    if ctx is None or ctx.base_url != data["base_url"] or ctx.model != data["model"]:
        try:
            profile = Profile.model_validate(data["profile"])
        except Exception as e:  # pragma: no cover - the master validated it already
            raise ProfileError(f"profile sent by the master: {e}") from None
        ctx = RunContext(profile=profile, base_url=data["base_url"], model=data["model"], role="worker")
        ctx.worker_id = worker_id
        _CONTEXT = ctx
    ctx.state = PhaseState(data["phase"], data["step"], data["concurrency"])
    return ctx


def now_wall() -> float:
    """Wall-clock epoch seconds (the timeline clock of records and phases)."""
    return time.time()


def env_flag(name: str) -> bool:
    """True when the environment variable is set to a true-ish value."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes", "on")
