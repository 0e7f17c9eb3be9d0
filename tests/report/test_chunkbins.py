"""The numpy chunk reducer (harness/report/chunkbins.py ``reduce_chunks_flat``) equals the polars one
(harness/report/tokens.py ``reduce_chunks`` over the decoded lists) bit for bit, from the lists as written (schema 3
compact, schema 2 floats, mixed) and from decoded lists; what it declines it says (None)."""

from __future__ import annotations

import random
from typing import Any

import polars as pl
import pytest

from harness.report.chunkbins import reduce_chunks_flat
from harness.report.frame import CHUNK_COLUMNS, RAW_CHUNK_COLUMNS, RECORD_SCHEMA, decode_chunk_lists
from harness.report.tokens import reduce_chunks
from harness.result import encode_chunks

_RAW_SCHEMA = {c: RECORD_SCHEMA[c] for c in RAW_CHUNK_COLUMNS}


def _row(rng: random.Random, i: int, v3_share: float = 0.4) -> dict[str, Any]:
    """One record's raw chunk columns: schema 3 (compact) or 2 (floats), every shape of list the reducer meets."""
    n = rng.choice([0, 1, 2, 3, 7, 20, 60])
    times = sorted(rng.uniform(0.01, 8.0) for _ in range(n))
    if n > 3 and rng.random() < 0.2:
        times[1] = times[2] = times[0]  # chunks in one µs: every one of them pinned to ttft
    start = 1_000.0 + rng.uniform(0, 40) if i % 17 else None
    kind = rng.choice(["usage", "ones", "zeros", "short", "none"])
    tokens: list[int] | None = {"usage": [rng.randint(0, 4) for _ in times], "ones": [1] * n, "zeros": [0] * n,
                                "short": [1] * max(0, n - 1), "none": None}[kind]
    ttft = times[0] if times and rng.random() < 0.8 else None
    ttfat = times[rng.randrange(n)] if times and rng.random() < 0.7 else None
    t_last = times[-1] if times and rng.random() < 0.8 else None
    if n and rng.random() < v3_share:  # schema 3: µs deltas, one count when all are equal
        deltas, toks = encode_chunks(times, tokens)
        ct: list[float] | None = [float(d) for d in deltas]
        schema = 3
    else:
        ct, toks, schema = list(times), tokens, 2
        if n > 2 and rng.random() < 0.1:
            ct[0], ct[1] = ct[1], ct[0]  # out of order (a hand-edited file): grouped all the same
    if n == 0 and rng.random() < 0.5:
        ct, toks = None, None
    return {"schema": schema, "start_wall": start, "ttfat": ttfat, "chunk_times": ct, "chunk_tokens": toks,
            "ttft": ttft, "t_last_token": t_last}


def _raw(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=_RAW_SCHEMA)


def _edges(rng: random.Random) -> list[float]:
    grid = [1_000.0 + 0.5 * i for i in range(100)]  # a slice grid
    return [*grid, 1_003.123456789, 1_030.0 + rng.random()]


@pytest.mark.parametrize(("seed", "v3_share"), [(1, 0.4), (2, 0.4), (3, 0.4), (4, 1.0), (5, 1.0)])
def test_flat_reducer_equals_polars_reducer(seed: int, v3_share: float) -> None:
    rng = random.Random(seed)
    raw = _raw([_row(rng, i, v3_share) for i in range(400)])
    decoded = decode_chunk_lists(raw).select(CHUNK_COLUMNS)
    for edges in (_edges(rng), [1_010.0], [1_005.0, 1_006.0], []):  # chunks before, inside and past the edges
        want = reduce_chunks(decoded, edges)
        from_raw = reduce_chunks_flat(raw, edges, decoded=False)
        from_decoded = reduce_chunks_flat(decoded, edges, decoded=True)
        assert from_raw is not None and from_decoded is not None
        assert from_raw.schema == want.schema
        assert from_raw.equals(want) and from_decoded.equals(want)
        assert want.get_column("chunk_bins").null_count() < want.height  # the case has bins to compare


