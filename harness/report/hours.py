"""Hours to collect N usable samples, from request throughput (with a Poisson interval) and from tokens.

Request-based: with ``k`` usable completions in a window of ``W`` seconds, the rate is ``r = k / W`` usable
samples per second and ``hours = N / (r * 3600)``. The 95 % interval treats ``k`` as a Poisson count:
rate bounds ``(k ± 1.96 * sqrt(k)) / W``; the lower rate bound gives the upper hours bound, which is
unbounded (None) when the lower rate is <= 0.

Token-based (the seed article's method, corrected for unusable completions):
``hours = N * tokens_per_usable / output_tps / 3600`` where
``tokens_per_usable = mean output tokens per successful request / usable share`` (usable / successful).
"""

from __future__ import annotations

import math

__all__ = ["Z95", "hours_by_requests", "hours_by_tokens", "poisson_rate_interval"]

#: Two-sided 95 % normal quantile.
Z95 = 1.96


def poisson_rate_interval(k: int, window_s: float, z: float = Z95) -> tuple[float | None, float | None]:
    """Rate bounds (per second) for ``k`` events in ``window_s`` seconds: ``(k ± z*sqrt(k)) / window_s``.

    The lower bound is None when it is <= 0; both are None when the window is empty.
    """
    if window_s <= 0:
        return None, None
    half = z * math.sqrt(k)
    lo = (k - half) / window_s
    hi = (k + half) / window_s
    return (lo if lo > 0 else None), hi


def hours_by_requests(n: int, k: int, window_s: float, z: float = Z95) -> dict[str, float | None]:
    """Hours to N usable samples from ``k`` usable completions in a ``window_s``-second window.

    Returns:
        ``{"hours", "hours_low", "hours_high", "samples_per_hour"}``: the point estimate ``N / (k / W * 3600)``,
        the 95 % bounds (``hours_low`` from the upper rate bound, ``hours_high`` from the lower rate bound,
        None when unbounded) and usable samples per hour. All None when ``k == 0`` or the window is empty
        (except ``samples_per_hour`` which is 0 for ``k == 0``).
    """
    if window_s <= 0:
        return {"hours": None, "hours_low": None, "hours_high": None, "samples_per_hour": None}
    rate = k / window_s
    lo, hi = poisson_rate_interval(k, window_s, z)
    return {
        "hours": n / (rate * 3600.0) if rate > 0 else None,
        "hours_low": n / (hi * 3600.0) if hi else None,
        "hours_high": n / (lo * 3600.0) if lo else None,
        "samples_per_hour": rate * 3600.0,
    }


def hours_by_tokens(n: int, mean_output_tokens: float | None, output_tps: float | None,
                    usable_share: float | None = 1.0) -> float | None:
    """Hours to N usable samples from aggregate token throughput.

    ``N * mean_output_tokens / output_tps / 3600 / usable_share``.

    Args:
        n: number of usable samples wanted.
        mean_output_tokens: mean output tokens per successful request (tokens).
        output_tps: aggregate output throughput (tokens per second).
        usable_share: usable / successful requests (0..1).

    Returns:
        Hours, or None when an input is missing or zero.
    """
    if not mean_output_tokens or not output_tps or not usable_share:
        return None
    return n * mean_output_tokens / output_tps / 3600.0 / usable_share
