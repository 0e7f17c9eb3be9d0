"""benchmarks/scaling.py: the command lines of each mode, the process-tree CPU reader, the step-window detector."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks import load_benchmark

sc = load_benchmark("scaling", "scaling_bench")


def test_commands_of_each_mode(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    (p1,) = sc.locust_commands("p1", prof, "http://127.0.0.1:9", None)
    assert "--processes" not in p1 and "--master" not in p1 and p1[:1] == [sys.executable]
    (p2,) = sc.locust_commands("p2", prof, "http://127.0.0.1:9", "1")
    assert p2[:3] == ["taskset", "-c", "1"]
    assert p2[p2.index("--processes") + 1] == "2"
    assert p2[p2.index("--master-port") + 1] == p2[p2.index("--master-bind-port") + 1]
    master, w1, w2 = sc.locust_commands("mw2", prof, "http://127.0.0.1:9", None)
    assert "--master" in master and master[master.index("--expect-workers") + 1] == "2"
    assert w1 == w2 and "--worker" in w1
    assert w1[w1.index("--master-port") + 1] == master[master.index("--master-bind-port") + 1]
    with pytest.raises(ValueError, match="unknown mode 'p3'"):
        sc.locust_commands("p3", prof, "http://127.0.0.1:9", None)


def test_tree_cpu_counts_a_busy_child() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.3: pass\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        cpu = sc.tree_cpu(os.getpid())
        while cpu.get(child.pid, 0.0) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
            cpu = sc.tree_cpu(os.getpid())
        assert os.getpid() in cpu and cpu[child.pid] >= 0.25
    finally:
        child.kill()
        child.wait()
    assert sc.tree_cpu(child.pid) == {}  # gone: left out, no error


def test_step_window_reads_phases(tmp_path: Path) -> None:
    assert sc._step_window(tmp_path / "none") == (False, False)
    run = tmp_path / "r1"
    run.mkdir()
    (run / "phases.jsonl").write_text('{"event":"phase_start","phase":"warmup"}\n')
    assert sc._step_window(tmp_path) == (False, False)
    with (run / "phases.jsonl").open("a") as f:
        f.write('{"event": "phase_start", "phase": "step"}\n')
    assert sc._step_window(tmp_path) == (True, False)
    with (run / "phases.jsonl").open("a") as f:
        f.write('{"event":"load_end"}\n')
    assert sc._step_window(tmp_path) == (True, True)
