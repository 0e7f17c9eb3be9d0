"""Yield diagnosis: why requests were not usable, per prompt class, and what to change in the profile.

The per-prompt table (``report.json`` ``prompts``) counts every non-warm-up record of a prompt class, whatever its
step; its notes name the cause and the profile key that fixes it (``max_tokens`` when truncation is the cause, not
a longer step). :func:`low_confidence_fix` gives the same advice for a step whose window holds too few usable
completions. Units: tokens, seconds (``*_s``), percentages (``*_pct``, 0..100).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import polars as pl

from harness.report.exprs import OK, USABLE, flag, mean_tokens, not_usable_reason, pct, pctl
from harness.report.model import PromptRow, StepRow

__all__ = ["NOTE_PCT", "hidden_reasoning_notes", "low_confidence_fix", "prompt_notes", "prompt_rows"]

#: A prompt's truncation or failed-check share (% of its successful requests) at or above which a note names it.
NOTE_PCT = 10.0
#: The usable checks of the profile's ``usable:`` section, by ``usable_reason``.
_CHECK_KEYS = {"min_answer_tokens": "usable.min_answer_tokens", "regex": "usable.answer_regex",
               "json": "usable.answer_json"}


def prompt_rows(main: pl.DataFrame) -> list[dict[str, Any]]:
    """One row per prompt class (``prompt_class``, else ``prompt_id``) over ``main`` (the run's non-warm-up records
    as a prepared frame, :attr:`harness.report.columns.FrameRun.main`), sorted by name.

    Keys: ``prompt`` (the class), ``prompt_ids`` (ids seen, sorted), ``requests``, ``completed``, ``errors``,
    ``usable``, ``usable_pct`` (of requests), ``usable_reasons`` (``usable_reason`` -> count over requests,
    :func:`harness.report.exprs.not_usable_reason`), ``truncated``, ``truncated_pct``, ``truncated_in_reasoning``,
    ``truncated_in_reasoning_pct`` (of completed), ``hidden_reasoning`` (count of completed), ``max_tokens`` (the
    requests' cap when they all had the same one, else None), ``max_tokens_seen`` (distinct caps, sorted),
    ``mean_reasoning_tokens``, ``mean_answer_tokens`` (over completed), ``min_reasoning_tokens_truncated``
    (smallest reasoning tokens of a request truncated in reasoning: its reasoning ran at least this long; None when
    none) and ``ttfat_p50_s`` (over completed requests whose answer started).
    """
    if main.height == 0:
        return []
    cls = pl.col("prompt_class")
    name = pl.when(cls.is_null() | (cls == "")).then(pl.col("prompt_id")).otherwise(cls).alias("_prompt")
    ok = pl.col(OK)
    in_reasoning = ok & flag("truncated_in_reasoning")
    caps = pl.col("max_tokens")
    named = main.lazy().with_columns(name, not_usable_reason().alias("_reason"))  # lazy: only the columns read
    by_reason = named.drop_nulls("_reason").group_by("_prompt", "_reason").len().collect()
    reason_counts: dict[str, Counter[str]] = {}
    for prompt, reason, k in by_reason.iter_rows():
        reason_counts.setdefault(prompt, Counter())[reason] = int(k)
    groups = named.group_by("_prompt").agg(
        pl.col("prompt_id").unique().alias("prompt_ids"),
        pl.len().alias("requests"),
        ok.sum().alias("completed"),
        pl.col(USABLE).sum().alias("usable"),
        (ok & flag("truncated")).sum().alias("truncated"),
        in_reasoning.sum().alias("truncated_in_reasoning"),
        (ok & flag("hidden_reasoning")).sum().alias("hidden_reasoning"),
        caps.drop_nulls().unique().alias("max_tokens_seen"),
        caps.null_count().alias("_no_cap"),
        mean_tokens("reasoning_tokens", ok).alias("mean_reasoning_tokens"),
        mean_tokens("answer_tokens", ok).alias("mean_answer_tokens"),
        pl.col("reasoning_tokens").fill_null(0).filter(in_reasoning).min().alias("min_reasoning_tokens_truncated"),
        pctl(pl.col("ttfat").filter(ok), 50).alias("ttfat_p50_s"),
    ).collect()
    rows = []
    for g in sorted(groups.iter_rows(named=True), key=lambda g: g["_prompt"]):
        n, done, usable = int(g["requests"]), int(g["completed"]), int(g["usable"])
        trunc, tir = int(g["truncated"]), int(g["truncated_in_reasoning"])
        seen = sorted(int(c) for c in g["max_tokens_seen"])
        reasons = reason_counts.get(g["_prompt"], Counter())
        low = g["min_reasoning_tokens_truncated"]
        rows.append({
            "prompt": g["_prompt"],
            "prompt_ids": sorted(g["prompt_ids"]),
            "requests": n,
            "completed": done,
            "errors": n - done,
            "usable": usable,
            "usable_pct": pct(usable, n),
            "usable_reasons": dict(sorted(reasons.items())),
            "truncated": trunc,
            "truncated_pct": pct(trunc, done),
            "truncated_in_reasoning": tir,
            "truncated_in_reasoning_pct": pct(tir, done),
            "hidden_reasoning": int(g["hidden_reasoning"]),
            "max_tokens": seen[0] if len(seen) == 1 and not g["_no_cap"] else None,
            "max_tokens_seen": seen,
            "mean_reasoning_tokens": g["mean_reasoning_tokens"],
            "mean_answer_tokens": g["mean_answer_tokens"],
            "min_reasoning_tokens_truncated": int(low) if low is not None else None,
            "ttfat_p50_s": g["ttfat_p50_s"],
        })
    return rows


def _max_tokens_key(row: PromptRow, profile: dict[str, Any]) -> str:
    """The profile key(s) that set a prompt class's ``max_tokens``: ``prompts[i].max_tokens`` for prompts of the
    class that set their own, else ``request.max_tokens`` (the request default; a prompt's own value wins)."""
    prompts = profile.get("prompts")
    own: list[str] = []
    if isinstance(prompts, list):
        for i, p in enumerate(prompts):
            if isinstance(p, dict) and p.get("id") in row.prompt_ids and p.get("max_tokens") is not None:
                own.append(f"prompts[{i}].max_tokens (id {p['id']})")
    if own:
        return ", ".join(own)
    ds, syn = profile.get("dataset"), profile.get("synthetic")
    if isinstance(ds, dict):  # a data set's rows carry their own max_tokens (harness/prompts)
        return f"the rows' {ds.get('max_tokens_column', 'max_tokens')} in {ds.get('path')}, else request.max_tokens"
    if isinstance(syn, dict):
        return "synthetic.max_tokens" if syn.get("max_tokens") else "request.max_tokens (or synthetic.max_tokens)"
    return "request.max_tokens (or give the prompt its own prompts[].max_tokens)"


def _cap(row: PromptRow) -> str:
    if row.max_tokens is not None:
        return f"max_tokens {row.max_tokens}"
    seen = row.max_tokens_seen
    return f"max_tokens {'/'.join(str(c) for c in seen)}" if seen else "the server's output limit (no max_tokens)"


def prompt_notes(rows: Sequence[PromptRow], profile: dict[str, Any]) -> list[str]:
    """Notes naming each prompt class whose yield suffers, the cause and the profile key that fixes it.

    Args:
        rows: the report's ``prompts`` (:func:`prompt_rows`, typed).
        profile: the run's profile as stored in ``run.json`` (for the ``max_tokens`` key names; may be empty).
    """
    notes = []
    for row in rows:
        name, done = row.prompt, row.completed
        if not done:
            if row.requests:
                notes.append(f"prompt {name}: none of its {row.requests} requests succeeded (see the errors).")
            continue
        tir, trunc = row.truncated_in_reasoning_pct or 0.0, row.truncated_pct or 0.0
        key = _max_tokens_key(row, profile)
        if tir >= NOTE_PCT:
            ran = row.min_reasoning_tokens_truncated
            ran_s = f"its reasoning ran ≥ {ran} tokens without reaching an answer" if ran else "no answer started"
            notes.append(f"prompt {name}: {tir:.0f} % of successful requests truncated in reasoning at {_cap(row)}; "
                         f"{ran_s}: raise {key}. A longer step does not help.")
        elif trunc >= NOTE_PCT:
            notes.append(f"prompt {name}: {trunc:.0f} % of successful requests truncated at {_cap(row)} (answers "
                         f"cut; mean reasoning {row.mean_reasoning_tokens or 0:.0f} tokens): raise {key}.")
        for reason, check in _CHECK_KEYS.items():
            n = row.usable_reasons.get(reason, 0)
            if n and 100.0 * n / done >= NOTE_PCT:
                notes.append(f"prompt {name}: {100.0 * n / done:.0f} % of successful requests failed the usable "
                             f"check {check} (mean answer {row.mean_answer_tokens or 0:.0f} tokens): the prompt "
                             "does not produce what the check expects, or the check is too strict.")
    return notes


def hidden_reasoning_notes(steps: Sequence[StepRow], glyph: str) -> list[str]:
    """One note (or none) listing the steps with hidden-reasoning requests (``hidden_reasoning`` > 0 in the row),
    led by ``glyph``, the mark their labels carry (:attr:`harness.report.catalogue.Flag.HIDDEN_REASONING`'s; passed
    in because the catalogue imports this module)."""
    where = [
        f"{r.label} {r.hidden_reasoning} of {r.completed} ({100 * (r.hidden_reasoning_share or 0):.0f} %)"
        for r in steps
        if r.hidden_reasoning
    ]
    if not where:
        return []
    return [
        f"{glyph} HIDDEN REASONING (usage counted reasoning tokens, no reasoning text was "
        "streamed) in successful requests at "
        f"{', '.join(where)}: TTFT and TTFAT include the whole reasoning, TPOT and per-stream tok/s count the "
        "streamed answer tokens only, and the reasoning phase's own rate is unknown."
    ]


def low_confidence_fix(row: dict[str, Any]) -> str:
    """What to change for a low-confidence step row (``low_confidence`` set), as an imperative phrase.

    A window with too few usable completions because most requests were truncated is fixed by ``max_tokens``, one
    where most failed the usable checks by the prompt or the check, and one where most failed by the errors; only a
    window too short, or one short of completions for no such reason, by what sets the step's length: its
    ``hours_interval.duration_key`` (:func:`harness.report.figures.interval_info`; a fixed run's run time), else
    ``single_stream.duration`` for the single-stream row, ``steps.duration`` for the others.
    """
    from harness.report.figures import MIN_WINDOW_COMPLETIONS, MIN_WINDOW_E2E  # figures imports this module

    duration = ((row.get("hours_interval") or {}).get("duration_key")
                or ("single_stream.duration" if row.get("phase") == "single" else "steps.duration"))
    e2e = row.get("e2e_p50_s")
    fixes = []
    if e2e and (row.get("window_s") or 0.0) < MIN_WINDOW_E2E * e2e:
        fixes.append(f"lengthen {duration}")
    if (row.get("window_usable_completions") or 0) < MIN_WINDOW_COMPLETIONS:
        requests, done = row.get("requests") or 0, row.get("completed") or 0
        trunc = row.get("truncated_pct") or 0.0
        checks = sum(v for k, v in (row.get("usable_reasons") or {}).items() if k in _CHECK_KEYS)
        if done and trunc >= 50.0:
            tir = row.get("truncated_in_reasoning_pct") or 0.0
            fix = (f"raise max_tokens: {trunc:.0f} % of successful requests were truncated ({tir:.0f} % in "
                   "reasoning; see the per-prompt notes)")
            if trunc < 100.0 and f"lengthen {duration}" not in fixes:
                fix += f", or lengthen {duration}"
            elif trunc >= 100.0:
                fix += ": a longer step does not help"
            fixes.append(fix)
        elif done and 100.0 * checks / done >= 50.0:
            fixes.append("most successful requests failed the usable checks (usable.*): see the per-prompt notes")
        elif requests and (row.get("error_rate") or 0.0) >= 0.5:
            fixes.append("most requests failed: see the errors")
        elif f"lengthen {duration}" not in fixes:
            fixes.append(f"lengthen {duration}")
    return "; ".join(fixes) or f"lengthen {duration}"
