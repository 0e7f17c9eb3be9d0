"""Building blocks of the report's figures over the record frame: derived column names and polars expressions.

The figure modules (:mod:`harness.report.columns` step rows, :mod:`harness.report.goodput`,
:mod:`harness.report.soak`, :mod:`harness.report.diagnosis`) are written with these, so a rule used by several
figures (what a record's end is, why it is not usable, how a percentile interpolates) is stated once.

The derived columns are added by :func:`harness.report.columns.prepare`; their names start with an underscore and
never clash with record fields. Units: wall times in epoch seconds, durations in seconds, tokens in tokens.
Percentiles interpolate linearly between closest ranks (numpy's default, :func:`harness.stats.percentile.percentile`).
"""

from __future__ import annotations

import polars as pl

from harness.failures import summarise_groups
from harness.stats.percentile import POLARS_INTERPOLATION

__all__ = [
    "END", "OK", "START", "STEP", "SUSPECT_FINISH_KEY", "USABLE", "WARMUP",
    "count_by", "counts", "ends_in", "errors_by_class", "finish_reason_key", "flag", "in_sample", "mean_tokens",
    "not_usable_reason", "pct", "pctl", "per_stream_parts", "share", "streamed_tokens",
]

START = "_start"  #: start_wall, null -> 0.0 (epoch s)
END = "_end"  #: record end: start + e2e, else start + the latest timing present (epoch s)
STEP = "_step"  #: step, null -> 0
OK = "_ok"  #: ok, null -> False
USABLE = "_usable"  #: usable, null -> False
WARMUP = "_warmup"  #: phase == "warmup" or step < 0
#: The ``by_finish_reason`` group of suspect truncations (the record flag ``suspect_truncation``: output tokens ==
#: max_tokens but finish_reason not ``length``): counted as truncated, so not in the ``stop`` group.
SUSPECT_FINISH_KEY = "suspect_truncation"


def in_sample(step: int, steady: bool, w0: float, w1: float) -> pl.Expr:
    """Whether a record is in a step's one sample (``definitions.sample``): steady step, every request (any step,
    ok or not) that ENDED inside the steady window ``(w0, w1)`` (epoch s; the request ending at ``w0`` opened the
    window); not steady, every request of ``step``. Its successful ones (``& pl.col(OK)``) are the latency
    sample. Used by the step rows, goodput and ``llmload compare``'s intervals."""
    if steady:
        return (pl.col(END) > w0) & (pl.col(END) < w1)
    return pl.col(STEP) == step


def flag(name: str) -> pl.Expr:
    """Boolean column ``name`` with null read as False."""
    return pl.col(name).fill_null(False)


def ends_in(main: pl.DataFrame, which: str, w0: float, w1: float) -> pl.Series:
    """End times (epoch s) of the records with the flag column ``which`` (:data:`USABLE` / :data:`OK`) ending
    inside ``(w0, w1)``, in record order: the events ``hours.batch_means`` counts."""
    end = pl.col(END)
    return main.select(END, which).filter(pl.col(which) & (end > w0) & (end < w1)).get_column(END)  # 2 columns copied


def streamed_tokens() -> pl.Expr:
    """Tokens a request's stream timing covers (tokens), as ``RequestResult.streamed_tokens``: answer tokens with
    hidden reasoning, else output tokens."""
    return pl.when(flag("hidden_reasoning")).then(pl.col("answer_tokens")).otherwise(pl.col("output_tokens"))


def per_stream_parts() -> tuple[pl.Expr, pl.Expr]:
    """(Σ streamed tokens, Σ (E2E − TTFT) seconds) of per-stream tok/s: over requests with TTFT, E2E >
    TTFT and streamed tokens; per-stream tok/s is their ratio (a ratio of sums)."""
    n = streamed_tokens()
    counted = pl.col("ttft").is_not_null() & pl.col("e2e").is_not_null() & (pl.col("e2e") > pl.col("ttft")) \
        & n.is_not_null() & (n != 0)
    return (n.cast(pl.Float64).filter(counted).sum().alias("_tok"),
            (pl.col("e2e") - pl.col("ttft")).filter(counted).sum().alias("_sec"))


def not_usable_reason() -> pl.Expr:
    """Why a record is not usable (String; null when usable), (``usable_reasons``): its
    ``usable_reason``, else (records written before that field) ``error`` / ``truncated`` / ``unknown``."""
    reason = pl.col("usable_reason")
    return (
        pl.when(pl.col(USABLE)).then(pl.lit(None, pl.String))
        .when(reason.is_not_null() & (reason != "")).then(reason)
        .when(~pl.col(OK)).then(pl.lit("error"))
        .when(flag("truncated")).then(pl.lit("truncated"))
        .otherwise(pl.lit("unknown"))
    )


