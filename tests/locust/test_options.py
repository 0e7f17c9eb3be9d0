"""harness.locust.options: llmload's options on Locust's parser and the checks of the --metrics-* values."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest

from harness.exporter import DEFAULT_ADDR, DEFAULT_PORT
from harness.locust.options import GROUP, MetricsOptions, add_option, group_of, metrics_options

ROOT = Path(__file__).resolve().parents[2]


def opts(**kw: Any) -> Namespace:
    """Locust's parsed options as far as llmload reads them (metrics_linger absent unless given)."""
    return Namespace(**{"no_metrics": False, "metrics_port": None, "metrics_addr": None, **kw})


def test_metrics_options_defaults_and_explicit_values() -> None:
    assert metrics_options(opts(no_metrics=True)) is None
    assert metrics_options(opts()) == MetricsOptions(DEFAULT_ADDR, DEFAULT_PORT, explicit=False, linger=0.0)
    assert metrics_options(opts(metrics_port=0, metrics_linger=30.0)) == MetricsOptions(
        DEFAULT_ADDR, 0, explicit=True, linger=30.0
    )
    assert metrics_options(opts(metrics_addr="0.0.0.0")) == MetricsOptions("0.0.0.0", DEFAULT_PORT, True, 0.0)
    assert DEFAULT_PORT == 9646 and DEFAULT_ADDR == "127.0.0.1"


def test_bad_metrics_options_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (70000, -1):  # not a TCP port: one line, exit 2 (was an OverflowError traceback)
        with pytest.raises(SystemExit) as ei:
            metrics_options(opts(metrics_port=bad))
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert err == f"llmload: --metrics-port {bad}: not a TCP port (0-65535; 0 picks a free one)\n"
    for linger in (-5.0, float("nan")):  # a negative linger was silently accepted
        with pytest.raises(SystemExit) as ei:
            metrics_options(opts(metrics_linger=linger))
        assert ei.value.code == 2
        assert "--metrics-linger" in capsys.readouterr().err


def test_locust_parses_the_options() -> None:
    """The options are Locust options: Locust parses and checks them."""
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(ROOT / "locustfiles" / "k26.py"), "--headless",
         "--metrics-port", "x"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 2 and "argument --metrics-port: invalid int value: 'x'" in proc.stderr


def _help_group(text: str, title: str) -> str:
    """The section of an argparse help text under ``title:`` up to the next unindented line."""
    lines = text.splitlines()
    start = lines.index(f"{title}:")
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    return "\n".join(lines[start + 1 : end])


