"""Loader for the public stream cases copied into ``tests/data`` (byte streams and reference values).

``stream-fixtures.json.gz``: a list of cases, each ``{case, name, http_status, headers, request, note,
close_after_last_write, writes: [{t, text|b64}]}`` where ``t`` is seconds after the request was read.
``stream-expected.json``: the reference values per ``"Cnn/name"``.
"""

from __future__ import annotations

import base64
import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"


@cache
def fixtures() -> dict[str, dict[str, Any]]:
    """All cases by ``"Cnn/name"``; each write gets ``bytes`` (the exact bytes) next to ``t``."""
    with gzip.open(DATA / "stream-fixtures.json.gz", "rt", encoding="utf-8") as f:
        cases = json.load(f)
    out = {}
    for c in cases:
        for w in c["writes"]:
            w["bytes"] = base64.b64decode(w["b64"]) if "b64" in w else w["text"].encode("utf-8")
        out[f"{c['case']}/{c['name']}"] = c
    return out


@cache
def expected() -> dict[str, dict[str, Any]]:
    """Reference values by ``"Cnn/name"`` (times in s, gaps in ms)."""
    d = json.loads((DATA / "stream-expected.json").read_text())
    d.pop("_source", None)
    return d
