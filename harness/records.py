"""Run directories: metadata, per-request records and phase boundaries, each written as it happens.

Layout of one run directory (``<output.dir>/<YYYYmmdd-HHMMSS>-<profile>/``):

``run.json``
    Metadata written at start and rewritten at the end: profile (as loaded, API key *name* only), target base
    URL and model, simulator settings when the built-in simulator was the target, versions, host, argv with
    secrets removed, ``start_wall`` / ``end_wall`` (epoch seconds), ``status`` ("running" | "finished" |
    "interrupted" | "warmup_failed"); a web-UI run adds ``mode`` and ``form`` (the start form's values), and
    ``cut_off`` (requests still in flight when the drain timeout ended, or on a worker lost mid-run: not
    recorded) when any were; a master adds ``workers`` (worker ids seen), ``workers_lost`` and ``cut_off_unknown``
    (:mod:`harness.locust.lost`).
``records.jsonl``
    One JSON object per request (:meth:`harness.result.RequestResult.to_record`, fields in ``docs/records.md``),
    appended and flushed when the request completes, so an interrupted run keeps every record written so far;
    :func:`read_records` reads them back as :class:`~harness.result.RequestResult`.
``records.parts/``
    Parquet copies of completed byte ranges of ``records.jsonl`` (:mod:`harness.report.parts`), written during the
    run by an idle-priority child process (:mod:`harness.report.parts_writer`) started once the file holds
    :data:`PARTS_AFTER_BYTES`, so the report at the end parses only the JSON after the last part. A cache:
    deleting it is safe, a stale part is ignored.
``phases.jsonl``
    ``{"event": "phase_start", "phase", "step", "concurrency", "wall", "planned_duration"}`` at each phase
    start, ``{"event": "load_end", "wall"}`` when the last step ends or a stop begins (Ctrl-C, SIGTERM, the web
    UI's Stop; once a run; in-flight requests then drain),
    ``{"event": "worker_lost", "wall", "since_wall", "worker", "state", "users", "in_flight"}`` when the master
    sees a worker lost while the load runs (``{"event": "worker_back", "wall", "worker"}`` when a missing one
    answers again; :mod:`harness.locust.lost`), and
    ``{"event": "run_end", "wall"}`` when the run directory is closed.
``report.md`` / ``report.json``
    Written by :mod:`harness.report`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

import orjson

from harness.jsonl import read_jsonl
from harness.redact import MARKER, redact_text
from harness.result import RequestResult

__all__ = [
    "REQUIRED_RECORD_FIELDS",
    "EventHook",
    "RunDir",
    "missing_record_fields",
    "not_a_record_message",
    "read_phases",
    "read_records",
    "redact_url",
    "versions",
]

#: Bytes of records after which :class:`RunDir` starts the Parquet part converter (its part size: before, there is
#: nothing to convert, and a short run's report parses its JSON in well under a second).
PARTS_AFTER_BYTES = 16 << 20

_SECRET_ARG = re.compile(r"(?i)(key|token|secret|password)")


def versions() -> dict[str, str]:
    """Versions of Python (``python``), the platform (``platform``), the harness (``llmload``) and its main
    dependencies, by distribution name; a distribution that is not installed has no key. The one source of
    version strings: ``run.json`` and the exporter's ``llmload_run_info`` both use it."""
    out = {"python": platform.python_version(), "platform": platform.platform()}
    from importlib import metadata

    for dist in ("llmload", "locust", "gevent", "orjson", "pydantic", "prometheus-client"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _client_path() -> str:
    """``native`` or ``python``: the per-read stream path of this process (:data:`harness.chunkpath.CLIENT_PATH`;
    workers of a distributed run on the same install run the same one)."""
    from harness.chunkpath import CLIENT_PATH  # the client's modules, only when a run directory is made

    return CLIENT_PATH


_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]+@")
#: A secret-looking query parameter in a URL within text: ``?api-key=``, ``&token=``... (its value is group 2).
_SECRET_QUERY = re.compile(
    r"(?i)([?&][^=&\s#]*(?:auth|api[-_]?key|key|token|secret|passw|credential|sig)[^=&\s#]*=)([^&\s#\"']+)"
)


