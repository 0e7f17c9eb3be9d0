"""The ``llmload`` command dispatches to its subcommands under their own names."""

from __future__ import annotations

import pytest

from harness.cli import main


@pytest.mark.parametrize(("argv", "usage"), [(["report", "--help"], "usage: llmload report "),
                                             (["sim", "serve", "--help"], "usage: llmload sim serve ")])  # fmt: skip
def test_subcommand_help_names_llmload(argv: list[str], usage: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(argv)
    assert ei.value.code == 0
    assert capsys.readouterr().out.startswith(usage)
