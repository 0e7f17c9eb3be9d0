"""Token-length distributions for synthetic prompts and per-request ``max_tokens``.

Every draw is an integer number of tokens, clamped to ``[min, max]`` (``min`` defaults to 1). Kinds:

- ``fixed``: always ``value``.
- ``uniform``: an integer uniformly in ``[min, max]`` (both required).
- ``normal``: ``mean`` and ``sd`` (tokens), rounded, clamped.
- ``lognormal``: ``mean`` (tokens, the distribution's mean) and ``sigma`` (the shape: the standard deviation of
  the log); the log's mean is ``ln(mean) - sigma²/2``. Rounded, clamped.
- ``histogram``: ``file``, a text file of ``<tokens> <count>`` lines (comma or whitespace separated; ``#``
  comments and blank lines skipped): a row is drawn with probability proportional to its count.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.prompts.files import DataFileError

__all__ = ["LengthSpec", "read_histogram"]

_SPLIT = re.compile(r"[,\s]+")


def read_histogram(path: str | Path) -> tuple[list[int], list[float]]:
    """The ``(tokens, counts)`` rows of a histogram file (see the module docstring).

    Raises:
        DataFileError: missing or empty file, or a line that is not ``<tokens> <count>`` with tokens an integer > 0
            and count a number >= 0 (and not all counts 0); one line naming file, line and problem.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DataFileError(f"{p}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    values: list[int] = []
    counts: list[float] = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        parts = _SPLIT.split(s)
        if len(parts) != 2:
            raise DataFileError(f"{p}:{n}: expected '<tokens> <count>', got {line.strip()!r}")
        try:
            v, c = int(parts[0]), float(parts[1])
        except ValueError:
            raise DataFileError(
                f"{p}:{n}: expected an integer token count and a number, got {line.strip()!r}"
            ) from None
        if v <= 0 or not (c >= 0) or math.isinf(c):
            raise DataFileError(f"{p}:{n}: tokens must be > 0 and count >= 0, got {line.strip()!r}")
        values.append(v)
        counts.append(c)
    if not values or sum(counts) <= 0:
        raise DataFileError(f"{p}: empty: no '<tokens> <count>' row with a count > 0")
    return values, counts


class LengthSpec(BaseModel):
    """A token-length distribution (YAML: ``{dist: lognormal, mean: 800, sigma: 0.6, max: 4096}``); see the module
    docstring. :meth:`draw` gives tokens (int >= 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dist: Literal["fixed", "uniform", "normal", "lognormal", "histogram"] = Field(
        "fixed", description="distribution: fixed, uniform, normal, lognormal or histogram"
    )
    value: int | None = Field(None, gt=0, description="fixed: tokens")
    mean: float | None = Field(None, gt=0, description="normal / lognormal: mean, tokens")
    sd: float | None = Field(None, ge=0, description="normal: standard deviation, tokens")
    sigma: float | None = Field(None, ge=0, description="lognormal: standard deviation of the log")
    file: str | None = Field(None, min_length=1, description="histogram: '<tokens> <count>' lines")
    min: int = Field(1, gt=0, description="tokens, inclusive")
    max: int | None = Field(None, gt=0, description="tokens, inclusive")

    @model_validator(mode="after")
    def _needs(self) -> LengthSpec:
        need = {
            "fixed": ("value",),
            "uniform": ("max",),
            "normal": ("mean", "sd"),
            "lognormal": ("mean", "sigma"),
            "histogram": ("file",),
        }[self.dist]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            given = "dist" in self.model_fields_set
            which = f"dist {self.dist}" if given else "no dist given, so dist fixed (the default),"
            others = sorted(k for k in self.model_fields_set if k not in need and k not in ("dist", "min", "max"))
            hint = (f"; {', '.join(others)} belong{'s' * (len(others) == 1)} to another dist: name it (e.g. dist: "
                    f"{'lognormal' if 'sigma' in others or 'mean' in others else 'histogram'})" if others and not
                    given else "")
            raise ValueError(f"{which} needs {' and '.join(missing)}{hint}")
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self

    def sampler(self, base: Path | None = None) -> LengthSampler:
        """A sampler of this distribution; ``base``: the directory a relative histogram ``file`` is read from.

        Raises:
            DataFileError: the histogram file is missing or malformed.
        """
        return LengthSampler(self, base)

    @property
    def upper(self) -> int | None:
        """The largest length a draw can give, when bounded (``max``, ``value`` or the histogram's largest row is
        known only to the sampler); None when unbounded."""
        if self.dist == "fixed":
            return min(self.value or 1, self.max) if self.max is not None else self.value
        return self.max


class LengthSampler:
    """Draws integer token lengths from a :class:`LengthSpec` (histogram file read once, on construction)."""

    def __init__(self, spec: LengthSpec, base: Path | None = None) -> None:
        self.spec = spec
        self._values: list[int] = []
        self._cum: list[float] = []
        if spec.dist == "histogram":
            assert spec.file is not None
            f = Path(spec.file)
            self._values, counts = read_histogram(f if f.is_absolute() or base is None else base / f)
            self._cum = list(itertools.accumulate(counts))
        if spec.dist == "lognormal":
            assert spec.mean is not None and spec.sigma is not None
            self._mu = math.log(spec.mean) - spec.sigma**2 / 2

    def draw(self, rng: random.Random) -> int:
        """One length in tokens (int in ``[min, max]``)."""
        s = self.spec
        if s.dist == "fixed":
            x: float = s.value or 1
        elif s.dist == "uniform":
            x = rng.randint(s.min, s.max or s.min)
        elif s.dist == "normal":
            x = rng.gauss(s.mean or 0.0, s.sd or 0.0)
        elif s.dist == "lognormal":
            x = rng.lognormvariate(self._mu, s.sigma or 0.0)
        else:
            x = self._values[bisect.bisect_right(self._cum, rng.random() * self._cum[-1])]
        n = round(x)
        if s.max is not None:
            n = min(n, s.max)
        return max(n, s.min)
