"""Per-turn figures of a multi-turn run: TTFT, prompt tokens and prefix-cache hits by turn index.

A conversation's turn ``k`` carries the whole conversation so far, so its prompt grows with ``k`` and, on a server
with prefix caching, most of it is served from the cache (``cached_tokens``). :func:`turn_rows` groups every
non-warm-up request with a ``turn`` (records of :mod:`harness.conversation` users) by its turn index, over all
steps together, as one polars ``group_by`` over the record frame (:mod:`harness.report.frame`).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from harness.report.exprs import OK, mean_tokens, pctl

__all__ = ["TURN_ROW_KEYS", "turn_rows"]

#: Keys of one :func:`turn_rows` row (``*_s`` seconds, ``*_tokens`` tokens, ``cached_share`` 0..1).
TURN_ROW_KEYS = (
    "turn", "requests", "completed", "ttft_p50_s", "ttft_p90_s", "ttft_mean_s", "e2e_p50_s", "mean_prompt_tokens",
    "mean_cached_tokens", "cached_share", "cached_sent", "mean_output_tokens",
)


def turn_rows(main: pl.DataFrame) -> list[dict[str, Any]]:
    """One row per turn index (0-based, ascending) over every request with a ``turn``; ``[]`` when none has one.

    Figures are over the turn's successful requests: TTFT p50 / p90 / mean and E2E p50 (seconds), mean prompt
    tokens (``usage.prompt_tokens``, over those that sent it), mean cached tokens (over those whose usage sent
    ``prompt_tokens_details.cached_tokens``; None when no server reply had it), ``cached_share`` = Σ cached ÷ Σ
    prompt tokens over the requests that sent both (prompt tokens > 0), ``cached_sent`` how many sent
    ``cached_tokens``, and mean output tokens. ``requests`` counts every request of the turn, failed ones included.

    Args:
        main: the run's non-warm-up records, prepared (:func:`harness.report.columns.prepare`; columns ``turn``,
            ``ttft``, ``e2e``, ``prompt_tokens``, ``cached_tokens``, ``output_tokens``).
    """
    with_turn = main.filter(pl.col("turn").is_not_null())
    if with_turn.height == 0:
        return []
    ok = pl.col(OK)
    prompt, cached = pl.col("prompt_tokens"), pl.col("cached_tokens")
    both = ok & cached.is_not_null() & prompt.is_not_null() & (prompt > 0)
    ok_only = with_turn.with_columns(
        *(pl.when(ok).then(pl.col(c)).otherwise(None).alias(c) for c in ("ttft", "e2e", "prompt_tokens",
                                                                         "cached_tokens")),
    )
    agg = ok_only.group_by("turn").agg(
        pl.len().alias("requests"),
        ok.sum().alias("completed"),
        pctl("ttft", 50).alias("ttft_p50_s"),
        pctl("ttft", 90).alias("ttft_p90_s"),
        pl.col("ttft").drop_nulls().mean().alias("ttft_mean_s"),
        pctl("e2e", 50).alias("e2e_p50_s"),
        pl.col("prompt_tokens").drop_nulls().cast(pl.Float64).mean().alias("mean_prompt_tokens"),
        pl.col("cached_tokens").drop_nulls().cast(pl.Float64).mean().alias("mean_cached_tokens"),
        pl.col("cached_tokens").filter(both).sum().alias("_cached"),
        pl.col("prompt_tokens").filter(both).sum().alias("_prompt"),
        pl.col("cached_tokens").is_not_null().sum().alias("cached_sent"),
        mean_tokens("output_tokens", ok).alias("mean_output_tokens"),
    ).sort("turn")
    out = []
    for r in agg.iter_rows(named=True):
        cached_sum, prompt_sum = r.pop("_cached"), r.pop("_prompt")
        out.append({
            **{k: r[k] for k in TURN_ROW_KEYS if k not in ("cached_share",)},
            "turn": int(r["turn"]),
            "requests": int(r["requests"]),
            "completed": int(r["completed"]),
            "cached_sent": int(r["cached_sent"]),
            "cached_share": cached_sum / prompt_sum if prompt_sum else None,
        })
    return [{k: row[k] for k in TURN_ROW_KEYS} for row in out]
