"""harness.http: body framing, head and header parsing, the typed transport errors, kernel stamps on loopback.

Pure parts are fed bytes in every split; the connection is driven against one-shot servers on 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from typing import Any

import gevent
import pytest

from harness import kstamp
from harness.client import ChatClient
from harness.http import (
    BodyFraming,
    ChunkedDecoder,
    ConnectError,
    Connection,
    ConnectTimeout,
    Origin,
    ProtocolError,
    ReadTimeout,
    ResponseHead,
    TransportError,
    TransportTimeout,
    TruncatedStream,
    WriteTimeout,
    parse_head,
    parse_retry_after,
)

CHUNKED = b"5\r\nHello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\nX-Other: 2\r\n\r\n"


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def feed_all(framing: BodyFraming | ChunkedDecoder, parts: list[bytes]) -> bytes:
    return b"".join(framing.feed(p) for p in parts)


# -- chunked ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, len(CHUNKED)])
def test_chunked_body_in_any_split_with_extensions_and_trailers(size: int) -> None:
    """Every split: chunk-size lines and CRLFs cut across reads, a chunk extension, two trailer lines."""
    dec = ChunkedDecoder()
    out = []
    for i, p in enumerate(pieces(CHUNKED, size)):
        out.append(dec.feed(p))
        assert dec.done is (i == len(pieces(CHUNKED, size)) - 1)  # only the final blank line ends the body
    assert b"".join(out) == b"Hello, world"


def test_chunked_size_line_split_between_its_digits() -> None:
    dec = ChunkedDecoder()
    assert dec.feed(b"1") == b""
    assert dec.feed(b"a\r") == b""
    assert dec.feed(b"\n" + b"x" * 26) == b"x" * 26  # 0x1a = 26 bytes
    assert dec.feed(b"\r\n0\r\n") == b"" and not dec.done
    assert dec.feed(b"\r\n") == b"" and dec.done


def test_chunked_bytes_after_the_last_chunk_are_ignored() -> None:
    dec = ChunkedDecoder()
    assert dec.feed(b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n") == b"ok" and dec.done


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"zz\r\n", "bad chunk size"),
        (b"2\r\nokXX", "not followed by CRLF"),
        (b"1" * 1100, "chunk size line too long"),
    ],
)
def test_chunked_malformed_framing_is_a_protocol_error(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        ChunkedDecoder().feed(data)


# -- BodyFraming --------------------------------------------------------------------------------------------------
def test_framing_chunked_ends_at_the_last_chunk() -> None:
    f = BodyFraming(chunked=True, length=99)  # chunked wins over a Content-Length
    assert feed_all(f, pieces(CHUNKED, 4)) == b"Hello, world" and f.done and not f.close_delimited


@pytest.mark.parametrize("size", [1, 4, 100])
def test_framing_content_length_drops_bytes_past_the_end(size: int) -> None:
    f = BodyFraming(chunked=False, length=10)
    data = b"0123456789EXTRA"
    got = b""
    for p in pieces(data, size):
        got += f.feed(p)
    assert got == b"0123456789" and f.done


def test_framing_zero_length_is_done_before_any_byte() -> None:
    f = BodyFraming(chunked=False, length=0)
    assert f.done
    f.end_of_input()  # nothing missing


def test_framing_close_delimited_ends_only_at_eof() -> None:
    f = BodyFraming(chunked=False, length=None)
    assert f.close_delimited
    assert feed_all(f, [b"data: a\n\n", b"x" * 100_000]) == b"data: a\n\n" + b"x" * 100_000
    assert not f.done
    f.end_of_input()
    assert f.done


@pytest.mark.parametrize(
    ("chunked", "length", "sent"),
    [(True, None, CHUNKED[:-2]), (True, None, b""), (False, 10, b"012345678"), (False, 1, b"")],
)
def test_framing_truncated_body_at_eof(chunked: bool, length: int | None, sent: bytes) -> None:
    f = BodyFraming(chunked, length)
    f.feed(sent)
    assert not f.done
    with pytest.raises(TruncatedStream, match="before the end of the body"):
        f.end_of_input()


# -- head and headers ---------------------------------------------------------------------------------------------
def test_parse_head_status_reason_and_lower_cased_headers() -> None:
    head = parse_head(
        b"HTTP/1.1 429 Too Many Requests\r\nContent-Type:  application/json \r\nRetry-After: 2\r\n"
        b"no colon here\r\nX-Dup: a\r\nx-dup: b\r\nEmpty:\r\n"
    )
    assert (head.status, head.reason) == (429, "Too Many Requests")
    assert head.headers == {"content-type": "application/json", "retry-after": "2", "x-dup": "b", "empty": ""}
    assert parse_head(b"HTTP/1.0 200\r\n") == ResponseHead(200, "", {})


@pytest.mark.parametrize("line", [b"", b"HTTP/1.1", b"ICY 200 OK", b"HTTP/1.1 2x0 OK", b"HTTP/1.1 -1 No"])
def test_parse_head_bad_status_line(line: bytes) -> None:
    with pytest.raises(ProtocolError, match="bad status line"):
        parse_head(line + b"\r\nA: b")


def test_head_properties_drive_the_framing() -> None:
    def head(**h: str) -> ResponseHead:
        return ResponseHead(200, "OK", {k.replace("_", "-"): v for k, v in h.items()})

    chunked = head(transfer_encoding="Chunked", content_length="5")
    assert chunked.chunked and chunked.content_length is None and chunked.keep_alive
    sized = head(content_length="12", content_type="Text/Event-Stream; charset=utf-8")
    assert (sized.chunked, sized.content_length, sized.keep_alive) == (False, 12, True)
    assert sized.content_type == "text/event-stream; charset=utf-8"
    assert not head(content_length="12", connection="Close").keep_alive
    bare = head()
    assert (bare.content_length, bare.keep_alive, bare.content_type) == (None, False, "")
    assert bare.framing().close_delimited
    for bad in ("abc", "-1", "1.5", ""):
        with pytest.raises(ProtocolError, match="bad content-length"):
            head(content_length=bad).framing()


def test_retry_after_delta_seconds() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 120 ") == 120.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after("0") == 0.0
    for bad in (None, "", "-1", "nan", "inf", "soon", "2 s"):
        assert parse_retry_after(bad) is None, bad


def test_retry_after_http_date_is_seconds_from_now() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert parse_retry_after("Tue, 14 Nov 2023 22:14:20 GMT", now=now) == pytest.approx(60.0)  # now: 22:13:20
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0  # in the past: go now
    assert parse_retry_after(formatdate(now + 5), now=now) == pytest.approx(5.0)  # "-0000": a zone-less date
    live = parse_retry_after(formatdate(time.time() + 60, usegmt=True))
    assert live is not None and 58.0 <= live <= 60.0
    assert parse_retry_after("Tue, 99 Nov 2023 25:61:00 GMT", now=now) is None


def test_origin_keeps_the_path_and_the_client_appends_v1() -> None:
    o = Origin.parse("http://example.test:8000/prefix/")
    assert (o.scheme, o.host, o.port, o.base_path) == ("http", "example.test", 8000, "/prefix")
    assert o.host_header == "example.test:8000"
    v6 = Origin.parse("https://[::1]/")
    assert (v6.host, v6.port, v6.host_header) == ("::1", 443, "[::1]")
    assert Origin.parse("http://[::1]:8080").host_header == "[::1]:8080"
    assert Origin.parse("http://h").base_path == ""
    for bad in ("ftp://h/", "http:///v1", "localhost:8000"):
        with pytest.raises(ValueError, match="base URL"):
            Origin.parse(bad)
    assert ChatClient("http://127.0.0.1:1").api_base == "/v1"
    assert ChatClient("http://127.0.0.1:1/v1/").api_base == "/v1"
    assert ChatClient("http://127.0.0.1:1/prefix").api_base == "/prefix/v1"
    assert ChatClient("http://127.0.0.1:1/openai/v1")._path == "/openai/v1/chat/completions"


def test_typed_errors_form_one_hierarchy() -> None:
    for cls in (ConnectError, ProtocolError, TruncatedStream, ConnectTimeout, ReadTimeout, WriteTimeout):
        e = cls("why")
        assert isinstance(e, TransportError) and e.detail == "why" and str(e) == "why"
    assert all(issubclass(c, TransportTimeout) for c in (ConnectTimeout, ReadTimeout, WriteTimeout))
    assert not issubclass(TruncatedStream, TransportTimeout)


# -- the connection on loopback -----------------------------------------------------------------------------------
@contextmanager
def one_shot(handler: Callable[[socket.socket], None]) -> Iterator[Origin]:
    """A listener on 127.0.0.1 whose first accepted connection is handed to ``handler`` in a greenlet."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)

    def run() -> None:
        conn, _ = lsock.accept()
        try:
            handler(conn)
        finally:
            conn.close()

    g = gevent.spawn(run)
    try:
        yield Origin.parse(f"http://127.0.0.1:{lsock.getsockname()[1]}")
    finally:
        g.kill(block=True, timeout=2)
        lsock.close()


