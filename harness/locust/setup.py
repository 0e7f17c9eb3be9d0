"""Setting a process up for the run: the master (or single process) from the profile, a worker from the master's
phase messages.

The master's run is opened by :func:`harness.locust.webrun.start_run` (the one start of a run, headless and web
UI alike) with the pieces here: the profile is loaded and validated before any load
(:class:`harness.config.ProfileError`), the built-in simulator is started when there is neither ``--host`` nor
``target.base_url``, the model comes from ``target.model`` or ``GET /v1/models``, and the run directory is
created. A worker needs only the locustfile: each ``llmload_phase`` message carries the profile, target, model and
current step.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.chunkpath import CLIENT_PATH
from harness.client import ClientError, NotOpenAIServer, Timeouts
from harness.config import Profile, ProfileError, SimulatorSpec, resolve_profile_path
from harness.context_check import context_problems, max_model_len
from harness.http import Origin
from harness.locust.form import Knobs, apply_knobs
from harness.profile_check import load_checked_profile
from harness.records import RunDir, redact_url
from harness.redact import redact_logs, redact_text
from harness.runtime import PhaseState, Run, RunContext, current, target_client
from harness.split import slot_of

__all__ = [
    "SimHolder",
    "Target",
    "load_run_profile",
    "open_run",
    "resolve_target",
    "setup_worker_from_message",
]

log = logging.getLogger("llmload")


@dataclass
class Target:
    """Where a run's requests go (:func:`resolve_target`)."""

    base_url: str
    model: str
    #: The built-in simulator's process when it is the target (None: a server).
    sim: Any = None
    #: The simulator's settings for ``run.json`` (None: a server).
    sim_meta: dict[str, Any] | None = None

    @property
    def shown(self) -> str:
        """The base URL without credentials (for logs and ``run.json``)."""
        return redact_url(self.base_url)


def _sim_meta(s: SimulatorSpec) -> dict[str, Any]:
    """The simulator's settings for run.json: the profile's ``simulator`` section and ``env_args``, the words of
    ``$LLMLOAD_SIM_ARGS`` appended to its command line (a fault or drift rehearsal must not read like a clean
    server), the value after an option whose name looks secret (``--api-key``) replaced by ``***``."""
    from harness.redact import is_secret_name
    from harness.sim.launcher import ENV_EXTRA_ARGS, SimStartError, env_extra_args  # nothing is started

    try:
        words = env_extra_args()
    except SimStartError:  # the launcher refuses it with the reason
        words = [os.environ.get(ENV_EXTRA_ARGS, "")]
    shown: list[str] = []
    for i, w in enumerate(words):
        name, eq, _value = w.partition("=")
        prev = words[i - 1] if i else ""
        if prev.startswith("--") and "=" not in prev and is_secret_name(prev):
            w = "***"  # --api-key VALUE
        elif w.startswith("--") and eq and is_secret_name(name):
            w = f"{name}=***"  # --api-key=VALUE
        shown.append(w)
    return {"preset": s.preset, "flavour": s.flavour, "time_scale": s.time_scale, "seed": s.seed, "args": s.args,
            "env_args": shown}


class SimHolder:
    """The web UI's built-in simulator: one process at a time, reused by the runs whose profiles have the same
    ``simulator`` settings and restarted (stopped, then launched with the new settings) for one that differs."""

    def __init__(self) -> None:
        self.sim: Any = None
        self._meta: dict[str, Any] | None = None

    def get(self, spec: SimulatorSpec) -> tuple[Any, dict[str, Any]]:
        """The running simulator for ``spec`` (launched if needed) and its settings.

        Raises:
            harness.sim.SimStartError: the simulator did not start.
        """
        meta = _sim_meta(spec)
        if self.sim is not None and self._meta == {**meta, "model": spec.model}:
            return self.sim, meta
        self.stop()
        self.sim = _launch_sim(spec)
        self._meta = {**meta, "model": spec.model}
        return self.sim, meta

    def is_running_at(self, url: str) -> bool:
        """``url`` is the running simulator's base URL."""
        return self.sim is not None and url.rstrip("/") == str(self.sim.url).rstrip("/")

    def stop(self) -> None:
        """Stop the simulator (no-op when none runs)."""
        if self.sim is not None:
            self.sim.stop()
            self.sim = self._meta = None


def _launch_sim(s: SimulatorSpec) -> Any:
    from harness.sim import launch  # the simulator is only imported when it is the target

    log.info("No --host and no target.base_url: starting the built-in simulator (preset %s)", s.preset)
    return launch(
        preset=s.preset,
        flavour=s.flavour,
        time_scale=s.time_scale,
        seed=s.seed,
        model=s.model,
        extra_args=tuple(s.args),
    )


