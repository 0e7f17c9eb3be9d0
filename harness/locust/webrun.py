"""Web-UI mode: each Start is a run, with its own run directory, records and report.

Without ``--headless`` the master (or the single process) validates the launch profile at ``init`` and starts
the built-in simulator if needed (its URL is the Host field's default), but opens no run directory. Then:

* **Start** (``POST /swarm``): a Flask ``before_request`` hook reads the form (:mod:`harness.locust.form`: profile,
  mode, knobs; Locust's Host, Number of users, Ramp up, Run time), loads and checks the profile, resolves the
  target (the Host field: a server, or empty / the URL of a built-in simulator this process started: the
  built-in simulator of the chosen profile, :meth:`Launch.is_builtin_url`) and its model, and
  opens a new run directory (under the form's Output Dir when filled in, :func:`output_dir_of`) whose ``run.json``
  holds the mode and the form's values (:func:`start_run`). The form's fields are read against the values it
  showed for the picked profile (:func:`form_values`, also served to the page's script at :data:`FORM_PATH`). Any
  problem answers ``{"success": false, "message": ...}``, which the UI shows, and nothing is sent. A Start while a
  run goes is refused the same way. Locust's own ``swarm()`` then starts the shape; the answer's ``host`` is
  rewritten to the target measured (Locust's header shows the form's Host as typed until a reload; the LLM tab
  and view show the target).
* **The run ends** when the shape ends (the sweep, or a fixed run's run time), or on Stop: Locust stops the users,
  in-flight requests finishing for up to the stop timeout (the profile's ``steps.drain_timeout``), the workers
  send their last records (:func:`harness.locust.drain.stop_workers`), and at ``test_stop`` the run directory is
  closed and the report written (:func:`harness.locust.end.end_run`: the one end of a run, a headless run's too).
  Requests cut off by the stop timeout are counted
  (``cut_off`` in ``run.json``; the report notes it).
* **Ctrl-C** (or SIGTERM) during a run: the same drain and report at ``quitting``, status interrupted.
* **Stop answers at once** (``POST /stop``, a hook before Locust's own handler): the runner's stop (drain, then
  ``test_stop``) goes on in a greenlet of its own; Locust's handler would answer only after the drain and the
  report. From the moment a stop begins (``test_stopping``) until the run is recorded the run's state is
  "stopping" and the run's :attr:`harness.runtime.Run.progress` says what it does (``draining``, then
  ``writing_report``), which the LLM view shows. The report is written by a child process (``python -m
  harness.report RUN_DIR --quiet``), so the web UI (and a master's heartbeats) keep answering while it is drawn.

Status: "finished" when the load ran to its end (a fixed run without run time ended by Stop counts as finished),
"interrupted" when Stop or Ctrl-C cut it short, "warmup_failed" when every warm-up request failed.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from flask import Response, g, jsonify, make_response, request

from harness.config import PROFILES_DIR, Profile, ProfileError, resolve_profile_path
from harness.locust.end import (
    LAST_BATCH_WAIT_S,
    REPORT_TIMEOUT_S,
    begin_stop,
    cut_off_by_timeout,
    end_run,
    stop_for_quit,
    write_report_child,
)
from harness.locust.form import (
    KNOBS,
    MODES,
    Knobs,
    apply_knobs,
    form_defaults,
    set_form_defaults,
    source_notes,
    steps_note,
)
from harness.locust.setup import SimHolder, Target, open_run, resolve_target
from harness.profile_check import load_checked_profile
from harness.records import redact_url
from harness.runtime import FixedLoad, Run, RunContext, StopProgress

__all__ = [
    "FORM_PATH", "LAST_BATCH_WAIT_S", "REPORT_TIMEOUT_S", "SHOWN_FIELD", "Launch", "StartError", "StopProgress",
    "begin_stop", "cut_off_by_timeout", "end_run", "form_values", "headless_fixed_form", "headless_launch", "install",
    "launch_of", "output_dir_of", "parse_fixed", "start_run", "stop_at_once", "stop_for_quit", "write_report_child",
]  # (the end of a run is harness.locust.end's, re-exported here: one path for headless and web-UI runs)

log = logging.getLogger("llmload")

#: The path (under Locust's ``--web-base-path``) of the resolved form values of a profile (:func:`form_values`),
#: fetched by the start form's script when a profile is picked.
FORM_PATH = "/llmload/form.json"

#: Form fields whose values are not written to ``run.json`` (a locustfile's own secret options).
_SECRET_FIELD = re.compile(r"(?i)(api_?key|secret|password|(^|_)token$)")


class StartError(Exception):
    """A Start that cannot be run; the message is shown in the web UI (one line, no traceback)."""


@dataclass
class Launch:
    """What the web-UI process was launched with: the baseline every Start's form is read against."""

    #: Locust's ``--profile`` at launch ("" when not given).
    profile_arg: str
    #: ``--host`` at launch ("" when not given).
    host: str
    output_dir: str | None
    #: "master" or "local".
    role: str
    #: The knobs given on the command line.
    given: Knobs
    #: The form's fields as first shown (dest -> text): the command line's value, else the launch profile's.
    shown: dict[str, str]
    #: ``--stop-timeout`` was given (else each run drains for its profile's ``steps.drain_timeout``).
    stop_timeout_given: bool
    #: The built-in simulator, shared by the runs.
    sims: SimHolder
    #: Base URLs (no trailing ``/``) of every built-in simulator this process started: a Host equal to one of them
    #: means "the built-in simulator for the chosen profile" even once that process was replaced by another.
    sim_urls: set[str] = field(default_factory=set)
    #: The launch profile's file (None: headless): a Start of that profile reads its form against ``shown`` and
    #: ``given``; a Start of another profile against that profile's own values (:func:`form_values`).
    profile_path: Path | None = None
    #: A headless launch (:func:`headless_launch`): its one run is started at ``init`` by :func:`start_run` with
    #: the command line's values (the profile's sweep, or ``--mode fixed``), and ``run.json`` holds no web-UI fields.
    headless: bool = False
    #: Headless: ``--mode`` ("sweep" or "fixed"); its fixed load from ``-u`` / ``-r`` / ``-t`` as the web form's
    #: ``user_count`` / ``spawn_rate`` / ``run_time`` fields (:func:`parse_fixed`).
    headless_mode: str = "sweep"
    fixed_form: dict[str, str] = field(default_factory=dict)
    #: Knob options given empty on a headless command line (``--prompt-mix ''``): refused at the start.
    blank_options: tuple[str, ...] = ()

    def is_builtin_url(self, url: str) -> bool:
        """``url`` is the running built-in simulator's or one this process started earlier."""
        return self.sims.is_running_at(url) or url.rstrip("/") in self.sim_urls

    def note_sim(self) -> None:
        """Remember the running built-in simulator's URL (no-op when none runs)."""
        if self.sims.sim is not None:
            self.sim_urls.add(str(self.sims.sim.url).rstrip("/"))


