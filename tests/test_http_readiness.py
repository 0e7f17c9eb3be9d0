"""harness.http: reads on readiness (plain HTTP on a gevent socket): one read per wake-up, no read that finds
nothing, one deadline timer per connection, and a clean exit when the reader is killed or the socket closed.

Driven against one-shot servers on 127.0.0.1 (``tests.test_http.one_shot``); every loop is bounded.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import gevent
import pytest

from harness import kstamp
from harness.http import Connection, ReadTimeout, TruncatedStream
from tests.test_http import one_shot, opened


class CountingRaw:
    """Stands in for the gevent socket's raw OS socket: counts ``recv``/``recvmsg`` calls and the ones that
    found nothing (``BlockingIOError``)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.calls = 0
        self.empty = 0

    def _count(self, fn: Any, *args: Any) -> Any:
        self.calls += 1
        try:
            return fn(*args)
        except BlockingIOError:
            self.empty += 1
            raise

    def recv(self, n: int) -> bytes:
        return self._count(self.raw.recv, n)  # type: ignore[no-any-return]

    def recvmsg(self, n: int, anc: int) -> Any:
        return self._count(self.raw.recvmsg, n, anc)


def counted(conn: Connection) -> CountingRaw:
    assert conn._raw is not None, "plain HTTP on a gevent socket reads on readiness"
    counter = CountingRaw(conn._raw)
    conn._raw = counter
    return counter


@pytest.mark.parametrize("stamped", [True, False])
def test_one_read_per_chunk_and_none_that_finds_nothing(stamped: bool) -> None:
    """40 chunks 4 ms apart: each is one wait and one read (plus the head and EOF); no read raises inside."""
    n = 40

    def serve(s: socket.socket) -> None:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        for i in range(n):
            gevent.sleep(0.004)
            s.sendall(b"data: %d\n\n" % i)

    with one_shot(serve) as origin:
        conn = opened(origin)
        if not stamped:
            conn._stamped = False
        counter = counted(conn)
        conn.read_head(lambda: 2.0)
        chunks, datas, stamps = 0, 0, 0
        for _ in range(4 * n):  # bounded: at most one chunk a read, plus EOF
            data = conn.recv(2.0)
            if not data:
                break
            chunks += data.count(b"data: ")
            datas += 1
            stamps += conn.rx_epoch is not None
        conn.close()
    assert chunks == n
    assert counter.empty == 0
    # head + one read per chunk (a scheduler hiccup may merge chunks into one read) + EOF
    assert 3 <= counter.calls <= n + 2
    assert counter.calls == conn.reads
    assert conn.waits == conn.reads  # every read after a short one waited for readability first
    if stamped and kstamp.SO_TIMESTAMPNS is not None:
        assert stamps == datas  # every read that returned data carried its kernel stamp


def test_a_full_read_reads_again_without_waiting() -> None:
    """A read that filled the buffer did not drain the socket: the next one reads at once."""
    big = b"x" * 200_000

    def serve(s: socket.socket) -> None:
        s.sendall(big)
        gevent.sleep(2)

    with one_shot(serve) as origin:
        conn = opened(origin)
        counter = counted(conn)
        gevent.sleep(0.2)  # let it all arrive
        got = b""
        for _ in range(20):
            got += conn.recv(2.0)
            if len(got) >= len(big):
                break
        conn.close()
    assert got == big
    assert counter.empty == 0
    assert conn.waits < conn.reads  # full reads were followed by reads, not waits


def test_read_timeout_fires_on_time_and_later_deadlines_are_kept() -> None:
    """The timer armed for a short deadline fires early for a later one: the wait sleeps on to its own."""

    def serve(s: socket.socket) -> None:
        gevent.sleep(0.05)
        s.sendall(b"a")
        gevent.sleep(3)

    with one_shot(serve) as origin:
        conn = opened(origin)
        assert conn.recv(0.3) == b"a"  # the timer is now armed for ~0.3 s after the start
        t = time.perf_counter()
        with pytest.raises(ReadTimeout, match=r"nothing received within 0\.600 s"):
            conn.recv(0.6)
        took = time.perf_counter() - t
        assert 0.59 <= took < 1.2
        t = time.perf_counter()
        with pytest.raises(ReadTimeout):
            conn.recv(0.1)  # an earlier deadline than the timer's: re-armed
        assert 0.09 <= time.perf_counter() - t < 0.6
        conn.close()
    assert conn._timer is None


def test_an_earlier_deadline_rearms_the_timer() -> None:
    """After a read with a long deadline, a short one still times out at its own deadline."""

    def serve(s: socket.socket) -> None:
        s.sendall(b"a")
        gevent.sleep(3)

    with one_shot(serve) as origin:
        conn = opened(origin)
        assert conn.recv(30.0) == b"a"
        t = time.perf_counter()
        with pytest.raises(ReadTimeout):
            conn.recv(0.15)
        assert 0.14 <= time.perf_counter() - t < 0.8
        conn.close()


def test_greenlet_exit_during_a_wait_leaves_no_watcher_active() -> None:
    def serve(s: socket.socket) -> None:
        gevent.sleep(0.3)
        s.sendall(b"late")
        gevent.sleep(2)

    with one_shot(serve) as origin:
        conn = opened(origin)
        event = conn._read_event
        g = gevent.spawn(conn.recv, 5.0)
        gevent.sleep(0.05)
        assert event.active and conn._timer is not None and conn._timer.active
        g.kill(block=True, timeout=2)
        assert g.dead and isinstance(g.value, gevent.GreenletExit)
        assert not event.active and event.callback is None
        assert conn._timer is None and conn._waiter is None
        assert conn.recv(2.0) == b"late"  # the connection still reads
        conn.close()


def test_close_from_another_greenlet_during_a_wait_is_a_truncated_stream() -> None:
    with one_shot(lambda s: gevent.sleep(3)) as origin:
        conn = opened(origin)
        g = gevent.spawn(conn.recv, 5.0)
        gevent.sleep(0.05)
        t = time.perf_counter()
        conn.close()
        g.join(timeout=2)
        assert time.perf_counter() - t < 1.0
        assert isinstance(g.exception, TruncatedStream)
        assert conn._timer is None and conn._waiter is None


def test_the_blocking_path_reads_times_out_and_sees_eof() -> None:
    """TLS sockets and sockets that are not gevent's read through the socket's ``recv`` with a timeout (the
    connection is put on that path by hand: ``_raw`` None, as :meth:`Connection.open` leaves it for them)."""

    def serve(s: socket.socket) -> None:
        s.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        gevent.sleep(0.3)
        s.sendall(b"hi")
        gevent.sleep(0.3)

    with one_shot(serve) as origin:
        conn = opened(origin)
        conn._raw = None
        assert conn.read_head(lambda: 2.0).status == 200
        t = time.perf_counter()
        with pytest.raises(ReadTimeout, match=r"nothing received within 0\.100 s"):
            conn.recv(0.1)
        assert 0.09 <= time.perf_counter() - t < 0.6
        assert conn.recv(2.0) == b"hi"
        if kstamp.SO_TIMESTAMPNS is not None:
            assert conn.rx_epoch is not None
        assert conn.recv(2.0) == b""
        assert conn._timer is None and conn.waits == 0 and conn.reads == 4
        conn.close()
