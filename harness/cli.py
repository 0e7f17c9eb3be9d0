"""``llmload`` command: ``report``, ``compare``, ``sim``, ``fidelity`` and ``panels`` subcommands (the load itself
runs under Locust).

llmload report runs/20261129-120000-k26        # per-step table and hours-to-N from the records
llmload compare runs/A runs/B                  # per-step ratios B/A with 95 % intervals and a noise flag
llmload report --pool runs/A runs/B runs/C     # repeats of one profile: one answer with a run-to-run interval
llmload sim serve --port 8000 --preset k26     # the reasoning-model simulator as a standalone server
llmload panels --prometheus http://127.0.0.1:9090 --last 15m --out panels   # the dashboard's panels as PNGs
"""

from __future__ import annotations

import sys

from harness import __version__

__all__ = ["main"]

USAGE = """usage: llmload [--version] {report,compare,sim,fidelity,panels} ...

  report RUN_DIR [options]   rebuild and print the report of a run directory (llmload report --help)
  report --pool RUN_DIR ...  pool repeats of one profile: pooled and run-to-run 95 % intervals (pool.md/.json)
  compare RUN_A RUN_B [...]  per-step ratios (B/A, ...) of tok/s, latencies, hours to N with 95 % intervals
                             and a within-noise flag; writes compare.md/.json/.html (llmload compare --help)
  sim serve [options]        run the OpenAI-compatible reasoning-model simulator (llmload sim serve --help)
  fidelity RUN_DIR TRUTH     compare a run's records with the simulator's ground-truth log (--truth-log)
  panels [options]           render the Grafana dashboard's panels from its PromQL against a real Prometheus
                             into PNGs (llmload panels --help)

The load test itself runs under Locust: locust -f locustfiles/k26.py --headless (see docs/getting-started.md).
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``llmload`` console script; returns the process exit code.

    ``llmload --version`` (or ``-V``) prints ``llmload <version>`` (:data:`harness.__version__`) and returns 0.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        sys.stdout.write(f"llmload {__version__}\n")
        return 0
    cmd, rest = args[0], args[1:]
    if cmd == "report":
        from harness.report.cli import main as report_main

        return report_main(rest, prog="llmload report")
    if cmd == "compare":
        from harness.report.compare import main as compare_main

        return compare_main(rest, prog="llmload compare")
    if cmd == "fidelity":
        from harness.report.fidelity import main as fidelity_main

        return int(fidelity_main(rest) or 0)
    if cmd == "panels":
        from harness.panels import main as panels_main

        return panels_main(rest)
    if cmd == "sim":
        from harness.sim.cli import main as sim_main

        return int(sim_main(rest, prog="llmload sim") or 0)
    sys.stderr.write(f"llmload: unknown command {cmd!r}\n{USAGE}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
