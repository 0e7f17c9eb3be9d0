"""Prometheus exporter: the run's metrics on their own HTTP port, in the master (or the single process).

A custom collector (:class:`RunCollector`) on a dedicated registry turns :class:`harness.metrics.RunMetrics`
and a few live values (users, requests in flight, current step) into Prometheus metric families at scrape
time; :class:`Exporter` serves them with ``prometheus_client.start_http_server`` on ``--metrics-addr`` /
``--metrics-port``, independently of Locust's web UI (so also with ``--headless`` and behind ``--web-login``).

Every family is one of :data:`harness.catalogue.FAMILIES` (name, type, help, labels, unit); every series has the
``model`` label (see :mod:`harness.metrics` for the label values). The self-monitoring counters are collected
last: ``llmload_exporter_scrapes_total`` counts the collections of the run's metrics, the current one included,
and ``llmload_exporter_scrape_cpu_seconds_total`` the CPU seconds (``time.thread_time``) :class:`Exporter`'s
HTTP server spent producing ``/metrics`` responses (collect, serialization and gzip), the current scrape up to
the point these two are collected; 0 when the collector is not served by an :class:`Exporter`.

Exposed (this list is generated from the table at import):

"""

from __future__ import annotations

import os

os.environ.setdefault("PROMETHEUS_DISABLE_CREATED_SERIES", "True")

import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

import gevent
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from harness.catalogue import FAMILIES, HISTOGRAMS, PERCENTILE_GAUGES, PERCENTILES, RECORD_COUNTERS, rst_list
from harness.metrics import RunMetrics
from harness.records import versions

__doc__ = (__doc__ or "") + rst_list()

__all__ = ["DEFAULT_ADDR", "DEFAULT_PORT", "Exporter", "RunCollector", "run_info"]

log = logging.getLogger("llmload")

_KINDS: dict[str, Any] = {
    "counter": CounterMetricFamily,
    "gauge": GaugeMetricFamily,
    "histogram": HistogramMetricFamily,
}


def family(name: str) -> Any:
    """An empty ``prometheus_client`` family for ``name`` of :data:`harness.catalogue.FAMILIES` (its type, help
    and labels; an info family takes its labels with its one sample).

    Raises:
        KeyError: ``name`` is not in the table.
    """
    f = FAMILIES[name]
    if f.type == "info":
        return InfoMetricFamily(f.name, f.help)
    return _KINDS[f.type](f.name, f.help, labels=list(f.labels))

#: Default port of the exporter (``--metrics-port``).
DEFAULT_PORT = 9646
#: Default bind address (``--metrics-addr``): loopback only.
DEFAULT_ADDR = "127.0.0.1"


def run_info(profile: str, host: str, run: str, time_scale: float = 1.0) -> dict[str, str]:
    """Label values of ``llmload_run_info``: profile name, target URL, this machine, run id, the simulator's
    ``time_scale`` (1 for a server or real time) and the versions of llmload and Locust
    (:func:`harness.records.versions`; ``unknown`` when not installed)."""
    v = versions()
    return {
        "profile": profile,
        "host": host,
        "hostname": socket.gethostname(),
        "run": run,
        "time_scale": f"{time_scale:g}",
        "version": v.get("llmload", "unknown"),
        "locust_version": v.get("locust", "unknown"),
    }