def test_chunk_on_an_edge_and_at_its_anchor() -> None:
    # the first chunk is exactly ttft and exactly on the edge start + ttft: in the bin from that edge
    start, ttft = 1_000.0, 0.25
    deltas, toks = encode_chunks([ttft, 0.5, 0.75], [1, 1, 1])
    raw = _raw([{"schema": 3, "start_wall": start, "ttfat": 0.5, "chunk_times": [float(d) for d in deltas],
                 "chunk_tokens": toks, "ttft": ttft, "t_last_token": 0.75}])
    edges = [start + ttft, start + 0.5, start + 0.75]
    got = reduce_chunks_flat(raw, edges, decoded=False)
    assert got is not None
    bins = got.get_column("chunk_bins").to_list()[0]
    assert [(b["b0"], b["n"], b["n_r"], b["t_r"], b["t_a"]) for b in bins] == [
        (start + ttft, 1, 1, 1, 0), (start + 0.5, 1, 0, 0, 1), (start + 0.75, 1, 0, 0, 1)]
    assert got.equals(reduce_chunks(decode_chunk_lists(raw).select(CHUNK_COLUMNS), edges))


def test_declined_batches_are_none() -> None:
    base = {"schema": 3, "start_wall": 1_000.0, "ttfat": None, "chunk_tokens": [1], "ttft": None,
            "t_last_token": None}
    with_null = _raw([{**base, "chunk_times": [100.0, None, 5.0]}])
    not_whole = _raw([{**base, "chunk_times": [100.0, 2.5]}])
    too_long = _raw([{**base, "chunk_times": [2.0 ** 53, 1.0]}])
    for raw in (with_null, not_whole, too_long):
        assert reduce_chunks_flat(raw, [1_000.0], decoded=False) is None
    fine = _raw([{**base, "chunk_times": [100.0, 5.0]}])
    assert reduce_chunks_flat(fine, [1_000.0], decoded=False) is not None


def _compiled_decode() -> Any:
    from harness.report import chunkbins
    from tests.chunk_paths import compiled

    return compiled(chunkbins._DECODE, "the compiled decode (harness._fastrecords.decode_us_times)")


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_compiled_decode_gives_the_numpy_decodes_bits(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``harness._fastrecords.decode_us_times`` = the numpy decode, bit for bit: in-order and out-of-order µs
    (negative deltas), chunks in an anchor's µs (pinned), -0 deltas, a null anchor; and it declines what numpy
    declines (a delta not whole, NaN, sums that could pass 2**53)."""
    import numpy as np

    from harness.report import chunkbins
    native = _compiled_decode()
    rng = random.Random(seed)
    rows = [_row(rng, i, 1.0) for i in range(300)]
    for r in rows[::7]:  # out of order: a negative delta
        if r["chunk_times"] and len(r["chunk_times"]) > 2:
            r["chunk_times"][2] = -r["chunk_times"][2]
    for r in rows[::11]:
        if r["chunk_times"] and len(r["chunk_times"]) > 1:
            r["chunk_times"][1] = -0.0
    raw = _raw(rows)
    has = (raw.get_column("chunk_times").list.len().fill_null(0) > 0) & (raw.get_column("schema") == 3)
    sel = np.flatnonzero(has.to_numpy())
    lengths = raw.get_column("chunk_times").list.len().fill_null(0).to_numpy()[sel].astype(np.int64)
    deltas = raw.filter(has).get_column("chunk_times").list.explode().to_numpy().astype(np.float64)
    got = chunkbins._decode_v3(raw, deltas, sel, lengths)
    monkeypatch.setattr(chunkbins, "_DECODE", None)
    want = chunkbins._decode_v3(raw, deltas, sel, lengths)
    assert got is not None and want is not None
    assert got.view(np.int64).tolist() == want.view(np.int64).tolist()
    anchors = np.full((3, 1), -1.0)
    for bad in ([100.0, 2.5], [100.0, float("nan")], [2.0 ** 53, 1.0], [float("inf"), 1.0]):
        d = np.array(bad)
        assert native(d, np.array([2], dtype=np.int64), anchors) is None
        assert chunkbins._running_us(d, np.array([2], dtype=np.int64)) is None
    with pytest.raises(ValueError, match="add up"):
        native(np.array([1.0, 2.0]), np.array([3], dtype=np.int64), anchors)
