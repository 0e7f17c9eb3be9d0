"""The web UI's start form: llmload's fields in Locust's "Custom parameters", and what they do to the profile.

Fields (each is also a command-line option; Locust shows every option registered with ``include_in_web_ui``):

``--web-profile NAME``
    the profile picker: the files in ``profiles/`` (by stem). Locust's own "Profile" field (``--profile``) is the
    free path: a value typed there (different from the one at launch) wins over the picker.
``--mode sweep|fixed``
    "sweep" runs the profile's shape (warm-up, single stream, steps); "fixed" holds Locust's own user count with
    its ramp-up (spawn rate) for its run time (empty: until Stop), after the warm-up. Fixed is for the web UI.
``--prompt-mix``
    the prompts to send and their weights, ``id:weight,id:weight`` (``id`` alone: weight 1); ids of the profile
    (or of ``--prompts-file``).
``--prompts-file PATH``
    a YAML/JSON file of prompts (a list of the profile's ``prompts`` entries, or a mapping with a ``prompts``
    key) replacing the profile's.
``--max-tokens``
    every prompt's ``max_tokens`` (one integer) or per prompt (``id=N,id=N``).
``--thinking on|off|unset``
    ``request.thinking`` (unset: the server's default).
``--steps``
    ``steps.concurrency``: the sweep's concurrencies, ``8,16,32,64``.
``--step-duration``
    ``steps.duration``: seconds per step.

The form first shows the launch profile's values (:func:`set_form_defaults`); picking another profile fills the
fields with that profile's values (:func:`form_defaults`, served by :func:`harness.locust.webrun.form_values` to the
page's script). A field left at the value the form showed for the picked profile is not applied (the profile keeps
its own value; for the launch profile, the command line's value applies); a changed field overrides the profile
(:func:`apply_knobs`); a field cleared where a value was shown, or a value in quotes, is refused. Every value is
checked before anything is sent (:class:`harness.config.ProfileError` with a one-line message the web UI shows).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from harness.config import PROFILES_DIR, SHAPE_TICK_S, Profile, ProfileError
from harness.locust.options import add_option

__all__ = [
    "KNOBS",
    "MODES",
    "Knobs",
    "add_form_options",
    "apply_knobs",
    "form_defaults",
    "profile_choices",
    "set_form_defaults",
    "steps_note",
]

#: The modes of the form's ``mode`` field.
MODES = ("sweep", "fixed")
#: The form fields (argparse dests) that change the profile, in form order.
KNOBS = ("prompt_mix", "prompts_file", "max_tokens", "thinking", "steps", "step_duration")
_THINKING = ("on", "off", "unset")

#: The values the form shows (dest -> text), set from the launch profile at ``init`` (web UI).
_DEFAULTS: dict[str, str] = {}


def profile_choices() -> list[str]:
    """The profile picker's choices: the stems of the ``*.yaml`` files in ``profiles/``, sorted."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.yaml"))


def add_form_options(parser: Any, **_: Any) -> None:
    """Add the start form's fields to Locust's ``parser`` (see the module docstring), with the values the form
    shows (:func:`set_form_defaults`); called each time Locust builds its parser (by
    :func:`harness.locust.register`'s ``init_command_line_parser`` listener)."""
    d = _DEFAULTS.get
    choices = profile_choices()
    launched = d("web_profile", "")
    if launched and launched not in choices:  # the launch profile is a file elsewhere: listed by its path
        choices.append(launched)
    add_option(parser, "--web-profile", default=launched, choices=choices,
               help="profile from profiles/ (a path typed in the Profile field above wins)")
    add_option(parser, "--mode", default=d("mode", "sweep"), choices=list(MODES),
               help="sweep: the profile's steps; fixed: after the warm-up, hold Number of users (headless: -u) "
               "reached at Ramp up users/s (-r) for Run time (-t; none: until Stop or Ctrl-C)")
    add_option(parser, "--prompt-mix", default=d("prompt_mix", ""),
               help="prompts sent and their weights: id:weight,id:weight")
    add_option(parser, "--prompts-file", default=d("prompts_file", ""),
               help="YAML/JSON list of prompts replacing the profile's")
    add_option(parser, "--max-tokens", default=d("max_tokens", ""),
               help="max_tokens of every prompt (N) or per prompt (id=N,...)")
    add_option(parser, "--thinking", default=d("thinking", ""), choices=list(_THINKING),
               help="request.thinking (unset: server's)")
    add_option(parser, "--steps", default=d("steps", ""), help="sweep concurrencies, e.g. 8,16,32,64")
    add_option(parser, "--step-duration", default=d("step_duration", ""),
               help="seconds per sweep step (at least 1: the load shape ticks once a second)")


