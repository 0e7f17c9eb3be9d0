"""harness.locust_help: Locust's --help deferred past the import of an llmload locustfile, and only then."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import locust_help
from harness.locust_help import (
    defer_help,
    help_if_not_restored,
    imports_llmload,
    locustfiles_of,
    restore_help,
    wants_locust_help,
)

ROOT = Path(__file__).resolve().parent.parent
K26 = str(ROOT / "locustfiles" / "k26.py")


@pytest.fixture
def other_file(tmp_path: Path) -> str:
    f = tmp_path / "other.py"
    f.write_text("# uses harness.locust? no: only a comment\nfrom locust import User\n")
    return str(f)


def test_locustfiles_of_reads_every_spelling() -> None:
    assert locustfiles_of(["-f", "a.py", "--help"]) == ["a.py"]
    assert locustfiles_of(["-fa.py,b.py"]) == ["a.py", "b.py"]
    assert locustfiles_of(["--locustfile=a.py", "--locustfile", "b.py"]) == ["a.py", "b.py"]
    assert locustfiles_of(["--headless", "--host", "x"]) == []


def test_imports_llmload_needs_an_import_line(other_file: str, tmp_path: Path) -> None:
    assert imports_llmload(K26)
    assert not imports_llmload(other_file)  # a mention in a comment is not an import
    assert not imports_llmload(str(tmp_path / "missing.py"))
    assert not imports_llmload(str(ROOT / "locustfiles"))  # a directory


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["/x/.venv/bin/locust", "-f", K26, "--help"], True),
        (["/x/locust/__main__.py", "-f", K26, "-h"], True),
        (["/x/.venv/bin/locust", "-f", K26, "--headless"], False),  # no help asked
        (["/x/.venv/bin/locust", "--help"], False),  # no locustfile given: Locust's default
        (["/x/bin/pytest", "-f", K26, "--help"], False),  # not Locust
    ],
)
def test_wants_locust_help(argv: list[str], want: bool) -> None:
    assert wants_locust_help(argv) is want


def test_python_dash_m_locust_is_locust_while_its_package_imports() -> None:
    assert wants_locust_help(["-m", "-f", K26, "--help"], orig_argv=["python3", "-m", "locust", "-f", K26, "--help"])
    assert not wants_locust_help(["-m", "-f", K26, "--help"], orig_argv=["python3", "-m", "other", "--help"])


def test_wants_no_help_deferral_when_any_locustfile_is_not_llmloads(other_file: str) -> None:
    assert not wants_locust_help(["locust", "-f", f"{K26},{other_file}", "--help"])


def test_defer_then_restore_puts_the_flags_back_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["locust", "-h", "-f", K26, "--help", "--headless"]
    monkeypatch.setattr(sys, "argv", list(argv))
    monkeypatch.setattr(locust_help, "_deferred", [])
    defer_help(None)
    assert sys.argv == ["locust", "-f", K26, "--headless"]
    restore_help()
    assert sys.argv == argv
    restore_help()  # nothing left: no-op
    assert sys.argv == argv


def test_defer_leaves_other_processes_alone(monkeypatch: pytest.MonkeyPatch, other_file: str) -> None:
    monkeypatch.setattr(locust_help, "_deferred", [])
    for argv in (["pytest", "-q"], ["locust", "-f", other_file, "--help"]):
        monkeypatch.setattr(sys, "argv", list(argv))
        defer_help(None)
        assert sys.argv == argv


def test_defer_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locust_help, "_deferred", [])
    monkeypatch.setattr(sys, "argv", None)  # anything broken: gevent's patching must go on
    defer_help(None)


def test_flags_still_deferred_at_exit_are_put_back_with_locusts_help(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A locustfile that failed to import never restored the flags: at exit they go back and Locust's own help is
    printed; once restored (the normal path) the exit hook does nothing."""
    argv = ["locust", "-f", K26, "--help"]
    monkeypatch.setattr(sys, "argv", list(argv))
    monkeypatch.setattr(locust_help, "_deferred", [])
    defer_help(None)
    assert sys.argv == ["locust", "-f", K26]
    assert help_if_not_restored() is True
    out = capsys.readouterr()
    assert sys.argv == argv and "Usage: locust" in out.out and "failed to import" in out.err
    assert help_if_not_restored() is False and capsys.readouterr().out == ""
