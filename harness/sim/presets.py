"""Simulator presets: the performance model and output-length model of one simulated server.

Units used throughout this module:

* every ``*_base`` / ``*_per_*`` / ``decode_sat`` field is **seconds of simulated time**
  (multiplied by the server's ``--time-scale`` before use);
* every ``*_mean`` / ``*_min`` / ``*_max`` length field is **tokens**;
* ``max_num_seqs`` and ``decode_sat_n`` are **sequences**.

Engine step time (seconds, before time scale) for a batch of ``n`` decoding sequences::

    step(n) = decode_base + decode_per_seq * n + decode_sat * (1 - exp(-(n - 1) / decode_sat_n))

unless the preset has a ``step_table``: then ``step(n)`` is interpolated linearly between its
``(batch size, step seconds)`` points (and extrapolated linearly beyond the last two).  ``decode_sat`` is 0
for ``demo`` and ``bench`` (pure linear batching model).  ``k26`` uses a table calibrated to the seed
benchmark's figures (see :data:`K26`).  A request's prefill takes
``prefill_base + prefill_per_token * prompt_tokens``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass
from typing import Any

from harness.vocab import SIM_PRESETS


@dataclass(frozen=True)
class Preset:
    """Performance and length model of one simulated server (see module docstring for units)."""

    name: str
    #: Fixed cost of one engine step, seconds.
    decode_base: float
    #: Extra cost of one engine step per decoding sequence, seconds/sequence.
    decode_per_seq: float
    #: Prefill fixed cost, seconds.
    prefill_base: float
    #: Prefill cost per prompt token, seconds/token.
    prefill_per_token: float
    #: Mean reasoning length for ordinary prompts, tokens.
    reasoning_mean: float
    #: Log-space standard deviation of the reasoning length (dimensionless).
    reasoning_sigma: float
    reasoning_min: int
    reasoning_max: int
    #: Mean answer length for ordinary prompts, tokens.
    answer_mean: float
    answer_sigma: float
    answer_min: int
    answer_max: int
    #: Multiplier of both means for "long" prompts (containing "guide" / "comprehensive").
    long_factor: float = 6.0
    #: Context length, tokens: prompt + max_tokens must fit; default max_tokens fills it.
    max_model_len: int = 32768
    #: Maximum concurrently running sequences (others wait in the queue).
    max_num_seqs: int = 256
    #: Saturating extra step cost, seconds (0 disables).
    decode_sat: float = 0.0
    #: E-folding batch size of the saturating term, sequences.
    decode_sat_n: float = 1.0
    #: Fixed lengths (tokens) overriding the random draw for every prompt class (bench only).
    fixed_reasoning: int | None = None
    fixed_answer: int | None = None
    #: ``((batch size, step seconds), ...)`` sorted by batch size: when set, it replaces the parametric
    #: step model (linear interpolation between points, linear extrapolation beyond the last two).
    step_table: tuple[tuple[int, float], ...] | None = None

    def step_seconds(self, n: int) -> float:
        """Engine step duration in simulated seconds (before time scale) for ``n`` decoding sequences."""
        if n <= 0:
            return 0.0
        if self.step_table:
            return _interpolate(self.step_table, n)
        t = self.decode_base + self.decode_per_seq * n
        if self.decode_sat > 0.0 and n > 1:
            t += self.decode_sat * (1.0 - math.exp(-(n - 1) / max(self.decode_sat_n, 1e-9)))
        return t

    def prefill_seconds(self, prompt_tokens: int) -> float:
        """Prefill duration in simulated seconds (before time scale) for ``prompt_tokens`` tokens."""
        return self.prefill_base + self.prefill_per_token * prompt_tokens

    def per_stream_rate(self, n: int) -> float:
        """Model decode rate of one stream at batch size ``n``, tokens/second (time scale 1)."""
        step = self.step_seconds(n)
        return math.inf if step <= 0 else 1.0 / step

    def aggregate_rate(self, n: int) -> float:
        """Model aggregate decode rate at batch size ``n``, tokens/second (time scale 1)."""
        return n * self.per_stream_rate(n)

    def with_overrides(self, **overrides: Any) -> Preset:
        """Return a copy with the given fields replaced (``None`` values are ignored)."""
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(f"unknown preset field(s): {sorted(unknown)}")
        return dataclasses.replace(self, **clean)

    def describe(self) -> dict[str, Any]:
        """All fields as a JSON-able dict (used in the ``/v1/models`` ``sim`` object)."""
        d = dataclasses.asdict(self)
        if self.step_table is not None:
            d["step_table"] = [list(p) for p in self.step_table]
        return d


def _interpolate(table: tuple[tuple[int, float], ...], n: int) -> float:
    """Step seconds at batch size ``n`` from ``table`` (piecewise linear; clamped at the first point,
    extrapolated linearly from the last two points, never below the last point's value)."""
    if n <= table[0][0] or len(table) == 1:
        return table[0][1]
    for (n0, t0), (n1, t1) in itertools.pairwise(table):
        if n <= n1:
            return t0 + (t1 - t0) * (n - n0) / (n1 - n0)
    (n0, t0), (n1, t1) = table[-2], table[-1]
    return max(t1, t1 + (t1 - t0) * (n - n1) / (n1 - n0))


#: Fast interactive default: ~93 tok/s single stream, ~33 tok/s per stream (~2.1k tok/s aggregate) at 64.
DEMO = Preset(
    name="demo",
    decode_base=0.0105,
    decode_per_seq=0.0003,
    prefill_base=0.02,
    prefill_per_token=0.00005,
    reasoning_mean=250.0,
    reasoning_sigma=0.3,
    reasoning_min=150,
    reasoning_max=400,
    answer_mean=75.0,
    answer_sigma=0.35,
    answer_min=40,
    answer_max=120,
    long_factor=6.0,
    max_model_len=32768,
    max_num_seqs=256,
)

#: Seed benchmark figures for Kimi K2.6 on 8x RTX PRO 6000 (TP8, SGLang): aggregate output tok/s by concurrency.
K26_SEED_TPS: dict[int, float] = {1: 26.5, 8: 136.6, 16: 311.3, 32: 577.8}
#: Seed mean output tokens per request at C=32 (reasoning + answer).
K26_SEED_MEAN_OUTPUT = 2965
#: Seed hours for 100K samples at C=32 (100 000 x 2 965 tokens / 577.8 tok/s / 3600).
K26_SEED_HOURS_100K = 142.5


def _k26_table() -> tuple[tuple[int, float], ...]:
    """Step seconds per batch size reproducing :data:`K26_SEED_TPS`: ``step(C) = C / tps(C)``.

    The seed's per-stream figures are not monotonic (17.1, 19.5, 18.1 tok/s at C = 8, 16, 32: its
    concurrency figures were bursts), so no parametric batching curve goes through all four points; a
    table interpolated between them does.  Beyond C=32 the C=16..32 slope is extrapolated
    (C=64: ~63 ms per step, ~1010 tok/s aggregate).
    """
    return tuple((c, c / tps) for c, tps in sorted(K26_SEED_TPS.items()))


#: Kimi K2.6 after the seed benchmark: 26.5 tok/s single stream; 136.6 / 311.3 / 577.8 tok/s aggregate at
#: C = 8 / 16 / 32 (step table); output lengths around the seed's C=32 mean of 2,965 tokens per request
#: (reasoning 2,300 + answer 665, narrow spread, every non-short prompt alike) so that hours-to-N match.
K26 = Preset(
    name="k26",
    decode_base=0.0,
    decode_per_seq=0.0,
    step_table=_k26_table(),
    prefill_base=0.15,
    prefill_per_token=0.00008,
    reasoning_mean=2300.0,
    reasoning_sigma=0.1,
    reasoning_min=64,
    reasoning_max=30000,
    answer_mean=665.0,
    answer_sigma=0.1,
    answer_min=16,
    answer_max=8000,
    long_factor=1.0,
    max_model_len=262144,
    max_num_seqs=256,
)

#: Capacity benchmark: zero decode/prefill time, fixed 200 reasoning + 200 answer tokens.
BENCH = Preset(
    name="bench",
    decode_base=0.0,
    decode_per_seq=0.0,
    prefill_base=0.0,
    prefill_per_token=0.0,
    reasoning_mean=200.0,
    reasoning_sigma=0.0,
    reasoning_min=200,
    reasoning_max=200,
    answer_mean=200.0,
    answer_sigma=0.0,
    answer_min=200,
    answer_max=200,
    long_factor=1.0,
    max_model_len=1_000_000,
    max_num_seqs=100_000,
    fixed_reasoning=200,
    fixed_answer=200,
)

PRESETS: dict[str, Preset] = {p.name: p for p in (DEMO, K26, BENCH)}
if tuple(PRESETS) != SIM_PRESETS:  # the profile validates preset names against the vocabulary
    raise RuntimeError(f"harness.vocab.SIM_PRESETS {SIM_PRESETS} != the presets defined here {tuple(PRESETS)}")


def get_preset(name: str) -> Preset:
    """Look up a preset by name; raises ``KeyError`` listing the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {sorted(PRESETS)}") from None
