"""SSE decoder edge cases beyond the public stream cases."""

from __future__ import annotations

import pytest

from harness.sse import SSEDecoder
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
