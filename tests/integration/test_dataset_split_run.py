"""End to end: a data set without replacement split across a master's 2 workers (``--processes 2``) against the
built-in simulator. Each worker walks its share of the run's one seeded order (worker i of n: positions i, i + n,
…), so no row is sent twice while fewer requests than rows were sent; each worker's rows sit at positions of one
parity of that order. Bounded: short steps, a subprocess timeout."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

import pytest

from harness.config import load_profile
from harness.prompts.source import DatasetSource
from tests.integration.test_locust_run import LOCUST, run_dir_of
from tests.procs import free_port, records

pytestmark = pytest.mark.slow

ROWS = 3000

PROFILE = """
name: split
simulator: {preset: demo, time_scale: 0.05, seed: 3}
request: {thinking: false, continuous_usage_stats: true, max_tokens: 24}
dataset: {path: rows.txt, sampling: uniform, replacement: false, seed: 5, class: rows}
warmup: {max_tokens: 4, timeout: 30}
single_stream: {duration: 1}
steps: {concurrency: [4], duration: 4, drain_timeout: 10}
timeouts: {connect: 5, first_byte: 30, first_token: 30, idle: 10, total: 60}
output: {dir: %(out)s}
"""


def test_two_workers_send_no_row_twice_before_the_data_set_is_exhausted(tmp_path: Path) -> None:
    (tmp_path / "rows.txt").write_text("".join(f"Question {i}: answer in one short sentence.\n" for i in range(ROWS)))
    prof = tmp_path / "p.yaml"
    prof.write_text(PROFILE % {"out": tmp_path / "runs"})
    rpc = str(free_port())
    cmd = [*LOCUST, "--processes", "2", "--master-bind-host", "127.0.0.1", "--master-bind-port", rpc,
           "--master-port", rpc, "--profile", str(prof), "--no-metrics"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    recs = [r for r in records(run_dir_of(tmp_path / "runs")) if r["phase"] != "warmup"]
    by_worker: dict[str, list[int]] = {}
    for r in sorted(recs, key=lambda r: r["start_wall"]):
        stem, line = r["prompt_id"].split(":")
        assert stem == "rows" and r["prompt_class"] == "rows"
        by_worker.setdefault(r["user"].rsplit(":", 1)[0], []).append(int(line) - 1)
    assert len(by_worker) == 2, by_worker.keys()
    sent = [row for rows in by_worker.values() for row in rows]
    assert 100 <= len(sent) < ROWS and all(len(rows) < ROWS // 2 for rows in by_worker.values()), len(sent)
    assert len(set(sent)) == len(sent)  # no row twice before the data set is exhausted
    # the one order every process computes; worker i's rows sit at positions ≡ i (mod 2) of it
    src = DatasetSource(load_profile(prof), "m")
    order = [src.draw_index(random.Random(0)) for _ in range(ROWS)]
    position = {row: k for k, row in enumerate(order)}
    parities = [{position[row] % 2 for row in rows} for rows in by_worker.values()]
    assert sorted(map(sorted, parities)) == [[0], [1]], parities
    # and each walked its share from the start: positions i, i + 2, … (a drawn request may be cut off at the stop)
    for rows in by_worker.values():
        pos = sorted(position[row] for row in rows)
        assert pos[-1] - pos[0] <= 2 * (len(pos) - 1) + 2 * 4 and pos[0] <= 1 + 2 * 4, pos[:5]
