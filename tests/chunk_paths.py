"""The two per-read stream paths (:mod:`harness.chunkpath`) for tests that run every case through both.

``chunk_path("native")`` skips when the compiled extension was not built, or fails when ``LLMLOAD_REQUIRE_NATIVE=1``
(CI: ``.ci/run`` installs a C compiler, so both paths are always tested there).
"""

from __future__ import annotations

import os
from typing import TypeVar

import pytest

from harness.chunkpath import PATHS, ChunkPath

T = TypeVar("T")

#: The path names tests parametrize over.
PATH_NAMES = ("python", "native")


def chunk_path(name: str) -> ChunkPath:
    """The path called ``name``; skips (or fails under ``LLMLOAD_REQUIRE_NATIVE=1``) when it is not built."""
    if name not in PATHS:
        msg = f"the {name} stream path is not built (harness/_fastchunk.pyx: pip install -e . with a C compiler)"
        if os.environ.get("LLMLOAD_REQUIRE_NATIVE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return PATHS[name]


def compiled(value: T | None, what: str) -> T:
    """``value``, a compiled function of the report's module as its caller loaded it
    (:func:`harness.chunkpath.native_records`); when it is None, skips ("``what`` is not built or is forced off"),
    or fails under ``LLMLOAD_REQUIRE_NATIVE=1`` unless ``LLMLOAD_PURE_PYTHON`` turned it off on purpose."""
    if value is None:
        msg = f"{what} is not built or is forced off"
        if os.environ.get("LLMLOAD_REQUIRE_NATIVE") == "1" and os.environ.get("LLMLOAD_PURE_PYTHON") is None:
            pytest.fail(msg)
        pytest.skip(msg)
    return value
