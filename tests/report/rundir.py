"""Synthetic run directories for the report tests: hand-written records, phases and run.json."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import polars as pl

from harness.report.columns import REPORT_COLUMNS, prepare
from harness.report.exprs import WARMUP
from harness.report.frame import read_frame
from harness.result import RequestResult

#: Epoch origin of every synthetic run; tests give times relative to it.
T0 = 1_700_000_000.0


def rec(
    user: str,
    step: int,
    start: float,
    e2e: float,
    *,
    ttft: float | None = 1.0,
    tokens: int = 100,
    ok: bool = True,
    truncated: bool = False,
    in_reasoning: bool = False,
    concurrency: int = 1,
    **extra: Any,
) -> dict[str, Any]:
    """One record as ``RequestResult.to_record()`` writes it; ``start`` is relative to :data:`T0`."""
    phase = "warmup" if step < 0 else "single" if step == 0 else "step"
    decode = e2e - ttft if ttft is not None else None
    r: dict[str, Any] = {
        "prompt_id": "p", "user": user, "phase": phase, "step": step, "concurrency": concurrency,
        "max_tokens": 4096, "start_wall": T0 + start, "connect": 0.0, "t_headers": 0.01,
        "ttft": ttft, "ttfat": (ttft + 0.5 if ttft is not None and not in_reasoning else None),
        "t_first_reasoning": ttft, "t_last_token": e2e, "e2e": e2e,
        "chunks": tokens, "reasoning_chunks": tokens // 2, "answer_chunks": tokens - tokens // 2,
        "sse_comments": 0, "gap_hist": None, "output_tokens": tokens, "token_source": "usage",
        "estimated_output_tokens": tokens, "reasoning_tokens": tokens // 2, "answer_tokens": tokens - tokens // 2,
        "reasoning_source": "usage", "prompt_tokens": 50, "reasoning_chars": 0, "answer_chars": 0,
        "ok": ok, "error_class": None if ok else "timeout_idle", "error_detail": None,
        "http_status": 200, "finish_reason": ("length" if truncated else "stop") if ok else None,
        "done_seen": ok, "truncated": truncated, "truncated_in_reasoning": in_reasoning,
        "suspect_truncation": False, "usable": ok and not truncated,
        "tpot": (decode / (tokens - 1)) if decode and tokens > 1 else None,
        "decode_rate": (tokens / decode) if decode else None,
        "reasoning_rate": None, "answer_rate": None,
    }
    r.update(extra)
    return r


def phase(phase_name: str, step: int, concurrency: int, wall: float, planned: float | None = None) -> dict[str, Any]:
    """A ``phase_start`` event at ``T0 + wall``."""
    return {"event": "phase_start", "phase": phase_name, "step": step, "concurrency": concurrency,
            "wall": T0 + wall, "planned_duration": planned}


def run_end(wall: float) -> dict[str, Any]:
    """A ``run_end`` event at ``T0 + wall``."""
    return {"event": "run_end", "wall": T0 + wall}


def write_run(
    root: Path,
    records: list[dict[str, Any]],
    phases: list[dict[str, Any]],
    meta: dict[str, Any] | None = None,
    torn_tail: str | None = None,
) -> Path:
    """Write ``run.json``, ``records.jsonl`` (optionally with a torn last line) and ``phases.jsonl``."""
    root.mkdir(parents=True, exist_ok=True)
    base = {
        "run_id": root.name, "status": "finished", "start_wall": T0, "end_wall": None,
        "profile": {"name": "synthetic"}, "target": {"base_url": "http://127.0.0.1:8000/v1", "model": "k2-test"},
    }
    base.update(meta or {})
    (root / "run.json").write_text(json.dumps(base))
    text = "".join(json.dumps(r) + "\n" for r in records)
    if torn_tail is not None:
        text += torn_tail
    (root / "records.jsonl").write_text(text)
    (root / "phases.jsonl").write_text("".join(json.dumps(p) + "\n" for p in phases))
    return root


def frame_of(records: list[dict[str, Any]] | list[RequestResult]) -> pl.DataFrame:
    """The prepared record frame (:func:`harness.report.columns.prepare`) of ``records`` (record dicts, or
    ``RequestResult`` objects written with ``to_record``), read as ``records.jsonl`` is, warm-up records dropped:
    what the figure functions take as ``main``."""
    lines = [r.to_record() if isinstance(r, RequestResult) else r for r in records]
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        frame = prepare(read_frame(d, REPORT_COLUMNS))
    return frame.filter(~pl.col(WARMUP))
