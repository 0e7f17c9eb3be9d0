"""Memory and time of a 1M-line prompt data set: indexing (validation included), and drawing from it.

Generates ``--lines`` JSONL chat rows (each with ``max_tokens`` and ``weight``) at ``--file`` when that file does not
already hold that many lines, then, in a fresh child process per sampling mode, measures:

- RSS after importing the harness (baseline) and after building the profile's prompt source (the index), and the
  peak RSS of the child (``os.wait4``); the difference is what the data set costs a process (all its users share it);
- the wall and CPU seconds of building the source (scan + JSON validation of every line + arrays);
- the draws per second of :meth:`PromptSource.sample` (row read with ``os.pread`` + body built).

    .venv/bin/python benchmarks/dataset_1m.py                            # 1M lines in /tmp/llmload-prompts-1m.jsonl
    .venv/bin/python benchmarks/dataset_1m.py --lines 200000 --file /tmp/p200k.jsonl

Wall times depend on what else runs on the machine; CPU seconds less so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(_ROOT))

MODES = {
    "weighted, with replacement": "sampling: weighted, replacement: true",
    "uniform, with replacement": "sampling: uniform, replacement: true",
    "weighted, without replacement": "sampling: weighted, replacement: false",
}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _generate(path: Path, lines: int) -> None:
    import orjson

    rng = random.Random(0)
    words = "explain write summarise compare describe the a of model data server token history science".split()
    with open(path, "wb") as f:
        for i in range(lines):
            text = f"{i}: " + " ".join(rng.choice(words) for _ in range(rng.randint(8, 60)))
            row = {"messages": [{"role": "user", "content": text}], "max_tokens": rng.choice((256, 512, 1024))}
            row["weight"] = rng.choice((1, 2, 3))
            f.write(orjson.dumps(row) + b"\n")


def _child(file: str, mode: str, draws: int) -> None:
    from harness.profile_check import load_checked_profile
    from harness.prompts import files
    from harness.prompts.source import build_source

    base = _rss_mb()
    prof_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"llmload-bench-{os.getpid()}.yaml"
    prof_path.write_text(f"name: bench\ndataset: {{path: {file}, {MODES[mode]}, seed: 1}}\n")
    t0, c0 = time.perf_counter(), time.process_time()
    profile = load_checked_profile(prof_path)  # validates, and indexes the file (before any load)
    src = build_source(profile, "m")  # the same index (cached), plus cumulative weights / order
    t1, c1 = time.perf_counter(), time.process_time()
    after = _rss_mb()
    files._CACHE.clear()
    rng = random.Random(0)
    src.sample(rng)  # without replacement: builds the first order
    t2 = time.perf_counter()
    for _ in range(draws):
        src.sample(rng)
    t3 = time.perf_counter()
    prof_path.unlink()
    out = {"rows": len(src.index), "base_mb": base, "after_mb": after, "load_s": t1 - t0, "load_cpu_s": c1 - c0}  # type: ignore[attr-defined]
    out["draws_per_s"] = draws / (t3 - t2)
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--file", default="/tmp/llmload-prompts-1m.jsonl")
    ap.add_argument("--draws", type=int, default=50_000)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a.child[0], a.child[1], a.draws)
        return
    path = Path(a.file)
    if not path.exists() or sum(1 for _ in open(path, "rb")) != a.lines:
        t = time.perf_counter()
        _generate(path, a.lines)
        print(f"generated {a.lines:,} lines ({path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
    print(f"{path}: {path.stat().st_size / 1e6:.0f} MB")
    for mode in MODES:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--child", str(path), mode, "--draws", str(a.draws)], stdout=subprocess.PIPE
        )
        assert proc.stdout is not None
        line = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        assert status == 0, status
        r = json.loads(line)
        peak = usage.ru_maxrss * 1024 / 1e6  # KiB on Linux
        print(
            f"{mode:31s} rows {r['rows']:,}: RSS {r['base_mb']:.0f} -> {r['after_mb']:.0f} MB "
            f"(+{r['after_mb'] - r['base_mb']:.0f} MB; peak {peak:.0f} MB), load {r['load_s']:.2f} s wall "
            f"/ {r['load_cpu_s']:.2f} s CPU, {r['draws_per_s']:,.0f} draws/s"
        )


if __name__ == "__main__":
    main()