def resolve_target(
    profile: Profile, path: Path, host: str | None, sims: SimHolder | None = None, host_source: str = "--host"
) -> Target:
    """The target of a run: ``host`` (``--host`` or the web form's Host field), else ``target.base_url``, else
    the built-in simulator (from ``sims`` when given, else a new process the caller owns), and its model
    (``target.model`` or the first of ``GET /v1/models``).

    Raises:
        RuntimeError: a ``target.headers_env`` variable is unset or empty (names file, key and variable), the
            URL is malformed or the model cannot be determined (message names ``host_source`` or
            the profile key); a simulator this call launched is stopped first.
    """
    missing = profile.target.missing_header_env()
    if missing:
        header, var = missing[0]
        raise RuntimeError(
            f"{path}: target.headers_env.{header}: environment variable {var} is unset or empty; set it, or remove "
            "the header"
        )
    base_url = host or profile.target.base_url
    if base_url:
        try:
            Origin.parse(base_url)
        except ValueError as e:
            source = host_source if host else f"{path}: target.base_url"
            raise RuntimeError(f"{source}: {redact_url(str(e))}") from None
        from harness.sim.launcher import ENV_EXTRA_ARGS  # a name only; the simulator is not started

        if os.environ.get(ENV_EXTRA_ARGS, "").strip():
            source = host_source if host else f"{path}: target.base_url"
            log.warning("%s is set but the target is a server (%s), not the built-in simulator: it is ignored",
                        ENV_EXTRA_ARGS, source)
    sim = None
    sim_meta: dict[str, Any] | None = None
    own_sim = False
    if not base_url:
        if sims is not None:
            sim, sim_meta = sims.get(profile.simulator)
        else:
            sim, sim_meta, own_sim = _launch_sim(profile.simulator), _sim_meta(profile.simulator), True
        base_url = sim.url
    shown = redact_url(base_url)
    key_env = profile.target.api_key_env
    if key_env and not profile.target.api_key():
        log.warning(
            "%s: target.api_key_env names %s, which is unset or empty: no API key is sent", path, key_env
        )
    model = profile.target.model
    if not model:
        probe = target_client(profile.target, base_url, Timeouts(connect=10.0))
        try:
            models = probe.list_models()
        except (ClientError, ValueError) as e:
            if own_sim and sim is not None:
                sim.stop()
            if isinstance(e, NotOpenAIServer):  # one line: no page, no advice about target.model
                raise RuntimeError(f"{shown}: {e.detail}") from None
            kind = e.error_class if isinstance(e, ClientError) else "bad response"
            if kind == "connect_error" or kind.startswith("timeout_"):
                hint = "is the server up and the URL right?"
            elif isinstance(e, ClientError) and e.status in (401, 403):
                hint = f"the server rejected the API key (target.api_key_env: {key_env or 'not set'})"
            else:
                hint = f"or set target.model in {path} to skip the model lookup"
            detail = redact_text(redact_url(str(e)), profile.target.secret_values())
            raise RuntimeError(f"{shown}: GET /v1/models failed: {detail}; {hint}") from None
        if not models:
            if own_sim and sim is not None:
                sim.stop()
            raise RuntimeError(f"{shown}: GET /v1/models returned no model; set target.model in {path}")
        model = models[0]
    return Target(base_url, model, sim if own_sim else None, sim_meta if sim is not None else None)


def _context_problems(profile: Profile, path: Path, target: Target, given: str = "") -> list[str]:
    """:func:`harness.context_check.context_problems` against the target's ``max_model_len`` (``GET /v1/models``);
    none when the server does not report one or the lookup fails (the run then finds out per request). ``given``:
    the max_tokens knob as typed ("" when none), named as the source of the prompts' values."""
    probe = target_client(profile.target, target.base_url, Timeouts(connect=10.0))
    try:
        limit = max_model_len(probe.model_entries(), target.model)
    except (ClientError, ValueError) as e:
        log.debug("no max_model_len check: GET /v1/models: %s", redact_url(str(e)))
        return []
    return context_problems(profile, path, limit, given) if limit is not None else []


