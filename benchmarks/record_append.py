"""Cost of appending one request record (:meth:`harness.records.RunDir.write_record`), with and without the
Parquet part converter running beside it.

Writes ``--records`` records of the recorded demo run (cycled; ~1.9 KB each) into a fresh run directory, as the
master does: a :class:`~harness.result.RequestResult` (its own users) or a record dict (a worker's batch, read with
``from_record``). Two modes, each in a fresh run directory: ``parts off`` (``RunDir.parts`` False: the write
path as before the converter existed, plus one integer add), ``parts on`` (``PARTS_AFTER_BYTES`` set to
``--part-bytes``, default 4 MB: the converter starts after that many bytes and converts parts of that size while
the appends go on; at idle CPU priority, it takes only CPU time the appends leave). Printed: microseconds per append
(median of the batches of 1000 of ``--repeat`` runs, and their p90), and the converter's CPU seconds.

    .venv/bin/python benchmarks/record_append.py
    .venv/bin/python benchmarks/record_append.py --records 100000 --repeat 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))

from harness import records as records_mod  # noqa: E402
from harness.records import RunDir  # noqa: E402
from harness.result import RequestResult  # noqa: E402


def _demo_records() -> list[dict[str, Any]]:
    with gzip.open(_ROOT / "tests" / "data" / "demo-run" / "records.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _run(base: Path, records: list[dict[str, Any]], n: int, typed: bool, parts: bool) -> tuple[list[float], float]:
    """Per-append microseconds of each batch of 1000 appends, and the converter's CPU seconds."""
    rd = RunDir.create(base, "bench", {})
    rd.parts = parts
    results = [RequestResult.from_record(r) for r in records] if typed else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    batches: list[float] = []
    t = time.perf_counter()
    for i in range(n):
        rd.write_record(results[i % len(results)] if results is not None else dict(records[i % len(records)]))
        if (i + 1) % 1000 == 0:
            now = time.perf_counter()
            batches.append((now - t) / 1000 * 1e6)
            t = now
    started = rd._converter is not None
    rd.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if parts and not started:
        print("  (the converter did not start: fewer bytes than --part-bytes)")
    return batches, cpu


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring)."""
    p = argparse.ArgumentParser(description="Microseconds per RunDir.write_record, with and without parts.")
    p.add_argument("--records", type=int, default=50_000)
    p.add_argument("--repeat", type=int, default=3, help="runs of each mode (the median batch of all is printed)")
    p.add_argument("--part-bytes", type=int, default=4 << 20, help="bytes per part (and before the converter starts)")
    args = p.parse_args(argv)
    records = _demo_records()
    records_mod.PARTS_AFTER_BYTES = args.part_bytes  # the converter is started with it as its part size
    with tempfile.TemporaryDirectory() as tmp:
        for typed in (True, False):
            for parts in (False, True):
                all_batches: list[float] = []
                cpu = 0.0
                for _ in range(args.repeat):
                    b, c = _run(Path(tmp), records, args.records, typed, parts)
                    all_batches += b
                    cpu += c
                what = "RequestResult" if typed else "record dict  "
                print(f"{what} parts {'on ' if parts else 'off'}: {statistics.median(all_batches):.1f} us per append "
                      f"(median of {len(all_batches)} batches of 1000; p90 "
                      f"{statistics.quantiles(all_batches, n=10)[-1]:.1f} us), converter CPU {cpu:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
