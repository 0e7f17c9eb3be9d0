"""What a user draws its next request from: :class:`PromptSource` and its three kinds.

- :class:`MixSource`: the profile's ``prompts:`` list, drawn by weight (the harness's behaviour before data sets).
- :class:`DatasetSource`: rows of a data file (:mod:`harness.prompts.files`), by weight or uniformly, with or
  without replacement. The index is one per process, shared by every user of the process.
- :class:`SyntheticSource`: prompts of ``input_tokens`` tokens with ``max_tokens`` drawn per request
  (:mod:`harness.prompts.lengths`, :mod:`harness.prompts.tokens`).

:func:`build_source` picks the kind from the profile; :func:`resolve_paths` and :func:`check_sources` are the
profile loader's steps (paths relative to the profile's directory; every file checked before any load).
"""

from __future__ import annotations

import bisect
import itertools
import random
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.prompts.files import DatasetIndex, open_dataset
from harness.prompts.lengths import LengthSampler
from harness.prompts.spec import DatasetSpec, SyntheticSpec
from harness.prompts.tokens import SyntheticText, TokenCounter

if TYPE_CHECKING:
    from harness.config import Profile, PromptSpec

__all__ = [
    "DatasetSource",
    "DrawnPrompt",
    "MixSource",
    "PromptLike",
    "PromptSource",
    "SyntheticSource",
    "build_source",
    "check_sources",
    "resolve_paths",
]


class PromptLike(Protocol):
    """What a request's identity needs of its prompt: ``id`` (records' ``prompt_id``) and ``label`` (its class)."""

    @property
    def id(self) -> str: ...

    @property
    def label(self) -> str: ...


@dataclass(frozen=True, slots=True)
class DrawnPrompt:
    """A prompt drawn from a data set or made up: ``id`` (dataset ``<file stem>:<line>``; synthetic
    ``syn-<N>tok``, or ``syn-<N>est`` when N is the chars/4 estimate) and ``label`` (the section's ``class``)."""

    id: str
    label: str


class PromptSource:
    """Draws the next request: :meth:`sample`. One per process, shared by its users (gevent: no locking needed)."""

    def sample(self, rng: random.Random) -> tuple[PromptLike, dict[str, Any]]:
        """The next prompt and its JSON request body (without ``stream``; the client adds it).

        ``rng``: the calling user's random stream (used unless the source has its own ``seed``).
        """
        raise NotImplementedError

    def label_rows(self) -> list[tuple[str, float, bool]]:
        """``(class, weight, explicit)`` per prompt class, for :func:`harness.metrics.prompt_labels`."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for run.json (``kind``, and for synthetic ``token_count``: tokenizer or
        estimate)."""
        raise NotImplementedError


class MixSource(PromptSource):
    """The profile's ``prompts:``: weighted draw from the user's ``rng``, bodies built once."""

    def __init__(self, profile: Profile, model: str) -> None:
        self._prompts = list(profile.prompts)
        self._cum = list(itertools.accumulate(p.weight for p in self._prompts))
        self._bodies = {p.id: profile.build_body(p, model) for p in self._prompts}

    def sample(self, rng: random.Random) -> tuple[PromptSpec, dict[str, Any]]:
        prompt = rng.choices(self._prompts, cum_weights=self._cum)[0]
        return prompt, self._bodies[prompt.id]

    def label_rows(self) -> list[tuple[str, float, bool]]:
        return [(q.label, q.weight, q.prompt_class is not None) for q in self._prompts]

    def describe(self) -> dict[str, Any]:
        return {"kind": "prompts", "prompts": len(self._prompts)}


def _own_rng(seed: int | None, stream: str) -> random.Random | None:
    return random.Random(f"{seed}:{stream}") if seed is not None else None