def open_run(
    profile: Profile,
    path: Path,
    target: Target,
    role: str,
    output_dir: str | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> RunContext:
    """A context for a new run on ``target`` with its run directory created (``run.json`` written).

    ``extra_meta`` is added to ``run.json`` (the web UI's mode and form values). The context owns
    ``target.sim`` (stopped at quit) when :func:`resolve_target` launched it.

    Raises:
        RuntimeError: the run directory cannot be created (the message names ``--output-dir`` or
            ``output.dir``); an owned simulator is stopped first.
    """
    ctx = RunContext(profile=profile, base_url=target.base_url, model=target.model, role=role, sim=target.sim)
    redact_logs(ctx.secrets)
    meta = {
        "profile_path": str(path),
        "profile": profile.public_dict(),
        "target": {"base_url": target.shown, "model": target.model, "simulator": target.sim_meta is not None},
        "simulator": target.sim_meta,
        "prompt_source": ctx.prompt_source.describe(),
        **(extra_meta or {}),
    }
    given = str(((extra_meta or {}).get("knobs") or {}).get("max_tokens") or "")
    for problem in _context_problems(profile, path, target, given):  # said before any load; the run goes on
        log.warning("%s", problem)  # (a mix may hold a prompt meant to fail)
    base = output_dir or profile.output.dir
    try:
        ctx.run_dir = RunDir.create(base, profile.name, meta, secrets=ctx.secrets)
    except OSError as e:
        if target.sim is not None:
            target.sim.stop()
        typed = str(((extra_meta or {}).get("form") or {}).get("output_dir") or "").strip()
        source = (f"Output Dir {typed!r}" if typed else "--output-dir") if output_dir else f"{path}: output.dir"
        why = "it is a file, not a directory" if Path(base).is_file() else (e.strerror or str(e))
        raise RuntimeError(f"{source}: cannot create a run directory under {base}: {why}") from None
    ctx.run_id = ctx.run_dir.path.name
    log.info("profile %s -> %s model %s; records in %s; stream path %s", path, target.shown, target.model,
             ctx.run_dir.path, CLIENT_PATH)
    if not profile.steps.concurrency and profile.rate is None and profile.search is None:
        log.info("%s: steps.concurrency is empty: this run measures the single stream only (%g s); give steps, e.g. "
                 "[8, 16, 32, 64], to measure concurrent load", path, profile.single_stream.duration)
    return ctx


def load_run_profile(profile_arg: str | None, host: str | None, knobs: Knobs | None = None) -> tuple[Path, Profile]:
    """The profile path (:func:`resolve_profile_path`) and the profile, its files checked
    (:func:`harness.profile_check.load_checked_profile`), with ``knobs`` applied
    (:func:`harness.locust.form.apply_knobs`).

    Raises:
        ProfileError: bad profile or knob value.
    """
    path = resolve_profile_path(profile_arg, host)
    profile = load_checked_profile(path)
    if knobs is not None and knobs.as_dict():
        profile = apply_knobs(profile, knobs, path.parent)
    return path, profile


def setup_worker_from_message(data: dict[str, Any], worker_id: str, client_id: str | None = None,
                              run: Run | None = None) -> RunContext:
    """Build (or update) a worker's context from a ``llmload_phase`` message; it becomes ``run.ctx`` (``run``:
    default this process's, :func:`harness.runtime.current`).

    ``client_id``: the worker's Locust client id; with the message's ``workers`` list it sets the worker's share
    of a split prompt source (:meth:`harness.prompts.source.PromptSource.set_share`)."""
    run = run if run is not None else current()
    ctx = run.ctx
    run_id = str(data.get("run_id") or "")
    if ctx is None or ctx.base_url != data["base_url"] or ctx.model != data["model"] or ctx.run_id != run_id:
        try:
            profile = Profile.model_validate(data["profile"])
        except Exception as e:  # pragma: no cover - the master validated it already
            raise ProfileError(f"profile sent by the master: {e}") from None
        if ctx is not None:  # a new run (web UI): what the last one queued goes first
            ctx.stop_flusher()
            run.workers.stop = None
        ctx = RunContext(
            profile=profile, base_url=data["base_url"], model=data["model"], role="worker", worker_id=worker_id
        )
        ctx.run_id = run_id
        ctx.web = bool(data.get("web"))
        redact_logs(ctx.secrets)
        run.hold(ctx)
    ctx.state = PhaseState(data["phase"], data["step"], data["concurrency"], data.get("setting"))
    split = slot_of(data.get("workers"), client_id)
    if split is not None:
        ctx.prompt_source.set_share(*split)
    elif ctx.prompt_source.shared and data.get("workers"):
        log.warning("this worker (%s) is not in the master's split %s: its data-set rows may repeat "
                    "other workers'", client_id, data.get("workers"))
    return ctx

