"""PromptSource: the prompts mix, data-set sampling (weighted / uniform, with / without replacement, seeded),
request bodies, synthetic prompts, and the profile's source rules."""

from __future__ import annotations

import collections
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.config import PROFILES_DIR, Profile, ProfileError, load_profile
from harness.profile_check import load_checked_profile
from harness.prompts.source import DatasetSource, MixSource, SyntheticSource, build_source


def _data(tmp_path: Path, n: int = 4, weights: list[float] | None = None, **extra: Any) -> Path:
    p = tmp_path / "seeds.jsonl"
    rows = []
    for i in range(n):
        r: dict[str, Any] = {"messages": [{"role": "user", "content": f"prompt {i}"}], **extra}
        if weights is not None:
            r["weight"] = weights[i]
        rows.append(orjson.dumps(r))
    p.write_bytes(b"\n".join(rows) + b"\n")
    return p


def _profile(tmp_path: Path, yaml_text: str) -> Profile:
    f = tmp_path / "p.yaml"
    f.write_text("name: t\n" + yaml_text)
    return load_checked_profile(f)  # files checked, as for a run


def _content(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


def test_mix_source_is_the_profiles_weighted_mix() -> None:
    prof = load_profile(PROFILES_DIR / "demo.yaml")
    src = build_source(prof, "m")
    assert isinstance(src, MixSource)
    prompt, body = src.sample(random.Random(0))
    assert body == prof.build_body(prompt, "m")  # type: ignore[arg-type]
    assert src.describe() == {"kind": "prompts", "prompts": 3}
    assert [r[0] for r in src.label_rows()] == [p.label for p in prof.prompts]


def test_dataset_weighted_with_replacement(tmp_path: Path) -> None:
    _data(tmp_path, 3, weights=[1, 2, 7])
    prof = _profile(tmp_path, "dataset: {path: seeds.jsonl}\n")
    src = build_source(prof, "m")
    assert isinstance(src, DatasetSource)
    rng = random.Random(5)
    counts = collections.Counter(_content(src.sample(rng)[1]) for _ in range(5000))
    assert abs(counts["prompt 2"] / 5000 - 0.7) < 0.03 and abs(counts["prompt 0"] / 5000 - 0.1) < 0.02


def test_dataset_uniform_ignores_weights(tmp_path: Path) -> None:
    _data(tmp_path, 2, weights=[1, 9])
    src = build_source(_profile(tmp_path, "dataset: {path: seeds.jsonl, sampling: uniform}\n"), "m")
    rng = random.Random(5)
    counts = collections.Counter(_content(src.sample(rng)[1]) for _ in range(4000))
    assert abs(counts["prompt 1"] / 4000 - 0.5) < 0.03


@pytest.mark.parametrize("sampling", ["uniform", "weighted"])
def test_dataset_without_replacement_draws_each_row_once_per_pass(tmp_path: Path, sampling: str) -> None:
    _data(tmp_path, 50, weights=[float(i + 1) for i in range(50)])
    prof = _profile(tmp_path, f"dataset: {{path: seeds.jsonl, replacement: false, sampling: {sampling}, seed: 3}}\n")
    src = build_source(prof, "m")
    rng = random.Random(0)
    first = [_content(src.sample(rng)[1]) for _ in range(50)]
    second = [_content(src.sample(rng)[1]) for _ in range(50)]
    assert len(set(first)) == 50 and len(set(second)) == 50
    assert first != second  # a new pass, a new order
    again = build_source(prof, "m")
    assert [_content(again.sample(random.Random(9))[1]) for _ in range(50)] == first  # seeded
    other = build_source(prof, "m", "w2")  # another process: the run's one order (workers split it by position)
    assert [_content(other.sample(random.Random(9))[1]) for _ in range(50)] == first
    reseeded = build_source(_profile(tmp_path, f"dataset: {{path: seeds.jsonl, replacement: false, "
                                               f"sampling: {sampling}, seed: 4}}\n"), "m")
    assert [_content(reseeded.sample(random.Random(9))[1]) for _ in range(50)] != first  # another seed, order


def test_weighted_without_replacement_puts_heavy_rows_first(tmp_path: Path) -> None:
    _data(tmp_path, 200, weights=[1000.0 if i < 10 else 1.0 for i in range(200)])
    src = build_source(_profile(tmp_path, "dataset: {path: seeds.jsonl, replacement: false}\n"), "m")
    rng = random.Random(0)
    head = {_content(src.sample(rng)[1]) for _ in range(12)}
    assert len(head & {f"prompt {i}" for i in range(10)}) >= 9


def test_dataset_seed_makes_draws_reproducible_per_worker(tmp_path: Path) -> None:
    _data(tmp_path, 100)
    prof = _profile(tmp_path, "dataset: {path: seeds.jsonl, seed: 7}\n")
    a = [_content(build_source(prof, "m", "w1").sample(random.Random(i))[1]) for i in range(1)]
    s1, s2, s3 = build_source(prof, "m", "w1"), build_source(prof, "m", "w1"), build_source(prof, "m", "w2")
    seq = [[_content(s.sample(random.Random(i))[1]) for i in range(30)] for s in (s1, s2, s3)]
    assert seq[0] == seq[1] and seq[0] != seq[2] and a[0] == seq[0][0]


def test_dataset_body_precedence_and_identity(tmp_path: Path) -> None:
    _data(tmp_path, 1, max_tokens=33, extra_body={"top_k": 5, "chat_template_kwargs": {"x": 1}})
    prof = _profile(
        tmp_path,
        "request: {max_tokens: 100, thinking: true, temperature: 0.5}\ndataset: {path: seeds.jsonl, class: seeds}\n",
    )
    src = build_source(prof, "mod")
    prompt, body = src.sample(random.Random(0))
    assert (prompt.id, prompt.label) == ("seeds:1", "seeds")
    assert body == {
        "model": "mod",
        "messages": [{"role": "user", "content": "prompt 0"}],
        "max_tokens": 33,  # the row's own, over request.max_tokens
        "temperature": 0.5,
        "chat_template_kwargs": {"thinking": True, "enable_thinking": True, "x": 1},
        "top_k": 5,
    }
    assert src.label_rows() == [("seeds", 1.0, True)]
    d = src.describe()
    assert d["kind"] == "dataset" and d["rows"] == 1 and d["format"] == "jsonl"


def test_row_without_max_tokens_takes_the_request_default(tmp_path: Path) -> None:
    _data(tmp_path, 1)
    src = build_source(_profile(tmp_path, "request: {max_tokens: 100}\ndataset: {path: seeds.jsonl}\n"), "m")
    assert src.sample(random.Random(0))[1]["max_tokens"] == 100


def test_synthetic_estimate_flagged(tmp_path: Path) -> None:
    prof = _profile(
        tmp_path,
        "synthetic:\n  input_tokens: {dist: fixed, value: 64}\n  max_tokens: {dist: uniform, min: 10, max: 20}\n"
        "  system: be brief\n",
    )
    src = build_source(prof, "m")
    assert isinstance(src, SyntheticSource)
    rng = random.Random(0)
    drawn = [src.sample(rng) for _ in range(200)]
    assert all(p.id in ("syn-64est", "syn-63est") and p.label == "synthetic" for p, _ in drawn)
    assert {b["max_tokens"] for _, b in drawn} == set(range(10, 21))
    assert drawn[0][1]["messages"][0] == {"role": "system", "content": "be brief"}
    d = src.describe()
    assert d["token_count"] == "estimate" and d["counted_by"] == "estimate (chars/4)"


def test_synthetic_with_tokenizer_exact(tmp_path: Path, tokenizer_json: Path) -> None:
    prof = _profile(
        tmp_path,
        f"tokenizer: {tokenizer_json}\nrequest: {{max_tokens: 50}}\n"
        "synthetic:\n  input_tokens: {dist: lognormal, mean: 200, sigma: 0.4, max: 600}\n  seed: 1\n",
    )
    src = build_source(prof, "m")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_json))
    rng = random.Random(0)
    for _ in range(30):
        p, body = src.sample(rng)
        n = len(tok.encode(_content(body), add_special_tokens=False).ids)
        assert p.id == f"syn-{n}tok" and 1 <= n <= 600 and body["max_tokens"] == 50
    assert src.describe()["token_count"] == "exact"


