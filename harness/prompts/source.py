"""What a user draws its next request from: :class:`PromptSource` and its three kinds.

- :class:`MixSource`: the profile's ``prompts:`` list, drawn by weight (the harness's behaviour before data sets).
- :class:`DatasetSource`: rows of a data file (:mod:`harness.prompts.files`), by weight or uniformly, with or
  without replacement (without: one seeded order split across the workers, :mod:`harness.split`). The index is
  one per process, shared by every user of the process.
- :class:`SyntheticSource`: prompts of ``input_tokens`` tokens with ``max_tokens`` drawn per request
  (:mod:`harness.prompts.lengths`, :mod:`harness.prompts.tokens`).

:func:`build_source` picks the kind from the profile; :func:`check_profile_sources` is this feature's step of
loading a profile for a run (every file it names opened and checked before any load; the relative paths were made
absolute by :func:`harness.config.load_profile` with :func:`harness.prompts.spec.resolve_paths`).
"""

from __future__ import annotations

import bisect
import itertools
import random
from array import array
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.config import Profile, ProfileError
from harness.prompts.files import DatasetIndex, open_dataset
from harness.prompts.lengths import LengthSampler
from harness.prompts.spec import DatasetSpec, SyntheticSpec, resolve_paths
from harness.prompts.tokens import SyntheticText, TokenCounter
from harness.split import check_slot, next_position

if TYPE_CHECKING:
    from harness.config import PromptSpec

