"""The soak's locustfile with a memory trace of the master: ``locustfiles/k26.py`` plus, on the master only, a
greenlet that writes where its memory goes (a debugging aid for ``benchmarks/soak.py --trace DIR``).

Environment (read on the master at Locust's ``init``):

* ``LLMLOAD_TRACE_DIR``: the directory written (nothing is traced without it);
* ``LLMLOAD_TRACE_EVERY``: seconds between looks (default 30);
* ``LLMLOAD_TRACE_FRAMES``: frames a ``tracemalloc`` traceback keeps; 0 (the default) leaves ``tracemalloc`` off
  and writes the cheap columns only. ``tracemalloc`` slows the master's record path several times over: at the
  soak's rate the master falls behind its workers (their batches queue up, their records count as live
  allocations, and the exporter stops answering): it did with ``--concurrency 2`` too, after ~30 s. Trace a
  short run, or a load slowed by the simulator (``--time-scale`` above 0; not tried);
* ``LLMLOAD_TRACE_TRIM``: ``1`` calls glibc's ``malloc_trim(0)`` after each look (memory freed by Python but held
  by the allocator goes back to the system: RSS that falls with it was never a leak).

Every look appends one line to ``DIR/master.tsv``: seconds since init, the master's RSS, the Python heap
``tracemalloc`` counts (bytes; 0 when off), the number of objects the garbage collector tracks (containers of
objects: numbers, strings and dicts holding only such are not among them), and glibc's
``mallinfo2`` figures (``arena``: bytes the main heap holds from the system, ``hblkhd``: in mmapped blocks,
``uordblks``: in use, ``fordblks``: free but held, all bytes; Python's small objects live in pymalloc's own mmapped
arenas, outside these), and ``window_cells``: the count cells (4 bytes each, :class:`harness.quantiles.Slice`)
held by the slices of the exporter's sliding percentile windows (bounded state that grows until the longest
window, 30 minutes, is full). With ``tracemalloc`` on, each look also writes
``DIR/top-<seconds>.txt``: the 30 source lines whose live allocations grew most since the first look (size and
count differences), and the 15 largest now.
"""

from __future__ import annotations

from locust import events
from locust.runners import MasterRunner

import ctypes
import gc
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

import gevent
import psutil

import harness.locust  # noqa: F401  (registers the options, set-up, records and report)
from harness.shapes import ReasoningSweepShape
from harness.users import ReasoningChatUser

__all__ = ["ReasoningChatUser", "ReasoningSweepShape"]


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def _libc() -> Any:
    """glibc, or None (``ctypes.util.find_library`` is not used: it runs ``ldconfig`` in a subprocess, which hung
    the master's gevent loop)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def _mallinfo(libc: Any) -> dict[str, int]:
    """glibc's ``mallinfo2()`` as a dict of bytes; empty when the C library has none."""
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return {}
    fn.restype = _Mallinfo2
    mi = fn()
    return {k: int(getattr(mi, k)) for k in ("arena", "hblkhd", "uordblks", "fordblks")}


_SKIP = (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
         tracemalloc.Filter(False, "<unknown>"))


def _window_cells(environment: Any) -> int:
    """Count cells held by the exporter's percentile windows (every slice of every window; 0 without metrics)."""
    run = getattr(environment, "llmload", None)
    metrics = getattr(run, "metrics", None)
    if metrics is None:
        return 0
    with metrics.lock:
        return sum(len(sl.counts) for win in metrics.windows.values() for sl in win._slices.values())


def _trace(environment: Any, out: Path, every: float, frames: int, trim: bool) -> None:
    """Loop forever (a greenlet): one look every ``every`` seconds (see the module docstring)."""
    libc = _libc()
    proc = psutil.Process()
    t0 = time.monotonic()
    first: tracemalloc.Snapshot | None = None
    tsv = out / "master.tsv"
    with tsv.open("w") as f:
        f.write("t_s\trss\ttraced\tgc_objects\tarena\thblkhd\tuordblks\tfordblks\twindow_cells\n")
    while True:
        gevent.sleep(every)
        t = time.monotonic() - t0
        rss = proc.memory_info().rss
        traced = tracemalloc.get_traced_memory()[0] if frames else 0
        mi = _mallinfo(libc)
        with tsv.open("a") as f:
            f.write("\t".join(str(v) for v in (round(t, 1), rss, traced, len(gc.get_objects()),
                                               *(mi.get(k, 0) for k in ("arena", "hblkhd", "uordblks", "fordblks")),
                                               _window_cells(environment)))
                    + "\n")
        if frames:
            snap = tracemalloc.take_snapshot().filter_traces(_SKIP)
            if first is None:
                first = snap
            else:
                lines = [f"t={t:.0f} s rss={rss / 1e6:.1f} MB traced={traced / 1e6:.1f} MB", "", "grew most since "
                         "the first look:"]
                lines += [str(s) for s in snap.compare_to(first, "lineno")[:30]]
                lines += ["", "largest now:"] + [str(s) for s in snap.statistics("lineno")[:15]]
                (out / f"top-{t:05.0f}.txt").write_text("\n".join(lines) + "\n")
        if trim and libc is not None:
            libc.malloc_trim(0)


@events.init.add_listener
def _on_init(environment: Any, **_kw: Any) -> None:
    where = os.environ.get("LLMLOAD_TRACE_DIR")
    if not where or not isinstance(environment.runner, MasterRunner):
        return
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    frames = int(os.environ.get("LLMLOAD_TRACE_FRAMES", "0"))
    if frames:
        tracemalloc.start(frames)
    gevent.spawn(_trace, environment, out, float(os.environ.get("LLMLOAD_TRACE_EVERY", "30")), frames,
                 os.environ.get("LLMLOAD_TRACE_TRIM") == "1")
