"""Redaction of secrets in free text: server messages, error details, log lines.

One function, :func:`redact_text`, used wherever a text that may carry a key is shown or stored (the failure
messages of :mod:`harness.failures`). A leaf module: it imports nothing from the package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MASK", "redact_text"]

#: What a redacted secret is replaced with.
MASK = "***"

# Longest first so "Bearer sk-..." is masked whole; each pattern keeps its label and masks the value.
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@"), r"\1" + MASK + "@"),
    # Authorization: Bearer <token> / Basic <token>
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + MASK),
    # OpenAI-style keys: sk-..., sk-proj-..., also rk-/pk- prefixes
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{6,}"), MASK),
    # key=value / "api_key": "value" / api-key: value (key, token, secret, password, signature)
    (re.compile(r"""(?ix)
        (\b[\w-]*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|passwd|signature|sig)
         ["']?\s*[:=]\s*["']?)
        ([^\s"',;&}]{4,})"""), r"\1" + MASK),
    # long opaque tokens: 32+ chars of base64/hex-ish text with both letters and digits
    (re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b"), MASK),
)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret masked as ``***``.

    Masked: each of ``secrets`` verbatim (values of at least 4 characters; shorter ones are ignored, as masking
    them would mangle ordinary words), the credentials of URLs (``scheme://user:pass@``), bearer and basic
    tokens, ``sk-…`` keys, the values of ``key=…`` / ``"api_key": "…"`` / ``token: …`` style pairs, and long
    opaque tokens (32+ characters mixing letters and digits). Never raises; ``""`` stays ``""``.
    """
    out = text
    for s in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        out = out.replace(s, MASK)
    for pattern, repl in _PATTERNS:
        out = pattern.sub(repl, out)
    return out
