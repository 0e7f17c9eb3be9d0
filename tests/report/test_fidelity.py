"""harness.report.fidelity: pairing records with the simulator's ground truth, the differences, the fault
classification."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gevent
import pytest

from harness.client import ChatClient, Timeouts
from harness.config import Profile
from harness.records import RunDir
from harness.report.fidelity import AMBIGUITY_S, compare, expected_classes, main, match, render
from harness.result import RequestIdentity, RequestResult
from harness.sim import launch
from harness.sim.truth import prompt_hash

PROFILE = Profile.model_validate({
    "name": "fid-unit",
    "prompts": [{"id": "a", "text": "Explain the history of the printing press."},
                {"id": "b", "text": "Describe how bees communicate with each other."}],
    "timeouts": {"first_byte": 1.0, "first_token": 1.5, "idle": 1.0, "total": 60},
})
HASH = {p.id: prompt_hash(p.chat_messages()) for p in PROFILE.prompts}
T0 = 1_800_000_000.0


def rec(start: float, prompt: str = "a", ok: bool = True, cls: str | None = None, ttft: float | None = 0.010,
        tokens: int = 3, chunks: int = 3, user: str = "u1", **kw: Any) -> dict[str, Any]:
    r = {"prompt_id": prompt, "user": user, "phase": "step", "step": 1, "start_wall": T0 + start, "max_tokens": 100,
         "ttft": ttft, "ttfat": None, "e2e": 0.1, "ok": ok, "error_class": cls, "http_status": 200,
         "output_tokens": tokens, "reasoning_tokens": tokens, "reasoning_source": "usage", "chunks": chunks,
         "chunk_times": [ttft + 0.01 * i for i in range(chunks)] if ttft is not None else None}
    r.update(kw)
    return r


def truth(received: float, prompt: str = "a", ttft: float = 0.009, tokens: int = 3, fault: Any = None,
          outcome: str = "completed", conn: int = 1, **kw: Any) -> dict[str, Any]:
    t = {"type": "request", "id": f"chatcmpl-{received}", "client_request_id": None, "conn": conn, "conn_seq": 1,
         "received_epoch": T0 + received, "status": 200, "headers_at": 0.0001, "fault": fault, "outcome": outcome,
         "prompt_hash": HASH[prompt], "max_tokens": 100, "sent_tokens": tokens, "reasoning_tokens": tokens,
         "chunks": [[ttft + 0.01 * i, T0 + received + ttft + 0.01 * i, 1, "r"] for i in range(tokens)]}
    t.update(kw)
    return t


def write(tmp: Path, records: list[dict[str, Any]], truths: list[dict[str, Any]],
          restarts: list[dict[str, Any]] = ()) -> tuple[Path, Path]:  # type: ignore[assignment]
    run = tmp / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"profile": PROFILE.public_dict()}))
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    tl = tmp / "truth.jsonl"
    lines = [{"type": "server", "time_scale": 0.5, "flavour": "vllm"}, *truths, *restarts]
    tl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return run, tl


def test_clean_run_pairs_and_differences(tmp_path: Path) -> None:
    records = [rec(0.0), rec(0.5, "b", user="u2"), rec(1.0)]
    truths = [truth(0.00003), truth(0.50002, "b", conn=2), truth(1.00004)]
    rep = compare(*write(tmp_path, records, truths))
    s = rep.summary
    assert s["matching"] == {**s["matching"], "method": "time", "matched": 3, "unexplained_records": 0,
                             "unmatched_truth": 0}
    assert s["ttft_diff_ms"]["n"] == 3 and s["ttft_diff_ms"]["p50"] == pytest.approx(1.0)
    assert s["gap_diff_ms"]["n"] == 6 and s["gap_diff_ms"]["max"] == pytest.approx(0.0, abs=1e-9)
    assert s["tokens"]["checked"] == 3 and s["tokens"]["mismatches"] == 0
    assert s["classification"]["confusion"] == {"none": {"ok": 3}} and rep.passed
    assert "RESULT: PASS" in render(rep)


def test_prompt_hash_and_offsets_decide_the_pairing(tmp_path: Path) -> None:
    # two requests sent 20 µs apart with different prompts: the prompt decides; then the offset does
    records = [rec(0.0, "a", user="u1"), rec(0.00002, "b", user="u2"), rec(2.0, "a", user="u3")]
    truths = [truth(0.00005, "b", conn=2), truth(0.00004, "a", conn=1), truth(2.00001, "a", conn=3)]
    pairs, method = match([RequestResult.from_record(r) for r in records], truths, HASH)
    assert method == "time"
    assert [p.truth["conn"] for p in pairs] == [1, 2, 3]  # type: ignore[index]
    # a request id (when the harness sends and records one) wins over time
    records2 = [dict(r, request_id=f"q{i}") for i, r in enumerate(records)]
    truths2 = [dict(t, client_request_id=f"q{2 - i}") for i, t in enumerate(truths)]
    pairs2, method2 = match([RequestResult.from_record(r) for r in records2], truths2, HASH)
    assert method2 == "request_id" and [p.truth["conn"] for p in pairs2] == [3, 1, 2]  # type: ignore[index]


def test_ambiguous_pairs_follow_the_users_connection(tmp_path: Path) -> None:
    # u1 always uses connection 1, u2 connection 2; their third requests arrive within AMBIGUITY_S
    d = AMBIGUITY_S / 4
    records = [rec(0.0, user="u1"), rec(0.3, user="u2"), rec(1.0, user="u1"), rec(1.3, user="u2"),
               rec(2.0, user="u1", tokens=5, chunks=5), rec(2.0, user="u2", tokens=7, chunks=7)]
    truths = [truth(0.00002, conn=1), truth(0.30002, conn=2), truth(1.00002, conn=1), truth(1.30002, conn=2),
              truth(2.0 + d, conn=2, tokens=7), truth(2.0 + 2 * d, conn=1, tokens=5)]
    rep = compare(*write(tmp_path, records, truths))
    assert rep.summary["matching"]["ambiguous"] == 2
    assert rep.summary["tokens"]["mismatches"] == 0, rep.summary["tokens"]


def test_false_successes_token_mismatches_and_misclassification(tmp_path: Path) -> None:
    drop = {"type": "drop", "after_tokens": 2, "fired": True}
    records = [rec(0.0), rec(1.0), rec(2.0, ok=False, cls="aborted"), rec(3.0, tokens=4)]
    truths = [truth(0.00002, fault=drop, outcome="fault"),  # the server dropped it: not a success
              truth(1.00002, fault={"type": "drop", "after_tokens": 9, "fired": False}),  # never fired: a success
              truth(2.00002, fault=drop, outcome="fault"),  # dropped, but the harness said "aborted"
              truth(3.00002)]  # 3 tokens sent, 4 recorded
    rep = compare(*write(tmp_path, records, truths))
    c = rep.summary["classification"]
    assert c["false_successes"] == 1 and c["misclassified"] == 1
    assert c["confusion"]["drop"] == {"aborted": 1, "ok": 1} and c["confusion"]["none"] == {"ok": 2}
    assert rep.summary["tokens"]["output"] == 1 and not rep.passed
    assert "RESULT: FAIL" in render(rep)


def test_stalls_are_judged_against_the_runs_timeouts() -> None:
    timeouts = {"first_byte": 1.0, "first_token": 1.5, "idle": 1.0, "total": 60.0}

    def exp(kind: str, seconds: float) -> frozenset[str]:
        return expected_classes({"fault": {"type": kind, "seconds": seconds, "fired": True},
                                 "outcome": "completed"}, timeouts, 0.5)[1]

    assert exp("stall_first", 6) == {"timeout_first_token"}  # 3 s real > 1.5 s
    assert exp("stall_first", 1) == {"ok"}
    assert exp("stall_first", 3) == {"ok", "timeout_first_token"}  # 1.5 s: too close to call
    assert exp("stall_chunk", 6) == {"timeout_idle"} and exp("slow_headers", 6) == {"timeout_first_byte"}
    killed = expected_classes({"fault": None, "outcome": "killed_by_restart"}, timeouts, 0.5)
    assert killed == ("restart", frozenset({"stream_truncated"}))
    gone = expected_classes({"fault": None, "outcome": "client_disconnected"}, timeouts, 0.5)
    assert "timeout_total" in gone[1] and "ok" not in gone[1]


def test_requests_lost_in_a_restart(tmp_path: Path) -> None:
    records = [rec(0.0), rec(5.0, ok=False, cls="connect_error", http_status=None, ttft=None),
               rec(9.0, ok=False, cls="connect_error", http_status=None, ttft=None)]
    restarts = [{"type": "restart", "down_epoch": T0 + 4.9, "up_epoch": T0 + 5.2}]
    rep = compare(*write(tmp_path, records, [truth(0.00002)], restarts))
    m, c = rep.summary["matching"], rep.summary["classification"]
    assert c["confusion"]["restart_down"] == {"connect_error": 1} and c["confusion"]["unmatched"] == {
        "connect_error": 1}
    assert m["unexplained_records"] == 1 and not rep.passed


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run, tl = write(tmp_path, [rec(0.0)], [truth(0.00002)])
    assert main([str(run), str(tl), "--json", "--strict"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] and out["ttft_diff_ms"]["n"] == 1
    assert main([str(run), str(tl), "--strict", "--max-ttft-p99-ms", "0.5"]) == 1  # 1 ms > 0.5 ms
    assert "FAIL" in capsys.readouterr().out
    assert main([str(tmp_path / "nope"), str(tl)]) == 2


def test_real_requests_with_faults(tmp_path: Path) -> None:
    """Eight concurrent users of the harness's client against a faulty simulator, compared with its truth log."""
    tl = tmp_path / "truth.jsonl"
    extra = ["--truth-log", str(tl), "--fault-drop", "0.1", "--fault-abort", "0.1", "--fault-429", "0.1",
             "--fault-stall-first", "0.1", "--stall-seconds", "40"]
    rd = RunDir.create(tmp_path / "runs", "fid-unit", {"profile": PROFILE.public_dict()})
    with launch(preset="demo", time_scale=0.05, seed=5, extra_args=extra) as sim:
        def user(i: int) -> None:
            client = ChatClient(sim.url, timeouts=Timeouts(connect=2, first_byte=1.0, first_token=1.5, idle=1.0,
                                                           total=60))
            for j in range(6):
                p = PROFILE.prompts[(i + j) % 2]
                body = PROFILE.build_body(p, sim.model) | {"max_tokens": 100,
                                                           "stream_options": {"continuous_usage_stats": True}}
                res = client.stream_chat(body, RequestIdentity(p.id, user=f"u{i}"), keep_chunk_times=True)
                rd.write_record(res.to_record())
            client.close()

        gevent.joinall([gevent.spawn(user, i) for i in range(8)], timeout=60, raise_error=True)
    rd.close("finished")
    rep = compare(rd.path, tl)
    s = rep.summary
    assert s["records"] == 48 and s["matching"]["matched"] == 48, s["matching"]
    assert rep.passed, render(rep)
    assert s["tokens"]["checked"] >= 20 and s["tokens"]["mismatches"] == 0
    faults = set(s["classification"]["confusion"]) - {"none"}
    assert faults, s["classification"]
    assert s["ttft_diff_ms"]["min_signed"] >= -0.2 and s["ttft_diff_ms"]["p50"] < 2.0


