"""Arrival processes of the open-loop rate mode: seeded sequences of send times.

An arrival process is a renewal process given by its inter-arrival gaps (seconds), each drawn independently:

* ``constant``: every gap is ``1 / rate``;
* ``poisson``: exponential gaps of mean ``1 / rate`` (coefficient of variation 1);
* ``gamma``: gamma gaps of mean ``1 / rate`` and coefficient of variation (CV = standard deviation / mean)
  equal to ``burstiness``: shape ``k = 1 / burstiness²``, scale ``1 / (rate × k)``. ``burstiness`` 1 is Poisson,
  above 1 burstier (clustered arrivals with long pauses), below 1 more regular, towards constant.

The sequence is a pure function of (kind, rate, burstiness, seed): every process of a master/worker run draws the
same one and takes its own share of it (:func:`arrival_offsets`, by :func:`harness.split.share`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from harness.split import check_slot, share

__all__ = ["ARRIVAL_KINDS", "LEAD_S", "arrival_offsets", "arrivals_before", "interarrival_gaps"]

#: Seconds between a rate step's start and its first arrival: the step's users are spawned in that time (they are
#: all started at once), so the first arrivals are not late because of the spawn. (Here rather than in
#: :mod:`harness.rate`, which re-exports it, so the report reads it without importing Locust.)
LEAD_S = 1.0

#: The arrival processes :func:`interarrival_gaps` draws.
ARRIVAL_KINDS = ("constant", "poisson", "gamma")


def interarrival_gaps(kind: str, rate: float, burstiness: float, seed: int | str) -> Iterator[float]:
    """An endless iterator of inter-arrival gaps (seconds) of the ``kind`` process at ``rate`` requests/s.

    Args:
        kind: one of :data:`ARRIVAL_KINDS`.
        rate: mean arrivals per second (> 0).
        burstiness: the gamma process's coefficient of variation of gaps (> 0); ignored by the other kinds.
        seed: seeds the draws (same seed, same sequence).

    Raises:
        ValueError: unknown kind, or rate / burstiness not > 0.
    """
    if kind not in ARRIVAL_KINDS:
        raise ValueError(f"unknown arrival process {kind!r} (known: {', '.join(ARRIVAL_KINDS)})")
    if not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s, got {rate!r}")
    if not burstiness > 0:
        raise ValueError(f"burstiness must be > 0, got {burstiness!r}")
    return _gaps(kind, float(rate), float(burstiness), random.Random(str(seed)))


def _gaps(kind: str, rate: float, burstiness: float, rng: random.Random) -> Iterator[float]:
    mean = 1.0 / rate
    if kind == "constant":
        while True:
            yield mean
    elif kind == "poisson":
        while True:
            yield rng.expovariate(rate)
    else:
        shape = 1.0 / (burstiness * burstiness)
        scale = mean / shape
        while True:
            yield rng.gammavariate(shape, scale)


def arrival_offsets(
    kind: str, rate: float, burstiness: float, seed: int | str, slot: int = 0, slots: int = 1
) -> Iterator[tuple[int, float]]:
    """This process's share of one seeded arrival sequence: ``(k, offset)`` for every arrival ``k`` (0-based index
    in the whole sequence) with ``k % slots == slot``, ``offset`` seconds from the schedule's start.

    The first arrival is at offset 0; arrival ``k`` at the sum of the first ``k`` gaps of
    :func:`interarrival_gaps`. With ``slots`` processes each taking its ``slot``, the union of their shares is the
    whole sequence, exactly once.

    Raises:
        ValueError: as :func:`interarrival_gaps`, or ``slot`` not in ``range(slots)``.
    """
    check_slot(slot, slots)
    gaps = interarrival_gaps(kind, rate, burstiness, seed)
    return share(itertools.accumulate(gaps, initial=0.0), slot, slots)


def arrivals_before(kind: str, rate: float, burstiness: float, seed: int | str, span: float) -> int:
    """How many arrivals of the whole sequence (all slots) fall at offsets < ``span`` seconds.

    Raises:
        ValueError: as :func:`interarrival_gaps`.
    """
    if span <= 0:
        return 0
    gaps = interarrival_gaps(kind, rate, burstiness, seed)
    n, t = 0, 0.0
    while t < span:
        n += 1
        t += next(gaps)
    return n

