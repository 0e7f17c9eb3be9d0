"""SSE decoder edge cases beyond the public stream cases."""

from __future__ import annotations

import pytest

from harness.sse import SSEDecoder
from tests.stream_cases import fixtures


def feed_all(pieces: list[bytes]) -> tuple[list[bytes], SSEDecoder]:
    d = SSEDecoder()
    out: list[bytes] = []
    for p in pieces:
        out.extend(d.feed(p))
    return out, d


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = b"data: a" + eol + eol + b": c" + eol + b"data: b" + eol + b"data: c" + eol + eol
    out, d = feed_all([stream])
    assert out == [b"a", b"b\nc"] and d.comments == 1


def test_crlf_split_across_reads_is_one_line_end() -> None:
    out, _ = feed_all([b"data: a\r", b"\n\r", b"\n"])
    assert out == [b"a"]


@pytest.mark.parametrize("name", sorted(fixtures()))
def test_one_byte_fragmentation_gives_the_same_events(name: str) -> None:
    data = b"".join(w["bytes"] for w in fixtures()[name]["writes"])
    whole, _ = feed_all([data])
    bytewise, _ = feed_all([data[i : i + 1] for i in range(len(data))]) if len(data) < 20000 else (whole, None)
    assert bytewise == whole


def test_event_without_terminating_blank_line_is_discarded() -> None:
    out, _ = feed_all([b"data: a\n\ndata: [DONE]"])
    assert out == [b"a"]


def test_nonstandard_error_field_kept() -> None:
    out, d = feed_all([b'error: {"code":400}\n\n'])
    assert out == [] and d.error_field == '{"code":400}'


def test_other_fields_ignored() -> None:
    out, _ = feed_all([b"id: 1\nevent: message\nretry: 10\ndata:x\n\n"])
    assert out == [b"x"]
