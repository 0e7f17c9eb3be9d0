"""Run the report engine over run directories in a child process: ``python -m harness.webui.compute``.

It reads one run directory path per line on stdin and answers each with one line on stdout: ``{"report":
harness.report.build.build_report(path)}`` or ``{"error": "<type>: <message>"}``; it exits at the end of stdin. One
child serves every compute of the view, so the report's imports are paid once. The report crosses the pipe as
report.json's JSON (:meth:`harness.report.model.Report.as_dict`); the parent validates it back into the typed
:class:`harness.report.model.Report` (:meth:`harness.webui.cache.ComputeChild.report`).

The LLM view runs the report in a child process so the report's CPU-bound pass never holds the load
generator's gevent loop (or its GIL): the requests being measured keep their timing while the view refreshes.
"""

from __future__ import annotations

import json
import sys

__all__ = ["answer", "main"]


def answer(path: str) -> str:
    """The answer line (without its newline) for one run directory ``path``."""
    from harness.report.build import build_report

    try:
        return json.dumps({"report": build_report(path).as_dict()}, allow_nan=False)
    except Exception as e:  # reported to the view, which shows it
        return json.dumps({"error": f"{type(e).__name__}: {e}"})


def main() -> int:
    """Serve stdin until it ends (see the module docstring). Returns the exit code (0)."""
    import harness.report.build  # noqa: F401  (imported before the first request)

    for line in sys.stdin:
        path = line.rstrip("\n")
        if path:
            sys.stdout.write(answer(path) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
