"""The helpers of the network-namespace tests: :func:`tests.netns.missing` names what is missing in one line, and
:mod:`tests.delay_relay` delays the client-to-server bytes by its delay and the server-to-client bytes not at all
(it is the instrument of ``tests/integration/test_netns.py``'s latency test). Loopback only, bounded."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests import netns
from tests.delay_relay import Relay


def test_missing_names_root_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert netns.missing() == "network namespaces need root (this process runs as uid 1000)"


def test_missing_names_the_ip_command_when_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    reason = netns.missing()
    assert reason is not None and "`ip` command" in reason and "\n" not in reason


async def _round_trip(delay: float, on: bool) -> tuple[float, float]:
    """(seconds from the client's send to the server's receive, from the server's reply to the client's receive)
    through a relay of ``delay`` seconds, delay switched ``on`` or not."""
    got: asyncio.Queue[tuple[float, asyncio.StreamWriter]] = asyncio.Queue()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(5)
        await got.put((time.monotonic(), writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    relay = Relay(("127.0.0.1", server.sockets[0].getsockname()[1]), delay, on)
    front = await asyncio.start_server(relay.handle, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection("127.0.0.1", front.sockets[0].getsockname()[1])
    sent = time.monotonic()
    writer.write(b"hello")
    await writer.drain()
    arrived, s_writer = await asyncio.wait_for(got.get(), 5)
    replied = time.monotonic()
    s_writer.write(b"back")
    await s_writer.drain()
    assert await asyncio.wait_for(reader.readexactly(4), 5) == b"back"
    back = time.monotonic() - replied
    for w in (writer, s_writer):
        w.close()
    for s in (front, server):
        s.close()
    return arrived - sent, back


def test_the_relay_delays_client_bytes_only_and_only_when_on() -> None:
    up, down = asyncio.run(_round_trip(0.2, on=True))
    assert 0.2 <= up < 0.6 and down < 0.1, (up, down)
    up, down = asyncio.run(_round_trip(0.2, on=False))
    assert up < 0.1 and down < 0.1, (up, down)


def test_remove_stale_deletes_a_dead_sessions_namespaces_only() -> None:
    if (reason := netns.missing()) is not None:
        pytest.skip(reason)
    dead = next(p for p in range(4_000_000, 4_100_000) if not netns.os.path.exists(f"/proc/{p}"))
    stale, live = f"llmload-{dead}-sw", f"llmload-{netns.os.getpid()}-keep"
    for name in (stale, live):
        netns._ip("netns", "add", name)
    try:
        assert netns.remove_stale() == [stale]
        names = netns._ip("netns", "list").stdout
        assert stale not in names and live in names
    finally:
        for name in (stale, live):
            netns._ip("netns", "del", name, check=False)
