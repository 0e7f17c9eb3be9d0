"""Chunk times packed in the Parquet parts (harness/report/packed.py): one Binary value a record, the float64s of its
list bit for bit; the compiled pack / unpack / list builder (harness/_fastrecords.pyx) equal to the numpy ones."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np
import polars as pl
import pytest

import harness.report.packed as packed
from harness.report.packed import lists_from_flat, pack_chunk_times, unpack_flat, unpacked
from tests.chunk_paths import compiled

LIST = pl.List(pl.Float64)

#: Lists with the values a float64 can hold that a careless copy would change: -0.0, NaN (two payloads), ±inf, the
#: smallest subnormal, the largest double; a null list, empty lists, a single value (8 bytes: inline in a binary
#: view) and a long one.
ODD = [struct.unpack("<d", struct.pack("<Q", q))[0] for q in (0x7FF8000000000001, 0x7FF0000000000F00)]
ROWS: list[list[float] | None] = [
    [1.0, 2.5], None, [], [-0.0, float("nan"), *ODD, float("inf"), -float("inf"), 5e-324, 1.7976931348623157e308],
    [3.0], [], None, [float(i) * 1e-6 for i in range(1000)], [0.0],
]


def _bits(s: pl.Series) -> list[list[int] | None]:
    """Each list's values as their 64-bit patterns (NaN payloads and -0.0 compared exactly)."""
    return [None if v is None else list(np.asarray(v, dtype=np.float64).view(np.uint64)) for v in s.to_list()]


def _frame(rows: list[list[float] | None] = ROWS) -> pl.DataFrame:
    return pl.DataFrame({"chunk_times": rows, "k": list(range(len(rows)))}, schema={"chunk_times": LIST, "k": pl.Int64})


@pytest.fixture(params=["compiled", "numpy"])
def form(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test runs with the compiled functions and with the numpy ones (the compiled run skips when they are
    not built; fails under ``LLMLOAD_REQUIRE_NATIVE=1``, as CI sets)."""
    if request.param == "numpy":
        monkeypatch.setattr(packed, "_PACK", None)
        monkeypatch.setattr(packed, "_UNPACK", None)
        monkeypatch.setattr(packed, "_LISTS", None)
    else:
        compiled(packed._PACK, "the compiled pack (harness._fastrecords.pack_f64)")
    yield request.param


def test_pack_then_unpack_gives_the_lists_bit_for_bit(form: str) -> None:
    df = _frame()
    p = pack_chunk_times(df)
    assert p.schema == pl.Schema({"chunk_times": pl.Binary, "k": pl.Int64})
    ct = p.get_column("chunk_times")
    assert ct.is_null().to_list() == [r is None for r in ROWS]
    for b, r in zip(ct.to_list(), ROWS, strict=True):  # each value: the list's float64s, little-endian
        assert b is None if r is None else b == struct.pack(f"<{len(r)}d", *r)
    back = unpacked(p)
    assert back.schema == df.schema
    assert _bits(back.get_column("chunk_times")) == _bits(df.get_column("chunk_times"))
    values, lengths = unpack_flat(ct)
    assert lengths.tolist() == [-1 if r is None else len(r) for r in ROWS]
    assert values.dtype == np.float64
    flat = [x for r in ROWS if r for x in r]
    assert values.view(np.uint64).tolist() == np.array(flat, dtype=np.float64).view(np.uint64).tolist()


def test_sliced_and_chunked_series_pack_and_unpack(form: str) -> None:
    """A zero-copy slice (an Arrow offset) and a series of several chunks, both ways."""
    df = _frame()
    two = pl.concat([df.slice(1, 4), df.slice(6)], rechunk=False)
    assert two.get_column("chunk_times").n_chunks() == 2
    for piece, rows in ((df.slice(3, 4), ROWS[3:7]), (two, ROWS[1:5] + ROWS[6:])):
        p = pack_chunk_times(piece)
        assert _bits(unpacked(p).get_column("chunk_times")) == _bits(_frame(rows).get_column("chunk_times"))
        both = pl.concat([p.slice(1), p.slice(0, 1)], rechunk=False)  # packed, several chunks, an offset
        values, lengths = unpack_flat(both.get_column("chunk_times"))
        order = rows[1:] + rows[:1]
        assert lengths.tolist() == [-1 if r is None else len(r) for r in order]
        assert values.view(np.uint64).tolist() == np.array(
            [x for r in order if r for x in r], dtype=np.float64).view(np.uint64).tolist()


def test_a_list_holding_a_null_is_not_packed(form: str) -> None:
    df = _frame([[1.0, None], [2.0]])  # type: ignore[list-item]
    assert pack_chunk_times(df) is df
    assert pack_chunk_times(df.drop("chunk_times")).columns == ["k"]  # no chunk times: nothing to pack
    assert pack_chunk_times(df.slice(1)).get_column("chunk_times").dtype == pl.Binary  # the null is sliced off


def test_a_broken_packed_value_is_refused(form: str) -> None:
    s = pl.Series("chunk_times", [struct.pack("<d", 1.0), b"\x00" * 12], dtype=pl.Binary)
    with pytest.raises(ValueError, match=r"12 bytes \(not a multiple of 8"):
        unpack_flat(s)
    with pytest.raises(ValueError, match="lengths add up to 3, not the 2 values"):
        lists_from_flat(np.array([1.0, 2.0]), np.array([2, -1, 1]))


def test_compiled_and_numpy_forms_agree_on_random_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled(packed._PACK, "the compiled pack (harness._fastrecords.pack_f64)")
    rng = np.random.default_rng(7)
    rows: list[list[float] | None] = []
    for _ in range(500):
        n = int(rng.integers(-1, 40))
        rows.append(None if n < 0 else rng.normal(0, 1e6, n).round(int(rng.integers(0, 3))).tolist())
    df = _frame(rows)
    by_c = pack_chunk_times(df)
    c_values, c_lengths = unpack_flat(by_c.get_column("chunk_times"))
    c_lists = lists_from_flat(c_values, c_lengths)
    monkeypatch.setattr(packed, "_PACK", None)
    monkeypatch.setattr(packed, "_UNPACK", None)
    monkeypatch.setattr(packed, "_LISTS", None)
    plain = pack_chunk_times(df)
    assert by_c.get_column("chunk_times").to_list() == plain.get_column("chunk_times").to_list()
    n_values, n_lengths = unpack_flat(plain.get_column("chunk_times"))
    assert n_lengths.tolist() == c_lengths.tolist()
    assert n_values.view(np.uint64).tolist() == c_values.view(np.uint64).tolist()
    assert _bits(lists_from_flat(n_values, n_lengths)) == _bits(c_lists) == _bits(df.get_column("chunk_times"))
