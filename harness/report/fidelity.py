"""Fidelity check: compare what the harness recorded with what the simulator really did.

The simulator's ground-truth log (``--truth-log``, :mod:`harness.sim.truth`) holds, per request, when it was
received, when every chunk was written and how many tokens it carried, the finish and the injected fault.
A harness run directory holds one record per request (``records.jsonl``; with ``output.chunk_times: true``
every token-bearing chunk's arrival time too).  This module pairs them and reports:

* **TTFT / TTFAT differences**: harness TTFT (request sent -> first token-bearing chunk read) minus true TTFT
  (request received -> that chunk written).  The difference is the harness's measurement error plus the
  loopback and scheduling delays on both sides; it can only be positive.  p50 / p99 / max in ms;
* **inter-chunk gap differences** (harness gap minus true gap, per chunk) and **chunk delays** (harness chunk
  time minus true write time), for requests with chunk times;
* **token-count mismatches** of successful requests: output tokens, reasoning tokens (when the harness read
  them from the server, not estimated), tokens per chunk (with ``continuous_usage_stats``), chunk counts;
* a **fault -> error class confusion table**: each injected fault against the error class the harness gave
  (``ok`` for a success), with the classes expected for each fault; **false successes** (a success the
  server did not deliver) and **false failures** (a failure of a clean, fault-free response);
* requests that failed before reaching the server during a simulated restart (``restart_down``).

Pairing: by request id when the records carry one (``request_id``, not a record field, so
:meth:`~harness.result.RequestResult.from_record` keeps it in ``extra``; matched to the ``x-request-id`` header
the simulator logs as ``client_request_id``), else by time: a record's ``start_wall`` (epoch when the request was
sent) against the truth's ``received_epoch``, restricted to the same prompt (hash of the profile's messages,
from ``run.json``) and ``max_tokens``, assigned greedily by the smallest offset; ties within
``AMBIGUITY_S`` are counted as ambiguous and broken by keep-alive connection continuity.

    llmload fidelity runs/20261129-120000-fid /tmp/truth.jsonl             # text report
    llmload fidelity RUN_DIR TRUTH --json --max-ttft-p99-ms 2 --strict     # exit 1 on failure

(also ``python -m harness.report.fidelity``). It sits with the other run-directory post-processor, the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.records import read_records
from harness.report.stats import percentile
from harness.result import RequestResult
from harness.sim.truth import prompt_hash, read_truth

__all__ = ["EXPECTED", "FidelityReport", "compare", "expected_classes", "main", "match", "render"]

#: Error classes (``ok`` = success) the harness should give each injected fault.  Stalls and slow headers are
#: refined with the run's timeouts by :func:`expected_classes`.
EXPECTED: dict[str, frozenset[str]] = {
    "none": frozenset({"ok"}),
    "http_429": frozenset({"http_429"}),
    "http_503": frozenset({"http_5xx"}),
    "error_event": frozenset({"server_error_event"}),
    "drop": frozenset({"stream_truncated"}),
    "abort": frozenset({"aborted"}),
    "malformed": frozenset({"malformed_chunk"}),
    "stall_first": frozenset({"ok", "timeout_first_token"}),
    "stall_chunk": frozenset({"ok", "timeout_idle"}),
    "slow_headers": frozenset({"ok", "timeout_first_byte"}),
    "restart": frozenset({"stream_truncated"}),
    "restart_down": frozenset({"connect_error", "stream_truncated"}),
}
_TIMEOUT_CLASSES = frozenset(
    {"timeout_connect", "timeout_first_byte", "timeout_first_token", "timeout_idle", "timeout_total"}
)
#: Offsets (s) of the server's receipt after the record's send time accepted when pairing by time.  The
#: receipt is the kernel's arrival time of the request, microseconds after the send on loopback; a little
#: negative slack covers the clocks being read microseconds apart.
MATCH_WINDOW_S = (-0.001, 0.25)
#: A second candidate whose offset is within this many seconds of the chosen one makes a pairing ambiguous
#: (send->receipt offsets on loopback are ~25 µs).
AMBIGUITY_S = 0.0001
#: Relative margin around a timeout within which both outcomes of a stall are accepted.
TIMEOUT_MARGIN = 0.15


@dataclass
class Pair:
    """One harness record and its truth entry (None when unmatched)."""

    record: RequestResult
    truth: dict[str, Any] | None
    ambiguous: bool = False


@dataclass
class FidelityReport:
    """Result of :func:`compare`; ``summary`` is JSON-ready (times in milliseconds)."""

    summary: dict[str, Any]
    pairs: list[Pair] = field(default_factory=list)

    def failures(self, max_ttft_p99_ms: float | None = None) -> list[str]:
        """Why the check fails (empty when it passes): token mismatches, misclassified faults, false successes,
        records neither paired nor explained, and (when given) a TTFT difference p99 above ``max_ttft_p99_ms``."""
        s = self.summary
        out = []
        if s["tokens"]["mismatches"]:
            out.append(f"{s['tokens']['mismatches']} successful requests with token counts that differ from the truth")
        if s["classification"]["misclassified"]:
            out.append(f"{s['classification']['misclassified']} requests in an unexpected error class")
        if s["classification"]["false_successes"]:
            out.append(f"{s['classification']['false_successes']} successes the server did not deliver")
        if s["matching"]["unexplained_records"]:
            out.append(f"{s['matching']['unexplained_records']} records with no server-side request")
        p99 = s["ttft_diff_ms"]["p99"]
        if max_ttft_p99_ms is not None and (p99 is None or p99 > max_ttft_p99_ms):
            out.append(f"TTFT difference p99 {_fmt(p99)} ms > {max_ttft_p99_ms:g} ms")
        return out

    @property
    def passed(self) -> bool:
        """No token mismatch, no misclassified fault, no false success, every record paired or explained."""
        return not self.failures()


def _stats_ms(values: Sequence[float]) -> dict[str, Any]:
    """n, p50, p99, max of ``abs(values)`` and the signed min/mean, in milliseconds (values in seconds)."""
    if not values:
        return {"n": 0, "p50": None, "p99": None, "max": None, "min_signed": None, "mean_signed": None}
    absv = [abs(v) * 1e3 for v in values]
    return {
        "n": len(values),
        "p50": percentile(absv, 50),
        "p99": percentile(absv, 99),
        "max": max(absv),
        "min_signed": min(values) * 1e3,
        "mean_signed": sum(values) * 1e3 / len(values),
    }


def _profile_hashes(meta: dict[str, Any]) -> dict[str, str]:
    """prompt id -> hash of the messages the harness sent for it (from run.json's profile); empty if unknown."""
    prof = meta.get("profile")
    if not isinstance(prof, dict):
        return {}
    try:
        from harness.config import Profile

        profile = Profile.model_validate(prof)
    except Exception:
        return {}
    out = {p.id: prompt_hash(p.chat_messages()) for p in profile.prompts}
    out["warmup"] = prompt_hash([{"role": "user", "content": profile.warmup.prompt}])
    return out


def _record_request_id(rec: RequestResult) -> str | None:
    """The request id a record carries (not a record field: from_record keeps it in ``extra``), or None."""
    rid = rec.extra.get("request_id")
    return str(rid) if rid else None


def match(records: Sequence[RequestResult], truths: list[dict[str, Any]],
          hashes: dict[str, str] | None = None) -> tuple[list[Pair], str]:
    """Pair records with truth entries; returns the pairs (one per record) and the method used.

    ``hashes`` maps prompt ids to message hashes (see :func:`_profile_hashes`) to restrict time pairing to the
    same prompt.
    """
    by_id = {t["client_request_id"]: t for t in truths if t.get("client_request_id")}
    if by_id and all(_record_request_id(r) for r in records):
        return [Pair(r, by_id.get(_record_request_id(r) or "")) for r in records], "request_id"
    hashes = hashes or {}
    lo, hi = MATCH_WINDOW_S
    order = sorted(range(len(truths)), key=lambda i: truths[i]["received_epoch"])
    epochs = [truths[i]["received_epoch"] for i in order]
    import bisect

    cands: list[tuple[float, int, int]] = []  # (offset, record index, truth index)
    per_record: dict[int, list[float]] = defaultdict(list)
    for ri, r in enumerate(records):
        if r.http_status is None and r.error_class in ("connect_error", "timeout_connect"):
            continue  # never reached a server
        s = r.start_wall
        h = hashes.get(r.prompt_id)
        mt = r.max_tokens
        j = bisect.bisect_left(epochs, s + lo)
        while j < len(epochs) and epochs[j] <= s + hi:
            t = truths[order[j]]
            j += 1
            if h is not None and t.get("prompt_hash") not in (None, h):
                continue
            if mt is not None and t.get("max_tokens") not in (None, mt):
                continue
            off = t["received_epoch"] - s
            cands.append((off, ri, order[j - 1]))
            per_record[ri].append(off)
    # the receipt follows the send: rank candidates by offset, a negative one (clock reading noise) by 5x its size
    def cost(off: float) -> float:
        return off if off >= 0 else -5.0 * off

    cands.sort(key=lambda c: cost(c[0]))
    rec_to: dict[int, int] = {}
    used: set[int] = set()
    ambiguous: set[int] = set()
    for off, ri, ti in cands:
        if ri in rec_to or ti in used:
            continue
        if any(o != off and abs(cost(o) - cost(off)) < AMBIGUITY_S for o in per_record[ri]):
            ambiguous.add(ri)
        rec_to[ri] = ti
        used.add(ti)
    _fix_by_connection(records, truths, rec_to, ambiguous)
    return [Pair(r, truths[rec_to[i]] if i in rec_to else None, i in ambiguous) for i, r in enumerate(records)], "time"


def _fix_by_connection(records: Sequence[RequestResult], truths: list[dict[str, Any]], rec_to: dict[int, int],
                       ambiguous: set[int]) -> None:
    """Swap ambiguous pairings whose truth connection disagrees with the user's other requests.

    Only two pairings of the same instant are swapped: each truth must lie in the other record's matching window
    (:data:`MATCH_WINDOW_S`). Without that rule, a user with two ambiguous requests (two processes starting
    requests at the same instants) had a request at one instant paired with the truth of another, seconds away.
    """
    if not ambiguous:
        return
    lo, hi = MATCH_WINDOW_S

    def fits(ri: int, ti: int) -> bool:
        return lo <= truths[ti]["received_epoch"] - records[ri].start_wall <= hi
    user_conns: dict[str, Counter[int]] = defaultdict(Counter)
    for ri, ti in rec_to.items():
        if ri not in ambiguous:
            user_conns[records[ri].user][truths[ti]["conn"]] += 1
    for ri in sorted(ambiguous):
        ti = rec_to[ri]
        u = records[ri].user
        conn = truths[ti]["conn"]
        if not user_conns[u] or user_conns[u][conn]:
            continue
        for rj in sorted(ambiguous):
            if rj == ri:
                continue
            tj = rec_to[rj]
            if not (fits(ri, tj) and fits(rj, ti)):
                continue
            uj = records[rj].user
            same_prompt = truths[tj].get("prompt_hash") == truths[ti].get("prompt_hash")
            if same_prompt and user_conns[u][truths[tj]["conn"]] and user_conns[uj][conn]:
                rec_to[ri], rec_to[rj] = tj, ti
                break


def _timeouts(meta: dict[str, Any], rec: RequestResult) -> dict[str, float]:
    prof = meta.get("profile") if isinstance(meta.get("profile"), dict) else {}
    to = dict((prof or {}).get("timeouts") or {})
    if rec.phase == "warmup":
        w = float(((prof or {}).get("warmup") or {}).get("timeout", 300.0))
        return {"first_byte": w, "first_token": w, "idle": w, "total": w}
    return {k: float(to.get(k, d)) for k, d in (("first_byte", 300.0), ("first_token", 600.0), ("idle", 120.0),
                                                    ("total", 3600.0))}


def _both_or_one(delay: float, limit: float, timeout_class: str) -> frozenset[str]:
    if delay > limit * (1 + TIMEOUT_MARGIN):
        return frozenset({timeout_class})
    if delay < limit * (1 - TIMEOUT_MARGIN):
        return frozenset({"ok"})
    return frozenset({"ok", timeout_class})


def expected_classes(truth: dict[str, Any], timeouts: dict[str, float],
                     time_scale: float) -> tuple[str, frozenset[str]]:
    """(fault label, error classes the harness may give) for one truth entry.

    The label is the injected fault type (``none`` when there was none or it did not fire).  A request killed
    by a restart is labelled ``restart`` and must fail (``stream_truncated``, or the class its own fault caused
    first).  A fault-free request the server saw the client drop (``client_disconnected``) can only have ended
    in a client-side timeout.
    """
    fault = truth.get("fault") or None
    kind = fault["type"] if fault and fault.get("fired") else "none"
    if kind in ("stall_first", "stall_chunk", "slow_headers") and fault is not None:
        delay = float(fault.get("seconds") or 0.0) * time_scale
        limit, cls = {
            "stall_first": (timeouts["first_token"], "timeout_first_token"),
            "stall_chunk": (timeouts["idle"], "timeout_idle"),
            "slow_headers": (timeouts["first_byte"], "timeout_first_byte"),
        }[kind]
        allowed = _both_or_one(delay, limit, cls)
    else:
        allowed = EXPECTED.get(kind, frozenset({"ok"}))
    if truth.get("outcome") == "killed_by_restart":
        return "restart" if kind == "none" else f"{kind}+restart", (allowed - {"ok"}) | EXPECTED["restart"]
    if truth.get("outcome") in ("client_disconnected", "server_stopped") and kind == "none":
        return "none", _TIMEOUT_CLASSES
    return kind, allowed


def _truth_chunks(truth: dict[str, Any]) -> list[tuple[float, int, str]]:
    """Token-bearing chunks the client can parse: (t, tokens, channel), malformed ones dropped."""
    return [(float(c[0]), int(c[2]), str(c[3])) for c in truth.get("chunks") or [] if c[3] in ("r", "a")]


def compare(run_dir: str | Path, truth_path: str | Path, include_warmup: bool = True) -> FidelityReport:
    """Compare the records of ``run_dir`` with the ground-truth log at ``truth_path``.

    Returns a :class:`FidelityReport`; its ``summary`` keys: ``run_dir, truth_log, time_scale, records,
    truth_requests, matching, ttft_diff_ms, ttfat_diff_ms, gap_diff_ms, chunk_delay_ms, tokens,
    classification, restarts``.
    """
    run = Path(run_dir)
    if not (run / "records.jsonl").is_file():
        raise FileNotFoundError(f"{run}: no records.jsonl (not a run directory)")
    meta_path = run / "run.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    records = read_records(run)
    if not include_warmup:
        records = [r for r in records if r.phase != "warmup"]
    server, truths, restarts = read_truth(truth_path)
    time_scale = float((server or {}).get("time_scale") or 1.0)
    pairs, method = match(records, truths, _profile_hashes(meta))
    windows = [(float(x["down_epoch"]), float(x["up_epoch"])) for x in restarts]

    ttft: list[float] = []
    ttfat: list[float] = []
    gaps: list[float] = []
    delays: list[float] = []
    tok = Counter[str]()
    tok_examples: list[dict[str, Any]] = []
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    expected_by_fault: dict[str, set[str]] = defaultdict(set)
    misclassified: list[dict[str, Any]] = []
    false_successes: list[dict[str, Any]] = []
    unexplained: list[dict[str, Any]] = []
    ambiguous = 0
    matched_truth_ids: set[int] = set()

    for p in pairs:
        r, t = p.record, p.truth
        got = "ok" if r.ok else r.error_class or "unknown"
        if t is None:
            s = r.start_wall
            in_restart = any(d - 0.05 <= s <= u + 0.05 for d, u in windows)
            if in_restart and not r.ok:
                label, allowed = "restart_down", EXPECTED["restart_down"]
            else:
                label, allowed = "unmatched", frozenset()
                unexplained.append({"start_wall": s, "prompt_id": r.prompt_id, "class": got})
            confusion[label][got] += 1
            expected_by_fault[label] |= allowed
            if got == "ok":
                false_successes.append({"start_wall": s, "reason": "success with no server-side request"})
            elif allowed and got not in allowed:
                misclassified.append({"fault": label, "got": got, "start_wall": s})
            continue
        matched_truth_ids.add(id(t))
        ambiguous += p.ambiguous
        label, allowed = expected_classes(t, _timeouts(meta, r), time_scale)
        confusion[label][got] += 1
        expected_by_fault[label] |= allowed
        if got not in allowed:
            item = {"fault": label, "got": got, "expected": sorted(allowed), "id": t.get("id"),
                    "outcome": t.get("outcome"), "detail": r.error_detail}
            if got == "ok":
                false_successes.append(item)
            else:
                misclassified.append(item)
        # timings: whatever the client saw of the stream
        tch = _truth_chunks(t)
        if r.ttft is not None and tch:
            ttft.append(r.ttft - tch[0][0])
        first_answer = next((c[0] for c in tch if c[2] == "a"), None)
        if r.ttfat is not None and first_answer is not None:
            ttfat.append(r.ttfat - first_answer)
        ct = r.chunk_times
        if ct and tch:
            n = min(len(ct), len(tch))
            delays.extend(float(ct[i]) - tch[i][0] for i in range(n))
            gaps.extend((float(ct[i]) - float(ct[i - 1])) - (tch[i][0] - tch[i - 1][0]) for i in range(1, n))
        # tokens: successful requests must match exactly
        if got != "ok":
            continue
        tok["checked"] += 1
        problems: list[str] = []
        if r.output_tokens != int(t.get("sent_tokens") or 0):
            problems.append("output")
        if r.reasoning_source in ("usage", "chunk_usage") and t.get("reasoning_tokens") is not None \
                and r.reasoning_tokens != int(t["reasoning_tokens"]):
            problems.append("reasoning")
        if r.chunks != len(tch):
            problems.append("chunk_count")
        rtk = r.chunk_tokens
        if rtk and any(rtk) and [int(x) for x in rtk] != [c[1] for c in tch]:
            problems.append("chunk_tokens")
        for prob in problems:
            tok[prob] += 1
        if problems:
            tok["mismatched_requests"] += 1
            if len(tok_examples) < 10:
                tok_examples.append({"id": t.get("id"), "problems": problems, "record_output": r.output_tokens,
                                     "true_output": t.get("sent_tokens"), "record_chunks": r.chunks,
                                     "true_chunks": len(tch)})

    n_matched = sum(1 for p in pairs if p.truth is not None)
    summary: dict[str, Any] = {
        "run_dir": str(run),
        "truth_log": str(truth_path),
        "time_scale": time_scale,
        "flavour": (server or {}).get("flavour"),
        "records": len(records),
        "truth_requests": len(truths),
        "matching": {
            "method": method,
            "matched": n_matched,
            "ambiguous": ambiguous,
            "unmatched_records": len(records) - n_matched,
            "unexplained_records": len(unexplained),
            "unexplained_examples": unexplained[:10],
            "unmatched_truth": sum(1 for t in truths if id(t) not in matched_truth_ids),
        },
        "ttft_diff_ms": _stats_ms(ttft),
        "ttfat_diff_ms": _stats_ms(ttfat),
        "gap_diff_ms": _stats_ms(gaps),
        "chunk_delay_ms": _stats_ms(delays),
        "tokens": {
            "checked": tok["checked"],
            "mismatches": tok["mismatched_requests"],
            "output": tok["output"],
            "reasoning": tok["reasoning"],
            "chunk_count": tok["chunk_count"],
            "chunk_tokens": tok["chunk_tokens"],
            "examples": tok_examples,
        },
        "classification": {
            "confusion": {k: dict(sorted(v.items())) for k, v in sorted(confusion.items())},
            "expected": {k: sorted(v) for k, v in sorted(expected_by_fault.items())},
            "misclassified": len(misclassified),
            "misclassified_examples": misclassified[:10],
            "false_successes": len(false_successes),
            "false_success_examples": false_successes[:10],
            "false_failures": sum(n for cls, n in confusion.get("none", Counter()).items() if cls != "ok"),
        },
        "restarts": [{"down_epoch": d, "up_epoch": u} for d, u in windows],
    }
    return FidelityReport(summary, pairs)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def render(rep: FidelityReport, max_ttft_p99_ms: float | None = None) -> str:
    """Plain-text rendering of a report (the verdict includes the TTFT p99 limit when given)."""
    s = rep.summary
    m = s["matching"]
    lines = [
        f"fidelity: {s['run_dir']} vs {s['truth_log']} (flavour {s['flavour']}, time scale {s['time_scale']:g})",
        f"records {s['records']}, server requests {s['truth_requests']}; paired {m['matched']} by {m['method']} "
        f"({m['ambiguous']} ambiguous), unpaired records {m['unmatched_records']} "
        f"({m['unexplained_records']} unexplained), unpaired server requests {m['unmatched_truth']}",
        "",
        "| |n|p50 ms|p99 ms|max ms|min (signed) ms|",
        "|---|---|---|---|---|---|",
    ]
    for key, label in (("ttft_diff_ms", "TTFT harness - true"), ("ttfat_diff_ms", "TTFAT harness - true"),
                       ("gap_diff_ms", "chunk gap harness - true"), ("chunk_delay_ms", "chunk time harness - true")):
        d = s[key]
        lines.append(f"|{label}|{d['n']}|{_fmt(d['p50'])}|{_fmt(d['p99'])}|{_fmt(d['max'])}|{_fmt(d['min_signed'])}|")
    t = s["tokens"]
    lines += [
        "",
        f"tokens of {t['checked']} successful requests: {t['mismatches']} mismatched (output {t['output']}, "
        f"reasoning {t['reasoning']}, chunk count {t['chunk_count']}, tokens per chunk {t['chunk_tokens']})",
        "",
        "| injected fault | harness classes (count) | expected |",
        "|---|---|---|",
    ]
    c = s["classification"]
    for fault, got in c["confusion"].items():
        cells = ", ".join(f"{k} {v}" for k, v in got.items())
        lines.append(f"|{fault}|{cells}|{', '.join(c['expected'].get(fault, [])) or '-'}|")
    lines += [
        "",
        f"misclassified {c['misclassified']}, false successes {c['false_successes']}, false failures of clean "
        f"responses {c['false_failures']}, restarts {len(s['restarts'])}",
    ]
    failures = rep.failures(max_ttft_p99_ms)
    lines += [f"- {f}" for f in failures]
    lines.append(f"RESULT: {'FAIL' if failures else 'PASS'}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``llmload fidelity RUN_DIR TRUTH_LOG [--json] [--max-ttft-p99-ms MS] [--strict]``.

    Exit code 0, or 1 with ``--strict`` when the check fails (token mismatch, misclassified fault, false
    success, unexplained record, or TTFT p99 above ``--max-ttft-p99-ms``); 2 on bad arguments or files.
    """
    ap = argparse.ArgumentParser(prog="llmload fidelity", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", help="harness run directory (records.jsonl, run.json)")
    ap.add_argument("truth_log", help="the simulator's --truth-log file")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    ap.add_argument("--no-warmup", action="store_true", help="leave warm-up records out")
    ap.add_argument("--max-ttft-p99-ms", type=float, default=None, help="fail when |TTFT diff| p99 exceeds this")
    ap.add_argument("--strict", action="store_true", help="exit 1 when the check fails")
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        rep = compare(args.run_dir, args.truth_log, include_warmup=not args.no_warmup)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"fidelity: {e}\n")
        return 2
    failures = rep.failures(args.max_ttft_p99_ms)
    rep.summary["passed"] = not failures
    rep.summary["failures"] = failures
    sys.stdout.write(json.dumps(rep.summary, indent=2) + "\n" if args.json else render(rep, args.max_ttft_p99_ms))
    return 1 if args.strict and failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