class RunCollector:
    """Builds every metric family at scrape time (a ``prometheus_client`` custom collector).

    Args:
        metrics: the run's aggregated metrics.
        info: label values of ``llmload_run_info`` (see :func:`run_info`).
        hours_to_n: N of the live estimate (the profile's first ``report.hours_to_n``).
        users: returns the current number of Locust users (None: unknown).
        in_flight: returns the number of requests in flight, summed over every process.
        clock: wall-clock time (epoch seconds), for the live estimate.
        time_scale: the simulator's time scale (compressed time < 1): the live time to N is exported in real-time
            seconds (wall seconds ÷ ``time_scale``, :mod:`harness.report.realtime`'s rule); 1 for a server.
    """

    def __init__(
        self,
        metrics: RunMetrics,
        info: dict[str, str],
        hours_to_n: int,
        users: Callable[[], int | None] = lambda: None,
        in_flight: Callable[[], int] = lambda: 0,
        clock: Callable[[], float] = time.time,
        time_scale: float = 1.0,
    ) -> None:
        self.metrics = metrics
        self.time_scale = time_scale if time_scale > 0 else 1.0
        self.info = info
        self.hours_to_n = hours_to_n
        self.users = users
        self.in_flight = in_flight
        self.clock = clock
        self.scrapes = 0
        #: CPU seconds spent serving scrapes so far (set by :meth:`Exporter.attach`; 0 when not served by one).
        self.scrape_cpu_seconds: Callable[[], float] = lambda: 0.0

    def describe(self) -> list[Metric]:
        """Nothing to pre-describe (keeps the registry from collecting at registration)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Every metric family, from the current state."""
        self.scrapes += 1
        m = self.metrics
        model = m.model
        with m.lock:
            counters = sorted(m.counters.items())
            hists = sorted((k, (list(h.counts), h.sum)) for k, h in m.hists.items())
            phase = dict(m.phase) if m.phase else None
            load_ended = m.load_ended
            halfwidth = m.until_halfwidth
            lost = len(m.workers_lost)
            cpu = sorted(m.cpu_shares().items())
            now = self.clock()
            estimates = [(est, est.seconds_to(self.hours_to_n, now)) for _, est in sorted(m.steps.items())]
            percentiles = m.window_percentiles(now)

        cfams = {name: family(name) for name in RECORD_COUNTERS}
        for (name, labels), v in counters:
            cfams[name].add_metric(list(labels), v)
        hfams = {name: family(name) for name in HISTOGRAMS}
        for (name, labels), (counts, total) in hists:
            bounds = HISTOGRAMS[name][1]
            cum, acc = [], 0
            for b, c in zip((*(floatToGoString(x) for x in bounds), "+Inf"), counts, strict=True):
                acc += c
                cum.append((b, acc))
            hfams[name].add_metric(list(labels), cum, sum_value=total)
        pfams = {name: family(name) for name in PERCENTILE_GAUGES}
        for name, window, values in percentiles:
            for p, pv in zip(PERCENTILES, values, strict=True):
                pfams[name].add_metric([model, window, str(p)], math.nan if pv is None else pv)
        yield from cfams.values()
        yield from hfams.values()
        yield from pfams.values()

        g = family("llmload_users")
        users = self.users()
        if users is not None:
            g.add_metric([model], users)
        yield g
        g = family("llmload_requests_in_flight")
        g.add_metric([model], self.in_flight())
        yield g
        g = family("llmload_target_users")
        g.add_metric([model], 0 if (phase is None or load_ended) else int(phase.get("concurrency") or 0))
        yield g
        g = family("llmload_target_requests_per_second")
        rate = phase.get("rate") if phase is not None and not load_ended else None
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            g.add_metric([model], float(rate))
        yield g
        g = family("llmload_workers_lost")
        g.add_metric([model], lost)
        yield g
        g = family("llmload_client_cpu_share")
        for proc, share in cpu:
            g.add_metric([model, proc], share)
        yield g
        g = family("llmload_step")
        if phase is not None:
            g.add_metric([model], int(phase.get("step") or 0))
        yield g
        g = family("llmload_step_start_time_seconds")
        if phase is not None:
            g.add_metric(
                [model, str(phase.get("phase")), str(phase.get("step")), str(phase.get("concurrency"))],
                float(phase.get("wall") or 0.0),
            )
        yield g
        g = family("llmload_step_rate_halfwidth_ratio")
        if halfwidth is not None and not load_ended:
            g.add_metric([model], halfwidth)
        yield g
        g = family("llmload_estimated_time_to_samples_seconds")
        for est, seconds in estimates:
            if seconds is not None:
                g.add_metric([model, str(self.hours_to_n), str(est.step), str(est.concurrency)],
                             seconds / self.time_scale)
        yield g
        info = family("llmload_run")
        info.add_metric([], {"model": model, **self.info})
        yield info
        # Self-monitoring last: the CPU counter then includes nearly all of this scrape's own work.
        own = family("llmload_exporter_scrapes")
        own.add_metric([model], self.scrapes)
        yield own
        own = family("llmload_exporter_scrape_cpu_seconds")
        own.add_metric([model], self.scrape_cpu_seconds())
        yield own


