"""Headless progress: where a long run is and how it goes, on the master (or single process) of a headless run.

One line, e.g.::

    progress: step 3/5 (C=16) · 0:12/0:30 · run 1:05, ~2:40 left · 182 completed · 0 errors · 1,045 tok/s
    · rate ±8.1 % (margin 10 %)

* step ``i/n``: the stage's place in the plan (:func:`harness.shapes.plan_stages`: the single stream, then the
  steps; a capacity search adds steps as it goes: ``n`` is then ``?``);
* the step's elapsed and planned seconds (``steps.until``: its ``max``; past the plan, ``0:07 (planned 0:06,
  draining)`` once the load ended, ``ending`` before: :func:`step_clock_text`), and the run's elapsed and planned
  time left (the remaining stages' planned lengths; none with a search);
* completed / errors: the run's non-warm-up records so far (successful / failed), as written to records.jsonl;
* tok/s: output tokens of the requests that ENDED in the last :data:`RATE_WINDOW_S` seconds ÷ that
  window (the rate Grafana's ``rate(llmload_output_tokens_total[...])`` gives) — a live gauge, not the report's
  output tok/s (tokens by arrival in the steady window). Against the simulator in compressed time (``time_scale``
  ≠ 1) it is the real-time equivalent (× time_scale, :mod:`harness.report.realtime`'s rule, as the end-of-run
  summary shows it) and says so: ``26 tok/s (real time)``; the clocks stay wall time (how long you wait);
* rate ±: with ``steps.until``, the live relative half-width of the usable rate's interval against the margin
  (``llmload_step_rate_halfwidth_ratio``).

On a terminal (stderr is a TTY) the line is printed every :data:`EVERY_S` seconds and at each step change; otherwise
once per step change only (the finished step's last line), so a log file gets one line per step.
"""

from __future__ import annotations

import logging
import math
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from harness.result import RequestResult

__all__ = ["EVERY_S", "RATE_WINDOW_S", "Progress", "clock_text", "start_progress", "step_clock_text"]

log = logging.getLogger("llmload")

#: Seconds between two progress lines on a terminal.
EVERY_S = 10.0

#: The line's width when the terminal's cannot be read (characters).
MAX_LINE = 120
#: The window (s) of the live tok/s.
RATE_WINDOW_S = 10.0


