"""Reading a profile file: :func:`load_profile`, and where ``--profile NAME`` is looked up."""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from harness.config.base import ProfileError
from harness.config.profile import Profile
from harness.config.slo import slo_deprecations
from harness.prompts.spec import resolve_paths

__all__ = ["PROFILES_DIR", "default_profile_path", "load_profile", "resolve_profile_path"]

log = logging.getLogger("llmload")


@functools.lru_cache(maxsize=256)
def _warn_deprecated(path: str, key: str, instead: str) -> None:
    """Log one deprecation warning per file and key for the life of the process."""
    log.warning("%s: %s: deprecated spelling, still read; write %s instead", path, key, instead)


#: OpenAI's API refuses a temperature above this; vLLM and SGLang accept any >= 0 (:func:`_warn_temperature`).
OPENAI_MAX_TEMPERATURE = 2.0


@functools.lru_cache(maxsize=256)
def _warn_temperature(path: str, value: float) -> None:
    """Log once per file and value that ``request.temperature`` is above OpenAI's range: accepted (vLLM and SGLang
    sample at any temperature >= 0, and a study of one may mean it), but a server that follows OpenAI's API
    refuses every request with HTTP 400, and near-uniform sampling makes reasoning models ramble to max_tokens."""
    log.warning("%s: request.temperature: %g is above %g, OpenAI's maximum: vLLM and SGLang accept it, servers that "
                "follow OpenAI's range refuse every request (HTTP 400), and sampling this hot makes outputs run to "
                "max_tokens; a typo for %g?", path, value, OPENAI_MAX_TEMPERATURE, value / 10)


#: Pydantic error types of a number field given something else (strict fields refuse a quoted number).
_NUMBER_ERRORS = frozenset({"float_type", "int_type", "float_parsing", "int_parsing"})


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _yaml11_text_number(text: str) -> bool:
    """``1e5``, ``2E6``, ``1.5e3``: a number Python reads but YAML 1.1 (PyYAML) resolves to a string even unquoted
    (its float needs a dot and a signed exponent: ``1.0e+5``)."""
    return bool(re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+\s*", text)) and not re.fullmatch(
        r"\s*[-+]?\d+\.\d*[eE][-+]\d+\s*", text)


def _plain(text: str) -> str:
    """``1e5`` written so YAML reads a number: ``100000`` when whole, else ``0.001`` or ``1.000000e-05``."""
    v = float(text)
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v) if "e" not in repr(v) else f"{v:.6e}"


def _format_errors(path: str, err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (typo?)"
        elif e["type"] in ("model_type", "model_attributes_type", "dict_type"):
            got = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "true/false",
                   type(None): "nothing"}.get(type(e.get("input")), type(e.get("input")).__name__)
            msg = f"expected a section of keys (key: value lines under it), got {got}"
        elif e["type"] in _NUMBER_ERRORS and isinstance(e.get("input"), str) and _is_number(e["input"]):
            msg = (f"{e['input']!r} is a string, not a number: YAML reads an exponent without a dot and sign "
                   f"(1e5) as text; write {_plain(e['input'])}"
                   if _yaml11_text_number(e["input"]) else
                   f"{e['input']!r} is a quoted string, not a number: write it without quotes "
                   f"({e['input'].strip()})")
        lines.append(f"{path}: {loc}: {msg}")
    return "\n".join(lines)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile YAML file.

    Relative file paths in ``dataset:``, ``synthetic:`` and ``tokenizer:`` are taken from the profile's
    directory (:func:`harness.prompts.spec.resolve_paths`). The files themselves are opened by the feature that
    reads them, when the profile is loaded for a run (:func:`harness.profile_check.load_checked_profile`).

    Raises:
        ProfileError: the file is missing, is not YAML, is not a mapping, or fails validation; the message
            names the file, each bad key (dotted path, list indexes included) and the problem.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        hint = ""
        if not p.exists() and len(p.parts) == 1 and PROFILES_DIR.is_dir():  # a bare name: the shipped ones
            names = sorted(q.stem for q in PROFILES_DIR.glob("*.yaml"))
            hint = f" (a file, or one of the shipped profiles in {PROFILES_DIR}: {', '.join(names)})"
        raise ProfileError(f"{p}: cannot read profile: {e.strerror or e}{hint}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ProfileError(f"{p}: not valid YAML{where}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{p}: (top level): expected a mapping of keys (name, target, prompts, ...)")
    data.setdefault("name", p.stem)
    for key, instead in slo_deprecations(data.get("slo")):
        _warn_deprecated(str(p), f"slo.{key}", instead)
    resolve_paths(data, p.parent.absolute())
    try:
        prof = Profile.model_validate(data)
    except ValidationError as e:
        raise ProfileError(_format_errors(str(p), e)) from None
    temp = prof.request.temperature
    if temp is not None and temp > OPENAI_MAX_TEMPERATURE:
        _warn_temperature(str(p), temp)
    return prof


#: The repository's ``profiles/`` directory: where ``--profile NAME`` is looked up when NAME is not a file here.
PROFILES_DIR = Path(__file__).resolve().parent.parent.parent / "profiles"


def default_profile_path(host: str | None) -> Path:
    """The profile used when ``--profile`` is not given: ``profiles/k26.yaml`` with a host, else the demo."""
    return PROFILES_DIR / ("k26.yaml" if host else "demo.yaml")


def resolve_profile_path(arg: str | None, host: str | None) -> Path:
    """``--profile`` as given (a file relative to the working directory, else in the repo's ``profiles/``).

    A directory of that name in the working directory (``--profile demo`` run where ``./demo/`` exists) does not
    hide ``profiles/demo.yaml``. A name found nowhere is returned as given (:func:`load_profile` then reports it).
    """
    if not arg:
        return default_profile_path(host)
    p = Path(arg)
    if p.is_file() or p.is_absolute():
        return p
    for alt in (PROFILES_DIR / p.name, PROFILES_DIR / f"{p.name}.yaml"):
        if alt.exists():
            return alt
    return p
