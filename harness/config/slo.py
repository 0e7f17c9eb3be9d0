"""The ``slo:`` section: latency SLOs for goodput, in the one SLO spelling ``<metric>_p<q>_s`` (the older
``ttft_s`` + ``target_share`` still read)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, ClassVar

from pydantic import Field, model_validator

from harness.config.base import _Model
from harness.vocab import SLO_KEY, SLO_METRICS

__all__ = ["DEFAULT_SLO_TARGET_SHARE", "SloSpec", "slo_deprecations"]


def _pct(share: Decimal) -> str:
    """A share as the percentile of an SLO key: ``Decimal("0.95")`` -> ``"95"``, ``0.999`` -> ``"99.9"``."""
    q = (share * 100).normalize()
    return f"{q:f}"


def slo_deprecations(raw: Any) -> list[tuple[str, str]]:
    """The older-spelling keys of a profile's raw ``slo:`` mapping, each with what to write instead:
    ``[("ttft_s", "ttft_p95_s: 2"), ("target_share", "the percentile in each key, p95")]``; ``[]`` when none (or
    when the section is not a mapping: validation reports that)."""
    if not isinstance(raw, dict) or any(isinstance(k, str) and SLO_KEY.match(k) for k in raw):
        return []
    share = raw.get("target_share", DEFAULT_SLO_TARGET_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        return []  # validation reports it
    q = _pct(Decimal(repr(float(share))))
    out = [(k, f"{k.removesuffix('_s')}_p{q}_s: {raw[k]}") for k in _SLO_FIELDS if k in raw]
    if "target_share" in raw:
        out.append(("target_share", f"the percentile in each key's name, p{q}"))
    return out


#: Default ``slo.target_share``: the share of a step's requests that must meet every SLO for the step to count
#: towards ``slo_capacity`` (a share is a percentile: 0.95 meeting a TTFT SLO = TTFT p95 within it).
DEFAULT_SLO_TARGET_SHARE = 0.95


#: The thresholds of :class:`SloSpec` (attribute names, seconds), in display order.
_SLO_FIELDS = tuple(f"{m}_s" for m in SLO_METRICS)


class SloSpec(_Model):
    """Latency service-level objectives for the report's goodput (:mod:`harness.report.goodput`).

    Written, as everywhere in a profile, ``<metric>_p<q>_s: seconds`` (:data:`harness.vocab.SLO_KEY`), e.g.
    ``slo: {ttft_p95_s: 2, e2e_p95_s: 60}``; every key of this section names the same percentile ``q``, the share
    of a step's requests that must meet all the thresholds together for the step's concurrency to count as within
    the SLOs (for one metric, "TTFT p95 ≤ 2 s"). The older spelling, ``ttft_s: 2`` ... with ``target_share: 0.95``,
    is still read (:func:`load_profile` logs a deprecation warning naming the new keys); it is also the model's
    serialised form (``run.json``, the report's ``slo``).

    Attributes: ``ttft_s`` (TTFT), ``ttfat_s`` (TTFAT), ``tpot_s`` (TPOT, seconds per token), ``e2e_s`` (E2E), each
    optional (at least one), seconds, > 0; ``target_share`` (0 < share ≤ 1) = q / 100. A request meets the SLOs when
    every given threshold holds and its measurement exists.

    Raises (at validation): keys of both spellings, percentiles that differ, a percentile outside (0, 100], a
    threshold that is not a number of seconds > 0.
    """

    #: The keys a profile writes (documented in the profile-keys reference instead of the fields below, which are
    #: the section's read and serialised form): (key, type, default, description).
    WRITTEN_KEYS: ClassVar[tuple[tuple[str, str, str, str], ...]] = (
        ("<ttft|ttfat|tpot|e2e>_p<q>_s", "float", "-",
         "latency SLO, seconds (TPOT: seconds per token), > 0, at least one; every key names the same q (0 < q ≤ 100): "
         "the percent of a step's requests that must meet all of them together for its concurrency to count within "
         "the SLOs (ttft_p95_s: 2 = 95 % of requests within 2 s). The older spelling ttft_s / ttfat_s / tpot_s / "
         "e2e_s + target_share (0.95) is still read, with a deprecation warning, and is how run.json and report.json "
         "store the section"),
    )

    ttft_s: float | None = Field(None, gt=0, description="TTFT at most this many seconds")
    ttfat_s: float | None = Field(None, gt=0, description="TTFAT at most this many seconds")
    tpot_s: float | None = Field(None, gt=0, description="TPOT at most this many seconds per token")
    e2e_s: float | None = Field(None, gt=0, description="E2E at most this many seconds")
    target_share: float = Field(
        DEFAULT_SLO_TARGET_SHARE, gt=0, le=1,
        description="share of a step's requests that must meet every SLO for the step to count",
    )

    @model_validator(mode="before")
    @classmethod
    def _percentile_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        new = {k: v for k, v in data.items() if isinstance(k, str) and SLO_KEY.match(k)}
        if not new:
            return data  # the older spelling (or the serialised form)
        old = [k for k in data if k in (*_SLO_FIELDS, "target_share")]
        if old:
            raise ValueError(f"write every SLO as <metric>_p<q>_s; {', '.join(old)} is the older spelling: "
                             f"give {', '.join(new)} alone")
        out = {k: v for k, v in data.items() if k not in new}  # anything else: refused as an unknown key
        shares: dict[str, Decimal] = {}
        for key, seconds in new.items():
            m = SLO_KEY.match(key)
            assert m is not None
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
                    math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"{key}: the threshold must be a number of seconds > 0, got {seconds!r}")
            q = Decimal(m.group(2))
            if not 0 < q <= 100:
                raise ValueError(f"{key}: the percentile must be above 0 and at most 100")
            if f"{m.group(1)}_s" in out:
                raise ValueError(f"{key}: a second SLO of {m.group(1)}")
            out[f"{m.group(1)}_s"] = seconds
            shares[key] = q / 100
        if len(set(shares.values())) > 1:
            given = ", ".join(f"{k} (p{_pct(s)})" for k, s in shares.items())
            raise ValueError(f"every SLO of this section names the same percentile, the share of a step's requests "
                             f"that must meet all of them together; got {given}")
        out["target_share"] = float(next(iter(shares.values())))
        return out

    @model_validator(mode="after")
    def _some_threshold(self) -> SloSpec:
        if not self.thresholds():
            raise ValueError("give at least one SLO: <ttft|ttfat|tpot|e2e>_p<q>_s, seconds (e.g. ttft_p95_s: 2)")
        return self

    def keys(self) -> dict[str, float]:
        """The SLOs in the profile's spelling, ``{"ttft_p95_s": seconds, ...}`` (order ttft, ttfat, tpot, e2e)."""
        q = _pct(Decimal(repr(self.target_share)))
        return {f"{k.removesuffix('_s')}_p{q}_s": v for k, v in self.thresholds().items()}

    def thresholds(self) -> dict[str, float]:
        """The given thresholds, ``{"ttft_s": seconds, ...}`` in the order ttft, ttfat, tpot, e2e."""
        out = {"ttft_s": self.ttft_s, "ttfat_s": self.ttfat_s, "tpot_s": self.tpot_s, "e2e_s": self.e2e_s}
        return {k: float(v) for k, v in out.items() if v is not None}
