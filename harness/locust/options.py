"""llmload's command-line options, added to Locust's parser, and the checks of the ``--metrics-*`` values.

``--profile`` is Locust's own option (a free-form run label there); llmload reads it as the profile path
(:func:`harness.config.resolve_profile_path`). The others are added here and by :mod:`harness.locust.form` (the
web UI's start form), each in one argument group, :data:`GROUP` (:func:`add_option`), so that
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

__all__ = [
    "GROUP", "MetricsOptions", "add_option", "add_options", "check_processes", "group_of", "metrics_options",
]

#: Title of the argument group holding llmload's options in Locust's ``--help``.
GROUP = "llmload"
_GROUP_DESCRIPTION = (
    "Options of llmload's locustfiles (the profile itself is Locust's --profile: a path, or a name in profiles/). "
    "Reference: docs/reference/cli.md."
)


#: The attribute of Locust's parser holding llmload's argument group (:func:`group_of`).
_GROUP_ATTR = "llmload_group"


def group_of(parser: Any) -> Any:
    """The argument group :data:`GROUP` of ``parser``, created (with ``parser.add_argument_group``) on first use and
    kept on the parser itself, so each parser Locust builds has one group, found without argparse's private
    lists."""
    group = getattr(parser, _GROUP_ATTR, None)
    if group is None:
        group = parser.add_argument_group(GROUP, _GROUP_DESCRIPTION)
        setattr(parser, _GROUP_ATTR, group)
    return group


def add_option(parser: Any, *flags: str, include_in_web_ui: bool = True, is_secret: bool = False,
               **kwargs: Any) -> argparse.Action:
    """Add an option to llmload's group of Locust's ``parser`` (:func:`group_of`; ``--help`` lists it there):
    ``flags`` and ``kwargs`` as ``argparse``'s ``add_argument``; ``include_in_web_ui`` and ``is_secret`` as
    Locust's own ``add_argument`` takes them (the action's attributes Locust's web UI reads; ``is_required`` and
    ``is_multiple`` False).

    Raises:
        argparse.ArgumentError: the option exists already.
    """
    action: argparse.Action = group_of(parser).add_argument(*flags, **kwargs)
    for name, value in (("include_in_web_ui", include_in_web_ui), ("is_secret", is_secret),
                        ("is_required", False), ("is_multiple", False)):
        setattr(action, name, value)
    return action


def add_options(parser: Any, **_: Any) -> None:
    """Add ``--output-dir`` and the ``--metrics-*`` options to Locust's ``parser``, in the ``llmload`` group of
    ``--help`` (called by :func:`harness.locust.register`'s ``init_command_line_parser`` listener), and make the
    parser's ``parse_args`` check ``--processes`` (:func:`check_processes`) before Locust forks anything."""
    _option_actions(parser)
    profile = getattr(parser, "_option_string_actions", {}).get("--profile")
    if profile is not None:  # Locust's own option, which llmload reads as its profile: say so in --help
        profile.help = ("llmload: the profile, a YAML file or the name of one in profiles/ (demo, k26, ...; default "
                        "demo, or k26 with --host)")
    parse = getattr(parser, "parse_args", None)
    if callable(parse) and not getattr(parse, "llmload_checks_processes", False):
        def parse_and_check(*args: Any, **kwargs: Any) -> Any:
            parsed = parse(*args, **kwargs)
            check_processes(parsed)
            return parsed

        parse_and_check.llmload_checks_processes = True  # type: ignore[attr-defined]
        parser.parse_args = parse_and_check


def check_processes(opts: Any) -> None:
    """Check Locust's ``--processes`` in parsed ``opts`` (Locust's ``main()`` parses, then forks).

    ``--processes 0`` (or ``LOCUST_PROCESSES=0``) is an error: Locust would silently run one process, as without
    the option. ``--processes N --worker`` forks N workers for a master started separately: that is said on stderr
    at once (with where they look for it), since Locust's workers wait for it silently for 30 s, then warn for
    about 5 minutes before a ``ConnectionError``.

    Raises:
        SystemExit: code 2, one line on stderr, for ``--processes 0``.
    """
    n = getattr(opts, "processes", None)
    if n is None:
        return
    if n == 0:
        _fail("--processes 0: forks no worker process. Give N >= 1 (N workers and a master in this terminal), -1 "
              "(one worker per CPU), or leave --processes out to run in this one process (docs/guides/distributed.md)")
    if getattr(opts, "worker", False):
        host, port = getattr(opts, "master_host", "127.0.0.1"), getattr(opts, "master_port", 5557)
        sys.stderr.write(
            f"llmload: --processes {n} --worker: forking {n if n > 0 else 'one per CPU'} worker process(es) that "
            f"wait for a master at {host}:{port} (start it with `locust -f <locustfile> --master`, or drop --worker "
            "to run the master here too); Locust's workers wait silently for 30 s, then warn, and give up after "
            "about 5 minutes (docs/guides/distributed.md)\n"
        )


def _option_actions(parser: Any) -> list[argparse.Action]:
    return [
        add_option(
            parser, "--output-dir", default=None, help="directory for run directories (default: profile output.dir)"
        ),
        add_option(
            parser,
            "--metrics-port",
            type=int,
            default=None,
            include_in_web_ui=False,
            help=f"port of the Prometheus exporter (default {DEFAULT_PORT}; 0 picks a free port)",
        ),
        add_option(
            parser,
            "--metrics-addr",
            default=None,
            include_in_web_ui=False,
            help=f"bind address of the Prometheus exporter (default {DEFAULT_ADDR}; 0.0.0.0 for every interface)",
        ),
        add_option(
            parser, "--no-metrics", action="store_true", default=False, include_in_web_ui=False,
            help="no Prometheus exporter",
        ),
        add_option(
            parser,
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
