"""Loading a profile for a run: the settings are validated without opening the files they name; the run's loading
step then has each feature check its files, with the file, key and problem in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import ProfileError, load_profile
from harness.profile_check import load_checked_profile


def test_settings_load_without_opening_data_files_and_the_run_step_checks_them(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: t\ndataset: {path: none.jsonl}\n")
    settings = load_profile(prof)  # the leaf: keys and values only; the path made absolute
    assert settings.dataset is not None and settings.dataset.path == str(tmp_path / "none.jsonl")
    with pytest.raises(ProfileError) as ei:
        load_checked_profile(prof)
    assert str(ei.value) == f"{prof}: dataset.path: {tmp_path / 'none.jsonl'}: no such file"


def test_every_bad_file_is_one_line(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: t\ntokenizer: tok.json\nsynthetic: {input_tokens: {dist: histogram, file: h.txt}}\n")
    with pytest.raises(ProfileError) as ei:
        load_checked_profile(prof)
    assert str(ei.value).splitlines() == [
        f"{prof}: tokenizer: {tmp_path / 'tok.json'}: no such file (tokenizer: a local tokenizer.json; nothing is "
        "downloaded)",
        f"{prof}: synthetic.input_tokens.file: {tmp_path / 'h.txt'}: no such file",
    ]


def test_a_good_profile_loads_the_same_both_ways() -> None:
    demo = Path(__file__).resolve().parent.parent / "profiles" / "demo.yaml"
    assert load_checked_profile(demo) == load_profile(demo)


def test_a_bad_setting_fails_before_any_file_is_opened(tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: t\ndataset: {path: none.jsonl}\nsimulator: {preset: nope}\n")
    known = r"\(known: bench, demo, k26\)$"
    with pytest.raises(ProfileError, match=r"simulator.preset: unknown simulator preset 'nope' " + known):
        load_checked_profile(prof)
