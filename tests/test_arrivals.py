"""The arrival processes: mean rate, dispersion (gamma CV = burstiness), determinism and the exact split."""

from __future__ import annotations

import statistics
from itertools import islice

import pytest

from harness.arrivals import ARRIVAL_KINDS, arrival_offsets, interarrival_gaps

N = 40_000


def _gaps(kind: str, rate: float, burstiness: float = 1.0, seed: int = 3) -> list[float]:
    return list(islice(interarrival_gaps(kind, rate, burstiness, seed), N))


@pytest.mark.parametrize("kind", ARRIVAL_KINDS)
@pytest.mark.parametrize("rate", [0.5, 10.0, 200.0])
def test_mean_rate_is_the_target(kind: str, rate: float) -> None:
    g = _gaps(kind, rate, 2.0)
    # mean gap 1/rate within 4 standard errors (CV <= 2: SE = 2 / sqrt(N) of the mean = 1 %)
    assert statistics.fmean(g) == pytest.approx(1 / rate, rel=0.04)


def test_constant_gaps_are_exact() -> None:
    assert set(_gaps("constant", 4.0)) == {0.25}


@pytest.mark.parametrize(("kind", "burstiness", "cv"), [
    ("poisson", 7.0, 1.0),  # burstiness is ignored by poisson
    ("gamma", 1.0, 1.0),
    ("gamma", 0.5, 0.5),
    ("gamma", 2.0, 2.0),
    ("gamma", 3.0, 3.0),
])  # fmt: skip
def test_coefficient_of_variation(kind: str, burstiness: float, cv: float) -> None:
    g = _gaps(kind, 5.0, burstiness)
    assert statistics.pstdev(g) / statistics.fmean(g) == pytest.approx(cv, rel=0.06)


def test_same_seed_same_sequence_and_other_seed_other_sequence() -> None:
    assert _gaps("gamma", 3.0, 2.0, seed=1)[:100] == _gaps("gamma", 3.0, 2.0, seed=1)[:100]
    assert _gaps("gamma", 3.0, 2.0, seed=1)[:100] != _gaps("gamma", 3.0, 2.0, seed=2)[:100]


@pytest.mark.parametrize("slots", [1, 2, 3, 5])
def test_split_into_slots_is_the_whole_sequence_exactly_once(slots: int) -> None:
    whole = list(islice(arrival_offsets("poisson", 8.0, 1.0, "s:1"), 600))
    parts = [list(islice(arrival_offsets("poisson", 8.0, 1.0, "s:1", i, slots), 600 // slots)) for i in
             range(slots)]
    merged = sorted((k, t) for p in parts for k, t in p)
    assert merged == whole[: len(merged)] and len(merged) == slots * (600 // slots)
    for i, p in enumerate(parts):
        assert all(k % slots == i for k, _ in p)
    assert whole[0] == (0, 0.0)  # the first arrival is at the schedule's start


@pytest.mark.parametrize(("args", "msg"), [
    (("uniform", 1.0, 1.0, 0), "unknown arrival process"),
    (("poisson", 0.0, 1.0, 0), "rate must be > 0"),
    (("gamma", 1.0, 0.0, 0), "burstiness must be > 0"),
])  # fmt: skip
def test_bad_parameters_are_refused(args: tuple, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        interarrival_gaps(*args)


def test_bad_slot_is_refused() -> None:
    with pytest.raises(ValueError, match="slot 2 not in range"):
        arrival_offsets("poisson", 1.0, 1.0, 0, slot=2, slots=2)
