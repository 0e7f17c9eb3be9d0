"""The report's truncation note names where a data set's or synthetic prompts' max_tokens come from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.report import build_report
from tests.report.rundir import phase, run_end, write_run
from tests.report.test_yield import PROFILE, _guide


@pytest.mark.parametrize(
    ("source", "expect"),
    [
        ({"dataset": {"path": "/d/seeds.jsonl", "max_tokens_column": "mt"}}, "raise the rows' mt in /d/seeds.jsonl"),
        ({"synthetic": {"input_tokens": {"dist": "fixed", "value": 9}}}, "raise request.max_tokens (or synthetic."),
        (
            {"synthetic": {"input_tokens": {"dist": "fixed", "value": 9}, "max_tokens": {"value": 3}}},
            "raise synthetic.max_tokens.",
        ),
    ],
)
def test_truncation_note_names_the_sources_max_tokens(tmp_path: Path, source: dict[str, Any], expect: str) -> None:
    profile = {k: v for k, v in PROFILE.items() if k != "prompts"} | source
    recs = [_guide("u1", 0, 10 * i, 10) for i in range(3)]
    meta = {"profile": profile}
    rep = build_report(write_run(tmp_path / "r", recs, [phase("single", 0, 1, 0, 30), run_end(30)], meta))
    assert any(expect in n for n in rep["notes"]), rep["notes"]
