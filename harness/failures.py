"""Failed requests explained: the server's message of a failure, normalised, and a hint where one applies.

A failed request's record carries ``error_class`` (a key of :data:`harness.result.ERROR_CLASSES`) and
``error_detail``: for an HTTP error ``"HTTP 401 retry-after=5: <body, ≤ 300 chars>"``, for an in-band error
``"code=… type=… message=…"``, else the transport's text. This module turns that detail into

* :func:`server_message`: the server's own message (the ``message`` of a JSON error body, "HTML page" for an
  HTML body, else the text), secrets redacted (:func:`harness.redact.redact_message`), ≤ :data:`MAX_CHARS` chars;
* :func:`message_key`: the same with digits, uuids and hex ids collapsed (``#``, ``<id>``), so that
  "request 123 failed" and "request 456 failed" are one message (the key Locust groups failures by);
* :func:`hint`: what to check for a class/status/message (context length → lower max_tokens; 401/403 → the API
  key; 429 → the Retry-After seen; 404 → the model name or path; 5xx → the server's log; timeouts → the timeout);
* :func:`summarise`: per error class, the count, the top distinct messages and the hint (the report's
  ``failures`` of a step);
* :class:`FirstFailureLog`: logs the first failure of each class once per run and process, with its message.

A leaf module apart from :mod:`harness.redact`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.redact import redact_message

__all__ = [
    "MAX_CHARS",
    "TOP_MESSAGES",
    "ClassFailures",
    "FirstFailureLog",
    "MessageCount",
    "hint",
    "is_html",
    "locust_message",
    "message_key",
    "server_message",
    "split_detail",
    "summarise",
    "summarise_groups",
]

log = logging.getLogger("llmload.failures")

#: Longest message shown, in characters (longer ones end in "…").
MAX_CHARS = 160
#: Distinct messages kept per error class.
TOP_MESSAGES = 3

_HTTP_HEAD = re.compile(r"^(?:GET \S+: )?HTTP (\d{3})(?: retry-after=(\S+))?: ?(.*)$", re.S)
_INBAND = re.compile(r"^code=(\S*) type=(\S*) message=(.*)$", re.S)
_JSON_MESSAGE = re.compile(r'"(?:message|detail|error)"\s*:\s*"((?:[^"\\]|\\.)*)')
_UUID = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_HEX_ID = re.compile(r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b")
_PREFIXED_ID = re.compile(r"\b([a-z]{2,10}[-_])[A-Za-z0-9]{8,}\b")
_DIGITS = re.compile(r"\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")
_CONTEXT = re.compile(
    r"(?i)context length|context window|max_model_len|maximum context|too many tokens|"
    r"max_tokens.{0,40}(?:too large|exceed|must be)|prompt is too long|input.{0,20}too long"
)


def is_html(text: str) -> bool:
    """Whether ``text`` (a response body) is an HTML page rather than JSON or plain text."""
    head = text.lstrip()[:200].lower()
    return head.startswith(("<!doctype html", "<html", "<head", "<body")) or "<html" in head


def _json_message(body: str) -> str | None:
    """The ``message`` of a JSON error body (``{"error": {"message": …}}``, ``{"message": …}``,
    ``{"detail": …}``, ``{"error": "…"}``); also from a body truncated mid-JSON. None when there is none."""
    try:
        obj = json.loads(body)
    except ValueError:
        m = _JSON_MESSAGE.search(body)
        if m is None:
            return None
        try:
            return str(json.loads(f'"{m.group(1)}"'))
        except ValueError:
            return m.group(1)
    for _ in range(3):  # {"error": {"message": ...}} nests at most this deep in practice
        if isinstance(obj, dict):
            for key in ("message", "detail", "error"):
                v = obj.get(key)
                if isinstance(v, str) and v:
                    return v
                if isinstance(v, (dict, list)) and v:
                    obj = v
                    break
            else:
                return None
        elif isinstance(obj, list) and obj:
            obj = obj[0]
        else:
            return None
    return None


def _shorten(text: str) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1].rstrip() + "…"


def split_detail(detail: str | None) -> tuple[int | None, str | None, str]:
    """``(http_status, retry_after, rest)`` of an ``error_detail``: the status and Retry-After of an
    ``HTTP nnn retry-after=x: body`` detail (None when not that form) and the body or whole text."""
    text = detail or ""
    m = _HTTP_HEAD.match(text)
    if m is None:
        return None, None, text
    return int(m.group(1)), m.group(2), m.group(3)


def server_message(detail: str | None, secrets: Iterable[str] = ()) -> str:
    """The server's message in a record's ``error_detail``: one line, secrets redacted, ≤ :data:`MAX_CHARS`.

    An HTTP error's JSON body gives its ``message`` (``"HTTP 401: Incorrect API key"``); an HTML body gives
    ``"HTTP 404: HTML page"`` (never the page); an in-band error gives ``"code=… message"``; anything else its text.
    ``""`` when ``detail`` is None or empty.
    """
    status, _retry, rest = split_detail(detail)
    if status is not None:
        if is_html(rest):
            body = "HTML page"
        else:
            body = _json_message(rest) or rest
        text = f"HTTP {status}: {body}" if body else f"HTTP {status}"
    else:
        m = _INBAND.match(rest)
        if m is not None:
            code, msg = m.group(1), m.group(3)
            text = f"code={code}: {msg}" if code and code != "None" else msg
        else:
            text = rest
    return _shorten(redact_message(text, secrets))


def message_key(message: str) -> str:
    """``message`` (from :func:`server_message`) with uuids and hex or prefixed ids as ``<id>`` and numbers as
    ``#``, except an HTTP status or in-band ``code=…:`` at the start: the key that groups messages differing only
    in ids and values."""
    m = re.match(r"HTTP \d{3}|code=\S+:", message)
    head, rest = (message[: m.end()], message[m.end():]) if m else ("", message)
    rest = _UUID.sub("<id>", rest)
    rest = _PREFIXED_ID.sub(r"\1<id>", rest)
    rest = _HEX_ID.sub("<id>", rest)
    rest = _DIGITS.sub("#", rest)
    return head + rest


def _fmt_s(v: float) -> str:
    return f"{v:g} s"


def hint(error_class: str, status: int | None, message: str, retry_after_s: Iterable[float] = ()) -> str | None:
    """What to check for failures of ``error_class`` with HTTP ``status`` (None: not an HTTP error) and server
    ``message``; ``retry_after_s`` are the Retry-After values seen (seconds). None when no hint applies."""
    if _CONTEXT.search(message):
        return "the request exceeds the model's context length: lower max_tokens (or the prompt lengths)"
    if status in (401, 403) or (error_class == "http_4xx" and re.search(r"(?i)unauthori[sz]ed|api key", message)):
        return ("the server refused the credentials: check the API key variable (target.api_key_env, sent as "
                "Authorization: Bearer) or the auth header in target.headers")
    if status == 429 or error_class == "http_429":
        seen = sorted(set(retry_after_s))
        if seen:
            shown = ", ".join(_fmt_s(v) for v in seen[:3]) + (" …" if len(seen) > 3 else "")
            return f"the server throttled the load: Retry-After seen ({shown}); lower the concurrency or rate"
        return "the server throttled the load (no Retry-After sent); lower the concurrency or rate"
    if status == 404:
        return "not found: check the model name (target.model) and the URL path (target.base_url, e.g. …/v1)"
    if error_class == "http_5xx" or (status is not None and 500 <= status < 600):
        return "the server failed: see the server's log"
    if error_class.startswith("timeout_"):
        return f"raise timeouts.{error_class.removeprefix('timeout_')} or lower the load"
    if error_class == "connect_error":
        return "is the server up and the URL right?"
    return None


@dataclass
class MessageCount:
    """One distinct server message of an error class: the first text seen of its key, how many failed requests
    carried it, and the hint for it (None when none applies)."""

    message: str
    count: int
    hint: str | None = None


@dataclass
class ClassFailures:
    """The failures of one error class: ``count`` requests and the top distinct messages (most frequent first)."""

    error_class: str
    count: int = 0
    messages: list[MessageCount] = field(default_factory=list)


def summarise(
    failed: Iterable[tuple[str | None, str | None, int | None, float | None]],
    top: int = TOP_MESSAGES,
    secrets: Iterable[str] = (),
) -> list[ClassFailures]:
    """Per error class, most frequent first (ties by name), of ``failed`` rows
    ``(error_class, error_detail, http_status, retry_after_s)``: the count and the top ``top`` messages with
    their hints (a 429's hint names the Retry-After values seen in its class). A null or empty class is
    ``unknown``; a failure without a message counts in its class but lists no message."""
    return summarise_groups(((c, d, st, () if r is None else (r,), 1) for c, d, st, r in failed), top, secrets)


def summarise_groups(
    groups: Iterable[tuple[str | None, str | None, int | None, Iterable[float], int]],
    top: int = TOP_MESSAGES,
    secrets: Iterable[str] = (),
) -> list[ClassFailures]:
    """:func:`summarise` of failures already grouped, in the order of their first record:
    ``(error_class, error_detail of the first, http_status of the first, Retry-After values seen (s), count)``.
    Grouping records whose details differ only in their digits (what the report does, in polars) gives the result
    of :func:`summarise` on the records while parsing each group's detail once."""
    secrets = tuple(secrets)
    counts: dict[str, int] = {}
    keys: dict[str, dict[str, list]] = {}  # class -> key -> [first message, count, status]
    retries: dict[str, set[float]] = {}
    for cls, detail, status, seen, n in groups:
        c = cls or "unknown"
        counts[c] = counts.get(c, 0) + n
        retries.setdefault(c, set()).update(float(v) for v in seen)
        msg = server_message(detail, secrets)
        if not msg:
            continue
        st = status if status is not None else split_detail(detail)[0]
        slot = keys.setdefault(c, {}).setdefault(message_key(msg), [msg, 0, st])
        slot[1] += n
    out: list[ClassFailures] = []
    for c in sorted(counts, key=lambda k: (-counts[k], k)):
        ranked = sorted(keys.get(c, {}).values(), key=lambda v: -v[1])[:top]
        out.append(ClassFailures(c, counts[c], [
            MessageCount(m, n, hint(c, st, m, retries.get(c, ()))) for m, n, st in ranked
        ]))
    return out


def locust_message(error_class: str | None, error_code: str | None, detail: str | None,
                   secrets: Iterable[str] = ()) -> str:
    """The failure text Locust shows (and groups by) for a failed request: the class (with the in-band error's
    ``code=``), then the server message's key (:func:`message_key`), e.g.
    ``"http_4xx: HTTP 400: maximum context length is # tokens…"``; just the class when there is no message.
    ``secrets`` (e.g. the API key) are masked besides the patterns of :func:`harness.redact.redact_message`."""
    cls = error_class or "unknown"
    head = f"{cls} code={error_code}" if cls == "server_error_event" and error_code else cls
    msg = server_message(detail, secrets)
    if error_code and msg.startswith(f"code={error_code}: "):  # the code is in the head already
        msg = msg[len(f"code={error_code}: "):]
    msg = message_key(msg)
    return f"{head}: {msg}" if msg else head


class FirstFailureLog:
    """Logs the first failure of each error class once (per run key, in this process), with its message and hint.

    :meth:`note` returns True when it logged (a new class for that run)."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    def note(self, run: str, error_class: str | None, detail: str | None, status: int | None = None,
             retry_after_s: float | None = None, secrets: Iterable[str] = ()) -> bool:
        """Log ``error_class``'s first failure in ``run`` (a run id) at WARNING; False when already logged."""
        cls = error_class or "unknown"
        if (run, cls) in self._seen:
            return False
        self._seen.add((run, cls))
        msg = server_message(detail, secrets)
        st = status if status is not None else split_detail(detail)[0]
        h = hint(cls, st, msg, () if retry_after_s is None else (retry_after_s,))
        log.warning("first %s failure: %s%s", cls, msg or "(no message)", f" ({h})" if h else "")
        return True


#: The process's log of first failures (the users of every run in this process share it).
FIRST_FAILURES = FirstFailureLog()
