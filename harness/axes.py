"""Sweep axes: thinking on/off, reasoning effort and max_tokens crossed with the concurrency steps.

A profile's ``axes:`` section (:class:`harness.config.AxesSpec`) lists values per axis; :func:`settings` expands
it into the settings of the sweep, in order: thinking (outermost), then effort, then max_tokens. With thinking off
the effort axis is dropped for that setting (a server given no reasoning has no effort to spend: the settings
would be identical). Every setting runs every concurrency step (:func:`harness.shapes.plan_stages`); each of its
requests carries the setting's label in its record (``setting``) and its body is the prompt's body with the
setting applied (:meth:`Setting.apply`).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EFFORT_PARAMS", "Setting", "settings"]

#: How the effort is sent: top-level ``reasoning_effort`` (vLLM, OpenAI) or ``chat_template_kwargs.reasoning_effort``
#: (chat templates that read it, e.g. gpt-oss served by some builds, SGLang).
EFFORT_PARAMS = ("reasoning_effort", "chat_template_kwargs")


@dataclass(frozen=True)
class Setting:
    """One point of the axes' cross product; a None value leaves the prompt's own value.

    Attributes:
        thinking: chat_template_kwargs ``thinking`` / ``enable_thinking``; None = not an axis.
        effort: ``reasoning_effort`` value (``low`` | ``medium`` | ``high``); None = not an axis (or thinking off).
        max_tokens: output cap, tokens; None = not an axis.
        effort_param: where the effort goes, one of :data:`EFFORT_PARAMS`.
    """

    thinking: bool | None = None
    effort: str | None = None
    max_tokens: int | None = None
    effort_param: Literal["reasoning_effort", "chat_template_kwargs"] = "reasoning_effort"

    @property
    def label(self) -> str:
        """``thinking=on,effort=low,max_tokens=1024`` (only the axes that are set), the record's ``setting``."""
        parts = []
        if self.thinking is not None:
            parts.append(f"thinking={'on' if self.thinking else 'off'}")
        if self.effort is not None:
            parts.append(f"effort={self.effort}")
        if self.max_tokens is not None:
            parts.append(f"max_tokens={self.max_tokens}")
        return ",".join(parts)

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        """A copy of the request ``body`` with this setting applied (the axes win over the prompt's values).

        thinking sets ``chat_template_kwargs.thinking`` and ``.enable_thinking`` (as ``request.thinking`` does);
        effort sets ``reasoning_effort`` (top-level or in ``chat_template_kwargs``, per ``effort_param``);
        max_tokens sets ``max_tokens`` (and ``max_completion_tokens`` when the body has it).
        """
        out = copy.deepcopy(body)
        ctk: dict[str, Any] = dict(out.get("chat_template_kwargs") or {})
        if self.thinking is not None:
            ctk["thinking"] = ctk["enable_thinking"] = self.thinking
        if self.effort is not None:
            if self.effort_param == "chat_template_kwargs":
                ctk["reasoning_effort"] = self.effort
            else:
                out["reasoning_effort"] = self.effort
        if ctk:
            out["chat_template_kwargs"] = ctk
        if self.max_tokens is not None:
            out["max_tokens"] = self.max_tokens
            if "max_completion_tokens" in out:
                out["max_completion_tokens"] = self.max_tokens
        return out


def settings(
    thinking: list[bool] | None,
    effort: list[str] | None,
    max_tokens: list[int] | None,
    effort_param: Literal["reasoning_effort", "chat_template_kwargs"] = "reasoning_effort",
) -> list[Setting]:
    """The settings of the axes (see the module docstring for the order); ``[]`` when no axis has values.

    Args:
        thinking: thinking values, or None / ``[]`` for no thinking axis.
        effort: effort values, or None / ``[]``.
        max_tokens: max_tokens values (tokens), or None / ``[]``.
        effort_param: where the effort is sent.
    """
    if not (thinking or effort or max_tokens):
        return []
    t_vals: list[bool | None] = list(thinking) if thinking else [None]
    e_vals: list[str | None] = list(effort) if effort else [None]
    m_vals: list[int | None] = list(max_tokens) if max_tokens else [None]
    out: list[Setting] = []
    for t, e, m in itertools.product(t_vals, e_vals, m_vals):
        s = Setting(t, None if t is False else e, m, effort_param)
        if s not in out:
            out.append(s)
    return out