def redact_url(text: str) -> str:
    """``text`` with the credentials of any URL (``scheme://user:password@host``) replaced by ``***`` and the value
    of any secret-looking query parameter (``?api-key=…``) by :data:`harness.redact.MARKER`."""
    return _SECRET_QUERY.sub(lambda m: m.group(1) + MARKER, _URL_USERINFO.sub(r"\1***@", text))


def _clean_argv(argv: list[str]) -> list[str]:
    """argv with the value of any secret-looking option and URL credentials replaced by ``***``."""
    out: list[str] = []
    hide = False
    for a in map(redact_url, argv):
        if hide:
            out.append("***")
            hide = False
            continue
        if a.startswith("-") and _SECRET_ARG.search(a):
            if "=" in a:
                out.append(a.split("=", 1)[0] + "=***")
            else:
                out.append(a)
                hide = True
            continue
        out.append(a)
    return out


#: The payload type of an :class:`EventHook`: a :class:`RequestResult` (records) or a phase event dict.
P = TypeVar("P")


class EventHook(Generic[P]):
    """Listeners of one kind of event, called in the order they were added (Locust's ``EventHook`` style, without
    importing Locust: the report reads run directories in processes that must not be gevent-patched).

    ``hook.add_listener(fn)`` registers ``fn`` and returns it (so it can decorate); ``hook.fire(payload)`` calls every
    listener with ``payload``. An exception in a listener propagates to the caller of :meth:`fire`, and the
    listeners after it are not called.
    """

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: list[Callable[[P], object]] = []

    def add_listener(self, listener: Callable[[P], object]) -> Callable[[P], object]:
        """Call ``listener(payload)`` on every :meth:`fire` from now on; returns ``listener``."""
        self._listeners.append(listener)
        return listener

    def remove_listener(self, listener: Callable[[P], object]) -> None:
        """Stop calling ``listener``.

        Raises:
            ValueError: it was not added.
        """
        self._listeners.remove(listener)

    def fire(self, payload: P) -> None:
        """Call every listener with ``payload``, in order."""
        for listener in self._listeners:
            listener(payload)


