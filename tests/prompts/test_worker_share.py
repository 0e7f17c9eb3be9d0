"""A data set without replacement across workers: one seeded order for the run, worker i of n taking positions
i, i + n, i + 2n, … of it (simulated workers: several sources in one process, each given its share)."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
from pathlib import Path

import pytest

from harness import runtime
from harness.config import load_profile
from harness.locust.setup import setup_worker_from_message
from harness.prompts.source import DatasetSource, build_source
from tests.prompts.test_source import _content, _data, _profile

ROWS = 50


def _dataset(tmp_path: Path, sampling: str = "uniform", replacement: bool = False) -> DatasetSource:
    if not (tmp_path / "seeds.jsonl").exists():
        _data(tmp_path, ROWS, weights=[float(i % 7 + 1) for i in range(ROWS)])
    prof = _profile(tmp_path, f"dataset: {{path: seeds.jsonl, replacement: {str(replacement).lower()}, "
                              f"sampling: {sampling}, seed: 11}}\n")
    src = build_source(prof, "m")
    assert isinstance(src, DatasetSource)
    return src


def _draws(src: DatasetSource, n: int) -> list[int]:
    return [src.draw_index(random.Random(0)) for _ in range(n)]


@pytest.mark.parametrize("sampling", ["uniform", "weighted"])
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_together_walk_the_one_order_without_duplicates(tmp_path: Path, sampling: str, workers: int) -> None:
    whole = _draws(_dataset(tmp_path, sampling), 3 * ROWS)  # one process: passes 0, 1, 2
    assert sorted(whole[:ROWS]) == list(range(ROWS)) and whole[ROWS:2 * ROWS] != whole[:ROWS]
    srcs = [_dataset(tmp_path, sampling) for _ in range(workers)]
    for i, s in enumerate(srcs):
        s.set_share(i, workers)
    # the workers draw at uneven paces, interleaved; none walks past its share of pass 0 yet
    got: list[list[int]] = [[] for _ in srcs]
    paces = [1, 2, 3][:workers]
    while any(len(g) < len(range(i, ROWS, workers)) for i, g in enumerate(got)):
        for i, s in enumerate(srcs):
            for _ in range(paces[i]):
                if len(got[i]) < len(range(i, ROWS, workers)):
                    got[i].append(s.draw_index(random.Random(0)))
    union = [r for g in got for r in g]
    assert len(union) == ROWS and sorted(union) == list(range(ROWS))  # no row twice before the order is exhausted
    for i, g in enumerate(got):
        assert g == whole[i:ROWS:workers]  # worker i: positions i, i + n, i + 2n, … of the one order
    # past the end of pass 0 each worker goes on in pass 1's order at its positions (the single-process semantics:
    # a new pass in a new order), so passes 0 and 1 together are again split exactly
    for i, s in enumerate(srcs):
        got[i] += _draws(s, len(range(i, 2 * ROWS, workers)) - len(got[i]))
        assert got[i] == whole[i:2 * ROWS:workers]
    assert sorted(r for g in got for r in g) == sorted(whole[: 2 * ROWS])


def test_a_resplit_goes_on_from_the_current_round(tmp_path: Path) -> None:
    whole = _draws(_dataset(tmp_path), ROWS)
    a, b = _dataset(tmp_path), _dataset(tmp_path)
    a.set_share(0, 2)
    b.set_share(1, 2)
    first = _draws(a, 5) + _draws(b, 5)  # positions 0..9
    assert sorted(first) == sorted(whole[:10])
    a.set_share(0, 3)  # a third worker joined: the same round, a new split
    b.set_share(1, 3)
    after_a, after_b = _draws(a, 4), _draws(b, 4)
    assert after_a == whole[12:24:3] and after_b == whole[10:22:3]
    assert not set(after_a + after_b) & set(first) and len(set(after_a + after_b)) == 8
    a.set_share(0, 3)  # the same share again: no change
    assert _draws(a, 1) == [whole[24]]


def test_only_a_dataset_without_replacement_is_split(tmp_path: Path) -> None:
    with_repl = _dataset(tmp_path, replacement=True)
    plain = _dataset(tmp_path, replacement=True)
    assert not with_repl.shared and _dataset(tmp_path).shared
    with_repl.set_share(1, 2)  # seeded per worker stream; the split does not apply
    assert _draws(with_repl, 20) == _draws(plain, 20)
    for src in (with_repl, _dataset(tmp_path), build_source(load_profile(_mix(tmp_path)), "m")):
        with pytest.raises(ValueError, match="slot 2 not in range"):
            src.set_share(2, 2)


def _mix(tmp_path: Path) -> Path:
    p = tmp_path / "mix.yaml"
    p.write_text("name: t\nprompts: [{id: a, text: hi}]\n")
    return p


@pytest.mark.parametrize("sampling", ["uniform", "weighted"])
def test_the_order_is_the_same_in_another_process(tmp_path: Path, sampling: str) -> None:
    """Workers are other processes: the seeded order (polars hash / shuffle) must not depend on the process."""
    here = _draws(_dataset(tmp_path, sampling), 2 * ROWS)
    code = (
        "import json, random, sys; from harness.config import load_profile; "
        "from harness.prompts.source import build_source; "
        "s = build_source(load_profile(sys.argv[1]), 'm', 'other-worker'); "
        f"print(json.dumps([s.draw_index(random.Random(5)) for _ in range({2 * ROWS})]))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.yaml")], capture_output=True, text=True,
                         timeout=60, check=True)
    assert json.loads(out.stdout) == here


def test_a_worker_takes_its_share_from_the_phase_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    whole = _draws(_dataset(tmp_path), ROWS)
    profile = load_profile(tmp_path / "p.yaml")
    master = runtime.RunContext(profile, "http://127.0.0.1:1/v1", "m", "master")
    assert master.phase_message()["workers"] == []
    msg = master.phase_message(["client-a", "client-b"])
    assert msg["workers"] == ["client-a", "client-b"]
    monkeypatch.setattr(runtime, "_RUN", runtime.Run())
    ctx = setup_worker_from_message(msg, "client-b", "client-b")
    src = ctx.prompt_source
    assert isinstance(src, DatasetSource)
    assert _draws(src, 3) == whole[1:6:2]
    assert setup_worker_from_message({**msg, "phase": "step", "step": 1}, "client-b", "client-b") is ctx
    assert _draws(src, 1) == [whole[7]]  # the same share: it goes on
    monkeypatch.setattr(runtime, "_RUN", runtime.Run())
    with caplog.at_level(logging.WARNING, logger="llmload"):
        late = setup_worker_from_message(msg, "client-c", "client-c")
    assert "not in the master's split" in caplog.text
    assert _content(late.prompt_source.sample(random.Random(0))[1]) == f"prompt {whole[0]}"  # slot 0 of 1
