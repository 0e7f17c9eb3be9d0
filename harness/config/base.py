"""What every profile model shares: strict validation, and the error a bad profile raises."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ProfileError"]


class ProfileError(ValueError):
    """A profile that cannot be used. The message names the file, the key and the problem."""


#: Every profile model: unknown keys refused, and numbers strict and finite: ``.inf`` / ``.nan`` are refused
#: (a threshold or price that cannot be compared), and so are booleans where a number is meant
#: (``max_tokens: true``) and strings where a number or boolean is meant (an int is accepted for a float).
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class _Model(BaseModel):
    model_config = _STRICT
