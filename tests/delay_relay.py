"""A TCP relay that delays every byte going one way (client to server) by a fixed time: one-way network latency,
in user space, for kernels without the ``netem`` qdisc.

``python tests/delay_relay.py --listen HOST:PORT --to HOST:PORT --delay SECONDS`` accepts connections on
``--listen``, opens one to ``--to`` for each, and forwards what the client sends ``--delay`` seconds after it
arrived (order kept: each chunk waits for its own release time), and what the server sends at once. The delay is
off (0) until the process receives SIGUSR1 (``--delay-now`` switches it on from the start). It prints
``relay ready`` on stdout once it listens, and ``relay delay on`` when SIGUSR1 switches the delay on. Ends on
SIGTERM / SIGKILL; each connection's pair closes when either side closes.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

#: Bytes read at a time from either side.
CHUNK = 65536


class Relay:
    """The relay's state: ``delay`` (seconds) applied to client-to-server bytes while ``on``."""

    def __init__(self, target: tuple[str, int], delay: float, on: bool) -> None:
        self.target = target
        self.delay = delay
        self.on = on

    async def handle(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        """One client connection: relay it to the target until either side closes."""
        try:
            s_reader, s_writer = await asyncio.open_connection(*self.target)
        except OSError:
            c_writer.close()
            return
        up = asyncio.ensure_future(self._delayed(c_reader, s_writer))
        down = asyncio.ensure_future(self._pipe(s_reader, c_writer))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for w in (c_writer, s_writer):
            w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()

    async def _delayed(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                release, data = await queue.get()
                if not data:
                    return
                wait = release - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()

        sender = asyncio.ensure_future(send())
        try:
            while data := await reader.read(CHUNK):
                queue.put_nowait((loop.time() + (self.delay if self.on else 0.0), data))
            queue.put_nowait((loop.time(), b""))
            await sender
        finally:
            sender.cancel()


def _addr(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


async def _main(args: argparse.Namespace) -> None:
    relay = Relay(_addr(args.to), args.delay, args.delay_now)

    def switch_on() -> None:
        relay.on = True
        print("relay delay on", flush=True)

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, switch_on)
    host, port = _addr(args.listen)
    server = await asyncio.start_server(relay.handle, host, port)
    print("relay ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Command line entry (see the module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    ap.add_argument("--to", required=True, help="HOST:PORT to relay to")
    ap.add_argument("--delay", type=float, required=True, help="client-to-server delay, seconds")
    ap.add_argument("--delay-now", action="store_true", help="delay from the start (default: from SIGUSR1)")
    asyncio.run(_main(ap.parse_args(argv)))


if __name__ == "__main__":
    main()
