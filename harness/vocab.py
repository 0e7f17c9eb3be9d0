"""Names the profile is validated against, owned by the features that use them but declared here so that the
settings (:mod:`harness.config`) stay a leaf of the package: this module imports nothing, and each feature takes its
names from here (and checks at import that what it implements matches them).

* prompt class names the harness reserves for itself (:mod:`harness.result`, :mod:`harness.exporter`);
* the built-in simulator's presets and wire flavours (:mod:`harness.sim.presets`, :mod:`harness.sim.protocol`);
* the SLO key grammar ``<metric>_p<q>_s`` (:mod:`harness.search`, :class:`harness.config.SloSpec`).
"""

from __future__ import annotations

import re

__all__ = [
    "FLAVOURS",
    "FLAVOUR_ALIASES",
    "RESERVED_PROMPT_LABELS",
    "SEARCH_SLO_KEY",
    "SIM_PRESETS",
    "SLO_KEY",
    "SLO_METRICS",
]

#: Prompt class names the harness gives itself, so a profile may not use them: ``other`` (the ``prompt`` metric
#: label of classes beyond the label limit) and ``warmup`` (the shape's warm-up request).
RESERVED_PROMPT_LABELS = ("other", "warmup")

#: Names of the built-in simulator's presets (:data:`harness.sim.presets.PRESETS` holds exactly these).
SIM_PRESETS = ("demo", "k26", "bench")

#: Wire flavours of the built-in simulator (:mod:`harness.sim.protocol`).
FLAVOURS = ("vllm", "vllm-old", "sglang", "openai", "llamacpp")
#: Other spellings accepted for ``--flavour``.
FLAVOUR_ALIASES = {"llama.cpp": "llamacpp", "llama-cpp": "llamacpp", "vllm-reasoning-content": "vllm-old"}

#: The latency metrics an SLO can bound (seconds; TPOT in seconds per token), in display order.
SLO_METRICS = ("ttft", "ttfat", "tpot", "e2e")

#: The one SLO spelling: ``<metric>_p<q>_s`` -> seconds, "the q-th percentile of the metric is at most this many
#: seconds", e.g. ``ttft_p99_s: 2``. ``q`` is a percentile, 0 < q <= 100 (group 2).
SLO_KEY = re.compile(r"^(ttft|ttfat|tpot|e2e)_p(\d{1,3}(?:\.\d+)?)_s$")

#: The percentiles a capacity search can test (:mod:`harness.search`; its pass rule needs an order-statistic
#: interval, so the percentiles are a fixed list).
SEARCH_SLO_KEY = re.compile(r"^(ttft|ttfat|tpot|e2e)_p(50|75|90|95|99|99\.9)_s$")
