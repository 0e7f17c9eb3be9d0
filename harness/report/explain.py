"""Failures explained, as text: one line per error class of a step's ``failures`` (:class:`FailureClass`).

The one formatter of the report's failure explanations, used by the terminal summary (:mod:`.summary`) and
``report.md`` / ``report.html`` (:mod:`.render`), one message per line under its class, and by the web UI's LLM
view (:func:`step_failure_lines`, one line per class). A class line reads
``http_4xx ×12: "HTTP 400: … maximum context length is 32768 tokens…" ×10 → … lower max_tokens …;
"HTTP 401: Unauthorized" ×2 → …``: the class, its count, then its top distinct server messages with their
counts and hints.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.model import FailureClass, FailureMessage, StepRow

__all__ = ["class_line", "message_text", "step_failure_lines"]


def _quote(message: str, code: bool) -> str:
    """``message`` as a Markdown code span (``code``: backticks in it become quotes) or in double quotes."""
    return f"`{message.replace('`', chr(39))}`" if code else f'"{message}"'


def message_text(m: FailureMessage, code: bool = False) -> str:
    """One server message: ``"<message>" ×<n> → <hint>`` (``code``: as a Markdown code span; no hint, no arrow)."""
    return f"{_quote(m.message, code)} ×{m.count}" + (f" → {m.hint}" if m.hint else "")


def class_line(c: FailureClass, code: bool = False) -> str:
    """One error class on one line: ``"<class> ×<count>: "<message>" ×<n> → <hint>; …"`` (``code``: messages as
    Markdown code spans, for report.md); just ``"<class> ×<count>"`` when no message was recorded."""
    head = f"{c.error_class} ×{c.count}"
    parts = [message_text(m, code) for m in c.messages]
    return f"{head}: {'; '.join(parts)}" if parts else head


def step_failure_lines(rows: Sequence[StepRow], code: bool = False) -> list[str]:
    """``"<step label>: <class line>"`` for each error class with a server message of each step, in step order."""
    return [f"{r.label}: {class_line(c, code)}" for r in rows for c in r.failures if c.messages]
