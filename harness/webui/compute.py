"""Run the report engine over a run directory in a child process: ``python -m harness.webui.compute RUN_DIR``.

Prints ``harness.report.build.build_report(RUN_DIR)`` as one JSON object on stdout (exit 0), or the error on
stderr (exit 1). The LLM view runs it in a child process so the report's CPU-bound pass never holds the load
generator's gevent loop (or its GIL): the requests being measured keep their timing while the view refreshes.
"""

from __future__ import annotations

import json
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Entry point; ``argv`` = ``[RUN_DIR]`` (default ``sys.argv[1:]``). Returns the exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m harness.webui.compute RUN_DIR\n")
        return 2
    from harness.report.build import build_report

    try:
        rep = build_report(args[0])
    except Exception as e:  # reported to the view, which shows it
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
    sys.stdout.write(json.dumps(rep, allow_nan=False))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
