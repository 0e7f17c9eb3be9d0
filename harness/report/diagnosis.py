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

from harness.report.stats import mean, percentile
from harness.result import RequestResult

__all__ = ["NOTE_PCT", "hidden_reasoning_notes", "low_confidence_fix", "not_usable_reason", "prompt_notes",
           "prompt_rows"]

#: A prompt's truncation or failed-check share (% of its successful requests) at or above which a note names it.
NOTE_PCT = 10.0
#: The usable checks of the profile's ``usable:`` section, by ``usable_reason``.
_CHECK_KEYS = {"min_answer_tokens": "usable.min_answer_tokens", "regex": "usable.answer_regex",
               "json": "usable.answer_json"}


def not_usable_reason(r: RequestResult) -> str | None:
    """Why ``r`` is not usable (its ``usable_reason``; for records written before that field, ``error`` or
    ``truncated`` from ``ok`` / ``truncated``, else ``unknown``), None when it is usable."""
    if r.usable:
        return None
    if r.usable_reason:
        return r.usable_reason
    return "error" if not r.ok else "truncated" if r.truncated else "unknown"


def _pct(part: int, whole: int) -> float | None:
    return 100.0 * part / whole if whole else None


def prompt_rows(records: Sequence[RequestResult]) -> list[dict[str, Any]]:
    """One row per prompt class (``prompt_class``, else ``prompt_id``) over ``records`` (non-warm-up), sorted by name.

    Keys: ``prompt`` (the class), ``prompt_ids`` (ids seen, sorted), ``requests``, ``completed``, ``errors``,
    ``usable``, ``usable_pct`` (of requests), ``usable_reasons`` (``usable_reason`` -> count over requests),
    ``truncated``, ``truncated_pct``, ``truncated_in_reasoning``, ``truncated_in_reasoning_pct`` (of completed),
    ``hidden_reasoning`` (count), ``max_tokens`` (the requests' cap when they all had the same one, else None),
    ``max_tokens_seen`` (distinct caps, sorted), ``mean_reasoning_tokens``, ``mean_answer_tokens`` (over completed),
    ``min_reasoning_tokens_truncated`` (smallest reasoning tokens of a request truncated in reasoning: its reasoning
    ran at least this long; None when none) and ``ttfat_p50_s`` (over completed requests whose answer started).
    """
    by: dict[str, list[RequestResult]] = {}
    for r in records:
        by.setdefault(r.prompt_class or r.prompt_id, []).append(r)
    rows = []
    for name in sorted(by):
        recs = by[name]
        ok = [r for r in recs if r.ok]
        reasons = Counter(x for x in (not_usable_reason(r) for r in recs) if x is not None)
        trunc = [r for r in ok if r.truncated]
        in_reasoning = [r for r in ok if r.truncated_in_reasoning]
        caps = sorted({r.max_tokens for r in recs if r.max_tokens is not None})
        usable = sum(1 for r in recs if r.usable)
        rows.append({
            "prompt": name,
            "prompt_ids": sorted({r.prompt_id for r in recs}),
            "requests": len(recs),
            "completed": len(ok),
            "errors": len(recs) - len(ok),
            "usable": usable,
            "usable_pct": _pct(usable, len(recs)),
            "usable_reasons": dict(sorted(reasons.items())),
            "truncated": len(trunc),
            "truncated_pct": _pct(len(trunc), len(ok)),
            "truncated_in_reasoning": len(in_reasoning),
            "truncated_in_reasoning_pct": _pct(len(in_reasoning), len(ok)),
            "hidden_reasoning": sum(1 for r in ok if r.hidden_reasoning),
            "max_tokens": caps[0] if len(caps) == 1 and all(r.max_tokens is not None for r in recs) else None,
            "max_tokens_seen": caps,
            "mean_reasoning_tokens": mean(float(r.reasoning_tokens) for r in ok),
            "mean_answer_tokens": mean(float(r.answer_tokens) for r in ok),
            "min_reasoning_tokens_truncated": min((r.reasoning_tokens for r in in_reasoning), default=None),
            "ttfat_p50_s": percentile([r.ttfat for r in ok if r.ttfat is not None], 50),
        })
    return rows