def launch_of(opts: Any, host: str | None, role: str, profile_path: Path, profile: Any, sims: SimHolder) -> Launch:
    """The :class:`Launch` of a web-UI process from Locust's parsed options and the launch profile; the form
    shows that profile's values from now on (:func:`harness.locust.form.set_form_defaults`)."""
    defaults = form_defaults(profile, profile_path)
    set_form_defaults(defaults)
    given = Knobs.from_options(opts)
    shown = dict(defaults)
    for k, v in given.as_dict().items():
        shown[k] = v
    if getattr(opts, "web_profile", ""):
        shown["web_profile"] = str(opts.web_profile)
    shown["mode"] = str(getattr(opts, "mode", "") or "sweep")
    launch = Launch(
        profile_arg=str(getattr(opts, "profile", "") or ""),
        host=host or "",
        output_dir=getattr(opts, "output_dir", None),
        role=role,
        given=given,
        shown=shown,
        stop_timeout_given=bool(getattr(opts, "stop_timeout", None)),
        sims=sims,
        profile_path=profile_path,
    )
    launch.note_sim()
    return launch


def option_names(message: str) -> str:
    """``message`` with a leading knob name (``step_duration: ...``, a :class:`Knobs` field) written as the
    command-line option it came from (``--step-duration: ...``); other messages unchanged."""
    for name in Knobs.__dataclass_fields__:
        if message.startswith(f"{name}:"):
            return "--" + name.replace("_", "-") + message[len(name):]
    return message