def reset(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0) instead of a FIN."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def opened(origin: Origin) -> Connection:
    conn = Connection(origin)
    conn.open(2.0)
    return conn


def test_connect_error_on_a_refused_port() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
        Connection(Origin.parse(f"http://127.0.0.1:{port}")).open(2.0)


def test_connect_timeout_against_a_full_accept_queue() -> None:
    """A listener with backlog 0 that never accepts: once its queue holds one connection, the next SYN is
    dropped and the connect stalls until the timeout."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)
    origin = Origin.parse(f"http://127.0.0.1:{lsock.getsockname()[1]}")
    held: list[Connection] = []
    try:
        for _ in range(8):
            conn = Connection(origin)
            t = time.perf_counter()
            try:
                conn.open(0.3)
            except ConnectTimeout as e:
                assert 0.25 <= time.perf_counter() - t < 1.5
                assert e.detail == "no connection within 0.3 s"
                break
            held.append(conn)
        else:
            pytest.fail("no connect timed out against a full accept queue")
    finally:
        for c in held:
            c.close()
        lsock.close()


def test_read_timeout_and_expired_deadline() -> None:
    with one_shot(lambda s: gevent.sleep(3)) as origin:
        conn = opened(origin)
        t = time.perf_counter()
        with pytest.raises(ReadTimeout):
            conn.recv(0.15)
        assert 0.1 <= time.perf_counter() - t < 1.0
        with pytest.raises(ReadTimeout, match="deadline passed"):
            conn.recv(0.0)
        conn.close()


def test_write_timeout_when_the_peer_does_not_read() -> None:
    with one_shot(lambda s: gevent.sleep(3)) as origin:
        conn = opened(origin)
        assert conn.sock is not None
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        with pytest.raises(WriteTimeout):
            conn.send(b"x" * (64 << 20), 0.2)
        conn.close()


def test_send_on_a_reset_connection_is_a_connect_error() -> None:
    with one_shot(lambda s: (gevent.sleep(0.05), reset(s))) as origin:
        conn = opened(origin)
        gevent.sleep(0.25)  # the RST has arrived
        with pytest.raises(ConnectError, match="send failed"):
            conn.send(b"GET / HTTP/1.1\r\n\r\n", 1.0)
        conn.close()


def test_reset_while_reading_is_a_truncated_stream() -> None:
    def answer_then_reset(s: socket.socket) -> None:
        s.recv(1024)
        s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel")
        gevent.sleep(0.05)
        reset(s)

    with one_shot(answer_then_reset) as origin:
        conn = opened(origin)
        conn.send(b"POST / HTTP/1.1\r\n\r\n", 1.0)
        head = conn.read_head(lambda: 1.0)
        framing = head.framing()
        assert framing.feed(conn.recv(1.0)) == b"hel"
        with pytest.raises(TruncatedStream, match="connection error while reading"):
            conn.recv(1.0)
        conn.close()


def test_eof_inside_the_head_is_a_truncated_stream() -> None:
    with one_shot(lambda s: s.sendall(b"HTTP/1.1 200 OK\r\nContent-")) as origin:
        conn = opened(origin)
        with pytest.raises(TruncatedStream, match="before the response head"):
            conn.read_head(lambda: 1.0)
        conn.close()


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70_000, "larger than 64 KiB"), (b"SSH-2.0-OpenSSH\r\n\r\n", "bad status")],
)
def test_malformed_head_is_a_protocol_error(data: bytes, message: str) -> None:
    with one_shot(lambda s: (s.sendall(data), gevent.sleep(1))) as origin:
        conn = opened(origin)
        with pytest.raises(ProtocolError, match=message):
            conn.read_head(lambda: 1.0)
        conn.close()


def test_head_and_body_in_one_segment_body_bytes_pushed_back() -> None:
    body = b"data: {}\n\n"
    resp = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    with one_shot(lambda s: (s.sendall(resp), gevent.sleep(1))) as origin:
        conn = opened(origin)
        head = conn.read_head(lambda: 1.0)
        rx = conn.rx_epoch
        assert head.content_length == len(body)
        assert conn.recv(1.0) == body
        assert conn.rx_epoch == rx  # the pushed-back bytes keep the stamp of the read that brought them
        conn.close()


@pytest.mark.parametrize(
    ("resp", "expected"),
    [
        (b"HTTP/1.1 429 x\r\nContent-Length: 5\r\n\r\nhello-and-more", b"hello"),  # ends at the length
        (b"HTTP/1.1 500 x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", b"abc"),
        (b"HTTP/1.1 503 x\r\n\r\nuntil-close", b"until-close"),  # close-delimited: EOF ends it
        (b"HTTP/1.1 500 x\r\nContent-Length: 50\r\n\r\npartial", b"partial"),  # stalls: what came by the timeout
        # bad framing: the bytes of earlier reads (none here: the bad chunk came in the same read)
        (b"HTTP/1.1 500 x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcZZ", b""),
    ],
)
def test_read_body_is_best_effort(resp: bytes, expected: bytes) -> None:
    def serve(s: socket.socket) -> None:
        s.sendall(resp)
        if b"until-close" not in resp:
            gevent.sleep(1)

    with one_shot(serve) as origin:
        conn = opened(origin)
        head = conn.read_head(lambda: 1.0)
        deadline = time.perf_counter() + 0.3
        assert conn.read_body(head.framing(), lambda: deadline - time.perf_counter()) == expected
        conn.close()


def test_read_body_stops_at_the_limit() -> None:
    with one_shot(lambda s: (s.sendall(b"HTTP/1.1 200 OK\r\n\r\n" + b"z" * 10_000), gevent.sleep(1))) as origin:
        conn = opened(origin)
        head = conn.read_head(lambda: 1.0)
        got = conn.read_body(head.framing(), lambda: 1.0, limit=100)
        assert 100 <= len(got) <= 10_000 and set(got) == {ord("z")}
        conn.close()


# -- kernel receive stamps ----------------------------------------------------------------------------------------
needs_stamps = pytest.mark.skipif(kstamp.SO_TIMESTAMPNS is None, reason="no SO_TIMESTAMPNS on this platform")


@needs_stamps
def test_kernel_stamp_is_the_arrival_not_the_late_read() -> None:
    """The server writes at once; the client reads 0.3 s later: rx_epoch is the arrival, within the write's
    wall-clock window, and 0.3 s before the read."""
    sent: dict[str, float] = {}

    def serve(s: socket.socket) -> None:
        sent["before"] = time.time()
        s.sendall(b"HTTP/1.1 200 OK\r\n\r\n")
        sent["after"] = time.time()
        gevent.sleep(2)

    with one_shot(serve) as origin:
        conn = opened(origin)
        assert conn.is_stamped
        gevent.sleep(0.3)
        conn.read_head(lambda: 1.0)
        read_at = time.time()
        assert conn.rx_epoch is not None
        assert sent["before"] - 0.005 <= conn.rx_epoch <= sent["after"] + 0.005
        assert read_at - conn.rx_epoch >= 0.25
        conn.close()


@needs_stamps
def test_recv_stamped_and_enable_on_a_plain_socket_pair() -> None:
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(1)
    client = socket.create_connection(lsock.getsockname())
    server, _ = lsock.accept()
    try:
        assert kstamp.enable(client) and kstamp.keep_stamping_on() and kstamp.keep_stamping_on()
        t = time.time()
        server.sendall(b"ping")
        data, epoch = kstamp.recv_stamped(client, 1024)
        assert data == b"ping" and epoch is not None and abs(epoch - t) < 0.5
        server.close()
        data, epoch = kstamp.recv_stamped(client, 1024)
        assert data == b""  # EOF
    finally:
        client.close()
        lsock.close()
    dead = socket.socket()
    dead.close()
    assert kstamp.enable(dead) is False  # never raises


def test_tls_origin_connections_are_never_stamped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel stamps time the TCP bytes, not the decrypted TLS records: https connections read without them."""
    calls: list[Any] = []
    monkeypatch.setattr(kstamp, "enable", lambda sock: calls.append(sock) or True)
    with one_shot(lambda s: gevent.sleep(1)) as origin:
        tls = Connection(Origin("https", origin.host, origin.port, ""), verify_tls=False)
        with pytest.raises(TransportError):
            tls.open(0.5)  # the loopback peer speaks no TLS: the handshake fails or stalls
        assert calls == [] and not tls.is_stamped