__all__ = [
    "DatasetSource",
    "DrawnPrompt",
    "MixSource",
    "PromptLike",
    "PromptSource",
    "SyntheticSource",
    "build_source",
    "check_profile_sources",
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
    """Draws the next request: :meth:`sample`. One per process, shared by its users (gevent: no locking needed).

    The base holds what the data-set and synthetic sources share: the profile and model the bodies are built for,
    the one prompt class of their records (:meth:`label_rows`), and building a drawn prompt's identity and body
    (:meth:`_drawn`)."""

    #: The source walks one sequence split across the workers of a run (:meth:`set_share` matters).
    shared: bool = False

    def __init__(self, profile: Profile, model: str, prompt_class: str | None = None) -> None:
        self._profile, self._model = profile, model
        self._class = prompt_class

    def sample(self, rng: random.Random) -> tuple[PromptLike, dict[str, Any]]:
        """The next prompt and its JSON request body (without ``stream``; the client adds it).

        ``rng``: the calling user's random stream (used unless the source has its own ``seed``).
        """
        raise NotImplementedError

    def label_rows(self) -> list[tuple[str, float, bool]]:
        """``(class, weight, explicit)`` per prompt class, for :func:`harness.metrics.prompt_labels`: a source
        with one class (data set, synthetic) has the one row ``(class, 1.0, True)``.

        Raises:
            NotImplementedError: a source without its one class that does not override this.
        """
        if self._class is None:
            raise NotImplementedError
        return [(self._class, 1.0, True)]

    def describe(self) -> dict[str, Any]:
        """JSON-ready description for run.json (``kind``, and for synthetic ``token_count``: tokenizer or
        estimate)."""
        raise NotImplementedError

    def set_share(self, slot: int, slots: int) -> None:
        """Take worker ``slot``'s share (of ``slots`` workers) of the run's one sequence of draws from now on
        (:mod:`harness.split`). Only a source with :attr:`shared` uses it; the others ignore it (their draws are
        independent per worker).

        Raises:
            ValueError: ``slot`` not in ``range(slots)``.
        """
        check_slot(slot, slots)

    def _drawn(self, **fields: Any) -> tuple[DrawnPrompt, dict[str, Any]]:
        """A drawn prompt of this source's class and its body: ``fields`` are :class:`harness.config.PromptSpec`
        fields (``id`` and the prompt's own), the body built by the profile (its request defaults applied)."""
        from harness.config import PromptSpec

        assert self._class is not None
        spec = PromptSpec(prompt_class=self._class, **fields)
        return DrawnPrompt(spec.id, self._class), self._profile.build_body(spec, self._model)


class MixSource(PromptSource):
    """The profile's ``prompts:``: weighted draw from the user's ``rng``, bodies built once."""

    def __init__(self, profile: Profile, model: str) -> None:
        super().__init__(profile, model)
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
    uniform, from this process's random stream. Without: one seeded sequence of rows for the whole run, the same
    in every process: pass 0's order of all rows, then pass 1's, … (each pass a new order seeded with the pass
    number; weighted: Efraimidis-Spirakis keys ``-ln(u)/w``, so heavier rows come earlier; uniform: a shuffle).
    Worker ``i`` of ``n`` takes positions ``i, i + n, i + 2n, …`` of it (:mod:`harness.split`; a single process
    is 0 of 1, :meth:`set_share`), so the workers' draws of a pass are that pass's order, each row once. Memory:
    the index's arrays plus 8 bytes a row for the cumulative weights or the current pass's order."""

    def __init__(self, profile: Profile, model: str, stream: str = "local") -> None:
        spec = profile.dataset
        assert spec is not None
        super().__init__(profile, model, spec.prompt_class)
        self._spec = spec
        self.index: DatasetIndex = open_dataset(
            spec.path, spec.format, spec.column, spec.weight_column, spec.max_tokens_column
        )
        self._n = len(self.index)
        self._stem = Path(spec.path).stem
        self._rng = _own_rng(spec.seed, stream)
        self.shared = not spec.replacement
        weights = self.index.weights if spec.sampling == "weighted" else None
        self._cum: array[float] | None = array("d", itertools.accumulate(weights)) if weights is not None else None
        self._order: Any = None
        self._order_pass = -1
        self._slot, self._slots = 0, 1
        #: Without replacement: the next position of this process's share of the run's sequence (pass × rows + i).
        self._k = 0

    def _order_of(self, pass_no: int) -> Any:
        """Pass ``pass_no``'s order of the rows (a polars Series of 0-based rows): a pure function of the seed and
        the pass, the same in every process."""
        import polars as pl

        seed = random.Random(f"{self._spec.seed or 0}:order:{pass_no}").getrandbits(63)
        n = self._n
        if self.index.weights is not None and self._spec.sampling == "weighted":
            h = pl.int_range(0, n, eager=True).hash(seed)
            u = ((h // 2048).cast(pl.Float64) + 0.5) / float(2**53)
            w = pl.Series(self.index.weights.tolist(), dtype=pl.Float64)
            return (-u.log() / w).arg_sort()
        return pl.int_range(0, n, eager=True).shuffle(seed=seed)

    def set_share(self, slot: int, slots: int) -> None:
        """Without replacement: take positions ``k % slots == slot`` of the run's sequence from now on. A change
        re-splits from this process's place in it (the first position of the new share at or after the start of
        its current round of ``slots`` positions): when every process is at the same round, the shares stay
        disjoint; a process ahead or behind may repeat or skip a few rows at the change. With replacement: no-op.

        Raises:
            ValueError: ``slot`` not in ``range(slots)``.
        """
        check_slot(slot, slots)
        if (slot, slots) == (self._slot, self._slots):
            return
        self._k = next_position(self._k - self._slot, slot, slots)
        self._slot, self._slots = slot, slots

    def draw_index(self, rng: random.Random) -> int:
        """The 0-based row to send next (see the class docstring)."""
        r = self._rng or rng
        if not self._spec.replacement:
            pass_no, pos = divmod(self._k, self._n)
            if pass_no != self._order_pass:
                self._order, self._order_pass = self._order_of(pass_no), pass_no
            self._k += self._slots
            return int(self._order[pos])
        if self._cum is not None:
            return min(bisect.bisect_right(self._cum, r.random() * self._cum[-1]), self._n - 1)
        return r.randrange(self._n)

    def sample(self, rng: random.Random) -> tuple[DrawnPrompt, dict[str, Any]]:
        row = self.index.row(self.draw_index(rng))
        return self._drawn(
            id=f"{self._stem}:{row.line}", messages=row.messages, max_tokens=row.max_tokens, extra_body=row.extra_body
        )

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
        super().__init__(profile, model, spec.prompt_class)
        self._spec = spec
        self.counter = TokenCounter(profile.tokenizer)
        self._text = SyntheticText(self.counter, seed=spec.seed or 0)
        self._inp = spec.input_tokens.sampler()
        self._mt: LengthSampler | None = spec.max_tokens.sampler() if spec.max_tokens is not None else None
        self._rng = _own_rng(spec.seed, stream)
        self._suffix = "tok" if self.counter.exact else "est"

    def sample(self, rng: random.Random) -> tuple[DrawnPrompt, dict[str, Any]]:
        r = self._rng or rng
        text, got = self._text.text(self._inp.draw(r), r)
        mt = self._mt.draw(r) if self._mt is not None else None
        return self._drawn(id=f"syn-{got}{self._suffix}", text=text, system=self._spec.system, max_tokens=mt)

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
    all draw the same sequence (a data set without replacement walks one order in every process instead, each
    worker its share: :meth:`PromptSource.set_share`).

    Raises:
        harness.prompts.files.DataFileError: a data, histogram or tokenizer file is missing or malformed.
    """
    if profile.dataset is not None:
        return DatasetSource(profile, model, stream)
    if profile.synthetic is not None:
        return SyntheticSource(profile, model, stream)
    return MixSource(profile, model)


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


def check_profile_sources(profile: Profile, path: str | PathLike[str]) -> None:
    """:func:`check_sources` as a step of loading the profile at ``path`` for a run.

    Raises:
        ProfileError: one line per bad file, ``<profile>: <key>: <data file>:<line>: <problem>``.
    """
    bad = check_sources(profile)  # data, histogram and tokenizer files: indexed / read now, before any load
    if bad:
        raise ProfileError("\n".join(f"{path}: {key}: {msg}" for key, msg in bad))