def headless_launch(opts: Any, host: str | None, role: str, profile_arg: str | None, sims: SimHolder) -> Launch:
    """The :class:`Launch` of a headless process (Locust's ``--headless``): no form, so nothing is shown; the
    command line's knobs (``given``) are the run's, ``profile_arg`` (``--profile``, else ``--web-profile``'s file)
    is its profile, ``--host`` its target. Its one run is started by :func:`start_run` (Locust's rule: headless is
    a run started automatically)."""
    return Launch(
        profile_arg=profile_arg or "",
        host=host or "",
        output_dir=getattr(opts, "output_dir", None),
        role=role,
        given=Knobs.from_options(opts),
        shown={},
        stop_timeout_given=bool(getattr(opts, "stop_timeout", None)),
        sims=sims,
        headless=True,
        blank_options=blank_knob_options(sys.argv[1:]),
        headless_mode=str(getattr(opts, "mode", "") or "sweep"),
        fixed_form=headless_fixed_form(opts),
    )


def headless_fixed_form(opts: Any) -> dict[str, str]:
    """``-u`` / ``-r`` / ``-t`` as the web form's ``user_count`` / ``spawn_rate`` / ``run_time`` fields (for
    :func:`parse_fixed`; ``-t`` in seconds, as Locust parsed it; empty when not given: no users is refused, no run
    time runs until Ctrl-C)."""
    users = getattr(opts, "num_users", None)
    rate = getattr(opts, "spawn_rate", None)
    run_time = getattr(opts, "run_time", None)
    return {"user_count": "" if users is None else str(users), "spawn_rate": "" if rate is None else str(rate),
            "run_time": "" if run_time is None else str(run_time)}  # -t 0 is refused, not "until Ctrl-C"


def blank_knob_options(argv: Sequence[str]) -> tuple[str, ...]:
    """The knob options (:data:`harness.locust.form.KNOBS` as ``--prompt-mix``...) given empty or blank in
    ``argv`` (``--steps ''``, ``--steps=``): Locust's parser cannot tell them from "not given" (its default is "")."""
    names = {"--" + k.replace("_", "-") for k in KNOBS}
    out: list[str] = []
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if name not in names:
            continue
        if eq:
            given: str | None = value
        else:
            given = argv[i + 1] if i + 1 < len(argv) else None
        if given is not None and not given.strip() and name not in out:
            out.append(name)
    return tuple(out)


def _option_words(message: str) -> str:
    """A fixed-load error named as the command line's options (headless) instead of the web form's fields."""
    if message == "fixed mode: Number of users '' is not an integer":
        return "fixed mode needs -u N: the number of users to hold"
    for field_name, option in (("Number of users", "-u/--users"), ("Ramp up", "-r/--spawn-rate"),
                               ("Run time", "-t/--run-time")):
        message = message.replace(field_name, option)
    return message.replace("must be at least 1", "must be at least 1 (give -u N)").replace(
        "(empty: until Stop)", "(leave -t out: until Ctrl-C)")


def parse_fixed(form: Mapping[str, str]) -> FixedLoad:
    """Locust's Number of users, Ramp up and Run time from the form (``user_count``, ``spawn_rate``,
    ``run_time``: ``20``, ``90s``, ``3m``, ``1h20m``; empty: until Stop).

    Raises:
        StartError: a missing or bad value.
    """
    from locust.util.timespan import parse_timespan

    try:
        users = int(str(form.get("user_count", "")).strip())
    except ValueError:
        raise StartError(f"fixed mode: Number of users {form.get('user_count')!r} is not an integer") from None
    if users < 1:
        raise StartError("fixed mode: Number of users must be at least 1")
    raw_rate = str(form.get("spawn_rate", "") or "").strip()
    try:
        rate = float(raw_rate) if raw_rate else float(users)
    except ValueError:
        raise StartError(f"fixed mode: Ramp up {raw_rate!r} is not a number of users per second") from None
    if not (rate > 0 and math.isfinite(rate)):
        raise StartError("fixed mode: Ramp up must be > 0 users per second")
    raw_time = str(form.get("run_time", "") or "").strip()
    run_time: float | None = None
    if raw_time:
        try:
            run_time = float(parse_timespan(raw_time))
        except ValueError:
            raise StartError(f"fixed mode: Run time {raw_time!r}: use 20, 20s, 3m, 2h, 1h20m...") from None
        if run_time <= 0:
            raise StartError("fixed mode: Run time must be > 0 (empty: until Stop)")
    return FixedLoad(users, rate, run_time)


