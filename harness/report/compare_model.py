"""``compare.json`` as typed models: :class:`CompareReport` is what :func:`harness.report.compare.build_comparison`
returns, what :mod:`harness.report.compare_render` reads (attributes, not string keys) and, serialised by
:meth:`CompareReport.to_json`, the file written.

Units: values keep the report's units (seconds, tokens per second, hours, US$; :class:`Estimate`); ratios are
unitless; ``*_wall`` epoch seconds. Every field is set when a comparison is built, so :meth:`CompareReport.as_dict`
holds every key, in the order declared here (the layout of schema ``llmload-compare/1``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from harness.report.model import Num, ReportModel, StepRow

__all__ = [
    "CompareMetric",
    "CompareReport",
    "CompareRun",
    "CompareStep",
    "Estimate",
    "MetricCells",
    "Ratio",
    "Unmatched",
    "compare_report",
    "run_tags",
    "step_keys",
]


class CompareRun(ReportModel):
    """One compared run (``runs[i]``): its tag (A, B, ...), identity, where its figures came from (``source``:
    "report.json" or "built") and its record count (None: records unreadable)."""

    tag: str
    run_id: str
    run_dir: str
    source: str
    profile_name: str | None = None
    model: str | None = None
    target_url: str | None = None
    status: str | None = None
    interrupted: bool = False
    start_wall: Num | None = None
    duration_s: Num | None = None
    time_scale: Num = 1.0
    hours_to_n: list[int] = Field(default_factory=list)
    records: int | None = None


class CompareMetric(ReportModel):
    """One compared figure (``metrics[i]``, built by :mod:`harness.report.compare`): ``key`` (``output_tps``,
    ``hours@100000``...), its label and display unit (the catalogue's), which way is better ("higher" /
    "lower"), its interval method (a definitions key, or None) and the N of hours / US$ to N (else None)."""

    key: str
    label: str
    unit: str
    better: str
    method: str | None = None
    n: int | None = None


class Estimate(ReportModel):
    """A figure of one run at one step: its value in the report's unit and 95 % bounds (None: unbounded on that
    side; method None: no interval)."""

    value: Num
    low: Num | None = None
    high: Num | None = None
    method: str | None = None


class Ratio(ReportModel):
    """Ratio X/A of one figure (X = ``vs``), its 95 % interval (None: unbounded side), whether the two runs'
    intervals overlap (None: no interval) and the verdict ("better", "worse", "within noise", "no interval",
    "n/a")."""

    vs: str
    ratio: Num | None = None
    low: Num | None = None
    high: Num | None = None
    within_noise: bool | None = None
    verdict: str = "n/a"


class MetricCells(ReportModel):
    """One figure at one step: an estimate per run (None: not available) and a ratio per run after the first."""

    values: list[Estimate | None] = Field(default_factory=list)
    ratios: list[Ratio] = Field(default_factory=list)


class CompareStep(ReportModel):
    """One step of the baseline present in another run: its matching key (``single``, ``C=8``, ``C=8#2``),
    label, concurrency, presence and :class:`harness.report.catalogue.Flag` names per run, and its figures by
    metric key."""

    key: str
    label: str
    concurrency: int | None = None
    present: list[bool] = Field(default_factory=list)
    flags: list[list[str]] = Field(default_factory=list)
    metrics: dict[str, MetricCells] = Field(default_factory=dict)
    #: Tags of the runs whose hours-to-N interval does not overlap the baseline's here (they disagree beyond
    #: their intervals).
    disagree: list[str] = Field(default_factory=list)


class Unmatched(ReportModel):
    """A step missing from some run: the tags of the runs that have it and of those that do not."""

    key: str
    present_in: list[str] = Field(default_factory=list)
    missing_in: list[str] = Field(default_factory=list)


class CompareReport(ReportModel):
    """A comparison of runs (``compare.json``, schema ``llmload-compare/1``): the baseline's tag, the runs, the
    compared figures, the matched steps, the unmatched ones, the definitions (by name) and the notes."""

    schema_: str = Field("llmload-compare/1", alias="schema")
    generated_wall: Num = 0.0
    baseline: str = "A"
    runs: list[CompareRun] = Field(default_factory=list)
    metrics: list[CompareMetric] = Field(default_factory=list)
    steps: list[CompareStep] = Field(default_factory=list)
    unmatched: list[Unmatched] = Field(default_factory=list)
    definitions: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (keys as in ``compare.json``)."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)

    def to_json(self) -> str:
        """``compare.json``'s text: :meth:`as_dict` as indented strict JSON (ASCII).

        Raises:
            ValueError: a NaN or infinite value (none is built: every figure is finite or None).
        """
        return json.dumps(self.as_dict(), indent=2, allow_nan=False) + "\n"


def compare_report(cmp: CompareReport | Mapping[str, Any]) -> CompareReport:
    """``cmp`` as a :class:`CompareReport` (a ``compare.json`` dict is validated).

    Raises:
        pydantic.ValidationError: a key of the wrong type.
    """
    return cmp if isinstance(cmp, CompareReport) else CompareReport.model_validate(dict(cmp))


def run_tags(n: int) -> list[str]:
    """Tags of ``n`` runs, compared or pooled: A, B, ..., Z, R27, R28, ..."""
    return [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(n)]


def step_keys(rows: Sequence[StepRow]) -> list[str]:
    """Matching key of each step row across runs (compare, pool): its label, with '#k' for the k-th repeat of a
    label (k >= 2)."""
    seen: Counter[str] = Counter()
    keys = []
    for r in rows:
        label = str(r.label)
        seen[label] += 1
        keys.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return keys