def _num(x: float) -> str:
    return f"{x:g}"


def steps_note(profile: Profile) -> str:
    """What picks the load steps when ``steps.concurrency`` does not ("" when it does): a ``search:`` section (the
    search picks the concurrencies or rates) or a ``rate:`` section (its rates, requests/s). The form then shows
    the Steps field empty with this note as its placeholder: the profile's ``steps.concurrency`` would not run."""
    if profile.search is not None:
        s = profile.search
        return f"the SLO search picks the steps ({s.axis} {s.low:g}-{s.high:g}, search: in the profile)"
    if profile.rate is not None:
        rates = ", ".join(f"{r:g}" for r in profile.rate.rates)
        return f"rate sweep: {rates} requests/s (rate.rates in the profile)"
    return ""


def source_notes(profile: Profile) -> dict[str, str]:
    """The placeholders of the Prompt mix and Max tokens fields when the prompts come from a ``dataset:`` or a
    ``synthetic:`` section ({} for ``prompts:``): the form then shows those fields empty (there are no prompt ids
    to weigh), and the note says where the prompts and their max_tokens come from."""
    default = profile.request.max_tokens
    if profile.dataset is not None:
        d = profile.dataset
        draw = f"{d.sampling}, {'with' if d.replacement else 'without'} replacement"
        return {"prompt_mix": f"the dataset's rows: {Path(d.path).name} ({draw}; dataset: in the profile)",
                "max_tokens": f"each row's {d.max_tokens_column}, else {default} (request.max_tokens)"}
    if profile.synthetic is not None:
        drawn = profile.synthetic.max_tokens is not None
        mt = "drawn per request (synthetic.max_tokens)" if drawn else f"{default} (request.max_tokens)"
        return {"prompt_mix": "synthetic prompts (synthetic: in the profile)", "max_tokens": mt}
    return {}


def form_defaults(profile: Profile, profile_path: Path) -> dict[str, str]:
    """What the form shows for ``profile`` (dest -> text): its picker entry (its stem, or its path when the file
    is not in ``profiles/``), mode "sweep", and its knobs in the fields' formats (Steps empty when the profile's
    steps come from a search or a rate sweep, :func:`steps_note`)."""
    mts = {p.id: p.max_tokens or profile.request.max_tokens for p in profile.prompts}
    if len(set(mts.values())) == 1:
        mt = next(iter(mts.values()))
        max_tokens = "" if mt is None else str(mt)
    else:
        max_tokens = ",".join(f"{k}={'' if v is None else v}" for k, v in mts.items())
    thinking = profile.request.thinking
    in_dir = profile_path.resolve().parent == PROFILES_DIR and profile_path.suffix == ".yaml"
    return {
        "web_profile": profile_path.stem if in_dir else str(profile_path),
        "mode": "sweep",
        "prompt_mix": ",".join(f"{p.id}:{_num(p.weight)}" for p in profile.prompts),
        "prompts_file": "",
        "max_tokens": max_tokens,
        "thinking": "unset" if thinking is None else ("on" if thinking else "off"),
        "steps": "" if steps_note(profile) else ",".join(str(c) for c in profile.steps.concurrency),
        "step_duration": _num(profile.steps.duration),
    }


def set_form_defaults(defaults: Mapping[str, str]) -> None:
    """Show ``defaults`` (from :func:`form_defaults`) in the form from now on (Locust rebuilds its parser to
    list the form's fields)."""
    _DEFAULTS.clear()
    _DEFAULTS.update(defaults)