def _profile_arg(form: Mapping[str, str], launch: Launch) -> str | None:
    """The profile a Start asks for: a path typed in Locust's Profile field, else the picker's entry if changed,
    else the launch profile."""
    typed = str(form.get("profile", "") or "").strip()
    if typed and typed != launch.profile_arg:
        return typed
    picked = str(form.get("web_profile", "") or "").strip()
    if picked and picked != launch.shown.get("web_profile", ""):
        named = PROFILES_DIR / f"{picked}.yaml"
        return str(named) if named.exists() else picked
    if launch.profile_arg:
        return launch.profile_arg
    shown = launch.shown.get("web_profile", "")
    if shown:
        named = PROFILES_DIR / f"{shown}.yaml"
        return str(named) if named.exists() else shown
    return None


def form_values(launch: Launch, form: Mapping[str, str]) -> tuple[Path, Profile, dict[str, str], Knobs]:
    """The profile a Start (or the form's script) asks for (``form``'s ``profile`` and ``web_profile``, as
    :func:`_profile_arg`), loaded and checked, with the values the form shows for it and the knobs left-as-shown
    fields apply: for the launch profile, what the form showed at launch and the command line's knobs; for any
    other profile, its own values (:func:`harness.locust.form.form_defaults`) and no knobs, so that a field left
    as the script filled it runs the picked profile's value.

    Returns:
        (profile path, profile without knobs, shown values dest -> text, knobs of fields left as shown).

    Raises:
        ProfileError: the profile cannot be found, read or checked (one-line message naming the file).
    """
    path = resolve_profile_path(_profile_arg(form, launch), launch.host or None)
    profile = load_checked_profile(path)
    if launch.profile_path is not None and path.resolve() == launch.profile_path.resolve():
        return path, profile, dict(launch.shown), launch.given
    shown = form_defaults(profile, path)
    shown["mode"] = str(form.get("mode", "") or launch.shown.get("mode", "sweep"))
    return path, profile, shown, Knobs()


#: The field the form's script adds to a Start: the profile whose values the fields show (``web_profile`` and
#: ``profile`` joined by a newline, as the script asked :data:`FORM_PATH` for them).
SHOWN_FIELD = "llmload_shown"


def _check_shown(form: Mapping[str, str], launch: Launch, path: Path) -> None:
    """A Start whose fields show another profile's values than the one it starts (the script had not filled the
    picked profile's in) is refused rather than run with values the form did not show for it; a Start without
    :data:`SHOWN_FIELD` (no script: an API client) is not checked.

    Raises:
        ProfileError: one line naming both profiles.
    """
    marker = form.get(SHOWN_FIELD)
    if marker is None:
        return
    picked, _, typed = str(marker).partition("\n")
    shown_path = resolve_profile_path(_profile_arg({"web_profile": picked, "profile": typed}, launch),
                                      launch.host or None)
    if shown_path.resolve() != path.resolve():
        raise ProfileError(f"the form shows the values of {shown_path.name}, not of {path.name}: pick the profile "
                           "again, check its values, then Start")


