"""Command line of the simulator: ``python -m harness.sim serve ...`` and ``python -m harness.sim presets``."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
from collections.abc import Sequence

from harness.sim.engine import DEFAULT_MAX_LAG
from harness.sim.faults import FAULT_TYPES, OPTION_NAMES, FaultConfig, FaultError
from harness.sim.presets import PRESETS, get_preset
from harness.sim.protocol import FLAVOUR_ALIASES, FLAVOURS

READY_PREFIX = "READY "

#: ``--fault-X RATE`` options: option suffix -> fault type.
RATE_OPTIONS = OPTION_NAMES


def build_parser(prog: str = "python -m harness.sim") -> argparse.ArgumentParser:
    """Argument parser for the simulator CLI (``prog``: the name its usage and --help show)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="OpenAI-compatible reasoning-model simulator (continuous-batching timing model).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser(
        "serve",
        help="run the simulator server",
        description=(
            "Serve POST /v1/chat/completions, GET /v1/models, /health and /metrics. Prints "
            "'READY http://HOST:PORT' on stdout once listening (port 0 = pick a free port). "
            "All durations are simulated seconds multiplied by --time-scale."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind")
    serve.add_argument("--port", type=int, default=8000, help="TCP port to bind (0 = any free port)")
    serve.add_argument("--preset", default="demo", choices=sorted(PRESETS), help="performance + length model")
    serve.add_argument("--flavour", "--flavor", default="vllm", choices=[*FLAVOURS, *FLAVOUR_ALIASES],
                       metavar="{" + ",".join(FLAVOURS) + "}",
                       help="stream flavour: vllm (delta.reasoning), vllm-old / sglang (delta.reasoning_content), "
                            "openai (hidden reasoning, usage.completion_tokens_details.reasoning_tokens only), "
                            "llamacpp (llama-server: keep-alive comments, usage + timings sent unasked)")
    serve.add_argument("--time-scale", type=float, default=1.0,
                       help="multiply every simulated duration by this factor (0.1 = 10x faster)")
    serve.add_argument("--seed", type=int, default=0, help="seed of the output-length, acceptance and fault draws")
    serve.add_argument("--model", default="sim-reasoner", help="served model id")
    serve.add_argument("--max-num-seqs", type=int, default=None,
                       help="max concurrently running sequences; more wait in a queue (None = the preset's)")
    serve.add_argument("--api-key", default=None,
                       help="require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)")
    serve.add_argument("--tokens-per-chunk", type=int, default=1,
                       help="tokens per SSE event, like vLLM --stream-interval (phase changes split events)")
    serve.add_argument("--max-lag", type=float, default=DEFAULT_MAX_LAG,
                       help="real seconds of engine lateness (CPU starvation, host stalls) caught up with "
                            "back-to-back steps, so throughput does not depend on the host; a longer stall is "
                            "absorbed as one long step")
    serve.add_argument("--sse-ping-interval", type=float, default=None,
                       help="send an SSE ':' keep-alive comment after this many silent simulated seconds "
                            "(default: 30 for llamacpp, off for the other flavours; 0 = off)")
    serve.add_argument("--truth-log", default=None, metavar="PATH",
                       help="append the ground truth (per request: receipt, headers and every chunk's write time "
                            "and tokens, finish, injected fault) to PATH as JSON lines")
    serve.add_argument("--prefix-cache-tokens", type=int, default=0, metavar="N",
                       help="prefix cache of N tokens (LRU of 16-token prompt blocks): a prompt's cached prefix is "
                            "not prefilled again and the usage reports prompt_tokens_details.cached_tokens "
                            "(0 = off)")
    serve.add_argument("--drift-per-hour", type=float, default=0.0, metavar="F",
                       help="drift: decode speed (tokens/s per sequence) falls by the fraction F per simulated hour "
                            "since the server started, compounding; every step and prefill lengthens by 1/(1-F) "
                            "per hour, so TTFT rises (F in [0, 1); 0 = off)")
    spec = serve.add_argument_group("speculative decoding")
    spec.add_argument("--spec-tokens", type=int, default=0, metavar="K",
                      help="draft tokens per engine step (0 = off); a chunk then carries 1 + accepted tokens")
    spec.add_argument("--spec-acceptance", type=float, default=0.7, metavar="P",
                      help="probability that each draft token is accepted (until the first rejection)")
    spec.add_argument("--spec-overhead", type=float, default=0.05,
                      help="extra step time per draft token, as a fraction of a plain step")
    faults = serve.add_argument_group(
        "faults", "rates are probabilities per chat request (at most one fault per request; rates sum <= 1); "
                  "a request can also ask for one fault with the body field 'sim_fault' or the header "
                  "'x-sim-fault' (e.g. 'drop; after_tokens=5')"
    )
    for suffix, kind in RATE_OPTIONS.items():
        faults.add_argument(f"--fault-{suffix}", type=float, default=0.0, metavar="RATE", dest=f"rate_{kind}",
                            help=f"rate of fault {kind}")
    faults.add_argument("--fault-restart-every", type=float, default=None, metavar="S",
                        help="restart the server every S simulated seconds (in-flight requests fail)")
    faults.add_argument("--restart-downtime", type=float, default=2.0, metavar="S",
                        help="simulated seconds the port stays closed during a restart")
    faults.add_argument("--stall-seconds", type=float, default=10.0, metavar="S",
                        help="duration of stall_first / stall_chunk faults, simulated seconds")
    faults.add_argument("--slow-headers-seconds", type=float, default=10.0, metavar="S",
                        help="delay of slow_headers faults, simulated seconds")
    faults.add_argument("--retry-after", type=int, default=1, metavar="S",
                        help="Retry-After header of 429/503 faults, whole seconds (not time-scaled)")
    faults.add_argument("--fault-grace", type=int, default=0, metavar="N",
                        help="never fault the first N chat requests by rate (e.g. 1 spares a warm-up)")
    faults.add_argument("--fault-seed", type=int, default=None, help="seed of the fault draws (default: --seed)")
    group = serve.add_argument_group(
        "preset overrides", "durations in simulated seconds (before --time-scale); None = the preset's value"
    )
    group.add_argument("--decode-base", type=float, default=None, help="fixed cost of one engine step, s")
    group.add_argument("--decode-per-seq", type=float, default=None, help="step cost per decoding sequence, s")
    group.add_argument("--prefill-base", type=float, default=None, help="fixed prefill cost, s")
    group.add_argument("--prefill-per-token", type=float, default=None, help="prefill cost per prompt token, s")
    group.add_argument("--max-model-len", type=int, default=None, help="context length, tokens")
    group.add_argument("--reasoning-mean", type=float, default=None, help="mean reasoning tokens (normal prompts)")
    group.add_argument("--answer-mean", type=float, default=None, help="mean answer tokens (normal prompts)")
    group.add_argument("--length-sigma", type=float, default=None,
                       help="log-space spread of both length draws (0 = fixed lengths)")
    group.add_argument("--long-factor", type=float, default=None,
                       help="length multiplier for 'guide' / 'comprehensive' prompts")
    serve.add_argument("--exit-on-stdin-eof", action="store_true",
                       help="exit when stdin closes (the launcher uses this so the server dies with its parent)")
    serve.add_argument("--log-level", default="WARNING", help="logging level (logs go to stderr)")
    sub.add_parser("presets", help="print the presets and their model throughput at C=1..128")
    return parser


def _watch_stdin(stop: object) -> None:
    """Call ``stop()`` when stdin reaches EOF (parent died or closed the pipe)."""
    from gevent.os import make_nonblocking, nb_read

    fd = sys.stdin.fileno()
    make_nonblocking(fd)
    try:
        while nb_read(fd, 4096):
            pass
    except OSError:
        pass
    stop()  # type: ignore[operator]


def _mask_secrets(argv: Sequence[str]) -> list[str]:
    """``argv`` with the value of ``--api-key`` replaced by ``***`` (it is recorded in the truth log)."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append("***")
            hide = False
        elif a == "--api-key":
            out.append(a)
            hide = True
        elif a.startswith("--api-key="):
            out.append("--api-key=***")
        else:
            out.append(a)
    return out


def fault_config(args: argparse.Namespace) -> FaultConfig | None:
    """The fault settings of the command line (None when no rate and no periodic restart is set).

    Raises:
        FaultError: a rate outside [0, 1] or rates summing to more than 1.
    """
    rates = {kind: getattr(args, f"rate_{kind}") for kind in FAULT_TYPES if hasattr(args, f"rate_{kind}")}
    rates = {k: v for k, v in rates.items() if v}
    cfg = FaultConfig(
        rates=rates,
        stall_seconds=args.stall_seconds,
        slow_headers_seconds=args.slow_headers_seconds,
        retry_after=args.retry_after,
        restart_every=args.fault_restart_every,
        restart_downtime=args.restart_downtime,
        grace=args.fault_grace,
        seed=args.seed if args.fault_seed is None else args.fault_seed,
    )
    return cfg


def serve(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    """Run the server until SIGTERM/SIGINT (or stdin EOF with ``--exit-on-stdin-eof``)."""
    import gevent
    from gevent.event import Event

    from harness.sim.server import SimConfig, SimServer

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sigma = args.length_sigma
    preset = get_preset(args.preset).with_overrides(
        decode_base=args.decode_base,
        decode_per_seq=args.decode_per_seq,
        prefill_base=args.prefill_base,
        prefill_per_token=args.prefill_per_token,
        max_model_len=args.max_model_len,
        reasoning_mean=args.reasoning_mean,
        answer_mean=args.answer_mean,
        reasoning_sigma=sigma,
        answer_sigma=sigma,
        long_factor=args.long_factor,
    )
    if preset.step_table is not None and (args.decode_base is not None or args.decode_per_seq is not None):
        preset = dataclasses.replace(preset, step_table=None)  # the parametric step model was asked for
    config = SimConfig(
        host=args.host, port=args.port, preset=preset, flavour=args.flavour, time_scale=args.time_scale,
        seed=args.seed, model=args.model, max_num_seqs=args.max_num_seqs, api_key=args.api_key,
        tokens_per_chunk=args.tokens_per_chunk, max_lag=args.max_lag, spec_tokens=args.spec_tokens,
        spec_acceptance=args.spec_acceptance, spec_overhead=args.spec_overhead,
        sse_ping_interval=args.sse_ping_interval, truth_log=args.truth_log, faults=fault_config(args),
        prefix_cache_tokens=args.prefix_cache_tokens, drift_per_hour=args.drift_per_hour, argv=_mask_secrets(argv),
    )
    server = SimServer(config)
    server.start()
    done = Event()
    gevent.signal_handler(signal.SIGTERM, done.set)
    gevent.signal_handler(signal.SIGINT, done.set)
    if args.exit_on_stdin_eof:
        gevent.spawn(_watch_stdin, done.set)
    sys.stdout.write(f"{READY_PREFIX}{server.url}\n")
    sys.stdout.flush()
    logging.getLogger("harness.sim").info("serving %s preset=%s flavour=%s time_scale=%s", server.url,
                                          preset.name, config.flavour, args.time_scale)
    done.wait()
    server.stop(timeout=0.5)
    return 0


def print_presets() -> int:
    """Print every preset with its model per-stream / aggregate decode rate (tokens/s)."""
    for preset in PRESETS.values():
        print(f"{preset.name}: {preset.describe()}")
        if preset.step_seconds(1) <= 0:
            continue
        for n in (1, 8, 16, 32, 64, 128):
            print(f"  C={n:<4d} per-stream {preset.per_stream_rate(n):7.1f} tok/s   "
                  f"aggregate {preset.aggregate_rate(n):8.1f} tok/s")
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "python -m harness.sim") -> int:
    """CLI entry point (``prog``: the name usage and --help show)."""
    parser = build_parser(prog)
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw)
    if args.command == "serve":
        if args.time_scale < 0:
            parser.error("--time-scale must be >= 0")
        if args.tokens_per_chunk < 1:
            parser.error("--tokens-per-chunk must be >= 1")
        if args.spec_tokens < 0 or not 0.0 <= args.spec_acceptance <= 1.0:
            parser.error("--spec-tokens must be >= 0 and --spec-acceptance in [0, 1]")
        if args.prefix_cache_tokens != 0 and args.prefix_cache_tokens < 16:
            parser.error("--prefix-cache-tokens must be 0 (off) or >= 16 (one block)")
        if not 0.0 <= args.drift_per_hour < 1.0:
            parser.error(f"--drift-per-hour must be in [0, 1) (a fraction per simulated hour), "
                         f"got {args.drift_per_hour}")
        try:
            fault_config(args)
        except FaultError as e:
            parser.error(str(e))
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        return serve(args, raw)
    return print_presets()