class Exporter:
    """The HTTP server of a :class:`RunCollector`, on its own registry and port.

    The server can be started (so the port is known to be free) before the collector exists: it serves an
    empty page until :meth:`attach`.

    Args:
        addr: bind address (``127.0.0.1`` by default: loopback only).
        port: TCP port; 0 lets the OS pick one (see :attr:`port` after :meth:`start`).
        collector: what to serve (or :meth:`attach` it later).
    """

    def __init__(self, addr: str = DEFAULT_ADDR, port: int = DEFAULT_PORT, collector: RunCollector | None = None):
        self.addr = addr
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector: RunCollector | None = None
        self._server: Any = None
        self._cpu_lock = threading.Lock()
        self._cpu_done = 0.0  # CPU seconds of the finished scrapes
        self._cpu_shown = 0.0  # the largest value returned (concurrent scrapes could otherwise go backwards)
        self._scrape_start = threading.local()  # thread_time() at the start of this thread's scrape
        if collector is not None:
            self.attach(collector)

    def attach(self, collector: RunCollector) -> None:
        """Serve ``collector`` from now on."""
        self.collector = collector
        collector.scrape_cpu_seconds = self.scrape_cpu_seconds
        self.registry.register(collector)  # type: ignore[arg-type]

    def scrape_cpu_seconds(self) -> float:
        """CPU seconds (``time.thread_time``) spent producing ``/metrics`` responses: every finished scrape, plus
        the one running in the calling thread so far (never less than a value returned before)."""
        t0 = getattr(self._scrape_start, "t0", None)
        running = time.thread_time() - t0 if t0 is not None else 0.0
        with self._cpu_lock:
            self._cpu_shown = max(self._cpu_shown, self._cpu_done + running)
            return self._cpu_shown

    def _timed(self, app: WSGIApplication) -> WSGIApplication:
        """``app`` measured with ``time.thread_time()`` around the whole call, in which prometheus_client's WSGI
        app collects, serializes (text or OpenMetrics) and gzips the response; only writing it to the socket
        comes after. Under gevent (Locust) the server thread is a greenlet and thread time is the OS thread's,
        which is this scrape's alone: nothing in the call blocks, so no other greenlet runs during it."""

        def timed_app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            t0 = time.thread_time()
            self._scrape_start.t0 = t0
            try:
                return app(environ, start_response)
            finally:
                self._scrape_start.t0 = None
                spent = time.thread_time() - t0
                with self._cpu_lock:
                    self._cpu_done += spent

        return timed_app

    def start(self) -> None:
        """Start serving ``/metrics`` in a daemon thread (a greenlet under gevent).

        Raises:
            OSError: the address cannot be bound (e.g. the port is in use).
        """
        self._server, _ = start_http_server(self.port, self.addr, registry=self.registry)
        self._server.set_app(self._timed(self._server.get_app()))  # the handler reads the app per request
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        """``http://ADDR:PORT/metrics``."""
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def linger(self, timeout: float) -> bool:
        """Keep serving until one more scrape has read the final state, at most ``timeout`` seconds.

        Returns at once (False) when nothing ever scraped the exporter: then no Prometheus is waiting for the
        final totals. Returns True when a scrape started after this call (and had 0.5 s to be sent).
        """
        c = self.collector
        if timeout <= 0 or c is None or c.scrapes == 0 or self._server is None:
            return False
        mark = c.scrapes
        log.info(
            "waiting up to %.0f s for a last Prometheus scrape of %s (--metrics-linger)", timeout, self.url
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if c.scrapes > mark:
                gevent.sleep(0.5)  # the scrape's response is written after collect() returns
                return True
            gevent.sleep(0.05)
        return False

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