@pytest.mark.parametrize(
    ("yaml_text", "expect"),
    [
        ("description: x\n", "give exactly one prompt source of prompts, dataset, synthetic (got none)"),
        (
            "prompts: [{id: a, text: x}]\ndataset: {path: seeds.jsonl}\n",
            "give exactly one prompt source of prompts, dataset, synthetic (got ['prompts', 'dataset'])",
        ),
        ("dataset: {path: seeds.jsonl, format: yaml}\n", "dataset.format: Input should be 'auto'"),
        ("dataset: {path: seeds.jsonl, sampling: random}\n", "dataset.sampling: Input should be 'weighted'"),
        ("dataset: {path: seeds.jsonl, class: other}\n", "dataset.class: 'other' is reserved"),
        ("dataset: {path: seeds.jsonl, colum: x}\n", "dataset.colum: unknown key"),
        ("synthetic: {input_tokens: {dist: normal, mean: 5}}\n", "synthetic.input_tokens: dist normal needs sd"),
        (
            "synthetic: {input_tokens: {dist: histogram, file: h.txt}}\n",
            "synthetic.input_tokens.file: {tmp}/h.txt: no such file",
        ),
        (
            "tokenizer: tok.json\nsynthetic: {input_tokens: {dist: fixed, value: 3}}\n",
            "tokenizer: {tmp}/tok.json: no such file",
        ),
    ],
)
def test_profile_source_errors(tmp_path: Path, yaml_text: str, expect: str) -> None:
    _data(tmp_path, 2)
    with pytest.raises(ProfileError) as ei:
        _profile(tmp_path, yaml_text)
    assert expect.format(tmp=tmp_path) in str(ei.value)


def test_public_dict_carries_absolute_paths_for_workers(tmp_path: Path) -> None:
    _data(tmp_path, 2)
    prof = _profile(tmp_path, "dataset: {path: seeds.jsonl}\n")
    again = Profile.model_validate(prof.public_dict())  # what a worker rebuilds from the phase message
    assert again.dataset is not None and again.dataset.path == str(tmp_path / "seeds.jsonl")
    assert len(build_source(again, "m", "w").index) == 2  # type: ignore[attr-defined]


def test_shipped_synthetic_data_profile_loads() -> None:
    prof = load_profile(PROFILES_DIR / "synthetic-data.yaml")
    assert prof.dataset is not None and prof.dataset.path == str(PROFILES_DIR / "data" / "seed-prompts.jsonl")
    assert not prof.prompts and prof.cost is not None
    src = build_source(prof, "m")
    assert src.describe()["rows"] == 80 and src.describe()["replacement"] is False


def test_shipped_output_length_histogram_reads() -> None:
    from harness.prompts.lengths import LengthSpec

    s = LengthSpec(dist="histogram", file=str(PROFILES_DIR / "data" / "output-lengths.txt")).sampler()
    assert {s.draw(random.Random(i)) for i in range(200)} == {256, 768, 1024, 2048}