@dataclass
class RunDir:
    """An open run directory. Create with :meth:`create`; :meth:`close` it at the end of the run.

    Whatever must see every record or phase event (the exporter's metrics, the client lag watch) listens to
    :attr:`on_record` / :attr:`on_phase`, which fire after the line is written and flushed, in the writing thread.
    """

    path: Path
    meta: dict[str, Any]
    _records: IO[bytes] | None = None
    _phases: IO[bytes] | None = None
    #: Records written (warm-up included).
    count: int = 0
    #: Failed records written, warm-up excluded (the process exit code: 1 when any, see docs/reference/exit-codes.md).
    failed: int = 0
    #: Fired with each request record written to ``records.jsonl`` (this process's and, on a master, its workers'),
    #: as a typed :class:`RequestResult` (read once from a worker's dict).
    on_record: EventHook[RequestResult] = field(default_factory=EventHook, repr=False, compare=False)
    #: Fired with each event written to ``phases.jsonl`` (``phase_start``, ``load_end``, ``run_end``).
    on_phase: EventHook[dict[str, Any]] = field(default_factory=EventHook, repr=False, compare=False)
    #: The run's secret values (:meth:`harness.config.TargetSpec.secret_values`): replaced by
    #: :data:`harness.redact.MARKER` in ``run.json`` and in every record written (failed records also lose any
    #: ``Bearer …`` / ``sk-…`` token), before listeners see the record.
    secrets: tuple[str, ...] = ()
    #: Start the Parquet part converter once ``records.jsonl`` holds :data:`PARTS_AFTER_BYTES` (module docstring).
    parts: bool = True
    _bytes: int = field(default=0, repr=False, compare=False)
    _converter: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)
    _converter_tried: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def create(
        cls, base: str | os.PathLike[str], name: str, meta: dict[str, Any], secrets: tuple[str, ...] = ()
    ) -> RunDir:
        """Create ``base/<timestamp>-<name>/`` (a suffix keeps it unique) and write ``run.json``.

        Args:
            base: the output directory (created if missing).
            name: the profile name, used in the directory name.
            meta: metadata to store (profile, target...); versions, host, argv and start time are added.
            secrets: the run's secret values (:attr:`secrets`), redacted in everything written.

        Raises:
            OSError: when the directory cannot be created or written.
        """
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name) or "run"
        root = Path(base)
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{stamp}-{safe}"
        n = 1
        while True:
            try:
                path.mkdir()
                break
            except FileExistsError:
                n += 1
                path = root / f"{stamp}-{safe}-{n}"
        full = {
            "run_id": path.name,
            "status": "running",
            "start_wall": time.time(),
            "end_wall": None,
            "hostname": socket.gethostname(),
            "argv": _clean_argv(sys.argv),
            "versions": versions(),
            "client_path": _client_path(),
            **meta,
        }
        rd = cls(path, full, secrets=tuple(s for s in secrets if s))
        rd.write_meta()
        rd._records = open(path / "records.jsonl", "ab")
        rd._phases = open(path / "phases.jsonl", "ab")
        return rd

    @property
    def closed(self) -> bool:
        """:meth:`close` was called: nothing more can be written."""
        return self._records is None

    def write_meta(self) -> None:
        """(Re)write ``run.json`` atomically."""
        tmp = self.path / "run.json.tmp"
        tmp.write_text(redact_text(json.dumps(self.meta, indent=2, default=str), self.secrets) + "\n")
        tmp.replace(self.path / "run.json")

    def write_record(self, record: RequestResult | dict[str, Any]) -> None:
        """Append one request record, flush it to the OS, then fire :attr:`on_record` with the typed record.

        Args:
            record: a result (this process's users) or its record dict (a worker's batch, as sent over the wire);
                a dict is read once with :meth:`RequestResult.from_record` so every listener gets the same object.

        Raises:
            ValueError: the run directory is closed, or a record dict of a schema this harness cannot read.
        """
        f = self._records
        if f is None:
            raise ValueError(f"{self.path}: run directory is closed")
        if isinstance(record, RequestResult):
            res, line = record, record.to_record()
        else:
            res, line = RequestResult.from_record(record), record
        data = orjson.dumps(line)
        if not res.ok or any(s.encode() in data for s in self.secrets):
            clean = redact_text(data.decode(), self.secrets).encode()
            if clean != data:
                data = clean
                res = RequestResult.from_record(orjson.loads(clean))
        data += b"\n"
        f.write(data)
        f.flush()
        self.count += 1
        self._bytes += len(data)
        if self._bytes >= PARTS_AFTER_BYTES and self.parts and not self._converter_tried:
            self._start_converter()
        if not res.ok and res.phase != "warmup":
            self.failed += 1
        self.on_record.fire(res)

    def _start_converter(self) -> None:
        """Start the part converter (once: a failure to start it is not retried, the report parses the JSON)."""
        self._converter_tried = True
        env = {**os.environ, "POLARS_MAX_THREADS": "1"}
        try:
            self._converter = subprocess.Popen(
                [sys.executable, "-m", "harness.report.parts_writer", str(self.path), "--parent", str(os.getpid()),
                 "--part-bytes", str(PARTS_AFTER_BYTES)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
        except OSError:
            self._converter = None

    def _stop_converter(self) -> None:
        """Stop the part converter (SIGTERM; a part being written is abandoned, never left half-written)."""
        proc, self._converter = self._converter, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def write_phase(self, event: dict[str, Any]) -> None:
        """Append one phase event (``phase_start`` / ``load_end`` / ``worker_lost`` / ``run_end``), flush it, then
        fire :attr:`on_phase`.

        Raises:
            ValueError: the run directory is closed.
        """
        f = self._phases
        if f is None:
            raise ValueError(f"{self.path}: run directory is closed")
        f.write(orjson.dumps(event) + b"\n")
        f.flush()
        self.on_phase.fire(event)

    def close(self, status: str = "finished") -> None:
        """Record the end time and status in ``run.json`` and close the files (idempotent)."""
        if self._records is None:
            return
        self._stop_converter()  # before the report parses the rest: both would compete for the cores
        now = time.time()
        self.write_phase({"event": "run_end", "wall": now})
        self.meta["end_wall"] = now
        self.meta["status"] = status
        self.meta["records"] = self.count
        self.write_meta()
        for f in (self._records, self._phases):
            if f is not None:
                f.close()
        self._records = self._phases = None


#: Keys every request record carries (the client writes every field, and every layout so far had these: they
#: place a record in a step and in time and say its outcome). A JSON object without one of them is not a request
#: record: :func:`read_records` and :func:`harness.report.frame.read_frame` refuse it, naming the line. A key
#: present with a null value is a record (null reads as the field's default, as for every non-nullable field).
REQUIRED_RECORD_FIELDS: tuple[str, ...] = ("step", "start_wall", "ok")


def missing_record_fields(rec: dict[str, Any]) -> list[str]:
    """The :data:`REQUIRED_RECORD_FIELDS` that ``rec`` (one parsed line) has no key for, in that order."""
    return [k for k in REQUIRED_RECORD_FIELDS if k not in rec]


def not_a_record_message(path: str | os.PathLike[str], line: int, missing: list[str]) -> str:
    """``<path>:<line>: not a request record (missing a, b)``: the message for a line without required fields."""
    return f"{os.fspath(path)}:{line}: not a request record (missing {', '.join(missing)})"


def _object_line(path: Path, k: int) -> int:
    """1-based line number of the ``k``-th (0-based) non-blank line of ``path`` that is a JSON object."""
    seen = -1
    with open(path, "rb") as f:
        for i, line in enumerate(f):
            if not line.strip():
                continue
            try:
                is_object = isinstance(orjson.loads(line), dict)
            except orjson.JSONDecodeError:
                is_object = False
            if is_object:
                seen += 1
                if seen == k:
                    return i + 1
    return 0  # not reached: the object was read from this file


def read_records(run_dir: str | os.PathLike[str]) -> list[RequestResult]:
    """All request records of a run directory (every ``records*.jsonl`` file), in file order, read with
    :meth:`RequestResult.from_record`; lines that are not JSON objects are skipped, a torn last line too. Keys
    that are not record fields are kept (in ``extra``).

    Raises:
        ValueError: a line before the last of a file is not valid JSON (names the file and line), a JSON object
            lacks a :data:`REQUIRED_RECORD_FIELDS` key (``<file>:<line>: not a request record (missing ...)``),
            or a record has a schema version this harness cannot read.
    """
    from_record = RequestResult.from_record
    out: list[RequestResult] = []
    for p in sorted(Path(run_dir).glob("records*.jsonl")):
        for k, r in enumerate(r for r in read_jsonl(p, missing_ok=True) if isinstance(r, dict)):
            res = from_record(r)  # first: a record of a newer schema is refused as such
            missing = missing_record_fields(r)
            if missing:
                raise ValueError(not_a_record_message(p, _object_line(p, k), missing))
            out.append(res)
    return out


def read_phases(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The phase events of a run directory (JSON objects), in order; none when ``phases.jsonl`` is missing.

    Raises:
        ValueError: a line before the last is not valid JSON.
    """
    return [e for e in read_jsonl(Path(run_dir) / "phases.jsonl", missing_ok=True) if isinstance(e, dict)]
