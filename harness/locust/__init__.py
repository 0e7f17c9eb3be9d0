"""Locust wiring of llmload: import this package from a locustfile (``locustfiles/k26.py`` does) to get:

* ``--profile PATH`` (default ``profiles/demo.yaml`` without ``--host``, ``profiles/k26.yaml`` with one),
  ``--output-dir DIR`` (overrides the profile's ``output.dir``) and the ``--metrics-*`` options
  (:mod:`harness.locust.options`);
* on the master or the single process: the profile validated before any load (exit code 2 on error), the
  built-in simulator started when there is no host, the run directory created (:mod:`harness.locust.listeners`);
* on workers: context from the master's phase messages, records sent to the master in batches;
* on the master or the single process: the Prometheus exporter (:mod:`harness.exporter`) on its own port,
  counting every record written to ``records.jsonl``; workers add their in-flight request count to their Locust
  reports (:mod:`harness.locust.live`);
* Ctrl-C and SIGTERM handled so that in-flight requests finish and are recorded (:mod:`harness.locust.signals`,
  :mod:`harness.locust.drain`);
* at the end (finished, stopped or Ctrl-C): the run directory closed with its status and the report written to
  ``report.md`` / ``report.json`` and printed;
* in web-UI mode (no ``--headless``): the start form's fields (:mod:`harness.locust.form`: profile picker, mode
  sweep/fixed, prompt mix, max_tokens, thinking, steps) and each Start a run of its own, drained, closed and
  reported when it ends (:mod:`harness.locust.webrun`).

**Registration is explicit.** No module of ``harness`` adds a Locust listener when it is imported (but
:mod:`harness.webui`, whose ``init`` listener its owner is to move into a ``register`` of its own; :func:`register`
adds it when it is missing). Importing this package calls :func:`register` once for Locust's ``locust.events``:
the command-line options (``init_command_line_parser``: Locust fires it while it builds its parser, before any
environment exists, so this one listener has to be on Locust's global hook when the locustfile is imported), and
the run's listeners from ``init`` on (:func:`harness.locust.listeners.register`), each bound to the process's
:class:`harness.runtime.Run`, reachable as ``environment.llmload`` once ``init`` fired.

The run's state is one :class:`harness.runtime.Run` per process (:func:`harness.runtime.current`). Modules, in
import order (each imports only those before it): ``options``, ``form``, ``setup``, ``drain``, ``signals``,
``live``, ``end``, ``webrun``, ``listeners``.
"""

from __future__ import annotations

import locust
from locust.event import Events

from typing import Any

from harness import webui
from harness.locust import form, listeners, live, options
from harness.runtime import Run, current

__all__ = ["listeners", "live", "options", "register"]

#: Attribute set on an :class:`locust.event.Events` once :func:`register` added llmload's listeners to it.
_MARK = "_llmload_registered"


def _add_options(parser: Any, **_: Any) -> None:
    """``init_command_line_parser``: the start form's fields, then ``--output-dir`` and the ``--metrics-*``
    options."""
    form.add_form_options(parser)
    options.add_options(parser)


def register(events: Events, run: Run | None = None) -> Run:
    """Add every llmload listener to ``events`` (Locust's ``locust.events``; a fresh :class:`Events` in a test),
    bound to ``run`` (default: this process's, :func:`harness.runtime.current`), and return that run.

    Adds: the command-line options (``init_command_line_parser``), the web UI's LLM view (:mod:`harness.webui`'s
    ``init`` listener, unless it is on ``events`` already), then one listener on each event of
    :data:`harness.locust.listeners.REGISTERED`. A second call for the same ``events`` adds nothing (returns the
    run registered first).
    """
    done = getattr(events, _MARK, None)
    if isinstance(done, Run):
        return done
    run = run if run is not None else current()
    events.init_command_line_parser.add_listener(_add_options)
    events.init.add_listener(webui.on_init)
    listeners.register(events, run)
    setattr(events, _MARK, run)
    return run


register(locust.events)
