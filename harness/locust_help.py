"""Let ``locust -f locustfiles/k26.py --help`` list llmload's options.

Locust answers ``--help`` before it imports the locustfile (``parse_locustfile_option()`` in
``locust/argument_parser.py``), so the options a locustfile adds through ``init_command_line_parser`` never appear
in it. This module defers the help past that import:

1. :func:`defer_help` is a gevent plugin (entry point ``gevent.plugins.monkey.did_patch_all`` in
   ``pyproject.toml``): gevent calls it when Locust monkey-patches, at ``import locust``, before Locust's ``main()``
   parses anything. When the process is the ``locust`` command asking for help (``-h`` / ``--help``) and every
   ``-f`` / ``--locustfile`` is a Python file that imports ``harness.locust`` (:func:`imports_llmload`), it takes
   the help flags out of ``sys.argv`` and keeps them here.
2. :mod:`harness.locust.options`, imported with the locustfile, calls :func:`restore_help`, which puts them back.
   Locust's second parse, with every option registered, then prints the whole help (llmload's options in their own
   group, "llmload") and exits 0.

3. When the locustfile fails to import before it imports :mod:`harness.locust` (or that import fails), nothing
   puts the flags back and Locust never parses again. :func:`defer_help` therefore also registers
   :func:`help_if_not_restored` to run at exit: with flags still deferred it puts them back and prints Locust's own
   help (without llmload's options, after the import's traceback, with a one-line note); the exit code stays the
   failed import's.

In any other process (pytest, the simulator, a locustfile without llmload, a locustfile given as a directory, a
URL or ``-``) :func:`defer_help` changes nothing. It imports only the standard library (it runs while ``locust`` is
half imported), and never raises: a failure leaves Locust's own help as it was.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "HELP_FLAGS", "defer_help", "help_if_not_restored", "imports_llmload", "locustfiles_of", "restore_help",
    "wants_locust_help",
]

#: The flags that ask Locust for its help.
HELP_FLAGS = ("-h", "--help")
#: A line importing llmload's Locust wiring.
_IMPORT = re.compile(r"^\s*(?:import harness\.locust\b|from harness\.locust\b|from harness import locust\b)", re.M)

#: (position in ``sys.argv``, flag) of the help flags taken out by :func:`defer_help`, until :func:`restore_help`.
_deferred: list[tuple[int, str]] = []


def locustfiles_of(argv: Sequence[str]) -> list[str]:
    """The locustfile paths given in ``argv`` (``-f X``, ``-fX``, ``--locustfile X``, ``--locustfile=X``; each
    value may be a comma-separated list), in order; empty when none is given."""
    out: list[str] = []
    args = list(argv)
    for i, a in enumerate(args):
        value = None
        if a in ("-f", "--locustfile") and i + 1 < len(args):
            value = args[i + 1]
        elif a.startswith("--locustfile="):
            value = a.split("=", 1)[1]
        elif a.startswith("-f") and len(a) > 2 and not a.startswith("--"):
            value = a[2:]
        if value is not None:
            out += [v.strip() for v in value.split(",") if v.strip()]
    return out


def imports_llmload(path: str) -> bool:
    """Whether ``path`` is a readable ``.py`` file with a line importing ``harness.locust``."""
    p = Path(path)
    if p.suffix != ".py":
        return False
    try:
        return bool(_IMPORT.search(p.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return False


def _is_locust(argv: Sequence[str], orig_argv: Sequence[str]) -> bool:
    """Whether the process is the ``locust`` console script or ``python -m locust`` (while ``python -m`` imports
    the package, ``sys.argv[0]`` is ``"-m"``; ``sys.orig_argv`` names the module)."""
    if os.path.basename(argv[0]) == "locust" or argv[0].replace("\\", "/").endswith("locust/__main__.py"):
        return True
    if argv[0] == "-m":
        orig = list(orig_argv)
        return "-m" in orig and orig.index("-m") + 1 < len(orig) and orig[orig.index("-m") + 1] == "locust"
    return False


def wants_locust_help(argv: Sequence[str], orig_argv: Sequence[str] | None = None) -> bool:
    """Whether ``argv`` (``sys.argv``; ``orig_argv`` defaults to ``sys.orig_argv``) is the ``locust`` command (or
    ``python -m locust``) asking for help with only llmload locustfiles (at least one, each importing
    ``harness.locust``)."""
    if not argv:
        return False
    is_locust = _is_locust(argv, getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv)
    if not is_locust or not any(a in HELP_FLAGS for a in argv[1:]):
        return False
    files = locustfiles_of(argv[1:])
    return bool(files) and all(imports_llmload(f) for f in files)


def defer_help(event: Any = None) -> None:
    """gevent ``did_patch_all`` plugin: take the help flags out of ``sys.argv`` when :func:`wants_locust_help`
    (see the module docstring); otherwise do nothing. Never raises."""
    try:
        if _deferred or not wants_locust_help(sys.argv):
            return
        for i in range(len(sys.argv) - 1, 0, -1):
            if sys.argv[i] in HELP_FLAGS:
                _deferred.insert(0, (i, sys.argv.pop(i)))
        if _deferred:
            atexit.register(help_if_not_restored)
    except Exception:  # a plugin must not break gevent's patching; Locust's help stays as it was
        return


def restore_help() -> None:
    """Put the help flags :func:`defer_help` took back into ``sys.argv``, where they were (no-op when none)."""
    while _deferred:
        i, flag = _deferred.pop(0)
        sys.argv.insert(min(i, len(sys.argv)), flag)


def help_if_not_restored() -> bool:
    """At exit: when the help flags are still deferred (the locustfile failed to import before it imported
    :mod:`harness.locust`, so :func:`restore_help` never ran and Locust never printed a help), put them back in
    ``sys.argv`` and print Locust's own help to stdout, after a note on stderr. Returns whether it printed; never
    raises (a failure prints nothing more)."""
    if not _deferred:
        return False
    restore_help()
    try:
        from locust.argument_parser import get_parser

        sys.stderr.write("llmload: the locustfile failed to import (see above), so --help lists Locust's own "
                         "options only, not llmload's\n")
        get_parser().print_help()
        sys.stdout.flush()
    except Exception:  # at exit, with Locust half set up: print nothing more
        return False
    return True