def _max_tokens_key(row: dict[str, Any], profile: dict[str, Any]) -> str:
    """The profile key(s) that set a prompt class's ``max_tokens``: ``prompts[i].max_tokens`` for prompts of the
    class that set their own, else ``request.max_tokens`` (the request default; a prompt's own value wins)."""
    prompts = profile.get("prompts")
    own: list[str] = []
    if isinstance(prompts, list):
        for i, p in enumerate(prompts):
            if isinstance(p, dict) and p.get("id") in row["prompt_ids"] and p.get("max_tokens") is not None:
                own.append(f"prompts[{i}].max_tokens (id {p['id']})")
    if own:
        return ", ".join(own)
    ds, syn = profile.get("dataset"), profile.get("synthetic")
    if isinstance(ds, dict):  # a data set's rows carry their own max_tokens (harness/prompts)
        return f"the rows' {ds.get('max_tokens_column', 'max_tokens')} in {ds.get('path')}, else request.max_tokens"
    if isinstance(syn, dict):
        return "synthetic.max_tokens" if syn.get("max_tokens") else "request.max_tokens (or synthetic.max_tokens)"
    return "request.max_tokens (or give the prompt its own prompts[].max_tokens)"


def _cap(row: dict[str, Any]) -> str:
    if row["max_tokens"] is not None:
        return f"max_tokens {row['max_tokens']}"
    seen = row["max_tokens_seen"]
    return f"max_tokens {'/'.join(str(c) for c in seen)}" if seen else "the server's output limit (no max_tokens)"


def prompt_notes(rows: Sequence[dict[str, Any]], profile: dict[str, Any]) -> list[str]:
    """Notes naming each prompt class whose yield suffers, the cause and the profile key that fixes it.

    Args:
        rows: :func:`prompt_rows`.
        profile: the run's profile as stored in ``run.json`` (for the ``max_tokens`` key names; may be empty).
    """
    notes = []
    for row in rows:
        name, done = row["prompt"], row["completed"]
        if not done:
            if row["requests"]:
                notes.append(f"prompt {name}: none of its {row['requests']} requests succeeded (see the errors).")
            continue
        tir, trunc = row["truncated_in_reasoning_pct"] or 0.0, row["truncated_pct"] or 0.0
        key = _max_tokens_key(row, profile)
        if tir >= NOTE_PCT:
            ran = row["min_reasoning_tokens_truncated"]
            ran_s = f"its reasoning ran ≥ {ran} tokens without reaching an answer" if ran else "no answer started"
            notes.append(f"prompt {name}: {tir:.0f} % of successful requests truncated in reasoning at {_cap(row)}; "
                         f"{ran_s}: raise {key}. A longer step does not help.")
        elif trunc >= NOTE_PCT:
            notes.append(f"prompt {name}: {trunc:.0f} % of successful requests truncated at {_cap(row)} (answers "
                         f"cut; mean reasoning {row['mean_reasoning_tokens'] or 0:.0f} tokens): raise {key}.")
        for reason, check in _CHECK_KEYS.items():
            n = row["usable_reasons"].get(reason, 0)
            if n and 100.0 * n / done >= NOTE_PCT:
                notes.append(f"prompt {name}: {100.0 * n / done:.0f} % of successful requests failed the usable "
                             f"check {check} (mean answer {row['mean_answer_tokens'] or 0:.0f} tokens): the prompt "
                             "does not produce what the check expects, or the check is too strict.")
    return notes


def hidden_reasoning_notes(steps: Sequence[dict[str, Any]]) -> list[str]:
    """One note (or none) listing the steps with hidden-reasoning requests (``hidden_reasoning`` > 0 in the row)."""
    where = [
        f"{r['label']} {r['hidden_reasoning']} of {r['completed']} ({100 * (r['hidden_reasoning_share'] or 0):.0f} %)"
        for r in steps
        if r.get("hidden_reasoning")
    ]
    if not where:
        return []
    return [
        f"HIDDEN REASONING (usage counted reasoning tokens, no reasoning text was streamed) in successful requests at "
        f"{', '.join(where)}: TTFT and TTFAT include the whole reasoning, TPOT and per-stream tok/s count the "
        "streamed answer tokens only, and the reasoning phase's own rate is unknown."
    ]


def low_confidence_fix(row: dict[str, Any]) -> str:
    """What to change for a low-confidence step row (``low_confidence`` set), as an imperative phrase.

    A window with too few usable completions because most requests were truncated is fixed by ``max_tokens``, one
    where most failed the usable checks by the prompt or the check, and one where most failed by the errors; only a
    window too short, or one short of completions for no such reason, by the phase's duration key
    (``single_stream.duration`` for the single-stream row, else ``steps.duration``).
    """
    from harness.report.figures import MIN_WINDOW_COMPLETIONS, MIN_WINDOW_E2E  # figures imports this module

    duration = "single_stream.duration" if row.get("phase") == "single" else "steps.duration"
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
