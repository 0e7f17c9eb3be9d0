"""The profile's max_tokens against the server's context length, before any load is sent.

vLLM (and the built-in simulator) report each model's context length in ``GET /v1/models`` as ``max_model_len``
(tokens: prompt plus output). A request whose ``max_tokens`` is at least that length fails with HTTP 400 whatever
its prompt ("This model's maximum context length is ..."), so a profile that sets one would spend its run on
errors. :func:`context_problems` names every such setting; the run's start warns of each in one line before any
load (the run goes on: a mix may hold a prompt meant to fail, and the report then explains its failures).

Settings checked (tokens): ``request.max_tokens``, every ``prompts[i].max_tokens``, every ``axes.max_tokens``
value. Prompt lengths are not added (the server counts them with its own tokenizer): a max_tokens just below
the limit can still fail for a long prompt, and the report's failure messages then say so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config import Profile

__all__ = ["context_problems", "max_model_len"]

log = logging.getLogger("llmload")


def max_model_len(entries: Sequence[dict[str, Any]], model: str) -> int | None:
    """``max_model_len`` (tokens) of ``model`` in ``GET /v1/models``'s ``data`` entries; None when the server does
    not report one (OpenAI, SGLang) or the model is not listed."""
    for m in entries:
        if m.get("id") == model:
            v = m.get("max_model_len")
            return int(v) if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    return None


def context_problems(profile: Profile, path: str | Path, limit: int, given: str = "") -> list[str]:
    """One line per max_tokens value of ``profile`` (read from ``path``) at or above the server's context length
    ``limit`` (tokens): ``<source>: max_tokens N >= the server's max_model_len L (GET /v1/models): ...``; empty
    when none. ``given`` is the ``--max-tokens`` option / the form's Max tokens field as typed ("" when not given):
    the prompts' values then came from it, and the line names it instead of the profile file. Prompts sharing one
    value and source make one line naming them all."""
    found: list[tuple[str, int]] = []
    if profile.request.max_tokens is not None:
        found.append((f"{path}: request.max_tokens", profile.request.max_tokens))
    by_value: dict[int, list[str]] = {}
    for i, p in enumerate(profile.prompts or []):
        if p.max_tokens is not None and p.max_tokens >= limit:
            by_value.setdefault(p.max_tokens, []).append(p.id if given else f"prompts[{i}].max_tokens (id {p.id})")
    for v, names in by_value.items():
        if given:
            found.append((f"--max-tokens / the form's Max tokens {given!r} (prompt{'s' * (len(names) > 1)} "
                          f"{', '.join(names)})", v))
        else:
            found.append((f"{path}: " + ", ".join(names), v))
    if profile.axes is not None and profile.axes.max_tokens:
        found += [(f"{path}: axes.max_tokens[{i}]", v) for i, v in enumerate(profile.axes.max_tokens)]
    return [f"{key}: max_tokens {v:,} >= the server's max_model_len {limit:,} (GET /v1/models): every "
            f"request with it will fail (HTTP 400, context length exceeded); set it below {limit:,} minus the "
            "prompt's tokens" for key, v in found if v >= limit]