@pytest.mark.parametrize("runner", ["module", "script"])
def test_help_lists_every_llmload_option_in_its_own_group(runner: str) -> None:
    """``locust -f locustfiles/k26.py --help`` (the console script and ``python -m locust``) exits 0 and lists every
    option llmload adds to Locust's parser (from the parser itself, not a list kept here), with its help text, in
    the group "llmload" and nowhere else."""
    from harness.docs_ref import llmload_locust_actions
    from harness.locust.options import GROUP

    script = Path(sys.executable).parent / "locust"
    if runner == "script" and not script.exists():
        pytest.skip("no locust console script next to this interpreter")
    cmd = [sys.executable, "-m", "locust"] if runner == "module" else [str(script)]
    proc = subprocess.run(
        [*cmd, "-f", str(ROOT / "locustfiles" / "k26.py"), "--help"],
        capture_output=True, text=True, timeout=60, cwd=ROOT, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    group = _help_group(proc.stdout, GROUP)
    actions = llmload_locust_actions()
    assert len(actions) >= 10
    outside = proc.stdout.replace(group, "")
    for a in actions:
        name = a.option_strings[0]
        assert re.search(rf"^  {re.escape(name)}\b", group, re.M), f"{name} not in the {GROUP} group"
        assert a.help and " ".join(a.help.split()[:4]) in " ".join(group.split()), f"{name}: help text missing"
        assert not re.search(rf"^  {re.escape(name)}\b", outside, re.M), f"{name} listed outside the group too"
    for own in ("--host", "--headless", "--profile"):  # Locust's own options stay in Locust's groups
        assert not re.search(rf"^  (?:-\w <?\w*>?, )?{own}\b", group, re.M)


def test_the_group_keeps_locusts_web_ui_attributes() -> None:
    from harness.docs_ref import llmload_locust_actions

    by_name = {a.option_strings[0]: a for a in llmload_locust_actions()}
    assert by_name["--steps"].include_in_web_ui is True  # type: ignore[attr-defined]
    assert by_name["--metrics-port"].include_in_web_ui is False  # type: ignore[attr-defined]


def test_help_of_a_locustfile_without_llmload_is_locusts_own(tmp_path: Path) -> None:
    """The deferral (harness.locust_help) leaves other locustfiles alone: Locust's help, exit 0, no run."""
    plain = tmp_path / "plain.py"
    plain.write_text("from locust import User, task\n\n\nclass U(User):\n    @task\n    def t(self) -> None:\n"
                     "        pass\n")  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(plain), "--help"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0 and "Usage: locust [options]" in proc.stdout
    assert "\nllmload:\n" not in proc.stdout and "--metrics-port" not in proc.stdout


def test_help_of_an_llmload_locustfile_that_fails_to_import_is_still_locusts_help(tmp_path: Path) -> None:
    """The help flags deferred for an llmload locustfile come back when it fails to import before harness.locust
    is wired (harness.locust_help.help_if_not_restored at exit): the traceback, a note, then Locust's own help
    (the exit code stays the failed import's); without the fix there was a traceback and no help at all."""
    broken = tmp_path / "broken.py"
    broken.write_text("import harness.no_such_module_here\nimport harness.locust\n")
    proc = subprocess.run(
        [sys.executable, "-m", "locust", "-f", str(broken), "--help"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1 and "No module named 'harness.no_such_module_here'" in proc.stderr
    assert "failed to import" in proc.stderr and "Usage: locust [options]" in proc.stdout
    assert "--headless" in proc.stdout and "\nllmload:\n" not in proc.stdout


def test_add_option_puts_options_in_one_llmload_group_with_locusts_web_ui_attributes() -> None:
    """:func:`add_option` adds through argparse's public group API (no private lists), one group per parser,
    with the attributes Locust's web UI reads."""
    parser = argparse.ArgumentParser(prog="p")
    x = add_option(parser, "--x-opt", include_in_web_ui=False, help="the x option")
    y = add_option(parser, "--y-opt", help="the y option")
    assert group_of(parser) is group_of(parser)
    web = [getattr(a, "include_in_web_ui", None) for a in (x, y)]
    assert web == [False, True] and getattr(y, "is_secret", None) is False
    group = _help_group(parser.format_help(), GROUP)
    assert "--x-opt" in group and "the y option" in group
    assert parser.format_help().count(f"\n{GROUP}:\n") == 1


def test_processes_zero_is_an_error_and_processes_with_worker_says_it_waits_for_a_master(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Locust's own parser with llmload's options: ``--processes 0`` (flag or LOCUST_PROCESSES) exits 2 naming the
    option and the valid values (Locust alone ran one process silently); ``--processes 2 --worker`` says at once
    that its workers wait for a master, and where; plain ``--processes 2`` and no option say nothing."""
    from locust.argument_parser import get_parser

    import harness.locust  # noqa: F401  (registers the init_command_line_parser listener)

    for argv, env in ((["--processes", "0"], None), ([], "0")):
        if env is not None:
            monkeypatch.setenv("LOCUST_PROCESSES", env)
        with pytest.raises(SystemExit) as ei:
            get_parser().parse_args(argv)
        monkeypatch.delenv("LOCUST_PROCESSES", raising=False)
        assert ei.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("llmload: --processes 0: forks no worker process.") and "-1" in err, err
    parsed = get_parser().parse_args(["--processes", "2", "--worker", "--master-host", "10.0.0.5"])
    assert parsed.processes == 2 and parsed.worker
    err = capsys.readouterr().err
    assert "--processes 2 --worker: forking 2 worker process(es) that wait for a master at 10.0.0.5:5557" in err
    for argv in (["--processes", "2"], [], ["--worker"]):
        get_parser().parse_args(argv)
        assert capsys.readouterr().err == ""