def clock_text(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (``h:mm:ss`` from an hour on); negative values as 0:00."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def step_clock_text(elapsed: float, planned: float, ended: bool) -> str:
    """A step's clock: ``0:20/1:00`` (elapsed / planned seconds); once the shown elapsed is past the plan,
    ``0:07 (planned 0:06, draining)`` after the load ended (requests in flight finishing), else
    ``0:07 (planned 0:06, ending)`` (the step ends at the shape's next tick), never ``0:07/0:06``."""
    shown, plan = clock_text(elapsed), clock_text(planned)
    if round(elapsed) <= round(planned):
        return f"{shown}/{plan}"
    return f"{shown} (planned {plan}, {'draining' if ended else 'ending'})"


class Progress:
    """The state behind the progress line, fed with the run's records and phase events (module docstring).

    Args:
        stages: the planned stages (objects with ``phase``, ``step``, ``users``, ``duration`` seconds, ``label``);
        search: a capacity search adds stages as it goes (the plan's length is unknown);
        margin: ``steps.until.margin`` (a share), None without ``steps.until``;
        halfwidth: returns the live relative half-width (a share) or None;
        clock: epoch seconds;
        time_scale: the simulator's time scale (1: real time); tok/s is then shown as its real-time equivalent.
    """

    def __init__(self, stages: Sequence[Any], search: bool = False, margin: float | None = None,
                 halfwidth: Callable[[], float | None] = lambda: None,
                 clock: Callable[[], float] = time.time, time_scale: float = 1.0) -> None:
        self.stages = list(stages)
        self.time_scale = time_scale
        self.search = search
        self.margin = margin
        self.halfwidth = halfwidth
        self.clock = clock
        self.started = clock()
        self.completed = 0
        self.errors = 0
        self.phase: dict[str, Any] | None = None
        self.phase_wall: float | None = None
        self.ended = False
        self._recent: deque[tuple[float, int]] = deque()  # (end wall, output tokens) of recent requests

    def on_record(self, rec: RequestResult) -> None:
        """Count one record (warm-up records are not counted)."""
        if rec.phase == "warmup":
            return
        if rec.ok:
            self.completed += 1
        else:
            self.errors += 1
        self._recent.append((rec.start_wall + (rec.e2e or 0.0), int(rec.output_tokens or 0)))
        # dropped here too, not only when a line is drawn: off a terminal a line is drawn once a step, and the
        # deque held every record's pair until then (~90 B a record: +90 MB per million in a soak's master)
        self._drop_ended_before(self.clock() - RATE_WINDOW_S)

    def _drop_ended_before(self, edge: float) -> None:
        """Forget the recent requests, from the oldest received, while they ended at or before ``edge`` (epoch s)."""
        while self._recent and self._recent[0][0] <= edge:
            self._recent.popleft()

    def on_phase(self, event: Mapping[str, Any]) -> None:
        """Take a ``phases.jsonl`` event: ``phase_start`` (a new stage) or ``load_end``."""
        if event.get("event") == "phase_start" and event.get("phase") != "warmup":
            self.phase = dict(event)
            wall = event.get("wall")
            self.phase_wall = float(wall) if wall is not None else self.clock()
        elif event.get("event") == "load_end":
            self.ended = True

    def tok_s(self, now: float) -> float:
        """Output tokens of the requests that ended in ``(now - RATE_WINDOW_S, now]`` ÷ :data:`RATE_WINDOW_S`."""
        edge = now - RATE_WINDOW_S
        self._drop_ended_before(edge)
        return sum(t for end, t in self._recent if edge < end <= now) / RATE_WINDOW_S

    def _index(self) -> int | None:
        if self.phase is None:
            return None
        key = (self.phase.get("phase"), int(self.phase.get("step") or 0))
        return next((i for i, s in enumerate(self.stages) if (s.phase, s.step) == key), None)

    def line(self, now: float | None = None, width: int | None = None) -> str:
        """The progress line at ``now`` (epoch s; default the clock). With ``width`` (characters, a terminal's), a
        line longer than that is broken between its `` · `` parts, continuation lines indented (a 100-column
        terminal wrapped it mid-word); a single part longer than ``width`` stays whole."""
        now = self.clock() if now is None else now
        parts: list[str] = []
        i = self._index()
        if self.phase is None:
            parts.append("warm-up")
        else:
            total = "?" if self.search else str(len(self.stages))
            place = f"{i + 1}/{total}" if i is not None else f"?/{total}"
            what = "single stream" if self.phase.get("phase") == "single" else "step"
            setting = f"C={self.phase.get('concurrency')}"
            if self.phase.get("rate") is not None:
                setting = f"{float(self.phase['rate']):g} req/s"
            parts.append(f"{what} {place} ({setting})")
            elapsed = now - (self.phase_wall if self.phase_wall is not None else now)
            planned = self.stages[i].duration if i is not None else None
            if planned is not None and math.isfinite(planned):
                parts.append(step_clock_text(elapsed, planned, self.ended))
            else:
                parts.append(f"{clock_text(elapsed)} in step")
        run = f"run {clock_text(now - self.started)}"
        left = self._left(now, i)
        if left is not None and not self.ended:  # once the load ended the drain has no planned length
            run += f", ~{clock_text(left)} left"
        parts.append(run)
        parts.append(f"{self.completed:,} completed")
        parts.append(f"{self.errors:,} error{'' if self.errors == 1 else 's'}")
        if self.time_scale != 1.0:
            parts.append(f"{self.tok_s(now) * self.time_scale:,.0f} tok/s (real time)")
        else:
            parts.append(f"{self.tok_s(now):,.0f} tok/s")
        if self.margin is not None:
            hw = self.halfwidth()
            parts.append(f"rate ±{100 * hw:.1f} % (margin {100 * self.margin:g} %)" if hw is not None
                         else f"rate ± – (margin {100 * self.margin:g} %)")
        if self.ended and not any(p.endswith("draining)") for p in parts):
            parts.append("load ended, draining")
        parts[0] = "progress: " + parts[0]
        if width is None:
            return " · ".join(parts)
        lines = [parts[0]]
        for p in parts[1:]:
            if len(lines[-1]) + 3 + len(p) <= width:
                lines[-1] += " · " + p
            else:
                lines.append("  · " + p)
        return "\n".join(lines)

    def _left(self, now: float, i: int | None) -> float | None:
        """Planned seconds left in the run (None: unknown: a search, an unbounded stage, or no stage yet)."""
        if self.search or i is None or self.ended:
            return 0.0 if self.ended else None
        rest = [s.duration for s in self.stages[i + 1:]]
        cur = self.stages[i].duration - (now - (self.phase_wall if self.phase_wall is not None else now))
        if not all(math.isfinite(d) for d in [*rest, self.stages[i].duration]):
            return None
        return max(0.0, cur) + sum(rest)


def start_progress(run: Any, ctx: Any, out: TextIO | None = None, tty: bool | None = None) -> Progress:
    """Show the progress of ``ctx``'s headless run (module docstring) on ``out`` (default stderr) while ``run`` is
    active: listens to the run directory's records and phase events; on a terminal (``tty``, default: ``out`` is
    a TTY) a gevent greenlet prints the line every :data:`EVERY_S` s and stops with the run. Returns the state."""
    from harness.locust.live import time_scale_of
    from harness.shapes import plan_stages

    stream = out if out is not None else sys.stderr
    is_tty = stream.isatty() if tty is None else tty
    until = ctx.profile.steps.until

    def halfwidth() -> float | None:
        m = getattr(run, "metrics", None)
        return getattr(m, "until_halfwidth", None) if m is not None else None

    prog = Progress(plan_stages(ctx), search=ctx.profile.search is not None,
                    margin=until.margin if until is not None else None, halfwidth=halfwidth,
                    time_scale=time_scale_of(ctx))

    def emit() -> None:
        try:
            width = shutil.get_terminal_size((MAX_LINE, 24)).columns if is_tty else None
            stream.write(prog.line(width=width) + "\n")
            stream.flush()
        except (OSError, ValueError):  # a closed stream never stops the run
            pass

    def on_phase(event: Mapping[str, Any]) -> None:
        if prog.phase is not None and event.get("event") in ("phase_start", "load_end"):
            emit()  # the finished stage's last line (one per step in a log)
        prog.on_phase(event)

    rd = ctx.run_dir
    rd.on_record.add_listener(prog.on_record)
    rd.on_phase.add_listener(on_phase)
    if is_tty:
        import gevent

        def loop() -> None:
            while run.active():
                gevent.sleep(EVERY_S)
                if run.active():
                    emit()

        gevent.spawn(loop)
    return prog
