"""Per-step steady-state report of a run directory: tables, hours to N samples, formulas and honesty notes.

::

    from harness.report import build_report, load_report, render_markdown, render_summary, write_report
    rep = build_report("runs/20250101-120000-k2")    # a typed Report (harness.report.model; seconds, tokens)
    rep.steps[1].output_tps                          # figures are attributes
    old = load_report("runs/20250101-120000-k2")     # report.json read back (this or an earlier version's)
    print(render_markdown(rep))                      # GitHub Markdown (the renderers read the typed Report)
    print(render_summary(rep))                       # compact terminal summary (120 columns)
    rep, md = write_report("runs/20250101-120000-k2")   # also writes report.json, report.md, report.html

Command line: ``python -m harness.report RUN_DIR [--json] [--full] [--n 100000 900000] [--quiet]``.
"""

from harness.report.build import DEFINITIONS, SCHEMA, build_report, write_report
from harness.report.load import NoRecordsError
from harness.report.model import Report, ReportError, load_report
from harness.report.render import render_markdown
from harness.report.summary import render_summary

__all__ = [
    "DEFINITIONS", "SCHEMA", "NoRecordsError", "Report", "ReportError", "build_report", "load_report",
    "render_markdown", "render_summary", "write_report",
]  # fmt: skip
