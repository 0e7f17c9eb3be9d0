"""llmload's command-line options, added to Locust's parser, and the checks of the ``--metrics-*`` values.

``--profile`` is Locust's own option (a free-form run label there); llmload reads it as the profile path
(:func:`harness.config.resolve_profile_path`). The others are added here and by :mod:`harness.locust.form` (the
web UI's start form), each moved into one argument group, :data:`GROUP` (:func:`into_group`), so that
``locust -f locustfiles/k26.py --help`` lists them together with their help text. Locust prints its help before
it imports the locustfile; :mod:`harness.locust_help` defers it, and importing this module puts it back
(:func:`harness.locust_help.restore_help`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, NoReturn

from harness.exporter import DEFAULT_ADDR, DEFAULT_PORT
from harness.locust_help import restore_help

__all__ = ["GROUP", "MetricsOptions", "add_options", "into_group", "metrics_options"]

#: Title of the argument group holding llmload's options in Locust's ``--help``.
GROUP = "llmload"
_GROUP_DESCRIPTION = (
    "Options of llmload's locustfiles (the profile itself is Locust's --profile: a path, or a name in profiles/). "
    "Reference: docs/reference/cli.md."
)


def into_group(parser: Any, *actions: argparse.Action) -> None:
    """Move ``actions`` (already added to ``parser`` with ``parser.add_argument``, so Locust's web-UI attributes
    are set) into the argument group :data:`GROUP`, created on first use; ``--help`` lists them there."""
    group = next((g for g in parser._action_groups if g.title == GROUP), None)
    if group is None:
        group = parser.add_argument_group(GROUP, _GROUP_DESCRIPTION)
    for action in actions:
        for g in parser._action_groups:
            if action in g._group_actions:
                g._group_actions.remove(action)
        group._group_actions.append(action)


def add_options(parser: Any, **_: Any) -> None:
    """Add ``--output-dir`` and the ``--metrics-*`` options to Locust's ``parser``, in the ``llmload`` group of
    ``--help`` (called by :func:`harness.locust.register`'s ``init_command_line_parser`` listener)."""
    into_group(parser, *_option_actions(parser))


def _option_actions(parser: Any) -> list[argparse.Action]:
    return [
        parser.add_argument(
            "--output-dir", default=None, help="directory for run directories (default: profile output.dir)"
        ),
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            include_in_web_ui=False,
            help=f"port of the Prometheus exporter (default {DEFAULT_PORT}; 0 picks a free port)",
        ),
        parser.add_argument(
            "--metrics-addr",
            default=None,
            include_in_web_ui=False,
            help=f"bind address of the Prometheus exporter (default {DEFAULT_ADDR}; 0.0.0.0 for every interface)",
        ),
        parser.add_argument(
            "--no-metrics", action="store_true", default=False, include_in_web_ui=False, help="no Prometheus exporter"
        ),
        parser.add_argument(
            "--metrics-linger",
            type=float,
            default=30.0,
            include_in_web_ui=False,
            help="at exit, if the exporter was scraped during the run, wait up to this many seconds for one more "
            "scrape so Prometheus gets the final totals (default 30; 0: exit at once)",
        ),
    ]


restore_help()  # the locustfile is being imported: Locust may print its help now (harness.locust_help)


@dataclass(frozen=True)
class MetricsOptions:
    """Where the exporter serves, from ``--metrics-addr`` / ``--metrics-port`` / ``--metrics-linger``."""

    addr: str
    #: TCP port, 0-65535 (0: the OS picks one).
    port: int
    #: The address or the port was given on the command line (then failing to bind it stops the run).
    explicit: bool
    #: Seconds to wait at exit for a last scrape (>= 0).
    linger: float


def _fail(message: str) -> NoReturn:
    sys.stderr.write(f"llmload: {message}\n")
    raise SystemExit(2)


def metrics_options(opts: Any) -> MetricsOptions | None:
    """The exporter's settings from Locust's parsed options (attributes missing: defaults); None with
    ``--no-metrics``.

    Raises:
        SystemExit: code 2, one line on stderr, for a negative or NaN ``--metrics-linger`` or a port outside
            0-65535.
    """
    if getattr(opts, "no_metrics", False):
        return None
    linger = getattr(opts, "metrics_linger", 0.0)
    if linger is not None and not float(linger) >= 0.0:
        _fail(f"--metrics-linger {linger}: must be >= 0 seconds (0: do not wait)")
    port_arg = getattr(opts, "metrics_port", None)
    addr_arg = getattr(opts, "metrics_addr", None)
    port = DEFAULT_PORT if port_arg is None else int(port_arg)
    if not 0 <= port <= 65535:
        _fail(f"--metrics-port {port}: not a TCP port (0-65535; 0 picks a free one)")
    return MetricsOptions(
        addr=addr_arg or DEFAULT_ADDR,
        port=port,
        explicit=port_arg is not None or addr_arg is not None,
        linger=float(linger or 0.0),
    )
