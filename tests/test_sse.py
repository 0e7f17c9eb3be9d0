"""SSE decoder edge cases beyond the public stream cases."""

from __future__ import annotations

import pytest

from harness.http import ProtocolError
from harness.sse import MAX_LINE_BYTES, SSEDecoder
from tests.chunk_paths import PATH_NAMES, chunk_path
from tests.stream_cases import fixtures


def feed_all(pieces: list[bytes], path_name: str = "python") -> tuple[list[bytes], SSEDecoder]:
    """Every payload of ``pieces`` fed in turn to a fresh decoder of the ``path_name`` stream path, and the
    decoder."""
    d = chunk_path(path_name).decoder()
    out: list[bytes] = []
    for p in pieces:
        out.extend(d.feed(p))
    return out, d


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_line_endings(eol: bytes, path_name: str) -> None:
    stream = b"data: a" + eol + eol + b": c" + eol + b"data: b" + eol + b"data: c" + eol + eol
    out, d = feed_all([stream], path_name)
    assert out == [b"a", b"b\nc"] and d.comments == 1


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_crlf_split_across_reads_is_one_line_end(path_name: str) -> None:
    out, _ = feed_all([b"data: a\r", b"\n\r", b"\n"], path_name)
    assert out == [b"a"]


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("name", sorted(fixtures()))
def test_one_byte_fragmentation_gives_the_same_events(name: str, path_name: str) -> None:
    """Whole or byte by byte, on either path: the pure decoder's events of the whole stream."""
    data = b"".join(w["bytes"] for w in fixtures()[name]["writes"])
    whole, _ = feed_all([data])
    pieces = [data[i : i + 1] for i in range(len(data))] if len(data) < 20000 else [data]
    bytewise, _ = feed_all(pieces, path_name)
    assert bytewise == whole


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_event_without_terminating_blank_line_is_discarded(path_name: str) -> None:
    out, _ = feed_all([b"data: a\n\ndata: [DONE]"], path_name)
    assert out == [b"a"]


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_nonstandard_error_field_kept(path_name: str) -> None:
    out, d = feed_all([b'error: {"code":400}\n\n'], path_name)
    assert out == [] and d.error_field == '{"code":400}'


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_other_fields_ignored(path_name: str) -> None:
    out, _ = feed_all([b"id: 1\nevent: message\nretry: 10\ndata:x\n\n"], path_name)
    assert out == [b"x"]


# -- the line / event limit (issue 19: a server that never sends a line end cannot grow the buffer) ---------------
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_default_limit_is_max_line_bytes(path_name: str) -> None:
    assert MAX_LINE_BYTES == 1 << 20
    assert chunk_path(path_name).decoder().max_line == MAX_LINE_BYTES


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_a_line_of_exactly_the_limit_passes(eol: bytes, path_name: str) -> None:
    line = b"data: " + b"x" * 94  # 100 bytes, line end excluded
    out, _ = feed_all_limited([line[:37], line[37:] + eol + eol], path_name, limit=100)
    assert out == [b"x" * 94]


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("piece", [1, 7, 64, 101, 1000])
def test_a_line_without_end_fails_once_over_the_limit(piece: int, path_name: str) -> None:
    """Bytes without a line end, in reads of any size: ProtocolError as soon as more than the limit is buffered,
    naming the limit; the reads before it kept no more than the limit."""
    stream = b"data: " + b"x" * 5000
    d = chunk_path(path_name).decoder(100)
    fed = 0
    with pytest.raises(ProtocolError, match=r"SSE line longer than the limit of 100 bytes \(MAX_LINE_BYTES"):
        for i in range(0, len(stream), piece):
            d.feed(stream[i : i + piece])
            fed = i + piece
    assert fed <= 100  # the reads before the failing one buffered no more than the limit


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("split", [None, 3, 60, 101])
def test_a_complete_long_line_fails_whatever_the_split(split: int | None, path_name: str) -> None:
    """A line over the limit fails even when its end arrives in the same read (the rule does not depend on the
    split), and after complete events that were dispatched normally."""
    stream = b"data: a\n\n: ping\ndata: " + b"y" * 101 + b"\n\n"
    pieces = [stream] if split is None else [stream[i : i + split] for i in range(0, len(stream), split)]
    d = chunk_path(path_name).decoder(100)
    got: list[bytes] = []
    with pytest.raises(ProtocolError, match="SSE line longer than the limit of 100 bytes"):
        for p in pieces:
            got += d.feed(p)
    assert got in ([], [b"a"])  # the first event, when it came in an earlier read


@pytest.mark.parametrize("path_name", PATH_NAMES)
@pytest.mark.parametrize("split", [None, 1, 9])
def test_an_event_over_the_limit_fails_though_each_line_is_short(split: int | None, path_name: str) -> None:
    """Many short ``data:`` lines and no blank line: the event's joined data is bounded too; an event of exactly
    the limit (lines joined with LF) passes."""
    exact = b"data: 123456789\n" * 9 + b"data: 123456789\n\n"  # 10 x 9 bytes + 9 LFs = 99 bytes
    ok, _ = feed_all_limited([exact], path_name, limit=99)
    assert len(ok[0]) == 99
    stream = b"data: 123456789\n" * 20 + b"\n"
    pieces = [stream] if split is None else [stream[i : i + split] for i in range(0, len(stream), split)]
    d = chunk_path(path_name).decoder(99)
    with pytest.raises(ProtocolError, match="SSE event longer than the limit of 99 bytes"):
        for p in pieces:
            d.feed(p)


@pytest.mark.parametrize("path_name", PATH_NAMES)
def test_the_limit_counts_each_line_and_event_afresh(path_name: str) -> None:
    """Many events and lines each under the limit never add up to a failure."""
    stream = (b"data: " + b"z" * 90 + b"\n\n: " + b"c" * 95 + b"\n") * 50
    out, d = feed_all_limited([stream[i : i + 33] for i in range(0, len(stream), 33)], path_name, limit=100)
    assert len(out) == 50 and d.comments == 50


def feed_all_limited(pieces: list[bytes], path_name: str, limit: int) -> tuple[list[bytes], SSEDecoder]:
    """:func:`feed_all` with a decoder limited to ``limit`` bytes per line and event."""
    d = chunk_path(path_name).decoder(limit)
    out: list[bytes] = []
    for p in pieces:
        out.extend(d.feed(p))
    return out, d
