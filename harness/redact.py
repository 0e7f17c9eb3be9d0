"""Secret redaction: the one text filter every writer of run output uses (docs: guides/secrets.md).

:func:`redact_text` replaces each known secret value of a run (its API key, secret header values, secret query
parameters of the base URL: :meth:`harness.config.TargetSpec.secret_values`) with :data:`MARKER`, and any
``Bearer <token>`` or OpenAI-style ``sk-…`` key with the marker even when the value is not known (a key the server
echoes from elsewhere). :func:`is_secret_header` says which header names hold secrets; :func:`redact_query`
hides the secret-looking query parameters of a URL. :func:`redact_message` adds wider patterns for free text shown
to people (a server's error message: URL credentials, ``key=value`` pairs, long opaque tokens), too wide for
records and files (they would mangle ids and digests).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "MARKER",
    "MASK",
    "MIN_SECRET_CHARS",
    "is_secret_header",
    "is_secret_name",
    "redact_logs",
    "redact_message",
    "redact_query",
    "redact_text",
    "secret_query_values",
]

#: What a secret is replaced with.
MARKER = "[redacted]"
#: The same marker, under the name the failure messages use.
MASK = MARKER
#: Secret values shorter than this are not searched for (a 1-3 character "key" would redact ordinary text).
MIN_SECRET_CHARS = 4

#: Header and query-parameter names that hold secrets: authorization, api-key, x-api-key, anything naming a key,
#: token, secret, password, credential, signature or cookie.
_SECRET_NAME = re.compile(r"auth|api[-_]?key|key$|token|secret|passw|credential|signature|sig$|cookie", re.I)
_PATTERNS = (
    re.compile(r"(?i)(Bearer\s+)[A-Za-z0-9._~+/=-]+"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"),
)


def is_secret_name(name: str) -> bool:
    """True when a header or query-parameter ``name`` looks like it holds a secret (case-insensitive)."""
    return bool(_SECRET_NAME.search(name.strip()))


def is_secret_header(name: str) -> bool:
    """True when the HTTP header ``name`` holds a secret: Authorization, api-key, x-api-key, or a name that looks
    secret (:func:`is_secret_name`)."""
    return is_secret_name(name)


def secret_query_values(url: str) -> list[str]:
    """The values of the secret-looking query parameters of ``url`` (``?api-key=…``, ``?token=…``), in order."""
    try:
        query = urlsplit(url).query
    except ValueError:
        return []
    return [v for k, v in parse_qsl(query, keep_blank_values=False) if is_secret_name(k)]


def redact_query(url: str) -> str:
    """``url`` with the value of each secret-looking query parameter replaced by :data:`MARKER`."""
    return redact_text(url, secret_query_values(url))


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every occurrence of each value in ``secrets`` (values shorter than :data:`MIN_SECRET_CHARS`
    are ignored; longer ones first) and every ``Bearer <token>`` / ``sk-…`` key replaced by :data:`MARKER`.

    Args:
        text: any text (a log line, an error body, a serialised JSON document).
        secrets: the secret values to hide (:meth:`harness.config.TargetSpec.secret_values`).

    Returns:
        The redacted text; ``text`` itself when there was nothing to hide.
    """
    for value in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MARKER)
    text = _PATTERNS[0].sub(lambda m: m.group(1) + MARKER, text)
    return _PATTERNS[1].sub(MARKER, text)


# The wider patterns of free text (redact_message); each keeps its label and masks the value.
_MESSAGE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@"), r"\1" + MARKER + "@"),
    # Authorization: Bearer <token> / Basic <token>
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + MARKER),
    # OpenAI-style keys: sk-..., sk-proj-..., also rk-/pk- prefixes
    (re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_-]{6,}"), MARKER),
    # key=value / "api_key": "value" / api-key: value (key, token, secret, password, signature)
    (re.compile(r"""(?ix)
        (\b[\w-]*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|token|secret|password|passwd|signature|sig)
         ["']?\s*[:=]\s*["']?)
        ([^\s"',;&}]{4,})"""), r"\1" + MARKER),
    # long opaque tokens: 32+ chars of base64/hex-ish text with both letters and digits
    (re.compile(r"\b(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])[A-Za-z0-9_-]{32,}\b"), MARKER),
)


def redact_message(text: str, secrets: Iterable[str] = ()) -> str:
    """A free-text message shown to people (a server's error message) with every secret masked as
    :data:`MARKER`: :func:`redact_text`'s, plus the credentials of URLs (``scheme://user:pass@``), basic tokens,
    ``rk-``/``pk-`` keys, the values of ``key=…`` / ``"api_key": "…"`` / ``token: …`` style pairs and long opaque
    tokens (32+ characters mixing letters and digits). Never raises; ``""`` stays ``""``."""
    out = redact_text(text, secrets)
    for pattern, repl in _MESSAGE_PATTERNS:
        out = pattern.sub(repl, out)
    return out


class _LogRedactor:
    """The process's log-record factory wrapper: redacts every record's message with the values it holds."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()
        self.installed = False

    def install(self) -> None:
        """Wrap the current log-record factory (once)."""
        if self.installed:
            return
        self.installed = True
        make = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = make(*args, **kwargs)
            try:
                text = record.getMessage()
            except Exception:  # a bad format string: left for the handler to report
                return record
            clean = redact_text(text, self.secrets)
            if clean != text:
                record.msg, record.args = clean, ()
            return record

        logging.setLogRecordFactory(factory)


_LOGS = _LogRedactor()


def redact_logs(secrets: Iterable[str]) -> None:
    """Redact ``secrets`` (and ``Bearer``/``sk-`` tokens) from every log record created from now on in this
    process, whatever the logger or handler: the message is formatted, redacted and frozen when the record is made.
    Values accumulate across calls (a web-UI process runs several runs)."""
    _LOGS.secrets.update(s for s in secrets if s)
    _LOGS.install()
