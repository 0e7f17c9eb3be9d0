"""One seeded sequence split across the processes of a master/worker run, by rule rather than by messages.

Every process computes the same sequence (an arrival schedule, a data set's order of rows) from the same seed,
and process ``slot`` of ``slots`` takes the items at positions ``k`` with ``k % slots == slot``
(:func:`share`, :func:`next_position`): worker ``i`` of ``n`` takes positions ``i, i + n, i + 2n, …``. The union
of the shares is the whole sequence, each item exactly once, whatever ``n``; nothing but the slot and the number
of slots travels between processes.

A worker's slot is its position in the master's sorted list of connected worker ids (:func:`worker_ids` on the
master, :func:`slot_of` on the worker); a single process is slot 0 of 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["check_slot", "next_position", "share", "slot_of", "worker_ids"]

T = TypeVar("T")


def check_slot(slot: int, slots: int) -> None:
    """Raise ValueError unless ``slots`` ≥ 1 and ``0 <= slot < slots``."""
    if slots < 1 or not 0 <= slot < slots:
        raise ValueError(f"slot {slot} not in range(slots={slots})")


def share(seq: Iterable[T], slot: int = 0, slots: int = 1, start: int = 0) -> Iterator[tuple[int, T]]:
    """This process's share of ``seq``: ``(k, item)`` for each item at position ``k`` with ``k % slots == slot``,
    in order. ``seq``'s first item is at position ``start`` (≥ 0); items of other slots are read and skipped.

    Raises:
        ValueError: ``slot`` not in ``range(slots)`` (raised at the call, not at the first ``next``).
    """
    check_slot(slot, slots)
    return _share(seq, slot, slots, start)


def _share(seq: Iterable[T], slot: int, slots: int, start: int) -> Iterator[tuple[int, T]]:
    for k, item in enumerate(seq, start):
        if k % slots == slot:
            yield k, item


def next_position(start: int, slot: int = 0, slots: int = 1) -> int:
    """The first position ``k >= start`` (``start`` ≥ 0) of ``slot``'s share: ``k % slots == slot``.

    Raises:
        ValueError: ``slot`` not in ``range(slots)``.
    """
    check_slot(slot, slots)
    return start + (slot - start) % slots


def worker_ids(runner: Any) -> list[str]:
    """Master: the ids of its connected workers (Locust client ids; a worker missing its heartbeats is left out),
    sorted: the slot order of a split. ``[]`` for a runner without workers (a single process)."""
    clients = getattr(runner, "clients", None)
    if clients is None:
        return []
    return sorted(str(c.id) for c in clients.values() if str(c.state) != "missing")


def slot_of(ids: Iterable[str] | None, me: str | None) -> tuple[int, int] | None:
    """Worker: ``(slot, slots)`` of the worker ``me`` (its Locust client id) in the master's list ``ids``
    (:func:`worker_ids`); None when there is no list or ``me`` is not in it (it joined after the list was made)."""
    listed = list(ids or [])
    if me is None or me not in listed:
        return None
    return listed.index(me), len(listed)
