"""Per-turn figures of a multi-turn run: TTFT, prompt tokens and prefix-cache hits by turn index.

A conversation's turn ``k`` carries the whole conversation so far, so its prompt grows with ``k`` and, on a server
with prefix caching, most of it is served from the cache (``cached_tokens``). :func:`turn_rows` groups every
non-warm-up request with a ``turn`` (records of :mod:`harness.conversation` users) by its turn index, over all
steps together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness.report.stats import mean, percentile
from harness.result import RequestResult

__all__ = ["TURN_ROW_KEYS", "turn_rows"]

#: Keys of one :func:`turn_rows` row (``*_s`` seconds, ``*_tokens`` tokens, ``cached_share`` 0..1).
TURN_ROW_KEYS = (
    "turn", "requests", "completed", "ttft_p50_s", "ttft_p90_s", "ttft_mean_s", "e2e_p50_s", "mean_prompt_tokens",
    "mean_cached_tokens", "cached_share", "cached_sent", "mean_output_tokens",
)


def turn_rows(records: Sequence[RequestResult]) -> list[dict[str, Any]]:
    """One row per turn index (0-based, ascending) over every request with a ``turn``; ``[]`` when none has one.

    Figures are over the turn's successful requests: TTFT p50 / p90 / mean and E2E p50 (seconds), mean prompt
    tokens (``usage.prompt_tokens``, over those that sent it), mean cached tokens (over those whose usage sent
    ``prompt_tokens_details.cached_tokens``; None when no server reply had it), ``cached_share`` = Σ cached ÷ Σ
    prompt tokens over the requests that sent both, ``cached_sent`` how many sent ``cached_tokens``, and mean
    output tokens. ``requests`` counts every request of the turn, failed ones included.

    Args:
        records: the run's non-warm-up records.
    """
    by_turn: dict[int, list[RequestResult]] = {}
    for r in records:
        if r.turn is not None:
            by_turn.setdefault(r.turn, []).append(r)
    out = []
    for turn in sorted(by_turn):
        rs = by_turn[turn]
        ok = [r for r in rs if r.ok]
        ttft = [r.ttft for r in ok if r.ttft is not None]
        e2e = [r.e2e for r in ok if r.e2e is not None]
        prompt = [float(r.prompt_tokens) for r in ok if r.prompt_tokens is not None]
        cached = [float(r.cached_tokens) for r in ok if r.cached_tokens is not None]
        both = [(r.cached_tokens, r.prompt_tokens) for r in ok if r.cached_tokens is not None and r.prompt_tokens]
        total_prompt = sum(p for _, p in both if p)
        out.append({
            "turn": turn,
            "requests": len(rs),
            "completed": len(ok),
            "ttft_p50_s": percentile(ttft, 50),
            "ttft_p90_s": percentile(ttft, 90),
            "ttft_mean_s": mean(ttft),
            "e2e_p50_s": percentile(e2e, 50),
            "mean_prompt_tokens": mean(prompt),
            "mean_cached_tokens": mean(cached),
            "cached_share": sum(c for c, _ in both if c is not None) / total_prompt if total_prompt else None,
            "cached_sent": len(cached),
            "mean_output_tokens": mean(float(r.output_tokens) for r in ok),
        })
    return out
