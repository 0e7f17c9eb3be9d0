"""Per-request timeouts: a vocabulary module (it imports nothing from the package), shared by the profile
(:class:`harness.config.TimeoutsSpec`) and the client that enforces them (:mod:`harness.client`, which re-exports
:class:`Timeouts`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Timeouts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Per-request timeouts in seconds. Each one that fires fails the request with its own error class.

    The defaults here are the only ones: the profile's ``timeouts`` (:class:`harness.config.TimeoutsSpec`) takes
    them from this class; the client (:mod:`harness.client`) enforces them.

    Attributes:
        connect: opening the TCP (and TLS) connection.
        first_byte: request sent -> response status line and headers.
        first_token: request sent -> first token-bearing chunk (SSE comments and role-only chunks do not count,
            so keep-alive pings cannot hide a stalled prefill).
        idle: largest allowed gap after a token-bearing chunk before the next one (or the end of the stream).
        total: request sent -> end of the stream.
    """

    connect: float = 10.0
    first_byte: float = 300.0
    first_token: float = 600.0
    idle: float = 120.0
    total: float = 3600.0
