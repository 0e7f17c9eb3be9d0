"""The vocabulary the settings are validated against matches what the features implement."""

from __future__ import annotations

import pytest

from harness import result, vocab
from harness.sim import presets, protocol


def test_preset_names_are_the_presets_the_simulator_defines() -> None:
    assert tuple(presets.PRESETS) == vocab.SIM_PRESETS
    for name in vocab.SIM_PRESETS:
        assert presets.get_preset(name).name == name


def test_flavours_are_the_ones_the_wire_protocol_implements() -> None:
    assert protocol.FLAVOURS is vocab.FLAVOURS and protocol.FLAVOUR_ALIASES is vocab.FLAVOUR_ALIASES
    for name in (*vocab.FLAVOURS, *vocab.FLAVOUR_ALIASES):
        assert protocol.canonical_flavour(name) in vocab.FLAVOURS
    with pytest.raises(ValueError, match="unknown flavour"):
        protocol.canonical_flavour("tgi")


def test_reserved_labels_are_the_records_ones() -> None:
    assert result.RESERVED_PROMPT_LABELS is vocab.RESERVED_PROMPT_LABELS == ("other", "warmup")


@pytest.mark.parametrize(
    ("key", "general", "search"),
    [
        ("ttft_p99_s", True, True),
        ("e2e_p99.9_s", True, True),
        ("tpot_p80_s", True, False),
        ("ttfat_p100_s", True, False),
        ("ttft_s", False, False),
        ("ttft_p99", False, False),
        ("itl_p99_s", False, False),
    ],
)
def test_slo_key_grammar(key: str, general: bool, search: bool) -> None:
    assert bool(vocab.SLO_KEY.match(key)) is general
    assert bool(vocab.SEARCH_SLO_KEY.match(key)) is search
