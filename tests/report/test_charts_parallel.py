"""The report-only figures drawn in a forked child (large runs) are the very PNGs drawn in-process, and a child
that fails leaves them to this process; the timeline's TTFT dots are capped.

The fork is not used under gevent's monkey patching (which every test process has, tests/conftest.py), so the
fork cases run in a child Python without it, as ``llmload report`` runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import harness.report.charts as charts_mod
from harness.report import build_report
from harness.report.columns import load_frame_run
from tests.report.test_frame import demo_run

ROOT = Path(__file__).resolve().parents[2]

_FORK_CHECK = textwrap.dedent("""
    import sys
    from pathlib import Path
    import harness.report.charts as ch
    from harness.report import build_report
    from harness.report.columns import load_frame_run

    root = Path(sys.argv[1])
    rep, run = build_report(root), load_frame_run(root)
    assert not ch._gevent_patched()
    ch.PARALLEL_MIN_RECORDS = 10**9
    alone = ch.draw_charts(rep, run)
    pids = []
    init = ch._Forked.__init__
    def spy(self, jobs):
        init(self, jobs)
        pids.append(self._pid)
    ch._Forked.__init__ = spy
    ch.PARALLEL_MIN_RECORDS = 1
    forked = ch.draw_charts(rep, run)
    assert pids and pids[0] > 0, pids  # a child was forked
    assert forked == alone  # same names, titles, captions and PNG bytes
    assert ch.REPORT_ONLY_CHARTS & {c.name for c in forked}
    ch.pickle.dumps = lambda *a, **k: 1 / 0  # the child dies before it sends: this process draws its figures
    assert ch.draw_charts(rep, run) == alone
    print("fork-ok")
""")


def test_forked_figures_equal_the_in_process_ones_and_a_failed_child_is_redrawn(tmp_path: Path) -> None:
    root = demo_run(tmp_path / "demo")
    out = subprocess.run([sys.executable, "-c", _FORK_CHECK, str(root)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("fork-ok")


def test_no_fork_under_gevent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert charts_mod._gevent_patched()  # tests/conftest.py patched os
    root = demo_run(tmp_path / "demo")
    monkeypatch.setattr(charts_mod, "PARALLEL_MIN_RECORDS", 1)
    forked = charts_mod._Forked([("throughput", lambda: charts_mod.throughput_chart(build_report(root)))])
    assert forked.pngs == {} and forked.result() == {}
    assert len(charts_mod.draw_charts(build_report(root), load_frame_run(root))) >= 7


def test_timeline_dots_are_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = demo_run(tmp_path / "demo")
    rep, run = build_report(root), load_frame_run(root)
    main = charts_mod.main_frame(run)
    monkeypatch.setattr(charts_mod, "TIMELINE_POINTS", 100)
    fig = charts_mod.timeline_chart(rep, main)
    dots = [c for c in fig.axes[1].collections if str(c.get_label()).startswith("TTFT of a request")]
    assert len(dots) == 1
    n_ok = main.filter(main.get_column("ttft").is_not_null() & main.get_column(charts_mod._OK)).height
    every = -(-n_ok // 100)
    assert every > 1 and f"every {every}th" in str(dots[0].get_label())
    assert len(dots[0].get_offsets()) == -(-n_ok // every) <= 100
