"""Command line: ``python -m harness.report RUN_DIR [--json] [--full] [--n N ...] [--quiet]`` (also ``llmload report``),
or ``--pool RUN_DIR RUN_DIR ... [--out DIR]``: repeats of one profile pooled into one answer with a run-to-run
interval beside the pooled within-run one (:mod:`harness.report.pool`; writes ``pool.md`` and ``pool.json``).

Writes ``report.json``, ``report.md`` and ``report.html`` into the run directory and prints, on a terminal, the
compact summary (:func:`harness.report.summary.render_summary`, at most 120 columns) or with ``--full`` the whole
Markdown as plain text (no width-limited table rendering, so no cell is ever cut); not on a terminal (a pipe, a
file) the raw Markdown; with ``--json``, the JSON.
Exit codes: 0 done, 2 bad input (missing run directory or records.jsonl, corrupt records).
"""

from __future__ import annotations

import argparse
import sys

from harness.report.build import write_report
from harness.report.load import NoRecordsError
from harness.report.summary import render_summary

__all__ = ["build_parser", "main"]


def build_parser(prog: str = "python -m harness.report") -> argparse.ArgumentParser:
    """The argument parser of the report command."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="Per-step steady-state report of a run directory (writes report.md, report.json, report.html "
                    "and figures/*.png into it, replacing the ones there).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?",
                   help="run directory holding run.json, records.jsonl, phases.jsonl")
    p.add_argument("--pool", nargs="+", metavar="RUN_DIR",
                   help="pool repeated runs of one profile: per step the pooled usable rate and hours to N with "
                        "the pooled within-run and the run-to-run 95 %% intervals (writes pool.md and pool.json "
                        "into --out; the runs' own files are not touched)")
    p.add_argument("--out", metavar="DIR", help="with --pool: output directory (default ./pool-<first run>-x<k>)")
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the Markdown")
    p.add_argument("--n", type=int, nargs="+", metavar="N",
                   help="sample counts for the hours-to-N table (default: profile report.hours_to_n); the files "
                        "written carry these N only (llmload compare then reads them)")
    p.add_argument("--full", action="store_true",
                   help="on a terminal, print the whole report (its Markdown) instead of the compact summary")
    p.add_argument("--quiet", action="store_true", help="write the files but print nothing")
    p.add_argument("--records-parquet", metavar="FILE",
                   help="also write every record (all fields, chunk times as list columns) to the Parquet file FILE "
                        "for pandas / polars / DuckDB (docs: guides/exports.md)")
    return p


def _print_markdown(md: str, summary: str | None = None) -> None:
    """Print the report: ``summary`` on a terminal when given, else ``md`` as it is (plain Markdown text).

    The Markdown is never rendered into terminal-width tables (rich would elide cells, ``0.02…``): its tables are
    printed as their rows, which a narrow terminal wraps but never cuts. A pipe or a file always gets ``md``.
    """
    if summary is not None and sys.stdout.isatty():
        sys.stdout.write(summary)
    else:
        sys.stdout.write(md)


def main(argv: list[str] | None = None, prog: str = "python -m harness.report") -> int:
    """Run the report command (``prog``: the name its usage and --help show); returns the exit code."""
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.pool is not None:
        from harness.report.pool import run_pool

        if args.n is not None or args.full:
            parser.error("--n and --full do not apply to --pool (rebuild the runs' reports with --n first)")
        return run_pool([*([args.run_dir] if args.run_dir else []), *args.pool], args.out, args.json, args.quiet)
    if args.run_dir is None:
        parser.error("RUN_DIR is required (or --pool RUN_DIR ...)")
    if args.out is not None:
        parser.error("--out applies to --pool only")
    if args.n is not None and any(n <= 0 for n in args.n):
        print("error: --n values must be positive", file=sys.stderr)
        return 2
    try:
        rep, md = write_report(args.run_dir, args.n)
    except NoRecordsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: cannot write the report: {e}", file=sys.stderr)
        return 1
    if args.records_parquet is not None:
        from harness.report.csvexport import export_records_parquet

        try:
            path, k = export_records_parquet(args.run_dir, args.records_parquet)
        except OSError as e:
            print(f"error: --records-parquet: cannot write {args.records_parquet}: {e}", file=sys.stderr)
            return 1
        print(f"wrote {k:,} records to {path}", file=sys.stderr)
    if not args.quiet:
        if args.json:
            sys.stdout.write(rep.to_json())
        else:
            _print_markdown(md, None if args.full else render_summary(rep, args.run_dir))
    return 0