@dataclass(frozen=True)
class Knobs:
    """The form's profile overrides as text; "" leaves the profile's value (see :func:`apply_knobs`)."""

    prompt_mix: str = ""
    prompts_file: str = ""
    max_tokens: str = ""
    thinking: str = ""
    steps: str = ""
    step_duration: str = ""

    @classmethod
    def from_options(cls, opts: Any) -> Knobs:
        """The knobs of parsed options (missing attributes and None: "")."""
        return cls(**{f.name: str(getattr(opts, f.name, "") or "").strip() for f in fields(cls)})

    @classmethod
    def from_form(cls, form: Mapping[str, str], shown: Mapping[str, str], given: Knobs) -> Knobs:
        """The knobs of a submitted form: a field changed from what the form showed (``shown``) is applied; one
        left as shown applies ``given`` (the command line's value, "" when none); a field absent from ``form``
        counts as left as shown.

        Raises:
            ProfileError: a field present in ``form`` but blank where the form showed a value (a cleared prompt
                mix or steps field would otherwise silently run the profile's value); the message names it.
        """
        out = {}
        for f in fields(cls):
            value = str(form.get(f.name, "") or "").strip()
            was = shown.get(f.name, "")
            if f.name in form and not value and was:
                raise ProfileError(f"{f.name}: empty (the profile's value is {was!r}): give a value, or pick the "
                                   "profile again to restore its values")
            out[f.name] = value if f.name in form and value != was else getattr(given, f.name)
        return cls(**out)

    def as_dict(self) -> dict[str, str]:
        """The non-empty knobs (dest -> text), for ``run.json``."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}


def _load_prompts_file(path: str, base: Path) -> list[Any]:
    p = Path(path).expanduser()
    if not p.is_absolute() and not p.exists():
        p = base / p
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ProfileError(f"prompts file {path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ProfileError(f"prompts file {path}: not valid YAML/JSON: {getattr(e, 'problem', e)}") from None
    if isinstance(data, dict):
        data = data.get("prompts")
    if not isinstance(data, list) or not data:
        raise ProfileError(f"prompts file {path}: expected a non-empty list of prompts (or a 'prompts' key)")
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise ProfileError(f"prompts file {path}: item {i} is {type(item).__name__} {str(item)[:40]!r}: each "
                               "prompt is a mapping with id and text, e.g. {id: q1, text: 'Explain ...'}")
    return data


def _quoted(text: str) -> str:
    """A hint for a value typed with quotes (``'30'``): the form's fields are text, so quotes are not needed."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return " (type it without quotes)"
    return ""