def output_dir_of(form: Mapping[str, str], launch: Launch) -> str | None:
    """The directory a Start's run directory goes under: the form's Output Dir when filled in, else
    ``--output-dir`` (None: the profile's ``output.dir``). A filled-in directory is checked first: it (or its
    nearest existing parent, where it will be created) must be a writable directory.

    Raises:
        StartError: the Output Dir is not usable, one line naming the field and the problem.
    """
    raw = str(form.get("output_dir", "") or "").strip()
    if not raw:
        return launch.output_dir
    p = Path(raw).expanduser()
    if p.exists() and not p.is_dir():
        raise StartError(f"Output Dir {raw!r}: not a directory")
    parent = p if p.exists() else next((q for q in p.absolute().parents if q.exists()), None)
    if parent is None or not parent.is_dir():
        raise StartError(f"Output Dir {raw!r}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StartError(f"Output Dir {raw!r}: {parent} is not writable")
    return str(p)


def _check_sweep_users(form: Mapping[str, str]) -> None:
    """Sweep mode does not use Number of users and Ramp up (the form hides them), but a value that is not a whole
    number of users >= 1, or a ramp up that is not a number > 0, is refused before any run directory is opened
    (Locust's own swarm reads both, and refused them only after the run was opened, leaving it behind).

    Raises:
        StartError: one line naming the field.
    """
    _check_run_time(form)
    raw = str(form.get("user_count", "") or "").strip()
    if not raw:
        return
    try:
        users = int(raw)
    except ValueError:
        raise StartError(f"Number of users {raw!r} is not an integer (sweep mode does not use it: "
                         "leave it at 1)") from None
    if users < 1:
        raise StartError(f"Number of users {users} must be at least 1 (sweep mode does not use it: leave it at 1)")
    rate = str(form.get("spawn_rate", "") or "").strip()
    if rate:  # Locust reads it as a float > 0 and refused it itself only after the run was opened
        try:
            ok = float(rate) > 0 and math.isfinite(float(rate))
        except ValueError:
            ok = False
        if not ok:
            raise StartError(f"Ramp up {rate!r} is not a number of users per second > 0 (sweep mode does not use "
                             "it: leave it at 1)")


def _check_run_time(form: Mapping[str, str]) -> None:
    """A Run time Locust cannot read is refused before any run directory is opened (Locust refused it itself only
    after the start, leaving an empty run behind: fresh-user finding).

    Raises:
        StartError: one line naming the field.
    """
    from locust.util.timespan import parse_timespan

    raw = str(form.get("run_time", "") or "").strip()
    if not raw:
        return
    try:
        parse_timespan(raw)
    except ValueError:
        raise StartError(f"Run time {raw!r}: use 20, 20s, 3m, 2h, 1h20m... (empty: the sweep's own length)") from None


def _wait_for_report(run: Run) -> None:
    """A Start while the previous run's report is being written (its load is over, its records closed) waits
    for that report (cooperatively, at most :data:`REPORT_TIMEOUT_S` + 10 s) instead of being refused."""
    progress = run.progress
    if not run.active() or progress is None or progress.stage != "writing_report":
        return
    deadline = time.monotonic() + REPORT_TIMEOUT_S + 10.0
    while run.active() and time.monotonic() < deadline:
        gevent.sleep(0.1)


def start_run(run: Run, environment: Any, form: Mapping[str, str], launch: Launch) -> RunContext:
    """Open a run (the one start of a run, web UI and headless alike): validate the form, load the profile with
    its knobs, resolve the target (starting the built-in simulator if it is the target) and open the run
    directory; the new context is held by ``run`` (state "running"), the environment's host is the target measured
    and, unless ``--stop-timeout`` was given, its stop timeout is the profile's ``steps.drain_timeout``.

    Web UI (each Start, or ``--autostart``): ``form`` is the submitted start form (:mod:`harness.locust.form`;
    ``host``: the Host field); ``run.json`` holds the mode, the form's values (secrets masked), the knobs and, in
    fixed mode, the fixed load. A Start while the previous run's report is written waits for it
    (:func:`_wait_for_report`).

    Headless (``launch.headless``, :func:`headless_launch`; called once at ``init``): ``form`` is ``{"host":
    --host}``; the mode is ``--mode`` (the profile's sweep, or fixed: ``-u`` users, ramp-up ``-r``, run time
    ``-t``); ``run.json`` holds the knobs when the command line gave some, and in fixed mode the mode and the fixed
    load (no ``form``).

    Raises:
        StartError: a run is going (running, or draining its in-flight requests), or a bad profile, knob,
            mode value, Number of users (also in sweep mode), Output Dir or target (nothing was sent, no run
            directory left behind); the message is one line, the original error (ProfileError, RuntimeError,
            the simulator's SimStartError) is its ``__cause__``.
    """
    _wait_for_report(run)
    if run.active():
        raise StartError(f"run {run.ctx.run_id if run.ctx else ''} is {run.state}: Stop it (or wait) first")
    mode = launch.headless_mode if launch.headless else \
        str(form.get("mode", "") or launch.shown.get("mode", "sweep")).strip()
    if mode not in MODES:
        raise StartError(f"mode {mode!r}: one of {', '.join(MODES)}")
    if launch.blank_options:
        raise StartError("; ".join(f"{o}: empty: give a value or leave the option out (the profile's applies)"
                                   for o in launch.blank_options))
    try:
        fixed = parse_fixed(launch.fixed_form if launch.headless else form) if mode == "fixed" else None
    except StartError as e:
        if not launch.headless:
            raise
        raise StartError(_option_words(str(e))) from e
    if mode == "sweep" and not launch.headless:
        _check_sweep_users(form)
    try:
        if launch.headless:
            path = resolve_profile_path(launch.profile_arg or None, launch.host or None)
            profile, knobs = load_checked_profile(path), launch.given
        else:
            path, profile, shown, given = form_values(launch, form)
            _check_shown(form, launch, path)
            knobs = Knobs.from_form(form, shown, given)
        if knobs.as_dict():
            profile = apply_knobs(profile, knobs, path.parent)
    except ProfileError as e:
        if launch.headless:  # the knobs came from the command line: name its options, not the form's fields
            e = ProfileError(option_names(str(e)))
        raise StartError(str(e).replace("\n", "; ")) from e
    out_dir = launch.output_dir if launch.headless else output_dir_of(form, launch)
    host = str(form.get("host", "") or "").strip()
    if not host or launch.is_builtin_url(host):
        host = ""  # the built-in simulator for this profile (or the profile's target.base_url)
    try:
        target = resolve_target(profile, path, host or None, launch.sims,
                                host_source="--host" if launch.headless else "Host")
    except Exception as e:  # RuntimeError (URL, model lookup) or the simulator's SimStartError
        raise StartError(redact_url(str(e))) from e
    launch.note_sim()
    try:
        ctx = open_run(profile, path, target, launch.role, out_dir, _run_meta(form, launch, mode, fixed, knobs,
                                                                              target))
    except RuntimeError as e:
        raise StartError(str(e)) from e
    ctx.mode, ctx.fixed, ctx.web = mode, fixed, not launch.headless
    if launch.headless and fixed is not None:  # Locust has just warned that -u/-r/-t "will be ignored": not here
        until = f"for {fixed.run_time:g} s" if fixed.run_time is not None else "until Ctrl-C"
        log.info("fixed mode: %d users, started at %g/s, held %s after the warm-up (llmload's shape reads -u, -r "
                 "and -t: Locust's warning that they are ignored does not apply)", fixed.users, fixed.spawn_rate,
                 until)
    run.begin(ctx)
    if launch.headless:  # where a long run is (harness.locust.progress); the web UI has its LLM view
        from harness.locust.progress import start_progress

        start_progress(run, ctx)
    environment.host = target.base_url
    opts = environment.parsed_options
    if opts is not None:
        opts.host = target.base_url
    if not launch.stop_timeout_given:
        environment.stop_timeout = profile.steps.drain_timeout
    return ctx


def _run_meta(form: Mapping[str, str], launch: Launch, mode: str, fixed: FixedLoad | None, knobs: Knobs,
              target: Target) -> dict[str, Any]:
    """What a start adds to ``run.json`` (:func:`harness.locust.setup.open_run`): headless, the knobs when any;
    web UI, the mode, the form's values (secret fields masked, the host as measured), the knobs and the fixed
    load."""
    fixed_meta = None if fixed is None else {"users": fixed.users, "spawn_rate": fixed.spawn_rate,
                                             "run_time_s": fixed.run_time}
    if launch.headless:
        head: dict[str, Any] = {"knobs": knobs.as_dict()} if knobs.as_dict() else {}
        if fixed_meta is not None:
            head.update(mode=mode, fixed=fixed_meta)
        return head
    shown_form = {k: ("***" if _SECRET_FIELD.search(k) else str(v)) for k, v in form.items()
                  if k not in ("host", SHOWN_FIELD)}
    shown_form["host"] = target.shown
    extra: dict[str, Any] = {"mode": mode, "form": shown_form, "knobs": knobs.as_dict()}
    if fixed_meta is not None:
        extra["fixed"] = fixed_meta
    return extra


def stop_at_once(run: Run, environment: Any) -> dict[str, Any] | None:
    """The answer to the web UI's Stop (``POST /stop``) when it can be given at once: the runner's stop (which
    drains in-flight requests, then ends the run and writes its report at ``test_stop``) is started in a greenlet
    of its own and has begun (``test_stopping`` fired, ``load_end`` written) when this returns. None when Locust's
    own handler should answer (no run going, no runner)."""
    runner = environment.runner
    if runner is None or not run.active():
        return None
    timeout = float(environment.stop_timeout or 0.0)
    if run.state == "running":
        gevent.spawn(runner.stop)
        gevent.sleep(0)  # the stop begins now: test_stopping (load_end, state "stopping") before the answer
        msg = (f"llmload: stopping run {run.ctx.run_id if run.ctx else ''}: in-flight requests finish (up to "
               f"{timeout:.0f} s), then the report is written; the LLM view (/llm/) shows the progress")
    else:
        msg = f"llmload: run {run.ctx.run_id if run.ctx else ''} is stopping already"
    return {"success": True, "message": msg, "stopping": True}


def install(web_ui: Any, environment: Any, run: Run, launch: Launch) -> None:
    """Hook Locust's web UI: the Start (``POST /swarm``) validates the form and opens a run before Locust's
    ``swarm()`` starts the shape (:func:`start_run`), answers its errors and shows the target measured; the Stop
    (``POST /stop``) answers at once (:func:`stop_at_once`); ``GET <web-base-path>/llmload/form.json`` answers a
    profile's form values (:func:`form_values`) for the form's script (:file:`harness/webui/static/locust-ui.js`).
    (A stop's progress is tracked at ``test_stopping`` for
    every run, :func:`harness.locust.end.begin_stop`.)"""
    app = web_ui.app

    def is_post(name: str) -> bool:
        return request.method == "POST" and request.path.rstrip("/").endswith("/" + name)

    def is_swarm() -> bool:
        return is_post("swarm")

    def logged_out() -> bool:
        if getattr(web_ui, "web_login", False):
            from flask_login import current_user

            return not current_user.is_authenticated
        return False

    base = (getattr(environment.parsed_options, "web_base_path", None) or "").rstrip("/")
    auth = getattr(web_ui, "auth_required_if_enabled", lambda f: f)

    @auth
    def _form_json() -> Response:
        """The values the start form shows for a profile (``?web_profile=NAME&profile=PATH``, as the form sends
        them): ``{"profile": path, "values": {dest: text}, "placeholders": {dest: note}}`` (the note of an empty
        Steps field: :func:`harness.locust.form.steps_note`; of empty Prompt mix and Max tokens fields:
        :func:`harness.locust.form.source_notes`), or ``{"error": one line}`` (status 400)."""
        try:
            path, profile, shown, _ = form_values(launch, request.args)
        except ProfileError as e:
            return make_response(jsonify({"error": "llmload: " + str(e).replace("\n", "; ")}), 400)
        values = {k: v for k, v in shown.items() if k not in ("mode", "web_profile")}
        return jsonify({"profile": str(path), "values": values, "placeholders": {"steps": steps_note(profile),
                                                                              **source_notes(profile)}})

    app.add_url_rule(base + FORM_PATH, "llmload_form_json", _form_json, methods=["GET"])

    @app.before_request
    def _before_stop() -> Response | None:
        if not is_post("stop") or logged_out():  # logged out: Locust's own login check answers
            return None
        if getattr(web_ui, "_swarm_greenlet", None) is not None:  # a run started without a shape: Locust's path
            return None
        answer = stop_at_once(run, environment)
        return jsonify(answer) if answer is not None else None

    @app.before_request
    def _before_swarm() -> Response | None:
        if not is_swarm():
            return None
        if logged_out():
            return None  # Locust's own login check answers
        try:
            ctx = start_run(run, environment, request.form, launch)
        except StartError as e:
            log.error("Start refused: %s", e)
            # "running": a run is going (Locust's Edit of a running test): its dialog closes whatever the answer,
            # so the page's banner (harness/webui/static/locust-ui.js) shows the message
            return jsonify({"success": False, "message": f"llmload: {e}", "host": environment.host,
                            "running": run.active()})
        g.llmload_run = ctx
        return None

    @app.after_request
    def _after_swarm(resp: Response) -> Response:
        ctx = g.pop("llmload_run", None)
        if ctx is None or not is_swarm() or not resp.is_json:
            return resp
        data = resp.get_json(silent=True)
        if not isinstance(data, dict):
            return resp
        if not data.get("success"):  # Locust refused after the run was opened: drop it
            log.error("Start refused: %s (Locust's answer; run %s dropped)", data.get("message", "?"), ctx.run_id)
            end_run(run, environment)
            return resp
        environment.host = ctx.base_url
        data["host"] = redact_url(ctx.base_url)
        data["message"] = f"{data.get('message', 'Swarming started')}: llmload run {ctx.run_id} ({ctx.mode})"
        data["run_id"] = ctx.run_id
        resp.set_data(jsonify(data).get_data())
        return resp
