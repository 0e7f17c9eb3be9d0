"""README.md stays a front page: at most 200 lines, its two commands are the ones CI and the test script run, its
links resolve, and it carries no test counts or timings (those live in docs/development/tests.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 200


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _bash_blocks(text: str) -> list[str]:
    """The contents of the README's ```bash fenced blocks, in order."""
    return [m.group(1).strip() for m in re.finditer(r"^```bash\n(.*?)^```$", text, re.M | re.S)]


def test_at_most_200_lines() -> None:
    n = len(_text().splitlines())
    assert n <= MAX_LINES, f"README.md has {n} lines (at most {MAX_LINES}): move the detail into docs/"


def test_the_two_commands_come_first_and_are_what_ci_and_the_test_script_run() -> None:
    install, tests = _bash_blocks(_text())[:2]
    # 1. install (the same editable install with the dev extras that scripts/test.sh makes) and the main job
    assert install == (
        "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && "
        ".venv/bin/locust -f locustfiles/k26.py --headless"
    )
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "-m venv .venv" in script and "pip install --quiet -e '.[dev]'" in script
    assert (ROOT / "locustfiles" / "k26.py").exists()
    # 2. the tests: the command CI's entry point runs
    assert tests == "bash scripts/test.sh"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^bash scripts/test\.sh\b", ci, re.M), ".ci/run no longer runs scripts/test.sh"


def test_no_test_counts_or_timings() -> None:
    text = _text()
    assert not re.search(r"\b\d[\d,]* tests\b", text), "test counts belong in docs/development/tests.md"
    assert not re.search(r"\b\d+ (?:min|minutes)\b.*\btests?\b|\btests?\b.*\b\d+ (?:min|minutes)\b", text)


def test_every_relative_link_resolves() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", _text())
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link.split("#")[0]).exists()]
    assert not missing, missing


def test_it_shows_a_screenshot_and_says_how_to_read_the_docs() -> None:
    text = _text()
    shots = re.findall(r"!\[[^\]]*\]\((docs/[^)]+\.png)\)", text)
    assert shots and all((ROOT / s).exists() for s in shots)
    assert "mkdocs serve" in text
    assert "docs/architecture.md" in text
