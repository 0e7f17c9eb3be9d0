"""harness.split: one sequence split across workers by position (k % slots == slot), the slot of a worker."""

from __future__ import annotations

from itertools import islice
from types import SimpleNamespace

import pytest

from harness.split import next_position, share, slot_of, worker_ids


@pytest.mark.parametrize("slots", [1, 2, 3, 7])
def test_shares_are_the_whole_sequence_exactly_once(slots: int) -> None:
    seq = [f"x{i}" for i in range(100)]
    parts = [list(share(seq, i, slots)) for i in range(slots)]
    assert all(k % slots == i for i, p in enumerate(parts) for k, _ in p)
    assert sorted(kx for p in parts for kx in p) == list(enumerate(seq))


def test_share_of_an_endless_sequence_from_a_start_position() -> None:
    it = share((10 * k for k in range(5, 10**9)), 1, 3, start=5)
    assert list(islice(it, 3)) == [(7, 70), (10, 100), (13, 130)]


def test_next_position() -> None:
    assert [next_position(s, 2, 3) for s in range(6)] == [2, 2, 2, 5, 5, 5]
    assert next_position(9, 0, 1) == 9
    with pytest.raises(ValueError, match=r"slot 3 not in range\(slots=3\)"):
        next_position(0, 3, 3)
    with pytest.raises(ValueError, match="slot 0 not in range"):
        share([], 0, 0)  # refused at the call, not at the first next()


def test_worker_ids_and_slot_of() -> None:
    nodes = {i: SimpleNamespace(id=i, state=st) for i, st in (("w-b", "running"), ("w-c", "missing"),
                                                                ("w-a", "ready"))}
    ids = worker_ids(SimpleNamespace(clients=nodes))
    assert ids == ["w-a", "w-b"]  # sorted, the worker missing its heartbeats left out
    assert worker_ids(SimpleNamespace()) == []  # a single process
    assert (slot_of(ids, "w-a"), slot_of(ids, "w-b")) == ((0, 2), (1, 2))
    assert slot_of(ids, "w-c") is None and slot_of(None, "w-a") is None and slot_of(ids, None) is None
