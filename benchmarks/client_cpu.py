"""CPU cost per SSE chunk of the harness's streaming client, against the openai SDK's streaming path.

    .venv/bin/python benchmarks/client_cpu.py [--streams 8] [--chunks 2000] [--runs 5] [--skip-sdk]
        [--pace-ms 2] [--count-reads] [--both-paths]

A server process on 127.0.0.1 streams vLLM-shaped chunks (role chunk, reasoning deltas with cumulative
usage, answer deltas, finish, usage, [DONE]) over chunked transfer encoding, one HTTP chunk per event, with a
short pause every few events so that reads see a realistic mix of single and batched events. The client
process runs ``--streams`` concurrent greenlets (gevent, as under Locust) and measures its own CPU time
(``time.process_time``) per token-bearing chunk for:

* ``harness``: :class:`harness.client.ChatClient` (our HTTP/1.1 reader + SSE decoder + chunk interpreter);
* ``openai-sdk``: ``client.chat.completions.create(stream=True)``, iterating the ``ChatCompletionChunk``
  objects (pydantic) and reading the same fields, if the ``openai`` package is installed (and ``--skip-sdk`` is
  not given).

With ``--pace-ms`` the server sleeps that long after every event instead (one token a chunk at that rate, as
the simulator's 2 ms/token preset): reads then mostly find one chunk each, the hot case of a read on readiness.
``--count-reads`` adds, after the timed runs, one untimed run that counts the ``recv``/``recvmsg`` calls on the
client's OS sockets and the ones that found nothing (``BlockingIOError``), per token-bearing chunk.

``--both-paths`` measures the harness twice per run, interleaved in one process: ``harness[native]`` on the
compiled per-read path (``harness/_fastchunk.pyx``) and ``harness[python]`` on the pure-Python one
(:mod:`harness.chunkpath`), and prints ``ratio_native_over_python``; without it, ``harness`` runs the process's
path (``LLMLOAD_PURE_PYTHON=1`` forces the pure one) and the output's ``client_path`` says which.

Prints the median of ``--runs`` runs per path and the ratio. Numbers depend on the machine: compare paths
within one run, not across machines. To compare two versions of the harness, run this script with
``PYTHONPATH`` pointing at each checkout in turn (``git archive`` of the older commit into a directory),
interleaved, ``--runs 1 --skip-sdk`` each.
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import gevent  # noqa: E402

ENV = '"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench",'


def build_stream(n: int) -> list[bytes]:
    """The events of one response with ``n`` token-bearing chunks (80 % reasoning, 20 % answer)."""
    role = '{"role":"assistant","content":""}'
    ev = [f'data: {{{ENV}"choices":[{{"index":0,"delta":{role},"logprobs":null,"finish_reason":null}}]}}\n\n']
    n_reason = int(n * 0.8)
    for i in range(n):
        key = "reasoning" if i < n_reason else "content"
        ev.append(
            f'data: {{{ENV}"choices":[{{"index":0,"delta":{{"{key}":" tok{i}"}},"logprobs":null,'
            f'"finish_reason":null}}],"usage":{{"prompt_tokens":20,"completion_tokens":{i + 1},'
            f'"total_tokens":{i + 21}}}}}\n\n'
        )
    ev.append(f'data: {{{ENV}"choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"stop"}}]}}\n\n')
    ev.append(
        f'data: {{{ENV}"choices":[],"usage":{{"prompt_tokens":20,"completion_tokens":{n},'
        f'"total_tokens":{n + 20}}}}}\n\n'
    )
    ev.append("data: [DONE]\n\n")
    return [b"%x\r\n%s\r\n" % (len(e.encode()), e.encode()) for e in ev]


def serve(port_q: mp.Queue, n: int, pace_s: float | None = None) -> None:  # type: ignore[type-arg]
    """Server process: answer every POST with the stream of ``n`` chunks (keep-alive); with ``pace_s``, sleep
    that many seconds after every event (else 0.5 ms after every fourth)."""
    from gevent.server import StreamServer

    chunks = build_stream(n)

    def handle(sock: socket.socket, addr: object) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                d = sock.recv(65536)
                if not d:
                    return
                buf += d
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            while len(rest) < length:
                rest += sock.recv(65536)
            buf = rest[length:]
            if head.startswith(b"GET"):
                body = b'{"data":[{"id":"bench"}]}'
                sock.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(body), body)
                )
                continue
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i, c in enumerate(chunks):
                sock.sendall(c)
                if pace_s is not None:
                    gevent.sleep(pace_s)
                elif i % 4 == 3:
                    gevent.sleep(0.0005)
            sock.sendall(b"0\r\n\r\n")

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    port_q.put(server.server_port)
    server.serve_forever()


def _cpu_of(one: Callable[[], int], streams: int) -> tuple[float, int]:
    """Run ``one`` in ``streams`` concurrent greenlets; return (process CPU seconds, total chunks counted)."""
    t = time.process_time()
    gs = [gevent.spawn(one) for _ in range(streams)]
    gevent.joinall(gs, raise_error=True)
    return time.process_time() - t, sum(g.value for g in gs)


def run_harness(url: str, streams: int, requests: int, path_name: str | None = None) -> tuple[float, int]:
    """The harness client in ``streams`` greenlets, ``requests`` each, on the ``path_name`` stream path (None: the
    process's, :func:`harness.chunkpath.active`); (CPU seconds, token-bearing chunks)."""
    from harness.chunkpath import PATHS
    from harness.client import ChatClient
    from harness.result import RequestIdentity

    chunk_path = None if path_name is None else PATHS[path_name]

    def one() -> int:
        c = ChatClient(url, chunk_path=chunk_path)
        n = 0
        for _ in range(requests):
            r = c.stream_chat({"model": "bench", "messages": [{"role": "user", "content": "x"}]}, RequestIdentity("b"))
            assert r.ok, (r.error_class, r.error_detail)
            n += r.chunks
        c.close()
        return n

    return _cpu_of(one, streams)


class _CountingRaw:
    """Wraps an OS socket: counts ``recv``/``recvmsg`` calls and those that raised ``BlockingIOError``."""

    calls = 0
    empty = 0

    def __init__(self, raw: object) -> None:
        self._raw = raw

    def __getattr__(self, name: str) -> object:
        return getattr(self._raw, name)

    def _count(self, name: str, *args: object) -> object:
        _CountingRaw.calls += 1
        try:
            return getattr(self._raw, name)(*args)
        except BlockingIOError:
            _CountingRaw.empty += 1
            raise

    def recv(self, *args: object) -> object:
        return self._count("recv", *args)

    def recvmsg(self, *args: object) -> object:
        return self._count("recvmsg", *args)


def count_reads(url: str, streams: int, requests: int) -> dict[str, float]:
    """One untimed harness run with every connection's OS socket wrapped: recv calls per token-bearing chunk.

    Works on either version of :class:`harness.http.Connection`: the readiness reader reads ``conn._raw``, the
    blocking one ``sock.recv``/``recvmsg`` of gevent's socket, which calls its ``_sock``.
    """
    from harness import http

    opened = http.Connection.open

    def open_counted(self: http.Connection, timeout_s: float) -> None:
        opened(self, timeout_s)
        if getattr(self, "_raw", None) is not None:
            self._raw = _CountingRaw(self._raw)
        else:
            self.sock._sock = _CountingRaw(self.sock._sock)  # type: ignore[union-attr]

    http.Connection.open = open_counted  # type: ignore[method-assign]
    try:
        _, chunks = run_harness(url, streams, requests)
    finally:
        http.Connection.open = opened  # type: ignore[method-assign]
    return {
        "recv_calls_per_chunk": round(_CountingRaw.calls / chunks, 3),
        "empty_recv_per_chunk": round(_CountingRaw.empty / chunks, 3),
    }


def run_sdk(url: str, streams: int, requests: int) -> tuple[float, int]:
    import openai

    def one() -> int:
        c = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
        n = 0
        for _ in range(requests):
            stream = c.chat.completions.create(
                model="bench",
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            for chunk in stream:
                if chunk.choices:
                    d = chunk.choices[0].delta
                    if d.content or getattr(d, "reasoning", None) or (d.model_extra or {}).get("reasoning"):
                        n += 1
        c.close()
        return n

    return _cpu_of(one, streams)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=8, help="concurrent streams (greenlets)")
    ap.add_argument("--chunks", type=int, default=2000, help="token-bearing chunks per response")
    ap.add_argument("--requests", type=int, default=2, help="sequential requests per stream")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--skip-sdk", action="store_true", help="measure only the harness path (quicker A/B runs)")
    ap.add_argument("--pace-ms", type=float, default=None, help="server sleeps this long after every event")
    ap.add_argument("--count-reads", action="store_true", help="add an untimed run counting recv calls per chunk")
    ap.add_argument("--both-paths", action="store_true",
                    help="measure the compiled and the pure-Python stream paths, interleaved (harness.chunkpath)")
    args = ap.parse_args()
    from harness.chunkpath import CLIENT_PATH, native_available

    if args.both_paths and not native_available():
        ap.error("--both-paths: the compiled path is not built (pip install -e . with a C compiler)")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    pace_s = None if args.pace_ms is None else args.pace_ms / 1000
    proc = ctx.Process(target=serve, args=(q, args.chunks, pace_s), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{q.get(timeout=30)}"
    paths: dict[str, Callable[[str, int, int], tuple[float, int]]] = {"harness": run_harness}
    if args.both_paths:
        paths = {f"harness[{p}]": functools.partial(run_harness, path_name=p) for p in ("native", "python")}
    try:
        import openai  # noqa: F401

        if not args.skip_sdk:
            paths["openai-sdk"] = run_sdk
    except ImportError:
        pass
    results: dict[str, list[float]] = {k: [] for k in paths}
    run_harness(url, 2, 1)  # warm the imports and the server
    for _ in range(args.runs):
        for name, fn in paths.items():
            cpu, chunks = fn(url, args.streams, args.requests)
            expected = args.streams * args.requests * args.chunks
            assert chunks == expected, f"{name}: {chunks} token-bearing chunks counted, expected {expected}"
            results[name].append(cpu / chunks * 1e6)
    reads = count_reads(url, args.streams, args.requests) if args.count_reads else None
    proc.terminate()
    out: dict[str, object] = {
        k: {"median_us_per_chunk": round(statistics.median(v), 2), "runs": [round(x, 2) for x in v]}
        for k, v in results.items()
    }
    if "openai-sdk" in results:
        ours = statistics.median(results["harness[native]" if args.both_paths else "harness"])
        out["ratio_sdk_over_harness"] = round(statistics.median(results["openai-sdk"]) / ours, 1)
    if args.both_paths:
        native, pure = statistics.median(results["harness[native]"]), statistics.median(results["harness[python]"])
        out["ratio_native_over_python"] = round(native / pure, 3)
    else:
        out["client_path"] = CLIENT_PATH
    if reads is not None:
        out["reads"] = reads
    out["setup"] = {
        "streams": args.streams,
        "chunks_per_response": args.chunks,
        "requests_per_stream": args.requests,
        "pace_ms": args.pace_ms,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