def test_ambiguous_pairs_are_only_swapped_within_their_instant(tmp_path: Path) -> None:
    """Two users (two processes) start requests at the same two instants, 1.5 s apart: each swap that the
    connections ask for stays within one instant (seen on `--processes 2`: a request at one instant was paired with
    the truth of the other, and its token counts read as wrong)."""
    d = AMBIGUITY_S / 4
    # in file order as two processes append them: u1's two requests, then u2's (time pairing crosses both instants)
    records = [rec(0.0, user="u1"), rec(0.3, user="u2"),
               rec(1.0, user="u1", tokens=5, chunks=5), rec(2.5, user="u1", tokens=9, chunks=9),
               rec(2.5, user="u2", tokens=11, chunks=11), rec(1.0, user="u2", tokens=7, chunks=7)]
    truths = [truth(0.00002, conn=1), truth(0.30002, conn=2),
              truth(1.0 + d, conn=2, tokens=7), truth(1.0 + 2 * d, conn=1, tokens=5),
              truth(2.5 + d, conn=2, tokens=11), truth(2.5 + 2 * d, conn=1, tokens=9)]
    rep = compare(*write(tmp_path, records, truths))
    assert rep.summary["matching"]["ambiguous"] == 4
    assert rep.summary["tokens"]["mismatches"] == 0, rep.summary["tokens"]
    for p in rep.pairs:
        assert p.truth is not None and abs(p.truth["received_epoch"] - p.record.start_wall) < 0.01