def finish_reason_key() -> pl.Expr:
    """The ``by_finish_reason`` group of a record: :data:`SUSPECT_FINISH_KEY` for a suspect truncation (output hit
    max_tokens but the server did not say ``length``), else its finish reason, ``none`` when null or empty."""
    fr = pl.col("finish_reason")
    suspect = flag("suspect_truncation") & (fr.fill_null("") != "length")
    return (pl.when(suspect).then(pl.lit(SUSPECT_FINISH_KEY))
            .when(fr.is_null() | (fr == "")).then(pl.lit("none")).otherwise(fr))


def pctl(col: str | pl.Expr, q: float) -> pl.Expr:
    """The ``q``-th percentile (0..100) of column ``col`` (a name or an expression)'s non-null values, linear between
    closest ranks (null when none), as :func:`harness.stats.percentile.percentile`."""
    e = pl.col(col) if isinstance(col, str) else col
    return e.drop_nulls().quantile(q / 100.0, interpolation=POLARS_INTERPOLATION)


def mean_tokens(col: str, where: pl.Expr | None = None) -> pl.Expr:
    """Mean of a token count column (tokens, float; null when empty), over the rows ``where`` holds (default all),
    as ``stats.mean``."""
    tokens = pl.col(col).fill_null(0).cast(pl.Float64)
    return (tokens if where is None else tokens.filter(where)).mean()


def counts(frame: pl.DataFrame, **exprs: pl.Expr) -> dict[str, int]:
    """Each boolean expression's count of true rows in ``frame``, by keyword name."""
    row = frame.select(e.sum().alias(k) for k, e in exprs.items()).row(0, named=True)
    return {k: int(v or 0) for k, v in row.items()}


def count_by(frame: pl.DataFrame, key: pl.Expr) -> dict[str, int]:
    """``{value: rows}`` of ``key`` over ``frame``, null values left out, sorted by value."""
    counts = frame.select(key.alias("k")).drop_nulls("k").group_by("k").len()
    return dict(sorted(zip(counts.get_column("k").to_list(), counts.get_column("len").to_list(), strict=True)))


def errors_by_class(failed: pl.DataFrame) -> dict[str, int]:
    """Failed records by ``error_class`` (``unknown`` when null or empty), sorted by class."""
    cls = pl.col("error_class")
    return count_by(failed, pl.when(cls.is_null() | (cls == "")).then(pl.lit("unknown")).otherwise(cls))


#: A uuid (request ids in error bodies): collapsed with the digits before grouping (it is masked in the message).
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


def failures_by_class(failed: pl.DataFrame) -> list[dict[str, object]]:
    """Failed records per error class, most frequent first: ``{"error_class", "count", "messages": [{"message",
    "count", "hint"}]}`` with the top distinct server messages of ``error_detail`` (:func:`harness.failures.summarise`:
    normalised, ≤ 160 chars, secrets redacted). Columns it lacks are read as null. Records whose details differ only
    in digits are grouped here first (:func:`harness.failures.summarise_groups`), so each distinct detail is parsed
    once, not each record (measured: 100,000 failed records of one message in 0.3 s)."""
    cols = ("error_class", "error_detail", "http_status", "retry_after_s")
    if failed.height == 0:
        return []
    frame = failed.select([pl.col(c) if c in failed.columns else pl.lit(None).alias(c) for c in cols])
    grouped = (
        frame.with_columns(pl.col("error_detail").str.replace_all(_UUID, "<id>").str.replace_all(r"\d+", "#")
                           .alias("_raw"))
        .group_by(["error_class", "_raw"], maintain_order=True)
        .agg(pl.col("error_detail").first(), pl.col("http_status").first(),
             pl.col("retry_after_s").drop_nulls().unique(), pl.len().alias("_n"))
    )
    rows = grouped.select("error_class", "error_detail", "http_status", "retry_after_s", "_n").iter_rows()
    return [
        {"error_class": c.error_class, "count": c.count,
         "messages": [{"message": m.message, "count": m.count, "hint": m.hint} for m in c.messages]}
        for c in summarise_groups(rows)
    ]


def pct(part: int, whole: int) -> float | None:
    """``part`` as a percentage (0..100) of ``whole``; None when ``whole`` is 0."""
    return 100.0 * part / whole if whole else None


def share(part: int, whole: int) -> float | None:
    """``part`` as a share (0..1) of ``whole``; None when ``whole`` is 0."""
    return part / whole if whole else None
