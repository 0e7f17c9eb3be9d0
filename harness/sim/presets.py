"""Simulator presets: the performance model and output-length model of one simulated server.

Units used throughout this module:

* every ``*_base`` / ``*_per_*`` / ``decode_sat`` field is **seconds of simulated time**
  (multiplied by the server's ``--time-scale`` before use);
* every ``*_mean`` / ``*_min`` / ``*_max`` length field is **tokens**;
* ``max_num_seqs`` and ``decode_sat_n`` are **sequences**.

Engine step time (seconds, before time scale) for a batch of ``n`` decoding sequences::

    step(n) = decode_base + decode_per_seq * n + decode_sat * (1 - exp(-(n - 1) / decode_sat_n))

``decode_sat`` is 0 for ``demo`` and ``bench`` (pure linear batching model); ``k26`` uses it to model
a MoE server whose step cost jumps between batch 1 and batch ~4 (more experts activated) and then
grows slowly.  A request's prefill takes ``prefill_base + prefill_per_token * prompt_tokens``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any


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

    def step_seconds(self, n: int) -> float:
        """Engine step duration in simulated seconds (before time scale) for ``n`` decoding sequences."""
        if n <= 0:
            return 0.0
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
        return dataclasses.asdict(self)


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

#: First cut of Kimi K2.6 on 8x RTX PRO 6000 (TP8): 26.5 tok/s at C=1, ~17-18 tok/s per stream at C=8..32.
K26 = Preset(
    name="k26",
    decode_base=0.0376,
    decode_per_seq=0.0001,
    decode_sat=0.0178,
    decode_sat_n=2.0,
    prefill_base=0.15,
    prefill_per_token=0.00008,
    reasoning_mean=2300.0,
    reasoning_sigma=0.6,
    reasoning_min=64,
    reasoning_max=30000,
    answer_mean=650.0,
    answer_sigma=0.6,
    answer_min=16,
    answer_max=8000,
    long_factor=4.0,
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


def get_preset(name: str) -> Preset:
    """Look up a preset by name; raises ``KeyError`` listing the known names."""
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {sorted(PRESETS)}") from None
