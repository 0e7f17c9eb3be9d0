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

The run's state is one :class:`harness.runtime.Run` per process (:func:`harness.runtime.current`). Modules, in
import order (each imports only those before it): ``options``, ``form``, ``setup``, ``drain``, ``signals``,
``live``, ``webrun``, ``listeners``.
"""

from harness import webui  # noqa: F401  (the LLM view of the web UI: a no-op without one)
from harness.locust import listeners, live, options

__all__ = ["listeners", "live", "options"]
