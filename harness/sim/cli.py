"""Command line of the simulator: ``python -m harness.sim serve ...`` and ``python -m harness.sim presets``."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from harness.sim.presets import PRESETS, get_preset
from harness.sim.protocol import FLAVOURS

READY_PREFIX = "READY "


def build_parser() -> argparse.ArgumentParser:
    """Argument parser for the simulator CLI."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.sim",
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
    serve.add_argument("--flavour", default="vllm", choices=FLAVOURS,
                       help="stream flavour: vllm (delta.reasoning) or vllm-old/sglang (delta.reasoning_content)")
    serve.add_argument("--time-scale", type=float, default=1.0,
                       help="multiply every simulated duration by this factor (0.1 = 10x faster)")
    serve.add_argument("--seed", type=int, default=0, help="seed of the output-length model")
    serve.add_argument("--model", default="sim-reasoner", help="served model id")
    serve.add_argument("--max-num-seqs", type=int, default=None,
                       help="max concurrently running sequences; more wait in a queue (None = the preset's)")
    serve.add_argument("--api-key", default=None,
                       help="require 'Authorization: Bearer KEY' on /v1/* (401 otherwise)")
    serve.add_argument("--tokens-per-chunk", type=int, default=1,
                       help="tokens per SSE event, like vLLM --stream-interval (phase changes split events)")
    serve.add_argument("--max-lag", type=float, default=0.05,
                       help="seconds of engine lateness (CPU contention) caught up with shorter steps; "
                            "a longer stall is absorbed as one long step")
    group = serve.add_argument_group(
        "preset overrides", "durations in simulated seconds (before --time-scale); None = the preset's value"
    )
    group.add_argument("--decode-base", type=float, default=None, help="fixed cost of one engine step, s")
    group.add_argument("--decode-per-seq", type=float, default=None, help="step cost per decoding sequence, s")
    group.add_argument("--prefill-base", type=float, default=None, help="fixed prefill cost, s")
    group.add_argument("--prefill-per-token", type=float, default=None, help="prefill cost per prompt token, s")
    group.add_argument("--max-model-len", type=int, default=None, help="context length, tokens")
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


def serve(args: argparse.Namespace) -> int:
    """Run the server until SIGTERM/SIGINT (or stdin EOF with ``--exit-on-stdin-eof``)."""
    import gevent
    from gevent.event import Event

    from harness.sim.server import SimConfig, SimServer

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    preset = get_preset(args.preset).with_overrides(
        decode_base=args.decode_base,
        decode_per_seq=args.decode_per_seq,
        prefill_base=args.prefill_base,
        prefill_per_token=args.prefill_per_token,
        max_model_len=args.max_model_len,
    )
    config = SimConfig(
        host=args.host, port=args.port, preset=preset, flavour=args.flavour, time_scale=args.time_scale,
        seed=args.seed, model=args.model, max_num_seqs=args.max_num_seqs, api_key=args.api_key,
        tokens_per_chunk=args.tokens_per_chunk, max_lag=args.max_lag,
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
                                          preset.name, args.flavour, args.time_scale)
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


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "serve":
        if args.time_scale < 0:
            parser.error("--time-scale must be >= 0")
        if args.tokens_per_chunk < 1:
            parser.error("--tokens-per-chunk must be >= 1")
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        return serve(args)
    return print_presets()
