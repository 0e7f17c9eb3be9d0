"""The profile sections that name a prompt source other than the ``prompts:`` mix: ``dataset:``, ``synthetic:``
(and the ``tokenizer:`` key used to count their tokens). Validated by :class:`harness.config.Profile`; the files
they name are checked by :func:`harness.prompts.source.check_profile_sources` when the profile is loaded for a run.
:func:`resolve_paths` makes those files' relative paths absolute (:func:`harness.config.load_profile` calls it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.prompts.lengths import LengthSpec
from harness.vocab import RESERVED_PROMPT_LABELS

__all__ = ["DatasetSpec", "SyntheticSpec", "resolve_paths"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _class_name(v: str) -> str:
    if not v.strip() or v != v.strip() or any(not c.isprintable() for c in v):
        raise ValueError(f"{v!r}: a class is a non-blank name without surrounding spaces or control characters")
    if v in RESERVED_PROMPT_LABELS:
        raise ValueError(f"{v!r} is reserved (the Prometheus label of overflow prompts / of the warm-up)")
    return v


class DatasetSpec(_Model):
    """Prompts drawn from a local data file (formats: :mod:`harness.prompts.files`).

    ``path`` relative to the profile's directory. ``sampling`` ``weighted`` (by the weight key/column; rows without
    one weigh 1) or ``uniform``; ``replacement`` False draws every row once (in a seeded shuffled order, one for the
    run, split across the workers: :class:`harness.prompts.source.DatasetSource`) before any row is drawn again.
    ``seed`` makes the draws reproducible (with replacement: per process; None: each user's own random stream; the
    without-replacement order then uses seed 0). ``class`` is the records' ``prompt_class`` / Locust name /
    Prometheus ``prompt`` label of every row.
    """

    path: str = Field(min_length=1, description="the data file (relative: to the profile's directory)")
    format: Literal["auto", "jsonl", "sharegpt", "text", "csv", "parquet"] = Field(
        "auto", description="the file's format (auto: from its extension)"
    )
    column: str = Field("prompt", min_length=1, description="CSV/Parquet: the prompt text column")
    weight_column: str = Field("weight", min_length=1, description="per-row weight key / column")
    max_tokens_column: str = Field("max_tokens", min_length=1, description="per-row max_tokens key / column")
    sampling: Literal["weighted", "uniform"] = Field(
        "weighted", description="weighted (by each row's weight) or uniform"
    )
    replacement: bool = Field(True, description="draw with replacement (false: each row once per pass)")
    seed: int | None = Field(None, description="seed of the draws and of the order (None: each user's own stream)")
    prompt_class: str = Field("dataset", alias="class", min_length=1, description="the prompt class of every row")

    _class = field_validator("prompt_class")(_class_name)


class SyntheticSpec(_Model):
    """Synthetic prompts: ``input_tokens`` and ``max_tokens`` drawn per request from length distributions
    (:class:`~harness.prompts.lengths.LengthSpec`, in tokens). Input tokens are counted with the profile's
    ``tokenizer`` when given, else estimated at 4 characters a token (flagged: records' ``prompt_id`` ends in
    ``est``, run.json's ``prompt_source.token_count`` says ``estimate``). ``max_tokens`` None leaves
    ``request.max_tokens``. ``system``: an optional system message sent before each prompt."""

    input_tokens: LengthSpec = Field(description="prompt length in tokens (a length distribution)")
    max_tokens: LengthSpec | None = Field(
        None, description="max_tokens per request (a length distribution; None: request.max_tokens)"
    )
    system: str | None = Field(None, description="a system message sent with every synthetic prompt")
    seed: int | None = Field(None, description="seed of the synthetic prompts")
    prompt_class: str = Field(
        "synthetic", alias="class", min_length=1, description="the prompt class of the synthetic prompts"
    )

    _class = field_validator("prompt_class")(_class_name)


def _abs(v: Any, base: Path) -> Any:
    """``v`` made absolute against ``base`` when it is a relative path string (``~`` expanded); else as is."""
    if isinstance(v, str) and v and not Path(v).expanduser().is_absolute():
        return str(base / v)
    return str(Path(v).expanduser()) if isinstance(v, str) and v else v


def resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make the file paths of a raw profile mapping absolute, relative ones taken from ``base`` (the profile's
    directory): ``dataset.path``, ``tokenizer``, ``synthetic.{input_tokens,max_tokens}.file``. In place; values
    of the wrong type are left for validation to report."""
    ds = data.get("dataset")
    if isinstance(ds, dict) and "path" in ds:
        ds["path"] = _abs(ds["path"], base)
    if "tokenizer" in data:
        data["tokenizer"] = _abs(data["tokenizer"], base)
    syn = data.get("synthetic")
    if isinstance(syn, dict):
        for key in ("input_tokens", "max_tokens"):
            d = syn.get(key)
            if isinstance(d, dict) and "file" in d:
                d["file"] = _abs(d["file"], base)
