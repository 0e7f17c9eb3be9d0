"""Setting a process up for the run: the master (or single process) from the profile, a worker from the master's
phase messages.

On the master the profile is loaded and validated before any load (:class:`harness.config.ProfileError`), the
built-in simulator is started when there is neither ``--host`` nor ``target.base_url``, the model comes from
``target.model`` or ``GET /v1/models``, and the run directory is created. A worker needs only the locustfile: each
``llmload_phase`` message carries the profile, target, model and current step.
"""

from __future__ import annotations

import logging
from typing import Any

from harness.client import ClientError, Timeouts
from harness.config import Profile, ProfileError, load_profile, resolve_profile_path
from harness.http import Origin
from harness.records import RunDir, redact_url
from harness.runtime import PhaseState, RunContext, current, target_client

__all__ = ["setup_master", "setup_worker_from_message"]

log = logging.getLogger("llmload")


def setup_master(profile_arg: str | None, host: str | None, role: str, output_dir: str | None = None) -> RunContext:
    """Load the profile, resolve the target (starting the simulator if needed), open the run directory.

    Raises:
        ProfileError: bad profile (before any load is sent).
        RuntimeError: the target URL is malformed, its model cannot be determined (no ``target.model`` and
            GET /v1/models failed), or the run directory cannot be created.
    """
    path = resolve_profile_path(profile_arg, host)
    profile = load_profile(path)
    base_url = host or profile.target.base_url
    if base_url:
        try:
            Origin.parse(base_url)
        except ValueError as e:
            source = "--host" if host else f"{path}: target.base_url"
            raise RuntimeError(f"{source}: {redact_url(str(e))}") from None
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
    base = output_dir or profile.output.dir
    try:
        ctx.run_dir = RunDir.create(base, profile.name, meta)
    except OSError as e:
        if sim is not None:
            sim.stop()
        source = "--output-dir" if output_dir else f"{path}: output.dir"
        raise RuntimeError(f"{source}: cannot create a run directory under {base}: {e.strerror or e}") from None
    log.info("llmload: profile %s -> %s model %s; records in %s", path, shown, model, ctx.run_dir.path)
    return ctx


def setup_worker_from_message(data: dict[str, Any], worker_id: str) -> RunContext:
    """Build (or update) a worker's context from a ``llmload_phase`` message; it becomes ``current().ctx``."""
    run = current()
    ctx = run.ctx
    if ctx is None or ctx.base_url != data["base_url"] or ctx.model != data["model"]:
        try:
            profile = Profile.model_validate(data["profile"])
        except Exception as e:  # pragma: no cover - the master validated it already
            raise ProfileError(f"profile sent by the master: {e}") from None
        ctx = RunContext(profile=profile, base_url=data["base_url"], model=data["model"], role="worker")
        ctx.worker_id = worker_id
        run.hold(ctx)
    ctx.state = PhaseState(data["phase"], data["step"], data["concurrency"], data.get("setting"))
    return ctx