class DatasetSource(PromptSource):
    """Rows of the profile's ``dataset:`` file. With replacement: weighted (bisect on cumulative weights) or
    uniform. Without: a seeded order of all rows (weighted: Efraimidis-Spirakis keys ``-ln(u)/w``, so heavier rows
    come earlier; uniform: a shuffle), walked once, then a new pass in a new order. The order is per process: with
    several workers each walks its own (seeded with the worker id), so two workers may send the same row within a
    pass. Memory: the index's arrays
    plus 8 bytes a row for the cumulative weights or the order."""

    def __init__(self, profile: Profile, model: str, stream: str = "local") -> None:
        spec = profile.dataset
        assert spec is not None
        self._spec = spec
        self._profile, self._model = profile, model
        self.index: DatasetIndex = open_dataset(
            spec.path, spec.format, spec.column, spec.weight_column, spec.max_tokens_column
        )
        self._n = len(self.index)
        self._stem = Path(spec.path).stem
        self._rng = _own_rng(spec.seed, stream)
        self._stream = stream
        weights = self.index.weights if spec.sampling == "weighted" else None
        self._cum: array[float] | None = array("d", itertools.accumulate(weights)) if weights is not None else None
        self._order: Any = None
        self._pos = 0
        self._pass = 0

    def _next_order(self) -> None:
        import polars as pl

        # per process (worker) and pass: workers walk different orders; the same seed and worker, the same order
        seed = random.Random(f"{self._spec.seed or 0}:{self._stream}:{self._pass}").getrandbits(63)
        n = self._n
        if self.index.weights is not None and self._spec.sampling == "weighted":
            h = pl.int_range(0, n, eager=True).hash(seed)
            u = ((h // 2048).cast(pl.Float64) + 0.5) / float(2**53)
            w = pl.Series(self.index.weights.tolist(), dtype=pl.Float64)
            self._order = (-u.log() / w).arg_sort()
        else:
            self._order = pl.int_range(0, n, eager=True).shuffle(seed=seed)
        self._pass += 1
        self._pos = 0

    def draw_index(self, rng: random.Random) -> int:
        """The 0-based row to send next (see the class docstring)."""
        r = self._rng or rng
        if not self._spec.replacement:
            if self._order is None or self._pos >= self._n:
                self._next_order()
            i = int(self._order[self._pos])
            self._pos += 1
            return i
        if self._cum is not None:
            return min(bisect.bisect_right(self._cum, r.random() * self._cum[-1]), self._n - 1)
        return r.randrange(self._n)

    def sample(self, rng: random.Random) -> tuple[DrawnPrompt, dict[str, Any]]:
        from harness.config import PromptSpec

        row = self.index.row(self.draw_index(rng))
        label = self._spec.prompt_class
        spec = PromptSpec(
            id=f"{self._stem}:{row.line}",
            messages=row.messages,
            max_tokens=row.max_tokens,
            extra_body=row.extra_body,
            prompt_class=label,
        )
        return DrawnPrompt(spec.id, label), self._profile.build_body(spec, self._model)

    def label_rows(self) -> list[tuple[str, float, bool]]:
        return [(self._spec.prompt_class, 1.0, True)]

    def describe(self) -> dict[str, Any]:
        s = self._spec
        return {
            "kind": "dataset",
            "path": str(self.index.path),
            "format": self.index.format,
            "rows": self._n,
            "weighted": self._cum is not None
            or (not s.replacement and s.sampling == "weighted" and self.index.weights is not None),
            "replacement": s.replacement,
            "seed": s.seed,
            "class": s.prompt_class,
        }


class SyntheticSource(PromptSource):
    """Made-up prompts of ``input_tokens`` tokens and ``max_tokens`` drawn per request (see
    :class:`~harness.prompts.spec.SyntheticSpec`)."""

    def __init__(self, profile: Profile, model: str, stream: str = "local") -> None:
        spec = profile.synthetic
        assert spec is not None
        self._spec = spec
        self._profile, self._model = profile, model
        self.counter = TokenCounter(profile.tokenizer)
        self._text = SyntheticText(self.counter, seed=spec.seed or 0)
        self._inp = spec.input_tokens.sampler()
        self._mt: LengthSampler | None = spec.max_tokens.sampler() if spec.max_tokens is not None else None
        self._rng = _own_rng(spec.seed, stream)
        self._suffix = "tok" if self.counter.exact else "est"

    def sample(self, rng: random.Random) -> tuple[DrawnPrompt, dict[str, Any]]:
        from harness.config import PromptSpec

        r = self._rng or rng
        text, got = self._text.text(self._inp.draw(r), r)
        label = self._spec.prompt_class
        mt = self._mt.draw(r) if self._mt is not None else None
        spec = PromptSpec(
            id=f"syn-{got}{self._suffix}", text=text, system=self._spec.system, max_tokens=mt, prompt_class=label
        )
        return DrawnPrompt(spec.id, label), self._profile.build_body(spec, self._model)

    def label_rows(self) -> list[tuple[str, float, bool]]:
        return [(self._spec.prompt_class, 1.0, True)]

    def describe(self) -> dict[str, Any]:
        s = self._spec
        return {
            "kind": "synthetic",
            "token_count": "exact" if self.counter.exact else "estimate",
            "counted_by": self.counter.method,
            "input_tokens": s.input_tokens.model_dump(exclude_none=True),
            "max_tokens": s.max_tokens.model_dump(exclude_none=True) if s.max_tokens else None,
            "class": s.prompt_class,
        }


def build_source(profile: Profile, model: str, stream: str = "local") -> PromptSource:
    """The profile's prompt source: ``dataset:``, else ``synthetic:``, else the ``prompts:`` mix.

    ``stream``: this process's name (the worker id), mixed into a seeded source's random stream so workers do not
    all draw the same sequence.

    Raises:
        harness.prompts.files.DataFileError: a data, histogram or tokenizer file is missing or malformed.
    """
    if profile.dataset is not None:
        return DatasetSource(profile, model, stream)
    if profile.synthetic is not None:
        return SyntheticSource(profile, model, stream)
    return MixSource(profile, model)


def _abs(v: Any, base: Path) -> Any:
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


def check_sources(profile: Profile) -> list[tuple[str, str]]:
    """Open every file the profile's prompt source names (data set indexed, histograms and tokenizer read), so a
    bad file fails before any load. Returns ``[]`` when all are fine, else ``[(key, message)]`` (the key is the
    profile key naming the file; the message: file, line and problem)."""
    from harness.prompts.files import DataFileError

    errors: list[tuple[str, str]] = []
    ds: DatasetSpec | None = profile.dataset
    if ds is not None:
        try:
            open_dataset(ds.path, ds.format, ds.column, ds.weight_column, ds.max_tokens_column)
        except DataFileError as e:
            errors.append(("dataset.path", str(e)))
    if profile.tokenizer is not None:
        try:
            TokenCounter(profile.tokenizer)
        except DataFileError as e:
            errors.append(("tokenizer", str(e)))
    syn: SyntheticSpec | None = profile.synthetic
    if syn is not None:
        for key, ls in (("input_tokens", syn.input_tokens), ("max_tokens", syn.max_tokens)):
            if ls is not None and ls.dist == "histogram":
                try:
                    ls.sampler()
                except DataFileError as e:
                    errors.append((f"synthetic.{key}.file", str(e)))
    return errors