def _positive_int(text: str, what: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise ProfileError(f"{what}: {text!r} is not an integer{_quoted(text)}") from None
    if n <= 0:
        raise ProfileError(f"{what}: {n} must be > 0")
    return n


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def apply_knobs(profile: Profile, knobs: Knobs, base: Path | None = None) -> Profile:
    """``profile`` with the non-empty ``knobs`` applied, validated as a profile is.

    ``base``: the directory a relative ``prompts_file`` is also looked up in (the profile's). Order: the prompts
    file replaces the prompts, the mix picks and weights them, then ``max_tokens``, ``thinking``, ``steps`` and
    ``step_duration``.

    Raises:
        ProfileError: a value that cannot be read, that is in quotes (``'30'``: the form's fields are text
            already), or that makes the profile invalid; the message names the field (``prompt_mix: ...``).
    """
    for name, value in knobs.as_dict().items():
        if _quoted(value):
            raise ProfileError(f"{name}: {value} is in quotes: type the value without quotes")
    d = profile.public_dict()
    if knobs.prompts_file:
        d["prompts"] = _load_prompts_file(knobs.prompts_file, base or Path.cwd())
    if knobs.prompt_mix:
        by_id = {str(p.get("id")): p for p in d["prompts"] if isinstance(p, dict)}
        picked = []
        for item in _split(knobs.prompt_mix):
            pid, _, w = item.partition(":")
            pid = pid.strip()
            if pid not in by_id:
                raise ProfileError(f"prompt_mix: no prompt {pid!r} (prompts: {', '.join(by_id)})")
            try:
                weight = float(w) if w.strip() else 1.0
            except ValueError:
                raise ProfileError(f"prompt_mix: {item!r}: the weight is not a number") from None
            if not (weight > 0 and math.isfinite(weight)):
                raise ProfileError(f"prompt_mix: {item!r}: the weight must be > 0")
            picked.append({**by_id[pid], "weight": weight})
        if not picked:
            raise ProfileError("prompt_mix: no prompt named")
        d["prompts"] = picked
    if knobs.max_tokens:
        if "=" in knobs.max_tokens:
            ids = {str(p.get("id")) for p in d["prompts"]}
            per: dict[str, int] = {}
            for item in _split(knobs.max_tokens):
                pid, _, n = item.partition("=")
                if pid.strip() not in ids:
                    raise ProfileError(f"max_tokens: no prompt {pid.strip()!r} (prompts: {', '.join(sorted(ids))})")
                if n.strip():
                    per[pid.strip()] = _positive_int(n.strip(), f"max_tokens: {pid.strip()}")
                    continue
                # "id=" is how the form shows a prompt with no max_tokens at all; for one that has a value it
                # would silently run that value
                has = next((p.get("max_tokens") for p in d["prompts"] if str(p.get("id")) == pid.strip()), None)
                has = has if has is not None else (d.get("request") or {}).get("max_tokens")
                if has is not None:
                    raise ProfileError(f"max_tokens: {pid.strip()}: empty (the profile's value is {has}): give a "
                                       f"number, or leave {pid.strip()}= out to keep the profile's value")
            for p in d["prompts"]:
                if str(p.get("id")) in per:
                    p["max_tokens"] = per[str(p.get("id"))]
        else:
            every = _positive_int(knobs.max_tokens, "max_tokens")
            for p in d["prompts"]:
                p["max_tokens"] = every
    if knobs.thinking:
        if knobs.thinking not in _THINKING:
            raise ProfileError(f"thinking: {knobs.thinking!r}: one of {', '.join(_THINKING)}")
        d["request"]["thinking"] = None if knobs.thinking == "unset" else knobs.thinking == "on"
    if knobs.steps:
        d["steps"]["concurrency"] = [_positive_int(c, "steps") for c in _split(knobs.steps)]
        if not d["steps"]["concurrency"]:
            raise ProfileError("steps: no concurrency given (e.g. 8,16,32)")
        if any(not t.strip() for t in knobs.steps.split(",")):
            raise ProfileError(f"steps: {knobs.steps!r} has an empty item (e.g. 8,16,32)")
    if knobs.step_duration:
        try:
            dur = float(knobs.step_duration)
        except ValueError:
            raise ProfileError(f"step_duration: {knobs.step_duration!r} is not a number of seconds"
                               f"{_quoted(knobs.step_duration)}") from None
        if not (dur > 0 and math.isfinite(dur)):
            raise ProfileError(f"step_duration: {knobs.step_duration} must be > 0 seconds")
        if dur < SHAPE_TICK_S:
            raise ProfileError(f"step_duration: {knobs.step_duration} s is shorter than the load shape's tick: at "
                               f"least {SHAPE_TICK_S:g} s (Locust ticks the shape once a second, so a step cannot "
                               f"end sooner)")
        d["steps"]["duration"] = dur
    try:
        return Profile.model_validate(d)
    except Exception as e:  # pydantic's ValidationError: one line per problem
        lines = [(".".join(str(p) for p in x.get("loc", ())) + ": " if x.get("loc") else "")
                 + ("unknown key (typo?)" if x.get("type") == "extra_forbidden"  # as a profile's own keys say
                    else str(x.get("msg", x)).removeprefix("Value error, "))
                 for x in getattr(e, "errors", list)()] or [str(e)]
        who = (f"prompts file {knobs.prompts_file}" if knobs.prompts_file else
               "the options / form fields " + ", ".join(knobs.as_dict()))
        raise ProfileError(f"{who}: the profile they make is invalid: " + "; ".join(lines)) from None
